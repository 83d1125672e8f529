//! Spec 003's log, as a view: the engine's events for an editor graph under the log
//! types the spec names (`step_start`, `start_prompt`, `logic_check`, `wait_input`,
//! `input_received`, `llm_response`, `llm_error`, `error`) and the subagent events,
//! whose JSON payloads travel in `content` (`subagent_call_start`, `subagent_call_end`,
//! `subagent_call_error`). Also the run result in the editor's shape.

use super::{ir_name, tool_name};
use crate::view::{EventView, NodeScope, ResultField, Rule, Source, Subject, ViewNode};
use indexmap::IndexMap;
use serde_json::Value;
use std::collections::HashMap;

/// The view of a graph document: its nodes (top level and concurrent branches), the
/// subagent each agent's tools run, the log rules and the editor's result shape.
pub(crate) fn view(doc: &Value) -> EventView {
    let mut view = EventView {
        scope: NodeScope::TopLevel,
        rules: rules(),
        result: Some(result_shape()),
        ..EventView::default()
    };
    let nodes = doc["nodes"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let mut data = HashMap::new();
    for n in nodes {
        if let (Some(id), Some(kind)) = (n["id"].as_str(), n["type"].as_str()) {
            let kind = if kind == "input" { "approval" } else { kind };
            view.nodes.insert(
                ir_name(id),
                ViewNode {
                    id: id.to_owned(),
                    kind: kind.to_owned(),
                    name: (kind == "agent").then(|| super::agent_name(&n["data"]).to_owned()),
                },
            );
            data.insert(id, n.get("data").cloned().unwrap_or(Value::Null));
        }
    }
    let connections = doc.get("connections").or_else(|| doc.get("edges"));
    let connections = connections.and_then(Value::as_array).map(Vec::as_slice);
    for c in connections.into_iter().flatten() {
        if c["sourceHandle"] != super::SUBAGENT {
            continue;
        }
        if let (Some(parent), Some(child)) = (c["source"].as_str(), c["target"].as_str()) {
            let agent = serde_json::from_value(data.get(child).cloned().unwrap_or_default())
                .unwrap_or_default();
            // The same renaming as the compiler's, for tools that share a name.
            let mut name = tool_name(&agent, child);
            let taken = view.tools.entry(parent.to_owned()).or_default();
            if taken.contains_key(&name) {
                name = format!("{name}_{child}");
            }
            taken.insert(name, child.to_owned());
        }
    }
    view
}

fn rules() -> Vec<Rule> {
    let content = |source: Source| ("content", source);
    // AgentFlow's runtime event: the top-level agent whose call it is part of, the
    // subagent, the call (its step path: unique, and the same at its start and end),
    // the enclosing call and the depth for a nested subagent.
    let subagent_payload = |kind: &str, call: &str| {
        let mut p = IndexMap::new();
        p.insert("type".to_owned(), Source::Const(Value::from(kind)));
        p.insert("parentNodeId".to_owned(), Source::OuterNode);
        p.insert("subagentNodeId".to_owned(), Source::ToolNode);
        p.insert("subagentName".to_owned(), Source::ToolNodeName);
        p.insert("callId".to_owned(), Source::at(call));
        p.insert(
            "parentCallId".to_owned(),
            Source::EnclosingCall(call.into()),
        );
        p.insert("depth".to_owned(), Source::ToolDepth(call.into()));
        p
    };
    let mut start = subagent_payload("subagent_call_start", "/step");
    start.insert("tool".into(), Source::at("/tool"));
    start.insert(
        "input".into(),
        Source::at_or("/arguments/input", Value::Null),
    );
    let end = subagent_payload("subagent_call_end", "/path");
    let mut failed = subagent_payload("subagent_call_error", "/path");
    failed.insert("message".into(), Source::at("/error/message"));
    failed.insert("error".into(), Source::at("/error/message"));
    let call_entry = |rule: Rule, payload| {
        rule.field("nodeId", Source::OuterNode)
            .field("content", Source::JsonText(payload))
    };
    let entry = |rule: Rule, (name, source): (&str, Source)| {
        rule.field("nodeId", Source::Node).field(name, source)
    };
    // `step_start` says what AgentFlow's engine says of each node type; an agent's own
    // is announced as it starts, with the agent's name.
    let mut rules: Vec<Rule> = [
        ("start", "start node"),
        ("if", "condition node"),
        ("approval", "approval node"),
        ("end", "end node"),
    ]
    .into_iter()
    .map(|(kind, said)| {
        entry(
            Rule::on(&["step_started"], "step_start").kinds(&[kind]),
            content(Source::Const(Value::from(said))),
        )
    })
    .collect();
    rules.extend([
        // A node's log entries travel as a `message` (or a list of them) whose `type`
        // is the log type.
        entry(
            Rule::named_by(&["message"], Source::at("/message/type")).each("/message"),
            content(Source::at_or("/message/content", Value::Null)),
        ),
        entry(
            Rule::on(&["approval_requested"], "wait_input"),
            content(Source::Const(Value::from("Waiting for user approval"))),
        ),
        call_entry(
            Rule::on(&["tool_called"], "subagent_call_start").about(Subject::ToolCall),
            start,
        ),
        call_entry(
            Rule::on(&["step_completed"], "subagent_call_end").about(Subject::ToolStep),
            end,
        ),
        call_entry(
            Rule::on(&["step_failed"], "subagent_call_error").about(Subject::ToolStep),
            failed,
        ),
        entry(
            Rule::on(&["step_failed"], "llm_error").kinds(&["agent"]),
            content(Source::at("/error/message")),
        ),
        entry(
            Rule::on(&["step_failed"], "error"),
            content(Source::at("/error/message")),
        ),
    ]);
    rules
}

/// The editor engine's result: `{runId, status, logs, state, waitingForInput,
/// currentNodeId}`, plus Weft's `output` and `error`.
fn result_shape() -> IndexMap<String, ResultField> {
    [
        ("runId", ResultField::RunId),
        ("status", ResultField::Status),
        ("logs", ResultField::Events),
        ("state", ResultField::State),
        ("waitingForInput", ResultField::Waiting),
        ("currentNodeId", ResultField::WaitingNode),
        ("output", ResultField::Output),
        ("error", ResultField::Error),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}
