//! LangGraph's Agent Server API (the routes `langgraph-sdk`, `@langchain/langgraph-sdk`
//! and Agent Chat UI call), mapped onto Weft's own model: an assistant is a stored flow
//! by name, a thread is a [`weft_core::ports::Thread`] whose values and status are its
//! latest run's, a run is a Weft run, an interrupt is an approval. `docs/langgraph-api.md`
//! lists every route and field: supported, mapped (and how), or refused.
//!
//! Streams are read from the run's stored event log, so a client that rejoins with
//! `Last-Event-ID` gets what it missed however long ago it left.

mod assistants;
mod messages;
mod modes;
mod parts;
mod queue;
mod request;
mod runs;
mod start;
mod state;
mod stream;
mod threads;

use crate::App;
use crate::problem::Problem;
use axum::Json;
use axum::Router;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use weft_core::ports::{RunRecord, RunStatus, StoreError, ThreadStore};
use weft_core::value::Shared;
use weft_engine::EngineError;

/// What the door's handlers share: the server's, and the runs queued behind their
/// threads' running runs.
#[derive(Clone)]
pub(crate) struct Door {
    pub(crate) app: App,
    pub(crate) queue: queue::Queue,
}

impl axum::extract::FromRef<Door> for App {
    fn from_ref(door: &Door) -> App {
        door.app.clone()
    }
}

/// The routes, at the root as LangGraph serves them.
pub(crate) fn router(app: App) -> Router {
    let door = Door {
        app,
        queue: queue::Queue::default(),
    };
    Router::new()
        .route("/info", get(info))
        .route("/assistants/search", post(assistants::search))
        .route("/assistants/{id}", get(assistants::show))
        .route("/assistants/{id}/graph", get(assistants::graph))
        .route("/assistants/{id}/schemas", get(assistants::schemas))
        .route("/runs", post(runs::create_stateless))
        .route("/runs/wait", post(runs::wait_stateless))
        .route("/runs/stream", post(runs::stream_stateless))
        .route("/threads", post(threads::create))
        .route("/threads/search", post(threads::search))
        .route(
            "/threads/{thread_id}",
            get(threads::show)
                .patch(threads::update)
                .delete(threads::delete),
        )
        .route(
            "/threads/{thread_id}/state",
            get(state::read).post(state::update),
        )
        .route(
            "/threads/{thread_id}/state/checkpoint",
            post(state::at_checkpoint),
        )
        .route(
            "/threads/{thread_id}/state/{checkpoint_id}",
            get(state::at_checkpoint_id),
        )
        .route("/threads/{thread_id}/history", post(state::history))
        .route(
            "/threads/{thread_id}/runs",
            post(runs::create).get(runs::list),
        )
        .route("/threads/{thread_id}/runs/wait", post(runs::wait))
        .route("/threads/{thread_id}/runs/stream", post(runs::stream))
        .route("/threads/{thread_id}/runs/{run_id}", get(runs::show))
        .route("/threads/{thread_id}/runs/{run_id}/join", get(runs::join))
        .route(
            "/threads/{thread_id}/runs/{run_id}/stream",
            get(runs::join_stream),
        )
        .route(
            "/threads/{thread_id}/runs/{run_id}/cancel",
            post(runs::cancel),
        )
        .with_state(door)
}

/// `GET /info`: what this server is and which optional parts it has.
async fn info() -> Json<Value> {
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "langgraph_py_version": null,
        "flags": {"assistants": true, "crons": false, "langsmith": false, "langsmith_tracing_replicas": false},
        "metadata": {"server": "weft"},
    }))
}

/// An error as LangGraph's server answers one: `{detail}` with its status, plus the
/// located diagnostics of a flow that does not load.
#[derive(Debug)]
pub(crate) struct LgError {
    pub(crate) status: StatusCode,
    detail: String,
    diagnostics: Vec<weft_core::Diagnostic>,
}

impl LgError {
    pub(crate) fn new(status: StatusCode, detail: impl Into<String>) -> LgError {
        LgError {
            status,
            detail: detail.into(),
            diagnostics: Vec::new(),
        }
    }

    pub(crate) fn not_found(what: &str, id: &str) -> LgError {
        LgError::new(StatusCode::NOT_FOUND, format!("{what} {id} not found"))
    }

    pub(crate) fn is_not_found(&self) -> bool {
        self.status == StatusCode::NOT_FOUND
    }

    pub(crate) fn invalid(detail: impl Into<String>) -> LgError {
        LgError::new(StatusCode::UNPROCESSABLE_ENTITY, detail)
    }
}

impl From<Problem> for LgError {
    fn from(p: Problem) -> LgError {
        let status = StatusCode::from_u16(p.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let detail = match p.detail {
            Some(d) => format!("{}: {d}", p.title),
            None => p.title,
        };
        LgError {
            status,
            detail,
            diagnostics: p.diagnostics,
        }
    }
}

impl From<EngineError> for LgError {
    fn from(e: EngineError) -> LgError {
        Problem::from(e).into()
    }
}

impl From<StoreError> for LgError {
    fn from(e: StoreError) -> LgError {
        EngineError::from(e).into()
    }
}

impl From<axum::extract::rejection::JsonRejection> for LgError {
    fn from(r: axum::extract::rejection::JsonRejection) -> LgError {
        LgError::invalid(r.body_text())
    }
}

impl IntoResponse for LgError {
    fn into_response(self) -> Response {
        let mut body = json!({"detail": self.detail});
        if !self.diagnostics.is_empty() {
            body["diagnostics"] = serde_json::to_value(&self.diagnostics).unwrap_or_default();
        }
        (self.status, Json(body)).into_response()
    }
}

/// The store's threads, where it keeps them.
pub(crate) fn thread_store(app: &App) -> Result<&dyn ThreadStore, LgError> {
    app.engine.store().threads().ok_or_else(|| {
        LgError::new(
            StatusCode::NOT_IMPLEMENTED,
            "this server's store keeps no threads",
        )
    })
}

/// Unix milliseconds as LangGraph writes times (RFC 3339, UTC).
pub(crate) fn time(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// A run's status as LangGraph names it.
pub(crate) fn run_status(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Queued => "pending",
        RunStatus::Running => "running",
        RunStatus::Completed => "success",
        RunStatus::Failed => "error",
        RunStatus::Paused | RunStatus::Cancelled => "interrupted",
    }
}

/// The values a run leaves its thread: its input (an object), with its state written
/// over it key by key, then its output once it completed (an object's keys; any other
/// output under `output`), with LangChain message dicts in `messages`. So a native
/// flow's thread holds what it was given and what it made, as a LangGraph state does,
/// and the state-machine dialects' (whose state starts from the input) their state.
pub(crate) fn values_of(run: &RunRecord) -> Value {
    let mut values = match &run.input {
        Value::Object(m) => m.clone(),
        _ => serde_json::Map::new(),
    };
    if let Some(Value::Object(state)) = run.state.as_ref().map(Shared::json).as_deref() {
        values.extend(state.clone());
    }
    if run.status == RunStatus::Completed {
        match run.output.as_ref().map(Shared::json).as_deref() {
            Some(Value::Object(output)) => values.extend(output.clone()),
            Some(Value::Null) | None => {}
            Some(other) => {
                values.insert("output".into(), other.clone());
            }
        }
    }
    let mut values = Value::Object(values);
    messages::normalize(&mut values, &run.id);
    values
}

/// The interrupts of a paused run, as LangGraph lists them: `[{value, id}]`, the
/// approval's prompt as the value and its step key as the id.
pub(crate) fn interrupts_of(run: &RunRecord) -> Vec<Value> {
    if run.status != RunStatus::Paused {
        return Vec::new();
    }
    let waiting = run.waiting.as_ref().and_then(Value::as_array);
    waiting
        .into_iter()
        .flatten()
        .filter(|w| w.get("prompt").is_some())
        .map(|w| {
            json!({
                "value": w["prompt"],
                "id": w["key"],
            })
        })
        .collect()
}
