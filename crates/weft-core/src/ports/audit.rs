//! The audit port: an append-only log of what was asked of a server and what it
//! answered, for every request that changes something and every one it refused.

use crate::ports::store::StoreError;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// One request, as the audit log keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Its place in the log, given by the store when it is appended (`0` before).
    pub seq: i64,
    /// When the server answered, Unix milliseconds.
    pub at_ms: i64,
    /// The principal's id (a key's id, `token`, `local`), or `anonymous` when the
    /// request was not let in.
    pub principal: String,
    /// The principal's name, for people.
    pub principal_name: String,
    /// The tenant the request acted in.
    pub tenant: String,
    /// The route: its method and path template (`POST /v1/runs/{id}/approve`).
    pub action: String,
    /// The path it named (`/v1/runs/0199.../approve`).
    pub object: String,
    /// The status the server answered.
    pub outcome: u16,
    /// The request's id, as the answer's `x-request-id` header gave it.
    pub request_id: String,
}

/// Which entries to read: newest first, up to `limit`, before `before` when given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// At most this many.
    pub limit: usize,
    /// Only entries whose `seq` is lower (the previous page's last).
    pub before: Option<i64>,
    /// Only this tenant's, when given.
    pub tenant: Option<String>,
}

/// The store's audit log.
#[async_trait]
pub trait AuditStore: Send + Sync {
    /// Appends `entries` in order (their `seq` is given by the store).
    async fn append_audit(&self, entries: &[AuditEntry]) -> Result<(), StoreError>;
    /// The entries `query` asks for, newest first.
    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError>;
}
