//! Conformance of the `souls` dialect: each test cites the sentence of spec `001`
//! (`../shared/specs/001_*.txt`, "Block Type Reference") or of the issue that describes
//! the file shape, or the choice `docs/dialects/souls.md` records where they are silent.
//! Flows run on the real engine, the real Python sandbox and, for souls, a real HTTP
//! server on 127.0.0.1 speaking OpenAI's wire format.

mod conformance;
mod invalid;
mod runsight;
#[path = "../support/mod.rs"]
mod support;

use serde_json::Value;
use std::path::Path;
use std::sync::Arc;
pub use support::Ran;
use weft_fakes::{FakeServer, Received, Reply, Wire};

/// Runs `text` on the task `input`, with its files (the `souls/` directory) in `dir`;
/// souls reach `server`.
pub async fn run_in(text: &str, input: Value, server: Option<&FakeServer>, dir: &Path) -> Ran {
    let base = server.map(FakeServer::base_url);
    let env: support::Env = Arc::new(move |k: &str| match k {
        "OPENAI_BASE_URL" => base.clone(),
        k if k.ends_with("_API_KEY") => Some("sk-test".into()),
        _ => None,
    });
    support::run_in(text, "souls", input, dir, env).await
}

/// Runs `text` on the task `input` in a fresh directory.
pub async fn run(text: &str, input: Value, server: Option<&FakeServer>) -> Ran {
    let dir = tempfile::tempdir().unwrap();
    run_in(text, input, server, dir.path()).await
}

/// A server whose answer is computed from each request's user message and the request.
pub async fn answering(
    f: impl Fn(&str, &Received) -> String + Send + Sync + 'static,
) -> FakeServer {
    FakeServer::start_with(Wire::OpenAi, std::time::Duration::ZERO, move |r| {
        Reply::text(f(&user_message(r), r))
    })
    .await
}

/// The last user message of a request.
pub fn user_message(r: &Received) -> String {
    r.body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// The system message of a request, if any.
pub fn system_message(r: &Received) -> Option<String> {
    r.body["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "system"))
        .and_then(|m| m["content"].as_str())
        .map(str::to_owned)
}

/// The last tool result a request carries, if any.
pub fn tool_result(r: &Received) -> Option<String> {
    r.body["messages"]
        .as_array()?
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .map(str::to_owned)
}
