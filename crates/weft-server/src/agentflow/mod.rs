//! AgentFlow's own HTTP API (`/api/*`, spec 003's system), so that its web editor and
//! its clients can use `weft serve` as their backend: `POST /api/run`,
//! `/api/run-stream`, `/api/resume`, `/api/resume-stream`, `GET /api/run/{runId}`,
//! `/api/config` and `/api/default-workflow`, with the request and answer shapes of
//! AgentFlow's `apps/server` (`docs/agentflow-api.md` maps each onto Weft's runs).
//!
//! A graph posted here is a `graph`-dialect flow like any other: it is checked before
//! it runs, stored with its run, journaled, and readable through `/v1` and the page;
//! its runs survive a restart, where AgentFlow keeps a paused run in its process.

mod result;
mod stream;

use crate::App;
use crate::auth::Principal;
use crate::problem::Problem;
use axum::Extension;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use weft_core::Diagnostic;
use weft_core::ports::{RunRecord, RunStatus};
use weft_engine::{EngineError, Underway};

/// The dialect AgentFlow's graphs are.
const DIALECT: &str = "graph";

/// What the door's handlers share.
#[derive(Clone)]
pub(crate) struct Door {
    app: App,
    /// Runs being resumed through this door now (AgentFlow's resume lock: a second
    /// resume of the same run while one goes on is a `409`).
    resuming: Arc<Mutex<HashSet<String>>>,
}

/// The routes under `/api`.
pub(crate) fn router(app: App) -> Router {
    let door = Door {
        app,
        resuming: Arc::default(),
    };
    Router::new()
        .route("/api/run", post(run))
        .route("/api/run-stream", post(stream::run))
        .route("/api/resume", post(resume))
        .route("/api/resume-stream", post(stream::resume))
        .route("/api/run/{run_id}", get(show))
        .route("/api/config", get(config))
        .route("/api/default-workflow", get(default_workflow))
        .with_state(door)
}

/// An error as AgentFlow's server answers one: `{error, details?}` (its client shows
/// `error`), plus the located diagnostics of a graph that does not load.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    error: String,
    details: Option<String>,
    diagnostics: Vec<Diagnostic>,
}

impl ApiError {
    fn new(status: StatusCode, error: impl Into<String>) -> ApiError {
        ApiError {
            status,
            error: error.into(),
            details: None,
            diagnostics: Vec::new(),
        }
    }

    /// `error`, and its details when it has some, as one line.
    fn message(&self) -> String {
        match &self.details {
            Some(d) => format!("{}: {d}", self.error),
            None => self.error.clone(),
        }
    }

    fn details(mut self, details: impl Into<String>) -> ApiError {
        self.details = Some(details.into());
        self
    }

    /// A graph that does not load: `error` says where and what for each problem.
    fn invalid_graph(diagnostics: Vec<Diagnostic>) -> ApiError {
        let said: Vec<String> = diagnostics
            .iter()
            .filter(|d| d.severity == weft_core::Severity::Error)
            .map(located)
            .collect();
        ApiError {
            status: StatusCode::BAD_REQUEST,
            error: format!("Invalid workflow graph: {}", said.join("; ")),
            details: None,
            diagnostics,
        }
    }
}

/// `message (at line:col, /pointer; hint)`.
fn located(d: &Diagnostic) -> String {
    let at = match &d.loc {
        Some(loc) => format!("{}:{}, {}", loc.line, loc.col, d.pointer),
        None => d.pointer.clone(),
    };
    match &d.hint {
        Some(hint) => format!("{} (at {at}; {hint})", d.message),
        None => format!("{} (at {at})", d.message),
    }
}

impl From<Problem> for ApiError {
    fn from(p: Problem) -> ApiError {
        if !p.diagnostics.is_empty() {
            return ApiError::invalid_graph(p.diagnostics);
        }
        let status = StatusCode::from_u16(p.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let error = ApiError::new(status, p.title);
        match p.detail {
            Some(d) => error.details(d),
            None => error,
        }
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> ApiError {
        Problem::from(e).into()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({"error": self.error});
        if let Some(d) = self.details {
            body["details"] = Value::String(d);
        }
        if !self.diagnostics.is_empty() {
            body["diagnostics"] = serde_json::to_value(&self.diagnostics).unwrap_or_default();
        }
        (self.status, Json(body)).into_response()
    }
}

/// `{graph}` of a run request, checked as AgentFlow's server checks it (`nodes` and
/// `connections` are lists).
fn graph_of(body: Result<Json<Value>, JsonRejection>) -> Result<Value, ApiError> {
    let Json(body) = body.map_err(|r| {
        ApiError::new(StatusCode::BAD_REQUEST, "Invalid request body").details(r.body_text())
    })?;
    match body.get("graph") {
        Some(g) if g["nodes"].is_array() && g["connections"].is_array() => Ok(g.clone()),
        _ => Err(
            ApiError::new(StatusCode::BAD_REQUEST, "Invalid workflow graph payload")
                .details("the body is {\"graph\": {\"nodes\": [...], \"connections\": [...]}}"),
        ),
    }
}

/// Checks `graph` and starts a run of it with its own initial input.
async fn start(app: &App, graph: &Value) -> Result<Underway, ApiError> {
    let text = serde_json::to_string(graph).unwrap_or_default();
    let checked = app
        .service
        .check(&text, Some(DIALECT), Some("graph"))
        .map_err(crate::Problem::invalid_flow)?;
    let input = checked.flow().input.clone().unwrap_or_else(|| json!(""));
    let started = app
        .service
        .start(&checked, Some(input), weft_service::How::default())
        .await?;
    Ok(started.underway)
}

/// `POST /api/run`: runs a graph until it ends or pauses; answers its result.
async fn run(
    State(door): State<Door>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let graph = graph_of(body)?;
    let run = start(&door.app, &graph).await?;
    let id = run.run_id().to_owned();
    run.end().await?;
    let rec = door.record(&id).await?;
    Ok(Json(
        door.result_of(&rec, Some(result::normalized(graph)))
            .await?,
    ))
}

/// `{runId, input}` of a resume request, the run it names (paused, or still going),
/// and the run's lock for this resume.
async fn resume_request(
    door: &Door,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<(RunRecord, Value, ResumeLock), ApiError> {
    let Json(body) = body.map_err(|r| {
        ApiError::new(StatusCode::BAD_REQUEST, "Invalid request body").details(r.body_text())
    })?;
    let Some(id) = body.get("runId").and_then(Value::as_str) else {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "runId is required"));
    };
    let rec = door.graph_run(id).await.map_err(|e| match e.status {
        // AgentFlow's resume routes say it so.
        StatusCode::NOT_FOUND => ApiError {
            error: "Run ID not found".into(),
            ..e
        },
        _ => e,
    })?;
    if !matches!(
        rec.status,
        RunStatus::Paused | RunStatus::Running | RunStatus::Queued
    ) {
        return Err(
            ApiError::new(StatusCode::NOT_FOUND, "Run ID not found").details(format!(
                "run {} is {}: only a paused run can be resumed",
                rec.id,
                rec.status.as_str()
            )),
        );
    }
    let lock = ResumeLock::take(&door.resuming, &rec.id)?;
    Ok((rec, answer(body.get("input")), lock))
}

/// The answer a resume input gives, as AgentFlow's engine reads it: a text rejects when
/// it says "reject" anywhere; an object rejects when its `decision` is `reject` (any
/// case); anything else approves. The note is kept when it is text.
fn answer(input: Option<&Value>) -> Value {
    let (reject, note) = match input {
        Some(Value::String(s)) => (s.to_lowercase().contains("reject"), ""),
        Some(Value::Object(o)) => (
            o.get("decision")
                .and_then(Value::as_str)
                .is_some_and(|d| d.eq_ignore_ascii_case("reject")),
            o.get("note").and_then(Value::as_str).unwrap_or(""),
        ),
        _ => (false, ""),
    };
    let decision = if reject { "reject" } else { "approve" };
    json!({"decision": decision, "note": note})
}

/// Answers the approval paused run `rec` waits at (its first, as AgentFlow's engine
/// pauses at one at a time); a run that is not paused goes on as it is.
async fn answer_run(
    door: &Door,
    rec: &RunRecord,
    mut answer: Value,
    principal: &Principal,
) -> Result<Underway, ApiError> {
    principal.sign(&mut answer, None);
    if rec.status != RunStatus::Paused {
        return Err(
            ApiError::new(StatusCode::CONFLICT, "Run is not paused").details(format!(
                "run {} is {}: it waits for no answer",
                rec.id,
                rec.status.as_str()
            )),
        );
    }
    let key = rec
        .waiting
        .as_ref()
        .and_then(|w| w.get(0)?.get("key")?.as_str().map(str::to_owned));
    Ok(door
        .app
        .engine
        .answer(&rec.id, key.as_deref(), answer)
        .await?)
}

/// `POST /api/resume`: answers the run's approval and runs on until it ends or pauses
/// again; a run that is still going is answered with where it stands.
async fn resume(
    State(door): State<Door>,
    Extension(principal): Extension<Principal>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let (mut rec, answer, _lock) = resume_request(&door, body).await?;
    if rec.status == RunStatus::Paused {
        answer_run(&door, &rec, answer, &principal)
            .await?
            .end()
            .await?;
        rec = door.record(&rec.id).await?;
    }
    let workflow = result::workflow(door.app.engine.store().as_ref(), &rec).await;
    Ok(Json(door.result_of(&rec, workflow).await?))
}

/// `GET /api/run/{runId}`: where a run stands.
async fn show(
    State(door): State<Door>,
    Path(run_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let rec = door.graph_run(&run_id).await?;
    let workflow = result::workflow(door.app.engine.store().as_ref(), &rec).await;
    Ok(Json(door.result_of(&rec, workflow).await?))
}

/// `GET /api/config`: AgentFlow reads its providers and models from a file of its own;
/// Weft has none, and its editor then offers its built-in list.
async fn config() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "No config found").details(
        "Weft serves no AgentFlow provider list; an agent's `model` is any Weft model id (docs/models.md)",
    )
}

/// `GET /api/default-workflow`: none, as AgentFlow answers without its file.
async fn default_workflow() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "No default workflow found")
}

impl Door {
    /// Run `id`, when it is a graph run.
    async fn graph_run(&self, id: &str) -> Result<RunRecord, ApiError> {
        let not_found = || ApiError::new(StatusCode::NOT_FOUND, "Run not found");
        let rec = self
            .app
            .engine
            .store()
            .get_run(id)
            .await
            .map_err(EngineError::from)?
            .ok_or_else(not_found)?;
        if rec.dialect.as_deref() != Some(DIALECT) {
            return Err(not_found().details(format!(
                "run {} is a {} flow; this API serves graph runs (use /v1/runs/{})",
                rec.id,
                rec.dialect.as_deref().unwrap_or("native"),
                rec.id
            )));
        }
        Ok(rec)
    }

    /// Run `id` as it stands in the store.
    async fn record(&self, id: &str) -> Result<RunRecord, ApiError> {
        self.app
            .engine
            .store()
            .get_run(id)
            .await
            .map_err(EngineError::from)?
            .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "Run not found"))
    }

    /// Run `rec`'s result, with every entry its stored events log.
    async fn result_of(&self, rec: &RunRecord, workflow: Option<Value>) -> Result<Value, ApiError> {
        let view = weft_dialects::view_of_run(rec);
        let logs = result::logs(
            self.app.engine.store().as_ref(),
            rec,
            &view,
            None,
            &mut Default::default(),
        )
        .await
        .map_err(EngineError::from)?;
        Ok(result::shaped(rec, &view, logs, workflow))
    }
}

/// A run held for one resume: released when dropped.
#[derive(Debug)]
pub(crate) struct ResumeLock {
    held: Arc<Mutex<HashSet<String>>>,
    run_id: String,
}

impl ResumeLock {
    /// Takes run `run_id`'s lock, or `409` while another resume holds it.
    fn take(held: &Arc<Mutex<HashSet<String>>>, run_id: &str) -> Result<ResumeLock, ApiError> {
        let fresh = held
            .lock()
            .map(|mut set| set.insert(run_id.to_owned()))
            .unwrap_or(false);
        if !fresh {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "Run is already being resumed. Use a single resume endpoint per run.",
            ));
        }
        Ok(ResumeLock {
            held: held.clone(),
            run_id: run_id.to_owned(),
        })
    }
}

impl Drop for ResumeLock {
    fn drop(&mut self) {
        if let Ok(mut set) = self.held.lock() {
            set.remove(&self.run_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resume_input_is_read_as_agentflow_reads_it() {
        let decision = |v: Value| answer(Some(&v))["decision"].clone();
        assert_eq!(decision(json!("Please REJECT this")), "reject");
        assert_eq!(decision(json!("looks fine")), "approve");
        assert_eq!(decision(json!({"decision": "Reject"})), "reject");
        assert_eq!(decision(json!({"decision": "no"})), "approve");
        assert_eq!(answer(None), json!({"decision": "approve", "note": ""}));
        assert_eq!(
            answer(Some(&json!({"decision": "reject", "note": "not yet"}))),
            json!({"decision": "reject", "note": "not yet"})
        );
        assert_eq!(answer(Some(&json!({"note": 3})))["note"], "");
    }

    #[test]
    fn a_second_resume_of_one_run_is_refused_until_the_first_ends() {
        let held = Arc::default();
        let first = ResumeLock::take(&held, "r1").unwrap();
        let second = ResumeLock::take(&held, "r1").unwrap_err();
        assert_eq!(second.status, StatusCode::CONFLICT);
        assert!(ResumeLock::take(&held, "r2").is_ok(), "another run is free");
        drop(first);
        assert!(ResumeLock::take(&held, "r1").is_ok());
    }
}
