//! Threads in PostgreSQL: a row per thread, and a row per run that joined one, numbered
//! from 0 in the order they joined. A join is an `UPDATE ... WHERE runs = $n` on the
//! thread's row in the transaction that inserts the run's row, so of two processes that
//! saw the same count one joins and the other writes nothing.

use super::{PostgresStore, pg_err};
use crate::thread_row::{ThreadRow, json_text, thread_exists};
use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use tokio_postgres::Row;
use weft_core::ports::{StoreError, Thread, ThreadQuery, ThreadStore};
use weft_core::value::Value;

const COLUMNS: &str = "id, metadata, created_ms, updated_ms, runs, last_run, state";

fn thread_from_row(r: &Row) -> Result<Thread, StoreError> {
    ThreadRow {
        id: r.get(0),
        metadata: r.get(1),
        created_ms: r.get(2),
        updated_ms: r.get(3),
        runs: r.get(4),
        last_run: r.get(5),
        values: r.get(6),
    }
    .into_thread()
}

async fn get_thread(client: &impl GenericClient, id: &str) -> Result<Option<Thread>, StoreError> {
    client
        .query_opt(
            &format!("SELECT {COLUMNS} FROM weft.threads WHERE id = $1"),
            &[&id],
        )
        .await
        .map_err(|e| pg_err("threads", e))?
        .as_ref()
        .map(thread_from_row)
        .transpose()
}

#[async_trait]
impl ThreadStore for PostgresStore {
    async fn create_thread(&self, t: &Thread) -> Result<(), StoreError> {
        let metadata = json_text(&t.metadata)?;
        let runs = i64::try_from(t.runs).unwrap_or(i64::MAX);
        let written = self
            .client()
            .await?
            .execute(
                "INSERT INTO weft.threads (id, metadata, created_ms, updated_ms, runs, last_run)
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING",
                &[
                    &t.id,
                    &metadata,
                    &t.created_ms,
                    &t.updated_ms,
                    &runs,
                    &t.last_run,
                ],
            )
            .await
            .map_err(|e| pg_err("threads", e))?;
        if written == 0 {
            return Err(thread_exists(&t.id));
        }
        Ok(())
    }

    async fn thread(&self, id: &str) -> Result<Option<Thread>, StoreError> {
        get_thread(&self.client().await?, id).await
    }

    async fn threads(&self, query: &ThreadQuery) -> Result<Vec<Thread>, StoreError> {
        let rows = self
            .client()
            .await?
            .query(
                &format!("SELECT {COLUMNS} FROM weft.threads ORDER BY created_ms DESC, id DESC"),
                &[],
            )
            .await
            .map_err(|e| pg_err("threads", e))?;
        let threads: Vec<Thread> = rows.iter().map(thread_from_row).collect::<Result<_, _>>()?;
        Ok(query.page(threads))
    }

    async fn merge_thread_metadata(
        &self,
        id: &str,
        metadata: &serde_json::Map<String, Value>,
        at_ms: i64,
    ) -> Result<Option<Thread>, StoreError> {
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| pg_err("threads", e))?;
        let row = tx
            .query_opt(
                &format!("SELECT {COLUMNS} FROM weft.threads WHERE id = $1 FOR UPDATE"),
                &[&id],
            )
            .await
            .map_err(|e| pg_err("threads", e))?;
        let Some(mut thread) = row.as_ref().map(thread_from_row).transpose()? else {
            return Ok(None);
        };
        thread.merge_metadata(metadata, at_ms);
        let text = json_text(&thread.metadata)?;
        tx.execute(
            "UPDATE weft.threads SET metadata = $2, updated_ms = $3 WHERE id = $1",
            &[&id, &text, &at_ms],
        )
        .await
        .map_err(|e| pg_err("threads", e))?;
        tx.commit().await.map_err(|e| pg_err("threads", e))?;
        Ok(Some(thread))
    }

    async fn set_thread_values(
        &self,
        id: &str,
        values: &Value,
        at_ms: i64,
    ) -> Result<Option<Thread>, StoreError> {
        let text = json_text(values)?;
        let client = self.client().await?;
        let changed = client
            .execute(
                "UPDATE weft.threads SET state = $2, updated_ms = $3 WHERE id = $1",
                &[&id, &text, &at_ms],
            )
            .await
            .map_err(|e| pg_err("threads", e))?;
        if changed == 0 {
            return Ok(None);
        }
        get_thread(&client, id).await
    }

    async fn delete_thread(&self, id: &str) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| pg_err("threads", e))?;
        tx.execute("DELETE FROM weft.thread_runs WHERE thread_id = $1", &[&id])
            .await
            .map_err(|e| pg_err("thread_runs", e))?;
        let deleted = tx
            .execute("DELETE FROM weft.threads WHERE id = $1", &[&id])
            .await
            .map_err(|e| pg_err("threads", e))?;
        tx.commit().await.map_err(|e| pg_err("threads", e))?;
        Ok(deleted > 0)
    }

    async fn join_thread(
        &self,
        id: &str,
        run_id: &str,
        expected: u64,
        at_ms: i64,
    ) -> Result<bool, StoreError> {
        let expected = i64::try_from(expected).unwrap_or(i64::MAX);
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| pg_err("threads", e))?;
        let changed = tx
            .execute(
                "UPDATE weft.threads SET runs = runs + 1, last_run = $2, updated_ms = $4, state = NULL
                 WHERE id = $1 AND runs = $3",
                &[&id, &run_id, &expected, &at_ms],
            )
            .await
            .map_err(|e| pg_err("threads", e))?;
        if changed == 0 {
            return Ok(false);
        }
        tx.execute(
            "INSERT INTO weft.thread_runs (thread_id, n, run_id) VALUES ($1, $2, $3)",
            &[&id, &expected, &run_id],
        )
        .await
        .map_err(|e| pg_err("thread_runs", e))?;
        tx.commit().await.map_err(|e| pg_err("threads", e))?;
        Ok(true)
    }

    async fn thread_runs(&self, id: &str, limit: usize) -> Result<Vec<String>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .client()
            .await?
            .query(
                "SELECT run_id FROM weft.thread_runs WHERE thread_id = $1 ORDER BY n DESC LIMIT $2",
                &[&id, &limit],
            )
            .await
            .map_err(|e| pg_err("thread_runs", e))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }
}
