//! Every store the contract holds for: memory, a SQLite file, and a fresh database on the
//! PostgreSQL cluster named by `WEFT_TEST_POSTGRES` (`scripts/test` starts one with
//! `scripts/postgres`). Without that variable the PostgreSQL store is left out with a
//! note, except under `CI`, where leaving it out is a failure.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use weft_core::ports::Store;
use weft_store::{Durability, MemoryStore, PostgresStore, SqliteStore};

/// The stores to test, by name; `dir` holds the SQLite file.
#[allow(dead_code, reason = "each test file uses part of this module")]
pub async fn all(dir: &tempfile::TempDir) -> Vec<(&'static str, Arc<dyn Store>)> {
    let path = dir.path().join("runs.db");
    let mut stores: Vec<(&'static str, Arc<dyn Store>)> = vec![
        ("memory", Arc::new(MemoryStore::new())),
        (
            "sqlite",
            Arc::new(SqliteStore::open(path, Durability::Process).unwrap()),
        ),
    ];
    if let Some(url) = fresh_postgres().await {
        stores.push((
            "postgres",
            Arc::new(PostgresStore::connect(&url).await.unwrap()),
        ));
    }
    stores
}

/// The URL of a new, empty database on the test cluster; `None` (with a note) when no
/// cluster was named outside CI.
pub async fn fresh_postgres() -> Option<String> {
    if std::env::var_os("WEFT_TEST_FAST").is_some() {
        eprintln!("note: the fast test profile leaves out PostgreSQL (scripts/test runs it)");
        return None;
    }
    let Ok(admin) = std::env::var("WEFT_TEST_POSTGRES") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "WEFT_TEST_POSTGRES is not set: CI runs the store tests on PostgreSQL too (scripts/test starts a cluster)"
        );
        eprintln!(
            "note: WEFT_TEST_POSTGRES is not set, the PostgreSQL store is not tested here (run scripts/test)"
        );
        return None;
    };
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "weft_test_{}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    let (client, connection) = tokio_postgres::connect(&admin, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot reach the test cluster at {admin}: {e}"));
    let conn = tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    drop(client);
    let _ = conn.await;
    let base = admin.rsplit_once('/').expect("a URL with a database").0;
    Some(format!("{base}/{name}"))
}
