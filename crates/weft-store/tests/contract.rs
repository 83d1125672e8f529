//! The `Store` contract, held by every store: what the engine, the server and the CLI
//! rely on, whichever database is underneath.

use serde_json::json;
use std::sync::Arc;
use weft_core::event::{Event, EventKind};
use weft_core::ports::{
    Claim, Claimed, EntryKind, JournalEntry, RunRecord, RunStatus, ScopedChange, Scopes, StoreError,
};
use weft_core::usage::Usage;
use weft_core::value::Shared;

mod stores;

fn run(id: &str) -> RunRecord {
    RunRecord::new(
        id.into(),
        "hash".into(),
        "flow".into(),
        json!({"n": 1}),
        1_000,
    )
}

fn entry(key: &str, kind: EntryKind, value: serde_json::Value) -> JournalEntry {
    JournalEntry {
        key: key.into(),
        kind,
        value: value.into(),
    }
}

fn event(run: &str, seq: u64) -> Event {
    Event {
        run_id: Arc::from(run),
        seq,
        at_ms: 7 + seq,
        kind: EventKind::RunCancelled,
    }
}

#[tokio::test]
async fn a_run_reads_back_as_written_field_for_field() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        let mut r = run("0193a1b2-full");
        r.source = Some("flows/ünïcode.yaml".into());
        r.source_hash = Some("sh".into());
        r.dialect = Some("native".into());
        r.flow_id = Some("fid".into());
        // Key order is part of the value: `z` stays before `a`.
        r.input = json!({"z": [1, 2.5, null, "\u{0}nul"], "a": {"deep": {"x": true}}});
        r.status = RunStatus::Paused;
        r.output = Some(Shared::new(json!("out")));
        r.state = Some(Shared::new(json!({"k": [1, 2, 3]})));
        r.error = Some(json!({"kind": "timeout"}));
        r.waiting = Some(json!([{"key": "approve"}]));
        r.usage = Usage {
            input_tokens: 12,
            output_tokens: 34,
            cost_usd: 0.5,
        };
        r.owner = Some("host:1".into());
        r.updated_ms = 2_000;
        r.scopes = Scopes {
            session: Some("s".into()),
            user: None,
            project: Some("p".into()),
        };
        r.view = Some(json!({"dialect": "native"}));
        r.settings = Some(json!({"files": "/tmp"}));
        r.retries = 3;
        store.create_run(&r).await.unwrap();
        let back = store.get_run(&r.id).await.unwrap().unwrap();
        assert_eq!(back, r, "{name}");
        assert_eq!(
            serde_json::to_string(&back.input).unwrap(),
            serde_json::to_string(&r.input).unwrap(),
            "{name}: key order"
        );

        r.status = RunStatus::Completed;
        r.owner = None;
        r.waiting = None;
        store.update_run(&r).await.unwrap();
        assert_eq!(store.get_run(&r.id).await.unwrap().unwrap(), r, "{name}");
        // Updating a run that is not there creates it (a run continued elsewhere).
        store.update_run(&run("new-by-update")).await.unwrap();
        assert!(
            store.get_run("new-by-update").await.unwrap().is_some(),
            "{name}"
        );
    }
}

#[tokio::test]
async fn runs_are_found_by_id_or_a_unique_prefix_and_ids_do_not_repeat() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        for id in ["abcd1111", "abcd2222", "ab_d3333", "ab%x4444", "ABCE5555"] {
            store.create_run(&run(id)).await.unwrap();
        }
        assert_eq!(
            store.get_run("abcd1").await.unwrap().unwrap().id,
            "abcd1111",
            "{name}"
        );
        let e = store.get_run("abcd").await.unwrap_err();
        assert!(matches!(e, StoreError::Conflict(_)), "{name}: {e:?}");
        // Too short to be a prefix, and a prefix of nothing.
        assert!(store.get_run("abc").await.unwrap().is_none(), "{name}");
        assert!(store.get_run("zzzz").await.unwrap().is_none(), "{name}");
        // `_` and `%` are characters of the id, never wildcards.
        assert_eq!(
            store.get_run("ab_d").await.unwrap().unwrap().id,
            "ab_d3333",
            "{name}"
        );
        assert_eq!(
            store.get_run("ab%x").await.unwrap().unwrap().id,
            "ab%x4444",
            "{name}"
        );
        // Prefixes are case-sensitive.
        assert!(store.get_run("abce").await.unwrap().is_none(), "{name}");
        assert_eq!(
            store.get_run("ABCE").await.unwrap().unwrap().id,
            "ABCE5555",
            "{name}"
        );
        let e = store.create_run(&run("abcd1111")).await.unwrap_err();
        assert!(matches!(e, StoreError::Conflict(_)), "{name}: {e:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn journal_entries_read_back_in_append_order_and_forget_takes_only_their_keys() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        let mut durable = Vec::new();
        for i in 0..300 {
            let e = entry(&format!("k{i}"), EntryKind::Result, json!({"output": i}));
            if i % 3 == 0 {
                store.append("r", e).await.unwrap();
            } else {
                durable.push(store.append_queued("r", e).await.unwrap());
            }
        }
        for d in durable {
            d.await.unwrap();
        }
        store
            .append(
                "other",
                entry("k0", EntryKind::Answer, json!({"decision": "approve"})),
            )
            .await
            .unwrap();
        store
            .append(
                "other",
                entry("k1", EntryKind::Started, json!({"idempotency_key": "x"})),
            )
            .await
            .unwrap();
        let keys: Vec<String> = store
            .journal("r")
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.key)
            .collect();
        let expected: Vec<String> = (0..300).map(|i| format!("k{i}")).collect();
        assert_eq!(keys, expected, "{name}");

        // A forget queued behind an append sees it, and takes every kind of entry
        // of its keys; an append after it stays.
        store
            .append("r", entry("k5", EntryKind::Started, json!({})))
            .await
            .unwrap();
        let late = store
            .append_queued("r", entry("k5", EntryKind::Failure, json!("again")))
            .await
            .unwrap();
        store
            .forget("r", &["k5".to_owned(), "k7".to_owned()])
            .await
            .unwrap();
        late.await.unwrap();
        store
            .append("r", entry("k7", EntryKind::Result, json!("new")))
            .await
            .unwrap();
        let journal = store.journal("r").await.unwrap();
        assert_eq!(journal.len(), 299, "{name}");
        assert!(!journal.iter().any(|e| e.key == "k5"), "{name}");
        assert_eq!(journal.last().unwrap().value, json!("new"), "{name}");
        let kinds: Vec<EntryKind> = store
            .journal("other")
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.kind)
            .collect();
        assert_eq!(kinds, [EntryKind::Answer, EntryKind::Started], "{name}");
        assert!(store.journal("none").await.unwrap().is_empty(), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_of_many_runs_are_each_in_order() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        let tasks: Vec<_> = (0..8)
            .map(|r| {
                let store = store.clone();
                tokio::spawn(async move {
                    for i in 0..50 {
                        let e = entry(&format!("s{i}"), EntryKind::Result, json!(i));
                        store.append(&format!("run{r}"), e).await.unwrap();
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        for r in 0..8 {
            let values: Vec<_> = store
                .journal(&format!("run{r}"))
                .await
                .unwrap()
                .into_iter()
                .map(|e| e.value)
                .collect();
            assert_eq!(
                values,
                (0..50).map(|i| json!(i)).collect::<Vec<_>>(),
                "{name}"
            );
        }
    }
}

#[tokio::test]
async fn event_logs_read_from_any_point_and_ignore_repeats() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        assert_eq!(store.next_event_seq("r").await.unwrap(), 0, "{name}");
        let first: Vec<_> = (0..5).map(|i| event("r", i)).collect();
        store.append_events(&first).await.unwrap();
        store.append_events(&[event("other", 0)]).await.unwrap();
        store.append_events(&[]).await.unwrap();
        // A repeat of a stored seq is ignored, never a failure of its batch.
        let mut repeat = event("r", 2);
        repeat.at_ms = 999;
        store.append_events(&[repeat, event("r", 5)]).await.unwrap();
        let seqs = |v: Vec<Event>| v.into_iter().map(|e| e.seq).collect::<Vec<_>>();
        assert_eq!(
            seqs(store.events("r", None, 100).await.unwrap()),
            [0, 1, 2, 3, 4, 5],
            "{name}"
        );
        assert_eq!(
            seqs(store.events("r", Some(2), 2).await.unwrap()),
            [3, 4],
            "{name}"
        );
        assert!(
            store.events("r", Some(5), 10).await.unwrap().is_empty(),
            "{name}"
        );
        assert!(
            store.events("none", None, 10).await.unwrap().is_empty(),
            "{name}"
        );
        assert_eq!(
            store.events("r", None, 10).await.unwrap()[2],
            event("r", 2),
            "{name}"
        );
        assert_eq!(store.next_event_seq("r").await.unwrap(), 6, "{name}");
        assert_eq!(store.next_event_seq("other").await.unwrap(), 1, "{name}");
    }
}

/// Run `r`'s code step `a` completed with `output`.
fn completed(seq: u64, at_ms: u64, output: &Shared) -> Event {
    Event {
        run_id: Arc::from("r"),
        seq,
        at_ms,
        kind: EventKind::StepCompleted {
            path: "a".into(),
            kind: "code".into(),
            elapsed_us: 3,
            replayed: false,
            exit: None,
            output: Some(output.clone()),
        },
    }
}

#[tokio::test]
async fn an_event_carrying_values_reads_back_equal() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        let big = Shared::new(json!({"items": (0..2000).collect::<Vec<_>>(), "b": "x"}));
        let events = vec![
            Event {
                run_id: Arc::from("r"),
                seq: 0,
                at_ms: 1,
                kind: EventKind::StepStarted {
                    path: "a".into(),
                    kind: "code".into(),
                    input: Some(big.clone()),
                },
            },
            completed(1, 2, &big),
        ];
        store.append_events(&events).await.unwrap();
        assert_eq!(store.events("r", None, 10).await.unwrap(), events, "{name}");
    }
}

#[tokio::test]
async fn a_result_sharing_its_large_output_with_events_reads_back_equal() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        let big = Shared::new(json!({"items": (0..2000).collect::<Vec<_>>()}));
        let mut result = weft_core::value::SharedMap::new();
        result.insert("output".into(), big.clone());
        let entry = JournalEntry {
            key: "a".into(),
            kind: EntryKind::Result,
            value: Shared::object(result),
        };
        store.append("r", entry.clone()).await.unwrap();
        let done = completed(0, 1, &big);
        store
            .append_events(std::slice::from_ref(&done))
            .await
            .unwrap();
        assert_eq!(store.journal("r").await.unwrap(), [entry], "{name}");
        assert_eq!(store.events("r", None, 10).await.unwrap(), [done], "{name}");
    }
}

fn claim(run_id: &str, from: &[RunStatus], owner: &str) -> Claim {
    Claim {
        run_id: run_id.into(),
        from: from.to_vec(),
        owner_was: None,
        owner: owner.into(),
        now_ms: 5_000,
        entry: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_concurrent_claims_of_a_run_exactly_one_wins_and_only_its_entry_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        let mut paused = run("paused-run");
        paused.status = RunStatus::Paused;
        paused.owner = Some("gone:1".into());
        store.create_run(&paused).await.unwrap();
        let tasks: Vec<_> = (0..10)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    let mut c = claim("paused-run", &[RunStatus::Paused], &format!("p:{i}"));
                    c.entry = Some(entry("approve", EntryKind::Answer, json!({"by": i})));
                    store.claim_run(c).await.unwrap()
                })
            })
            .collect();
        let mut won = Vec::new();
        for (i, t) in tasks.into_iter().enumerate() {
            match t.await.unwrap() {
                Claimed::Taken => won.push(i),
                Claimed::Lost(now) => {
                    assert_eq!(now.status, RunStatus::Running, "{name}");
                }
            }
        }
        assert_eq!(won.len(), 1, "{name}: {won:?}");
        let now = store.get_run("paused-run").await.unwrap().unwrap();
        assert_eq!(now.owner, Some(format!("p:{}", won[0])), "{name}");
        assert_eq!(now.updated_ms, 5_000, "{name}");
        let journal = store.journal("paused-run").await.unwrap();
        assert_eq!(journal.len(), 1, "{name}");
        assert_eq!(journal[0].value, json!({"by": won[0]}), "{name}");
    }
}

#[tokio::test]
async fn a_claim_checks_the_owner_it_saw_and_a_missing_run_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        let mut r = run("owned-run");
        r.owner = Some("a:1".into());
        store.create_run(&r).await.unwrap();
        let mut c = claim("owned-run", &[RunStatus::Running], "b:2");
        c.owner_was = Some(Some("someone-else".into()));
        assert!(
            matches!(store.claim_run(c.clone()).await.unwrap(), Claimed::Lost(_)),
            "{name}"
        );
        c.owner_was = Some(Some("a:1".into()));
        assert_eq!(
            store.claim_run(c.clone()).await.unwrap(),
            Claimed::Taken,
            "{name}"
        );
        // The same claim again: the owner moved on.
        assert!(
            matches!(store.claim_run(c).await.unwrap(), Claimed::Lost(_)),
            "{name}"
        );
        let e = store
            .claim_run(claim("no-such-run", &[RunStatus::Paused], "b:2"))
            .await
            .unwrap_err();
        assert!(matches!(e, StoreError::Conflict(_)), "{name}: {e:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scoped_state_changes_apply_one_after_another() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        let tasks: Vec<_> = (0..60)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move {
                    let inc = ScopedChange::Inc {
                        path: "stats.count".into(),
                        by: 1.0,
                    };
                    store.change_scoped_state("user/u", &[inc]).await.unwrap();
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let patch = ScopedChange::Patch(json!({"mode": "plan"}));
        store.change_scoped_state("user/u", &[patch]).await.unwrap();
        let bad = [
            ScopedChange::Patch(json!({"mode": "chat"})),
            ScopedChange::Inc {
                path: "mode".into(),
                by: 1.0,
            },
        ];
        let e = store.change_scoped_state("user/u", &bad).await.unwrap_err();
        assert!(matches!(e, StoreError::Conflict(_)), "{name}: {e:?}");
        assert_eq!(
            store.scoped_state("user/u").await.unwrap(),
            Some(json!({"stats": {"count": 60}, "mode": "plan"})),
            "{name}"
        );
        assert_eq!(
            store.scoped_state("user/none").await.unwrap(),
            None,
            "{name}"
        );
    }
}

#[tokio::test]
async fn stats_count_runs_by_status_usage_and_step_results() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        for (i, status) in [
            RunStatus::Completed,
            RunStatus::Completed,
            RunStatus::Failed,
        ]
        .into_iter()
        .enumerate()
        {
            let mut r = run(&format!("stat{i}"));
            r.status = status;
            r.usage = Usage {
                input_tokens: 10,
                output_tokens: 1,
                cost_usd: 0.25,
            };
            store.create_run(&r).await.unwrap();
        }
        for (key, kind) in [
            ("a", EntryKind::Result),
            ("b", EntryKind::Result),
            ("c", EntryKind::Answer),
            ("d", EntryKind::Failure),
        ] {
            store
                .append("stat0", entry(key, kind, json!(null)))
                .await
                .unwrap();
        }
        let mut stats = store.run_stats().await.unwrap();
        stats.runs.sort_by_key(|(s, _)| s.as_str());
        assert_eq!(
            stats.runs,
            [(RunStatus::Completed, 2), (RunStatus::Failed, 1)],
            "{name}"
        );
        assert_eq!(stats.steps, 2, "{name}");
        assert_eq!(
            stats.usage,
            Usage {
                input_tokens: 30,
                output_tokens: 3,
                cost_usd: 0.75
            },
            "{name}"
        );
    }
}

#[tokio::test]
async fn a_flow_s_first_ir_stays() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        assert_eq!(store.get_flow("h").await.unwrap(), None, "{name}");
        store.put_flow("h", "{\"a\":1}").await.unwrap();
        store.put_flow("h", "{\"a\":2}").await.unwrap();
        assert_eq!(
            store.get_flow("h").await.unwrap().as_deref(),
            Some("{\"a\":1}"),
            "{name}"
        );
    }
}
