//! Conformance of the `blocks` dialect: each test cites the sentence of spec `000`
//! (`../shared/specs/000_*.txt`, "Block Runtime Contract") that it checks, or the choice
//! `docs/dialects/blocks.md` records where the spec is silent. Flows run on the real
//! engine with real sandboxes and, for `llm` blocks, a real HTTP server on 127.0.0.1
//! speaking OpenAI's wire format.

mod conformance;
mod dataflow;
mod invalid;
#[path = "../support/mod.rs"]
mod support;

use serde_json::Value;
use std::sync::Arc;
pub use support::Ran;
use weft_fakes::{FakeServer, Received, Reply, Wire};

/// Runs `text` with `input` as the flow's global input; `llm` blocks reach `server`.
pub async fn run_with(text: &str, input: Value, server: Option<&FakeServer>) -> Ran {
    let dir = tempfile::tempdir().unwrap();
    let base = server.map(FakeServer::base_url);
    let env: support::Env = Arc::new(move |k: &str| match k {
        "OPENAI_BASE_URL" => base.clone(),
        k if k.ends_with("_API_KEY") => Some("sk-test".into()),
        _ => None,
    });
    support::run_in(text, "blocks", input, dir.path(), env).await
}

/// Runs `text`, which has no `llm` block.
pub async fn run(text: &str, input: Value) -> Ran {
    run_with(text, input, None).await
}

/// A server whose answer is computed from the last user message of each request.
pub async fn answering(
    f: impl Fn(&str, &Received) -> String + Send + Sync + 'static,
) -> FakeServer {
    FakeServer::start_with(Wire::OpenAi, std::time::Duration::ZERO, move |r| {
        Reply::text(f(r.last_user_message(), r))
    })
    .await
}
