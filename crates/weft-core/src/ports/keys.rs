//! The key port: API keys a server accepts, each naming its tenant and its scopes. A
//! store keeps a key's hash, never its secret: the secret is shown once, when the key
//! is made, and a request's key is found by the hash of what it carries.

use crate::ports::store::StoreError;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// What a key (or any principal) may do. `admin` is every other scope within its
/// tenant, and the keys of its tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Scope {
    /// Read stored flows.
    #[serde(rename = "flows:read")]
    FlowsRead,
    /// Store flows and their versions.
    #[serde(rename = "flows:write")]
    FlowsWrite,
    /// Read runs, their steps and events.
    #[serde(rename = "runs:read")]
    RunsRead,
    /// Start, cancel, resume and retry runs.
    #[serde(rename = "runs:write")]
    RunsWrite,
    /// Answer approvals.
    #[serde(rename = "approvals:write")]
    ApprovalsWrite,
    /// Add, change, trigger and delete schedules.
    #[serde(rename = "schedules:write")]
    SchedulesWrite,
    /// Add and delete webhooks.
    #[serde(rename = "hooks:write")]
    HooksWrite,
    /// Read the audit log.
    #[serde(rename = "audit:read")]
    AuditRead,
    /// Everything within the tenant.
    #[serde(rename = "admin")]
    Admin,
}

impl Scope {
    /// Every scope, in the order people read them.
    pub const ALL: [Scope; 9] = [
        Scope::FlowsRead,
        Scope::FlowsWrite,
        Scope::RunsRead,
        Scope::RunsWrite,
        Scope::ApprovalsWrite,
        Scope::SchedulesWrite,
        Scope::HooksWrite,
        Scope::AuditRead,
        Scope::Admin,
    ];

    /// The scope's name, as keys and errors write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::FlowsRead => "flows:read",
            Scope::FlowsWrite => "flows:write",
            Scope::RunsRead => "runs:read",
            Scope::RunsWrite => "runs:write",
            Scope::ApprovalsWrite => "approvals:write",
            Scope::SchedulesWrite => "schedules:write",
            Scope::HooksWrite => "hooks:write",
            Scope::AuditRead => "audit:read",
            Scope::Admin => "admin",
        }
    }

    /// The scope named `name`.
    pub fn parse(name: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Whether holding `held` grants this scope.
    pub fn granted_by(self, held: &[Scope]) -> bool {
        held.contains(&Scope::Admin) || held.contains(&self)
    }
}

/// An API key as the store keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiKey {
    /// Its id, shown in lists and audit entries (not a secret).
    pub id: String,
    /// What its maker called it.
    pub name: String,
    /// The tenant whose objects it reaches.
    pub tenant: String,
    /// What it may do there.
    pub scopes: Vec<Scope>,
    /// The SHA-256 of its secret, hex: how a request's key is found.
    pub hash: String,
    /// When it was made, Unix milliseconds.
    pub created_ms: i64,
    /// When a request last carried it (kept coarsely: not every request writes it).
    pub last_used_ms: Option<i64>,
    /// When it stops being accepted.
    pub expires_ms: Option<i64>,
    /// When it was revoked.
    pub revoked_ms: Option<i64>,
}

impl ApiKey {
    /// Whether a request carrying this key at `now_ms` is let in.
    pub fn usable_at(&self, now_ms: i64) -> bool {
        self.revoked_ms.is_none() && self.expires_ms.is_none_or(|t| now_ms < t)
    }
}

/// The store's API keys.
#[async_trait]
pub trait KeyStore: Send + Sync {
    /// Stores a new key (its id and hash are new: a clash is a conflict).
    async fn put_key(&self, key: &ApiKey) -> Result<(), StoreError>;
    /// The key whose secret hashes to `hash`, revoked or not.
    async fn key_by_hash(&self, hash: &str) -> Result<Option<ApiKey>, StoreError>;
    /// Every key, oldest first.
    async fn keys(&self) -> Result<Vec<ApiKey>, StoreError>;
    /// Revokes key `id` as of `now_ms`; `false` when there is no such key.
    async fn revoke_key(&self, id: &str, now_ms: i64) -> Result<bool, StoreError>;
    /// Records that key `id` was used at `now_ms`.
    async fn touch_key(&self, id: &str, now_ms: i64) -> Result<(), StoreError>;
}
