//! Spec 004's event names: a `while_loop` node emits `LoopStart`, `LoopIteration` and
//! `LoopEnd`, a `dynamic_parallel` node `DynamicParallelStart`, `...BranchStart`,
//! `...BranchEnd` and `DynamicParallelEnd`, with the payloads the spec's tables give.
//! The engine's own events carry the same facts under its generic names; this view
//! renames them for the nodes of those two kinds.

use serde_json::{Value, json};
use std::collections::HashSet;
use weft_core::event::{Event, EventKind, LoopExit};

/// The nodes whose events are renamed.
#[derive(Debug, Clone, Default)]
pub struct TeaEvents {
    loops: HashSet<String>,
    parallels: HashSet<String>,
}

impl TeaEvents {
    /// Finds the `while_loop` and `dynamic_parallel` nodes of a tea document, at any depth.
    pub(crate) fn of(doc: &Value) -> TeaEvents {
        let mut view = TeaEvents::default();
        view.collect(doc);
        view
    }

    fn collect(&mut self, v: &Value) {
        match v {
            Value::Object(o) => {
                if let (Some(name), Some(kind)) = (
                    o.get("name").and_then(Value::as_str),
                    o.get("type").and_then(Value::as_str),
                ) {
                    match kind {
                        "while_loop" => self.loops.insert(name.to_owned()),
                        "dynamic_parallel" => self.parallels.insert(name.to_owned()),
                        _ => false,
                    };
                }
                o.values().for_each(|c| self.collect(c));
            }
            Value::Array(a) => a.iter().for_each(|c| self.collect(c)),
            _ => {}
        }
    }

    /// The spec's event for `e`, if it has one.
    pub(crate) fn translate(&self, e: &Event) -> Option<Value> {
        let node = |path: &str| path.rsplit('/').next().unwrap_or(path).to_owned();
        let is_loop = |path: &str| self.loops.contains(&node(path));
        let is_parallel = |path: &str| self.parallels.contains(&node(path));
        let (kind, payload) = match &e.kind {
            EventKind::LoopStarted {
                path,
                max_iterations,
            } if is_loop(path) => (
                "LoopStart",
                json!({"node_name": node(path), "max_iterations": max_iterations}),
            ),
            // The engine also reports the final check that ends the loop; the spec counts
            // only iterations that run.
            EventKind::LoopIteration {
                path,
                iteration,
                condition,
            } if is_loop(path) && *condition != Some(false) => (
                "LoopIteration",
                json!({"node_name": node(path), "iteration": iteration, "condition_result": condition.unwrap_or(true)}),
            ),
            EventKind::LoopEnded {
                path,
                iterations,
                reason,
            } if is_loop(path) => (
                "LoopEnd",
                json!({"node_name": node(path), "iterations_completed": iterations, "exit_reason": match reason {
                    LoopExit::MaxIterationsReached => "max_iterations_reached",
                    LoopExit::ConditionFalse | LoopExit::ConditionTrue => "condition_false",
                }}),
            ),
            EventKind::FanOutStarted {
                path,
                branches,
                max_concurrency,
            } if is_parallel(path) => (
                "DynamicParallelStart",
                json!({"node_name": node(path), "item_count": branches, "max_concurrency": max_concurrency}),
            ),
            EventKind::BranchStarted { path, branch, item } if is_parallel(path) => (
                "DynamicParallelBranchStart",
                json!({"node_name": node(path), "index": index(branch), "item": item}),
            ),
            EventKind::BranchEnded {
                path,
                branch,
                success,
                error,
            } if is_parallel(path) => {
                let mut p =
                    json!({"node_name": node(path), "index": index(branch), "success": success});
                if let Some(e) = error {
                    p["error"] = Value::from(e.message.as_str());
                }
                ("DynamicParallelBranchEnd", p)
            }
            EventKind::FanOutEnded {
                path,
                total,
                succeeded,
                failed,
            } if is_parallel(path) => (
                "DynamicParallelEnd",
                json!({"node_name": node(path), "total_branches": total, "successful": succeeded, "failed": failed}),
            ),
            _ => return None,
        };
        Some(crate::envelope(e, kind, payload))
    }
}

/// A map branch's name is its index.
fn index(branch: &str) -> Value {
    branch
        .parse::<u64>()
        .map_or_else(|_| Value::from(branch), Value::from)
}
