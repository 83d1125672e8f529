//! Spec 003's log: the engine's events for an editor graph under the log types the spec
//! names (`step_start`, `start_prompt`, `logic_check`, `wait_input`, `input_received`,
//! `llm_response`, `llm_error`, `error`) and the subagent events, whose JSON payloads
//! travel in `content` (`subagent_call_start`, `subagent_call_end`,
//! `subagent_call_error`). Also the run result in the editor's shape.

use super::{ir_name, tool_name};
use serde_json::{Value, json};
use std::collections::HashMap;
use weft_core::event::{Event, EventKind};

/// What the view knows of the graph: each node's id and type, each subagent tool.
#[derive(Debug, Clone, Default)]
pub struct GraphEvents {
    /// IR node name -> (id, type).
    nodes: HashMap<String, (String, String)>,
    /// (parent agent id, tool name) -> subagent id.
    tools: HashMap<(String, String), String>,
}

impl GraphEvents {
    /// Reads the nodes and subagent edges of a graph document.
    pub(crate) fn of(doc: &Value) -> GraphEvents {
        let mut view = GraphEvents::default();
        let nodes = doc["nodes"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        let mut data = HashMap::new();
        for n in nodes {
            if let (Some(id), Some(kind)) = (n["id"].as_str(), n["type"].as_str()) {
                let kind = if kind == "input" { "approval" } else { kind };
                view.nodes
                    .insert(ir_name(id), (id.to_owned(), kind.to_owned()));
                data.insert(id, n.get("data").cloned().unwrap_or(Value::Null));
            }
        }
        let connections = doc.get("connections").or_else(|| doc.get("edges"));
        let mut named: HashMap<String, Vec<String>> = HashMap::new();
        for c in connections.and_then(Value::as_array).into_iter().flatten() {
            if c["sourceHandle"] != super::SUBAGENT {
                continue;
            }
            if let (Some(parent), Some(child)) = (c["source"].as_str(), c["target"].as_str()) {
                let agent = serde_json::from_value(data.get(child).cloned().unwrap_or_default())
                    .unwrap_or_default();
                // The same renaming as the compiler's, for tools that share a name.
                let mut name = tool_name(&agent, child);
                let taken = named.entry(parent.to_owned()).or_default();
                if taken.contains(&name) {
                    name = format!("{name}_{child}");
                }
                taken.push(name.clone());
                view.tools
                    .insert((parent.to_owned(), name), child.to_owned());
            }
        }
        view
    }

    /// The top-level node a step path belongs to: `root/<node>[@n]` or
    /// `root/<branch>/<node>[@n]`.
    fn node(&self, path: &str) -> Option<&(String, String)> {
        let mut segments = path.split('/');
        segments.next()?;
        let rest: Vec<&str> = segments.collect();
        let last = match rest.as_slice() {
            [node] => node,
            [branch, node] if branch.starts_with('b') => node,
            _ => return None,
        };
        let name = last.split_once('@').map_or(*last, |(n, _)| n);
        self.nodes.get(name)
    }

    /// The agent whose model call runs at `path`: a top-level agent node, or the
    /// subagent a tool step at the end of `path` runs.
    fn agent_at(&self, path: &str) -> Option<String> {
        if let Some((id, _)) = self.node(path) {
            return Some(id.clone());
        }
        let (parent_path, tool) = subagent_call(path)?;
        let parent = self.agent_at(parent_path)?;
        self.tools.get(&(parent, tool.to_owned())).cloned()
    }

    /// The spec's log entry for `e`, if it has one.
    pub(crate) fn translate(&self, e: &Event) -> Option<Value> {
        let entry = |kind: &str, node: &str, content: Value| {
            crate::envelope(e, kind, json!({"nodeId": node, "content": content}))
        };
        match &e.kind {
            EventKind::StepStarted { path, .. } => {
                let (id, kind) = self.node(path)?;
                Some(entry("step_start", id, Value::from(kind.as_str())))
            }
            EventKind::Message { path, message } => {
                let (id, _) = self.node(path)?;
                let kind = message["type"].as_str()?;
                Some(entry(kind, id, message["content"].clone()))
            }
            EventKind::ApprovalRequested { key, prompt, .. } => {
                let (id, _) = self.node(key)?;
                Some(entry("wait_input", id, Value::from(prompt.as_str())))
            }
            EventKind::ToolCalled {
                path,
                tool,
                arguments,
            } => {
                let parent = self.agent_at(path)?;
                let child = self.tools.get(&(parent.clone(), tool.clone()))?;
                let payload = json!({
                    "type": "subagent_call_start",
                    "parentNodeId": parent,
                    "subagentNodeId": child,
                    "tool": tool,
                    "input": arguments.get("input").cloned().unwrap_or(Value::Null),
                });
                Some(entry(
                    "subagent_call_start",
                    &parent,
                    Value::from(payload.to_string()),
                ))
            }
            EventKind::StepCompleted { path, .. } | EventKind::StepFailed { path, .. } => {
                let failed = match &e.kind {
                    EventKind::StepFailed { error, .. } => Some(error),
                    _ => None,
                };
                if let Some((parent_path, _)) = subagent_call(path) {
                    let parent = self.agent_at(parent_path)?;
                    let child = self.agent_at(path)?;
                    let kind = if failed.is_some() {
                        "subagent_call_error"
                    } else {
                        "subagent_call_end"
                    };
                    let mut payload =
                        json!({"type": kind, "parentNodeId": parent, "subagentNodeId": child});
                    if let Some(err) = failed {
                        payload["error"] = Value::from(err.message.as_str());
                    }
                    return Some(entry(kind, &parent, Value::from(payload.to_string())));
                }
                let err = failed?;
                let (id, kind) = self.node(path)?;
                let log = if kind == "agent" {
                    "llm_error"
                } else {
                    "error"
                };
                Some(entry(log, id, Value::from(err.message.as_str())))
            }
            _ => None,
        }
    }

    /// A run's result as the editor's engine reports it: `{runId, status, logs, state,
    /// waitingForInput, currentNodeId}`.
    pub fn result(
        &self,
        run_id: &str,
        status: &str,
        state: &Value,
        waiting: &[Value],
        logs: Vec<Value>,
    ) -> Value {
        let current = waiting
            .first()
            .and_then(|w| w["key"].as_str())
            .and_then(|k| self.node(k))
            .map(|(id, _)| id.clone());
        json!({
            "runId": run_id,
            "status": status,
            "logs": logs,
            "state": state,
            "waitingForInput": !waiting.is_empty(),
            "currentNodeId": current,
        })
    }
}

/// `(<parent path>, <tool name>)` when `path` ends in a tool call's step
/// (`.../tool<round>.<index>.<name>`).
fn subagent_call(path: &str) -> Option<(&str, &str)> {
    let (parent, last) = path.rsplit_once('/')?;
    let mut parts = last.strip_prefix("tool")?.splitn(3, '.');
    let (round, index, name) = (parts.next()?, parts.next()?, parts.next()?);
    let numeric = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    (numeric(round) && numeric(index)).then_some((parent, name))
}
