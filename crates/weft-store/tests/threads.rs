//! The `ThreadStore` contract, held by every store: threads read back as written, listed
//! newest first by their metadata, and runs join a thread only at the count their
//! starter saw.

use serde_json::json;
use std::sync::Arc;
use weft_core::ports::{Store, Thread, ThreadQuery, ThreadStore};

mod stores;

fn threads(store: &Arc<dyn Store>) -> &dyn ThreadStore {
    store.threads().expect("every store keeps threads")
}

fn thread(id: &str, created_ms: i64, metadata: serde_json::Value) -> Thread {
    Thread {
        id: id.into(),
        metadata,
        created_ms,
        updated_ms: created_ms,
        runs: 0,
        last_run: None,
        values: None,
    }
}

fn query(limit: usize) -> ThreadQuery {
    ThreadQuery {
        limit,
        ..ThreadQuery::default()
    }
}

#[tokio::test]
async fn threads_read_back_as_written_and_a_second_create_conflicts() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        let t = threads(&store);
        let written = thread("t1", 10, json!({"user": "ada", "n": 1}));
        t.create_thread(&written).await.unwrap();
        assert_eq!(t.thread("t1").await.unwrap(), Some(written), "{name}");
        let again = t.create_thread(&thread("t1", 11, json!({}))).await;
        assert!(
            matches!(again, Err(weft_core::ports::StoreError::Conflict(_))),
            "{name}: {again:?}"
        );
        assert_eq!(t.thread("nope").await.unwrap(), None, "{name}");
    }
}

#[tokio::test]
async fn threads_are_listed_newest_first_by_metadata_ids_offset_and_limit() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        let t = threads(&store);
        for (id, at, user) in [
            ("a", 1, "ada"),
            ("b", 2, "bob"),
            ("c", 3, "ada"),
            ("d", 4, "ada"),
        ] {
            t.create_thread(&thread(id, at, json!({"user": user, "at": at})))
                .await
                .unwrap();
        }
        let ids = |ts: Vec<Thread>| ts.into_iter().map(|t| t.id).collect::<Vec<_>>();
        assert_eq!(
            ids(t.threads(&query(10)).await.unwrap()),
            ["d", "c", "b", "a"],
            "{name}"
        );
        let ada = ThreadQuery {
            metadata: json!({"user": "ada"}).as_object().cloned(),
            offset: 1,
            limit: 5,
            ..ThreadQuery::default()
        };
        assert_eq!(ids(t.threads(&ada).await.unwrap()), ["c", "a"], "{name}");
        let two = ThreadQuery {
            ids: Some(vec!["a".into(), "b".into(), "zz".into()]),
            limit: 1,
            ..ThreadQuery::default()
        };
        assert_eq!(ids(t.threads(&two).await.unwrap()), ["b"], "{name}");
        let none = ThreadQuery {
            metadata: json!({"user": "ada", "at": 2}).as_object().cloned(),
            limit: 5,
            ..ThreadQuery::default()
        };
        assert!(t.threads(&none).await.unwrap().is_empty(), "{name}");
    }
}

#[tokio::test]
async fn a_run_joins_a_thread_only_at_the_count_its_starter_saw() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        let t = threads(&store);
        t.create_thread(&thread("t", 1, json!({}))).await.unwrap();
        assert!(t.join_thread("t", "r1", 0, 5).await.unwrap(), "{name}");
        assert!(!t.join_thread("t", "late", 0, 6).await.unwrap(), "{name}");
        assert!(t.join_thread("t", "r2", 1, 7).await.unwrap(), "{name}");
        assert!(
            !t.join_thread("missing", "r", 0, 7).await.unwrap(),
            "{name}"
        );
        let now = t.thread("t").await.unwrap().unwrap();
        assert_eq!(
            (now.runs, now.last_run.as_deref(), now.updated_ms),
            (2, Some("r2"), 7),
            "{name}"
        );
        assert_eq!(
            t.thread_runs("t", 10).await.unwrap(),
            ["r2", "r1"],
            "{name}"
        );
        assert_eq!(t.thread_runs("t", 1).await.unwrap(), ["r2"], "{name}");
        assert!(
            t.thread_runs("missing", 10).await.unwrap().is_empty(),
            "{name}"
        );
    }
}

#[tokio::test]
async fn of_many_runs_joining_an_idle_thread_at_once_exactly_one_joins() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        threads(&store)
            .create_thread(&thread("busy", 1, json!({})))
            .await
            .unwrap();
        let joins = (0..8).map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                threads(&store)
                    .join_thread("busy", &format!("run{i}"), 0, 2)
                    .await
                    .unwrap()
            })
        });
        let mut won = 0;
        for join in joins.collect::<Vec<_>>() {
            won += usize::from(join.await.unwrap());
        }
        assert_eq!(won, 1, "{name}");
        assert_eq!(
            threads(&store).thread_runs("busy", 10).await.unwrap().len(),
            1,
            "{name}"
        );
    }
}

#[tokio::test]
async fn metadata_merges_key_by_key_and_a_deleted_thread_is_gone_with_its_run_list() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        let t = threads(&store);
        t.create_thread(&thread("m", 1, json!({"keep": 1, "change": "a"})))
            .await
            .unwrap();
        let merged = t
            .merge_thread_metadata(
                "m",
                json!({"change": "b", "new": true}).as_object().unwrap(),
                9,
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            merged.metadata,
            json!({"keep": 1, "change": "b", "new": true}),
            "{name}"
        );
        assert_eq!(t.thread("m").await.unwrap().unwrap(), merged, "{name}");
        let missing = t.merge_thread_metadata("x", &Default::default(), 9).await;
        assert_eq!(missing.unwrap(), None, "{name}");
        t.join_thread("m", "r", 0, 10).await.unwrap();
        assert!(t.delete_thread("m").await.unwrap(), "{name}");
        assert!(!t.delete_thread("m").await.unwrap(), "{name}");
        assert_eq!(t.thread("m").await.unwrap(), None, "{name}");
        assert!(t.thread_runs("m", 10).await.unwrap().is_empty(), "{name}");
        // A new thread under the same id starts with no runs.
        t.create_thread(&thread("m", 20, json!({}))).await.unwrap();
        assert!(t.join_thread("m", "again", 0, 21).await.unwrap(), "{name}");
        assert_eq!(t.thread_runs("m", 10).await.unwrap(), ["again"], "{name}");
    }
}

#[tokio::test]
async fn values_a_client_writes_stand_until_the_next_run_joins() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        let t = threads(&store);
        t.create_thread(&thread("v", 1, json!({}))).await.unwrap();
        let written = json!({"messages": [{"type": "human", "content": "hi"}], "n": 1});
        let now = t
            .set_thread_values("v", &written, 5)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (now.values.as_ref(), now.updated_ms),
            (Some(&written), 5),
            "{name}"
        );
        assert_eq!(
            t.thread("v").await.unwrap().unwrap().values,
            Some(written),
            "{name}"
        );
        assert_eq!(
            t.set_thread_values("nope", &json!({}), 5).await.unwrap(),
            None,
            "{name}"
        );
        assert!(t.join_thread("v", "r1", 0, 6).await.unwrap(), "{name}");
        assert_eq!(t.thread("v").await.unwrap().unwrap().values, None, "{name}");
    }
}
