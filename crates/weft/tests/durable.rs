//! A flow built in Rust is as durable as one loaded from a file: it pauses at an
//! approval in SQLite, and a second runtime (another process, days later) answers it
//! and finishes without running the steps before the pause again.

use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use weft::prelude::*;
use weft_store::{Durability, SqliteStore};

fn release(drafts: Arc<AtomicUsize>) -> Block {
    let draft = handler("draft").execute(move |v: String, _ctx| {
        drafts.fetch_add(1, Ordering::SeqCst);
        async move { Ok(json!({"version": v})) }
    });
    sequencer("release")
        .then(draft)
        .then(approval(
            "sign-off",
            "Ship {{ input.version }}?",
            ["ship", "hold"],
        ))
        .map(|answer: Value| format!("decision: {}", answer["decision"].as_str().unwrap_or("")))
        .build()
}

/// The release flow and a runtime for it over the SQLite file `db`.
fn runtime(db: &std::path::Path, drafts: Arc<AtomicUsize>) -> (Block, Runtime) {
    let block = release(drafts);
    let store = Arc::new(SqliteStore::open(db, Durability::Process).unwrap());
    let rt = Runtime::builder()
        .register(&block)
        .store(store)
        .build()
        .unwrap();
    (block, rt)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_rust_flow_resumes_in_a_new_runtime_without_repeating_steps() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let drafts = Arc::new(AtomicUsize::new(0));
    let run_id = {
        let (block, rt) = runtime(&db, drafts.clone());
        let r = rt.run(&block, "1.2.0").await.unwrap();
        assert_eq!(r.status, weft_core::ports::RunStatus::Paused);
        assert_eq!(r.waiting[0]["prompt"], "Ship 1.2.0?");
        r.run_id
    };
    // Another runtime over the same file: the first one is gone.
    let (_, rt) = runtime(&db, drafts.clone());
    let done = rt
        .engine()
        .answer(&run_id, None, json!({"decision": "ship", "note": "go"}))
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(done.output.unwrap(), "decision: ship");
    assert_eq!(
        drafts.load(Ordering::SeqCst),
        1,
        "the draft step was replayed, not rerun"
    );
}
