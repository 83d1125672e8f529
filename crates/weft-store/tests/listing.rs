//! Paging through runs and flow texts, the same on both stores: every item once, newest
//! first, however many arrive between pages.

use serde_json::json;
use std::collections::HashSet;
use weft_core::ports::{Cursor, FlowSource, RunQuery, RunRecord, RunStatus, Store};
use weft_store::{Durability, SqliteStore};

mod stores;

fn run(i: i64) -> RunRecord {
    let mut r = RunRecord::new(
        format!("run{i:04}"),
        "h".into(),
        "f".into(),
        json!(i),
        i / 3,
    );
    if i % 4 == 0 {
        r.status = RunStatus::Completed;
    }
    r.flow_id = Some(format!("flow{}", i % 2));
    r
}

#[tokio::test]
async fn run_pages_cover_every_run_once_while_new_runs_arrive() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        // Creation times repeat (three runs a millisecond): the id breaks the ties.
        for i in 0..100 {
            store.create_run(&run(i)).await.unwrap();
        }
        let mut seen = Vec::new();
        let mut query = RunQuery::newest(30);
        loop {
            let page = store.list_runs(&query).await.unwrap();
            // Newer runs arriving mid-listing do not shift later pages.
            store
                .create_run(&run(1000 + seen.len() as i64))
                .await
                .unwrap();
            let Some(last) = page.last() else { break };
            query.after = Some(Cursor::after(last.created_ms, &last.id));
            seen.extend(page.iter().map(|r| r.id.clone()));
        }
        let expected: Vec<String> = (0..100).rev().map(|i| format!("run{i:04}")).collect();
        assert_eq!(seen, expected, "{name}");

        let completed = store
            .list_runs(&RunQuery::in_status(RunStatus::Completed, 1000))
            .await
            .unwrap();
        assert_eq!(
            completed.len(),
            28,
            "{name}: 25 of the first 100, 3 of those added"
        );
        assert!(completed.iter().all(|r| r.status == RunStatus::Completed));
        let got = store.get_run("run0007").await.unwrap().unwrap();
        assert_eq!(
            got.flow_id.as_deref(),
            Some("flow1"),
            "{name}: flow_id kept"
        );
    }
}

#[tokio::test]
async fn flow_texts_keep_the_first_and_page_newest_first() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        let source = |i: i64| FlowSource {
            id: FlowSource::id_of("native", &format!("text {i}")),
            name: format!("f{i}"),
            dialect: "native".into(),
            text: format!("text {i}"),
            created_ms: 1000 + i,
        };
        for i in 0..10 {
            store.put_source(&source(i)).await.unwrap();
        }
        // Stored again later under the same id: the first stays.
        let mut again = source(3);
        again.created_ms = 5000;
        again.name = "renamed".into();
        store.put_source(&again).await.unwrap();
        let got = store.get_source(&source(3).id).await.unwrap().unwrap();
        assert_eq!(got, source(3), "{name}");
        assert!(store.get_source("missing").await.unwrap().is_none());

        let first = store.list_sources(4, None).await.unwrap();
        let names: Vec<&str> = first.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["f9", "f8", "f7", "f6"], "{name}");
        let last = first.last().unwrap();
        let rest = store
            .list_sources(100, Some(&Cursor::after(last.created_ms, &last.id)))
            .await
            .unwrap();
        let all: HashSet<String> = first.iter().chain(&rest).map(|s| s.id.clone()).collect();
        assert_eq!((rest.len(), all.len()), (6, 10), "{name}");
    }
}

#[tokio::test]
async fn a_version_5_database_gains_flow_texts_and_run_flow_ids() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             INSERT INTO meta VALUES ('schema', '5');
             CREATE TABLE runs (
                 id TEXT PRIMARY KEY, flow_hash TEXT NOT NULL, flow_name TEXT NOT NULL,
                 source TEXT, source_hash TEXT, dialect TEXT, input TEXT NOT NULL,
                 status TEXT NOT NULL, output TEXT, state TEXT, error TEXT, waiting TEXT,
                 usage TEXT NOT NULL, owner TEXT, created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL,
                 scopes TEXT, view TEXT, settings TEXT, retries INTEGER NOT NULL DEFAULT 0);
             INSERT INTO runs (id, flow_hash, flow_name, input, status, usage, created_ms, updated_ms)
                 VALUES ('old1', 'h', 'f', '{}', 'completed', '{}', 1, 1);",
        )
        .unwrap();
    }
    let store = SqliteStore::open(&path, Durability::Process).unwrap();
    let old = store.get_run("old1").await.unwrap().unwrap();
    assert_eq!(old.flow_id, None);
    let mut new = run(1);
    new.id = "new1".into();
    store.create_run(&new).await.unwrap();
    assert_eq!(
        store.list_runs(&RunQuery::newest(10)).await.unwrap().len(),
        2
    );
    assert!(store.list_sources(10, None).await.unwrap().is_empty());
}

#[tokio::test]
async fn named_flows_keep_every_changed_version() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        let v1 = store.save_version("triage", "aaa", 1).await.unwrap();
        assert_eq!(v1.version, 1, "{name}");
        // Saving the latest text again is not a new version.
        assert_eq!(store.save_version("triage", "aaa", 2).await.unwrap(), v1);
        let v2 = store.save_version("triage", "bbb", 3).await.unwrap();
        assert_eq!((v2.version, v2.flow_id.as_str()), (2, "bbb"), "{name}");
        // Going back to an earlier text is a new version too.
        let v3 = store.save_version("triage", "aaa", 4).await.unwrap();
        assert_eq!(v3.version, 3, "{name}");
        store.save_version("other", "ccc", 5).await.unwrap();

        let latest = store.flow_version("triage", None).await.unwrap().unwrap();
        assert_eq!(latest, v3, "{name}");
        let second = store.flow_version("triage", Some(2)).await.unwrap();
        assert_eq!(second, Some(v2), "{name}");
        assert_eq!(store.flow_version("triage", Some(9)).await.unwrap(), None);
        assert_eq!(store.flow_version("missing", None).await.unwrap(), None);
        let named: Vec<(String, u32)> = store
            .named_flows()
            .await
            .unwrap()
            .into_iter()
            .map(|v| (v.name, v.version))
            .collect();
        assert_eq!(
            named,
            [("other".to_owned(), 1), ("triage".to_owned(), 3)],
            "{name}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_saves_of_one_name_get_distinct_versions() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        let saves = (0..20).map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .save_version("busy", &format!("text{i}"), i)
                    .await
                    .unwrap()
                    .version
            })
        });
        let mut versions: Vec<u32> = futures_join(saves).await;
        versions.sort_unstable();
        assert_eq!(versions, (1..=20).collect::<Vec<u32>>(), "{name}");
    }
}

async fn futures_join(tasks: impl Iterator<Item = tokio::task::JoinHandle<u32>>) -> Vec<u32> {
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}
