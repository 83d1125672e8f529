//! # weft-fakes
//!
//! Real HTTP servers on 127.0.0.1 that speak the wire formats of OpenAI Chat
//! Completions, Anthropic Messages, Gemini `generateContent` and Ollama `/api/chat`,
//! streaming (SSE, NDJSON) and not, and their embedding endpoints, so that Weft's providers are tested over real
//! sockets with nothing mocked but the far end. A test scripts the replies (text, tool
//! calls, an HTTP error with `Retry-After`, a connection dropped mid-stream) and reads
//! back the requests the server received.
//!
//! [`Endpoint`] is the other kind of far end: a service that receives a flow's effects
//! (`http.post`) and records each request with its `Idempotency-Key`. [`Collector`] is
//! an OpenTelemetry collector's OTLP/HTTP front door that decodes the spans it is sent.
//!
//! Test support only: depends on nothing of Weft's.

mod collector;
mod endpoint;
mod wire;

pub use collector::{Collector, ReceivedSpan};
pub use endpoint::{Endpoint, Posted};

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use wire::Wire;

/// What the server answers one request with.
#[derive(Debug, Clone)]
pub enum Reply {
    /// An answer (streamed word by word when the request streams).
    Text(String),
    /// Tool calls: `(name, arguments)`.
    ToolCalls(Vec<(String, Value)>),
    /// An HTTP error with this status and message, and `Retry-After` (seconds) if set.
    Error {
        /// The HTTP status.
        status: u16,
        /// The provider's error message.
        message: String,
        /// `Retry-After`, in seconds.
        retry_after: Option<u32>,
    },
    /// Streams the text with a pause of `gap` before every frame but the first (a
    /// request that does not stream gets the whole text after `gap`).
    Slow {
        /// The answer.
        text: String,
        /// The pause between frames.
        gap: Duration,
    },
    /// Embedding vectors, in the provider's embedding answer (OpenAI `/embeddings`,
    /// Ollama `/api/embed`, Gemini `batchEmbedContents`).
    Embeddings(Vec<Vec<f32>>),
    /// Streams the first `chunks` words of the text, then drops the connection.
    DropAfter {
        /// The answer that is cut off.
        text: String,
        /// Words sent before the cut.
        chunks: usize,
    },
}

impl Reply {
    /// A text answer.
    pub fn text(s: impl Into<String>) -> Reply {
        Reply::Text(s.into())
    }

    /// One tool call.
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Reply {
        Reply::ToolCalls(vec![(name.into(), arguments)])
    }

    /// An HTTP error.
    pub fn error(status: u16, message: impl Into<String>) -> Reply {
        Reply::Error {
            status,
            message: message.into(),
            retry_after: None,
        }
    }
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Received {
    /// The path (with the model, for Gemini).
    pub path: String,
    /// The credential it carried (`Authorization`, `x-api-key` or `x-goog-api-key`).
    pub credential: Option<String>,
    /// The JSON body.
    pub body: Value,
}

impl Received {
    /// The text of the request's last chat message, in OpenAI's wire format (`""` when
    /// it has none).
    pub fn last_message(&self) -> &str {
        self.message_where(|_| true)
    }

    /// The text of the request's last user message, in OpenAI's wire format.
    pub fn last_user_message(&self) -> &str {
        self.message_where(|m| m["role"] == "user")
    }

    fn message_where(&self, pick: impl Fn(&Value) -> bool) -> &str {
        self.body["messages"]
            .as_array()
            .and_then(|m| m.iter().rev().find(|m| pick(m)))
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
    }
}

type Responder = dyn Fn(&Received) -> Reply + Send + Sync;

struct Shared {
    wire: Wire,
    responder: Box<Responder>,
    latency: Duration,
    received: Mutex<Vec<Received>>,
}

/// A running fake provider; it stops when dropped.
pub struct FakeServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeServer {
    /// Serves `replies` in order (the last one repeats once they run out).
    pub async fn start(wire: Wire, replies: Vec<Reply>) -> FakeServer {
        let replies = Mutex::new(
            replies
                .into_iter()
                .collect::<std::collections::VecDeque<_>>(),
        );
        FakeServer::start_with(wire, Duration::ZERO, move |_| {
            let mut q = replies.lock().expect("replies lock");
            if q.len() > 1 {
                q.pop_front().expect("not empty")
            } else {
                q.front()
                    .cloned()
                    .unwrap_or_else(|| Reply::error(500, "no reply scripted"))
            }
        })
        .await
    }

    /// Answers each request with `responder`, after `latency`.
    pub async fn start_with(
        wire: Wire,
        latency: Duration,
        responder: impl Fn(&Received) -> Reply + Send + Sync + 'static,
    ) -> FakeServer {
        let shared = Arc::new(Shared {
            wire,
            responder: Box::new(responder),
            latency,
            received: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/{*path}", axum::routing::post(handle))
            .with_state(shared.clone());
        let (addr, task) = serve_on_loopback(app).await;
        FakeServer { addr, shared, task }
    }

    /// The value for the provider's base URL setting (`base_url`, `OPENAI_BASE_URL`...).
    pub fn base_url(&self) -> String {
        let root = format!("http://{}", self.addr);
        match self.shared.wire {
            Wire::OpenAi => format!("{root}/v1"),
            Wire::Gemini => format!("{root}/v1beta"),
            Wire::Anthropic | Wire::Ollama => root,
        }
    }

    /// The requests received so far.
    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().expect("received lock").clone()
    }

    /// The requests received so far, forgetting them (long benchmarks would hoard them).
    pub fn take_received(&self) -> Vec<Received> {
        std::mem::take(&mut *self.shared.received.lock().expect("received lock"))
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves `app` on a free port of 127.0.0.1 until the task is aborted.
async fn serve_on_loopback(app: Router) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("local address");
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (addr, task)
}

fn credential(headers: &HeaderMap) -> Option<String> {
    ["authorization", "x-api-key", "x-goog-api-key"]
        .iter()
        .find_map(|h| headers.get(*h))
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    Path(path): Path<String>,
    headers: HeaderMap,
    body: bytes::Bytes,
) -> Response {
    let body: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return Response::builder()
                .status(StatusCode::BAD_REQUEST)
                .body(Body::from(format!("body is not JSON: {e}")))
                .expect("response");
        }
    };
    let received = Received {
        path: format!("/{path}"),
        credential: credential(&headers),
        body,
    };
    let reply = (shared.responder)(&received);
    shared
        .received
        .lock()
        .expect("received lock")
        .push(received.clone());
    if !shared.latency.is_zero() {
        tokio::time::sleep(shared.latency).await;
    }
    wire::respond(shared.wire, &received, reply).await
}
