//! `weft.runs`: run records, their listing, claims and totals.

use super::leases::{Leases, NOW_MS};
use super::pg_err;
use crate::run_row::{RunRow, json_col};
use deadpool_postgres::{Client, GenericClient};
use std::time::Instant;
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use weft_core::ports::{Claim, Claimed, RunQuery, RunRecord, RunStats, RunStatus, StoreError};
use weft_core::usage::Usage;

/// The columns a [`RunRecord`] is written to.
const COLUMNS: &str = "id, flow_hash, flow_name, source, source_hash, dialect, input, status, output, state, error, waiting, usage, owner, created_ms, updated_ms, scopes, view, settings, retries, flow_id, wake_ms";
/// The columns a [`RunRecord`] is read from: the written ones and the lease's end.
const READ: &str = "id, flow_hash, flow_name, source, source_hash, dialect, input, status, output, state, error, waiting, usage, owner, created_ms, updated_ms, scopes, view, settings, retries, flow_id, wake_ms, lease_expires_ms";

/// A run's row, read by column name.
fn from_row(r: &Row) -> Result<RunRecord, StoreError> {
    let column = super::unreadable("a run's row");
    let retries: i32 = r.try_get("retries").map_err(column)?;
    RunRow {
        id: r.try_get("id").map_err(column)?,
        flow_hash: r.try_get("flow_hash").map_err(column)?,
        flow_name: r.try_get("flow_name").map_err(column)?,
        source: r.try_get("source").map_err(column)?,
        source_hash: r.try_get("source_hash").map_err(column)?,
        dialect: r.try_get("dialect").map_err(column)?,
        input: r.try_get("input").map_err(column)?,
        status: r.try_get("status").map_err(column)?,
        output: r.try_get("output").map_err(column)?,
        state: r.try_get("state").map_err(column)?,
        error: r.try_get("error").map_err(column)?,
        waiting: r.try_get("waiting").map_err(column)?,
        usage: r.try_get("usage").map_err(column)?,
        owner: r.try_get("owner").map_err(column)?,
        created_ms: r.try_get("created_ms").map_err(column)?,
        updated_ms: r.try_get("updated_ms").map_err(column)?,
        scopes: r.try_get("scopes").map_err(column)?,
        view: r.try_get("view").map_err(column)?,
        settings: r.try_get("settings").map_err(column)?,
        retries: i64::from(retries),
        flow_id: r.try_get("flow_id").map_err(column)?,
        wake_ms: r.try_get("wake_ms").map_err(column)?,
        lease_until_ms: r.try_get("lease_expires_ms").map_err(column)?,
    }
    .into_run()
}

/// Inserts run `run` (`insert`: a second run with its id is a conflict) or replaces it.
///
/// A new running run is leased to this process (fencing number 1). A replacement by
/// the process that holds the run's lease is fenced: refused, with nothing written, if
/// another process has claimed the run since. A run that stops running lets its lease
/// go; a run that becomes queued is ready for workers from now, and they are told.
pub(super) async fn write(
    client: &impl GenericClient,
    leases: &Leases,
    run: &RunRecord,
    insert: bool,
) -> Result<(), StoreError> {
    let since = Instant::now();
    let epoch = if insert {
        None
    } else {
        leases.epoch_of(&run.id)
    };
    if epoch.is_some() && leases.lost(&run.id) {
        return Err(fenced(&run.id));
    }
    let statement = client
        .prepare_cached(&write_sql(insert))
        .await
        .map_err(|e| pg_err("runs", e))?;
    let scopes =
        (!run.scopes.is_empty()).then(|| serde_json::to_string(&run.scopes).unwrap_or_default());
    let retries = i32::try_from(run.retries).unwrap_or(i32::MAX);
    let new_epoch: i64 = i64::from(insert && run.status == RunStatus::Running);
    let written = client
        .execute(
            &statement,
            &[
                &run.id,
                &run.flow_hash,
                &run.flow_name,
                &run.source,
                &run.source_hash,
                &run.dialect,
                &run.input.to_string(),
                &run.status.as_str(),
                &json_col(run.output.as_ref()),
                &json_col(run.state.as_ref()),
                &json_col(run.error.as_ref()),
                &json_col(run.waiting.as_ref()),
                &serde_json::to_string(&run.usage).unwrap_or_default(),
                &run.owner,
                &run.created_ms,
                &run.updated_ms,
                &scopes,
                &json_col(run.view.as_ref()),
                &json_col(run.settings.as_ref()),
                &retries,
                &run.flow_id,
                &run.wake_ms.filter(|_| run.status == RunStatus::Paused),
                &if insert {
                    new_epoch
                } else {
                    epoch.unwrap_or(-1)
                },
                &leases.duration_ms(),
            ],
        )
        .await
        .map_err(|e| match e.code() {
            Some(code) if insert && *code == SqlState::UNIQUE_VIOLATION => {
                StoreError::Conflict(format!("a run with id {} exists already", run.id))
            }
            _ if epoch.is_some() => let_go(leases, &run.id, &pg_err("runs", e)),
            _ => pg_err("runs", e),
        })?;
    if written == 0 {
        leases.mark_lost(&run.id);
        return Err(fenced(&run.id));
    }
    if new_epoch == 1 {
        leases.hold(&run.id, 1, since);
    } else if run.status != RunStatus::Running {
        leases.release(&run.id);
    }
    if run.status == RunStatus::Queued {
        notify_work(client).await?;
    }
    Ok(())
}

/// The statement [`write`] runs: `$23` is the new run's fencing number (insert) or
/// the one this process holds (-1: none, unfenced), `$24` the lease's length.
fn write_sql(insert: bool) -> String {
    let values = "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22";
    let lease = format!(
        "CASE WHEN $8 = 'running' AND $23::bigint > 0 THEN {NOW_MS} + $24::bigint END, CASE WHEN $8 = 'queued' THEN {NOW_MS} END"
    );
    let insert_sql = format!(
        "INSERT INTO weft.runs ({COLUMNS}, lease_epoch, lease_expires_ms, ready_ms)
         VALUES ({values}, GREATEST($23::bigint, 0), {lease})"
    );
    if insert {
        return insert_sql;
    }
    let updates = COLUMNS
        .split(", ")
        .skip(1)
        .map(|c| format!("{c} = excluded.{c}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "{insert_sql} ON CONFLICT (id) DO UPDATE SET {updates},
             lease_expires_ms = CASE WHEN excluded.status = 'running'
                 THEN weft.runs.lease_expires_ms END,
             ready_ms = CASE WHEN excluded.status <> 'queued' THEN NULL
                 WHEN weft.runs.status = 'queued' THEN weft.runs.ready_ms ELSE {NOW_MS} END
         WHERE $23::bigint < 0 OR weft.runs.lease_epoch = $23::bigint"
    )
}

/// The error of a write by a process that lost run `id`'s lease.
pub(super) fn fenced(id: &str) -> StoreError {
    StoreError::Fenced(format!(
        "run {id} was taken over by another process (this one's lease lapsed); nothing was written"
    ))
}

/// The error of a write of run `id`, which this process holds, that failed with
/// `cause`: whether it was committed is unknown, so this process lets the run go (its
/// lease lapses unrenewed) and whichever worker takes the run next continues it from
/// what was committed, rather than the run failing for a passing database fault.
pub(super) fn let_go(leases: &Leases, id: &str, cause: &StoreError) -> StoreError {
    leases.mark_lost(id);
    StoreError::Fenced(format!(
        "run {id}: a write failed ({cause}); this process lets the run go, and a worker continues it from its journal"
    ))
}

/// Wakes the workers that wait for runs to become ready (delivered when the
/// transaction, or this statement, commits).
async fn notify_work(client: &impl GenericClient) -> Result<(), StoreError> {
    client
        .execute("SELECT pg_notify('weft_work', '')", &[])
        .await
        .map(|_| ())
        .map_err(|e| pg_err("notify", e))
}

/// Run `id`, or the one run whose id starts with `id` (4 characters or more).
pub(super) async fn get(
    client: &impl GenericClient,
    id: &str,
) -> Result<Option<RunRecord>, StoreError> {
    let exact = client
        .query_opt(
            &format!("SELECT {READ} FROM weft.runs WHERE id = $1"),
            &[&id],
        )
        .await
        .map_err(|e| pg_err("runs", e))?;
    if let Some(row) = exact {
        return from_row(&row).map(Some);
    }
    if id.len() < 4 {
        return Ok(None);
    }
    // The ids that start with `id` sort (by bytes: `COLLATE "C"`) between it and it
    // followed by the last code point, a range the primary key answers.
    let rows = client
        .query(
            &format!(
                "SELECT {READ} FROM weft.runs WHERE id >= $1 AND id < $1 || chr(1114111) LIMIT 2"
            ),
            &[&id],
        )
        .await
        .map_err(|e| pg_err("runs", e))?;
    match rows.as_slice() {
        [] => Ok(None),
        [one] => from_row(one).map(Some),
        _ => Err(StoreError::Conflict(format!(
            "the id prefix `{id}` matches several runs; give more of it"
        ))),
    }
}

/// The runs `query` asks for: newest first, from its cursor on.
pub(super) async fn list(client: &Client, query: &RunQuery) -> Result<Vec<RunRecord>, StoreError> {
    let (after_ms, after_id) = match &query.after {
        Some(c) => (Some(c.created_ms), Some(c.id.as_str())),
        None => (None, None),
    };
    let status = query.status.map(|s| s.as_str());
    let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
    let statement = client
        .prepare_cached(&format!(
            "SELECT {READ} FROM weft.runs
             WHERE ($1::text IS NULL OR status = $1)
               AND ($2::bigint IS NULL OR (created_ms, id) < ($2, $3::text))
             ORDER BY created_ms DESC, id DESC LIMIT $4"
        ))
        .await
        .map_err(|e| pg_err("runs", e))?;
    client
        .query(&statement, &[&status, &after_ms, &after_id, &limit])
        .await
        .map_err(|e| pg_err("runs", e))?
        .iter()
        .map(from_row)
        .collect()
}

/// Compare-and-set on the run's status and owner, with the claim's entry, in one
/// transaction: the run's row is locked, so another claim of it waits, then sees the
/// winner's status. The winner holds the run under a new lease.
pub(super) async fn claim(
    client: &mut Client,
    leases: &Leases,
    claim: Claim,
) -> Result<Claimed, StoreError> {
    let since = Instant::now();
    let tx = client.transaction().await.map_err(|e| pg_err("claim", e))?;
    let Some(found) = get(&tx, &claim.run_id).await? else {
        return Err(claim.missing());
    };
    let locked = tx
        .query_one(
            &format!("SELECT {READ} FROM weft.runs WHERE id = $1 FOR UPDATE"),
            &[&found.id],
        )
        .await
        .map_err(|e| pg_err("claim", e))?;
    let current = from_row(&locked)?;
    if !claim.may_take(&current) {
        return Ok(Claimed::Lost(Box::new(current)));
    }
    let epoch: i64 = tx
        .query_one(
            &format!(
                "UPDATE weft.runs SET status = 'running', owner = $2, updated_ms = $3,
                     lease_epoch = lease_epoch + 1, lease_expires_ms = {NOW_MS} + $4,
                     ready_ms = NULL, wake_ms = NULL
                 WHERE id = $1 RETURNING lease_epoch"
            ),
            &[
                &current.id,
                &claim.owner,
                &claim.now_ms,
                &leases.duration_ms(),
            ],
        )
        .await
        .map_err(|e| pg_err("claim", e))?
        .get(0);
    if let Some(entry) = &claim.entry {
        super::writer::insert_entry(&tx, &current.id, epoch, entry).await?;
    }
    tx.commit().await.map_err(|e| pg_err("claim commit", e))?;
    leases.hold(&current.id, epoch, since);
    Ok(Claimed::Taken)
}

/// Claims up to `limit` waiting runs for `owner`: first those whose lease lapsed
/// (their work is the oldest), then queued ones, each oldest first; rows another
/// worker is claiming at the same moment are skipped, not waited for.
pub(super) async fn claim_ready(
    client: &Client,
    leases: &Leases,
    owner: &str,
    limit: usize,
) -> Result<Vec<RunRecord>, StoreError> {
    let lapsed =
        format!("status = 'running' AND lease_expires_ms < {NOW_MS} ORDER BY lease_expires_ms");
    let queued = "status = 'queued' ORDER BY ready_ms, id".to_owned();
    let mut claimed = Vec::new();
    for waiting in [lapsed, queued] {
        let room = limit.saturating_sub(claimed.len());
        if room == 0 {
            break;
        }
        let since = Instant::now();
        let statement = client
            .prepare_cached(&format!(
                "WITH picked AS (
                     SELECT id, status AS was, owner AS was_owner FROM weft.runs
                     WHERE {waiting} LIMIT $2 FOR UPDATE SKIP LOCKED)
                 UPDATE weft.runs r SET status = 'running', owner = $1,
                     lease_epoch = r.lease_epoch + 1, lease_expires_ms = {NOW_MS} + $3,
                     updated_ms = {NOW_MS}, ready_ms = NULL, wake_ms = NULL
                 FROM picked WHERE r.id = picked.id
                 RETURNING {}, r.lease_epoch, picked.was, picked.was_owner",
                READ.split(", ")
                    .map(|c| format!("r.{c}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .await
            .map_err(|e| pg_err("claiming runs", e))?;
        let room = i64::try_from(room).unwrap_or(i64::MAX);
        let rows = client
            .query(&statement, &[&owner, &room, &leases.duration_ms()])
            .await
            .map_err(|e| pg_err("claiming runs", e))?;
        for row in rows {
            let mut run = from_row(&row)?;
            let (epoch, was, was_owner): (i64, &str, Option<String>) =
                (row.get(23), row.get(24), row.get(25));
            leases.hold(&run.id, epoch, since);
            run.status = RunStatus::parse(was).unwrap_or(RunStatus::Running);
            run.owner = was_owner;
            claimed.push(run);
        }
    }
    Ok(claimed)
}

/// Runs by status, model usage summed over them, and journaled step results.
pub(super) async fn stats(client: &Client) -> Result<RunStats, StoreError> {
    let rows = client
        .query(
            "SELECT status, count(*),
                    coalesce(sum((usage::jsonb->>'input_tokens')::numeric), 0)::bigint,
                    coalesce(sum((usage::jsonb->>'output_tokens')::numeric), 0)::bigint,
                    coalesce(sum((usage::jsonb->>'cost_usd')::float8), 0)
             FROM weft.runs GROUP BY status ORDER BY status",
            &[],
        )
        .await
        .map_err(|e| pg_err("stats", e))?;
    let mut stats = RunStats::default();
    for r in rows {
        let (status, n, input, output, cost): (&str, i64, i64, i64, f64) =
            (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4));
        if let Some(s) = RunStatus::parse(status) {
            stats.runs.push((s, n as u64));
        }
        stats.usage.add(&Usage {
            input_tokens: input as u64,
            output_tokens: output as u64,
            cost_usd: cost,
        });
    }
    let steps: i64 = client
        .query_one(
            "SELECT count(*) FROM weft.journal WHERE kind = 'result'",
            &[],
        )
        .await
        .map_err(|e| pg_err("stats", e))?
        .get(0);
    stats.steps = steps as u64;
    Ok(stats)
}
