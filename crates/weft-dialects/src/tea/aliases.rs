//! The Edge Agent accepts several spellings of one thing; its own examples use them all.
//! Before the file is read, each is rewritten to the one the compiler reads:
//!
//! - a node's `action: NAME` with `params:` is `uses: NAME` with `with:`;
//! - a node's `next:` is `goto:`, and a rule's `condition:` is `if:`;
//! - a node's `outputs: {key: template}` (TEA's Rust runtime, with `action_result` for
//!   the result) is `output:` with `result`;
//! - `language:` on a `steps` node is the language of its steps that name none; on an
//!   action node, where no code runs, it is dropped;
//! - a legacy edge's `condition: "EXPR"` (a string) is `condition: {type: expression,
//!   value: EXPR}`;
//! - keys beginning with `_`, at the top or on a node, are a tool's annotations (TEA
//!   ignores every key it does not read) and are dropped;
//! - `settings.llm`'s `model` (or `default_model`), `provider` and `api_base` are the
//!   defaults of every model
//!   action that names none (a value of `${VARIABLE}` form is left out: Weft's own
//!   `--model` / `WEFT_MODEL` is the default then).
//!
//! The rewrite keeps every other key, so a misspelt one is still reported.

use serde_json::{Value, json};

/// `doc` with TEA's alternative spellings rewritten (see the module's documentation).
pub(super) fn normalize(mut doc: Value) -> Value {
    drop_annotations(&mut doc);
    let defaults = llm_defaults(&doc);
    if let Some(nodes) = doc.get_mut("nodes").and_then(Value::as_array_mut) {
        for n in nodes.iter_mut() {
            node(n, &defaults);
        }
    }
    if let Some(edges) = doc.get_mut("edges").and_then(Value::as_array_mut) {
        for e in edges.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(Value::String(expr)) = e.get("condition").cloned() {
                e.insert(
                    "condition".into(),
                    json!({"type": "expression", "value": expr}),
                );
            }
        }
    }
    doc
}

/// Removes `_`-prefixed keys from the document and its top-level nodes.
fn drop_annotations(doc: &mut Value) {
    let kept = |k: &String| !k.starts_with('_');
    if let Some(obj) = doc.as_object_mut() {
        obj.retain(|k, _| kept(k));
    }
    if let Some(nodes) = doc.get_mut("nodes").and_then(Value::as_array_mut) {
        for n in nodes.iter_mut().filter_map(Value::as_object_mut) {
            n.retain(|k, _| kept(k));
        }
    }
}

/// Rewrites node `n` and the steps and body inside it, and gives each model action
/// the `defaults` it lacks.
fn node(n: &mut Value, defaults: &[(String, Value)]) {
    let Some(obj) = n.as_object_mut() else {
        return;
    };
    if matches!(obj.get("action"), Some(Value::String(_))) && !obj.contains_key("uses") {
        let action = obj.remove("action").expect("checked above");
        obj.insert("uses".into(), action);
        if let Some(params) = obj.remove("params") {
            obj.insert("with".into(), params);
        }
    }
    if !obj.contains_key("goto")
        && let Some(next) = obj.remove("next")
    {
        obj.insert("goto".into(), rules(next));
    }
    if !obj.contains_key("output")
        && let Some(Value::Object(outputs)) = obj.remove("outputs")
    {
        let renamed = outputs
            .into_iter()
            .map(|(k, v)| (k, rename_action_result(v)))
            .collect();
        obj.insert("output".into(), Value::Object(renamed));
    }
    inherit_language(obj);
    with_llm_defaults(obj, defaults);
    for key in ["steps", "body"] {
        if let Some(children) = obj.get_mut(key).and_then(Value::as_array_mut) {
            for c in children.iter_mut() {
                node(c, defaults);
            }
        }
    }
}

/// A `steps` node's `language` goes to its code steps that name none; an action node's
/// is dropped (it runs no code).
fn inherit_language(obj: &mut serde_json::Map<String, Value>) {
    if obj.contains_key("run") || obj.contains_key("script") {
        return;
    }
    let Some(language) = obj.get("language").cloned() else {
        return;
    };
    if let Some(steps) = obj.get_mut("steps").and_then(Value::as_array_mut) {
        for step in steps.iter_mut().filter_map(Value::as_object_mut) {
            let runs_code = step.contains_key("run") || step.contains_key("script");
            if runs_code && !step.contains_key("language") {
                step.insert("language".into(), language.clone());
            }
        }
        obj.remove("language");
    } else if obj.contains_key("uses") {
        obj.remove("language");
    }
}

/// TEA's Rust runtime names an action's result `action_result` in `outputs:`; its
/// Python runtime, like Weft's `output:`, names it `result`.
fn rename_action_result(v: Value) -> Value {
    match v {
        Value::String(s) => Value::from(s.replace("action_result", "result")),
        other => other,
    }
}

/// The model options `settings.llm` gives every model action.
fn llm_defaults(doc: &Value) -> Vec<(String, Value)> {
    let Some(llm) = doc.pointer("/settings/llm").and_then(Value::as_object) else {
        return Vec::new();
    };
    // TEA's examples also write the model as `default_model`.
    [
        ("model", "model"),
        ("model", "default_model"),
        ("provider", "provider"),
        ("api_base", "api_base"),
        ("embedding_model", "embedding_model"),
    ]
    .iter()
    .filter_map(|(key, setting)| {
        let v = llm.get(*setting)?.as_str()?;
        (!v.contains("${") && !v.contains("{{")).then(|| ((*key).to_owned(), Value::from(v)))
    })
    .fold(Vec::new(), |mut kept, (k, v)| {
        if !kept.iter().any(|(have, _): &(String, Value)| *have == k) {
            kept.push((k, v));
        }
        kept
    })
}

/// Gives a model action node the defaults it lacks: `llm.embed` takes its model from
/// `embedding_model` (TEA's setting for it), the other model actions from `model`.
fn with_llm_defaults(obj: &mut serde_json::Map<String, Value>, defaults: &[(String, Value)]) {
    let Some(uses) = obj.get("uses").and_then(Value::as_str).map(str::to_owned) else {
        return;
    };
    // Options of model calls nested in other actions (the planner's, a subtask
    // executor's) name the settings too.
    if let Some(with) = obj.get_mut("with") {
        for nested in ["/planner", "/subtask_executor/with"] {
            if let Some(m) = with.pointer_mut(nested).and_then(Value::as_object_mut) {
                settings_references(m, defaults);
            }
        }
    }
    if !uses.starts_with("llm.") {
        return;
    }
    let embeds = uses == "llm.embed";
    if let Some(with) = obj.get_mut("with").and_then(Value::as_object_mut) {
        settings_references(with, defaults);
        let shell = with.contains_key("shell_provider");
        for (k, v) in defaults {
            let key = match (k.as_str(), embeds) {
                ("embedding_model", true) => "model",
                ("model", true) | ("embedding_model", false) => continue,
                (other, _) => other,
            };
            if !shell && !with.contains_key(key) {
                with.insert(key.to_owned(), v.clone());
            }
        }
    }
}

/// A model option written `{{ settings.llm.KEY }}` is that setting's value; when the
/// setting is not a constant (TEA's `${VARIABLE}` form), the option is left out, so
/// Weft's default model (`--model`, `WEFT_MODEL`) applies, as for a node naming none.
fn settings_references(with: &mut serde_json::Map<String, Value>, defaults: &[(String, Value)]) {
    for key in ["model", "provider", "api_base"] {
        let Some(reference) = with.get(key).and_then(Value::as_str) else {
            continue;
        };
        let inner = reference
            .trim()
            .strip_prefix("{{")
            .and_then(|r| r.strip_suffix("}}"));
        let Some(setting) = inner.and_then(|i| i.trim().strip_prefix("settings.llm.")) else {
            continue;
        };
        match defaults.iter().find(|(k, _)| k == setting) {
            Some((_, v)) => with.insert(key.to_owned(), v.clone()),
            None => with.remove(key),
        };
    }
}

/// `next:` rules with `condition:` as `if:`.
fn rules(next: Value) -> Value {
    match next {
        Value::Array(list) => Value::Array(
            list.into_iter()
                .map(|r| match r {
                    Value::Object(mut o) => {
                        if !o.contains_key("if")
                            && let Some(c) = o.remove("condition")
                        {
                            o.insert("if".into(), c);
                        }
                        Value::Object(o)
                    }
                    other => other,
                })
                .collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tea_s_other_spellings_become_the_compiler_s() {
        let doc = json!({
            "nodes": [
                {"name": "a", "action": "llm.call", "params": {"model": "m"}, "next": [{"condition": "{{ state.x }}", "to": "b"}, {"to": "c"}]},
                {"name": "b", "steps": [{"action": "json.parse", "params": {"text": "[]"}}]},
                {"name": "p", "type": "dynamic_parallel", "action": {"uses": "http.get"}},
            ],
            "edges": [{"from": "a", "to": "b", "condition": "state.ok"}],
        });
        let out = normalize(doc);
        assert_eq!(out["nodes"][0]["uses"], "llm.call");
        assert_eq!(out["nodes"][0]["with"], json!({"model": "m"}));
        assert_eq!(out["nodes"][0]["goto"][0]["if"], "{{ state.x }}");
        assert!(out["nodes"][0].get("next").is_none());
        assert_eq!(out["nodes"][1]["steps"][0]["uses"], "json.parse");
        assert_eq!(out["nodes"][2]["action"], json!({"uses": "http.get"}));
        assert_eq!(
            out["edges"][0]["condition"],
            json!({"type": "expression", "value": "state.ok"})
        );
    }

    #[test]
    fn outputs_and_a_steps_node_s_language_become_the_compiler_s() {
        let doc = json!({
            "nodes": [
                {"name": "a", "uses": "llm.chat", "language": "python", "with": {}, "outputs": {"answer": "{{ action_result.content }}"}},
                {"name": "b", "language": "lua", "steps": [{"run": "return {}"}, {"run": "x", "language": "python"}, {"uses": "http.get"}]},
                {"name": "c", "language": "lua", "run": "return {}"},
            ],
        });
        let out = normalize(doc);
        assert_eq!(
            out["nodes"][0]["output"],
            json!({"answer": "{{ result.content }}"})
        );
        assert!(out["nodes"][0].get("language").is_none());
        assert_eq!(out["nodes"][1]["steps"][0]["language"], "lua");
        assert_eq!(out["nodes"][1]["steps"][1]["language"], "python");
        assert!(out["nodes"][1]["steps"][2].get("language").is_none());
        assert!(out["nodes"][1].get("language").is_none());
        assert_eq!(out["nodes"][2]["language"], "lua");
    }

    #[test]
    fn settings_llm_gives_model_actions_their_defaults() {
        let doc = json!({
            "settings": {"llm": {"model": "gpt-4o-mini", "api_key": "${KEY}", "provider": "${P}"}},
            "nodes": [
                {"name": "a", "uses": "llm.call", "with": {"prompt": "hi"}},
                {"name": "b", "uses": "llm.call", "with": {"model": "other", "prompt": "hi"}},
                {"name": "c", "steps": [{"action": "llm.call", "params": {"prompt": "x"}}]},
                {"name": "d", "uses": "http.get", "with": {"url": "u"}},
            ],
        });
        let out = normalize(doc);
        assert_eq!(
            out["nodes"][0]["with"],
            json!({"prompt": "hi", "model": "gpt-4o-mini"})
        );
        assert_eq!(out["nodes"][1]["with"]["model"], "other");
        assert_eq!(out["nodes"][2]["steps"][0]["with"]["model"], "gpt-4o-mini");
        assert!(out["nodes"][3]["with"].get("model").is_none());
    }

    #[test]
    fn an_embedding_takes_the_embedding_model_not_the_chat_model() {
        let doc = json!({
            "settings": {"llm": {"model": "gpt-4o-mini", "embedding_model": "text-embedding-3-small", "provider": "openai"}},
            "nodes": [
                {"name": "a", "uses": "llm.embed", "with": {"text": "hi"}},
                {"name": "b", "uses": "llm.call", "with": {"prompt": "hi"}},
            ],
        });
        let out = normalize(doc);
        assert_eq!(
            out["nodes"][0]["with"],
            json!({"text": "hi", "model": "text-embedding-3-small", "provider": "openai"})
        );
        assert_eq!(
            out["nodes"][1]["with"],
            json!({"prompt": "hi", "model": "gpt-4o-mini", "provider": "openai"})
        );
    }

    #[test]
    fn a_model_option_may_name_a_setting() {
        let doc = json!({
            "settings": {"llm": {"model": "gpt-4o-mini", "provider": "${P:-openai}"}},
            "nodes": [
                {"name": "a", "uses": "llm.call", "with": {"prompt": "hi", "model": "{{ settings.llm.model }}", "provider": "{{ settings.llm.provider }}"}},
            ],
        });
        let out = normalize(doc);
        assert_eq!(
            out["nodes"][0]["with"],
            json!({"prompt": "hi", "model": "gpt-4o-mini"})
        );
    }
}
