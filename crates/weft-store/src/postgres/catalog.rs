//! What runs refer to: flows by hash, flow texts and their named versions, and scoped
//! state documents.

use super::pg_err;
use deadpool_postgres::{Client, GenericClient};
use tokio_postgres::Row;
use weft_core::ports::{Cursor, FlowSource, FlowVersion, ScopedChange, StoreError};

/// Advisory lock classes (the first half of a two-part key), so that saving versions of
/// a name and changing a scoped document serialize with their own kind only.
const VERSIONS_LOCK: i32 = 1;
const SCOPED_LOCK: i32 = 2;

pub(super) async fn put_flow(client: &Client, hash: &str, ir: &str) -> Result<(), StoreError> {
    client
        .execute(
            "INSERT INTO weft.flows (hash, ir) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            &[&hash, &ir],
        )
        .await
        .map(|_| ())
        .map_err(|e| pg_err("flows", e))
}

pub(super) async fn get_flow(client: &Client, hash: &str) -> Result<Option<String>, StoreError> {
    client
        .query_opt("SELECT ir FROM weft.flows WHERE hash = $1", &[&hash])
        .await
        .map(|r| r.map(|r| r.get(0)))
        .map_err(|e| pg_err("flows", e))
}

const SOURCE_COLUMNS: &str = "id, name, dialect, text, created_ms";

fn source_from_row(r: &Row) -> FlowSource {
    FlowSource {
        id: r.get(0),
        name: r.get(1),
        dialect: r.get(2),
        text: r.get(3),
        created_ms: r.get(4),
    }
}

pub(super) async fn put_source(client: &Client, source: &FlowSource) -> Result<(), StoreError> {
    client
        .execute(
            &format!(
                "INSERT INTO weft.sources ({SOURCE_COLUMNS}) VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT DO NOTHING"
            ),
            &[
                &source.id,
                &source.name,
                &source.dialect,
                &source.text,
                &source.created_ms,
            ],
        )
        .await
        .map(|_| ())
        .map_err(|e| pg_err("sources", e))
}

pub(super) async fn get_source(
    client: &Client,
    id: &str,
) -> Result<Option<FlowSource>, StoreError> {
    client
        .query_opt(
            &format!("SELECT {SOURCE_COLUMNS} FROM weft.sources WHERE id = $1"),
            &[&id],
        )
        .await
        .map(|r| r.as_ref().map(source_from_row))
        .map_err(|e| pg_err("sources", e))
}

pub(super) async fn list_sources(
    client: &Client,
    limit: usize,
    after: Option<&Cursor>,
) -> Result<Vec<FlowSource>, StoreError> {
    let (after_ms, after_id) = match after {
        Some(c) => (Some(c.created_ms), Some(c.id.as_str())),
        None => (None, None),
    };
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    client
        .query(
            &format!(
                "SELECT {SOURCE_COLUMNS} FROM weft.sources
                 WHERE $1::bigint IS NULL OR (created_ms, id) < ($1, $2::text)
                 ORDER BY created_ms DESC, id DESC LIMIT $3"
            ),
            &[&after_ms, &after_id, &limit],
        )
        .await
        .map(|rows| rows.iter().map(source_from_row).collect())
        .map_err(|e| pg_err("sources", e))
}

const VERSION_COLUMNS: &str = "name, version, flow_id, created_ms";

fn version_from_row(r: &Row) -> FlowVersion {
    let version: i32 = r.get(1);
    FlowVersion {
        name: r.get(0),
        version: u32::try_from(version).unwrap_or(0),
        flow_id: r.get(2),
        created_ms: r.get(3),
    }
}

/// Saves `flow_id` as the next version of `name` unless it is the latest already; saves
/// of one name take turns (an advisory lock on it), so no number is given twice.
pub(super) async fn save_version(
    client: &mut Client,
    name: &str,
    flow_id: &str,
    now_ms: i64,
) -> Result<FlowVersion, StoreError> {
    let tx = client
        .transaction()
        .await
        .map_err(|e| pg_err("flow_versions", e))?;
    tx.execute(
        "SELECT pg_advisory_xact_lock($1, hashtext($2))",
        &[&VERSIONS_LOCK, &name],
    )
    .await
    .map_err(|e| pg_err("flow_versions", e))?;
    if let Some(latest) = flow_version(&tx, name, None).await?
        && latest.flow_id == flow_id
    {
        return Ok(latest);
    }
    let saved = tx
        .query_one(
            &format!(
                "INSERT INTO weft.flow_versions ({VERSION_COLUMNS})
                 SELECT $1, COALESCE(MAX(version), 0) + 1, $2, $3
                 FROM weft.flow_versions WHERE name = $1
                 RETURNING {VERSION_COLUMNS}"
            ),
            &[&name, &flow_id, &now_ms],
        )
        .await
        .map_err(|e| pg_err("flow_versions", e))?;
    tx.commit().await.map_err(|e| pg_err("flow_versions", e))?;
    Ok(version_from_row(&saved))
}

pub(super) async fn flow_version(
    client: &impl GenericClient,
    name: &str,
    version: Option<u32>,
) -> Result<Option<FlowVersion>, StoreError> {
    let version = version.map(|v| i32::try_from(v).unwrap_or(i32::MAX));
    client
        .query_opt(
            &format!(
                "SELECT {VERSION_COLUMNS} FROM weft.flow_versions
                 WHERE name = $1 AND ($2::integer IS NULL OR version = $2)
                 ORDER BY version DESC LIMIT 1"
            ),
            &[&name, &version],
        )
        .await
        .map(|r| r.as_ref().map(version_from_row))
        .map_err(|e| pg_err("flow_versions", e))
}

pub(super) async fn named_flows(client: &Client) -> Result<Vec<FlowVersion>, StoreError> {
    client
        .query(
            &format!(
                "SELECT DISTINCT ON (name) {VERSION_COLUMNS} FROM weft.flow_versions
                 ORDER BY name, version DESC"
            ),
            &[],
        )
        .await
        .map(|rows| rows.iter().map(version_from_row).collect())
        .map_err(|e| pg_err("flow_versions", e))
}

async fn read_scoped(
    client: &impl GenericClient,
    key: &str,
) -> Result<Option<serde_json::Value>, StoreError> {
    let row = client
        .query_opt("SELECT value FROM weft.scoped WHERE key = $1", &[&key])
        .await
        .map_err(|e| pg_err("scoped state", e))?;
    row.map(|r| {
        serde_json::from_str(r.get(0)).map_err(|e| {
            StoreError::Corrupt(format!(
                "the scoped state `{key}` does not read as JSON: {e}"
            ))
        })
    })
    .transpose()
}

pub(super) async fn scoped_state(
    client: &Client,
    key: &str,
) -> Result<Option<serde_json::Value>, StoreError> {
    read_scoped(client, key).await
}

/// Applies `changes` to the document `key` while holding its advisory lock, so that
/// concurrent changes (from any process) apply one after another.
pub(super) async fn change_scoped_state(
    client: &mut Client,
    key: &str,
    changes: &[ScopedChange],
) -> Result<serde_json::Value, StoreError> {
    let tx = client
        .transaction()
        .await
        .map_err(|e| pg_err("scoped state", e))?;
    tx.execute(
        "SELECT pg_advisory_xact_lock($1, hashtext($2))",
        &[&SCOPED_LOCK, &key],
    )
    .await
    .map_err(|e| pg_err("scoped state", e))?;
    let doc = read_scoped(&tx, key).await?;
    let next = ScopedChange::apply_all(doc.as_ref(), changes)
        .map_err(|e| StoreError::Conflict(format!("scoped state `{key}`: {e}")))?;
    tx.execute(
        "INSERT INTO weft.scoped (key, value) VALUES ($1, $2)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        &[&key, &next.to_string()],
    )
    .await
    .map_err(|e| pg_err("scoped state", e))?;
    tx.commit().await.map_err(|e| pg_err("scoped state", e))?;
    Ok(next)
}
