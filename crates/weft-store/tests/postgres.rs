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
    assert_eq!(version, "1");
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
             WHERE application_name = 'weft' AND pid <> pg_backend_pid()) t",
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
                value: serde_json::json!(1),
            },
        )
        .await
        .unwrap();
    assert_eq!(store.journal("after").await.unwrap().len(), 1);
}
