//! The audit log in the SQLite file: a row per entry, numbered as appended.

use super::{SqliteStore, err};
use async_trait::async_trait;
use rusqlite::{Connection, Row, params};
use weft_core::ports::{AuditEntry, AuditQuery, AuditStore, StoreError};

/// The audit table (created on open, as every table is).
pub(super) const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS audit (
         seq INTEGER PRIMARY KEY AUTOINCREMENT, at_ms INTEGER NOT NULL, principal TEXT NOT NULL,
         principal_name TEXT NOT NULL, tenant TEXT NOT NULL, action TEXT NOT NULL,
         object TEXT NOT NULL, outcome INTEGER NOT NULL, request_id TEXT NOT NULL);";

const COLUMNS: &str =
    "seq, at_ms, principal, principal_name, tenant, action, object, outcome, request_id";

fn entry_from_row(r: &Row<'_>) -> rusqlite::Result<AuditEntry> {
    Ok(AuditEntry {
        seq: r.get("seq")?,
        at_ms: r.get("at_ms")?,
        principal: r.get("principal")?,
        principal_name: r.get("principal_name")?,
        tenant: r.get("tenant")?,
        action: r.get("action")?,
        object: r.get("object")?,
        outcome: r.get("outcome")?,
        request_id: r.get("request_id")?,
    })
}

fn append(conn: &Connection, entries: &[AuditEntry]) -> Result<(), StoreError> {
    let tx = conn.unchecked_transaction().map_err(|e| err("audit", e))?;
    {
        let mut stmt = tx
            .prepare_cached(
                "INSERT INTO audit (at_ms, principal, principal_name, tenant, action, object, outcome, request_id)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .map_err(|e| err("audit", e))?;
        for e in entries {
            stmt.execute(params![
                e.at_ms,
                e.principal,
                e.principal_name,
                e.tenant,
                e.action,
                e.object,
                e.outcome,
                e.request_id
            ])
            .map_err(|e| err("audit", e))?;
        }
    }
    tx.commit().map_err(|e| err("audit", e))
}

fn read(conn: &Connection, query: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError> {
    let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM audit
             WHERE (?1 IS NULL OR seq < ?1) AND (?2 IS NULL OR tenant = ?2)
             ORDER BY seq DESC LIMIT ?3"
        ))
        .map_err(|e| err("audit", e))?;
    stmt.query_map(params![query.before, query.tenant, limit], entry_from_row)
        .and_then(|rows| rows.collect())
        .map_err(|e| err("audit", e))
}

#[async_trait]
impl AuditStore for SqliteStore {
    async fn append_audit(&self, entries: &[AuditEntry]) -> Result<(), StoreError> {
        let entries = entries.to_vec();
        self.with(move |c| append(c, &entries)).await
    }
    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError> {
        let query = query.clone();
        self.with(move |c| read(c, &query)).await
    }
}
