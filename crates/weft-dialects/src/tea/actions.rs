//! `uses:` actions. Model actions become `llm` blocks (so they stream, retry, count usage
//! and journal like any model call); the others are Weft's built-in actions by name.

use super::Compiler;
use serde_json::Value;
use weft_core::Diagnostic;
use weft_core::ir::{
    ActionSpec, Block, BlockKind, LlmOutput, LlmSpec, MessageSpec, ModelDef, Template,
    ValueTemplate,
};

/// Actions Weft runs itself, by their names in tea files.
const BUILTIN: &[&str] = &[
    "http.get",
    "http.post",
    "json.parse",
    "file.read",
    "file.write",
    "file.append",
    "time.sleep",
];
/// Actions that call a model.
const MODEL: &[&str] = &["llm.call", "llm.stream"];

/// Options `llm.call` reads from `with:`.
const LLM_OPTIONS: &[&str] = &[
    "model",
    "messages",
    "temperature",
    "max_tokens",
    "provider",
    "api_base",
];

impl Compiler<'_> {
    /// The block for `uses: NAME` with `with:`, at `ptr` (the node's pointer).
    pub(super) fn action(
        &mut self,
        uses: &str,
        with: Option<&Value>,
        ptr: &str,
        node: &str,
    ) -> Option<Block> {
        if MODEL.contains(&uses) {
            return self.llm_call(with, ptr, node);
        }
        if BUILTIN.contains(&uses) {
            return Some(Block::new(BlockKind::Action(ActionSpec {
                uses: uses.to_owned(),
                params: with.cloned().map(ValueTemplate),
            })));
        }
        let known = || BUILTIN.iter().chain(MODEL).copied();
        let d = Diagnostic::error(format!("{ptr}/uses"), format!("unknown action `{uses}`"))
            .hint_closest(
                uses,
                known(),
                format!(
                    "Weft runs these actions: {}",
                    known().collect::<Vec<_>>().join(", ")
                ),
            );
        self.error(d);
        None
    }

    /// `llm.call` / `llm.stream`: `{content, usage}` from a model.
    fn llm_call(&mut self, with: Option<&Value>, ptr: &str, node: &str) -> Option<Block> {
        let wptr = format!("{ptr}/with");
        let Some(with) = with.and_then(Value::as_object) else {
            self.error(
                Diagnostic::error(
                    &wptr,
                    "llm.call needs `with:` and its `model` and `messages`",
                )
                .hint("with: {model: gpt-4o-mini, messages: [{role: user, content: \"...\"}]}"),
            );
            return None;
        };
        for key in with.keys() {
            if !LLM_OPTIONS.contains(&key.as_str()) {
                let d = Diagnostic::error(
                    weft_core::validate::child_pointer(&wptr, key),
                    format!("llm.call has no option `{key}`"),
                );
                self.error(d.hint_closest(
                    key,
                    LLM_OPTIONS.iter().copied(),
                    format!("its options: {}", LLM_OPTIONS.join(", ")),
                ));
            }
        }
        let mut spec = LlmSpec {
            output: LlmOutput::Message,
            ..LlmSpec::default()
        };
        spec.model = self.model_of(with, &wptr, node);
        match with.get("messages").and_then(Value::as_array) {
            Some(messages) if !messages.is_empty() => {
                for (i, m) in messages.iter().enumerate() {
                    let mptr = format!("{wptr}/messages/{i}");
                    let role = m.get("role").and_then(Value::as_str);
                    let content = m.get("content").and_then(Value::as_str);
                    match (role, content) {
                        (Some(r @ ("system" | "user" | "assistant")), Some(c)) => {
                            spec.messages.push(MessageSpec {
                                role: r.to_owned(),
                                content: Template(c.to_owned()),
                            })
                        }
                        _ => self.error(
                            Diagnostic::error(
                                mptr,
                                "a message is {role: system|user|assistant, content: TEXT}",
                            )
                            .hint("content is a template, e.g. \"Summarize {{ state.text }}\""),
                        ),
                    }
                }
            }
            _ => self.error(
                Diagnostic::error(&wptr, "llm.call needs `messages`, a non-empty list")
                    .hint("messages: [{role: user, content: \"...\"}]"),
            ),
        }
        if let Some(t) = with.get("temperature") {
            match t.as_f64() {
                Some(t) => spec.temperature = Some(t),
                None => self.error(Diagnostic::error(
                    format!("{wptr}/temperature"),
                    "temperature is a number",
                )),
            }
        }
        if let Some(t) = with.get("max_tokens") {
            match t.as_u64().and_then(|n| u32::try_from(n).ok()) {
                Some(n) => spec.max_tokens = Some(n),
                None => self.error(Diagnostic::error(
                    format!("{wptr}/max_tokens"),
                    "max_tokens is a whole number",
                )),
            }
        }
        Some(Block::new(BlockKind::Llm(spec)))
    }

    /// The model id for `with:`: `model` (a constant, or `{{ variables.NAME }}`), routed
    /// by `provider` and `api_base` through a flow model alias when they are given.
    fn model_of(
        &mut self,
        with: &serde_json::Map<String, Value>,
        wptr: &str,
        node: &str,
    ) -> Option<String> {
        let model = match with.get("model") {
            None => None,
            Some(Value::String(m)) => match self.constant(m) {
                Some(m) => Some(m),
                None => {
                    self.error(
                        Diagnostic::error(
                            format!("{wptr}/model"),
                            format!("the model `{m}` is a template Weft cannot resolve when the flow loads"),
                        )
                        .hint("name the model, or use `{{ variables.NAME }}` with NAME in `variables:`"),
                    );
                    return None;
                }
            },
            Some(_) => {
                self.error(Diagnostic::error(
                    format!("{wptr}/model"),
                    "model is a string",
                ));
                return None;
            }
        };
        let provider = with.get("provider").and_then(Value::as_str);
        let api_base = with.get("api_base").and_then(Value::as_str);
        if provider.is_none() && api_base.is_none() {
            return model;
        }
        let provider = provider.unwrap_or("openai").to_owned();
        let mut def = ModelDef {
            provider,
            model: model.map(|m| m.split_once('/').map_or(m.clone(), |(_, n)| n.to_owned())),
            options: Default::default(),
        };
        if let Some(base) = api_base {
            def.options.insert("base_url".into(), Value::from(base));
        }
        let alias = format!("{node}.model");
        self.models.insert(alias.clone(), def);
        Some(alias)
    }
}
