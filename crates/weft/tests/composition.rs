//! Blocks compose freely: one block value at many places of a flow, handlers that fail
//! with `?` and plain text, and loops whose guard never passes for an answer.

use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use weft::prelude::*;
use weft::testing::TestHarness;
use weft_store::{Durability, SqliteStore};

fn double() -> Block {
    handler("double").execute(|n: i64, _ctx| async move { Ok(n * 2) })
}

fn inc() -> Block {
    handler("inc").execute(|n: i64, _ctx| async move { Ok(n + 1) })
}

/// The program of the issue: one handler at two places, an `Err("..".into())`, and a
/// `do_until` left to its guard.
#[tokio::test]
async fn one_handler_at_two_places_text_errors_and_an_unbounded_loop() {
    let double = double();
    let pipeline = sequencer("p")
        .then(double.clone())
        .then(inc())
        .then(double.clone());
    let run = TestHarness::new().run(pipeline, 5).await;
    assert_eq!(run.output(), &json!(22), "(5 * 2 + 1) * 2");
    assert_eq!(run.starts("double"), 2);
    let paths: Vec<&str> = run
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            weft_core::event::EventKind::StepCompleted { path, .. } => Some(&**path),
            _ => None,
        })
        .collect();
    assert_eq!(paths, ["p/double", "p/inc", "p/double@1", "p"]);

    let check = handler("check").execute(|n: i64, _ctx| async move {
        if n > 10 {
            return Err("too big".into());
        }
        Ok(n)
    });
    let run = TestHarness::new()
        .run(sequencer("guarded").then(double.clone()).then(check), 6)
        .await;
    let e = run.error().expect("the check fails");
    assert_eq!(
        (e.kind.as_str(), e.message.as_str()),
        ("handler", "too big")
    );
    assert_eq!(e.path, "guarded/check");

    let climb = sequencer("climb").do_until(|n: i64| n >= 1_000_000, inc());
    let run = TestHarness::new().run(climb, 0).await;
    assert_eq!(run.error().unwrap().kind, ErrorKind::LoopExhausted);
}

#[tokio::test]
async fn a_block_repeats_across_nested_sequencers_concurrent_steps_and_tools() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let lookup =
        handler("lookup")
            .description("Looks a word up.")
            .execute(move |word: String, _ctx| {
                c.fetch_add(1, Ordering::SeqCst);
                async move { Ok(format!("{word}: a word")) }
            });
    let (double, inc) = (double(), inc());
    let inner = sequencer("inner")
        .then(double.clone())
        .then(double.clone())
        .build();
    let agent = generator("agent")
        .user("Define {{ input }}")
        .tools([lookup.clone()]);
    let flow = sequencer("outer")
        .then(inner.clone())
        .then(inner)
        .all([inc.clone(), inc, double])
        .map(|ns: Vec<i64>| format!("w{}", ns.iter().sum::<i64>()))
        .then(lookup.clone())
        .then(agent.clone())
        .then(agent);
    let run = TestHarness::new()
        .tool_call("Define", "lookup", json!({"input": "weft"}))
        .after_tool("{last}")
        .run(flow, 1)
        .await;
    // 1 -> 4 -> 16; all(17, 17, 32) -> "w66".
    assert_eq!(run.output(), "weft: a word");
    assert_eq!(run.starts("double"), 5);
    assert_eq!(
        run.starts("inc"),
        2,
        "a repeated block in `all` runs each time"
    );
    assert_eq!(run.starts("agent"), 2);
    assert_eq!(calls.load(Ordering::SeqCst), 3, "a step and two tool calls");
    assert_eq!(run.tool_calls().len(), 2);
}

#[tokio::test]
async fn two_different_blocks_under_one_name_are_still_an_error() {
    let other = handler("double").execute(|n: i64, _ctx| async move { Ok(n * 3) });
    let e = sequencer("p")
        .then(double())
        .then(other)
        .build()
        .to_flow()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("two different handlers are named `double`"),
        "{e}"
    );
}

#[tokio::test]
async fn a_repeated_block_converts_to_yaml_and_back() {
    let d = double();
    let block = sequencer("p").then(d.clone()).then(d).build();
    let yaml = block.to_yaml().unwrap();
    assert!(yaml.contains("name: double"), "{yaml}");
    let loaded = weft_dialects::load_str(&yaml, "p.yaml", None, Some("native")).unwrap();
    let rt = Runtime::builder().register(&block).build().unwrap();
    let run = rt.run_flow(loaded.flow, 3).await.unwrap();
    assert_eq!(run.output.unwrap(), 12);
}

/// Each use of a block has its own journal entry: resuming after a pause replays both
/// uses from the journal and runs neither again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_use_of_a_block_is_journaled_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let calls = Arc::new(AtomicUsize::new(0));
    let build = |calls: Arc<AtomicUsize>| {
        let step = handler("step").execute(move |n: i64, _ctx| {
            calls.fetch_add(1, Ordering::SeqCst);
            async move { Ok(n + 10) }
        });
        sequencer("twice")
            .then(step.clone())
            .then(approval("check", "Go on from {{ input }}?", ["go"]))
            .map(|_: Value| 1)
            .then(step)
            .build()
    };
    let open = |block: &Block| {
        let store = Arc::new(SqliteStore::open(&db, Durability::Process).unwrap());
        Runtime::builder()
            .register(block)
            .store(store)
            .build()
            .unwrap()
    };
    let block = build(calls.clone());
    let first = open(&block).run(&block, 0).await.unwrap();
    assert_eq!(first.waiting[0]["prompt"], "Go on from 10?");
    let block = build(calls.clone());
    let done = open(&block)
        .engine()
        .answer(&first.run_id, None, json!({"decision": "go"}))
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(done.output.unwrap(), 11);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "one call per use, none repeated"
    );
}

#[tokio::test]
async fn handlers_question_mark_standard_errors_and_name_their_own_kinds() {
    let parse = handler("parse").execute(|text: String, _ctx| async move {
        let n: i64 = text.trim().parse()?;
        let v: Value = serde_json::from_str(&format!("{{\"n\": {n}}}"))?;
        Ok(v)
    });
    let run = TestHarness::new().run(parse.clone(), "twelve").await;
    let e = run.error().unwrap();
    assert_eq!(e.kind, ErrorKind::Handler);
    assert!(e.message.contains("invalid digit"), "{}", e.message);

    let search = handler("search").execute(|_: String, _ctx| async move {
        Err::<String, _>(BlockError::kind("search", "the index is down"))
    });
    let fallback = handler("fallback").execute(|e: Value, _ctx| async move {
        Ok(format!(
            "rescued {}",
            e["error"]["kind"].as_str().unwrap_or("?")
        ))
    });
    let rescued = sequencer("find")
        .then(search)
        .rescue([RescueCase::when([ErrorKind::parse("search")], fallback)]);
    let run = TestHarness::new().run(rescued, "rust").await;
    assert_eq!(run.output(), "rescued search");
}
