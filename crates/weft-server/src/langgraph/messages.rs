//! LangChain's message dicts, as LangGraph's `add_messages` leaves them in a thread's
//! values: a flow or a client may write `{"role": "user", "content": "hi"}`; LangGraph's
//! clients (Agent Chat UI among them) read `{"type": "human", "content", "id", ...}`
//! and tell messages apart by `id`.

use serde_json::{Map, Value, json};

/// A message's LangChain `type` for an OpenAI-style `role`.
fn type_of_role(role: &str) -> &str {
    match role {
        "user" => "human",
        "assistant" => "ai",
        other => other,
    }
}

/// `m` as a LangChain message dict: its type, content and id first, the fields every
/// message has, those of an AI message, then whatever else it holds. A message without
/// an id gets `fresh_id`.
fn normalized(m: Value, fresh_id: impl FnOnce() -> String) -> Value {
    let mut m = match m {
        Value::Object(m) => m,
        Value::String(text) => Map::from_iter([("content".to_owned(), Value::String(text))]),
        other => return other,
    };
    let kind = match (m.remove("type"), m.remove("role")) {
        (Some(Value::String(t)), _) => t,
        (_, Some(Value::String(r))) => type_of_role(&r).to_owned(),
        _ => "human".to_owned(),
    };
    let mut out = Map::new();
    out.insert("content".into(), m.remove("content").unwrap_or(json!("")));
    for key in ["additional_kwargs", "response_metadata"] {
        out.insert(key.into(), m.remove(key).unwrap_or(json!({})));
    }
    out.insert("type".into(), Value::String(kind.clone()));
    out.insert("name".into(), m.remove("name").unwrap_or(Value::Null));
    let id = m.remove("id").filter(|id| !id.is_null());
    out.insert("id".into(), id.unwrap_or_else(|| Value::String(fresh_id())));
    if kind == "ai" {
        out.insert(
            "tool_calls".into(),
            m.remove("tool_calls").unwrap_or(json!([])),
        );
        let invalid = m.remove("invalid_tool_calls").unwrap_or(json!([]));
        out.insert("invalid_tool_calls".into(), invalid);
        out.insert(
            "usage_metadata".into(),
            m.remove("usage_metadata").unwrap_or(Value::Null),
        );
    }
    out.extend(m);
    Value::Object(out)
}

/// Makes each of `values.messages` a LangChain message dict; one without an id gets
/// `<id_base>-<index>`, the same each time the same values are read.
pub(crate) fn normalize(values: &mut Value, id_base: &str) {
    let Some(Value::Array(messages)) = values.get_mut("messages") else {
        return;
    };
    for (i, m) in messages.iter_mut().enumerate() {
        *m = normalized(std::mem::take(m), || format!("{id_base}-{i}"));
    }
}

/// A LangChain message of `kind` (`ai`, `AIMessageChunk`) with `text`, its id naming
/// the step that made it.
pub(crate) fn made(kind: &str, id: String, text: &str) -> Value {
    let mut m = normalized(
        json!({"type": kind, "content": text, "id": id}),
        String::new,
    );
    if kind == "AIMessageChunk"
        && let Some(m) = m.as_object_mut()
    {
        for (k, v) in [
            ("tool_calls", json!([])),
            ("invalid_tool_calls", json!([])),
            ("usage_metadata", Value::Null),
            ("tool_call_chunks", json!([])),
            ("chunk_position", Value::Null),
        ] {
            m.insert(k.into(), v);
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_style_messages_become_langchain_dicts_with_stable_ids() {
        let mut values = json!({"messages": [
            {"role": "user", "content": "hi"},
            {"type": "ai", "content": "hello", "id": "given"},
            "plain text",
        ], "other": 1});
        normalize(&mut values, "run1");
        let again = {
            let mut v = values.clone();
            normalize(&mut v, "run1");
            v
        };
        assert_eq!(values, again, "normalizing twice changes nothing");
        let m = &values["messages"];
        assert_eq!(m[0]["type"], "human");
        assert_eq!(m[0]["id"], "run1-0");
        assert!(m[0].get("role").is_none());
        assert_eq!(m[1]["id"], "given");
        assert_eq!(m[1]["tool_calls"], json!([]));
        assert_eq!(
            m[2],
            json!({"content": "plain text", "additional_kwargs": {}, "response_metadata": {}, "type": "human", "name": null, "id": "run1-2"})
        );
        assert_eq!(values["other"], 1);
    }
}
