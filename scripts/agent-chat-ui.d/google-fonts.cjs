// Next.js's hook for builds that cannot reach Google Fonts (NEXT_FONT_GOOGLE_MOCKED_RESPONSES):
// every stylesheet it asks for is one face of a font this machine has, so Agent Chat UI
// builds offline with a system font in place of Inter.
module.exports = new Proxy(
  {},
  {
    get: (_, url) =>
      `/* ${String(url)}: offline, a local font */\n@font-face {\n  font-family: 'Inter';\n  font-style: normal;\n  font-weight: 400;\n  src: local('DejaVu Sans');\n}\n`,
  },
);
