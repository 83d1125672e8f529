//! An API key as the SQL stores keep it: one row, its scopes a JSON list of their names.
//! Read back here once for every SQL store; a scope no Weft writes is an error naming
//! the key, never dropped.

use weft_core::ports::{ApiKey, Scope, StoreError};

/// The columns of a key's table, in the order every SQL store reads them.
pub(crate) const COLUMNS: &str =
    "id, name, tenant, scopes, hash, created_ms, last_used_ms, expires_ms, revoked_ms";

/// The columns of a key's row, as read.
pub(crate) struct KeyRow {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) tenant: String,
    pub(crate) scopes: String,
    pub(crate) hash: String,
    pub(crate) created_ms: i64,
    pub(crate) last_used_ms: Option<i64>,
    pub(crate) expires_ms: Option<i64>,
    pub(crate) revoked_ms: Option<i64>,
}

impl KeyRow {
    /// The key this row holds.
    pub(crate) fn into_key(self) -> Result<ApiKey, StoreError> {
        let names: Vec<String> = serde_json::from_str(&self.scopes).map_err(|e| {
            StoreError::Corrupt(format!(
                "the scopes of key {} do not read back: {e}",
                self.id
            ))
        })?;
        let scopes = names
            .iter()
            .map(|n| {
                Scope::parse(n).ok_or_else(|| {
                    StoreError::Corrupt(format!(
                        "key {} has the scope `{n}`, which Weft does not know",
                        self.id
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ApiKey {
            id: self.id,
            name: self.name,
            tenant: self.tenant,
            scopes,
            hash: self.hash,
            created_ms: self.created_ms,
            last_used_ms: self.last_used_ms,
            expires_ms: self.expires_ms,
            revoked_ms: self.revoked_ms,
        })
    }
}

/// `key`'s scopes as the text its row keeps.
pub(crate) fn scopes_text(key: &ApiKey) -> String {
    serde_json::to_string(&key.scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>())
        .unwrap_or_else(|_| "[]".to_owned())
}

/// The error of storing a key whose id or hash another key has.
pub(crate) fn key_exists(key: &ApiKey) -> StoreError {
    StoreError::Conflict(format!(
        "a key with id {} (or its secret) exists already",
        key.id
    ))
}
