//! `scoped`: the state of sessions, users and projects, one JSON document a key, changed
//! atomically.

use super::err;
use rusqlite::{Connection, OptionalExtension, params};
use weft_core::ports::{ScopedChange, StoreError};

/// The document kept under `key`.
pub(super) fn scoped(
    conn: &Connection,
    key: &str,
) -> Result<Option<serde_json::Value>, StoreError> {
    let text: Option<String> = conn
        .query_row(
            "SELECT value FROM scoped WHERE key = ?1",
            params![key],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| err("scoped state", e))?;
    text.map(|t| serde_json::from_str(&t).map_err(|e| err("scoped state", e)))
        .transpose()
}

/// Applies `changes` to the document under `key` and returns it. The writer thread serves
/// one request at a time: read, change and write are atomic with respect to every other
/// change.
pub(super) fn change(
    conn: &Connection,
    key: &str,
    changes: &[ScopedChange],
) -> Result<serde_json::Value, StoreError> {
    let doc = scoped(conn, key)?;
    let next = ScopedChange::apply_all(doc.as_ref(), changes)
        .map_err(|e| StoreError::Conflict(format!("scoped state `{key}`: {e}")))?;
    conn.execute(
        "INSERT OR REPLACE INTO scoped (key, value) VALUES (?1, ?2)",
        params![key, next.to_string()],
    )
    .map_err(|e| err("scoped state", e))?;
    Ok(next)
}
