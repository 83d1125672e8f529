//! Schedules, firings, webhooks and timers in the SQLite file. Schedules and webhooks
//! are JSON documents under their key; a firing is a row keyed by its schedule and fire
//! time, written in one transaction with its run, so that of two processes firing one
//! schedule at one instant exactly one writes.

use super::run_values::RunValues;
use super::runs::write_run;
use super::{SqliteStore, err};
use crate::trigger_docs::{FiringRow, exists_already, key_column, read_doc, write_doc};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde::de::DeserializeOwned;
use weft_core::ports::{DueTimer, Firing, Hook, RunRecord, Schedule, StoreError, TriggerStore};

/// The trigger tables (created on open, as every table is).
pub(super) const SCHEMA: &str =
    "CREATE TABLE IF NOT EXISTS schedules (id TEXT PRIMARY KEY, doc TEXT NOT NULL);
     CREATE TABLE IF NOT EXISTS hooks (name TEXT PRIMARY KEY, doc TEXT NOT NULL);
     CREATE TABLE IF NOT EXISTS firings (
         schedule_id TEXT NOT NULL, fire_ms INTEGER NOT NULL, outcome TEXT NOT NULL,
         run_id TEXT, missed INTEGER NOT NULL, at_ms INTEGER NOT NULL, error TEXT,
         PRIMARY KEY (schedule_id, fire_ms)) WITHOUT ROWID;";

/// Writes document `doc` under `key` in `table` (`create`: only if there is none).
fn put_doc(
    conn: &Connection,
    table: &str,
    key: &str,
    doc: &impl Serialize,
    create: bool,
) -> Result<(), StoreError> {
    let key_column = key_column(table);
    let text = write_doc(table, doc)?;
    let verb = if create {
        "INSERT OR IGNORE"
    } else {
        "INSERT OR REPLACE"
    };
    let written = conn
        .execute(
            &format!("{verb} INTO {table} ({key_column}, doc) VALUES (?1, ?2)"),
            params![key, text],
        )
        .map_err(|e| err(table, e))?;
    if written == 0 {
        return Err(exists_already(table, key));
    }
    Ok(())
}

fn get_doc<T: DeserializeOwned>(
    conn: &Connection,
    table: &str,
    key: &str,
) -> Result<Option<T>, StoreError> {
    let key_column = key_column(table);
    let text: Option<String> = conn
        .query_row(
            &format!("SELECT doc FROM {table} WHERE {key_column} = ?1"),
            params![key],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| err(table, e))?;
    text.map(|t| read_doc(table, key, &t)).transpose()
}

fn all_docs<T: DeserializeOwned>(conn: &Connection, table: &str) -> Result<Vec<T>, StoreError> {
    let key_column = key_column(table);
    let mut stmt = conn
        .prepare(&format!(
            "SELECT {key_column}, doc FROM {table} ORDER BY {key_column}"
        ))
        .map_err(|e| err(table, e))?;
    let rows: Vec<(String, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .and_then(|rows| rows.collect())
        .map_err(|e| err(table, e))?;
    rows.iter().map(|(k, t)| read_doc(table, k, t)).collect()
}

fn delete_doc(conn: &Connection, table: &str, key: &str) -> Result<bool, StoreError> {
    let key_column = key_column(table);
    conn.execute(
        &format!("DELETE FROM {table} WHERE {key_column} = ?1"),
        params![key],
    )
    .map(|n| n > 0)
    .map_err(|e| err(table, e))
}

/// Inserts `firing` and `run` in one write transaction; `false` when the firing exists.
fn record_firing(
    conn: &Connection,
    firing: &Firing,
    run: Option<&RunRecord>,
) -> Result<bool, StoreError> {
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)
        .map_err(|e| err("firings", e))?;
    let inserted = tx
        .execute(
            "INSERT OR IGNORE INTO firings (schedule_id, fire_ms, outcome, run_id, missed, at_ms, error)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                firing.schedule_id,
                firing.fire_ms,
                firing.outcome.as_str(),
                firing.run_id,
                firing.missed,
                firing.at_ms,
                firing.error
            ],
        )
        .map_err(|e| err("firings", e))?;
    if inserted == 0 {
        return Ok(false);
    }
    if let Some(run) = run {
        write_run(&tx, run, true, &RunValues::inline(run)?)?;
    }
    tx.commit().map_err(|e| err("firings", e))?;
    Ok(true)
}

fn start_queued_firing(
    conn: &Connection,
    schedule_id: &str,
    fire_ms: i64,
    run: &RunRecord,
) -> Result<bool, StoreError> {
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)
        .map_err(|e| err("firings", e))?;
    let changed = tx
        .execute(
            "UPDATE firings SET outcome = 'started', run_id = ?3
             WHERE schedule_id = ?1 AND fire_ms = ?2 AND outcome = 'queued'",
            params![schedule_id, fire_ms, run.id],
        )
        .map_err(|e| err("firings", e))?;
    if changed == 0 {
        return Ok(false);
    }
    write_run(&tx, run, true, &RunValues::inline(run)?)?;
    tx.commit().map_err(|e| err("firings", e))?;
    Ok(true)
}

/// A firing's columns: fire time, outcome, run, missed count, when, error.
fn firings(conn: &Connection, schedule_id: &str, limit: usize) -> Result<Vec<Firing>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT fire_ms, outcome, run_id, missed, at_ms, error FROM firings
             WHERE schedule_id = ?1 ORDER BY fire_ms DESC LIMIT ?2",
        )
        .map_err(|e| err("firings", e))?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows: Vec<FiringRow> = stmt
        .query_map(params![schedule_id, limit], |r| {
            Ok(FiringRow {
                fire_ms: r.get("fire_ms")?,
                outcome: r.get("outcome")?,
                run_id: r.get("run_id")?,
                missed: r.get("missed")?,
                at_ms: r.get("at_ms")?,
                error: r.get("error")?,
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| err("firings", e))?;
    rows.into_iter()
        .map(|row| row.into_firing(schedule_id))
        .collect()
}

fn due_timers(conn: &Connection, until_ms: i64, limit: usize) -> Result<Vec<DueTimer>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT id, wake_ms FROM runs
             WHERE wake_ms IS NOT NULL AND wake_ms <= ?1 AND status = 'paused'
             ORDER BY wake_ms, id LIMIT ?2",
        )
        .map_err(|e| err("timers", e))?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    stmt.query_map(params![until_ms, limit], |r| {
        Ok(DueTimer {
            run_id: r.get(0)?,
            wake_ms: r.get(1)?,
        })
    })
    .and_then(|rows| rows.collect())
    .map_err(|e| err("timers", e))
}

#[async_trait]
impl TriggerStore for SqliteStore {
    async fn put_schedule(&self, s: &Schedule, create: bool) -> Result<(), StoreError> {
        let s = s.clone();
        self.with(move |c| put_doc(c, "schedules", &s.id, &s, create))
            .await
    }
    async fn schedule(&self, id: &str) -> Result<Option<Schedule>, StoreError> {
        let id = id.to_owned();
        self.with(move |c| get_doc(c, "schedules", &id)).await
    }
    async fn schedules(&self) -> Result<Vec<Schedule>, StoreError> {
        self.with(|c| all_docs(c, "schedules")).await
    }
    async fn delete_schedule(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.with(move |c| {
            let tx = c.unchecked_transaction().map_err(|e| err("schedules", e))?;
            tx.execute("DELETE FROM firings WHERE schedule_id = ?1", params![id])
                .map_err(|e| err("firings", e))?;
            let existed = delete_doc(&tx, "schedules", &id)?;
            tx.commit().map_err(|e| err("schedules", e))?;
            Ok(existed)
        })
        .await
    }
    async fn record_firing(
        &self,
        firing: &Firing,
        run: Option<&RunRecord>,
    ) -> Result<bool, StoreError> {
        let (firing, run) = (firing.clone(), run.cloned());
        self.with(move |c| record_firing(c, &firing, run.as_ref()))
            .await
    }
    async fn start_queued_firing(
        &self,
        schedule_id: &str,
        fire_ms: i64,
        run: &RunRecord,
    ) -> Result<bool, StoreError> {
        let (id, run) = (schedule_id.to_owned(), run.clone());
        self.with(move |c| start_queued_firing(c, &id, fire_ms, &run))
            .await
    }
    async fn firings(&self, schedule_id: &str, limit: usize) -> Result<Vec<Firing>, StoreError> {
        let id = schedule_id.to_owned();
        self.with(move |c| firings(c, &id, limit)).await
    }
    async fn put_hook(&self, h: &Hook, create: bool) -> Result<(), StoreError> {
        let h = h.clone();
        self.with(move |c| put_doc(c, "hooks", &h.name, &h, create))
            .await
    }
    async fn hook(&self, name: &str) -> Result<Option<Hook>, StoreError> {
        let name = name.to_owned();
        self.with(move |c| get_doc(c, "hooks", &name)).await
    }
    async fn hooks(&self) -> Result<Vec<Hook>, StoreError> {
        self.with(|c| all_docs(c, "hooks")).await
    }
    async fn delete_hook(&self, name: &str) -> Result<bool, StoreError> {
        let name = name.to_owned();
        self.with(move |c| delete_doc(c, "hooks", &name)).await
    }
    async fn due_timers(&self, until_ms: i64, limit: usize) -> Result<Vec<DueTimer>, StoreError> {
        self.with(move |c| due_timers(c, until_ms, limit)).await
    }
}
