//! Conformance of the `tea` dialect: each test cites the sentence of spec `004`
//! (`../shared/specs/004_*.txt`) or of `specs/tea-notes.md` that it checks. Flows run on
//! the real engine with real sandboxes (this package's `weft` binary as the worker), a
//! real SQLite-free in-memory store, and real HTTP servers on 127.0.0.1.

mod conformance;
mod dataflow;
mod extraction;
mod invalid;
mod model_patterns;
mod model_settings;
mod planning;
mod reasoning_patterns;
mod retry_loop;
#[path = "../support/mod.rs"]
mod support;
mod tea_files;

use serde_json::Value;
use std::path::Path;
pub use support::Ran;

/// The text of the first message of each request a fake model server received.
pub fn first_messages(sent: &[weft_fakes::Received]) -> Vec<String> {
    sent.iter()
        .map(|r| {
            r.body["messages"][0]["content"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

/// Compiles `yaml` as a tea file in `dir` (or panics with the diagnostics).
pub fn load(yaml: &str, dir: &Path) -> std::sync::Arc<weft_engine::Prepared> {
    support::load(yaml, dir, "tea")
}

/// Runs `yaml` with `input` as the initial state, with files in a fresh directory.
pub async fn run(yaml: &str, input: Value) -> Ran {
    let dir = tempfile::tempdir().unwrap();
    run_in(yaml, input, dir.path()).await
}

/// Runs `yaml` with its files (subgraphs, `file.*`) in `dir`.
pub async fn run_in(yaml: &str, input: Value, dir: &Path) -> Ran {
    support::run_in(yaml, "tea", input, dir, support::test_keys()).await
}

/// The `step` of each record of a TEA trace (`reasoning_trace`, `planning_trace`).
pub fn trace_steps(trace: &Value) -> Vec<&str> {
    trace
        .as_array()
        .expect("a trace is a list")
        .iter()
        .map(|s| s["step"].as_str().expect("each record names its step"))
        .collect()
}
