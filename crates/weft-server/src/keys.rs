//! API keys: made with a secret shown once (`weft keys create`, `POST /v1/keys`), kept
//! in the store as the SHA-256 of that secret, and found again by it on each request.
//!
//! A server reads a key from the store once and keeps it for [`KEEP`]: a known key
//! costs no database read per request, and a revoked key stops working within that
//! time on every server. Whether the store holds any key at all is kept the same way.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use weft_core::ports::{ApiKey, Scope, Store, StoreError};

/// How long a server trusts what it read about a key (and whether keys exist).
pub const KEEP: Duration = Duration::from_secs(5);

/// How often a key's last use is written (per key, per server).
const TOUCH_EVERY: Duration = Duration::from_secs(60);

/// The prefix of every secret: tells a key from a token in a log or a leak scanner.
const SECRET_PREFIX: &str = "weft_";

/// Now, in Unix milliseconds.
pub fn now_ms() -> i64 {
    weft_core::event::now_ms() as i64
}

/// The SHA-256 of `secret`, hex: what the store keeps. A key's secret holds 160
/// random bits, so a fast hash suffices (nothing to guess from it).
pub fn hash_secret(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.trim().as_bytes()))
}

/// What a new key is to be.
#[derive(Debug, Clone)]
pub struct NewKey {
    /// What to call it (shown in lists, audit entries and approvals it signs).
    pub name: String,
    /// The tenant it reaches.
    pub tenant: String,
    /// What it may do there.
    pub scopes: Vec<Scope>,
    /// How long it lasts, when it does not last until revoked.
    pub expires_in: Option<Duration>,
}

/// Why a key cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The request names no scope, or an unknown one, or a tenant keys cannot have yet.
    #[error("{0}")]
    Invalid(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Reads scope names (`runs:read`, ...), refusing an unknown one with the known ones.
pub fn parse_scopes<S: AsRef<str>>(names: &[S]) -> Result<Vec<Scope>, KeyError> {
    if names.is_empty() {
        return Err(KeyError::Invalid(format!(
            "a key needs at least one scope: {}",
            known_scopes()
        )));
    }
    let mut scopes = Vec::new();
    for name in names {
        let name = name.as_ref().trim();
        let scope = Scope::parse(name).ok_or_else(|| {
            KeyError::Invalid(format!(
                "`{name}` is not a scope; the scopes are {}",
                known_scopes()
            ))
        })?;
        if !scopes.contains(&scope) {
            scopes.push(scope);
        }
    }
    Ok(scopes)
}

fn known_scopes() -> String {
    Scope::ALL.map(Scope::as_str).join(", ")
}

/// Makes a key and stores it; the key and its secret, which nothing keeps.
pub async fn create(store: &dyn Store, new: NewKey) -> Result<(ApiKey, String), KeyError> {
    let keys = store
        .keys()
        .ok_or_else(|| KeyError::Invalid("this store keeps no API keys".into()))?;
    if new.tenant != crate::auth::DEFAULT_TENANT {
        // A key of another tenant would reach every object: objects do not belong to
        // tenants yet, so such a key is refused rather than made too strong.
        return Err(KeyError::Invalid(format!(
            "tenant `{}`: keys are for tenant `default` until runs and flows belong to tenants (docs/security.md)",
            new.tenant
        )));
    }
    if new.name.trim().is_empty() {
        return Err(KeyError::Invalid("a key's name is not empty".into()));
    }
    let secret = format!("{SECRET_PREFIX}{}", hex::encode(rand::random::<[u8; 20]>()));
    let now = now_ms();
    let key = ApiKey {
        id: format!("key_{}", hex::encode(rand::random::<[u8; 6]>())),
        name: new.name.trim().to_owned(),
        tenant: new.tenant,
        scopes: new.scopes,
        hash: hash_secret(&secret),
        created_ms: now,
        last_used_ms: None,
        expires_ms: new
            .expires_in
            .map(|d| now.saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))),
        revoked_ms: None,
    };
    keys.put_key(&key).await?;
    Ok((key, secret))
}

/// A key as lists show it: everything but its hash.
pub fn describe(key: &ApiKey) -> serde_json::Value {
    serde_json::json!({
        "id": key.id,
        "name": key.name,
        "tenant": key.tenant,
        "scopes": key.scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        "created_ms": key.created_ms,
        "last_used_ms": key.last_used_ms,
        "expires_ms": key.expires_ms,
        "revoked_ms": key.revoked_ms,
        "usable": key.usable_at(now_ms()),
    })
}

/// What a server knows of the store's keys, kept for [`KEEP`].
pub(crate) struct KeyCache {
    store: Arc<dyn Store>,
    /// By secret hash: the key (or that there is none), and when it was read.
    found: Mutex<HashMap<String, (Option<ApiKey>, Instant)>>,
    /// Whether the store holds any key, and when that was read.
    any: Mutex<Option<(bool, Instant)>>,
    /// When this server last wrote each key's last use.
    touched: Mutex<HashMap<String, Instant>>,
}

/// The most secret hashes a cache keeps before it forgets them all (a flood of wrong
/// keys must not grow it without bound).
const MAX_KEPT: usize = 4096;

impl KeyCache {
    pub(crate) fn new(store: Arc<dyn Store>) -> KeyCache {
        KeyCache {
            store,
            found: Mutex::default(),
            any: Mutex::default(),
            touched: Mutex::default(),
        }
    }

    /// The key whose secret is `secret`, if the store has one.
    pub(crate) async fn find(&self, secret: &str) -> Result<Option<ApiKey>, StoreError> {
        let Some(keys) = self.store.keys() else {
            return Ok(None);
        };
        let hash = hash_secret(secret);
        if let Some((key, at)) = self.found.lock().ok().and_then(|f| f.get(&hash).cloned())
            && at.elapsed() < KEEP
        {
            return Ok(key);
        }
        let key = keys.key_by_hash(&hash).await?;
        if let Ok(mut found) = self.found.lock() {
            if found.len() >= MAX_KEPT {
                found.clear();
            }
            found.insert(hash, (key.clone(), Instant::now()));
        }
        Ok(key)
    }

    /// Whether the store holds any key (revoked ones count: a server that had keys
    /// does not open up when the last one is revoked).
    pub(crate) async fn any(&self) -> Result<bool, StoreError> {
        let Some(keys) = self.store.keys() else {
            return Ok(false);
        };
        if let Some((any, at)) = self.any.lock().ok().and_then(|a| *a)
            && at.elapsed() < KEEP
        {
            return Ok(any);
        }
        let any = !keys.keys().await?.is_empty();
        if let Ok(mut kept) = self.any.lock() {
            *kept = Some((any, Instant::now()));
        }
        Ok(any)
    }

    /// Notes that `key` was used now: written to the store at most every
    /// [`TOUCH_EVERY`], off the request's path.
    pub(crate) fn used(&self, key: &ApiKey) {
        let due = self.touched.lock().is_ok_and(|mut t| {
            let due = t.get(&key.id).is_none_or(|at| at.elapsed() >= TOUCH_EVERY);
            if due {
                t.insert(key.id.clone(), Instant::now());
            }
            due
        });
        if due {
            let (store, id) = (self.store.clone(), key.id.clone());
            tokio::spawn(async move {
                if let Some(keys) = store.keys() {
                    let _ = keys.touch_key(&id, now_ms()).await;
                }
            });
        }
    }

    /// Forgets what it read, so that a key made or revoked through this server counts
    /// at once here.
    pub(crate) fn forget(&self) {
        if let Ok(mut found) = self.found.lock() {
            found.clear();
        }
        if let Ok(mut any) = self.any.lock() {
            *any = None;
        }
    }
}
