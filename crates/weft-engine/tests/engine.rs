//! The engine's behaviour, end to end, on real stores.

mod support;

use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use support::*;
use weft_core::event::{EventKind, LoopExit};
use weft_core::ports::RunStatus;
use weft_core::{BlockError, ErrorKind};
use weft_engine::RunOptions;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_branches_really_run_concurrently() {
    // Three branches wait on one barrier of three: only concurrent execution gets past it.
    let barrier = Arc::new(tokio::sync::Barrier::new(3));
    let b = barrier.clone();
    let h = harness(
        memory(),
        vec![(
            "meet",
            native(move |c| {
                let b = b.clone();
                async move {
                    b.wait().await;
                    ok(json!(c.config["who"]))
                }
            }),
        )],
    );
    let f = flow(
        "weft: 1\nname: p\nroot:\n  parallel:\n    branches:\n      a: {handler: {name: meet, config: {who: a}}}\n      b: {handler: {name: meet, config: {who: b}}}\n      c: {handler: {name: meet, config: {who: c}}}\n",
    );
    let run = h
        .engine
        .start(f, None, RunOptions::default())
        .await
        .unwrap();
    let r = run
        .within(Duration::from_secs(10))
        .await
        .expect("branches deadlocked: they did not run concurrently")
        .unwrap();
    assert_eq!(r.status, RunStatus::Completed);
    assert_eq!(r.output.unwrap(), json!({"a": "a", "b": "b", "c": "c"}));
}

/// A handler that waits and answers as `plan` says for its input, and the most of its
/// calls that were in flight at once.
fn peak_counting(
    plan: fn(&serde_json::Value) -> (u64, serde_json::Value),
) -> (Arc<dyn weft_core::ports::Native>, Arc<AtomicUsize>) {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let p2 = peak.clone();
    let handler = native(move |c| {
        let (f, p) = (in_flight.clone(), p2.clone());
        async move {
            let now = f.fetch_add(1, Ordering::SeqCst) + 1;
            p.fetch_max(now, Ordering::SeqCst);
            let (ms, answer) = plan(&c.input);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            f.fetch_sub(1, Ordering::SeqCst);
            ok(answer)
        }
    });
    (handler, peak)
}

#[tokio::test]
async fn map_respects_max_concurrency_and_keeps_item_order() {
    // Later items finish first, so completion order is the reverse of item order.
    let (work, peak) = peak_counting(|input| {
        let n = input.as_u64().unwrap();
        (40 - n * 5, json!(n * 10))
    });
    let h = harness(memory(), vec![("work", work)]);
    let f = flow(
        "weft: 1\nname: m\ninput: {xs: [1, 2, 3, 4, 5, 6]}\nroot:\n  map:\n    items: \"{{ input.xs }}\"\n    max_concurrency: 2\n    body: {handler: {name: work}}\n",
    );
    let r = h.run(f).await;
    assert_eq!(r.output.unwrap(), json!([10, 20, 30, 40, 50, 60]));
    assert!(
        peak.load(Ordering::SeqCst) <= 2,
        "peak {}",
        peak.load(Ordering::SeqCst)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_map_without_max_concurrency_keeps_1024_branches_in_flight() {
    // docs/engine.md: without `max_concurrency`, at most 1,024 branches at once; a
    // larger `max_concurrency` lets more wait together.
    let (wait, peak) = peak_counting(|_| (300, json!(1)));
    let h = harness(memory(), vec![("wait", wait)]);
    for (limit, expected) in [("", 1024), ("    max_concurrency: 1100\n", 1100)] {
        peak.store(0, Ordering::SeqCst);
        let f = flow(&format!(
            "weft: 1\nname: m\ninput: {{n: 1100}}\nroot:\n  map:\n    items: \"{{{{ range(input.n) | list }}}}\"\n{limit}    body: {{handler: {{name: wait}}}}\n"
        ));
        let r = h.run(f).await;
        assert_eq!(
            r.output.unwrap().to_value().as_array().map(Vec::len),
            Some(1100)
        );
        assert_eq!(peak.load(Ordering::SeqCst), expected, "{limit:?}");
    }
}

#[tokio::test]
async fn parallel_outputs_and_state_writes_merge_in_declaration_order() {
    let h = harness(
        memory(),
        vec![(
            "slow",
            native(|c| async move {
                tokio::time::sleep(Duration::from_millis(c.config["ms"].as_u64().unwrap())).await;
                ok(c.config["v"].clone())
            }),
        )],
    );
    // `first` finishes last; its write still comes first, so `last` is written by `third`.
    let f = flow(
        "weft: 1\nname: o\nroot:\n  parallel:\n    branches:\n      first: {handler: {name: slow, config: {ms: 60, v: 1}}, set: {last: '{{ output }}'}}\n      second: {handler: {name: slow, config: {ms: 30, v: 2}}, set: {last: '{{ output }}'}}\n      third: {handler: {name: slow, config: {ms: 1, v: 3}}, set: {last: '{{ output }}'}}\n",
    );
    let r = h.run(f).await;
    let out = r.output.unwrap().into_value();
    let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["first", "second", "third"]);
    assert_eq!(r.state.to_value()["last"], 3);
}

/// Handlers `boom`, which fails at once, and `slow`, which answers after 300 ms and
/// counts in the returned counter that it finished.
fn boom_and_slow() -> (Harness, Arc<AtomicUsize>) {
    let finished = Arc::new(AtomicUsize::new(0));
    let fin = finished.clone();
    let h = harness(
        memory(),
        vec![
            (
                "boom",
                native(|_| async { Err(BlockError::new(ErrorKind::Handler, "boom")) }),
            ),
            (
                "slow",
                native(move |_| {
                    let fin = fin.clone();
                    async move {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        fin.fetch_add(1, Ordering::SeqCst);
                        ok(json!("late"))
                    }
                }),
            ),
        ],
    );
    (h, finished)
}

#[tokio::test]
async fn fail_fast_cancels_the_other_branches() {
    let (h, finished) = boom_and_slow();
    let f = flow(
        "weft: 1\nname: ff\nroot:\n  parallel:\n    fail_fast: true\n    branches:\n      a: {handler: {name: slow}}\n      b: {handler: {name: boom}}\n",
    );
    let r = h.run(f).await;
    assert_eq!(r.status, RunStatus::Failed);
    assert_eq!(r.error.unwrap().message, "boom");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        finished.load(Ordering::SeqCst),
        0,
        "the slow branch was not cancelled"
    );
}

#[tokio::test]
async fn fail_fast_with_collected_failures_cancels_the_rest_and_goes_on() {
    let (h, finished) = boom_and_slow();
    let f = flow(
        "weft: 1\nname: ffc\nroot:\n  parallel:\n    fail_fast: true\n    on_error: collect\n    branches:\n      a: {handler: {name: slow}}\n      b: {handler: {name: boom}}\n",
    );
    let r = h.run(f).await;
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    let out = r.output.unwrap().into_value();
    assert_eq!(out["b"]["error"]["message"], "boom");
    assert_eq!(out["a"]["error"]["kind"], "cancelled", "{out}");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(finished.load(Ordering::SeqCst), 0, "the slow branch ran on");
}

#[tokio::test]
async fn collected_failures_stay_in_the_results() {
    let h = harness(
        memory(),
        vec![(
            "odd_fails",
            native(|c| async move {
                let n = c.input.as_i64().unwrap();
                if n % 2 == 1 {
                    Err(BlockError::new(ErrorKind::Handler, format!("{n} is odd")))
                } else {
                    ok(json!(n))
                }
            }),
        )],
    );
    let f = flow(
        "weft: 1\nname: c\nroot:\n  map:\n    items: '{{ [1, 2, 3] }}'\n    on_error: collect\n    body: {handler: {name: odd_fails}}\n",
    );
    let r = h.run(f).await;
    let out = r.output.unwrap().into_value();
    assert_eq!(out[1], 2);
    assert_eq!(out[0]["error"]["message"], "1 is odd");
    assert_eq!(out[2]["error"]["kind"], "handler");
}

#[tokio::test]
async fn retries_back_off_until_success() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c2 = calls.clone();
    let h = harness(
        memory(),
        vec![(
            "flaky",
            native(move |_| {
                let c = c2.clone();
                async move {
                    if c.fetch_add(1, Ordering::SeqCst) < 2 {
                        Err(BlockError::new(ErrorKind::RateLimit, "slow down"))
                    } else {
                        ok(json!("done"))
                    }
                }
            }),
        )],
    );
    let f = flow(
        "weft: 1\nname: r\nroot: {handler: {name: flaky}, retry: {attempts: 3, backoff_ms: 1}}\n",
    );
    let r = h.run(f).await;
    assert_eq!(r.output.unwrap(), "done");
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let retries = h
        .kinds()
        .into_iter()
        .filter(|k| matches!(k, EventKind::StepRetrying { .. }))
        .count();
    assert_eq!(retries, 2);

    calls.store(0, Ordering::SeqCst);
    let f = flow(
        "weft: 1\nname: r2\nroot: {handler: {name: flaky}, retry: {attempts: 2, backoff_ms: 1}}\n",
    );
    let r = h.run(f).await;
    assert_eq!(r.status, RunStatus::Failed);
    assert_eq!(r.error.unwrap().kind, ErrorKind::RateLimit);
}

#[tokio::test]
async fn timeouts_fail_with_their_kind_and_rescue_matches_kinds() {
    let h = harness(
        memory(),
        vec![(
            "hang",
            native(|_| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                ok(json!(null))
            }),
        )],
    );
    let f = flow("weft: 1\nname: t\nroot: {handler: {name: hang}, timeout_ms: 30}\n");
    let r = h.run(f).await;
    let e = r.error.unwrap();
    assert_eq!(e.kind, ErrorKind::Timeout);
    assert_eq!(e.path, "root");

    let f = flow(
        "weft: 1\nname: t2\nroot:\n  handler: {name: hang}\n  timeout_ms: 30\n  rescue:\n    - when: [rate_limit]\n      then: {transform: {output: wrong}}\n    - when: [timeout]\n      then: {transform: {output: '{{ error.kind }} handled for {{ input.input.q }}'}}\ninput: {q: x}\n",
    );
    let r = h.run(f).await;
    assert_eq!(r.output.unwrap(), "timeout handled for x");
}

#[tokio::test]
async fn assertions_fail_blocks_and_can_be_retried() {
    let h = harness(memory(), vec![]);
    let f = flow(
        "weft: 1\nname: a\ninput: {n: 3}\nroot:\n  transform: {output: '{{ input.n }}'}\n  assert:\n    - that: output > 5\n      message: n is too small\n",
    );
    let r = h.run(f).await;
    let e = r.error.unwrap();
    assert_eq!(
        (e.kind, e.message.as_str()),
        (ErrorKind::Assertion, "n is too small")
    );
}

#[tokio::test]
async fn while_loops_end_on_their_condition_like_the_tea_counter_example() {
    let h = harness(memory(), vec![]);
    let f = flow(
        "weft: 1\nname: counter\nstate: {count: 0, sum: 0}\nroot:\n  loop:\n    while: state.count < 5\n    max_iterations: 10\n    body:\n      transform:\n        output: {count: '{{ state.count + 1 }}', sum: '{{ state.sum + state.count + 1 }}'}\n      merge_output: true\n",
    );
    let r = h.run(f).await;
    assert_eq!(r.state, json!({"count": 5, "sum": 15}));
    let end = h.kinds().into_iter().find_map(|k| match k {
        EventKind::LoopEnded {
            iterations, reason, ..
        } => Some((iterations, reason)),
        _ => None,
    });
    assert_eq!(end, Some((5, LoopExit::ConditionFalse)));
}

#[tokio::test]
async fn results_pointing_at_the_state_read_as_json_and_a_list_of_them_is_not_merged() {
    let h = harness(memory(), vec![]);
    // Each result points at the state (`{{ state }}`); the map's output is a list of
    // them, built of shared parts.
    let results = "map:\n    items: '{{ [1, 2] }}'\n    body: {transform: {output: {seen: '{{ state }}', n: '{{ item }}'}}}";
    let refused = flow(&format!(
        "weft: 1\nname: m\nstate: {{items: [7, 8]}}\nroot:\n  {results}\n  merge_output: true\n"
    ));
    let r = h.run(refused).await;
    let e = r.error.expect("a list cannot be merged into the state");
    assert!(e.message.contains("returned a list"), "{}", e.message);
    let kept = flow(&format!(
        "weft: 1\nname: m\nstate: {{items: [7, 8]}}\nroot:\n  {results}\n  set: {{all: '{{{{ output }}}}', last: '{{{{ output[1].seen.items }}}}'}}\n"
    ));
    let r = h.run(kept).await;
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(
        r.state,
        json!({
            "items": [7, 8],
            "all": [{"seen": {"items": [7, 8]}, "n": 1}, {"seen": {"items": [7, 8]}, "n": 2}],
            "last": [7, 8],
        })
    );
}

#[tokio::test]
async fn loops_stop_at_their_bound() {
    let h = harness(memory(), vec![]);
    let f = flow(
        "weft: 1\nname: l\nroot:\n  loop: {while: 'true', max_iterations: 3, body: {transform: {output: '{{ input + 1 }}'}}}\ninput: 0\n",
    );
    let r = h.run(f).await;
    assert_eq!(r.output.unwrap(), 3);
    assert!(h.kinds().iter().any(|k| matches!(
        k,
        EventKind::LoopEnded {
            reason: LoopExit::MaxIterationsReached,
            iterations: 3,
            ..
        }
    )));

    let f = flow(
        "weft: 1\nname: l2\nroot:\n  loop: {until: 'output > 100', max_iterations: 3, fail_at_max: true, body: {transform: {output: '{{ input + 1 }}'}}}\ninput: 0\n",
    );
    let r = h.run(f).await;
    let e = r.error.unwrap();
    assert_eq!(e.kind, ErrorKind::LoopExhausted);
    assert_eq!(e.path, "root");
    assert!(e.message.contains("bound of 3 iterations"), "{}", e.message);
    assert_eq!(
        e.detail_field("condition"),
        Some(&serde_json::json!("until output > 100"))
    );

    // warn_at_max: the last value, and a warning event that says why.
    let h = harness(memory(), vec![]);
    let f = flow(
        "weft: 1\nname: l3\nroot:\n  id: climb\n  loop: {until: 'output > 100', max_iterations: 2, warn_at_max: true, body: {transform: {output: '{{ input + 1 }}'}}}\ninput: 0\n",
    );
    assert_eq!(h.run(f).await.output.unwrap(), 2);
    let warning = h.kinds().into_iter().find_map(|k| match k {
        EventKind::Warning { code, message, .. } => Some((code, message)),
        _ => None,
    });
    let (code, message) = warning.expect("a warning event");
    assert_eq!(code, "loop_bound_reached");
    assert!(
        message.contains("the loop `climb` stopped at its bound of 2"),
        "{message}"
    );
}

#[tokio::test]
async fn graphs_fan_out_join_and_merge_state_in_branch_order() {
    let h = harness(memory(), vec![]);
    let f = flow(
        r#"weft: 1
name: g
root:
  graph:
    entry: start
    nodes:
      start: {transform: {output: 1}}
      left: {transform: {output: '{{ input + 10 }}'}, set: {seen.left: '{{ output }}', who: left}}
      right: {transform: {output: '{{ input + 20 }}'}, set: {seen.right: '{{ output }}', who: right}}
      join: {transform: {output: '{{ input | map(attribute="output") | list }}'}}
    edges:
      - {from: start, to: left, parallel: true}
      - {from: start, to: right, parallel: true}
      - {from: left, to: join}
      - {from: right, to: join}
      - {from: join, to: end}
    joins: [join]
"#,
    );
    let r = h.run(f).await;
    assert_eq!(r.output.unwrap(), json!([11, 21]));
    assert_eq!(
        r.state,
        json!({"seen": {"left": 11, "right": 21}, "who": "right"})
    );
}

#[tokio::test]
async fn graph_cycles_are_bounded_and_error_routes_catch_failures() {
    let h = harness(
        memory(),
        vec![(
            "fail",
            native(|_| async { Err(BlockError::new(ErrorKind::Handler, "nope")) }),
        )],
    );
    let f = flow(
        "weft: 1\nname: c\nroot:\n  graph:\n    entry: a\n    max_steps: 50\n    nodes: {a: {passthrough: {}}, b: {passthrough: {}}}\n    edges: [{from: a, to: b}, {from: b, to: a}]\n",
    );
    let r = h.run(f).await;
    let e = r.error.unwrap();
    assert_eq!(e.kind, ErrorKind::Limit);
    assert!(
        e.message.contains("again more than 50 times"),
        "{}",
        e.message
    );

    let f = flow(
        "weft: 1\nname: e\nroot:\n  graph:\n    entry: risky\n    nodes:\n      risky: {handler: {name: fail}}\n      recover: {transform: {output: 'recovered from {{ input.error.message }}'}}\n    on_error: {risky: recover}\n",
    );
    let r = h.run(f).await;
    assert_eq!(r.output.unwrap(), "recovered from nope");
}

#[tokio::test]
async fn a_loop_through_a_graph_follows_conditions_and_counts_visits() {
    let h = harness(memory(), vec![]);
    let f = flow(
        "weft: 1\nname: cyc\nstate: {n: 0}\nroot:\n  graph:\n    entry: inc\n    nodes:\n      inc: {transform: {output: '{{ state.n + 1 }}'}, set: {n: '{{ output }}'}}\n    edges:\n      - {from: inc, to: inc, when: 'state.n < 4'}\n",
    );
    let r = h.run(f).await;
    assert_eq!(r.output.unwrap(), json!(4), "{:?}", r.error);
    let paths: Vec<String> = h
        .kinds()
        .into_iter()
        .filter_map(|k| match k {
            EventKind::StepCompleted { path, kind, .. } if kind == "transform" => {
                Some(path.to_string())
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        paths,
        ["root/inc", "root/inc@1", "root/inc@2", "root/inc@3"]
    );
}

fn counting(
    name: &'static str,
    count: Arc<AtomicUsize>,
) -> (&'static str, Arc<dyn weft_core::ports::Native>) {
    (
        name,
        native(move |c| {
            let n = count.fetch_add(1, Ordering::SeqCst) + 1;
            async move { ok(json!({"calls": n, "input": c.input})) }
        }),
    )
}

#[tokio::test]
async fn approvals_pause_durably_and_resume_in_a_new_engine_without_rerunning_steps() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let before = Arc::new(AtomicUsize::new(0));
    let after = Arc::new(AtomicUsize::new(0));
    let yaml = "weft: 1\nname: ap\nroot:\n  sequence:\n    - {id: prepare, handler: {name: before}}\n    - {id: review, approval: {prompt: 'Ship {{ input.calls }}?'}}\n    - id: route\n      branch:\n        cases:\n          - {when: \"input.decision == 'approve'\", then: {id: ship, handler: {name: after}}}\n        otherwise: {transform: {output: rejected}}\n";
    let run_id = {
        let store =
            Arc::new(weft_store::SqliteStore::open(&db, weft_store::Durability::Process).unwrap());
        let h = harness(
            store,
            vec![
                counting("before", before.clone()),
                counting("after", after.clone()),
            ],
        );
        let r = h
            .engine
            .start(flow(yaml), None, RunOptions::default())
            .await
            .unwrap()
            .end()
            .await
            .unwrap();
        assert_eq!(r.status, RunStatus::Paused);
        assert_eq!(r.waiting[0]["key"], "root/review");
        assert_eq!(r.waiting[0]["prompt"], "Ship 1?");
        r.run_id
    };
    // A new engine over the same file stands in for a second process.
    let store =
        Arc::new(weft_store::SqliteStore::open(&db, weft_store::Durability::Process).unwrap());
    let h = harness(
        store,
        vec![
            counting("before", before.clone()),
            counting("after", after.clone()),
        ],
    );
    let bad = h
        .engine
        .answer(&run_id, None, json!({"decision": "maybe"}))
        .await;
    assert!(bad.unwrap_err().to_string().contains("not a decision"));
    let r = h
        .engine
        .answer(&run_id, None, json!({"decision": "approve", "note": "ok"}))
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(r.status, RunStatus::Completed);
    assert_eq!(r.output.unwrap().into_value()["calls"], 1);
    assert_eq!(
        before.load(Ordering::SeqCst),
        1,
        "the step before the approval ran again"
    );
    assert_eq!(after.load(Ordering::SeqCst), 1);
    assert!(h.kinds().iter().any(|k| matches!(k, EventKind::StepCompleted { path, replayed: true, .. } if &**path == "root/prepare")));
}

#[tokio::test]
async fn a_paused_run_s_state_holds_the_writes_made_before_the_pause() {
    // A sequence step before the approval, and a parallel branch beside it that finishes.
    let yaml = r#"weft: 1
name: partial
root:
  sequence:
    - {transform: {output: 1}, set: {before: "{{ output }}"}}
    - parallel:
        branches:
          wait: {approval: {prompt: go?}}
          other:
            sequence:
              - {transform: {output: 2}, set: {beside: "{{ output }}"}}
              - {transform: {output: 3}, set: {after_beside: "{{ output }}"}}
    - {transform: {output: 4}, set: {after: "{{ output }}"}}
"#;
    let h = harness(memory(), vec![]);
    let r = h
        .engine
        .start(flow(yaml), None, RunOptions::default())
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(r.status, RunStatus::Paused);
    assert_eq!(
        r.state,
        json!({"before": 1, "beside": 2, "after_beside": 3})
    );
    let r = h
        .engine
        .answer(&r.run_id, None, json!({"decision": "approve"}))
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(r.status, RunStatus::Completed);
    assert_eq!(
        r.state,
        json!({"before": 1, "beside": 2, "after_beside": 3, "after": 4})
    );
}

#[tokio::test]
async fn a_paused_run_keeps_isolated_and_sub_flow_writes_out_of_its_state() {
    // Writes that would never reach the run state once finished do not reach it at a
    // pause either: an isolated branch's, and a sub-flow's own.
    let yaml = r#"weft: 1
name: scoped
flows:
  child:
    weft: 1
    name: child
    root:
      sequence:
        - {transform: {output: 1}, set: {child_only: "{{ output }}"}}
        - {approval: {prompt: child?}}
root:
  parallel:
    isolate: true
    branches:
      sub: {subflow: {flow: child}}
      other:
        sequence:
          - {transform: {output: 2}, set: {isolated: "{{ output }}"}}
          - {approval: {prompt: other?}}
"#;
    let h = harness(memory(), vec![]);
    let r = h
        .engine
        .start(flow(yaml), None, RunOptions::default())
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(r.status, RunStatus::Paused);
    assert_eq!(r.waiting.len(), 2);
    assert_eq!(r.state, json!({}));
}

#[tokio::test]
async fn a_failed_run_retries_from_its_failing_step() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        weft_store::SqliteStore::open(dir.path().join("r.db"), weft_store::Durability::Process)
            .unwrap(),
    );
    let first = Arc::new(AtomicUsize::new(0));
    let broken = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let br = broken.clone();
    let h = harness(
        store,
        vec![
            counting("first", first.clone()),
            (
                "second",
                native(move |_| {
                    let br = br.clone();
                    async move {
                        if br.load(Ordering::SeqCst) {
                            Err(BlockError::new(ErrorKind::Handler, "the service is down"))
                        } else {
                            ok(json!("second done"))
                        }
                    }
                }),
            ),
        ],
    );
    let f = flow(
        "weft: 1\nname: rt\nroot:\n  sequence:\n    - {id: a, handler: {name: first}}\n    - {id: b, handler: {name: second}}\n",
    );
    let r = h.run(f).await;
    assert_eq!(r.status, RunStatus::Failed);
    assert_eq!(r.error.as_ref().unwrap().path, "root/b");
    broken.store(false, Ordering::SeqCst);
    let r = h
        .engine
        .retry(&r.run_id, None)
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(r.status, RunStatus::Completed);
    assert_eq!(r.output.unwrap(), "second done");
    assert_eq!(
        first.load(Ordering::SeqCst),
        1,
        "the completed step ran again"
    );
    assert!(
        h.engine.retry(&r.run_id, None).await.is_err(),
        "a completed run is not retried"
    );
}

#[tokio::test]
async fn budgets_stop_before_the_call_that_would_exceed_them() {
    let h = harness(memory(), vec![]);
    let f = flow(
        r#"weft: 1
name: b
models:
  m: {provider: scripted, rules: [{reply: "fine", usage: {input_tokens: 50, output_tokens: 10}}]}
root:
  id: writer
  budget: {tokens: 100}
  sequence:
    - {id: one, llm: {model: m, prompt: hi, max_tokens: 50}}
    - {id: two, llm: {model: m, prompt: hi, max_tokens: 50}}
"#,
    );
    let r = h.run(f).await;
    let e = r.error.unwrap();
    assert_eq!(e.kind, ErrorKind::Budget);
    assert_eq!(e.path, "writer/two");
    assert!(e.message.contains("block `writer`"), "{}", e.message);
    let calls = h
        .kinds()
        .into_iter()
        .filter(|k| matches!(k, EventKind::LlmCall { .. }))
        .count();
    assert_eq!(calls, 1, "the second call was made");
}

#[tokio::test]
async fn structured_output_is_repaired_after_invalid_json() {
    let h = harness(memory(), vec![]);
    let f = flow(
        r#"weft: 1
name: s
models:
  m:
    provider: scripted
    rules:
      - {when: "was not valid", json: {city: Paris, population: 2100000}}
      - {reply: "Sure! The city is Paris."}
root:
  llm:
    model: m
    prompt: Give me a city as JSON.
    output_schema: {type: object, required: [city, population], properties: {city: {type: string}, population: {type: integer}}}
"#,
    );
    let r = h.run(f).await;
    assert_eq!(
        r.output.unwrap(),
        json!({"city": "Paris", "population": 2100000})
    );
    let calls = h
        .kinds()
        .into_iter()
        .filter(|k| matches!(k, EventKind::LlmCall { .. }))
        .count();
    assert_eq!(calls, 2);
}

#[tokio::test]
async fn the_model_calls_a_subflow_as_a_tool() {
    let h = harness(memory(), vec![]);
    let f = flow(
        r#"weft: 1
name: tools
models:
  m:
    provider: scripted
    rules:
      - {role: tool, reply: "Forecast: {last}"}
      - {when: weather, tool_calls: [{name: weather, arguments: {city: Oslo}}]}
flows:
  weather:
    name: weather
    root: {transform: {output: '{{ input.city }} is sunny'}}
root:
  llm:
    model: m
    prompt: What is the weather in Oslo?
    tools: [{name: weather, description: Looks up the weather, flow: weather, parameters: {type: object, properties: {city: {type: string}}}}]
"#,
    );
    let r = h.run(f).await;
    assert_eq!(r.output.unwrap(), "Forecast: Oslo is sunny");
    assert!(
        h.kinds()
            .iter()
            .any(|k| matches!(k, EventKind::ToolCalled { tool, .. } if tool == "weather"))
    );
}

#[tokio::test]
async fn expression_errors_are_reported_when_preparing() {
    let loaded = weft_dialects::load_str("weft: 1\nname: x\nroot: {loop: {while: 'state.n <', max_iterations: 2, body: {passthrough: {}}}}\n", "x.yaml", None, None).unwrap();
    let d = weft_engine::Prepared::new(loaded.flow).err().unwrap();
    assert_eq!(d[0].pointer, "/root/loop/while");
    assert_eq!(
        loaded
            .source_map
            .unwrap()
            .locate(d[0].clone())
            .loc
            .unwrap()
            .line,
        3
    );
}

#[tokio::test]
async fn cancelling_a_running_run_stops_it() {
    let store = memory();
    let h = harness(
        store.clone(),
        vec![(
            "hang",
            native(|_| async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                ok(json!(null))
            }),
        )],
    );
    let f = flow("weft: 1\nname: c\nroot: {handler: {name: hang}}\n");
    let engine = h.engine.clone();
    let run = tokio::spawn(async move {
        engine
            .start(
                f,
                None,
                RunOptions {
                    run_id: Some("cancel-me".into()),
                    ..Default::default()
                },
            )
            .await
            .unwrap()
            .end()
            .await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    h.engine.cancel("cancel-me").await.unwrap();
    let r = tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("not cancelled")
        .unwrap()
        .unwrap();
    assert_eq!(r.status, RunStatus::Cancelled);
}

/// Handlers for the race tests: `sleepy` ({ms, v}) counts the calls that finish, `boom`
/// fails.
fn racers(finished: Arc<AtomicUsize>) -> Vec<(&'static str, Arc<dyn weft_core::ports::Native>)> {
    vec![
        (
            "boom",
            native(|_| async { Err(BlockError::new(ErrorKind::Handler, "boom")) }),
        ),
        (
            "sleepy",
            native(move |c| {
                let fin = finished.clone();
                async move {
                    tokio::time::sleep(Duration::from_millis(c.config["ms"].as_u64().unwrap()))
                        .await;
                    fin.fetch_add(1, Ordering::SeqCst);
                    ok(c.config["v"].clone())
                }
            }),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_race_takes_the_first_success_and_cancels_the_rest() {
    let finished = Arc::new(AtomicUsize::new(0));
    let h = harness(memory(), racers(finished.clone()));
    let f = flow(
        "weft: 1\nname: r\nroot:\n  parallel:\n    race: true\n    branches:\n      slow: {handler: {name: sleepy, config: {ms: 400, v: slow}}}\n      broken: {handler: {name: boom}}\n      fast: {handler: {name: sleepy, config: {ms: 20, v: fast}}}\n",
    );
    let r = h.run(f).await;
    assert_eq!(r.output.unwrap(), json!("fast"), "{:?}", r.error);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        finished.load(Ordering::SeqCst),
        1,
        "the slow branch was cancelled"
    );

    let f = flow(
        "weft: 1\nname: r\nroot:\n  parallel:\n    race: true\n    branches:\n      a: {handler: {name: boom}}\n      b: {handler: {name: boom}}\n",
    );
    let e = h.run(f).await.error.expect("every branch failed");
    assert!(
        e.message.contains("every branch of the race failed"),
        "{}",
        e.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_race_replays_only_its_winner() {
    // The race is decided, then the run pauses. The resuming engine's handlers would
    // let the other branch win now; the journaled winner is replayed and the loser is
    // not run again.
    let store = memory();
    let timed = |ms: u64, calls: Arc<AtomicUsize>, v: &'static str| {
        native(move |_| {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                ok(json!(v))
            }
        })
    };
    let (a_calls, b_calls) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let first = harness(
        store.clone(),
        vec![
            ("a", timed(10, a_calls.clone(), "a")),
            ("b", timed(400, b_calls.clone(), "b")),
        ],
    );
    let f = flow(
        "weft: 1\nname: r\nroot:\n  sequence:\n    - parallel:\n        race: true\n        branches:\n          a: {handler: {name: a}}\n          b: {handler: {name: b}}\n    - approval: {prompt: ok?}\n",
    );
    let r = first.run(f).await;
    assert_eq!(r.status, RunStatus::Paused);
    let (a_again, b_again) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let second = harness(
        store.clone(),
        vec![
            ("a", timed(400, a_again.clone(), "a")),
            ("b", timed(1, b_again.clone(), "b")),
        ],
    );
    let done = second
        .engine
        .answer(&r.run_id, None, json!({"decision": "approve"}))
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Completed, "{:?}", done.error);
    assert_eq!(
        b_again.load(Ordering::SeqCst),
        0,
        "the loser is not run again"
    );
    assert_eq!(a_again.load(Ordering::SeqCst), 0, "the winner is replayed");
    let journal = store.journal(&r.run_id).await.unwrap();
    assert!(journal.iter().any(|e| e.value == json!({"winner": "a"})));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warning_budget_warns_once_per_limit_and_lets_the_calls_run() {
    let h = harness(memory(), vec![]);
    let f = flow(
        r#"weft: 1
name: b
models:
  m: {provider: scripted, rules: [{reply: "fine", delay_ms: 5, usage: {input_tokens: 50, output_tokens: 10, cost_usd: 0.5}}]}
root:
  id: writer
  budget: {tokens: 100, cost_usd: 0.6, wall_ms: 1, on_exceed: warn, warn_at: 0.5}
  sequence:
    - {id: one, llm: {model: m, prompt: hi, max_tokens: 50}}
    - {id: two, llm: {model: m, prompt: hi, max_tokens: 50}}
    - {id: three, llm: {model: m, prompt: hi, max_tokens: 50}}
"#,
    );
    let r = h.run(f).await;
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    let warnings: Vec<(String, String, bool)> = h
        .kinds()
        .into_iter()
        .filter_map(|k| match k {
            EventKind::BudgetWarning {
                path,
                budget,
                exceeded,
                ..
            } => Some((path.to_string(), budget, exceeded)),
            _ => None,
        })
        .collect();
    assert_eq!(
        warnings,
        vec![
            // After the first call: 60 of 100 tokens and $0.5 of $0.6 pass the halfway mark.
            ("writer/one".into(), "tokens".into(), false),
            ("writer/one".into(), "cost_usd".into(), false),
            // Before the second: 60 used + about 51 would pass 100 tokens, once only.
            ("writer/two".into(), "tokens".into(), true),
            // Before the third: the cost is spent.
            ("writer/three".into(), "cost_usd".into(), true),
            // The block ran past 1 ms of wall time (each call takes 5 ms).
            ("writer".into(), "wall_ms".into(), true),
        ]
    );
}

#[tokio::test]
async fn a_sub_flow_calls_a_sibling_sub_flow() {
    let yaml = r#"weft: 1
name: siblings
flows:
  double:
    weft: 1
    name: double
    root: {transform: {output: "{{ input * 2 }}"}}
  quadruple:
    weft: 1
    name: quadruple
    root:
      sequence:
        - {subflow: {flow: double}}
        - {subflow: {flow: double}}
root: {subflow: {flow: quadruple}}
input: 3
"#;
    let h = harness(memory(), vec![]);
    let r = h
        .engine
        .start(flow(yaml), None, RunOptions::default())
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    assert_eq!(r.output.unwrap(), json!(12));
}

/// Each attempt of a step has its own idempotency key, the same in every process that
/// runs that attempt: `step` in templates and `NativeCall::idempotency_key` agree, a
/// retry attempt gets a new key and so does the step when the whole run is retried.
#[tokio::test]
async fn idempotency_keys_name_one_attempt_of_one_step() {
    let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
    let up = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (c, u) = (calls.clone(), up.clone());
    let engine = weft_engine::Engine::builder(memory())
        .action(
            "pay",
            native(move |call| {
                let (c, u) = (c.clone(), u.clone());
                async move {
                    c.lock().unwrap().push((
                        call.idempotency_key.clone(),
                        call.attempt,
                        call.config,
                    ));
                    if u.load(Ordering::SeqCst) {
                        ok(json!("paid"))
                    } else {
                        Err(BlockError::new(ErrorKind::Action, "the bank is down"))
                    }
                }
            }),
        )
        .build();
    let f = flow(
        r#"weft: 1
name: pay
root:
  sequence:
    - id: a
      retry: {attempts: 2, backoff_ms: 1, on: [action]}
      action:
        uses: pay
        with: {key: "{{ step.idempotency_key }}", attempt: "{{ step.attempt }}", run: "{{ run.id }}", step: "{{ step.key }}"}
"#,
    );
    let r = engine
        .start(f, None, RunOptions::default())
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(r.status, RunStatus::Failed);
    up.store(true, Ordering::SeqCst);
    let r = engine
        .retry(&r.run_id, None)
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(r.status, RunStatus::Completed);
    let calls = calls.lock().unwrap().clone();
    let id = r.run_id.as_str();
    let expected = [
        (weft_core::hash::idempotency_key(id, "root/a", 0, ""), 1),
        (
            weft_core::hash::idempotency_key(id, "root/a", 0, "root/a#2 "),
            2,
        ),
        (weft_core::hash::idempotency_key(id, "root/a", 1, ""), 1),
    ];
    assert_eq!(calls.len(), 3);
    for ((key, attempt, config), (want_key, want_attempt)) in calls.iter().zip(&expected) {
        assert_eq!((key, *attempt), (want_key, *want_attempt));
        assert_eq!(config["key"], json!(key), "{config}");
        assert_eq!(config["attempt"], json!(attempt), "{config}");
        assert_eq!(config["run"], json!(id));
        assert_eq!(config["step"], json!("root/a"));
    }
    let distinct: std::collections::HashSet<_> = calls.iter().map(|c| &c.0).collect();
    assert_eq!(distinct.len(), 3);
}

/// A run's events are stored as they happen, numbered without a gap across the
/// processes that drive it; a follower replays them from any point, waits through a
/// pause, follows the continuation live and ends after the run's last event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_s_events_are_stored_and_followed_from_any_point() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let open =
        || Arc::new(weft_store::SqliteStore::open(&db, weft_store::Durability::Process).unwrap());
    let yaml = "weft: 1\nname: f\nroot:\n  sequence:\n    - {id: a, transform: {output: 1}}\n    - {id: ask, approval: {prompt: go?}}\n    - {id: b, transform: {output: 2}}\n";
    let first = harness(open(), vec![]);
    let paused = first.run(flow(yaml)).await;
    assert_eq!(paused.status, RunStatus::Paused);
    // A second engine over the same file, as another process would: it follows the
    // paused run, then answers it.
    let second = harness(open(), vec![]);
    let mut follower = second.engine.follow(&paused.run_id, None);
    let mut seen = Vec::new();
    while seen
        .last()
        .is_none_or(|k: &EventKind| !matches!(k, EventKind::RunPaused { .. }))
    {
        let e = follower.recv().await.unwrap().unwrap();
        assert_eq!(e.seq, seen.len() as u64);
        seen.push(e.kind.clone());
    }
    let done = second
        .engine
        .answer(&paused.run_id, None, json!({"decision": "approve"}))
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Completed);
    while let Some(e) = follower.recv().await {
        let e = e.unwrap();
        assert_eq!(e.seq, seen.len() as u64, "{:?}", e.kind);
        seen.push(e.kind.clone());
    }
    assert!(
        matches!(seen.last(), Some(EventKind::RunCompleted { .. })),
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .any(|k| matches!(k, EventKind::ApprovalAnswered { .. }))
    );
    // From the middle, after the run ended: the rest, then the end.
    let mut again = second.engine.follow(&paused.run_id, Some(3));
    let mut rest = Vec::new();
    while let Some(e) = again.recv().await {
        rest.push(e.unwrap().seq);
    }
    assert_eq!(rest, (4..seen.len() as u64).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_block_without_a_model_gets_the_fallback_and_the_run_says_so_once() {
    let events = Arc::new(weft_engine::CollectingSink::new());
    let engine = weft_engine::Engine::builder(memory())
        .models(Arc::new(weft_llm::Router::new()))
        .fallback_model("standin", "set a model")
        .sink(events.clone())
        .build();
    let f = flow(
        r#"weft: 1
name: unnamed-models
models:
  standin: {provider: scripted, rules: [{reply: "from the stand-in"}]}
  chosen: {provider: scripted, rules: [{reply: "from the chosen one"}]}
root:
  sequence:
    - llm: {model: chosen, prompt: "a"}
    - llm: {prompt: "b"}
    - llm: {prompt: "c"}
"#,
    );
    let r = engine
        .start(f, None, weft_engine::RunOptions::default())
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(r.output.unwrap(), "from the stand-in");
    let warnings: Vec<(String, String)> = events
        .events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Warning { path, message, .. } => Some((path.to_string(), message)),
            _ => None,
        })
        .collect();
    assert_eq!(
        warnings,
        [(
            "root/1".to_owned(),
            "no model: using standin; set a model".to_owned()
        )]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_results_are_durable_before_a_step_reaches_outside_the_run() {
    // Code steps queue their journal entries without waiting for a commit each; a host
    // function (which may act on the world) starts only once they are in the file. It
    // looks from a second connection, as another process would after a crash.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let store =
        Arc::new(weft_store::SqliteStore::open(&db, weft_store::Durability::Process).unwrap());
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let look = {
        let (db, seen) = (db.clone(), seen.clone());
        native(move |c| {
            let (db, seen) = (db.clone(), seen.clone());
            async move {
                let other =
                    weft_store::SqliteStore::open(&db, weft_store::Durability::Process).unwrap();
                let keys: Vec<String> = weft_core::ports::Store::journal(&other, &c.run_id)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|e| e.key)
                    .collect();
                seen.lock().unwrap().extend(keys);
                ok(json!(null))
            }
        })
    };
    let steps: String = (0..50)
        .map(|i| format!("    - {{id: c{i}, code: {{language: lua, source: 'return {i}'}}}}\n"))
        .collect();
    let yaml = format!(
        "weft: 1\nname: durable-code\nroot:\n  sequence:\n{steps}    - {{id: look, handler: {{name: look}}}}\n"
    );
    let events = Arc::new(weft_engine::CollectingSink::new());
    let engine = weft_engine::Engine::builder(store.clone())
        .models(Arc::new(weft_llm::Router::new()))
        .code_runner(Arc::new(weft_code::Sandboxes::new(
            weft_code::WorkerCommand {
                program: "/nonexistent".into(),
                args: vec![],
            },
            1,
        )))
        .handler("look", look)
        .sink(events)
        .build();
    let r = engine
        .start(flow(&yaml), None, RunOptions::default())
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    let seen = seen.lock().unwrap().clone();
    let want: Vec<String> = (0..50).map(|i| format!("root/c{i}")).collect();
    assert_eq!(
        seen, want,
        "the code steps' results, in order, before the handler ran"
    );
}

/// A `charge` handler that records each call's idempotency key; the first process's
/// hangs once called (it is cut off there), a later process's answers.
fn charge(
    keys: Arc<std::sync::Mutex<Vec<String>>>,
    hang: Option<Arc<tokio::sync::Notify>>,
) -> (&'static str, Arc<dyn weft_core::ports::Native>) {
    (
        "charge",
        native(move |c| {
            keys.lock().unwrap().push(c.idempotency_key.clone());
            let hang = hang.clone();
            async move {
                if let Some(called) = hang {
                    called.notify_one();
                    std::future::pending::<()>().await;
                }
                ok(json!("charged"))
            }
        }),
    )
}

/// Starts `yaml` on the SQLite file `db` and cuts the run off while its `charge` step is
/// under way, as a dying process would: the run's id.
async fn cut_off_in_charge(
    db: &std::path::Path,
    yaml: &str,
    keys: &Arc<std::sync::Mutex<Vec<String>>>,
) -> String {
    let store =
        Arc::new(weft_store::SqliteStore::open(db, weft_store::Durability::Process).unwrap());
    let called = Arc::new(tokio::sync::Notify::new());
    let h = harness(store, vec![charge(keys.clone(), Some(called.clone()))]);
    let run = h
        .engine
        .start(flow(yaml), None, RunOptions::default())
        .await
        .unwrap();
    let id = run.run_id().to_owned();
    called.notified().await;
    run.abort().await;
    id
}

#[tokio::test]
async fn a_step_cut_off_mid_effect_repeats_with_its_key_or_fails_as_of_unknown_outcome() {
    let keys = Arc::new(std::sync::Mutex::new(Vec::new()));
    let later = |db: &std::path::Path| {
        let store =
            Arc::new(weft_store::SqliteStore::open(db, weft_store::Durability::Process).unwrap());
        harness(store, vec![charge(keys.clone(), None)])
    };
    let dir = tempfile::tempdir().unwrap();
    let steps = "root:\n  sequence:\n    - {id: charge, handler: {name: charge}";

    // The default: the step runs again, with the key it had.
    let db = dir.path().join("repeat.db");
    let yaml = format!("weft: 1\nname: repeat\n{steps}}}\n");
    let id = cut_off_in_charge(&db, &yaml, &keys).await;
    let r = later(&db)
        .engine
        .resume(&id, false)
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    let seen = std::mem::take(&mut *keys.lock().unwrap());
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0], seen[1], "the repeat carried another key");

    // `fail`: the step fails as of unknown outcome, naming the key it was sent with;
    // a retry runs it again on purpose, with a new key.
    let db = dir.path().join("fail.db");
    let yaml = format!("weft: 1\nname: once\n{steps}, on_unknown_outcome: fail}}\n");
    let id = cut_off_in_charge(&db, &yaml, &keys).await;
    let h = later(&db);
    let r = h
        .engine
        .resume(&id, false)
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(r.status, RunStatus::Failed);
    let error = r.error.unwrap();
    assert_eq!(error.kind, ErrorKind::OutcomeUnknown, "{error:?}");
    let first = keys.lock().unwrap().clone();
    assert_eq!(first.len(), 1, "the step ran again");
    assert_eq!(
        error.detail_field("idempotency_key"),
        Some(&json!(first[0]))
    );
    let r = h
        .engine
        .retry(&id, None)
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    let seen = keys.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert_ne!(seen[0], seen[1], "a retry on purpose is a new request");
}

#[tokio::test]
async fn a_block_announces_itself_as_it_starts_and_a_bad_announcement_fails_it_first() {
    let events = Arc::new(weft_engine::CollectingSink::new());
    let engine = weft_engine::Engine::builder(memory())
        .sink(events.clone())
        .build();
    let f = flow(
        r#"weft: 1
name: announced
root:
  id: greet
  transform: {output: "hi {{ input.name }}"}
  announce: {about_to: "greet {{ input.name }}"}
  emit: {done: "{{ output }}"}
"#,
    );
    let r = engine
        .start(f, Some(json!({"name": "Ada"})), RunOptions::default())
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(r.output.unwrap(), "hi Ada");
    let seen: Vec<String> = events
        .events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::StepStarted { .. } => Some("started".to_owned()),
            EventKind::Message { message, .. } => Some(message.to_string()),
            EventKind::StepCompleted { .. } => Some("completed".to_owned()),
            _ => None,
        })
        .collect();
    assert_eq!(
        seen,
        [
            "started",
            r#"{"about_to":"greet Ada"}"#,
            r#"{"done":"hi Ada"}"#,
            "completed"
        ]
    );

    let bad = flow(
        "weft: 1\nname: bad\nroot:\n  id: greet\n  transform: {output: 1}\n  announce: \"{{ input.missing.deeper }}\"\n",
    );
    let events = Arc::new(weft_engine::CollectingSink::new());
    let engine = weft_engine::Engine::builder(memory())
        .sink(events.clone())
        .build();
    let r = engine
        .start(bad, Some(json!({})), RunOptions::default())
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(r.status, RunStatus::Failed);
    assert!(
        !events.events().iter().any(
            |e| matches!(&e.kind, EventKind::StepStarted { path, .. } if path.ends_with("greet"))
        ),
        "the step never started"
    );
}

/// An engine over `db` that runs Lua in-process, its events collected in `events`.
fn lua_engine(
    db: &std::path::Path,
    events: Arc<weft_engine::CollectingSink>,
) -> weft_engine::Engine {
    let store =
        Arc::new(weft_store::SqliteStore::open(db, weft_store::Durability::Process).unwrap());
    weft_engine::Engine::builder(store)
        .models(Arc::new(weft_llm::Router::new()))
        .sink(events)
        .code_runner(Arc::new(weft_code::Sandboxes::new(
            weft_code::WorkerCommand {
                program: "/nonexistent".into(),
                args: vec![],
            },
            1,
        )))
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_step_s_large_output_is_stored_once_and_replayed_from_there() {
    // Each step's output is in its journal entry, its `step_completed` and the next
    // step's `step_started`: the file holds it once, and a second process answering the
    // approval after them replays the steps from it.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let steps: String = (0..5)
        .map(|i| {
            format!(
                "    - {{id: c{i}, code: {{language: lua, source: 'return {{ items = input.items, count = input.count + 1 }}'}}}}\n"
            )
        })
        .collect();
    let items: Vec<u32> = (0..20_000).collect();
    let yaml = format!(
        "weft: 1\nname: big-chain\ninput: {{count: 0, items: {items:?}}}\nroot:\n  sequence:\n{steps}    - {{id: ask, approval: {{prompt: go?}}}}\n    - {{id: last, transform: {{output: '{{{{ input.decision }}}}'}}}}\n"
    );
    let r = lua_engine(&db, Arc::new(weft_engine::CollectingSink::new()))
        .start(flow(&yaml), None, RunOptions::default())
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(r.status, RunStatus::Paused, "{:?}", r.error);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let stored: i64 = conn
        .query_row("SELECT count(*) FROM run_values", [], |r| r.get(0))
        .unwrap();
    // The run's input and each step's output.
    assert_eq!(stored, 6);
    let journal: String = conn
        .query_row(
            "SELECT group_concat(entries) FROM journal_chunks",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(journal.matches("\"output_id\"").count(), 5, "{journal}");
    assert!(!journal.contains("19999"));
    // Nor do the events: `run_started` and the first step's `step_started` refer to the
    // input (110 KB of JSON) too.
    let events: i64 = conn
        .query_row("SELECT sum(length(body)) FROM event_chunks", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(events < 8192, "{events} bytes of events");
    // Another process replays the five steps from the stored values (Lua is not run
    // again: a replayed step says so) and goes on.
    let events = Arc::new(weft_engine::CollectingSink::new());
    let r = lua_engine(&db, events.clone())
        .answer(&r.run_id, None, json!({"decision": "approve"}))
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    let entries = weft_core::ports::Store::journal(
        &weft_store::SqliteStore::open(&db, weft_store::Durability::Process).unwrap(),
        &r.run_id,
    )
    .await
    .unwrap();
    let last_code = entries.iter().find(|e| e.key == "root/c4").unwrap();
    let output = last_code.value.node().get("output").unwrap().to_value();
    assert_eq!(output["count"], 5);
    assert_eq!(output["items"].as_array().unwrap().len(), 20_000);
    let replayed: Vec<_> = events
        .events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::StepCompleted {
                path,
                replayed: true,
                output: Some(o),
                ..
            } if path.starts_with("root/c") => Some(o.to_value()["count"].clone()),
            _ => None,
        })
        .collect();
    assert_eq!(replayed, [json!(1), json!(2), json!(3), json!(4), json!(5)]);
}
