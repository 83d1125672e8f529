//! Threads in the SQLite file: a row per thread, and a row per run that joined one,
//! numbered from 0 in the order they joined. A join is an `UPDATE ... WHERE runs = ?`
//! on the thread's row, so of two joins that saw the same count one writes.

use super::{SqliteStore, err};
use crate::thread_row::{ThreadRow, json_text, thread_exists};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Row, params};
use weft_core::ports::{StoreError, Thread, ThreadQuery, ThreadStore};
use weft_core::value::Value;

/// The thread tables (created on open, as every table is).
pub(super) const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS threads (
         id TEXT PRIMARY KEY, metadata TEXT NOT NULL, created_ms INTEGER NOT NULL,
         updated_ms INTEGER NOT NULL, runs INTEGER NOT NULL, last_run TEXT, state TEXT);
     CREATE INDEX IF NOT EXISTS threads_by_time ON threads (created_ms DESC, id DESC);
     CREATE TABLE IF NOT EXISTS thread_runs (
         thread_id TEXT NOT NULL, n INTEGER NOT NULL, run_id TEXT NOT NULL,
         PRIMARY KEY (thread_id, n)) WITHOUT ROWID;";

const COLUMNS: &str = "id, metadata, created_ms, updated_ms, runs, last_run, state";

fn thread_from_row(r: &Row<'_>) -> rusqlite::Result<ThreadRow> {
    Ok(ThreadRow {
        id: r.get(0)?,
        metadata: r.get(1)?,
        created_ms: r.get(2)?,
        updated_ms: r.get(3)?,
        runs: r.get(4)?,
        last_run: r.get(5)?,
        values: r.get(6)?,
    })
}

fn get_thread(conn: &Connection, id: &str) -> Result<Option<Thread>, StoreError> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM threads WHERE id = ?1"),
        params![id],
        thread_from_row,
    )
    .optional()
    .map_err(|e| err("threads", e))?
    .map(ThreadRow::into_thread)
    .transpose()
}

fn create_thread(conn: &Connection, t: &Thread) -> Result<(), StoreError> {
    let metadata = json_text(&t.metadata)?;
    let values = t.values.as_ref().map(json_text).transpose()?;
    let written = conn
        .execute(
            "INSERT OR IGNORE INTO threads (id, metadata, created_ms, updated_ms, runs, last_run, state)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                t.id,
                metadata,
                t.created_ms,
                t.updated_ms,
                i64::try_from(t.runs).unwrap_or(i64::MAX),
                t.last_run,
                values
            ],
        )
        .map_err(|e| err("threads", e))?;
    if written == 0 {
        return Err(thread_exists(&t.id));
    }
    Ok(())
}

fn list_threads(conn: &Connection, query: &ThreadQuery) -> Result<Vec<Thread>, StoreError> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM threads ORDER BY created_ms DESC, id DESC"
        ))
        .map_err(|e| err("threads", e))?;
    let rows: Vec<ThreadRow> = stmt
        .query_map([], thread_from_row)
        .and_then(|rows| rows.collect())
        .map_err(|e| err("threads", e))?;
    let threads: Vec<Thread> = rows
        .into_iter()
        .map(ThreadRow::into_thread)
        .collect::<Result<_, _>>()?;
    Ok(query.page(threads))
}

fn merge_metadata(
    conn: &Connection,
    id: &str,
    metadata: &serde_json::Map<String, Value>,
    at_ms: i64,
) -> Result<Option<Thread>, StoreError> {
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)
        .map_err(|e| err("threads", e))?;
    let Some(mut thread) = get_thread(&tx, id)? else {
        return Ok(None);
    };
    thread.merge_metadata(metadata, at_ms);
    let text = json_text(&thread.metadata)?;
    tx.execute(
        "UPDATE threads SET metadata = ?2, updated_ms = ?3 WHERE id = ?1",
        params![id, text, at_ms],
    )
    .map_err(|e| err("threads", e))?;
    tx.commit().map_err(|e| err("threads", e))?;
    Ok(Some(thread))
}

fn set_values(
    conn: &Connection,
    id: &str,
    values: &Value,
    at_ms: i64,
) -> Result<Option<Thread>, StoreError> {
    let text = json_text(values)?;
    let changed = conn
        .execute(
            "UPDATE threads SET state = ?2, updated_ms = ?3 WHERE id = ?1",
            params![id, text, at_ms],
        )
        .map_err(|e| err("threads", e))?;
    if changed == 0 {
        return Ok(None);
    }
    get_thread(conn, id)
}

fn delete_thread(conn: &Connection, id: &str) -> Result<bool, StoreError> {
    let tx = conn
        .unchecked_transaction()
        .map_err(|e| err("threads", e))?;
    tx.execute("DELETE FROM thread_runs WHERE thread_id = ?1", params![id])
        .map_err(|e| err("thread_runs", e))?;
    let existed = tx
        .execute("DELETE FROM threads WHERE id = ?1", params![id])
        .map_err(|e| err("threads", e))?
        > 0;
    tx.commit().map_err(|e| err("threads", e))?;
    Ok(existed)
}

fn join_thread(
    conn: &Connection,
    id: &str,
    run_id: &str,
    expected: u64,
    at_ms: i64,
) -> Result<bool, StoreError> {
    let expected = i64::try_from(expected).unwrap_or(i64::MAX);
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)
        .map_err(|e| err("threads", e))?;
    let changed = tx
        .execute(
            "UPDATE threads SET runs = runs + 1, last_run = ?2, updated_ms = ?4, state = NULL
             WHERE id = ?1 AND runs = ?3",
            params![id, run_id, expected, at_ms],
        )
        .map_err(|e| err("threads", e))?;
    if changed == 0 {
        return Ok(false);
    }
    tx.execute(
        "INSERT INTO thread_runs (thread_id, n, run_id) VALUES (?1, ?2, ?3)",
        params![id, expected, run_id],
    )
    .map_err(|e| err("thread_runs", e))?;
    tx.commit().map_err(|e| err("threads", e))?;
    Ok(true)
}

fn thread_runs(conn: &Connection, id: &str, limit: usize) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT run_id FROM thread_runs WHERE thread_id = ?1 ORDER BY n DESC LIMIT ?2",
        )
        .map_err(|e| err("thread_runs", e))?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    stmt.query_map(params![id, limit], |r| r.get(0))
        .and_then(|rows| rows.collect())
        .map_err(|e| err("thread_runs", e))
}

#[async_trait]
impl ThreadStore for SqliteStore {
    async fn create_thread(&self, thread: &Thread) -> Result<(), StoreError> {
        let thread = thread.clone();
        self.with(move |c| create_thread(c, &thread)).await
    }
    async fn thread(&self, id: &str) -> Result<Option<Thread>, StoreError> {
        let id = id.to_owned();
        self.with(move |c| get_thread(c, &id)).await
    }
    async fn threads(&self, query: &ThreadQuery) -> Result<Vec<Thread>, StoreError> {
        let query = query.clone();
        self.with(move |c| list_threads(c, &query)).await
    }
    async fn merge_thread_metadata(
        &self,
        id: &str,
        metadata: &serde_json::Map<String, Value>,
        at_ms: i64,
    ) -> Result<Option<Thread>, StoreError> {
        let (id, metadata) = (id.to_owned(), metadata.clone());
        self.with(move |c| merge_metadata(c, &id, &metadata, at_ms))
            .await
    }
    async fn set_thread_values(
        &self,
        id: &str,
        values: &Value,
        at_ms: i64,
    ) -> Result<Option<Thread>, StoreError> {
        let (id, values) = (id.to_owned(), values.clone());
        self.with(move |c| set_values(c, &id, &values, at_ms)).await
    }
    async fn delete_thread(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.with(move |c| delete_thread(c, &id)).await
    }
    async fn join_thread(
        &self,
        id: &str,
        run_id: &str,
        expected: u64,
        at_ms: i64,
    ) -> Result<bool, StoreError> {
        let (id, run_id) = (id.to_owned(), run_id.to_owned());
        self.with(move |c| join_thread(c, &id, &run_id, expected, at_ms))
            .await
    }
    async fn thread_runs(&self, id: &str, limit: usize) -> Result<Vec<String>, StoreError> {
        let id = id.to_owned();
        self.with(move |c| thread_runs(c, &id, limit)).await
    }
}
