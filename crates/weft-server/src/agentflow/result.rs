//! A run as AgentFlow's API reports it: `WorkflowRunResult` (`{runId, status, logs,
//! state, waitingForInput, currentNodeId, workflow}`), read from the run's record and
//! its stored events through the graph dialect's view.

use serde_json::{Map, Value, json};
use std::collections::HashSet;
use weft_core::event::Event;
use weft_core::ports::{RunRecord, RunStatus, Store, StoreError};
use weft_core::value::Shared;
use weft_dialects::EventView;
use weft_dialects::view::RunSummary;

/// How many stored events one read takes.
const EVENT_PAGE: usize = 1_000;

/// AgentFlow's status for a Weft run status: a run waiting for a worker has not
/// started (`pending`); a cancelled run did not complete (`failed`).
pub(super) fn status(s: RunStatus) -> &'static str {
    match s {
        RunStatus::Queued => "pending",
        RunStatus::Running => "running",
        RunStatus::Paused => "paused",
        RunStatus::Completed => "completed",
        RunStatus::Failed | RunStatus::Cancelled => "failed",
    }
}

/// The `WorkflowLogEntry`s (`{timestamp, nodeId, type, content}`) the view names for
/// one engine event, less those `replays` has seen; `content` is always text, as
/// AgentFlow's engine logs it.
pub(super) fn entries(view: &EventView, e: &Event, replays: &mut Replays) -> Vec<Value> {
    let named = view.translate(e);
    if named.is_empty() {
        return named;
    }
    let path = step_path(e);
    named
        .into_iter()
        .filter_map(|named| {
            let content = match named.get("content") {
                Some(Value::String(s)) => s.clone(),
                None | Some(Value::Null) => String::new(),
                Some(other) => other.to_string(),
            };
            let kind = named["type"].as_str().unwrap_or_default().to_owned();
            replays.first_time(&path, &kind, &content).then(|| {
                json!({
                    "timestamp": timestamp(e.at_ms),
                    "nodeId": named.get("nodeId").cloned().unwrap_or_else(|| Value::from("system")),
                    "type": kind,
                    "content": content,
                })
            })
        })
        .collect()
}

/// The entries a run has logged, so that the ones a resumed drive logs again for the
/// steps it replays from the journal are left out: AgentFlow's engine keeps a paused
/// run in memory and logs only what happens after the answer. An entry is the same
/// when its step path, type and content are (a node reached again has another path).
#[derive(Debug, Default)]
pub(super) struct Replays {
    seen: HashSet<(String, String, String)>,
}

impl Replays {
    /// Whether this entry is new, remembering it.
    fn first_time(&mut self, path: &str, kind: &str, content: &str) -> bool {
        self.seen
            .insert((path.to_owned(), kind.to_owned(), content.to_owned()))
    }
}

/// The step an event is about: its `path` (an approval's: its `key`).
fn step_path(e: &Event) -> String {
    let v = serde_json::to_value(&e.kind).unwrap_or_default();
    v.get("path")
        .or_else(|| v.get("key"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// A time as JavaScript's `toISOString` writes it: `2026-11-27T14:03:34.123Z`.
fn timestamp(at_ms: u64) -> String {
    i64::try_from(at_ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_default()
}

/// The log entries of run `rec` stored after event `after` (all of them from `None`),
/// less those `replays` has seen.
pub(super) async fn logs(
    store: &dyn Store,
    rec: &RunRecord,
    view: &EventView,
    mut after: Option<u64>,
    replays: &mut Replays,
) -> Result<Vec<Value>, StoreError> {
    let mut logs = Vec::new();
    loop {
        let page = store.events(&rec.id, after, EVENT_PAGE).await?;
        for e in &page {
            logs.extend(entries(view, e, replays));
        }
        match page.last() {
            Some(last) if page.len() == EVENT_PAGE => after = Some(last.seq),
            _ => return Ok(logs),
        }
    }
}

/// The result of run `rec` with `logs`, and the graph it ran (`workflow`) when known.
pub(super) fn shaped(
    rec: &RunRecord,
    view: &EventView,
    logs: Vec<Value>,
    workflow: Option<Value>,
) -> Value {
    let empty = json!({});
    let state = rec.state.as_ref().map(Shared::json);
    let state = state.as_deref().unwrap_or(&empty);
    let output = rec.output.as_ref().map(Shared::json);
    let waiting = match &rec.waiting {
        Some(Value::Array(w)) => w.clone(),
        _ => Vec::new(),
    };
    let error = rec.error.clone().unwrap_or(Value::Null);
    let summary = RunSummary {
        run_id: &rec.id,
        status: status(rec.status),
        state,
        waiting: &waiting,
        output: output.as_deref(),
        error: &error,
    };
    let mut out = match view.result(&summary, &logs) {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    // A run waits for input only while it is paused (a record keeps its approvals
    // until a claim clears them).
    out.insert(
        "waitingForInput".into(),
        Value::Bool(rec.status == RunStatus::Paused && !waiting.is_empty()),
    );
    if rec.status != RunStatus::Paused {
        out.insert("currentNodeId".into(), Value::Null);
    }
    if let Some(w) = workflow {
        out.insert("workflow".into(), w);
    }
    Value::Object(out)
}

/// The graph a run ran, as AgentFlow's engine returns it: its stored text, with legacy
/// `input` nodes read as `approval`.
pub(super) async fn workflow(store: &dyn Store, rec: &RunRecord) -> Option<Value> {
    let id = rec.flow_id.as_deref()?;
    let source = store.get_source(id).await.ok()??;
    let doc: Value = serde_json::from_str(&source.text).ok()?;
    Some(normalized(doc))
}

/// `graph` with legacy `input` nodes as `approval`, keeping only `nodes` and
/// `connections` (`edges` read as them), as AgentFlow's engine normalizes it.
pub(super) fn normalized(graph: Value) -> Value {
    let mut nodes = graph.get("nodes").cloned().unwrap_or_else(|| json!([]));
    if let Value::Array(list) = &mut nodes {
        for n in list {
            if n.get("type").and_then(Value::as_str) == Some("input") {
                n["type"] = Value::from("approval");
            }
        }
    }
    let connections = graph
        .get("connections")
        .or_else(|| graph.get("edges"))
        .cloned()
        .unwrap_or_else(|| json!([]));
    json!({"nodes": nodes, "connections": connections})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_written_as_javascript_writes_them() {
        assert_eq!(timestamp(1_795_787_977_899), "2026-11-27T13:59:37.899Z");
        assert_eq!(timestamp(1_795_787_977_000), "2026-11-27T13:59:37.000Z");
    }

    #[test]
    fn legacy_input_nodes_are_approvals_and_edges_are_connections() {
        let g = normalized(json!({
            "name": "x",
            "nodes": [{"id": "a", "type": "input"}, {"id": "s", "type": "start"}],
            "edges": [{"source": "s", "target": "a"}],
        }));
        assert_eq!(
            g,
            json!({
                "nodes": [{"id": "a", "type": "approval"}, {"id": "s", "type": "start"}],
                "connections": [{"source": "s", "target": "a"}],
            })
        );
    }
}
