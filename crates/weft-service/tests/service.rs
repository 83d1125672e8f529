//! The service every front end checks flows and starts runs through, over a real store.

use async_trait::async_trait;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use weft_core::BlockError;
use weft_core::ports::{Native, NativeCall, NativeOutput, RunStatus, Store};
use weft_engine::Engine;
use weft_service::{FlowError, How, Service};

/// A handler that finishes only when the test lets one call through.
struct Gate(Arc<Semaphore>);

#[async_trait]
impl Native for Gate {
    async fn call(&self, _: NativeCall) -> Result<NativeOutput, BlockError> {
        self.0.acquire().await.expect("gate open").forget();
        Ok(NativeOutput::from(json!("through")))
    }
}

const GATED: &str = "weft: 1\nname: gated\nroot: {handler: {name: gate}}\n";

fn service(gate: &Arc<Semaphore>) -> Service {
    let store: Arc<dyn Store> = Arc::new(weft_store::MemoryStore::new());
    let engine = Engine::builder(store)
        .handler("gate", Arc::new(Gate(gate.clone())))
        .build();
    Service::new(engine, Some(json!({"files": "/srv/files"})))
}

#[tokio::test]
async fn an_invalid_flow_is_refused_with_its_problem_located_in_the_text() {
    let s = service(&Arc::new(Semaphore::new(0)));
    let text = "weft: 1\nname: broken\nroot:\n  handler: {name: gate}\n  retry: {attempts: many}\n";
    let problems = s
        .check(text, None, Some("broken.yaml"))
        .err()
        .expect("refused");
    let located = problems
        .iter()
        .find(|d| d.loc.is_some())
        .expect("a located problem");
    assert!(
        located.render("broken.yaml").contains("broken.yaml:5"),
        "{located:?}"
    );

    let checked = s.check(GATED, None, None).expect("valid");
    assert_eq!(checked.dialect(), "native");
    assert_eq!(checked.source().name, "gated");
    assert!(checked.warnings().is_empty());
}

#[tokio::test]
async fn a_run_records_what_the_front_end_said_and_the_service_s_settings() {
    let gate = Arc::new(Semaphore::new(1));
    let s = service(&gate);
    let checked = s.check(GATED, None, None).unwrap();
    let how = How {
        run_id: Some("run-1".into()),
        file: Some("/flows/gated.yaml".into()),
        ..How::default()
    };
    let started = s.start(&checked, None, how).await.unwrap();
    assert!(!started.queued);
    let result = started.underway.end().await.unwrap();
    assert_eq!(result.status, RunStatus::Completed);
    let rec = s.store().get_run("run-1").await.unwrap().unwrap();
    assert_eq!(rec.source.as_deref(), Some("/flows/gated.yaml"));
    assert_eq!(rec.dialect.as_deref(), Some("native"));
    assert_eq!(
        rec.source_hash.as_deref(),
        Some(checked.loaded().source_hash.as_str())
    );
    assert_eq!(rec.flow_id.as_deref(), Some(checked.source().id.as_str()));
    assert_eq!(rec.settings, Some(json!({"files": "/srv/files"})));
    assert_eq!(rec.input, json!({}));

    // A door's own settings replace the service's.
    gate.add_permits(1);
    let door = How {
        settings: Some(json!({"thread": "t1"})),
        ..How::default()
    };
    let run = s
        .start(&checked, Some(json!({"x": 1})), door)
        .await
        .unwrap();
    let id = run.underway.run_id().to_owned();
    run.underway.end().await.unwrap();
    let rec = s.store().get_run(&id).await.unwrap().unwrap();
    assert_eq!(rec.settings, Some(json!({"thread": "t1"})));
    assert_eq!(rec.input, json!({"x": 1}));
}

#[tokio::test]
async fn beyond_the_run_limit_a_run_waits_queued_and_starts_when_a_slot_frees() {
    let gate = Arc::new(Semaphore::new(0));
    let s = service(&gate).with_run_limit(Some(1));
    let checked = s.check(GATED, None, None).unwrap();
    let first = s.start(&checked, None, How::default()).await.unwrap();
    let second = s.start(&checked, None, How::default()).await.unwrap();
    assert!(!first.queued);
    assert!(
        second.queued,
        "the second run must wait for the first's slot"
    );
    let second_id = second.underway.run_id().to_owned();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let waiting = s.store().get_run(&second_id).await.unwrap().unwrap();
    assert_eq!(waiting.status, RunStatus::Queued);

    gate.add_permits(2);
    assert_eq!(
        first.underway.end().await.unwrap().status,
        RunStatus::Completed
    );
    assert_eq!(
        second.underway.end().await.unwrap().status,
        RunStatus::Completed
    );
}

#[tokio::test]
async fn a_saved_flow_is_found_by_name_and_version_and_checked_again() {
    let s = service(&Arc::new(Semaphore::new(0)));
    match s.saved("gated", None).await {
        Err(FlowError::NoSuchName {
            name,
            version: None,
        }) => assert_eq!(name, "gated"),
        other => panic!("expected no such name, got {:?}", other.err()),
    }
    let checked = s.check(GATED, None, None).unwrap();
    s.engine()
        .save_flow(&checked.source(), "gated")
        .await
        .unwrap();
    let saved = s.saved("gated", None).await.unwrap();
    assert_eq!(saved.version.version, 1);
    assert_eq!(saved.checked.prepared().hash(), checked.prepared().hash());
    assert!(matches!(
        s.saved("gated", Some(2)).await,
        Err(FlowError::NoSuchName {
            version: Some(2),
            ..
        })
    ));
    assert!(matches!(
        s.stored("no-such-id").await,
        Err(FlowError::NoSuchId(_))
    ));
}
