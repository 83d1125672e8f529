//! `runs`: run records (their output and state kept apart as stored values), their
//! listing, claims and totals.

use super::{err, journal, run_values};
use crate::run_row::{RunRow, json_col};
use rusqlite::{Connection, OptionalExtension, params};
use weft_core::ports::{
    Claim, Claimed, RunQuery, RunRecord, RunStats, RunStatus, StoreError, Usage,
};

const RUN_COLUMNS: &str = "id, flow_hash, flow_name, source, source_hash, dialect, input, status, output, state, error, waiting, usage, owner, created_ms, updated_ms, scopes, view, settings, retries, flow_id, wake_ms, output_refs, state_refs";

/// A run row read by column name, with the references to the parts its output and
/// state hold apart (put back by [`with_values`]).
fn run_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(RunRow, run_values::Refs)> {
    let refs = run_values::Refs {
        output: r.get("output_refs")?,
        state: r.get("state_refs")?,
    };
    let row = RunRow {
        id: r.get("id")?,
        flow_hash: r.get("flow_hash")?,
        flow_name: r.get("flow_name")?,
        source: r.get("source")?,
        source_hash: r.get("source_hash")?,
        dialect: r.get("dialect")?,
        input: r.get("input")?,
        status: r.get("status")?,
        output: r.get("output")?,
        state: r.get("state")?,
        error: r.get("error")?,
        waiting: r.get("waiting")?,
        usage: r.get("usage")?,
        owner: r.get("owner")?,
        created_ms: r.get("created_ms")?,
        updated_ms: r.get("updated_ms")?,
        scopes: r.get("scopes")?,
        view: r.get("view")?,
        settings: r.get("settings")?,
        retries: r.get("retries")?,
        flow_id: r.get("flow_id")?,
        wake_ms: r.get("wake_ms")?,
        lease_until_ms: None,
    };
    Ok((row, refs))
}

/// The runs of `rows`, their output and state whole.
fn with_values(
    conn: &Connection,
    rows: Vec<(RunRow, run_values::Refs)>,
) -> Result<Vec<RunRecord>, StoreError> {
    rows.into_iter()
        .map(|(row, refs)| {
            let mut run = row.into_run()?;
            run_values::put_back(conn, &mut run, refs)?;
            Ok(run)
        })
        .collect()
}

/// The runs `query` asks for: newest first, from its cursor on.
pub(super) fn list_runs(conn: &Connection, query: &RunQuery) -> Result<Vec<RunRecord>, StoreError> {
    let (after_ms, after_id) = match &query.after {
        Some(c) => (Some(c.created_ms), Some(c.id.as_str())),
        None => (None, None),
    };
    let rows = conn
        .prepare_cached(&format!(
            "SELECT {RUN_COLUMNS} FROM runs
             WHERE (?1 IS NULL OR status = ?1) AND (?2 IS NULL OR (created_ms, id) < (?2, ?3))
             ORDER BY created_ms DESC, id DESC LIMIT ?4"
        ))
        .and_then(|mut s| {
            let status = query.status.map(|s| s.as_str());
            let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
            s.query_map(params![status, after_ms, after_id, limit], run_from_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(|e| err("runs", e))?;
    with_values(conn, rows)
}

/// Writes a run and the values its record refers to in one transaction (one commit, and
/// no record without its values).
pub(super) fn write_run_with_values(
    conn: &Connection,
    run: &RunRecord,
    values: &run_values::RunValues,
    insert: bool,
) -> Result<(), StoreError> {
    let tx = conn.unchecked_transaction().map_err(|e| err("runs", e))?;
    write_run(&tx, run, insert, values)?;
    tx.commit().map_err(|e| err("runs", e))
}

/// Writes `run` (inserting it when `insert`), its output and state as `values` wrote
/// them, and the stored values they refer to.
pub(super) fn write_run(
    conn: &Connection,
    run: &RunRecord,
    insert: bool,
    values: &run_values::RunValues,
) -> Result<(), StoreError> {
    let sql = if insert {
        format!(
            "INSERT INTO runs ({RUN_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24)"
        )
    } else {
        format!(
            "INSERT OR REPLACE INTO runs ({RUN_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24)"
        )
    };
    values.insert_parts(conn, &run.id)?;
    let (output, output_refs) = values.output();
    let (state, state_refs) = values.state();
    conn.prepare_cached(&sql)
        .and_then(|mut s| {
            s.execute(params![
                run.id,
                run.flow_hash,
                run.flow_name,
                run.source,
                run.source_hash,
                run.dialect,
                run.input.to_string(),
                run.status.as_str(),
                output,
                state,
                json_col(run.error.as_ref()),
                json_col(run.waiting.as_ref()),
                serde_json::to_string(&run.usage).unwrap_or_default(),
                run.owner,
                run.created_ms,
                run.updated_ms,
                (!run.scopes.is_empty())
                    .then(|| serde_json::to_string(&run.scopes).unwrap_or_default()),
                json_col(run.view.as_ref()),
                json_col(run.settings.as_ref()),
                run.retries,
                run.flow_id,
                run.wake_ms.filter(|_| run.status == RunStatus::Paused),
                output_refs,
                state_refs,
            ])
        })
        .map(|_| ())
        .map_err(|e| match e {
            rusqlite::Error::SqliteFailure(f, _)
                if insert && f.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                StoreError::Conflict(format!("a run with id {} exists already", run.id))
            }
            e => err("runs", e),
        })
}

pub(super) fn get_run(conn: &Connection, id: &str) -> Result<Option<RunRecord>, StoreError> {
    let exact = conn
        .query_row(
            &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"),
            params![id],
            run_from_row,
        )
        .optional()
        .map_err(|e| err("runs", e))?;
    if exact.is_some() || id.len() < 4 {
        return Ok(with_values(conn, exact.into_iter().collect())?.pop());
    }
    // The ids that start with `id` sort between it and it followed by the last code
    // point: a range the primary key answers, case-sensitive, with no wildcards.
    let mut stmt = conn
        .prepare(&format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE id >= ?1 AND id < ?1 || char(1114111) LIMIT 2"
        ))
        .map_err(|e| err("runs", e))?;
    let found = stmt
        .query_map(params![id], run_from_row)
        .and_then(|rows| rows.collect())
        .map_err(|e| err("runs", e))?;
    let found = with_values(conn, found)?;
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.into_iter().next()),
        _ => Err(StoreError::Conflict(format!(
            "the id prefix `{id}` matches several runs; give more of it"
        ))),
    }
}

/// Compare-and-set on the run's status and owner, with the claim's entry, in one write
/// transaction: other processes' claims of the same run wait for the lock and then see
/// the winner's status.
pub(super) fn claim_run(conn: &Connection, claim: Claim) -> Result<Claimed, StoreError> {
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)
        .map_err(|e| err("claim", e))?;
    let Some(current) = get_run(&tx, &claim.run_id)? else {
        return Err(claim.missing());
    };
    if !claim.may_take(&current) {
        return Ok(Claimed::Lost(Box::new(current)));
    }
    tx.execute(
        "UPDATE runs SET status = 'running', owner = ?2, updated_ms = ?3, wake_ms = NULL WHERE id = ?1",
        params![current.id, claim.owner, claim.now_ms],
    )
    .map_err(|e| err("claim", e))?;
    if let Some(e) = &claim.entry {
        journal::insert(&tx, &current.id, &[e])?;
    }
    tx.commit().map_err(|e| err("claim commit", e))?;
    Ok(Claimed::Taken)
}

pub(super) fn run_stats(conn: &Connection) -> Result<RunStats, StoreError> {
    let mut stats = RunStats::default();
    let mut stmt = conn
        .prepare_cached(
            "SELECT status, count(*),
                    coalesce(sum(json_extract(usage, '$.input_tokens')), 0),
                    coalesce(sum(json_extract(usage, '$.output_tokens')), 0),
                    coalesce(sum(json_extract(usage, '$.cost_usd')), 0.0)
             FROM runs GROUP BY status",
        )
        .map_err(|e| err("stats", e))?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, f64>(4)?,
            ))
        })
        .map_err(|e| err("stats", e))?;
    for row in rows {
        let (status, n, input, output, cost) = row.map_err(|e| err("stats", e))?;
        if let Some(s) = RunStatus::parse(&status) {
            stats.runs.push((s, n as u64));
        }
        stats.usage.add(&Usage {
            input_tokens: input as u64,
            output_tokens: output as u64,
            cost_usd: cost,
        });
    }
    stats.steps = journal::result_count(conn)?;
    Ok(stats)
}
