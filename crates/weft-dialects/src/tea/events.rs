//! Spec 004's event names, as a view: a `while_loop` node emits `LoopStart`,
//! `LoopIteration` and `LoopEnd`, a `dynamic_parallel` node `DynamicParallelStart`,
//! `...BranchStart`, `...BranchEnd` and `DynamicParallelEnd`, with the payloads the
//! spec's tables give. The engine's own events carry the same facts under its generic
//! names; the view renames them for the nodes of those two kinds.

use crate::view::{EventView, NodeScope, Rule, Source, ViewNode};
use serde_json::{Value, json};

const LOOP: &str = "while_loop";
const PARALLEL: &str = "dynamic_parallel";

/// The view of a tea document: its `while_loop` and `dynamic_parallel` nodes, at any
/// depth, and the spec's events for them.
pub(crate) fn view(doc: &Value) -> EventView {
    let mut view = EventView {
        scope: NodeScope::Anywhere,
        rules: rules(),
        ..EventView::default()
    };
    collect(doc, &mut view);
    view
}

fn collect(v: &Value, view: &mut EventView) {
    match v {
        Value::Object(o) => {
            if let (Some(name), Some(kind @ (LOOP | PARALLEL))) = (
                o.get("name").and_then(Value::as_str),
                o.get("type").and_then(Value::as_str),
            ) {
                view.nodes.insert(
                    name.to_owned(),
                    ViewNode {
                        id: name.to_owned(),
                        kind: kind.to_owned(),
                        name: None,
                    },
                );
            }
            o.values().for_each(|c| collect(c, view));
        }
        Value::Array(a) => a.iter().for_each(|c| collect(c, view)),
        _ => {}
    }
}

fn rules() -> Vec<Rule> {
    let node = || Source::Node;
    vec![
        Rule::on(&["loop_started"], "LoopStart")
            .kinds(&[LOOP])
            .field("node_name", node())
            .field("max_iterations", Source::at("/max_iterations")),
        // The engine also reports the final check that ends the loop; the spec counts
        // only iterations that run.
        Rule::on(&["loop_iteration"], "LoopIteration")
            .kinds(&[LOOP])
            .unless("/condition", Value::Bool(false))
            .field("node_name", node())
            .field("iteration", Source::at("/iteration"))
            .field(
                "condition_result",
                Source::at_or("/condition", Value::Bool(true)),
            ),
        Rule::on(&["loop_ended"], "LoopEnd")
            .kinds(&[LOOP])
            .field("node_name", node())
            .field("iterations_completed", Source::at("/iterations"))
            .field(
                "exit_reason",
                Source::Rename {
                    at: "/reason".into(),
                    to: serde_json::from_value(json!({"condition_true": "condition_false"}))
                        .expect("a table of strings"),
                },
            ),
        Rule::on(&["fan_out_started"], "DynamicParallelStart")
            .kinds(&[PARALLEL])
            .field("node_name", node())
            .field("item_count", Source::at("/branches"))
            .field(
                "max_concurrency",
                Source::at_or("/max_concurrency", Value::Null),
            ),
        Rule::on(&["branch_started"], "DynamicParallelBranchStart")
            .kinds(&[PARALLEL])
            .field("node_name", node())
            .field("index", Source::Number("/branch".into()))
            .field("item", Source::at_or("/item", Value::Null)),
        Rule::on(&["branch_ended"], "DynamicParallelBranchEnd")
            .kinds(&[PARALLEL])
            .field("node_name", node())
            .field("index", Source::Number("/branch".into()))
            .field("success", Source::at("/success"))
            .field("error", Source::at("/error/message")),
        Rule::on(&["fan_out_ended"], "DynamicParallelEnd")
            .kinds(&[PARALLEL])
            .field("node_name", node())
            .field("total_branches", Source::at("/total"))
            .field("successful", Source::at("/succeeded"))
            .field("failed", Source::at("/failed")),
    ]
}
