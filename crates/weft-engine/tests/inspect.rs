//! `weft_engine::inspect`: a stored run's steps, from its event log in a real SQLite file.

mod support;

use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use support::*;
use weft_core::ports::{RunStatus, Store};
use weft_core::{BlockError, ErrorKind};
use weft_engine::RunOptions;
use weft_engine::inspect::{StepStatus, run_detail};

const FLOW: &str = "weft: 1\nname: steps\ninput: {n: 2}\nroot:\n  sequence:\n    - id: flaky\n      handler: {name: flaky}\n      retry: {attempts: 3, backoff_ms: 1}\n    - {id: review, approval: {prompt: 'ok?'}}\n    - {id: shape, transform: {output: \"{{ input.decision }}\"}}\n";

#[tokio::test]
async fn steps_show_attempts_input_output_and_an_approval_that_waits() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(
        weft_store::SqliteStore::open(dir.path().join("runs.db"), weft_store::Durability::Process)
            .unwrap(),
    );
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let flaky = native(move |call| {
        let n = c.fetch_add(1, Ordering::SeqCst);
        async move {
            if n == 0 {
                Err(BlockError::new(ErrorKind::Handler, "first try fails"))
            } else {
                ok(json!({"doubled": call.input["n"].as_i64().unwrap() * 2}))
            }
        }
    });
    let h = harness(store.clone(), vec![("flaky", flaky)]);
    let r = h
        .engine
        .start(flow(FLOW), None, RunOptions::default())
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(r.status, RunStatus::Paused);

    let d = run_detail(store.as_ref(), &r.run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.status, "paused");
    assert_eq!(d.announced, Some("paused"), "the journal's last run event");
    let paths: Vec<&str> = d.steps.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(paths, ["root", "root/flaky", "root/review"]);
    let flaky = &d.steps[1];
    assert_eq!(flaky.status, StepStatus::Completed);
    assert_eq!(flaky.attempts, 2);
    assert_eq!(flaky.input.as_ref().unwrap(), &json!({"n": 2}));
    assert_eq!(flaky.output.as_ref().unwrap(), &json!({"doubled": 4}));
    assert!(flaky.error.is_none());
    assert!(flaky.ended_ms.unwrap() >= flaky.started_ms);
    assert_eq!(d.steps[2].status, StepStatus::Waiting);
    assert_eq!(
        d.steps[0].input, None,
        "a composite's input is its children's"
    );
    let first_started = flaky.started_ms;
    let first_elapsed = flaky.elapsed_us;

    let r = h
        .engine
        .answer(&r.run_id, None, json!({"decision": "approve"}))
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(r.status, RunStatus::Completed);
    let d = run_detail(store.as_ref(), &r.run_id)
        .await
        .unwrap()
        .unwrap();
    let paths: Vec<&str> = d.steps.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(paths, ["root", "root/flaky", "root/review", "root/shape"]);
    assert!(
        d.steps.iter().all(|s| s.status == StepStatus::Completed),
        "{:?}",
        d.steps
    );
    // The resume replayed the handler from the journal: its record is its first run's,
    // marked as replayed this time.
    let flaky = &d.steps[1];
    assert_eq!(
        (flaky.started_ms, flaky.elapsed_us),
        (first_started, first_elapsed)
    );
    assert!(flaky.replayed);
    assert!(!d.steps[3].replayed, "the step after the approval ran");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(d.steps[3].output.as_ref().unwrap(), "approve");
    assert_eq!(d.journal.len(), 2, "{:?}", d.journal);
    assert_eq!(
        d.announced,
        Some("completed"),
        "the resume's end, not its start"
    );
}

#[tokio::test]
async fn a_failed_step_shows_its_error_and_an_unknown_run_is_none() {
    let store = memory();
    let fails = native(|_| async { Err(BlockError::new(ErrorKind::Input, "no good")) });
    let h = harness(store.clone(), vec![("fails", fails)]);
    let f = flow("weft: 1\nname: f\nroot: {id: bad, handler: {name: fails}}\n");
    let r = h.run(f).await;
    assert_eq!(r.status, RunStatus::Failed);
    let d = run_detail(store.as_ref(), &r.run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.steps.len(), 1);
    assert_eq!(d.announced, Some("failed"));
    assert_eq!(d.steps[0].status, StepStatus::Failed);
    assert_eq!(d.steps[0].error.as_ref().unwrap().message, "no good");
    assert!(run_detail(store.as_ref(), "nope").await.unwrap().is_none());
}

#[tokio::test]
async fn every_step_of_a_run_lands_on_a_node_of_the_flow_s_diagram() {
    // Map items, loop iterations, branch cases, parallel branches and a graph whose
    // node runs twice: each step path, as a pattern, names a node of the drawing.
    let yaml = r#"weft: 1
name: shapes
input: {xs: [1, 2, 3]}
root:
  sequence:
    - id: each
      map:
        items: "{{ input.xs }}"
        body: {id: double, transform: {output: "{{ item * 2 }}"}}
    - id: again
      loop:
        max_iterations: 3
        until: "iteration >= 1"
        body:
          sequence:
            - {id: tick, transform: {output: "{{ iteration }}"}}
    - id: pick
      branch:
        cases:
          - {name: big, when: "input > 0", then: {id: yes, transform: {output: big}}}
        otherwise: {id: no, transform: {output: small}}
    - id: both
      parallel:
        branches:
          left: {transform: {output: l}}
          right: {passthrough: {}}
    - id: machine
      graph:
        entry: count
        nodes:
          count: {transform: {output: "{{ input + 1 if input is number else 1 }}"}}
          done: {passthrough: {}}
        edges:
          - {from: count, to: count, when: "output < 2"}
          - {from: count, to: done}
          - {from: done, to: end}
"#;
    let store = memory();
    let h = harness(store.clone(), vec![]);
    let r = h.run(flow(yaml)).await;
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    let diagram = weft_core::diagram::Diagram::of(flow(yaml).flow());
    let drawn: std::collections::HashSet<&str> = diagram
        .nodes
        .iter()
        .filter_map(|n| n.path.as_deref())
        .collect();
    let d = run_detail(store.as_ref(), &r.run_id)
        .await
        .unwrap()
        .unwrap();
    for s in d.steps.iter().filter(|s| s.kind != "sequence") {
        let pattern = weft_core::diagram::step_pattern(&s.path);
        assert!(
            drawn.contains(pattern.as_str()),
            "step {} ({pattern}) is not drawn; drawn: {drawn:?}",
            s.path
        );
    }
    for expected in [
        "root/each/[*]",
        "root/again/#*/tick",
        "root/pick/big",
        "root/machine/count",
    ] {
        assert!(drawn.contains(expected), "{expected} not drawn: {drawn:?}");
    }
    assert!(
        d.steps.iter().any(|s| s.path.ends_with("count@1")),
        "the graph node ran twice"
    );
}
