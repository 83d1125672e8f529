//! Conformance of the `graph` dialect: each test cites the sentence of spec `003`
//! (`../shared/specs/003_*.txt`, "Workflow Semantics") that it checks, or the choice
//! `docs/dialects/graph.md` records where the spec is silent. Flows run on the real
//! engine and, for agent nodes, a real HTTP server on 127.0.0.1 speaking OpenAI's wire
//! format.

mod conformance;
mod invalid;
#[path = "../support/mod.rs"]
mod support;

use serde_json::{Value, json};
use std::sync::Arc;
use weft_core::event::Event;
use weft_core::ports::RunStatus;
use weft_dialects::EventView;
use weft_engine::{CollectingSink, Prepared, RunOptions, RunResult};
use weft_fakes::FakeServer;

/// A graph document from its nodes and connections.
pub fn graph(nodes: Value, connections: Value) -> String {
    json!({"name": "test", "nodes": nodes, "connections": connections}).to_string()
}

/// A connection `source -> target` leaving by `handle`.
pub fn edge(source: &str, target: &str, handle: Option<&str>) -> Value {
    let mut c = json!({"source": source, "target": target, "targetHandle": "input"});
    if let Some(h) = handle {
        c["sourceHandle"] = Value::from(h);
    }
    c
}

/// What one test run produced.
pub struct Graph {
    /// Where the run stands.
    pub result: RunResult,
    /// Every event the run emitted, in order.
    pub events: Vec<Event>,
    /// The spec's log entries, as `--json` and `--events` carry them.
    pub logs: Vec<Value>,
    /// The event view the graph's run was stored with.
    pub view: EventView,
    /// The result's output and state as plain JSON, for assertions.
    pub output: Option<Value>,
    /// The run's state as plain JSON.
    pub state: Value,
}

impl Graph {
    /// `(type, nodeId)` of each log entry.
    pub fn log_kinds(&self) -> Vec<(String, String)> {
        self.logs
            .iter()
            .map(|l| {
                (
                    l["type"].as_str().unwrap_or("").to_owned(),
                    l["nodeId"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect()
    }

    /// The run state, as its result carries it.
    pub fn state(&self) -> &Value {
        &self.state
    }
}

/// Runs the graph `text` (input: the start node's `initialInput` unless given); agent
/// nodes reach `server`. With `answer`, a run that pauses is answered once.
pub async fn run_with(
    text: &str,
    input: Option<Value>,
    server: Option<&FakeServer>,
    answer: Option<Value>,
) -> Graph {
    let dir = tempfile::tempdir().unwrap();
    let loaded = weft_dialects::load_str(text, "flow.json", Some(dir.path()), None)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(loaded.dialect, "graph");
    let prepared = Arc::new(Prepared::new(loaded.flow).unwrap_or_else(|d| panic!("{d:?}")));
    let base = server.map(FakeServer::base_url);
    let env: support::Env = Arc::new(move |k: &str| match k {
        "OPENAI_BASE_URL" => base.clone(),
        k if k.ends_with("_API_KEY") => Some("sk-test".into()),
        _ => None,
    });
    let sink = Arc::new(CollectingSink::new());
    let engine = support::engine(dir.path(), sink.clone(), env);
    let mut result = engine
        .start(prepared, input, RunOptions::default())
        .await
        .expect("the engine drives the run")
        .end()
        .await
        .expect("the engine drives the run");
    if let Some(a) = answer
        && result.status == RunStatus::Paused
    {
        result = engine
            .answer(&result.run_id, None, a)
            .await
            .expect("the engine resumes the run")
            .end()
            .await
            .expect("the engine resumes the run");
    }
    let events = sink.events();
    let view = loaded.events;
    let logs = events.iter().flat_map(|e| view.translate(e)).collect();
    Graph {
        output: result.output.as_ref().map(|o| o.to_value()),
        state: result.state.to_value(),
        result,
        events,
        logs,
        view,
    }
}

/// Runs a graph with no agent node.
pub async fn run(text: &str) -> Graph {
    run_with(text, None, None, None).await
}
