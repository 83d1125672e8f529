//! Keys The Edge Agent ignores on a node. TEA reads the keys it knows and passes over
//! the rest, and its own files carry some (`paths:`, `edges:` on a node, `config:`,
//! `inputs:`). Weft reports a key a typo away from one it reads as an error with a
//! did-you-mean; any other unknown node key is set aside before the file is read, and
//! the compiler warns of it, so the file loads as it does in TEA.

use serde_json::Value;

/// Every key of a node (`doc::Node`), after `aliases.rs` rewrote TEA's other spellings.
pub(super) const NODE_KEYS: &[&str] = &[
    "name",
    "type",
    "description",
    "run",
    "script",
    "language",
    "uses",
    "with",
    "output",
    "steps",
    "goto",
    "fan_in",
    "condition",
    "max_iterations",
    "body",
    "items",
    "item_var",
    "index_var",
    "max_concurrency",
    "fail_fast",
    "action",
    "subgraph",
    "input",
    "interrupt",
    "interrupt_before",
    "interrupt_after",
    "streams",
    "prompt",
];

/// The spellings `aliases.rs` rewrites, which are not unknown either.
const ALIASES: &[&str] = &["params", "next", "outputs"];

/// Removes from each node (and the steps and loop bodies inside it) the keys no node
/// reads and no node key resembles; returns each one's pointer and key, for warnings.
pub(super) fn set_aside(doc: &mut Value) -> Vec<(String, String)> {
    let mut found = Vec::new();
    if let Some(nodes) = doc.get_mut("nodes").and_then(Value::as_array_mut) {
        for (i, n) in nodes.iter_mut().enumerate() {
            node(n, &format!("/nodes/{i}"), &mut found);
        }
    }
    found
}

fn node(n: &mut Value, ptr: &str, found: &mut Vec<(String, String)>) {
    let Some(obj) = n.as_object_mut() else {
        return;
    };
    let unknown: Vec<String> = obj.keys().filter(|k| is_set_aside(k)).cloned().collect();
    for key in unknown {
        obj.remove(&key);
        found.push((weft_core::validate::child_pointer(ptr, &key), key));
    }
    for key in ["steps", "body"] {
        if let Some(children) = obj.get_mut(key).and_then(Value::as_array_mut) {
            for (i, c) in children.iter_mut().enumerate() {
                node(c, &format!("{ptr}/{key}/{i}"), found);
            }
        }
    }
}

/// Whether `key` is unknown on a node and no misspelling of a known one.
fn is_set_aside(key: &str) -> bool {
    let known = NODE_KEYS.iter().chain(ALIASES);
    !known.clone().any(|k| *k == key)
        && !known.into_iter().any(|k| strsim::levenshtein(k, key) <= 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn node_keys_are_the_keys_of_a_node() {
        let schema = schemars::schema_for!(super::super::doc::Node);
        let props = schema
            .as_value()
            .pointer("/properties")
            .and_then(Value::as_object)
            .expect("a node has properties");
        let mut from_schema: Vec<&str> = props.keys().map(String::as_str).collect();
        let mut listed = NODE_KEYS.to_vec();
        from_schema.sort_unstable();
        listed.sort_unstable();
        assert_eq!(from_schema, listed);
    }

    #[test]
    fn far_unknown_keys_are_set_aside_and_typos_kept() {
        let mut doc = json!({"nodes": [
            {"name": "a", "run": "x", "paths": {"a": "b"}, "runn": "y"},
            {"name": "b", "steps": [{"run": "x", "config": {}}]},
        ]});
        let aside = set_aside(&mut doc);
        let pointers: Vec<&str> = aside.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(pointers, ["/nodes/0/paths", "/nodes/1/steps/0/config"]);
        assert_eq!(aside[0].1, "paths");
        assert!(
            doc["nodes"][0].get("runn").is_some(),
            "a typo stays, to be refused"
        );
        assert!(doc["nodes"][0].get("paths").is_none());
    }
}
