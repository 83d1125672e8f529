//! The audit log's writer: every request that changes something and every refused one
//! becomes an [`AuditEntry`], handed to a task that appends them to the store in
//! batches (one transaction for what arrived together), in the order they came.
//!
//! A request waits for its entry only when the writer is far behind (its queue full):
//! the log keeps up with the server instead of growing without bound in memory.

use axum::extract::Request;
use axum::http::{HeaderValue, Response};
use std::sync::Arc;
use tokio::sync::mpsc;
use weft_core::ports::{AuditEntry, Store};

/// Entries waiting for the writer before requests wait too.
const QUEUE: usize = 8192;
/// Entries appended in one transaction at most.
const BATCH: usize = 512;
/// The header that names a request (taken from the request when a proxy set one).
pub(crate) const REQUEST_ID: &str = "x-request-id";

/// Hands entries to the writer task. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Auditor {
    tx: Option<mpsc::Sender<AuditEntry>>,
}

impl Auditor {
    /// A writer over `store`'s audit log (none when the store keeps none). Needs a
    /// Tokio runtime.
    pub(crate) fn new(store: Arc<dyn Store>) -> Auditor {
        if store.audit().is_none() {
            return Auditor { tx: None };
        }
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(write(store, rx));
        Auditor { tx: Some(tx) }
    }

    /// Records `entry` (in order with every other).
    pub(crate) async fn record(&self, entry: AuditEntry) {
        if let Some(tx) = &self.tx {
            // The writer stops only with the server.
            let _ = tx.send(entry).await;
        }
    }
}

async fn write(store: Arc<dyn Store>, mut rx: mpsc::Receiver<AuditEntry>) {
    let mut batch = Vec::with_capacity(BATCH);
    while rx.recv_many(&mut batch, BATCH).await > 0 {
        if let Some(log) = store.audit()
            && let Err(e) = log.append_audit(&batch).await
        {
            eprintln!(
                "weft serve: {} audit entries were not written: {e}",
                batch.len()
            );
        }
        batch.clear();
    }
}

/// The request's id: the one a proxy gave it (`x-request-id`, when it is short and
/// printable), else a new one.
pub(crate) fn request_id(request: &Request) -> String {
    request
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|id| !id.is_empty() && id.len() <= 128)
        .map_or_else(|| uuid::Uuid::now_v7().simple().to_string(), str::to_owned)
}

/// Says `id` on `response`, so that a caller can name the request to whoever reads the
/// log.
pub(crate) fn tag<B>(response: &mut Response<B>, id: &str) {
    if let Ok(value) = HeaderValue::from_str(id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
}

/// The id `authenticate` gives a request first thing, for every entry about it.
#[derive(Debug, Clone)]
pub(crate) struct RequestId(pub(crate) String);

/// What a request asked, as the audit log names it.
pub(crate) struct Said {
    action: String,
    object: String,
    request_id: String,
}

impl Said {
    /// What `request` asks of route `template` (its path when it matched none).
    pub(crate) fn of(request: &Request, template: &str) -> Said {
        let path = request.uri().path();
        let route = if template.is_empty() { path } else { template };
        Said {
            action: format!("{} {route}", request.method()),
            object: path.chars().take(512).collect(),
            request_id: request
                .extensions()
                .get::<RequestId>()
                .map(|id| id.0.clone())
                .unwrap_or_default(),
        }
    }

    /// The entry of this request, answered `outcome`, from `principal` (none: it was
    /// not let in).
    pub(crate) fn entry(
        self,
        principal: Option<&crate::auth::Principal>,
        outcome: axum::http::StatusCode,
    ) -> AuditEntry {
        let (id, name, tenant) = match principal {
            Some(p) => (p.id.clone(), p.name.clone(), p.tenant.clone()),
            None => (
                "anonymous".to_owned(),
                String::new(),
                crate::auth::DEFAULT_TENANT.to_owned(),
            ),
        };
        AuditEntry {
            seq: 0,
            at_ms: crate::keys::now_ms(),
            principal: id,
            principal_name: name,
            tenant,
            action: self.action,
            object: self.object,
            outcome: outcome.as_u16(),
            request_id: self.request_id,
        }
    }
}
