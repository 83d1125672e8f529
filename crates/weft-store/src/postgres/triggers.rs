//! Schedules, firings, webhooks and timers in PostgreSQL. Schedules and webhooks are
//! JSON documents under their key; a firing is a row keyed by its schedule and fire
//! time, inserted in one transaction with its run (`ON CONFLICT DO NOTHING`: of many
//! processes firing one schedule at one instant, one inserts and the rest see nothing
//! written).

use super::{PostgresStore, pg_err, runs};
use crate::trigger_docs::{FiringRow, exists_already, key_column, read_doc, write_doc};
use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use serde::Serialize;
use serde::de::DeserializeOwned;
use weft_core::ports::{DueTimer, Firing, Hook, RunRecord, Schedule, StoreError, TriggerStore};

async fn put_doc(
    client: &impl GenericClient,
    table: &str,
    key: &str,
    doc: &impl Serialize,
    create: bool,
) -> Result<(), StoreError> {
    let text = write_doc(table, doc)?;
    let column = key_column(table);
    let on_conflict = if create {
        "DO NOTHING".to_owned()
    } else {
        "DO UPDATE SET doc = excluded.doc".to_owned()
    };
    let written = client
        .execute(
            &format!(
                "INSERT INTO weft.{table} ({column}, doc) VALUES ($1, $2) ON CONFLICT ({column}) {on_conflict}"
            ),
            &[&key, &text],
        )
        .await
        .map_err(|e| pg_err(table, e))?;
    if written == 0 {
        return Err(exists_already(table, key));
    }
    Ok(())
}

async fn get_doc<T: DeserializeOwned>(
    client: &impl GenericClient,
    table: &str,
    key: &str,
) -> Result<Option<T>, StoreError> {
    let column = key_column(table);
    let row = client
        .query_opt(
            &format!("SELECT doc FROM weft.{table} WHERE {column} = $1"),
            &[&key],
        )
        .await
        .map_err(|e| pg_err(table, e))?;
    row.map(|r| read_doc(table, key, r.get(0))).transpose()
}

async fn all_docs<T: DeserializeOwned>(
    client: &impl GenericClient,
    table: &str,
) -> Result<Vec<T>, StoreError> {
    let column = key_column(table);
    let rows = client
        .query(
            &format!("SELECT {column}, doc FROM weft.{table} ORDER BY {column}"),
            &[],
        )
        .await
        .map_err(|e| pg_err(table, e))?;
    rows.iter()
        .map(|r| read_doc(table, r.get(0), r.get(1)))
        .collect()
}

async fn delete_doc(
    client: &impl GenericClient,
    table: &str,
    key: &str,
) -> Result<bool, StoreError> {
    let column = key_column(table);
    client
        .execute(
            &format!("DELETE FROM weft.{table} WHERE {column} = $1"),
            &[&key],
        )
        .await
        .map(|n| n > 0)
        .map_err(|e| pg_err(table, e))
}

/// A firing of schedule `schedule_id`, read by column name.
fn firing_from_row(schedule_id: &str, r: &tokio_postgres::Row) -> Result<Firing, StoreError> {
    let column = super::unreadable("a firing");
    let missed: i32 = r.try_get("missed").map_err(column)?;
    FiringRow {
        fire_ms: r.try_get("fire_ms").map_err(column)?,
        outcome: r.try_get("outcome").map_err(column)?,
        run_id: r.try_get("run_id").map_err(column)?,
        missed: i64::from(missed),
        at_ms: r.try_get("at_ms").map_err(column)?,
        error: r.try_get("error").map_err(column)?,
    }
    .into_firing(schedule_id)
}

#[async_trait]
impl TriggerStore for PostgresStore {
    async fn put_schedule(&self, s: &Schedule, create: bool) -> Result<(), StoreError> {
        put_doc(&self.client().await?, "schedules", &s.id, s, create).await
    }
    async fn schedule(&self, id: &str) -> Result<Option<Schedule>, StoreError> {
        get_doc(&self.client().await?, "schedules", id).await
    }
    async fn schedules(&self) -> Result<Vec<Schedule>, StoreError> {
        all_docs(&self.client().await?, "schedules").await
    }
    async fn delete_schedule(&self, id: &str) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| pg_err("schedules", e))?;
        tx.execute("DELETE FROM weft.firings WHERE schedule_id = $1", &[&id])
            .await
            .map_err(|e| pg_err("firings", e))?;
        let existed = delete_doc(&tx, "schedules", id).await?;
        tx.commit().await.map_err(|e| pg_err("schedules", e))?;
        Ok(existed)
    }
    async fn record_firing(
        &self,
        firing: &Firing,
        run: Option<&RunRecord>,
    ) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| pg_err("firings", e))?;
        let missed = i32::try_from(firing.missed).unwrap_or(i32::MAX);
        let inserted = tx
            .execute(
                "INSERT INTO weft.firings (schedule_id, fire_ms, outcome, run_id, missed, at_ms, error)
                 VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
                &[
                    &firing.schedule_id,
                    &firing.fire_ms,
                    &firing.outcome.as_str(),
                    &firing.run_id,
                    &missed,
                    &firing.at_ms,
                    &firing.error,
                ],
            )
            .await
            .map_err(|e| pg_err("firings", e))?;
        if inserted == 0 {
            return Ok(false);
        }
        if let Some(run) = run {
            runs::write(&tx, &self.leases, run, true).await?;
        }
        tx.commit().await.map_err(|e| pg_err("firings", e))?;
        Ok(true)
    }
    async fn start_queued_firing(
        &self,
        schedule_id: &str,
        fire_ms: i64,
        run: &RunRecord,
    ) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| pg_err("firings", e))?;
        let changed = tx
            .execute(
                "UPDATE weft.firings SET outcome = 'started', run_id = $3
                 WHERE schedule_id = $1 AND fire_ms = $2 AND outcome = 'queued'",
                &[&schedule_id, &fire_ms, &run.id],
            )
            .await
            .map_err(|e| pg_err("firings", e))?;
        if changed == 0 {
            return Ok(false);
        }
        runs::write(&tx, &self.leases, run, true).await?;
        tx.commit().await.map_err(|e| pg_err("firings", e))?;
        Ok(true)
    }
    async fn firings(&self, schedule_id: &str, limit: usize) -> Result<Vec<Firing>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .client()
            .await?
            .query(
                "SELECT fire_ms, outcome, run_id, missed, at_ms, error FROM weft.firings
                 WHERE schedule_id = $1 ORDER BY fire_ms DESC LIMIT $2",
                &[&schedule_id, &limit],
            )
            .await
            .map_err(|e| pg_err("firings", e))?;
        rows.iter()
            .map(|r| firing_from_row(schedule_id, r))
            .collect()
    }
    async fn put_hook(&self, h: &Hook, create: bool) -> Result<(), StoreError> {
        put_doc(&self.client().await?, "hooks", &h.name, h, create).await
    }
    async fn hook(&self, name: &str) -> Result<Option<Hook>, StoreError> {
        get_doc(&self.client().await?, "hooks", name).await
    }
    async fn hooks(&self) -> Result<Vec<Hook>, StoreError> {
        all_docs(&self.client().await?, "hooks").await
    }
    async fn delete_hook(&self, name: &str) -> Result<bool, StoreError> {
        delete_doc(&self.client().await?, "hooks", name).await
    }
    async fn due_timers(&self, until_ms: i64, limit: usize) -> Result<Vec<DueTimer>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .client()
            .await?
            .query(
                "SELECT id, wake_ms FROM weft.runs
                 WHERE status = 'paused' AND wake_ms <= $1 ORDER BY wake_ms, id LIMIT $2",
                &[&until_ms, &limit],
            )
            .await
            .map_err(|e| pg_err("timers", e))?;
        Ok(rows
            .iter()
            .map(|r| DueTimer {
                run_id: r.get(0),
                wake_ms: r.get(1),
            })
            .collect())
    }
}
