//! A service that receives effects: every POST is answered `{"ok": true}` and recorded
//! with its `Idempotency-Key`, so a test can tell a repeated request from a new one.
//! It can answer after a delay, as a real service does, so that a test's kills land
//! while requests are in flight.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// A POST the endpoint received.
#[derive(Debug, Clone, PartialEq)]
pub struct Posted {
    /// The path, without the leading `/`.
    pub path: String,
    /// The `Idempotency-Key` header, if the request had one.
    pub idempotency_key: Option<String>,
    /// The body, as JSON when it parses, else as a string.
    pub body: Value,
}

/// A running endpoint on 127.0.0.1; it stops when dropped.
pub struct Endpoint {
    addr: SocketAddr,
    posted: Arc<Mutex<Vec<Posted>>>,
    task: tokio::task::JoinHandle<()>,
}

/// What a request handler shares: the record, and how long each answer waits.
#[derive(Clone)]
struct Receiving {
    posted: Arc<Mutex<Vec<Posted>>>,
    delay: std::time::Duration,
}

impl Endpoint {
    /// Starts listening on a free port.
    pub async fn start() -> Endpoint {
        Endpoint::answering_after(std::time::Duration::ZERO).await
    }

    /// Starts listening on a free port; each request is recorded when it arrives and
    /// answered `delay` later.
    pub async fn answering_after(delay: std::time::Duration) -> Endpoint {
        let posted = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new()
            .route("/{*path}", axum::routing::post(receive))
            .with_state(Receiving {
                posted: posted.clone(),
                delay,
            });
        let (addr, task) = crate::serve_on_loopback(app).await;
        Endpoint { addr, posted, task }
    }

    /// The URL of `path` on this endpoint.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{path}", self.addr)
    }

    /// Every request received so far, in arrival order.
    pub fn posted(&self) -> Vec<Posted> {
        self.posted.lock().expect("posted lock").clone()
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn receive(
    State(Receiving { posted, delay }): State<Receiving>,
    Path(path): Path<String>,
    headers: HeaderMap,
    body: bytes::Bytes,
) -> axum::Json<Value> {
    let body = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    let idempotency_key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    posted.lock().expect("posted lock").push(Posted {
        path,
        idempotency_key,
        body,
    });
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    axum::Json(serde_json::json!({"ok": true}))
}
