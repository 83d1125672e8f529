//! A TEA node named `end`. TEA's graph ends at `__end__`, so `end` is an ordinary node
//! name there; in Weft's IR it names the graph's end. Before the document is read, such a
//! node is renamed (`end_`, or with more underscores if that is taken) wherever the file
//! names it: the node, edges' `from`/`to`/`fan_in`, `goto` (a name or `{if, to}` rules),
//! a node's `fan_in`, and the interrupt lists. The rename is reported as a warning, since
//! progress, events and the journal show the new name.

use serde_json::Value;
use weft_core::Diagnostic;
use weft_core::ir::END;

/// Renames a top-level node named `end` and every reference to it; the warning, if any.
pub(super) fn rename(doc: &mut Value) -> Option<Diagnostic> {
    let nodes = doc.get("nodes")?.as_array()?;
    let index = nodes
        .iter()
        .position(|n| n.get("name").and_then(Value::as_str) == Some(END))?;
    let taken = |name: &str| {
        nodes
            .iter()
            .any(|n| n.get("name").and_then(Value::as_str) == Some(name))
    };
    let mut fresh = format!("{END}_");
    while taken(&fresh) {
        fresh.push('_');
    }
    let new = Value::from(fresh.as_str());
    for node in doc["nodes"].as_array_mut()? {
        if node.get("name").and_then(Value::as_str) == Some(END) {
            node["name"] = new.clone();
        }
        rename_in(node.get_mut("goto"), &new);
        rename_in(node.get_mut("fan_in"), &new);
    }
    if let Some(edges) = doc.get_mut("edges").and_then(Value::as_array_mut) {
        for edge in edges {
            for key in ["from", "to", "fan_in"] {
                rename_in(edge.get_mut(key), &new);
            }
        }
    }
    for key in ["interrupt_before", "interrupt_after"] {
        rename_in(doc.get_mut(key), &new);
        rename_in(doc.get_mut("config").and_then(|c| c.get_mut(key)), &new);
    }
    Some(
        Diagnostic::warning(
            format!("/nodes/{index}/name"),
            format!("the node `{END}` runs as `{fresh}`: Weft's graphs name their end `{END}`"),
        )
        .hint(format!(
            "progress, events and `weft runs show` call it `{fresh}`; rename it in the file to choose the name"
        )),
    )
}

/// Replaces the name `end` in `v`: a name, a list of names, or `{if, to}` rules.
fn rename_in(v: Option<&mut Value>, new: &Value) {
    match v {
        Some(Value::String(s)) if s == END => *s = new.as_str().unwrap_or(END).to_owned(),
        Some(Value::Array(items)) => {
            for item in items {
                match item {
                    Value::Object(rule) => rename_in(rule.get_mut("to"), new),
                    other => rename_in(Some(other), new),
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_node_and_every_reference_are_renamed_and_nothing_else() {
        let mut doc = json!({
            "nodes": [
                {"name": "a", "goto": [{"if": "x", "to": "end"}, {"to": "__end__"}]},
                {"name": "end_"},
                {"name": "end", "run": "return {'end': 'end'}"}
            ],
            "edges": [{"from": "a", "to": "end"}, {"from": "end", "to": "__end__"}],
            "interrupt_before": ["end"],
            "config": {"interrupt_after": ["end", "a"]}
        });
        let warning = rename(&mut doc).expect("a warning");
        assert_eq!(warning.pointer, "/nodes/2/name");
        assert_eq!(doc["nodes"][2]["name"], "end__");
        assert_eq!(doc["nodes"][2]["run"], "return {'end': 'end'}");
        assert_eq!(doc["nodes"][0]["goto"][0]["to"], "end__");
        assert_eq!(doc["nodes"][0]["goto"][1]["to"], "__end__");
        assert_eq!(
            doc["edges"],
            json!([{"from": "a", "to": "end__"}, {"from": "end__", "to": "__end__"}])
        );
        assert_eq!(doc["interrupt_before"], json!(["end__"]));
        assert_eq!(doc["config"]["interrupt_after"], json!(["end__", "a"]));
    }

    #[test]
    fn a_file_without_such_a_node_is_left_alone() {
        let mut doc = json!({"nodes": [{"name": "a"}], "edges": [{"from": "a", "to": "end"}]});
        let before = doc.clone();
        assert!(rename(&mut doc).is_none());
        assert_eq!(doc, before);
    }
}
