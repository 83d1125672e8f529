//! TEA's `llm.embed` (and its other names, `llm.local.embed` and `memory.embed`): the
//! vector of a text, from an `embed` block, with TEA's result
//! `{embedding, model, dimensions, tokens_used}`. The model is routed like a model
//! action's (`model`, `provider`, `api_base`; `settings.llm.embedding_model` is its
//! default); `provider` without `model` means TEA's default, `nomic-embed-text`.

use super::{Compiler, transform};
use serde_json::{Value, json};
use weft_core::ir::{Block, BlockKind, EmbedSpec, ValueTemplate};

/// TEA's names of the action.
pub(super) const EMBED: &[&str] = &["llm.embed", "llm.local.embed", "memory.embed"];

/// The options Weft reads.
const OPTIONS: &[&str] = &["text", "model", "provider", "api_base", "timeout"];

/// Options of TEA's local runtime, read and not used, with why.
const TEA_ONLY: &[(&str, &str)] = &[
    (
        "backend",
        "TEA picks a model runtime by it; Weft routes by the model id (`local/...` runs offline)",
    ),
    (
        "model_path",
        "Weft finds local models by name (`local/NAME`, in WEFT_MODELS)",
    ),
    ("n_ctx", "Weft sizes the local model's context to the text"),
    ("n_threads", "Weft's local model uses the machine's cores"),
    ("n_gpu_layers", "Weft's local model runs on the CPU"),
];

/// TEA's model for an embedding `provider` given without one.
const DEFAULT_MODEL: &str = "nomic-embed-text";

impl Compiler<'_> {
    /// The block of `uses: llm.embed` with `with`, at node pointer `ptr`.
    pub(super) fn llm_embed(
        &mut self,
        uses: &str,
        with: Option<&Value>,
        ptr: &str,
        node: &str,
    ) -> Option<Block> {
        let wptr = format!("{ptr}/with");
        let with = self.with_mapping(
            uses,
            with,
            &wptr,
            "its `text`",
            "with: {text: \"{{ state.query }}\", model: nomic-embed-text, provider: ollama}",
        )?;
        self.read_options(uses, with, &wptr, (OPTIONS, TEA_ONLY), |_| None);
        let text = self.required_text(
            uses,
            with,
            (
                "text",
                "a string (a template)",
                Some("text: \"{{ state.query }}\""),
            ),
            &wptr,
        )?;
        let mut routed = with.clone();
        if routed.contains_key("provider") && !routed.contains_key("model") {
            routed.insert("model".into(), Value::from(DEFAULT_MODEL));
        }
        let model = self.model_of(&routed, &wptr, node);
        let named = routed
            .get("model")
            .and_then(Value::as_str)
            .and_then(|m| self.constant(m));
        let mut embed = Block::new(BlockKind::Embed(EmbedSpec {
            model,
            input: ValueTemplate(Value::from(text)),
            dimensions: None,
        }));
        embed.policy.timeout_ms = self.timeout_seconds(with.get("timeout"), &wptr);
        let result = transform(json!({
            "embedding": "{{ input.embedding }}",
            "model": named.map_or_else(|| Value::from("{{ input.model }}"), Value::from),
            "dimensions": "{{ input.dimensions }}",
            "tokens_used": "{{ input.usage.prompt_tokens }}",
        }));
        Some(Block::new(BlockKind::Sequence(vec![embed, result])))
    }
}
