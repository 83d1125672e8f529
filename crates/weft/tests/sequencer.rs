//! The sequencer's methods, each against spec 002's words, run on the real engine.

use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use weft::prelude::*;
use weft::testing::TestHarness;

async fn run(block: impl Into<Block>, input: Value) -> weft::testing::TestRun {
    TestHarness::new().run(block, input).await
}

fn add(name: &str, n: i64) -> Block {
    handler(name).execute(move |x: i64, _ctx| async move { Ok(x + n) })
}

/// A handler that counts how many of its calls run at once, at most, and in total.
struct Gauge {
    now: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    calls: Arc<AtomicUsize>,
}

impl Gauge {
    fn new() -> Gauge {
        Gauge {
            now: Arc::default(),
            peak: Arc::default(),
            calls: Arc::default(),
        }
    }

    fn block(&self, name: &str, ms: u64) -> Block {
        let (now, peak, calls) = (self.now.clone(), self.peak.clone(), self.calls.clone());
        handler(name).execute(move |x: Value, _ctx| {
            let (now, peak, calls) = (now.clone(), peak.clone(), calls.clone());
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(n, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                now.fetch_sub(1, Ordering::SeqCst);
                Ok(x)
            }
        })
    }
}

#[tokio::test]
async fn then_runs_in_order_and_then_with_reshapes_the_input() {
    // 002: "Each step's output feeds into the next step's input"; connectors "receive
    // the previous step's output ... and return the shape the next block expects".
    let p = sequencer("p")
        .then(add("one", 1))
        .then(handler("ten").execute(|x: i64, _ctx| async move { Ok(x * 10) }))
        .then_with(
            |x: i64| json!({"n": x}),
            handler("wrap")
                .execute(|v: Value, _ctx| async move { Ok(v["n"].as_i64().unwrap() + 5) }),
        );
    assert_eq!(run(p, json!(1)).await.output(), &json!(25));
}

#[tokio::test]
async fn then_if_skips_when_its_condition_is_false_and_map_transforms_inline() {
    let p = || {
        sequencer("p")
            .then_if(|x: i64| x > 10, add("big", 1000))
            .map(|x: i64| format!("value {x}"))
    };
    assert_eq!(run(p(), json!(20)).await.output(), "value 1020");
    let small = run(p(), json!(3)).await;
    assert_eq!(small.output(), "value 3");
    assert_eq!(small.starts("big"), 0, "a false condition skips the block");
}

#[tokio::test]
async fn parallel_outputs_by_name_with_connectors_and_a_concurrency_limit() {
    // 002: "Run multiple blocks concurrently with a single step. Output is an object
    // keyed by step name"; entries take a connector; `{ maxConcurrency: 3 }`.
    let g = Gauge::new();
    let p = sequencer("p").parallel_limited(
        [
            ("a", Entry::from(g.block("ga", 80))),
            ("b", Entry::from(g.block("gb", 80))),
            ("c", entry(|x: i64| x * 100, g.block("gc", 80))),
        ],
        Some(2),
    );
    let r = run(p, json!(7)).await;
    assert_eq!(r.output(), &json!({"a": 7, "b": 7, "c": 700}));
    assert_eq!(g.peak.load(Ordering::SeqCst), 2, "at most two at once");

    let g = Gauge::new();
    let all_at_once = sequencer("q").parallel([
        ("a", Entry::from(g.block("ga", 80))),
        ("b", Entry::from(g.block("gb", 80))),
        ("c", Entry::from(g.block("gc", 80))),
    ]);
    run(all_at_once, json!(1)).await.output();
    assert_eq!(g.peak.load(Ordering::SeqCst), 3, "unbounded: all at once");
}

#[tokio::test]
async fn for_each_keeps_item_order_and_bounds_concurrency() {
    // 002: "Process arrays concurrently with forEach"; `{ maxConcurrency: 5 }`.
    let g = Gauge::new();
    let p = sequencer("p").for_each(g.block("item", 40), Some(2));
    let r = run(p, json!([1, 2, 3, 4, 5])).await;
    assert_eq!(r.output(), &json!([1, 2, 3, 4, 5]));
    assert_eq!(g.peak.load(Ordering::SeqCst), 2);
    assert_eq!(g.calls.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn for_each_in_extracts_the_list_and_for_each_dynamic_picks_a_block_per_item() {
    // 002: "extract array first"; "(item, index) => item.type === "pdf" ? parsePdf :
    // parseText" — a dynamic block per item, from routes declared up front.
    let p = sequencer("p").for_each_in(
        |v: Value| v["urls"].as_array().unwrap().clone(),
        add("fetch", 1),
        None,
    );
    assert_eq!(
        run(p, json!({"urls": [1, 2]})).await.output(),
        &json!([2, 3])
    );

    let pdf = handler("pdf").execute(|d: Value, _ctx| async move {
        Ok(format!("pdf:{}", d["name"].as_str().unwrap()))
    });
    let text = handler("text").execute(|d: Value, _ctx| async move {
        Ok(format!("text:{}", d["name"].as_str().unwrap()))
    });
    let p = sequencer("docs").for_each_dynamic(
        [pdf, text],
        |item: Value, index: usize| {
            if item["type"] == "pdf" || index > 5 {
                "pdf"
            } else {
                "text"
            }
            .to_owned()
        },
        None,
    );
    let docs = json!([{"type": "pdf", "name": "a"}, {"type": "md", "name": "b"}]);
    assert_eq!(run(p, docs).await.output(), &json!(["pdf:a", "text:b"]));
}

#[tokio::test]
async fn do_until_and_do_while_loop_on_their_output_within_their_bound() {
    // 002: "Loop until condition is true (checked after each iteration)"; "Loop while
    // condition is true"; "each with built-in guards to prevent infinite loops".
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let counted = handler("inc").execute(move |x: i64, _ctx| {
        c.fetch_add(1, Ordering::SeqCst);
        async move { Ok(x + 1) }
    });
    let until = sequencer("u").do_until(|x: i64| x >= 4, counted);
    assert_eq!(run(until, json!(0)).await.output(), &json!(4));
    assert_eq!(calls.load(Ordering::SeqCst), 4, "checked after each run");

    let whilst = sequencer("w").do_while(|x: i64| x < 3, add("inc", 1));
    assert_eq!(run(whilst, json!(0)).await.output(), &json!(3));

    // A bound the user chose ends the loop with the last value, and says so.
    let endless = sequencer("e").do_until_at_most(|_: i64| false, add("inc", 1), 6);
    let r = run(endless, json!(0)).await;
    assert_eq!(r.output(), &json!(6));
    let warnings = r.warnings();
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].0, "e/do_until");
    assert_eq!(warnings[0].1, "loop_bound_reached");
    assert!(
        warnings[0].2.contains("bound of 6 iterations"),
        "{:?}",
        warnings[0]
    );

    // The guard every loop has is not an answer: the condition unmet at it is a failure.
    let guarded = sequencer("g").do_until(|n: i64| n >= 1_000_000, add("inc", 1));
    let r = run(guarded, json!(0)).await;
    let e = r.error().expect("the guard fails the run");
    assert_eq!(e.kind, ErrorKind::LoopExhausted);
    assert_eq!(e.path, "g/do_until");
    assert!(
        e.message.contains(&format!(
            "the loop `do_until` stopped at its bound of {} iterations",
            weft::DEFAULT_MAX_ITERATIONS
        )),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn loop_back_jumps_to_a_named_step_at_most_max_iterations_times() {
    // 002: ".loopBack("generate-block", { when: (result) => !result.isValid,
    // maxIterations: 3 })" — "requires explicit max iterations".
    let p = || {
        sequencer("p")
            .then(add("start", 0))
            .then(add("generate", 1))
            .then(add("validate", 0))
            .loop_back("generate", |x: i64| x < 3, 5)
            .map(|x: i64| x * 10)
    };
    let r = run(p(), json!(0)).await;
    assert_eq!(r.output(), &json!(30));
    assert_eq!(r.starts("generate"), 3);
    assert_eq!(r.starts("start"), 1, "steps before the target run once");

    let bounded = sequencer("b")
        .then(add("generate", 1))
        .loop_back("generate", |_: i64| true, 2);
    let r = run(bounded, json!(0)).await;
    assert_eq!(r.output(), &json!(3), "one run plus two jumps back");

    let lost = sequencer("lost")
        .then(add("a", 1))
        .loop_back("nowhere", |_: i64| true, 2);
    let e = lost.build().to_flow().unwrap_err().to_string();
    assert!(e.contains("`nowhere`, which is not an earlier step"), "{e}");
}

#[tokio::test]
async fn background_work_never_aborts_the_chain_and_wait_for_work_bounds_it() {
    // 002: "Queue non-blocking tasks that run alongside the main pipeline. The main
    // chain continues immediately — background failures emit step_error items but
    // never abort the pipeline"; ".waitForWork({ timeoutMs: 5000 })".
    let failing = handler("analytics").execute(|_: Value, _ctx| async move {
        Err::<Value, _>(BlockError::new(ErrorKind::Handler, "analytics is down"))
    });
    let p = sequencer("p")
        .then(add("core", 1))
        .work(failing)
        .then(add("more", 10));
    let r = run(p, json!(0)).await;
    assert_eq!(r.output(), &json!(11));
    assert!(
        r.step_errors()
            .iter()
            .any(|e| e.message == "analytics is down"),
        "the failure is an error event: {:?}",
        r.step_errors()
    );

    let finished = Arc::new(AtomicUsize::new(0));
    let f = finished.clone();
    let slow = handler("slow").execute(move |_: Value, _ctx| {
        let f = f.clone();
        async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            f.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    });
    let p = sequencer("q")
        .work(slow)
        .then(add("main", 1))
        .wait_for_work(Some(Duration::from_millis(100)))
        .then(add("after", 1));
    let started = std::time::Instant::now();
    let r = run(p, json!(0)).await;
    assert_eq!(r.output(), &json!(2));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the timeout stopped the work"
    );
    assert_eq!(finished.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn branch_takes_the_first_matching_case() {
    // 002: "Route to different blocks based on runtime conditions. First matching
    // branch wins".
    let p = || {
        sequencer("p").branch([
            BranchCase::new(
                "urgent",
                |v: Value| v["priority"] == "critical",
                add("urgent", 100),
            )
            .connector(|v: Value| v["n"].as_i64().unwrap()),
            BranchCase::new(
                "standard",
                |v: Value| v["priority"] == "normal",
                add("standard", 10),
            )
            .connector(|v: Value| v["n"].as_i64().unwrap()),
            BranchCase::new(
                "fallback",
                |_: Value| true,
                handler("fallback").execute(|_: Value, _ctx| async move { Ok("default") }),
            ),
        ])
    };
    assert_eq!(
        run(p(), json!({"priority": "critical", "n": 1}))
            .await
            .output(),
        &json!(101)
    );
    assert_eq!(
        run(p(), json!({"priority": "normal", "n": 1}))
            .await
            .output(),
        &json!(11)
    );
    assert_eq!(
        run(p(), json!({"priority": "low", "n": 1})).await.output(),
        "default"
    );
}

#[tokio::test]
async fn taps_observe_without_changing_the_value() {
    // 002: "Run blocks or functions for observation without changing the payload".
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    let p = || {
        let s = s.clone();
        sequencer("p")
            .tap(add("audit", 1000))
            .tap_fn(move |v: &i64| {
                s.fetch_add(*v as usize, Ordering::SeqCst);
            })
            .tap_if(|x: i64| x < 5, add("alert", 1))
            .map(|x: i64| x + 1)
    };
    let r = run(p(), json!(2)).await;
    assert_eq!(r.output(), &json!(3));
    assert_eq!((r.starts("audit"), r.starts("alert")), (1, 1));
    assert_eq!(seen.load(Ordering::SeqCst), 2);
    assert_eq!(run(p(), json!(9)).await.starts("alert"), 0);
}

fn failing(name: &str, kind: ErrorKind) -> Block {
    handler(name).execute(move |_: Value, _ctx| {
        let kind = kind.clone();
        async move { Err::<Value, _>(BlockError::new(kind, "it failed")) }
    })
}

#[tokio::test]
async fn rescue_matches_error_kinds_in_order() {
    // 002: "Catch errors from prior steps and route to recovery blocks by error type";
    // `{ when: [RateLimitError], block: retryWithBackoff }, ..., { block:
    // genericRecovery } // catch-all`.
    let recover = |kind: ErrorKind| {
        sequencer("p").then(failing("search", kind)).rescue([
            RescueCase::when(
                [ErrorKind::RateLimit],
                handler("backoff").execute(|e: Value, _ctx| async move {
                    Ok(format!(
                        "backoff after {}",
                        e["error"]["kind"].as_str().unwrap()
                    ))
                }),
            ),
            RescueCase::when(
                [ErrorKind::Model],
                handler("fallback").execute(|_: Value, _ctx| async move { Ok("fallback model") }),
            ),
            RescueCase::any(
                handler("generic").execute(|_: Value, _ctx| async move { Ok("generic") }),
            ),
        ])
    };
    assert_eq!(
        run(recover(ErrorKind::RateLimit), json!(0)).await.output(),
        "backoff after rate_limit"
    );
    assert_eq!(
        run(recover(ErrorKind::Model), json!(0)).await.output(),
        "fallback model"
    );
    assert_eq!(
        run(recover(ErrorKind::Timeout), json!(0)).await.output(),
        "generic"
    );

    let unmatched = sequencer("u")
        .then(failing("search", ErrorKind::Auth))
        .rescue([RescueCase::when([ErrorKind::RateLimit], add("never", 1))]);
    assert_eq!(
        run(unmatched, json!(0)).await.error().unwrap().kind,
        ErrorKind::Auth
    );
}

#[tokio::test]
async fn race_takes_the_first_success_and_cancels_the_rest() {
    let g = Gauge::new();
    let slow = g.block("slow", 2000);
    let quick = handler("quick").execute(|_: Value, _ctx| async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        Ok("quick")
    });
    let p = sequencer("p").race([slow, failing("broken", ErrorKind::Model), quick]);
    let started = std::time::Instant::now();
    let r = run(p, json!(0)).await;
    assert_eq!(r.output(), "quick");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "the slow entrant was cancelled"
    );
    assert_eq!(
        g.now.load(Ordering::SeqCst),
        1,
        "cancelled mid-call: it never finished"
    );
}

#[tokio::test]
async fn all_lists_outputs_in_order_and_any_takes_the_first_success_in_order() {
    let all = sequencer("all").all([add("a", 1), add("b", 2), add("c", 3)]);
    assert_eq!(run(all, json!(10)).await.output(), &json!([11, 12, 13]));
    let broken = sequencer("broken").all([add("a", 1), failing("b", ErrorKind::Model)]);
    assert!(run(broken, json!(0)).await.error().is_some());

    let any = sequencer("any").any([
        failing("first", ErrorKind::Model),
        add("second", 2),
        add("third", 3),
    ]);
    let r = run(any, json!(10)).await;
    assert_eq!(r.output(), &json!(12));
    assert_eq!(
        r.starts("third"),
        0,
        "tried in order, stopping at the first success"
    );
    let none = sequencer("none").any([
        failing("a", ErrorKind::Model),
        failing("b", ErrorKind::Timeout),
    ]);
    assert_eq!(
        run(none, json!(0)).await.error().unwrap().kind,
        ErrorKind::Timeout
    );
}

#[tokio::test]
async fn exit_if_ends_the_chain_early() {
    let p = || {
        sequencer("p")
            .then(add("a", 1))
            .exit_if(|x: i64| x > 5)
            .then(add("b", 100))
    };
    let r = run(p(), json!(10)).await;
    assert_eq!(r.output(), &json!(11));
    assert_eq!(r.starts("b"), 0);
    assert_eq!(run(p(), json!(0)).await.output(), &json!(101));
}

#[tokio::test]
async fn a_router_runs_the_route_its_selector_names() {
    // 002: "Routes are declared statically so the framework can validate them, but
    // selection happens at runtime."
    let chat = handler("chat").execute(|t: String, _ctx| async move { Ok(format!("chat: {t}")) });
    let plan = handler("plan").execute(|t: String, _ctx| async move { Ok(format!("plan: {t}")) });
    let r = || {
        router("mode")
            .routes([chat.clone(), plan.clone()])
            .select(|t: String, _state: Value| {
                if t.starts_with("plan") {
                    "plan"
                } else if t == "?" {
                    "review"
                } else {
                    "chat"
                }
                .to_owned()
            })
    };
    assert_eq!(
        run(r(), json!("plan the trip")).await.output(),
        "plan: plan the trip"
    );
    assert_eq!(run(r(), json!("hello")).await.output(), "chat: hello");
    let e = run(r(), json!("?")).await;
    assert!(
        e.error()
            .unwrap()
            .message
            .contains("`mode` chose a route it does not declare")
    );
}

#[tokio::test]
async fn names_must_be_unique() {
    // 002: "Names must be unique — within a flow, each block needs a unique name".
    let twins = sequencer("p").then(add("same", 1)).then(add("same", 2));
    let e = twins.build().to_flow().unwrap_err().to_string();
    assert!(e.contains("two different handlers are named `same`"), "{e}");
}

#[tokio::test]
async fn a_handler_s_input_type_is_checked() {
    let r = run(add("typed", 1), json!("not a number")).await;
    let e = r.error().unwrap();
    assert_eq!(e.kind, ErrorKind::Input);
    assert!(
        e.message.contains("the handler `typed` takes i64"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn a_rescue_covers_steps_before_background_work_too() {
    // Found by the research example: a rescue after `work` caught only the steps after
    // the work; it covers every prior step.
    let p = sequencer("p")
        .then(failing("search", ErrorKind::Model))
        .work(add("analytics", 1))
        .then(add("after", 1))
        .rescue([RescueCase::any(
            handler("recover").execute(|_: Value, _ctx| async move { Ok("recovered") }),
        )]);
    assert_eq!(run(p, json!(0)).await.output(), "recovered");
}
