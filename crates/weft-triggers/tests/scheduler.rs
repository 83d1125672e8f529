//! Schedule passes over a real SQLite store and engine, at fixed clock times: what each
//! policy records and starts.

use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use weft_core::ports::{
    CatchUp, FiringOutcome, FlowSource, Overlap, RunStatus, Schedule, Store, TriggerStore,
};
use weft_engine::Engine;
use weft_triggers::scheduler::pass;
use weft_triggers::{Counters, Launcher};

/// A flow that waits an hour: its runs stay paused, so the next firing overlaps.
const SLOW: &str = "weft: 1\nname: slow\nroot: {wait: {for: 1h}}\n";
const QUICK: &str = "weft: 1\nname: quick\nroot: {transform: {output: '{{ input.n }}'}}\n";

struct World {
    _dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    launcher: Launcher,
    counters: Counters,
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(
        weft_store::SqliteStore::open(dir.path().join("w.db"), weft_store::Durability::Process)
            .unwrap(),
    );
    let launcher = Launcher::new(weft_service::Service::new(
        Engine::builder(store.clone()).build(),
        None,
    ));
    World {
        _dir: dir,
        store,
        launcher,
        counters: Counters::default(),
    }
}

impl World {
    fn triggers(&self) -> &dyn TriggerStore {
        self.store.triggers().unwrap()
    }

    async fn save(&self, name: &str, text: &str) {
        let source = FlowSource {
            id: FlowSource::id_of("native", text),
            name: name.into(),
            dialect: "native".into(),
            text: text.into(),
            created_ms: 0,
        };
        self.store.put_source(&source).await.unwrap();
        self.store.save_version(name, &source.id, 0).await.unwrap();
    }

    async fn schedule(&self, flow: &str, overlap: Overlap, catch_up: CatchUp) {
        let s = Schedule {
            id: "every-second".into(),
            flow: flow.into(),
            version: None,
            cron: "* * * * * *".into(),
            tz: "UTC".into(),
            input: json!({"n": 7}),
            overlap,
            catch_up,
            jitter_ms: 0,
            paused: false,
            created_ms: 0,
            updated_ms: 0,
            since_ms: 10_000,
        };
        self.triggers().put_schedule(&s, true).await.unwrap();
    }

    async fn at(&self, now: i64) {
        pass(&self.launcher, &self.counters, now).await.unwrap();
        // Let started runs reach where they stop.
        tokio::time::sleep(Duration::from_millis(150)).await;
    }

    async fn outcomes(&self) -> Vec<(i64, FiringOutcome, u32)> {
        let mut f = self.triggers().firings("every-second", 100).await.unwrap();
        f.reverse();
        f.iter().map(|f| (f.fire_ms, f.outcome, f.missed)).collect()
    }

    async fn status_of(&self, fire_ms: i64) -> RunStatus {
        let f = self.triggers().firings("every-second", 100).await.unwrap();
        let id = f
            .iter()
            .find(|f| f.fire_ms == fire_ms)
            .and_then(|f| f.run_id.clone())
            .unwrap();
        self.store.get_run(&id).await.unwrap().unwrap().status
    }
}

#[tokio::test]
async fn each_due_second_starts_one_run_with_the_schedule_s_input() {
    let w = world();
    w.save("quick", QUICK).await;
    w.schedule("quick", Overlap::Skip, CatchUp::Last).await;
    w.at(11_100).await;
    w.at(11_500).await;
    w.at(12_050).await;
    use FiringOutcome::Started;
    assert_eq!(
        w.outcomes().await,
        [(11_000, Started, 0), (12_000, Started, 0)]
    );
    assert_eq!(w.status_of(12_000).await, RunStatus::Completed);
    let runs = w
        .store
        .list_runs(&weft_core::ports::RunQuery::newest(10))
        .await
        .unwrap();
    assert!(
        runs.iter()
            .all(|r| r.output.as_ref().is_some_and(|o| *o == 7)),
        "{runs:?}"
    );
}

#[tokio::test]
async fn a_run_that_goes_on_makes_the_next_firing_skip_or_queue() {
    let w = world();
    w.save("slow", SLOW).await;
    w.schedule("slow", Overlap::Skip, CatchUp::Last).await;
    w.at(11_000).await;
    w.at(12_000).await;
    use FiringOutcome::*;
    assert_eq!(
        w.outcomes().await,
        [(11_000, Started, 0), (12_000, Skipped, 0)]
    );

    let w = world();
    w.save("slow", SLOW).await;
    w.schedule("slow", Overlap::Queue, CatchUp::Last).await;
    w.at(11_000).await;
    w.at(12_000).await;
    w.at(13_000).await;
    assert_eq!(
        w.outcomes().await,
        [
            (11_000, Started, 0),
            (12_000, Queued, 0),
            (13_000, Queued, 0)
        ]
    );
    // The first run ends: the oldest queued firing starts, the other waits for it.
    let first = w.triggers().firings("every-second", 10).await.unwrap();
    let first_run = first.last().unwrap().run_id.clone().unwrap();
    w.launcher.engine().cancel(&first_run).await.unwrap();
    w.at(13_500).await;
    assert_eq!(
        w.outcomes().await,
        [
            (11_000, Started, 0),
            (12_000, Started, 0),
            (13_000, Queued, 0)
        ]
    );
}

#[tokio::test]
async fn cancel_previous_cancels_the_run_that_goes_on() {
    let w = world();
    w.save("slow", SLOW).await;
    w.schedule("slow", Overlap::CancelPrevious, CatchUp::Last)
        .await;
    w.at(11_000).await;
    w.at(12_000).await;
    assert_eq!(w.status_of(11_000).await, RunStatus::Cancelled);
    assert_eq!(w.status_of(12_000).await, RunStatus::Paused);
}

#[tokio::test]
async fn a_pass_after_downtime_follows_the_catch_up_policy() {
    use FiringOutcome::*;
    for (catch_up, expected) in [
        (
            CatchUp::Last,
            vec![
                (11_000, Started, 0),
                (15_000, Started, 3),
                (16_000, Started, 0),
            ],
        ),
        (
            CatchUp::None,
            vec![
                (11_000, Started, 0),
                (15_000, Missed, 3),
                (16_000, Started, 0),
            ],
        ),
    ] {
        let w = world();
        w.save("quick", QUICK).await;
        w.schedule("quick", Overlap::Skip, catch_up).await;
        w.at(11_000).await;
        w.at(16_100).await;
        assert_eq!(w.outcomes().await, expected, "{catch_up:?}");
    }
    let w = world();
    w.save("quick", QUICK).await;
    w.schedule("quick", Overlap::Skip, CatchUp::All).await;
    w.at(11_000).await;
    w.at(16_100).await;
    let all = w.outcomes().await;
    assert_eq!(all.len(), 6);
    assert!(all.iter().all(|(_, o, _)| *o == Started), "{all:?}");
}

#[tokio::test]
async fn a_missing_flow_is_recorded_failed_with_its_reason() {
    let w = world();
    w.schedule("nowhere", Overlap::Skip, CatchUp::Last).await;
    w.at(11_000).await;
    let f = w.triggers().firings("every-second", 10).await.unwrap();
    assert_eq!(f[0].outcome, FiringOutcome::Failed);
    assert!(
        f[0].error
            .as_deref()
            .unwrap()
            .contains("no stored flow `nowhere`"),
        "{f:?}"
    );
    assert_eq!(
        w.counters.failed.load(std::sync::atomic::Ordering::Relaxed),
        1
    );
}

#[tokio::test]
async fn a_schedule_is_refused_when_it_never_fires_or_names_no_zone() {
    use weft_triggers::manage::{ManageError, NewSchedule, add_schedule};
    let w = world();
    let new = |cron: &str, tz: &str| NewSchedule {
        id: None,
        flow: "quick".into(),
        version: None,
        cron: cron.into(),
        tz: Some(tz.into()),
        input: None,
        overlap: None,
        catch_up: None,
        jitter: None,
    };
    for (cron, tz, words) in [
        ("0 0 30 2 *", "UTC", "never fires"),
        ("0 9 * * *", "Europe/Nowhere", "not a time zone"),
        ("0 9 * *", "UTC", "not a cron expression"),
    ] {
        match add_schedule(&w.launcher, new(cron, tz), 0).await {
            Err(ManageError::Invalid(m)) => assert!(m.contains(words), "{cron}: {m}"),
            other => panic!("{cron} {tz}: {other:?}"),
        }
    }
    let first = add_schedule(&w.launcher, new("0 9 * * *", "UTC"), 0)
        .await
        .unwrap();
    let second = add_schedule(&w.launcher, new("0 10 * * *", "UTC"), 0)
        .await
        .unwrap();
    assert_eq!(
        (first.id.as_str(), second.id.as_str()),
        ("quick", "quick-2")
    );
}
