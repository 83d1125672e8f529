//! API keys in PostgreSQL: a row per key in `weft.api_keys`, found by the hash of its
//! secret.

use super::{PostgresStore, pg_err};
use crate::key_row::{COLUMNS, KeyRow, key_exists, scopes_text};
use async_trait::async_trait;
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use weft_core::ports::{ApiKey, KeyStore, StoreError};

fn key_from_row(r: &Row) -> Result<ApiKey, StoreError> {
    let column = super::unreadable("a key's row");
    KeyRow {
        id: r.try_get("id").map_err(column)?,
        name: r.try_get("name").map_err(column)?,
        tenant: r.try_get("tenant").map_err(column)?,
        scopes: r.try_get("scopes").map_err(column)?,
        hash: r.try_get("hash").map_err(column)?,
        created_ms: r.try_get("created_ms").map_err(column)?,
        last_used_ms: r.try_get("last_used_ms").map_err(column)?,
        expires_ms: r.try_get("expires_ms").map_err(column)?,
        revoked_ms: r.try_get("revoked_ms").map_err(column)?,
    }
    .into_key()
}

#[async_trait]
impl KeyStore for PostgresStore {
    async fn put_key(&self, key: &ApiKey) -> Result<(), StoreError> {
        let written = self
            .client()
            .await?
            .execute(
                &format!(
                    "INSERT INTO weft.api_keys ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
                ),
                &[
                    &key.id,
                    &key.name,
                    &key.tenant,
                    &scopes_text(key),
                    &key.hash,
                    &key.created_ms,
                    &key.last_used_ms,
                    &key.expires_ms,
                    &key.revoked_ms,
                ],
            )
            .await;
        match written {
            Ok(_) => Ok(()),
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => Err(key_exists(key)),
            Err(e) => Err(pg_err("keys", e)),
        }
    }
    async fn key_by_hash(&self, hash: &str) -> Result<Option<ApiKey>, StoreError> {
        self.client()
            .await?
            .query_opt(
                &format!("SELECT {COLUMNS} FROM weft.api_keys WHERE hash = $1"),
                &[&hash],
            )
            .await
            .map_err(|e| pg_err("keys", e))?
            .as_ref()
            .map(key_from_row)
            .transpose()
    }
    async fn keys(&self) -> Result<Vec<ApiKey>, StoreError> {
        self.client()
            .await?
            .query(
                &format!("SELECT {COLUMNS} FROM weft.api_keys ORDER BY created_ms, id"),
                &[],
            )
            .await
            .map_err(|e| pg_err("keys", e))?
            .iter()
            .map(key_from_row)
            .collect()
    }
    async fn revoke_key(&self, id: &str, now_ms: i64) -> Result<bool, StoreError> {
        self.client()
            .await?
            .execute(
                "UPDATE weft.api_keys SET revoked_ms = coalesce(revoked_ms, $2) WHERE id = $1",
                &[&id, &now_ms],
            )
            .await
            .map(|n| n > 0)
            .map_err(|e| pg_err("keys", e))
    }
    async fn touch_key(&self, id: &str, now_ms: i64) -> Result<(), StoreError> {
        self.client()
            .await?
            .execute(
                "UPDATE weft.api_keys SET last_used_ms = $2 WHERE id = $1",
                &[&id, &now_ms],
            )
            .await
            .map(|_| ())
            .map_err(|e| pg_err("keys", e))
    }
}
