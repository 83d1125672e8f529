// `vite preview` of AgentFlow's built editor, its /api calls sent to the `weft serve`
// at $WEFT_API (AgentFlow's own config sends them to port 3000).
export default {
  preview: {
    strictPort: true,
    proxy: { '/api': process.env.WEFT_API },
  },
};
