//! What only the PostgreSQL store does: share its database with other processes, refuse
//! a schema it does not know, and outlive the connections it loses.

use std::sync::Arc;
use weft_core::ports::{RunRecord, Store, StoreError};
use weft_store::PostgresStore;

mod stores;

async fn admin(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

fn run(id: &str) -> RunRecord {
    RunRecord::new(id.into(), "h".into(), "f".into(), serde_json::json!(1), 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_starting_together_on_a_new_database_create_one_schema() {
    let Some(url) = stores::fresh_postgres().await else {
        return;
    };
    let tasks: Vec<_> = (0..6)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { PostgresStore::connect(&url).await.map(|_| ()) })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let db = admin(&url).await;
    let version: String = db
        .query_one(
            "SELECT value FROM weft.meta WHERE key = 'schema_version'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, "2");
}

#[tokio::test]
async fn a_version_1_database_gains_run_timers_and_trigger_tables() {
    let Some(url) = stores::fresh_postgres().await else {
        return;
    };
    PostgresStore::connect(&url).await.unwrap();
    // What version 1 had: runs without wake_ms, no trigger tables.
    admin(&url)
        .await
        .batch_execute(
            "DROP INDEX weft.runs_waking; ALTER TABLE weft.runs DROP COLUMN wake_ms;
             DROP TABLE weft.schedules, weft.hooks, weft.firings;
             UPDATE weft.meta SET value = '1' WHERE key = 'schema_version'",
        )
        .await
        .unwrap();
    let store = PostgresStore::connect(&url).await.unwrap();
    let mut paused = run("waits");
    paused.status = weft_core::ports::RunStatus::Paused;
    paused.wake_ms = Some(5);
    store.create_run(&paused).await.unwrap();
    let due = weft_core::ports::TriggerStore::due_timers(&store, 10, 10)
        .await
        .unwrap();
    assert_eq!(due.len(), 1);
    let schedules = weft_core::ports::TriggerStore::schedules(&store)
        .await
        .unwrap();
    assert!(schedules.is_empty());
}

#[tokio::test]
async fn a_database_from_a_newer_weft_says_so() {
    let Some(url) = stores::fresh_postgres().await else {
        return;
    };
    PostgresStore::connect(&url).await.unwrap();
    admin(&url)
        .await
        .batch_execute("UPDATE weft.meta SET value = '99' WHERE key = 'schema_version'")
        .await
        .unwrap();
    let e = PostgresStore::connect(&url).await.err().unwrap();
    assert!(matches!(e, StoreError::TooNew(_)), "{e:?}");
    assert!(e.to_string().contains("schema 99"), "{e}");
}

#[tokio::test]
async fn a_weft_schema_that_is_not_weft_s_is_left_alone() {
    let Some(url) = stores::fresh_postgres().await else {
        return;
    };
    let db = admin(&url).await;
    db.batch_execute("CREATE SCHEMA weft; CREATE TABLE weft.customers (id int);")
        .await
        .unwrap();
    let e = PostgresStore::connect(&url).await.err().unwrap();
    assert!(matches!(e, StoreError::Unusable(_)), "{e:?}");
    assert!(e.to_string().contains("not Weft's"), "{e}");
    let tables: i64 = db
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'weft'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(tables, 1);
}

#[tokio::test]
async fn an_address_with_nothing_listening_fails_clearly_and_soon() {
    // A port nothing listens on: bind one, then free it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = std::time::Instant::now();
    let e = PostgresStore::connect(&format!("postgres://weft@127.0.0.1:{port}/x"))
        .await
        .err()
        .unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
    assert!(matches!(e, StoreError::Unusable(_)), "{e:?}");
    let text = e.to_string();
    assert!(text.contains(&format!("127.0.0.1:{port}/x")), "{text}");
    let e = PostgresStore::connect("postgres://weft@127.0.0.1:notaport/x")
        .await
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("not a PostgreSQL connection string"),
        "{e}"
    );
}

#[tokio::test]
async fn a_password_never_appears_in_an_error() {
    let e = PostgresStore::connect("postgres://weft:s3cret@127.0.0.1:1/x")
        .await
        .err()
        .unwrap();
    assert!(!e.to_string().contains("s3cret"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_whose_connections_are_killed_reconnects() {
    let Some(url) = stores::fresh_postgres().await else {
        return;
    };
    let store = Arc::new(PostgresStore::connect(&url).await.unwrap());
    store.create_run(&run("before")).await.unwrap();
    let db = admin(&url).await;
    let killed: i64 = db
        .query_one(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE application_name = 'weft' AND datname = current_database()
               AND pid <> pg_backend_pid()) t",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(killed >= 1);
    // The first use of a killed connection may fail; the pool then replaces it.
    let mut outcome = store.create_run(&run("after")).await;
    for _ in 0..3 {
        if outcome.is_ok() {
            break;
        }
        outcome = store.create_run(&run("after")).await;
    }
    outcome.unwrap();
    assert!(store.get_run("before").await.unwrap().is_some());
    store
        .append(
            "after",
            weft_core::ports::JournalEntry {
                key: "k".into(),
                kind: weft_core::ports::EntryKind::Result,
                value: serde_json::json!(1).into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(store.journal("after").await.unwrap().len(), 1);
}

fn running(id: &str) -> RunRecord {
    let mut r = run(id);
    r.owner = Some("pid:1".into());
    r
}

fn entry(key: &str) -> weft_core::ports::JournalEntry {
    weft_core::ports::JournalEntry {
        key: key.into(),
        kind: weft_core::ports::EntryKind::Result,
        value: serde_json::json!(key).into(),
    }
}

fn event(run: &str, seq: u64) -> weft_core::event::Event {
    weft_core::event::Event {
        run_id: Arc::from(run),
        seq,
        at_ms: 1,
        kind: weft_core::event::EventKind::RunCancelled,
    }
}

/// Two stores on one fresh database, as two processes have, with leases of `lease`.
async fn two_processes(
    lease: std::time::Duration,
) -> Option<(String, PostgresStore, PostgresStore)> {
    let url = stores::fresh_postgres().await?;
    let a = PostgresStore::connect_with_lease(&url, lease)
        .await
        .unwrap();
    let b = PostgresStore::connect_with_lease(&url, lease)
        .await
        .unwrap();
    Some((url, a, b))
}

/// Process A drives a run and stops renewing its lease (as a stopped or partitioned
/// process does); process B takes the run over. Every write A makes of the run after
/// that is refused or left out, and A is told it lost the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_that_lost_a_run_commits_nothing_more_of_it() {
    use weft_core::ports::WorkQueue;
    // Long enough that a renewal (every third of it) is not late on a loaded 2-core
    // machine: at 300 ms, CI once saw B take the run while A was alive. The lapse
    // below is made, not waited for.
    let lease = std::time::Duration::from_millis(1200);
    let Some((url, a, b)) = two_processes(lease).await else {
        return;
    };
    a.create_run(&running("r1")).await.unwrap();
    a.append("r1", entry("a1")).await.unwrap();
    a.append_events(&[event("r1", 0)]).await.unwrap();
    assert!(!a.lease_lost("r1"));
    // A is alive and renews: B finds nothing to take.
    tokio::time::sleep(lease * 2).await;
    assert!(b.claim_ready("b", 10).await.unwrap().is_empty());
    // A's lease lapses (as when its heartbeat cannot reach the database for a whole
    // lease period): set its end in the past.
    let db = admin(&url).await;
    db.batch_execute("UPDATE weft.runs SET lease_expires_ms = 0 WHERE id = 'r1'")
        .await
        .unwrap();
    let taken = b.claim_ready("b", 10).await.unwrap();
    assert_eq!(taken.len(), 1);
    assert_eq!(
        taken[0].status,
        weft_core::ports::RunStatus::Running,
        "it continues"
    );
    assert_eq!(
        taken[0].owner.as_deref(),
        Some("pid:1"),
        "as it was before the claim"
    );

    let e = a.append("r1", entry("a2")).await.unwrap_err();
    assert!(matches!(e, StoreError::Fenced(_)), "{e:?}");
    assert!(a.lease_lost("r1"));
    a.append_events(&[event("r1", 1)]).await.unwrap();
    let mut stale = running("r1");
    stale.status = weft_core::ports::RunStatus::Completed;
    let e = a.update_run(&stale).await.unwrap_err();
    assert!(matches!(e, StoreError::Fenced(_)), "{e:?}");
    let e = a.forget("r1", &["a1".to_owned()]).await.unwrap_err();
    assert!(matches!(e, StoreError::Fenced(_)), "{e:?}");

    b.append("r1", entry("b1")).await.unwrap();
    b.append_events(&[event("r1", 1)]).await.unwrap();
    let keys: Vec<String> = b
        .journal("r1")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.key)
        .collect();
    assert_eq!(keys, ["a1", "b1"]);
    let now = b.get_run("r1").await.unwrap().unwrap();
    assert_eq!(now.status, weft_core::ports::RunStatus::Running);
    assert_eq!(now.owner.as_deref(), Some("b"));
    assert!(now.lease_until_ms.is_some());
    let mut done = now.clone();
    done.status = weft_core::ports::RunStatus::Completed;
    b.update_run(&done).await.unwrap();
    assert_eq!(b.events("r1", None, 10).await.unwrap().len(), 2);
    // A run that ended holds no lease, and nothing takes it.
    assert_eq!(b.get_run("r1").await.unwrap().unwrap().lease_until_ms, None);
    assert!(a.claim_ready("a", 10).await.unwrap().is_empty());
}

/// A process that is gone stops renewing: its run is taken over once the lease ends,
/// not before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_taken_over_only_once_its_lease_has_lapsed() {
    use weft_core::ports::WorkQueue;
    let lease = std::time::Duration::from_millis(600);
    let Some((_, a, b)) = two_processes(lease).await else {
        return;
    };
    a.create_run(&running("r2")).await.unwrap();
    let started = std::time::Instant::now();
    while started.elapsed() < lease * 3 {
        assert!(b.claim_ready("b", 10).await.unwrap().is_empty());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    drop(a);
    let gone = std::time::Instant::now();
    let taken = loop {
        let taken = b.claim_ready("b", 10).await.unwrap();
        if !taken.is_empty() {
            break taken;
        }
        assert!(gone.elapsed() < lease * 4, "never taken over");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(taken[0].id, "r2");
    assert!(
        gone.elapsed() <= lease + std::time::Duration::from_millis(400),
        "{:?}",
        gone.elapsed()
    );
}

/// Four workers claim 300 queued runs at once, ten at a time: each run is claimed by
/// exactly one, and each claim takes the longest-waiting runs first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_workers_claim_each_queued_run_once_oldest_first() {
    use weft_core::ports::WorkQueue;
    let Some(url) = stores::fresh_postgres().await else {
        return;
    };
    let api = PostgresStore::connect(&url).await.unwrap();
    for i in 0..300 {
        let mut r = run(&format!("q{i:03}"));
        r.status = weft_core::ports::RunStatus::Queued;
        api.create_run(&r).await.unwrap();
    }
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let url = url.clone();
            tokio::spawn(async move {
                let store = PostgresStore::connect(&url).await.unwrap();
                let mut mine = Vec::new();
                loop {
                    let got = store.claim_ready(&format!("w{w}"), 10).await.unwrap();
                    if got.is_empty() {
                        return mine;
                    }
                    let ids: Vec<String> = got.iter().map(|r| r.id.clone()).collect();
                    let mut sorted = ids.clone();
                    sorted.sort();
                    assert_eq!(ids, sorted, "a claim takes the oldest first");
                    assert!(
                        got.iter()
                            .all(|r| r.status == weft_core::ports::RunStatus::Queued)
                    );
                    mine.extend(ids);
                }
            })
        })
        .collect();
    let mut all = Vec::new();
    for w in workers {
        all.extend(w.await.unwrap());
    }
    all.sort();
    let expected: Vec<String> = (0..300).map(|i| format!("q{i:03}")).collect();
    assert_eq!(all, expected);
}

/// A worker waiting for work wakes when another process queues a run, long before its
/// poll would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_worker_is_woken_by_a_queued_run() {
    use weft_core::ports::WorkQueue;
    let Some(url) = stores::fresh_postgres().await else {
        return;
    };
    let api = PostgresStore::connect(&url).await.unwrap();
    let worker = Arc::new(PostgresStore::connect(&url).await.unwrap());
    // The first wait starts listening; what it finds is consumed.
    worker
        .wait_for_work(std::time::Duration::from_millis(500))
        .await;
    let waiting = {
        let worker = worker.clone();
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            worker
                .wait_for_work(std::time::Duration::from_secs(30))
                .await;
            started.elapsed()
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let mut r = run("woken");
    r.status = weft_core::ports::RunStatus::Queued;
    api.create_run(&r).await.unwrap();
    let waited = waiting.await.unwrap();
    assert!(waited < std::time::Duration::from_secs(5), "{waited:?}");
    assert_eq!(worker.claim_ready("w", 1).await.unwrap().len(), 1);
}
