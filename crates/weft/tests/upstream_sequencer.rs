//! flow-state-dev's own sequencer suite (`packages/core/test/sequencer.test.ts`, commit
//! 0baf757), case by case: each test is named after the upstream case it ports (its
//! `describe` group first when it has one) and checks the same behaviour on Weft's
//! engine. Cases that are TypeScript-only, or where Weft differs on purpose, are listed
//! with their reasons in `docs/library.md` ("flow-state-dev's own tests").

use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use weft::Sequencer;
use weft::prelude::*;
use weft::testing::{TestHarness, TestRun};

async fn run(block: impl Into<Block>, input: Value) -> TestRun {
    TestHarness::new().run(block, input).await
}

/// flow-state-dev's `addHandler(name, delta)`.
fn add(name: &str, delta: i64) -> Block {
    handler(name).execute(move |v: i64, _ctx| async move { Ok(v + delta) })
}

fn failing(name: &str, message: &'static str) -> Block {
    handler(name).execute(move |_: Value, _ctx| async move {
        Err::<Value, _>(BlockError::new(ErrorKind::Handler, message))
    })
}

/// A block that records each value it gets.
fn recorder(name: &str, seen: &Arc<Mutex<Vec<Value>>>) -> Block {
    let seen = seen.clone();
    handler(name).execute(move |v: Value, _ctx| {
        seen.lock().unwrap().push(v.clone());
        async move { Ok(v) }
    })
}

/// A block that sleeps `ms` and counts how many of its calls overlap, at most.
fn gauged(name: &str, ms: u64, now: &Arc<AtomicUsize>, peak: &Arc<AtomicUsize>) -> Block {
    let (now, peak) = (now.clone(), peak.clone());
    handler(name).execute(move |v: Value, _ctx| {
        let (now, peak) = (now.clone(), peak.clone());
        async move {
            let n = now.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(n, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            now.fetch_sub(1, Ordering::SeqCst);
            Ok(v)
        }
    })
}

fn failed_with(r: &TestRun, text: &str) {
    let e = r
        .error()
        .unwrap_or_else(|| panic!("the run did not fail: {:?}", r.output()));
    assert!(e.message.contains(text), "{}", e.message);
}

// ---- sequencer builder --------------------------------------------------------

#[tokio::test]
async fn supports_then_and_connector_overload() {
    let chain = sequencer("then-chain")
        .then(add("one", 1))
        .then_with(|v: i64| v * 2, add("two", 2));
    assert_eq!(run(chain, json!(1)).await.output(), &json!(6));
}

#[tokio::test]
async fn supports_then_if() {
    // Weft's then_if takes a block; upstream's connector overload is a sequencer of the
    // connector and the block.
    let plus_ten = add("plus-ten", 10);
    let seq = sequencer("then-if")
        .then_if(|v: i64| v > 0, plus_ten.clone())
        .then_if(
            |v: i64| v > 100,
            sequencer("guarded").map(|v: i64| v).then(plus_ten),
        );
    assert_eq!(run(seq, json!(1)).await.output(), &json!(11));
}

#[tokio::test]
async fn supports_map() {
    let seq = sequencer("map-step").map(|v: i64| format!("v:{v}"));
    assert_eq!(run(seq, json!(3)).await.output(), "v:3");
}

#[tokio::test]
async fn supports_parallel() {
    let seq = sequencer("parallel-step").parallel([
        ("left", Entry::from(add("left", 1))),
        ("right", entry(|v: i64| v * 2, add("right", 3))),
    ]);
    assert_eq!(
        run(seq, json!(2)).await.output(),
        &json!({"left": 3, "right": 7})
    );
}

#[tokio::test]
async fn supports_for_each_and_connector_overload() {
    let direct = sequencer("for-each-direct").for_each(add("plus-two", 2), None);
    let via_connector = sequencer("for-each-connector").for_each_in(
        |v: i64| vec![v, v + 1],
        add("plus-two", 2),
        None,
    );
    assert_eq!(run(direct, json!([1, 2])).await.output(), &json!([3, 4]));
    assert_eq!(run(via_connector, json!(2)).await.output(), &json!([4, 5]));
}

#[tokio::test]
async fn supports_do_until_and_do_while() {
    let until = sequencer("until").do_until(|v: i64| v >= 3, add("inc", 1));
    let whilst = sequencer("while").do_while(|v: i64| v < 3, add("inc", 1));
    assert_eq!(run(until, json!(0)).await.output(), &json!(3));
    assert_eq!(run(whilst, json!(0)).await.output(), &json!(3));
}

#[tokio::test]
async fn supports_loop_back() {
    let seq = sequencer("loop-back")
        .then(add("inc", 1))
        .loop_back("inc", |v: i64| v < 3, 5);
    assert_eq!(run(seq, json!(0)).await.output(), &json!(3));
}

#[tokio::test]
async fn supports_work_and_wait_for_work() {
    let seq = sequencer("work-flow")
        .work(add("bg-work", 10))
        .wait_for_work_or_fail(None);
    assert_eq!(run(seq, json!(1)).await.output(), &json!(1));
}

#[tokio::test]
async fn wait_for_work_can_fail_on_background_errors() {
    let seq = sequencer("work-fail")
        .work(failing("failing-work", "background failure"))
        .wait_for_work_or_fail(None);
    failed_with(&run(seq, json!(1)).await, "background failure");
}

// ---- forEachBackground: Weft's `work` of a `for_each` -----------------------------

/// `forEachBackground(block)`: the items mapped as background work.
fn for_each_background(name: &str, block: Block, limit: Option<u32>) -> Sequencer {
    sequencer(name).work(sequencer(format!("{name}.items")).for_each(block, limit))
}

#[tokio::test]
async fn for_each_background_dispatches_iterations_as_background_work_and_returns_immediately() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seq = for_each_background("bg-foreach", recorder("process-item", &seen), None)
        .wait_for_work_or_fail(None);
    assert_eq!(run(seq, json!([1, 2, 3])).await.output(), &json!([1, 2, 3]));
    let mut seen = seen.lock().unwrap().clone();
    seen.sort_by_key(|v| v.as_i64());
    assert_eq!(seen, [json!(1), json!(2), json!(3)]);
}

#[tokio::test]
async fn for_each_background_supports_connector_overload() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let items = sequencer("items").for_each_in(
        |v: i64| vec![v.to_string(), (v + 1).to_string()],
        recorder("process-str", &seen),
        None,
    );
    let seq = sequencer("bg-foreach-conn")
        .work(items)
        .wait_for_work_or_fail(None);
    assert_eq!(run(seq, json!(5)).await.output(), &json!(5));
    let mut seen = seen.lock().unwrap().clone();
    seen.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
    assert_eq!(seen, [json!("5"), json!("6")]);
}

#[tokio::test]
async fn for_each_background_isolates_iteration_failures_from_the_parent() {
    // Without failing on work errors, the parent succeeds. Weft's `for_each` stops at
    // its first failure (its items are one step), so the isolation upstream gives each
    // iteration is the map's own policy here: the parent's output is unaffected.
    let seq = for_each_background(
        "bg-foreach-isolated",
        handler("maybe-fail").execute(|v: i64, _ctx| async move {
            if v == 2 {
                Err(BlockError::new(ErrorKind::Handler, "item 2 failed"))
            } else {
                Ok(v)
            }
        }),
        None,
    )
    .wait_for_work(None);
    let r = run(seq, json!([1, 2, 3])).await;
    assert_eq!(r.output(), &json!([1, 2, 3]));
    assert!(
        r.step_errors().iter().any(|e| e.message == "item 2 failed"),
        "the failure is in the run's record"
    );
}

#[tokio::test]
async fn for_each_background_propagates_failures_when_wait_for_work_has_fail_on_error() {
    let seq = for_each_background(
        "bg-foreach-fail",
        failing("always-fail", "iteration failure"),
        None,
    )
    .wait_for_work_or_fail(None);
    failed_with(&run(seq, json!([1])).await, "iteration failure");
}

#[tokio::test]
async fn for_each_background_respects_concurrency_limit() {
    let (now, peak) = (Arc::default(), Arc::new(AtomicUsize::new(0)));
    let seq = for_each_background("bg-foreach-conc", gauged("track", 20, &now, &peak), Some(2))
        .wait_for_work_or_fail(None);
    run(seq, json!([1, 2, 3, 4, 5])).await.output();
    assert!(peak.load(Ordering::SeqCst) <= 2);
}

#[tokio::test]
async fn for_each_background_supports_dynamic_block_factory() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let tagged = |name: &'static str, factor: i64| {
        let seen = seen.clone();
        handler(name).execute(move |v: i64, _ctx| {
            seen.lock().unwrap().push(format!("{name}:{v}"));
            async move { Ok(v * factor) }
        })
    };
    let items = sequencer("items").for_each_dynamic(
        [tagged("double", 2), tagged("triple", 3)],
        |_: Value, index| if index % 2 == 0 { "double" } else { "triple" }.to_owned(),
        None,
    );
    let seq = sequencer("bg-foreach-factory")
        .work(items)
        .wait_for_work_or_fail(None);
    run(seq, json!([10, 20, 30])).await.output();
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(seen, ["double:10", "double:30", "triple:20"]);
}

// ---- tap, rescue, branch ---------------------------------------------------------

#[tokio::test]
async fn supports_tap_and_tap_if() {
    let tapped = Arc::new(Mutex::new(Vec::new()));
    let t = tapped.clone();
    let t2 = tapped.clone();
    let tap_block = recorder("tap-block", &tapped);
    let seq = sequencer("tap-seq")
        .tap_fn(move |v: &i64| t.lock().unwrap().push(json!(v + 1)))
        .tap(
            sequencer("tap-doubled")
                .map(|v: i64| v * 2)
                .then(tap_block.clone()),
        )
        .tap_if(
            |v: i64| v > 0,
            handler("tap-plus-two").execute(move |v: i64, _ctx| {
                t2.lock().unwrap().push(json!(v + 2));
                async move { Ok(v) }
            }),
        )
        .tap_if(
            |v: i64| v > 0,
            sequencer("tap-tripled").map(|v: i64| v * 3).then(tap_block),
        );
    assert_eq!(run(seq, json!(2)).await.output(), &json!(2));
    assert_eq!(
        *tapped.lock().unwrap(),
        [json!(3), json!(4), json!(4), json!(6)]
    );
}

#[tokio::test]
async fn supports_rescue() {
    // The rescue block gets `{error, input}`; upstream's gets the Error itself.
    let seq = sequencer("rescue-seq")
        .then(failing("failing", "broken"))
        .rescue([RescueCase::any(handler("rescue-handler").execute(
            |e: Value, _ctx| async move {
                Ok(format!(
                    "recovered:{}",
                    e["error"]["message"].as_str().unwrap()
                ))
            },
        ))]);
    assert_eq!(run(seq, json!(1)).await.output(), "recovered:broken");
}

#[tokio::test]
async fn supports_branch() {
    // Upstream also throws "no matching route" when no case matches; Weft passes the
    // value on (docs/library.md lists the difference).
    let word = |w: &'static str| handler(w).execute(move |_: i64, _ctx| async move { Ok(w) });
    let branching = sequencer("branching").branch([
        BranchCase::new("small", |v: i64| v < 10, word("small")),
        BranchCase::new("large", |v: i64| v >= 10, word("large")),
    ]);
    assert_eq!(run(branching, json!(12)).await.output(), "large");
}

// ---- thenAll: Weft's `all` -------------------------------------------------------

#[tokio::test]
async fn then_all_runs_blocks_concurrently_and_returns_ordered_array() {
    let seq =
        sequencer("then-all").all([add("add-one", 1), add("add-two", 2), add("add-three", 3)]);
    assert_eq!(run(seq, json!(10)).await.output(), &json!([11, 12, 13]));
}

#[tokio::test]
async fn then_all_supports_connector_steps() {
    let seq = sequencer("then-all-conn").all([
        add("add-one", 1),
        sequencer("doubled")
            .map(|v: i64| v * 2)
            .then(add("add-two", 2))
            .build(),
    ]);
    assert_eq!(run(seq, json!(5)).await.output(), &json!([6, 12]));
}

#[tokio::test]
async fn then_all_propagates_first_error_on_failure() {
    let seq = sequencer("then-all-fail").all([add("add-one", 1), failing("fail", "boom")]);
    failed_with(&run(seq, json!(1)).await, "boom");
}

// ---- thenAny: Weft's `any` (sequential, first success) ----------------------------

#[tokio::test]
async fn then_any_returns_first_successful_result_sequential() {
    let seq = sequencer("then-any").any([add("add-one", 1), add("add-two", 2)]);
    let r = run(seq, json!(5)).await;
    assert_eq!(r.output(), &json!(6));
    assert_eq!(r.starts("add-two"), 0);
}

#[tokio::test]
async fn then_any_skips_failed_blocks_and_returns_first_success() {
    let seq = sequencer("then-any-skip").any([failing("fail", "boom"), add("success", 42)]);
    assert_eq!(run(seq, json!(1)).await.output(), &json!(43));
}

#[tokio::test]
async fn then_any_does_not_execute_blocks_after_first_success() {
    let second_ran = Arc::new(AtomicBool::new(false));
    let flag = second_ran.clone();
    let second = handler("second").execute(move |v: i64, _ctx| {
        flag.store(true, Ordering::SeqCst);
        async move { Ok(v + 2) }
    });
    let seq = sequencer("then-any-skip-rest").any([add("first", 1), second]);
    assert_eq!(run(seq, json!(5)).await.output(), &json!(6));
    assert!(!second_ran.load(Ordering::SeqCst));
}

#[tokio::test]
async fn then_any_throws_when_all_blocks_fail() {
    // Upstream throws an AggregateError "All blocks in thenAny failed"; Weft fails with
    // the last block's error, the others staying in the run's record.
    let seq = sequencer("then-any-all-fail")
        .any([failing("fail-1", "error-1"), failing("fail-2", "error-2")]);
    let r = run(seq, json!(1)).await;
    failed_with(&r, "error-2");
    assert!(r.step_errors().iter().any(|e| e.message == "error-1"));
}

#[tokio::test]
async fn then_any_works_with_a_single_block() {
    let seq = sequencer("then-any-single").any([add("add-one", 1)]);
    assert_eq!(run(seq, json!(5)).await.output(), &json!(6));
}

// ---- race --------------------------------------------------------------------------

fn slow_add(name: &str, ms: u64, delta: i64) -> Block {
    handler(name).execute(move |v: i64, _ctx| async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(v + delta)
    })
}

#[tokio::test]
async fn race_resolves_with_first_successful_result() {
    let seq = sequencer("race-success").race([slow_add("slow", 200, 100), add("fast", 1)]);
    assert_eq!(run(seq, json!(5)).await.output(), &json!(6));
}

#[tokio::test]
async fn race_skips_failures_and_returns_first_success() {
    let seq = sequencer("race-skip-fail").race([
        slow_add("slow", 50, 100),
        failing("fast-fail", "fast failure"),
    ]);
    assert_eq!(run(seq, json!(1)).await.output(), &json!(101));
}

#[tokio::test]
async fn race_throws_when_all_blocks_fail() {
    let seq = sequencer("race-all-fail")
        .race([failing("fail-1", "error-1"), failing("fail-2", "error-2")]);
    assert!(run(seq, json!(1)).await.error().is_some());
}

#[tokio::test]
async fn race_single_block_completes_normally() {
    let seq = sequencer("race-single").race([add("add-one", 1)]);
    assert_eq!(run(seq, json!(10)).await.output(), &json!(11));
}

// ---- exitIf ------------------------------------------------------------------------

#[tokio::test]
async fn exit_if_exits_chain_when_condition_is_true() {
    let seq = sequencer("exit-true")
        .then(add("add-ten", 10))
        .exit_if(|v: i64| v > 5)
        .then(add("add-one", 1));
    assert_eq!(run(seq, json!(0)).await.output(), &json!(10));
}

#[tokio::test]
async fn exit_if_continues_chain_when_condition_is_false() {
    let seq = sequencer("exit-false")
        .then(add("add-ten", 10))
        .exit_if(|v: i64| v > 100)
        .then(add("add-one", 1));
    assert_eq!(run(seq, json!(0)).await.output(), &json!(11));
}

#[tokio::test]
async fn exit_if_works_with_background_work() {
    // The work started before the exit is awaited: the run never ends with work going.
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let side_effect = handler("side-effect").execute(move |v: i64, _ctx| {
        let flag = flag.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            flag.store(true, Ordering::SeqCst);
            Ok(v)
        }
    });
    let seq = sequencer("exit-work")
        .work(side_effect)
        .exit_if(|v: i64| v > 0)
        .then(add("add-one", 1));
    assert_eq!(run(seq, json!(5)).await.output(), &json!(5));
    assert!(ran.load(Ordering::SeqCst));
}

#[tokio::test]
async fn exit_if_multiple_exit_if_in_chain_first_match_wins() {
    let seq = || {
        sequencer("exit-multi")
            .then(add("add-one", 1))
            .exit_if(|v: i64| v > 3)
            .then(add("add-ten", 10))
            .exit_if(|v: i64| v > 50)
            .then(add("add-one-again", 1))
    };
    assert_eq!(run(seq(), json!(5)).await.output(), &json!(6));
    assert_eq!(run(seq(), json!(1)).await.output(), &json!(13));
}

// ---- throwIf -----------------------------------------------------------------------

fn guard_error(message: String) -> BlockError {
    BlockError::new(ErrorKind::Assertion, message)
}

#[tokio::test]
async fn throw_if_throws_the_supplied_static_error_when_condition_is_true() {
    let seq = sequencer("throw-static")
        .then(add("add-one", 1))
        .throw_if(|v: i64| v > 0, |_: i64| guard_error("positive".into()))
        .then(add("add-one-again", 1));
    let r = run(seq, json!(0)).await;
    failed_with(&r, "positive");
    assert_eq!(r.starts("add-one-again"), 0);
}

#[tokio::test]
async fn throw_if_invokes_the_error_factory_with_value_and_throws_its_result() {
    let seq = sequencer("throw-factory").throw_if(
        |v: i64| v == 42,
        |v: i64| guard_error(format!("bad value {v}")),
    );
    failed_with(&run(seq, json!(42)).await, "bad value 42");
}

#[tokio::test]
async fn throw_if_passes_through_unchanged_when_condition_is_false() {
    let seq = sequencer("throw-pass")
        .then(add("add-one", 1))
        .throw_if(|v: i64| v > 100, |_: i64| guard_error("never".into()))
        .then(add("add-one-again", 1));
    assert_eq!(run(seq, json!(0)).await.output(), &json!(2));
}

#[tokio::test]
async fn throw_if_is_caught_by_rescue_with_matching_when_filter() {
    let seq = sequencer("throw-rescue")
        .throw_if(|v: i64| v > 0, |_: i64| guard_error("tripped".into()))
        .rescue([RescueCase::when(
            [ErrorKind::Assertion],
            handler("fallback").execute(|_: Value, _ctx| async move { Ok(-1) }),
        )]);
    assert_eq!(run(seq, json!(5)).await.output(), &json!(-1));
}

// ---- workIf ------------------------------------------------------------------------

/// A background block that records that it ran, and with what.
fn bg_work(seen: &Arc<Mutex<Vec<Value>>>) -> Block {
    recorder("bg-work", seen)
}

#[tokio::test]
async fn work_if_dispatches_sidechain_when_condition_function_returns_true() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seq = sequencer("workIf-true")
        .work_if(|_: Value| true, bg_work(&seen))
        .wait_for_work_or_fail(None);
    assert_eq!(run(seq, json!(1)).await.output(), &json!(1));
    assert_eq!(*seen.lock().unwrap(), [json!(1)]);
}

#[tokio::test]
async fn work_if_skips_sidechain_when_condition_function_returns_false() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seq = sequencer("workIf-false")
        .work_if(|_: Value| false, bg_work(&seen))
        .wait_for_work_or_fail(None);
    assert_eq!(run(seq, json!(1)).await.output(), &json!(1));
    assert!(seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn work_if_condition_receives_the_running_value() {
    let got = Arc::new(Mutex::new(None));
    let g = got.clone();
    let seq = sequencer("workIf-ctx")
        .then(add("add-one", 1))
        .work_if(
            move |v: i64| {
                *g.lock().unwrap() = Some(v);
                true
            },
            add("bg-work", 0),
        )
        .wait_for_work_or_fail(None);
    run(seq, json!(1)).await.output();
    assert_eq!(*got.lock().unwrap(), Some(2));
}

#[tokio::test]
async fn work_if_condition_can_gate_dispatch_on_the_running_value() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seq = || {
        sequencer("workIf-value")
            .work_if(|v: String| !v.is_empty(), bg_work(&seen))
            .wait_for_work_or_fail(None)
    };
    run(seq(), json!("")).await.output();
    assert!(seen.lock().unwrap().is_empty());
    run(seq(), json!("hello")).await.output();
    assert_eq!(*seen.lock().unwrap(), [json!("hello")]);
}

#[tokio::test]
async fn work_if_supports_connector_overload() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seq = sequencer("workIf-conn")
        .work_if_with(|_: Value| true, |v: i64| v.to_string(), bg_work(&seen))
        .wait_for_work_or_fail(None);
    assert_eq!(run(seq, json!(42)).await.output(), &json!(42));
    assert_eq!(*seen.lock().unwrap(), [json!("42")]);
}

#[tokio::test]
async fn work_if_does_not_dispatch_connector_when_condition_is_false() {
    let called = Arc::new(AtomicBool::new(false));
    let flag = called.clone();
    let seq = sequencer("workIf-no-conn")
        .work_if_with(
            |_: Value| false,
            move |v: i64| {
                flag.store(true, Ordering::SeqCst);
                v.to_string()
            },
            add("bg-work", 0),
        )
        .wait_for_work_or_fail(None);
    run(seq, json!(42)).await.output();
    assert!(!called.load(Ordering::SeqCst));
}

#[tokio::test]
async fn work_if_returns_original_value_unchanged_fire_and_forget() {
    let seq = sequencer("workIf-passthrough")
        .work_if(
            |_: Value| true,
            handler("bg-work").execute(|v: i64, _ctx| async move { Ok(v * 100) }),
        )
        .then(add("add-one", 1));
    assert_eq!(run(seq, json!(5)).await.output(), &json!(6));
}

#[tokio::test]
async fn work_if_propagates_sidechain_failures_via_wait_for_work_fail_on_error() {
    let seq = sequencer("workIf-fail")
        .work_if(
            |_: Value| true,
            failing("failing-work", "conditional background failure"),
        )
        .wait_for_work_or_fail(None);
    failed_with(&run(seq, json!(1)).await, "conditional background failure");
}

#[tokio::test]
async fn work_if_does_not_surface_a_failure_when_a_background_work_task_fails_auto_await() {
    // The parent completes; the work's failure stays in the run's record.
    let seq = sequencer("work-step-error").work_if(
        |_: Value| true,
        failing("background-failing-work", "background failure"),
    );
    let r = run(seq, json!(1)).await;
    assert_eq!(r.output(), &json!(1));
    assert!(
        r.step_errors()
            .iter()
            .any(|e| e.message == "background failure")
    );
}
