//! The SQLite store's own tests: group commit, upgrades of older files, reopening.

use super::*;
use rusqlite::params;
use schema::{OpenError, open_connection};
use serde_json::json;
use weft_core::event::{Event, EventKind};
use weft_core::ports::{EntryKind, Scopes};
use weft_core::value::{Shared, SharedMap};

/// Run `run`'s event `seq`, stamped `at_ms`.
fn event_of(run: &str, seq: u64, at_ms: u64, kind: EventKind) -> Event {
    Event {
        run_id: run.into(),
        seq,
        at_ms,
        kind,
    }
}

fn run(id: &str) -> RunRecord {
    RunRecord::new(id.into(), "h".into(), "f".into(), json!({"a": 1}), 1)
}

/// A database file as a Weft of schema `version` left it: `meta` says the version,
/// and `sql` makes the rest.
fn older_file(dir: &tempfile::TempDir, name: &str, version: u32, sql: &str) -> PathBuf {
    let path = dir.path().join(name);
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(&format!(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
         INSERT INTO meta VALUES ('schema', '{version}');
         {sql}"
    ))
    .unwrap();
    path
}

fn entry(key: String) -> JournalEntry {
    JournalEntry {
        key,
        kind: EntryKind::Result,
        value: json!({"output": 1}).into(),
    }
}

#[tokio::test]
async fn queued_entries_share_commits_and_keep_their_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.db");
    let s = SqliteStore::open(&path, Durability::Process).unwrap();
    s.create_run(&run("r")).await.unwrap();
    let mut durable = Vec::new();
    for i in 0..500 {
        durable.push(s.append_queued("r", entry(format!("q{i}"))).await.unwrap());
    }
    // An awaited append behind them returns once they are all committed too.
    s.append("r", entry("last".into())).await.unwrap();
    for d in durable {
        d.await.unwrap();
    }
    let keys: Vec<String> = s
        .journal("r")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.key)
        .collect();
    let mut want: Vec<String> = (0..500).map(|i| format!("q{i}")).collect();
    want.push("last".into());
    assert_eq!(keys, want);
    // A read queued behind queued entries sees them, without waiting for an interval.
    let d = s.append_queued("r", entry("seen".into())).await.unwrap();
    assert_eq!(s.journal("r").await.unwrap().len(), 502);
    d.await.unwrap();
    // And they are in the file, for the next process.
    drop(s);
    let again = SqliteStore::open(&path, Durability::Process).unwrap();
    assert_eq!(again.journal("r").await.unwrap().len(), 502);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scoped_state_survives_reopening() {
    // Atomic changes are the store contract's (tests/contract.rs, every store); this
    // is what only a file adds: the state and the runs' scopes are there after reopening.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    {
        let s = SqliteStore::open(&path, Durability::Process).unwrap();
        let inc = ScopedChange::Inc {
            path: "count".into(),
            by: 100.0,
        };
        let patch = ScopedChange::Patch(json!({"mode": "plan"}));
        s.change_scoped_state("session/a", &[inc, patch])
            .await
            .unwrap();
        let mut r = run("r1");
        r.scopes.session = Some("a".into());
        s.create_run(&r).await.unwrap();
    }
    let s = SqliteStore::open(&path, Durability::Process).unwrap();
    assert_eq!(
        s.scoped_state("session/a").await.unwrap(),
        Some(json!({"count": 100, "mode": "plan"}))
    );
    assert_eq!(s.scoped_state("session/b").await.unwrap(), None);
    assert_eq!(
        s.get_run("r1")
            .await
            .unwrap()
            .unwrap()
            .scopes
            .session
            .as_deref(),
        Some("a")
    );
}

#[tokio::test]
async fn a_version_1_file_is_upgraded_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = older_file(
        &dir,
        "v1.db",
        1,
        "CREATE TABLE runs (
             id TEXT PRIMARY KEY, flow_hash TEXT NOT NULL, flow_name TEXT NOT NULL,
             source TEXT, source_hash TEXT, dialect TEXT, input TEXT NOT NULL,
             status TEXT NOT NULL, output TEXT, state TEXT, error TEXT, waiting TEXT,
             usage TEXT NOT NULL, owner TEXT, created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL);
         INSERT INTO runs VALUES ('old', 'h', 'f', NULL, NULL, NULL, '{}', 'completed',
             '1', NULL, NULL, NULL, '{\"input_tokens\":0,\"output_tokens\":0}', NULL, 1, 1);",
    );
    let s = SqliteStore::open(&path, Durability::Process).unwrap();
    let old = s.get_run("old").await.unwrap().unwrap();
    assert_eq!(
        (old.status, old.scopes),
        (RunStatus::Completed, Scopes::default())
    );
    let mut r = run("new");
    r.scopes.user = Some("u".into());
    r.view = Some(json!({"rules": [{"on": ["loop_started"], "name": {"const": "LoopStart"}}]}));
    s.create_run(&r).await.unwrap();
    let back = s.get_run("new").await.unwrap().unwrap();
    assert_eq!((back.scopes, back.view), (r.scopes, r.view));
    // Version 11's timers and trigger tables.
    let mut waiting = run("waits");
    waiting.status = RunStatus::Paused;
    waiting.wake_ms = Some(7);
    s.create_run(&waiting).await.unwrap();
    let due = weft_core::ports::TriggerStore::due_timers(&s, 10, 10)
        .await
        .unwrap();
    assert_eq!(due.len(), 1);
    assert!(
        weft_core::ports::TriggerStore::schedules(&s)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn journal_survives_reopening_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    {
        let s = SqliteStore::open(&path, Durability::Process).unwrap();
        s.create_run(&run("r1")).await.unwrap();
        for i in 0..100 {
            let e = JournalEntry {
                key: format!("k{i}"),
                kind: EntryKind::Result,
                value: json!(i).into(),
            };
            s.append("r1", e).await.unwrap();
        }
    }
    let s = SqliteStore::open(&path, Durability::Process).unwrap();
    let j = s.journal("r1").await.unwrap();
    assert_eq!(j.len(), 100);
    assert!(j.iter().enumerate().all(|(i, e)| e.value == json!(i)));
    assert_eq!(
        s.get_run("r1").await.unwrap().unwrap().input,
        json!({"a": 1})
    );
    s.forget("r1", &["k3".into()]).await.unwrap();
    assert_eq!(s.journal("r1").await.unwrap().len(), 99);
}

#[tokio::test]
async fn forgetting_rewrites_only_the_entries_it_names_inside_a_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStore::open(dir.path().join("f.db"), Durability::Process).unwrap();
    s.create_run(&run("r")).await.unwrap();
    s.create_run(&run("other")).await.unwrap();
    // Queued entries of two runs, committed together: one chunk per run.
    let mut durable = Vec::new();
    for i in 0..6 {
        durable.push(s.append_queued("r", entry(format!("k{i}"))).await.unwrap());
        durable.push(
            s.append_queued("other", entry(format!("k{i}")))
                .await
                .unwrap(),
        );
    }
    s.append("r", entry("gone".into())).await.unwrap();
    for d in durable {
        d.await.unwrap();
    }
    assert_eq!(s.run_stats().await.unwrap().steps, 13);
    let chunks: i64 = Connection::open(dir.path().join("f.db"))
        .unwrap()
        .query_row(
            "SELECT count(*) FROM journal_chunks WHERE run_id = 'r'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(chunks < 7, "entries share chunks ({chunks} chunks)");
    s.forget("r", &["k2".into(), "gone".into(), "k9".into()])
        .await
        .unwrap();
    let keys = |j: Vec<JournalEntry>| j.into_iter().map(|e| e.key).collect::<Vec<_>>();
    assert_eq!(
        keys(s.journal("r").await.unwrap()),
        ["k0", "k1", "k3", "k4", "k5"]
    );
    assert_eq!(keys(s.journal("other").await.unwrap()).len(), 6);
    assert_eq!(s.run_stats().await.unwrap().steps, 11);
    // Appends after a forget still come after what is left.
    s.append("r", entry("after".into())).await.unwrap();
    assert_eq!(keys(s.journal("r").await.unwrap()).last().unwrap(), "after");
}

#[tokio::test]
async fn a_file_with_one_row_per_journal_entry_is_moved_into_chunks_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    // A schema-8 file: one journal row an entry, two runs interleaved.
    let path = older_file(
        &dir,
        "old.db",
        8,
        "CREATE TABLE journal (
             seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL,
             key TEXT NOT NULL, kind TEXT NOT NULL, value TEXT NOT NULL);
         INSERT INTO journal (run_id, key, kind, value) VALUES
             ('r', 'a', 'result', '{\"output\": [1, 2]}'),
             ('s', 'x', 'answer', '{\"decision\":\"yes\"}'),
             ('r', 'b', 'failure', '{\"kind\":\"code\"}'),
             ('r', 'c', 'result', '\"text\"');",
    );
    let s = SqliteStore::open(&path, Durability::Process).unwrap();
    let r = s.journal("r").await.unwrap();
    let shape: Vec<_> = r.iter().map(|e| (e.key.as_str(), e.kind)).collect();
    assert_eq!(
        shape,
        [
            ("a", EntryKind::Result),
            ("b", EntryKind::Failure),
            ("c", EntryKind::Result)
        ]
    );
    assert_eq!(r[0].value, json!({"output": [1, 2]}));
    assert_eq!(r[2].value, json!("text"));
    assert_eq!(
        s.journal("s").await.unwrap()[0].value,
        json!({"decision": "yes"})
    );
    assert_eq!(s.run_stats().await.unwrap().steps, 2);
    s.append("r", entry("d".into())).await.unwrap();
    assert_eq!(s.journal("r").await.unwrap().len(), 4);
}

#[test]
fn a_damaged_file_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.db");
    std::fs::write(&path, b"this is not a database, just some text padding it out ...............................................................................").unwrap();
    let e = SqliteStore::open(&path, Durability::Process).err().unwrap();
    assert!(e.to_string().contains("not a usable Weft database"), "{e}");
}

#[tokio::test]
async fn a_truncated_database_is_refused_or_reports_errors_without_panicking() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    {
        let s = SqliteStore::open(&path, Durability::Process).unwrap();
        for i in 0..200 {
            s.create_run(&run(&format!("run{i:04}"))).await.unwrap();
        }
    }
    // Checkpoint the WAL into the main file, then cut the file in half.
    let c = Connection::open(&path).unwrap();
    c.pragma_update(None, "wal_checkpoint", "TRUNCATE").unwrap();
    drop(c);
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len / 2).unwrap();
    drop(f);
    match SqliteStore::open(&path, Durability::Process) {
        Err(e) => assert!(e.to_string().contains("not a usable Weft database"), "{e}"),
        Ok(s) => {
            let r = s.list_runs(&RunQuery::newest(1000)).await;
            assert!(r.is_err() || r.unwrap().len() < 200);
        }
    }
}

#[test]
fn a_foreign_database_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let c = Connection::open(&path).unwrap();
    c.execute_batch("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT);")
        .unwrap();
    drop(c);
    let e = SqliteStore::open(&path, Durability::Process).err().unwrap();
    assert!(matches!(e, StoreError::Unusable(_)), "{e:?}");
    assert!(e.to_string().contains("customers"), "{e}");
    let c = Connection::open(&path).unwrap();
    let tables: i64 = c
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(tables, 1, "Weft added tables to a foreign database");
    let mode: String = c
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "delete", "Weft switched a foreign database to WAL");
}

#[test]
fn a_database_from_a_newer_weft_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.db");
    drop(SqliteStore::open(&path, Durability::Process).unwrap());
    let c = Connection::open(&path).unwrap();
    c.execute("UPDATE meta SET value = '99' WHERE key = 'schema'", [])
        .unwrap();
    drop(c);
    let e = SqliteStore::open(&path, Durability::Process).err().unwrap();
    assert!(matches!(e, StoreError::TooNew(_)), "{e:?}");
    assert!(e.to_string().contains("newer Weft"), "{e}");
}

#[tokio::test]
async fn event_logs_are_read_from_any_point_and_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.db");
    let event = |run: &str, seq| event_of(run, seq, 1, EventKind::RunCancelled);
    {
        let s = SqliteStore::open(&path, Durability::Process).unwrap();
        assert_eq!(s.next_event_seq("r").await.unwrap(), 0);
        let first: Vec<_> = (0..5).map(|i| event("r", i)).collect();
        s.append_events(&first).await.unwrap();
        s.append_events(&[event("other", 0)]).await.unwrap();
        // A repeat of a stored seq is ignored, never a failure of the batch.
        s.append_events(&[event("r", 2), event("r", 5)])
            .await
            .unwrap();
    }
    let s = SqliteStore::open(&path, Durability::Process).unwrap();
    let seqs = |v: Vec<weft_core::event::Event>| v.into_iter().map(|e| e.seq).collect::<Vec<_>>();
    assert_eq!(
        seqs(s.events("r", None, 100).await.unwrap()),
        [0, 1, 2, 3, 4, 5]
    );
    assert_eq!(seqs(s.events("r", Some(2), 2).await.unwrap()), [3, 4]);
    assert_eq!(s.next_event_seq("r").await.unwrap(), 6);
    assert_eq!(s.events("r", None, 1).await.unwrap()[0], event("r", 0));
}

#[tokio::test]
async fn a_commit_stores_a_run_s_events_as_one_chunk_without_its_run_id() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.db");
    let step = |seq| {
        let kind = EventKind::StepStarted {
            path: "root/a".into(),
            kind: "code".into(),
            input: Some(Shared::new(json!({"x": 1}))),
        };
        event_of("r", seq, 7, kind)
    };
    {
        let s = SqliteStore::open(&path, Durability::Process).unwrap();
        s.append_events(&[step(0), step(1), step(2)]).await.unwrap();
    }
    let conn = Connection::open(&path).unwrap();
    let (first, last, body): (i64, i64, Vec<u8>) = conn
        .query_row(
            "SELECT first_seq, last_seq, body FROM event_chunks WHERE run_id = 'r'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!((first, last), (0, 2));
    let body = lz4_flex::block::decompress_size_prepended(&body).unwrap();
    let body = String::from_utf8(body).unwrap();
    assert!(
        !body.contains("run_id") && body.starts_with("[{\"seq\":0,"),
        "{body}"
    );
    drop(conn);
    let s = SqliteStore::open(&path, Durability::Process).unwrap();
    assert_eq!(
        s.events("r", None, 10).await.unwrap(),
        [step(0), step(1), step(2)]
    );
}

/// The stored bodies of run `r`'s event chunks, decompressed.
fn stored_bodies(path: &Path) -> Vec<String> {
    let conn = Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT body FROM event_chunks WHERE run_id = 'r' ORDER BY first_seq")
        .unwrap();
    stmt.query_map([], |r| r.get::<_, Vec<u8>>(0))
        .unwrap()
        .map(|b| {
            String::from_utf8(lz4_flex::block::decompress_size_prepended(&b.unwrap()).unwrap())
                .unwrap()
        })
        .collect()
}

/// Run `r`'s transform `root/s{seq}` completed with output `v`.
fn completed(seq: u64, v: &Shared) -> Event {
    let kind = EventKind::StepCompleted {
        path: format!("root/s{seq}").into(),
        kind: "transform".into(),
        elapsed_us: 1,
        replayed: false,
        exit: None,
        output: Some(v.clone()),
    };
    event_of("r", seq, 7, kind)
}

#[tokio::test]
async fn a_commit_of_many_events_is_written_as_chunks_of_about_a_megabyte() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.db");
    // Each a distinct value just small enough to stay inline: 3 MB of them.
    let all: Vec<Event> = (0..1000)
        .map(|seq| {
            completed(
                seq,
                &Shared::new(json!({"seq": seq, "pad": "x".repeat(3000)})),
            )
        })
        .collect();
    let s = SqliteStore::open(&path, Durability::Process).unwrap();
    s.append_events(&all).await.unwrap();
    let bodies = stored_bodies(&path);
    assert!(bodies.len() >= 3, "{} chunks", bodies.len());
    assert!(bodies.iter().all(|b| b.len() < 1_200_000));
    assert_eq!(stored_values(&path), 0);
    assert_eq!(s.events("r", None, 2000).await.unwrap(), all);
    assert_eq!(s.events("r", Some(14), 2000).await.unwrap(), all[15..]);
}

/// How many values run `r` has stored apart.
fn stored_values(path: &Path) -> usize {
    Connection::open(path)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM run_values WHERE run_id = 'r'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .unwrap() as usize
}

/// Run `r`'s transform `root/s{seq}` started with input `v`.
fn started(seq: u64, v: &Shared) -> Event {
    let kind = EventKind::StepStarted {
        path: format!("root/s{seq}").into(),
        kind: "transform".into(),
        input: Some(v.clone()),
    };
    event_of("r", seq, 7, kind)
}

#[tokio::test]
async fn a_large_value_passed_from_step_to_step_is_stored_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.db");
    let big = Shared::new(json!({"items": (0..10_000).collect::<Vec<_>>()}));
    let small = Shared::new(json!({"n": 1}));
    // Five steps pass `big` on, in three commits (references cross chunks); two
    // pass `small`, which stays inline.
    let all: Vec<Event> = (0..5)
        .flat_map(|i| [started(2 * i, &big), completed(2 * i + 1, &big)])
        .chain([started(10, &small), completed(11, &small)])
        .collect();
    {
        let s = SqliteStore::open(&path, Durability::Process).unwrap();
        for part in [&all[..3], &all[3..7], &all[7..]] {
            s.append_events(part).await.unwrap();
        }
        let bodies = stored_bodies(&path).concat();
        assert!(bodies.len() < 4096, "{} bytes of events", bodies.len());
        assert_eq!(bodies.matches("\"value_id\"").count(), 10);
        assert_eq!(stored_values(&path), 1);
        assert_eq!(s.events("r", None, 100).await.unwrap(), all);
    }
    // Read back by another process, from any point: the same events, and those
    // that referred to one value share it.
    let s = SqliteStore::open(&path, Durability::Process).unwrap();
    for after in [None, Some(0), Some(4), Some(8)] {
        let from = after.map_or(0, |a| a as usize + 1);
        assert_eq!(
            s.events("r", after, 100).await.unwrap(),
            all[from..],
            "{after:?}"
        );
    }
    let read = s.events("r", Some(4), 100).await.unwrap();
    let (a, b) = (carried_of(&read[0]), carried_of(&read[3]));
    assert!(Shared::ptr_eq(a, b));
    // That process has not seen `big` stored: it stores it again (once for both
    // events) rather than look for it.
    s.append_events(&[started(12, &big), completed(13, &big)])
        .await
        .unwrap();
    assert_eq!(stored_values(&path), 2);
    assert_eq!(s.events("r", Some(11), 10).await.unwrap().len(), 2);
    // A pause (the run's record says so) lets go of the run's values: after it,
    // `big` is stored again.
    let mut rec = run("r");
    s.create_run(&rec).await.unwrap();
    rec.status = RunStatus::Paused;
    s.update_run(&rec).await.unwrap();
    let paused = event_of("r", 14, 7, EventKind::RunPaused { waiting: json!([]) });
    s.append_events(&[paused, started(15, &big)]).await.unwrap();
    assert_eq!(stored_values(&path), 3);
    assert_eq!(s.events("r", Some(13), 10).await.unwrap().len(), 2);
    // A reference to a value the run does not have is damage.
    Connection::open(&path)
        .unwrap()
        .execute("DELETE FROM run_values", [])
        .unwrap();
    let e = s.events("r", Some(13), 10).await.unwrap_err();
    assert!(matches!(e, StoreError::Corrupt(_)), "{e:?}");
}

/// A state after a TEA fan-out over `list` as the engine builds it: `n` results,
/// each holding a state that holds the same list (one `Arc`).
fn fanned_out(list: &Shared, n: usize) -> Shared {
    let results: Vec<Shared> = (0..n)
        .map(|i| {
            let mut state = SharedMap::new();
            state.insert("items".into(), list.clone());
            state.insert("item".into(), Shared::new(json!(i)));
            let mut result = SharedMap::new();
            result.insert("state".into(), Shared::object(state));
            result.insert("index".into(), Shared::new(json!(i)));
            Shared::object(result)
        })
        .collect();
    let mut state = SharedMap::new();
    state.insert("items".into(), list.clone());
    state.insert("parallel_results".into(), Shared::array(results));
    Shared::object(state)
}

#[tokio::test]
async fn a_run_record_refers_to_what_the_run_stored_and_stores_nothing_new() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let list = Shared::new(json!((0..5_000).collect::<Vec<_>>()));
    let state = fanned_out(&list, 500);
    let s = SqliteStore::open(&path, Durability::Process).unwrap();
    let mut rec = run("r");
    s.create_run(&rec).await.unwrap();
    rec.status = RunStatus::Completed;
    rec.output = Some(Shared::new(json!({"total": 12})));
    let columns = |conn: &Connection| -> (i64, Option<String>, Option<String>) {
        conn.query_row(
            "SELECT length(state), state_refs, output_refs FROM runs WHERE id = 'r'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap()
    };
    let conn = Connection::open(&path).unwrap();
    // The run's events stored the list (a step's input): the state refers to it.
    s.append_events(&[started(0, &list)]).await.unwrap();
    rec.state = Some(state.clone());
    s.update_run(&rec).await.unwrap();
    let (state_len, state_refs, output_refs) = columns(&conn);
    let whole = serde_json::to_vec(&state).unwrap().len() as i64;
    assert!(
        state_len * 100 < whole,
        "{state_len} of {whole} bytes inline"
    );
    assert_eq!(state_refs.unwrap().matches("\"items\"").count(), 501);
    assert!(output_refs.is_none());
    assert_eq!(stored_values(&path), 1);
    // Read back whole, by id, by prefix and in a listing, in another process.
    drop(s);
    let s = SqliteStore::open(&path, Durability::Process).unwrap();
    assert_eq!(s.get_run("r").await.unwrap().unwrap(), rec);
    assert_eq!(
        s.list_runs(&RunQuery::newest(10)).await.unwrap(),
        [rec.clone()]
    );
    // A record rewritten with values read back (a resumed run's) stores nothing new:
    // what this process has not stored is written inline.
    let mut again = s.get_run("r").await.unwrap().unwrap();
    again.updated_ms += 1;
    s.update_run(&again).await.unwrap();
    assert_eq!(stored_values(&path), 1);
    assert!(columns(&conn).1.is_none());
    assert_eq!(s.get_run("r").await.unwrap().unwrap(), again);
    // A state the run's events stored whole is referred to whole.
    s.append_events(&[started(1, &state)]).await.unwrap();
    s.update_run(&rec).await.unwrap();
    let column: String = conn
        .query_row("SELECT state FROM runs WHERE id = 'r'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(column, "null");
    assert_eq!(s.get_run("r").await.unwrap().unwrap(), rec);
}

#[tokio::test]
async fn a_part_held_many_times_in_a_large_value_is_stored_once() {
    // A fan-out's results as the engine builds them: each holds a state that holds
    // the same list (one `Arc`), 500 times.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    let list = Shared::new(json!((0..5_000).collect::<Vec<_>>()));
    let state = fanned_out(&list, 500);
    let s = SqliteStore::open(&path, Durability::Process).unwrap();
    let events = [started(0, &state), completed(1, &state)];
    s.append_events(&events).await.unwrap();
    // The list once, the results referring to it (still 20 KB without it, so
    // stored apart too), and the state referring to both.
    assert_eq!(stored_values(&path), 3);
    let stored: i64 = Connection::open(&path)
        .unwrap()
        .query_row("SELECT sum(length(body)) FROM run_values", [], |r| r.get(0))
        .unwrap();
    let whole = serde_json::to_vec(&state).unwrap().len() as i64;
    assert!(stored * 20 < whole, "{stored} bytes stored of {whole}");
    // Read back in another process: equal, and the list is one shared value again.
    drop(s);
    let s = SqliteStore::open(&path, Durability::Process).unwrap();
    let read = s.events("r", None, 10).await.unwrap();
    assert_eq!(read, events);
    let node = carried_of(&read[1]).node();
    let list_at = |n: weft_core::value::Node<'_>| match n.get("items") {
        Some(weft_core::value::Node::Shared(v)) => v.clone(),
        _ => panic!("the list is not a shared part"),
    };
    let results = node.get("parallel_results").unwrap();
    let first = list_at(results.at(0).unwrap().get("state").unwrap());
    let last = list_at(results.at(499).unwrap().get("state").unwrap());
    assert!(Shared::ptr_eq(&first, &last) && Shared::ptr_eq(&first, &list_at(node)));
    // A part that refers to itself is damage, not a loop.
    let conn = Connection::open(&path).unwrap();
    conn.execute(
        "UPDATE run_values SET refs = '[[[\"0\"], \"' || lower(hex(id)) || '\"]]' WHERE refs IS NULL",
        [],
    )
    .unwrap();
    let e = s.events("r", None, 10).await.unwrap_err();
    assert!(matches!(e, StoreError::Corrupt(_)), "{e:?}");
}

#[tokio::test]
async fn events_that_refer_to_an_earlier_event_s_value_as_schema_11_wrote_them_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let s = SqliteStore::open(&path, Durability::Process).unwrap();
    let value = json!({"items": [1, 2, 3]});
    // Two chunks: the value inline in event 0, referred to in the same chunk and in
    // the next one.
    let chunks = [
        (0, 1, format!(
            r#"[{{"seq":0,"at_ms":7,"type":"step_started","path":"root/s0","kind":"transform","input":{value}}},{{"seq":1,"at_ms":7,"value_of":0,"type":"step_completed","path":"root/s0","kind":"transform","elapsed_us":1,"replayed":false}}]"#
        )),
        (2, 2, r#"[{"seq":2,"at_ms":7,"value_of":0,"type":"step_started","path":"root/s2","kind":"transform"}]"#.to_owned()),
    ];
    let conn = Connection::open(&path).unwrap();
    for (first, last, body) in &chunks {
        conn.execute(
            "INSERT INTO event_chunks VALUES ('r', ?1, ?2, ?3)",
            params![
                first,
                last,
                lz4_flex::block::compress_prepend_size(body.as_bytes())
            ],
        )
        .unwrap();
    }
    let read = s.events("r", None, 10).await.unwrap();
    assert_eq!(read.len(), 3);
    assert!(read.iter().all(|e| *carried_of(e) == value));
    assert_eq!(
        *carried_of(&s.events("r", Some(1), 10).await.unwrap()[0]),
        value
    );
    // A reference to an event that holds no value is damage.
    let broken = concat!(
        r#"[{"seq":16,"at_ms":7,"type":"run_cancelled"},"#,
        r#"{"seq":17,"at_ms":7,"value_of":16,"type":"step_started","path":"x","kind":"y"}]"#
    );
    conn.execute(
        "INSERT INTO event_chunks VALUES ('r', 16, 17, ?1)",
        [lz4_flex::block::compress_prepend_size(broken.as_bytes())],
    )
    .unwrap();
    let e = s.events("r", Some(15), 10).await.unwrap_err();
    assert!(matches!(e, StoreError::Corrupt(_)), "{e:?}");
}

#[tokio::test]
async fn a_step_result_s_large_output_is_stored_once_for_the_journal_and_the_events() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.db");
    let s = SqliteStore::open(&path, Durability::Process).unwrap();
    let big = Shared::new(json!({"items": (0..10_000).collect::<Vec<_>>()}));
    // A result as the engine journals it: the output shared with the step's events.
    let mut result = SharedMap::new();
    result.insert("output".into(), big.clone());
    result.insert("exit".into(), Shared::new(json!("done")));
    let result = Shared::object(result);
    let entry = |key: &str| JournalEntry {
        key: key.into(),
        kind: EntryKind::Result,
        value: result.clone(),
    };
    s.append_queued("r", entry("root/s1"))
        .await
        .unwrap()
        .await
        .unwrap();
    s.append_events(&[completed(1, &big), started(2, &big)])
        .await
        .unwrap();
    s.append("r", entry("root/s2")).await.unwrap();
    assert_eq!(stored_values(&path), 1);
    let conn = Connection::open(&path).unwrap();
    let journal: String = conn
        .query_row(
            "SELECT group_concat(entries) FROM journal_chunks",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        !journal.contains("items") && journal.matches("\"output_id\"").count() == 2,
        "{journal}"
    );
    let read = s.journal("r").await.unwrap();
    assert_eq!(read, [entry("root/s1"), entry("root/s2")]);
    assert_eq!(
        s.events("r", None, 10).await.unwrap(),
        [completed(1, &big), started(2, &big)]
    );
    // Forgetting an entry keeps the value, which the other entry and the events
    // still refer to.
    s.forget("r", &["root/s1".to_owned()]).await.unwrap();
    assert_eq!(s.journal("r").await.unwrap(), [entry("root/s2")]);
    assert_eq!(s.events("r", None, 10).await.unwrap().len(), 2);
    // A small output stays inline; so does any value that is not a result's output.
    let small = JournalEntry {
        key: "root/s3".into(),
        kind: EntryKind::Answer,
        value: big.clone(),
    };
    s.append("r", small.clone()).await.unwrap();
    assert_eq!(stored_values(&path), 1);
    assert_eq!(s.journal("r").await.unwrap()[1], small);
    // A missing value is damage, not an entry without its output.
    conn.execute("DELETE FROM run_values", []).unwrap();
    let e = s.journal("r").await.unwrap_err();
    assert!(matches!(e, StoreError::Corrupt(_)), "{e:?}");
}

fn carried_of(e: &Event) -> &Shared {
    match &e.kind {
        EventKind::StepStarted { input: Some(v), .. } => v,
        EventKind::StepCompleted {
            output: Some(v), ..
        } => v,
        other => panic!("no value in {other:?}"),
    }
}

#[tokio::test]
async fn a_damaged_event_chunk_is_reported_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let s = SqliteStore::open(&path, Durability::Process).unwrap();
    s.append_events(&[event_of("r", 0, 7, EventKind::RunCancelled)])
        .await
        .unwrap();
    let conn = Connection::open(&path).unwrap();
    // A length of 4 GiB before a few bytes, then bytes that are not LZ4.
    for body in [
        &b"\xff\xff\xff\xffabc"[..],
        &b"\x10\x00\x00\x00\xf0\xf0"[..],
    ] {
        conn.execute("UPDATE event_chunks SET body = ?1", [body])
            .unwrap();
        let e = s.events("r", None, 10).await.unwrap_err();
        assert!(matches!(e, StoreError::Corrupt(_)), "{e:?}");
    }
}

#[tokio::test]
async fn a_file_with_one_row_per_event_is_moved_into_chunks_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    // A schema-7 file: one row an event, bodies with and without run and seq.
    let path = older_file(
        &dir,
        "old.db",
        7,
        "CREATE TABLE events (run_id TEXT NOT NULL, seq INTEGER NOT NULL,
             body TEXT NOT NULL, PRIMARY KEY (run_id, seq)) WITHOUT ROWID;
         INSERT INTO events VALUES ('r', 0, '{\"at_ms\":7,\"type\":\"run_cancelled\"}');
         INSERT INTO events VALUES ('r', 1, '{\"run_id\":\"r\",\"seq\":1,\"at_ms\":8,\"type\":\"run_cancelled\"}');",
    );
    let s = SqliteStore::open(&path, Durability::Process).unwrap();
    let expected = |seq, at_ms| event_of("r", seq, at_ms, EventKind::RunCancelled);
    assert_eq!(
        s.events("r", None, 10).await.unwrap(),
        [expected(0, 7), expected(1, 8)]
    );
    assert_eq!(s.next_event_seq("r").await.unwrap(), 2);
    s.append_events(&[expected(1, 9), expected(2, 9)])
        .await
        .unwrap();
    assert_eq!(
        s.events("r", Some(0), 10).await.unwrap(),
        [expected(1, 8), expected(2, 9)],
        "a repeat of seq 1 is dropped"
    );
}

#[test]
fn concurrent_first_use_creates_one_schema() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..50 {
        let path = dir.path().join(format!("race{round}.db"));
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
        let openers: Vec<_> = (0..8)
            .map(|_| {
                let (path, barrier) = (path.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    open_connection(&path, Durability::Process)
                        .map(drop)
                        .map_err(|e| match e {
                            OpenError::Sqlite(e) => e.to_string(),
                            OpenError::Foreign(t) => format!("foreign {t:?}"),
                            OpenError::TooNew(v) => format!("too new {v}"),
                        })
                })
            })
            .collect();
        for o in openers {
            o.join()
                .unwrap()
                .unwrap_or_else(|e| panic!("round {round}: {e}"));
        }
        let c = Connection::open(&path).unwrap();
        let rows: i64 = c
            .query_row("SELECT count(*) FROM meta", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 1);
    }
}
