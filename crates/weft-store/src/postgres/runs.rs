//! `weft.runs`: run records, their listing, claims and totals.

use super::pg_err;
use deadpool_postgres::{Client, GenericClient};
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use weft_core::ports::{Claim, Claimed, RunQuery, RunRecord, RunStats, RunStatus, StoreError};
use weft_core::usage::Usage;

const COLUMNS: &str = "id, flow_hash, flow_name, source, source_hash, dialect, input, status, output, state, error, waiting, usage, owner, created_ms, updated_ms, scopes, view, settings, retries, flow_id";

fn json_col(v: &Option<serde_json::Value>) -> Option<String> {
    v.as_ref().map(|v| v.to_string())
}

/// A JSON column of run `id`, read back.
fn parse_col(
    id: &str,
    column: &str,
    text: Option<&str>,
) -> Result<Option<serde_json::Value>, StoreError> {
    text.map(|t| {
        serde_json::from_str(t).map_err(|e| {
            StoreError::Corrupt(format!(
                "the {column} of run {id} does not read as JSON: {e}"
            ))
        })
    })
    .transpose()
}

fn from_row(r: &Row) -> Result<RunRecord, StoreError> {
    let id: String = r.get(0);
    let status: &str = r.get(7);
    let usage: &str = r.get(12);
    let retries: i32 = r.get(19);
    Ok(RunRecord {
        flow_hash: r.get(1),
        flow_name: r.get(2),
        source: r.get(3),
        source_hash: r.get(4),
        dialect: r.get(5),
        input: parse_col(&id, "input", r.get(6))?.unwrap_or(serde_json::Value::Null),
        status: RunStatus::parse(status).unwrap_or(RunStatus::Failed),
        output: parse_col(&id, "output", r.get(8))?,
        state: parse_col(&id, "state", r.get(9))?,
        error: parse_col(&id, "error", r.get(10))?,
        waiting: parse_col(&id, "waiting", r.get(11))?,
        usage: serde_json::from_str::<Usage>(usage).unwrap_or_default(),
        owner: r.get(13),
        created_ms: r.get(14),
        updated_ms: r.get(15),
        scopes: parse_col(&id, "scopes", r.get(16))?
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default(),
        view: parse_col(&id, "view", r.get(17))?,
        settings: parse_col(&id, "settings", r.get(18))?,
        retries: u32::try_from(retries).unwrap_or(0),
        flow_id: r.get(20),
        id,
    })
}

/// Inserts run `run` (`insert`: a second run with its id is a conflict) or replaces it.
pub(super) async fn write(
    client: &Client,
    run: &RunRecord,
    insert: bool,
) -> Result<(), StoreError> {
    let values = "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21";
    let sql = if insert {
        format!("INSERT INTO weft.runs ({COLUMNS}) VALUES ({values})")
    } else {
        let updates = COLUMNS
            .split(", ")
            .skip(1)
            .map(|c| format!("{c} = excluded.{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "INSERT INTO weft.runs ({COLUMNS}) VALUES ({values}) ON CONFLICT (id) DO UPDATE SET {updates}"
        )
    };
    let statement = client
        .prepare_cached(&sql)
        .await
        .map_err(|e| pg_err("runs", e))?;
    let scopes =
        (!run.scopes.is_empty()).then(|| serde_json::to_string(&run.scopes).unwrap_or_default());
    let retries = i32::try_from(run.retries).unwrap_or(i32::MAX);
    client
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
                &json_col(&run.output),
                &json_col(&run.state),
                &json_col(&run.error),
                &json_col(&run.waiting),
                &serde_json::to_string(&run.usage).unwrap_or_default(),
                &run.owner,
                &run.created_ms,
                &run.updated_ms,
                &scopes,
                &json_col(&run.view),
                &json_col(&run.settings),
                &retries,
                &run.flow_id,
            ],
        )
        .await
        .map(|_| ())
        .map_err(|e| match e.code() {
            Some(code) if insert && *code == SqlState::UNIQUE_VIOLATION => {
                StoreError::Conflict(format!("a run with id {} exists already", run.id))
            }
            _ => pg_err("runs", e),
        })
}

/// Run `id`, or the one run whose id starts with `id` (4 characters or more).
pub(super) async fn get(
    client: &impl GenericClient,
    id: &str,
) -> Result<Option<RunRecord>, StoreError> {
    let exact = client
        .query_opt(
            &format!("SELECT {COLUMNS} FROM weft.runs WHERE id = $1"),
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
                "SELECT {COLUMNS} FROM weft.runs WHERE id >= $1 AND id < $1 || chr(1114111) LIMIT 2"
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
            "SELECT {COLUMNS} FROM weft.runs
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
/// winner's status.
pub(super) async fn claim(client: &mut Client, claim: Claim) -> Result<Claimed, StoreError> {
    let tx = client.transaction().await.map_err(|e| pg_err("claim", e))?;
    let Some(found) = get(&tx, &claim.run_id).await? else {
        return Err(StoreError::Conflict(format!(
            "no run with id `{}`",
            claim.run_id
        )));
    };
    let locked = tx
        .query_one(
            &format!("SELECT {COLUMNS} FROM weft.runs WHERE id = $1 FOR UPDATE"),
            &[&found.id],
        )
        .await
        .map_err(|e| pg_err("claim", e))?;
    let current = from_row(&locked)?;
    let owner_ok = claim.owner_was.as_ref().is_none_or(|o| *o == current.owner);
    if !claim.from.contains(&current.status) || !owner_ok {
        return Ok(Claimed::Lost(Box::new(current)));
    }
    tx.execute(
        "UPDATE weft.runs SET status = 'running', owner = $2, updated_ms = $3 WHERE id = $1",
        &[&current.id, &claim.owner, &claim.now_ms],
    )
    .await
    .map_err(|e| pg_err("claim", e))?;
    if let Some(entry) = &claim.entry {
        super::writer::insert_entry(&tx, &current.id, entry).await?;
    }
    tx.commit().await.map_err(|e| pg_err("claim commit", e))?;
    Ok(Claimed::Taken)
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
