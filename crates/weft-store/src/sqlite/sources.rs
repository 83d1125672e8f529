//! The `sources` table: flow texts by id.

use super::err;
use rusqlite::{Connection, OptionalExtension, params};
use weft_core::ports::{Cursor, FlowSource, FlowVersion, StoreError};

const COLUMNS: &str = "id, name, dialect, text, created_ms";

fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<FlowSource> {
    Ok(FlowSource {
        id: r.get(0)?,
        name: r.get(1)?,
        dialect: r.get(2)?,
        text: r.get(3)?,
        created_ms: r.get(4)?,
    })
}

/// Stores `source` unless its id is stored already.
pub(super) fn put(conn: &Connection, source: &FlowSource) -> Result<(), StoreError> {
    conn.prepare_cached(&format!(
        "INSERT OR IGNORE INTO sources ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5)"
    ))
    .and_then(|mut s| {
        s.execute(params![
            source.id,
            source.name,
            source.dialect,
            source.text,
            source.created_ms
        ])
    })
    .map(|_| ())
    .map_err(|e| err("sources", e))
}

pub(super) fn get(conn: &Connection, id: &str) -> Result<Option<FlowSource>, StoreError> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM sources WHERE id = ?1"))
        .and_then(|mut s| s.query_row(params![id], from_row).optional())
        .map_err(|e| err("sources", e))
}

/// Newest first, after `after` when given.
pub(super) fn list(
    conn: &Connection,
    limit: usize,
    after: Option<&Cursor>,
) -> Result<Vec<FlowSource>, StoreError> {
    let (after_ms, after_id) = match after {
        Some(c) => (Some(c.created_ms), Some(c.id.as_str())),
        None => (None, None),
    };
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM sources WHERE ?1 IS NULL OR (created_ms, id) < (?1, ?2)
         ORDER BY created_ms DESC, id DESC LIMIT ?3"
    ))
    .and_then(|mut s| {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        s.query_map(params![after_ms, after_id, limit], from_row)?
            .collect::<rusqlite::Result<Vec<_>>>()
    })
    .map_err(|e| err("sources", e))
}

const VERSION_COLUMNS: &str = "name, version, flow_id, created_ms";

fn version_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<FlowVersion> {
    Ok(FlowVersion {
        name: r.get(0)?,
        version: r.get(1)?,
        flow_id: r.get(2)?,
        created_ms: r.get(3)?,
    })
}

/// The next version of `name`, unless `flow_id` is its latest; on the one writer
/// connection, so two saves never share a number.
pub(super) fn save_version(
    conn: &Connection,
    name: &str,
    flow_id: &str,
    now_ms: i64,
) -> Result<FlowVersion, StoreError> {
    if let Some(latest) = version(conn, name, None)?
        && latest.flow_id == flow_id
    {
        return Ok(latest);
    }
    conn.prepare_cached(&format!(
        "INSERT INTO flow_versions ({VERSION_COLUMNS})
         SELECT ?1, COALESCE(MAX(version), 0) + 1, ?2, ?3 FROM flow_versions WHERE name = ?1
         RETURNING {VERSION_COLUMNS}"
    ))
    .and_then(|mut s| s.query_row(params![name, flow_id, now_ms], version_from_row))
    .map_err(|e| err("flow_versions", e))
}

/// Version `version` of `name`, or its latest.
pub(super) fn version(
    conn: &Connection,
    name: &str,
    version: Option<u32>,
) -> Result<Option<FlowVersion>, StoreError> {
    conn.prepare_cached(&format!(
        "SELECT {VERSION_COLUMNS} FROM flow_versions
         WHERE name = ?1 AND (?2 IS NULL OR version = ?2) ORDER BY version DESC LIMIT 1"
    ))
    .and_then(|mut s| {
        s.query_row(params![name, version], version_from_row)
            .optional()
    })
    .map_err(|e| err("flow_versions", e))
}

/// The latest version of every name.
pub(super) fn named(conn: &Connection) -> Result<Vec<FlowVersion>, StoreError> {
    conn.prepare_cached(&format!(
        "SELECT {VERSION_COLUMNS} FROM flow_versions v
         WHERE version = (SELECT MAX(version) FROM flow_versions WHERE name = v.name)
         ORDER BY name"
    ))
    .and_then(|mut s| {
        s.query_map([], version_from_row)?
            .collect::<rusqlite::Result<Vec<_>>>()
    })
    .map_err(|e| err("flow_versions", e))
}

/// Stores a prepared flow's IR under its hash (once: the same hash is the same flow).
pub(super) fn put_flow(conn: &Connection, hash: &str, ir: &str) -> Result<(), StoreError> {
    conn.execute(
        "INSERT OR IGNORE INTO flows (hash, ir) VALUES (?1, ?2)",
        params![hash, ir],
    )
    .map(|_| ())
    .map_err(|e| err("flows", e))
}

/// The IR stored under `hash`.
pub(super) fn get_flow(conn: &Connection, hash: &str) -> Result<Option<String>, StoreError> {
    conn.query_row("SELECT ir FROM flows WHERE hash = ?1", params![hash], |r| {
        r.get(0)
    })
    .optional()
    .map_err(|e| err("flows", e))
}
