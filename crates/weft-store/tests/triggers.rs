//! The `TriggerStore` contract, held by every store: schedules, firings written once with
//! their runs, webhooks, and the timers of paused runs.

use serde_json::json;
use std::sync::Arc;
use weft_core::ports::{
    CatchUp, Claim, Firing, FiringOutcome, Hook, HookAuth, Overlap, RunRecord, RunStatus, Schedule,
    Store, StoreError, TriggerStore,
};

mod stores;

fn triggers(store: &Arc<dyn Store>) -> &dyn TriggerStore {
    store.triggers().expect("every store keeps triggers")
}

fn schedule(id: &str) -> Schedule {
    Schedule {
        id: id.into(),
        flow: "hello".into(),
        version: None,
        cron: "*/5 * * * *".into(),
        tz: "Europe/Paris".into(),
        input: json!({"name": "x"}),
        overlap: Overlap::Queue,
        catch_up: CatchUp::All,
        jitter_ms: 250,
        paused: false,
        created_ms: 10,
        updated_ms: 11,
        since_ms: 10,
    }
}

fn queued_run(id: &str) -> RunRecord {
    let mut r = RunRecord::new(id.into(), "hash".into(), "hello".into(), json!({}), 5);
    r.status = RunStatus::Queued;
    r
}

fn firing(fire_ms: i64, outcome: FiringOutcome, run_id: Option<&str>) -> Firing {
    Firing {
        schedule_id: "nightly".into(),
        fire_ms,
        outcome,
        run_id: run_id.map(str::to_owned),
        missed: 0,
        at_ms: fire_ms + 3,
        error: None,
    }
}

#[tokio::test]
async fn schedules_read_back_as_written_and_a_second_create_conflicts() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        let t = triggers(&store);
        let s = schedule("nightly");
        t.put_schedule(&s, true).await.unwrap();
        assert_eq!(
            t.schedule("nightly").await.unwrap(),
            Some(s.clone()),
            "{name}"
        );
        let again = t.put_schedule(&s, true).await;
        assert!(
            matches!(again, Err(StoreError::Conflict(_))),
            "{name}: {again:?}"
        );
        let paused = Schedule {
            paused: true,
            ..s.clone()
        };
        t.put_schedule(&paused, false).await.unwrap();
        t.put_schedule(&schedule("another"), true).await.unwrap();
        let all = t.schedules().await.unwrap();
        assert_eq!(all, vec![schedule("another"), paused], "{name}");
        t.record_firing(&firing(1, FiringOutcome::Missed, None), None)
            .await
            .unwrap();
        assert!(t.delete_schedule("nightly").await.unwrap(), "{name}");
        assert!(!t.delete_schedule("nightly").await.unwrap(), "{name}");
        assert_eq!(t.schedule("nightly").await.unwrap(), None, "{name}");
        assert!(t.firings("nightly", 10).await.unwrap().is_empty(), "{name}");
    }
}

#[tokio::test]
async fn of_concurrent_firings_of_one_time_exactly_one_writes_itself_and_its_run() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    let id = format!("run-{i}");
                    let f = firing(60_000, FiringOutcome::Started, Some(&id));
                    triggers(&store)
                        .record_firing(&f, Some(&queued_run(&id)))
                        .await
                        .unwrap()
                })
            })
            .collect();
        let mut won = Vec::new();
        for (i, t) in tasks.into_iter().enumerate() {
            if t.await.unwrap() {
                won.push(i);
            }
        }
        assert_eq!(won.len(), 1, "{name}: {won:?}");
        let winner = format!("run-{}", won[0]);
        for i in 0..8 {
            let found = store.get_run(&format!("run-{i}")).await.unwrap();
            assert_eq!(found.is_some(), i == won[0], "{name}: run-{i}");
        }
        let recorded = triggers(&store).firings("nightly", 10).await.unwrap();
        assert_eq!(
            recorded,
            vec![firing(60_000, FiringOutcome::Started, Some(&winner))],
            "{name}"
        );
    }
}

#[tokio::test]
async fn a_firing_whose_run_cannot_be_written_is_not_recorded() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        store.create_run(&queued_run("taken")).await.unwrap();
        let f = firing(5, FiringOutcome::Started, Some("taken"));
        let written = triggers(&store)
            .record_firing(&f, Some(&queued_run("taken")))
            .await;
        assert!(
            matches!(written, Err(StoreError::Conflict(_))),
            "{name}: {written:?}"
        );
        assert!(
            triggers(&store)
                .firings("nightly", 10)
                .await
                .unwrap()
                .is_empty(),
            "{name}"
        );
    }
}

#[tokio::test]
async fn firings_list_latest_first_and_a_queued_one_starts_once() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        let t = triggers(&store);
        let mut skipped = firing(1_000, FiringOutcome::Skipped, None);
        skipped.missed = 3;
        let mut failed = firing(500, FiringOutcome::Failed, None);
        failed.error = Some("no flow called `hello`".into());
        assert!(t.record_firing(&failed, None).await.unwrap());
        assert!(t.record_firing(&skipped, None).await.unwrap());
        assert!(!t.record_firing(&skipped, None).await.unwrap(), "{name}");
        let queued = firing(2_000, FiringOutcome::Queued, None);
        assert!(t.record_firing(&queued, None).await.unwrap());
        assert!(
            t.start_queued_firing("nightly", 2_000, &queued_run("q1"))
                .await
                .unwrap()
        );
        let second = t
            .start_queued_firing("nightly", 2_000, &queued_run("q2"))
            .await;
        assert!(!second.unwrap(), "{name}");
        assert!(store.get_run("q2").await.unwrap().is_none(), "{name}");
        assert!(
            !t.start_queued_firing("nightly", 1_000, &queued_run("q3"))
                .await
                .unwrap()
        );
        let listed = t.firings("nightly", 10).await.unwrap();
        assert_eq!(
            listed,
            vec![
                firing(2_000, FiringOutcome::Started, Some("q1")),
                skipped.clone(),
                failed
            ],
            "{name}"
        );
        assert_eq!(t.firings("nightly", 1).await.unwrap().len(), 1, "{name}");
    }
}

#[tokio::test]
async fn webhooks_read_back_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        let t = triggers(&store);
        let h = Hook {
            name: "github".into(),
            flow: "triage".into(),
            version: Some(2),
            secret: "s3cret".into(),
            auth: HookAuth::Bearer,
            dedupe_field: Some("delivery.id".into()),
            created_ms: 9,
        };
        t.put_hook(&h, true).await.unwrap();
        assert!(
            matches!(t.put_hook(&h, true).await, Err(StoreError::Conflict(_))),
            "{name}"
        );
        assert_eq!(t.hook("github").await.unwrap(), Some(h.clone()), "{name}");
        assert_eq!(t.hooks().await.unwrap(), vec![h], "{name}");
        assert!(t.delete_hook("github").await.unwrap(), "{name}");
        assert_eq!(t.hook("github").await.unwrap(), None, "{name}");
    }
}

#[tokio::test]
async fn paused_runs_wake_in_time_order_and_a_claim_clears_the_timer() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        for (id, wake) in [("late", 3_000), ("soon", 1_000), ("later", 9_000)] {
            let mut r = RunRecord::new(id.into(), "h".into(), "f".into(), json!({}), 1);
            r.status = RunStatus::Paused;
            r.wake_ms = Some(wake);
            store.create_run(&r).await.unwrap();
        }
        // A running run's time is not a timer.
        let mut running = RunRecord::new("running".into(), "h".into(), "f".into(), json!({}), 1);
        running.wake_ms = Some(500);
        store.create_run(&running).await.unwrap();
        let due = triggers(&store).due_timers(5_000, 10).await.unwrap();
        let ids: Vec<_> = due.iter().map(|d| (d.run_id.as_str(), d.wake_ms)).collect();
        assert_eq!(ids, vec![("soon", 1_000), ("late", 3_000)], "{name}");
        assert_eq!(
            store.get_run("soon").await.unwrap().unwrap().wake_ms,
            Some(1_000)
        );
        let claim = Claim {
            run_id: "soon".into(),
            from: vec![RunStatus::Paused],
            owner_was: None,
            owner: "me".into(),
            now_ms: 2,
            entry: None,
        };
        store.claim_run(claim).await.unwrap();
        let due = triggers(&store).due_timers(5_000, 1).await.unwrap();
        assert_eq!(due.len(), 1, "{name}");
        assert_eq!(due[0].run_id, "late", "{name}");
        assert_eq!(
            store.get_run("soon").await.unwrap().unwrap().wake_ms,
            None,
            "{name}"
        );
    }
}
