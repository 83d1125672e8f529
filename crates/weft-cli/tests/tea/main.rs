//! Conformance of the `tea` dialect: each test cites the sentence of spec `004`
//! (`../shared/specs/004_*.txt`) or of `specs/tea-notes.md` that it checks. Flows run on
//! the real engine with real sandboxes (this package's `weft` binary as the worker), a
//! real SQLite-free in-memory store, and real HTTP servers on 127.0.0.1.

mod conformance;
mod invalid;

use serde_json::Value;
use std::path::Path;
use std::sync::Arc;
use weft_core::event::{Event, EventKind};
use weft_core::ports::RunStatus;
use weft_engine::{CollectingSink, Engine, Prepared, RunOptions, RunResult};

/// An engine as `weft run` builds it, over files in `files`.
pub fn engine(files: &Path, events: Arc<CollectingSink>) -> Engine {
    let router = weft_llm::Router::new().with_env(Arc::new(|k: &str| {
        k.ends_with("_API_KEY").then(|| "sk-test".to_owned())
    }));
    let worker = weft_code::WorkerCommand {
        program: env!("CARGO_BIN_EXE_weft").into(),
        args: vec!["sandbox-worker".into()],
    };
    let mut b = Engine::builder(Arc::new(weft_store::MemoryStore::new()))
        .models(Arc::new(router))
        .code_runner(Arc::new(weft_code::Sandboxes::new(worker, 1)))
        .secrets(serde_json::json!({"api_key": "s3cret"}))
        .sink(events);
    for (name, action) in weft_actions::builtins(files.to_path_buf()) {
        b = b.action(name, action);
    }
    b.build()
}

/// Compiles `yaml` as a tea file in `dir` (or panics with the diagnostics).
pub fn load(yaml: &str, dir: &Path) -> Arc<Prepared> {
    let loaded = weft_dialects::load_str(yaml, "flow.yaml", Some(dir), None)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(loaded.dialect, "tea");
    Arc::new(Prepared::new(loaded.flow).unwrap_or_else(|d| panic!("{d:?}")))
}

/// The diagnostics of a file that must not load, rendered.
pub fn load_error(yaml: &str) -> String {
    match weft_dialects::load_str(yaml, "flow.yaml", None, Some("tea")) {
        Ok(l) => match Prepared::new(l.flow.clone()) {
            Ok(_) => panic!("the flow loaded:\n{yaml}"),
            Err(d) => d
                .into_iter()
                .map(|d| l.locate(d).render("flow.yaml"))
                .collect::<Vec<_>>()
                .join("\n"),
        },
        Err(e) => e.render(),
    }
}

/// A run's result and its events.
pub struct Ran {
    pub result: RunResult,
    pub events: Vec<Event>,
}

impl Ran {
    /// The final state (the run's output), for a completed run.
    pub fn state(&self) -> &Value {
        assert_eq!(
            self.result.status,
            RunStatus::Completed,
            "{:?}",
            self.result.error
        );
        self.result.output.as_ref().expect("an output")
    }

    pub fn kinds(&self) -> Vec<&EventKind> {
        self.events.iter().map(|e| &e.kind).collect()
    }
}

/// Runs `yaml` with `input` as the initial state, with files in a fresh directory.
pub async fn run(yaml: &str, input: Value) -> Ran {
    let dir = tempfile::tempdir().unwrap();
    run_in(yaml, input, dir.path()).await
}

/// Runs `yaml` with its files (subgraphs, `file.*`) in `dir`.
pub async fn run_in(yaml: &str, input: Value, dir: &Path) -> Ran {
    let events = Arc::new(CollectingSink::new());
    let engine = engine(dir, events.clone());
    let result = engine
        .start(load(yaml, dir), Some(input), RunOptions::default())
        .await
        .expect("the engine drives the run");
    Ran {
        result,
        events: events.events(),
    }
}
