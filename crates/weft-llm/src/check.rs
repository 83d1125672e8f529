//! Model ids checked when a flow loads, so that a provider Weft cannot reach is a
//! located error from `weft validate`, not a failure halfway through a run.

use crate::{PROVIDERS, split_model_id};
use weft_core::Diagnostic;
use weft_core::ir::{BlockKind, Flow};
use weft_core::validate::{child_pointer, walk_blocks};

/// An error for each model whose provider is neither one of [`PROVIDERS`] nor one of
/// `extra` (providers a front end adds, such as `local`): the aliases of `flow.models`
/// by their `provider`, and the ids `llm` blocks name that are not aliases by their
/// `provider/` prefix (an id without one is an OpenAI model). A template id is chosen, and
/// checked, when its block runs.
pub fn unknown_providers(flow: &Flow, extra: &[&str]) -> Vec<Diagnostic> {
    let known: Vec<&str> = PROVIDERS.iter().chain(extra).copied().collect();
    let mut out = Vec::new();
    check_aliases(flow, "", &known, &mut out);
    walk_blocks(flow, &mut |ptr, b| {
        let BlockKind::Llm(l) = &b.kind else { return };
        let Some(id) = &l.model else { return };
        // A template chooses the model when the block runs, and is checked then.
        if is_alias(flow, id) || id.contains("{{") {
            return;
        }
        let (provider, _) = split_model_id(id);
        if !known.contains(&provider) {
            out.push(unknown(
                &child_pointer(&child_pointer(ptr, "llm"), "model"),
                provider,
                &known,
            ));
        }
    });
    out
}

/// Whether `id` is defined in the `models` of `flow` or of one of its sub-flows.
fn is_alias(flow: &Flow, id: &str) -> bool {
    flow.models.contains_key(id) || flow.flows.values().any(|f| is_alias(f, id))
}

fn check_aliases(flow: &Flow, base: &str, known: &[&str], out: &mut Vec<Diagnostic>) {
    for (name, def) in &flow.models {
        if !known.contains(&def.provider.as_str()) {
            let ptr = child_pointer(
                &child_pointer(&child_pointer(base, "models"), name),
                "provider",
            );
            out.push(unknown(&ptr, &def.provider, known));
        }
    }
    for (name, sub) in &flow.flows {
        check_aliases(
            sub,
            &child_pointer(&child_pointer(base, "flows"), name),
            known,
            out,
        );
    }
}

fn unknown(ptr: &str, provider: &str, known: &[&str]) -> Diagnostic {
    Diagnostic::error(ptr, format!("Weft knows no model provider `{provider}`")).hint_closest(
        provider,
        known.iter().copied(),
        format!("the providers: {}", known.join(", ")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_providers_are_located_with_the_closest_name() {
        let f: Flow = serde_json::from_value(serde_json::json!({
            "name": "m",
            "models": {
                "fast": {"provider": "opnai", "model": "gpt-4o-mini"},
                "ok": {"provider": "scripted", "rules": []}
            },
            "root": {"sequence": [
                {"llm": {"model": "fast", "prompt": "a"}},
                {"llm": {"model": "antropic/claude", "prompt": "b"}},
                {"llm": {"model": "gpt-4o", "prompt": "c"}},
                {"llm": {"model": "local/smollm2", "prompt": "d"}}
            ]}
        }))
        .unwrap();
        let d = unknown_providers(&f, &["local"]);
        let got: Vec<(&str, &str)> = d
            .iter()
            .map(|d| (d.pointer.as_str(), d.hint.as_deref().unwrap_or("")))
            .collect();
        assert_eq!(
            got,
            [
                ("/models/fast/provider", "did you mean `openai`?"),
                ("/root/sequence/1/llm/model", "did you mean `anthropic`?"),
            ]
        );
        assert_eq!(
            unknown_providers(&f, &[]).len(),
            3,
            "local only when a front end adds it"
        );
    }
}
