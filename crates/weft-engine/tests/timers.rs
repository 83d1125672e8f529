//! `wait` steps: a run pauses until a time, holding nothing, and whichever engine wakes
//! it first (after a restart too) continues it from its journal.

mod support;

use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use support::*;
use weft_core::ports::{RunStatus, Store};
use weft_engine::{EngineError, Prepared};

fn sqlite(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    Arc::new(
        weft_store::SqliteStore::open(dir.path().join("runs.db"), weft_store::Durability::Process)
            .unwrap(),
    )
}

const WAITS: &str = "weft: 1\nname: w\nroot:\n  sequence:\n    - {id: before, handler: {name: count}}\n    - {id: pause, wait: {for: 400ms}}\n    - {id: after, transform: {output: '{{ input }} waited'}}\n";

#[tokio::test]
async fn a_run_waits_paused_and_a_new_engine_wakes_it_once_its_time_came() {
    let dir = tempfile::tempdir().unwrap();
    let calls = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counter = {
        let calls = calls.clone();
        native(move |_| {
            calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async { ok(json!("hello")) }
        })
    };
    let first = harness(sqlite(&dir), vec![("count", counter.clone())]);
    let started = weft_core::event::now_ms() as i64;
    let paused = first.run(flow(WAITS)).await;
    assert_eq!(paused.status, RunStatus::Paused);
    let rec = first
        .engine
        .store()
        .get_run(&paused.run_id)
        .await
        .unwrap()
        .unwrap();
    let wake = rec.wake_ms.expect("a paused wait has a wake time");
    assert!(
        (started + 400..started + 1_400).contains(&wake),
        "{wake} vs {started}"
    );
    assert_eq!(paused.waiting[0]["wake_ms"], json!(wake));
    assert_eq!(paused.waiting[0]["timer_only"], json!(true));

    // Nobody may answer a plain wait, and waking it early does nothing.
    let answered = first
        .engine
        .answer(&paused.run_id, None, json!({"decision": "approve"}))
        .await;
    assert!(
        matches!(answered, Err(EngineError::Refused(_))),
        "{answered:?}"
    );
    assert!(first.engine.wake(&paused.run_id).await.unwrap().is_none());
    drop(first);

    tokio::time::sleep(Duration::from_millis(500)).await;
    let second = harness(sqlite(&dir), vec![("count", counter)]);
    let woken = second
        .engine
        .wake(&paused.run_id)
        .await
        .unwrap()
        .expect("due");
    let again = second.engine.wake(&paused.run_id).await.unwrap();
    assert!(again.is_none(), "a run is woken once");
    let done = woken.end().await.unwrap();
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.error);
    assert_eq!(done.output.unwrap(), "hello waited");
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the step before ran once"
    );
    assert!(second.kinds().iter().any(
        |k| matches!(k, weft_core::event::EventKind::TimerFired { key } if key.ends_with("pause"))
    ));
    let rec = second
        .engine
        .store()
        .get_run(&paused.run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.wake_ms, None);
}

#[tokio::test]
async fn a_wait_with_or_approval_is_continued_early_by_a_person_with_their_decision() {
    let yaml = "weft: 1\nname: w\nroot:\n  sequence:\n    - id: hold\n      wait: {for: 1h, or_approval: {prompt: 'Go on now?', options: [now, never]}}\n    - {transform: {output: '{{ input }}'}}\n";
    let h = harness(memory(), vec![]);
    let paused = h.run(flow(yaml)).await;
    assert_eq!(paused.status, RunStatus::Paused);
    assert_eq!(paused.waiting[0]["prompt"], json!("Go on now?"));
    let done = h
        .engine
        .answer(&paused.run_id, None, json!({"decision": "now"}))
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.error);
    // The person's answer took the run: a timer that comes due later finds nothing.
    assert!(h.engine.wake(&paused.run_id).await.unwrap().is_none());
}

#[tokio::test]
async fn a_wait_until_a_past_time_goes_straight_on_and_a_bad_time_fails_clearly() {
    let yaml = "weft: 1\nname: w\nroot:\n  sequence:\n    - {wait: {until: '{{ input.at }}'}}\n    - {transform: {output: done}}\n";
    let h = harness(memory(), vec![]);
    let past = h
        .engine
        .start(
            flow(yaml),
            Some(json!({"at": "2020-01-01T00:00:00+01:00"})),
            Default::default(),
        )
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(past.status, RunStatus::Completed, "{:?}", past.error);
    let bad = h
        .engine
        .start(
            flow(yaml),
            Some(json!({"at": "next tuesday"})),
            Default::default(),
        )
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(bad.status, RunStatus::Failed);
    let message = bad.error.unwrap().message;
    assert!(message.contains("RFC 3339"), "{message}");
}

#[test]
fn a_wait_names_one_valid_time() {
    for (yaml, expected) in [
        ("wait: {}", "exactly one of `for`"),
        (
            "wait: {for: 2h, until: '2026-01-01T00:00:00Z'}",
            "exactly one of `for`",
        ),
        ("wait: {for: soon}", "not a duration"),
        ("wait: {until: tomorrow}", "not a time"),
    ] {
        let text = format!("weft: 1\nname: w\nroot: {{{yaml}}}\n");
        let err = weft_dialects::load_str(&text, "w.yaml", None, None)
            .and_then(|l| {
                Prepared::new(l.flow)
                    .map(|_| ())
                    .map_err(|d| panic!("{d:?}"))
            })
            .expect_err(yaml);
        assert!(err.to_string().contains(expected), "{yaml}: {err}");
    }
}
