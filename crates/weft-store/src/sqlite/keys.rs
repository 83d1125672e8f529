//! API keys in the SQLite file: a row per key, found by the hash of its secret.

use super::{SqliteStore, err};
use crate::key_row::{COLUMNS, KeyRow, key_exists, scopes_text};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Row, params};
use weft_core::ports::{ApiKey, KeyStore, StoreError};

/// The keys table (created on open, as every table is).
pub(super) const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS api_keys (
         id TEXT PRIMARY KEY, name TEXT NOT NULL, tenant TEXT NOT NULL, scopes TEXT NOT NULL,
         hash TEXT NOT NULL UNIQUE, created_ms INTEGER NOT NULL, last_used_ms INTEGER,
         expires_ms INTEGER, revoked_ms INTEGER);";

fn key_from_row(r: &Row<'_>) -> rusqlite::Result<KeyRow> {
    Ok(KeyRow {
        id: r.get("id")?,
        name: r.get("name")?,
        tenant: r.get("tenant")?,
        scopes: r.get("scopes")?,
        hash: r.get("hash")?,
        created_ms: r.get("created_ms")?,
        last_used_ms: r.get("last_used_ms")?,
        expires_ms: r.get("expires_ms")?,
        revoked_ms: r.get("revoked_ms")?,
    })
}

fn put(conn: &Connection, key: &ApiKey) -> Result<(), StoreError> {
    conn.execute(
        &format!("INSERT INTO api_keys ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"),
        params![
            key.id,
            key.name,
            key.tenant,
            scopes_text(key),
            key.hash,
            key.created_ms,
            key.last_used_ms,
            key.expires_ms,
            key.revoked_ms
        ],
    )
    .map(|_| ())
    .map_err(|e| match e {
        rusqlite::Error::SqliteFailure(f, _)
            if f.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            key_exists(key)
        }
        e => err("keys", e),
    })
}

fn by_hash(conn: &Connection, hash: &str) -> Result<Option<ApiKey>, StoreError> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM api_keys WHERE hash = ?1"),
        params![hash],
        key_from_row,
    )
    .optional()
    .map_err(|e| err("keys", e))?
    .map(KeyRow::into_key)
    .transpose()
}

fn all(conn: &Connection) -> Result<Vec<ApiKey>, StoreError> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT {COLUMNS} FROM api_keys ORDER BY created_ms, id"
        ))
        .map_err(|e| err("keys", e))?;
    let rows: Vec<KeyRow> = stmt
        .query_map([], key_from_row)
        .and_then(|rows| rows.collect())
        .map_err(|e| err("keys", e))?;
    rows.into_iter().map(KeyRow::into_key).collect()
}

#[async_trait]
impl KeyStore for SqliteStore {
    async fn put_key(&self, key: &ApiKey) -> Result<(), StoreError> {
        let key = key.clone();
        self.with(move |c| put(c, &key)).await
    }
    async fn key_by_hash(&self, hash: &str) -> Result<Option<ApiKey>, StoreError> {
        let hash = hash.to_owned();
        self.with(move |c| by_hash(c, &hash)).await
    }
    async fn keys(&self) -> Result<Vec<ApiKey>, StoreError> {
        self.with(all).await
    }
    async fn revoke_key(&self, id: &str, now_ms: i64) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.with(move |c| {
            c.execute(
                "UPDATE api_keys SET revoked_ms = coalesce(revoked_ms, ?2) WHERE id = ?1",
                params![id, now_ms],
            )
            .map(|n| n > 0)
            .map_err(|e| err("keys", e))
        })
        .await
    }
    async fn touch_key(&self, id: &str, now_ms: i64) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.with(move |c| {
            c.execute(
                "UPDATE api_keys SET last_used_ms = ?2 WHERE id = ?1",
                params![id, now_ms],
            )
            .map(|_| ())
            .map_err(|e| err("keys", e))
        })
        .await
    }
}
