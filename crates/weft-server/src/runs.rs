//! `/v1/runs`: start a run from a flow's text, list and read runs, answer, resume,
//! retry, cancel.

use crate::App;
use crate::auth::Principal;
use crate::listing::Listed;
use crate::problem::Params;
use crate::problem::Problem;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::Duration;
use weft_core::ports::{Cursor, RunQuery, RunRecord, RunStatus, StoreError};
use weft_core::value::Shared;
use weft_engine::{Engine, EngineError, Underway};
use weft_service::How;

/// The longest `?wait=` honoured, in seconds.
const MAX_WAIT_S: f64 = 300.0;

/// `POST /v1/runs`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewRun {
    /// A stored flow's id (from `POST /v1/flows`); or give `source`.
    flow_id: Option<String>,
    /// The flow's text (YAML or JSON, any dialect); or give `flow_id`.
    source: Option<String>,
    /// The dialect of `source`, when detection should not decide.
    dialect: Option<String>,
    /// The run's input (default: the flow's own).
    input: Option<Value>,
    /// A name for the flow's text in diagnostics (default `flow`).
    name: Option<String>,
}

/// `?wait=SECONDS`: answer when the run ends or pauses, if it does within that time.
#[derive(Deserialize)]
pub(crate) struct Wait {
    wait: Option<f64>,
}

impl Wait {
    pub(crate) fn duration(&self) -> Option<Duration> {
        self.wait
            .filter(|s| s.is_finite() && *s > 0.0)
            .map(|s| Duration::from_secs_f64(s.min(MAX_WAIT_S)))
    }
}

/// A request body that is not the JSON a route expects.
pub(crate) fn bad_body(rejection: JsonRejection) -> Problem {
    Problem::new(rejection.status(), "invalid request").detail(rejection.body_text())
}

pub(crate) async fn create(
    State(app): State<App>,
    Params(wait): Params<Wait>,
    headers: HeaderMap,
    body: Result<Json<NewRun>, JsonRejection>,
) -> Result<(StatusCode, Json<Value>), Problem> {
    let Json(new) = body.map_err(bad_body)?;
    let key = idempotency::key(&headers)?;
    let checked = match (&new.flow_id, &new.source) {
        (Some(id), None) if new.dialect.is_none() => crate::flows::stored(&app, id).await?,
        (None, Some(text)) => app
            .service
            .check(text, new.dialect.as_deref(), new.name.as_deref())
            .map_err(Problem::invalid_flow)?,
        _ => {
            return Err(
                Problem::new(StatusCode::BAD_REQUEST, "invalid request").detail(
                    "give either `flow_id` (a stored flow) or `source` (with `dialect` if detection should not decide)",
                ),
            );
        }
    };
    let prepared = checked.prepared();
    // The input the run will have, so that a repeated request can be compared with it.
    let input = new
        .input
        .or_else(|| prepared.flow().input.clone())
        .unwrap_or_else(|| json!({}));
    let run_id = key.as_deref().map(idempotency::run_id);
    if let Some(id) = &run_id
        && let Some(existing) = idempotency::existing(&app.engine, id, prepared, &input).await?
    {
        return Ok(existing);
    }
    let how = How {
        run_id: run_id.clone(),
        ..How::default()
    };
    let started = app.service.start(&checked, Some(input.clone()), how).await;
    match (started, &run_id) {
        (Ok(s), _) => {
            let status = if s.queued { "queued" } else { "running" };
            answer_when_done(s.underway, status, wait.duration()).await
        }
        // Two requests with one key at the same moment: the other created the run.
        (Err(EngineError::Store(StoreError::Conflict(_))), Some(id)) => {
            idempotency::existing(&app.engine, id, prepared, &input)
                .await?
                .ok_or_else(|| EngineError::NotFound(id.clone()).into())
        }
        (Err(e), _) => Err(e.into()),
    }
}

/// `200` with the run's result if it ends or pauses within `wait`, else `202` with the
/// run id and `status` (the run goes on).
async fn answer_when_done(
    run: Underway,
    status: &str,
    wait: Option<Duration>,
) -> Result<(StatusCode, Json<Value>), Problem> {
    let run_id = run.run_id().to_owned();
    let Some(wait) = wait else {
        return Ok(accepted(run_id, status));
    };
    match run.within(wait).await {
        Some(Ok(result)) => Ok((StatusCode::OK, Json(result.to_json()))),
        Some(Err(e)) => Err(e.into()),
        None => Ok(accepted(run_id, status)),
    }
}

/// The status a continued run has when it is answered before it ends: `queued` when
/// it waits for a worker.
fn continued(run: &Underway) -> &'static str {
    if run.is_here() { "running" } else { "queued" }
}

/// `202` with the run id and where it stands.
pub(crate) fn accepted(run_id: String, status: &str) -> (StatusCode, Json<Value>) {
    (
        StatusCode::ACCEPTED,
        Json(json!({"run_id": run_id, "status": status})),
    )
}

/// `Idempotency-Key` on `POST /v1/runs`: the same key names the same run.
pub(crate) mod idempotency {
    use super::*;

    /// The longest key accepted.
    const MAX_KEY: usize = 255;

    /// The request's `Idempotency-Key`, if it has one.
    pub(crate) fn key(headers: &HeaderMap) -> Result<Option<String>, Problem> {
        let Some(value) = headers.get("idempotency-key") else {
            return Ok(None);
        };
        let key = value
            .to_str()
            .ok()
            .map(str::trim)
            .filter(|k| !k.is_empty() && k.len() <= MAX_KEY);
        key.map(|k| Some(k.to_owned())).ok_or_else(|| {
            Problem::new(StatusCode::BAD_REQUEST, "invalid request").detail(format!(
                "Idempotency-Key is 1 to {MAX_KEY} visible ASCII characters"
            ))
        })
    }

    /// The run id a key names: the same on every request and every restart.
    pub(super) fn run_id(key: &str) -> String {
        weft_core::hash::content_hash(format!("idempotency-key\0{key}").as_bytes())[..32].to_owned()
    }

    /// The answer for a key whose run exists: `200` with where it stands, or `422` when
    /// the key was used for another flow or input.
    pub(super) async fn existing(
        engine: &Engine,
        id: &str,
        prepared: &weft_engine::Prepared,
        input: &Value,
    ) -> Result<Option<(StatusCode, Json<Value>)>, Problem> {
        let Some(run) = engine
            .store()
            .get_run(id)
            .await
            .map_err(EngineError::from)?
        else {
            return Ok(None);
        };
        if run.flow_hash != prepared.hash() || &run.input != input {
            return Err(Problem::new(StatusCode::UNPROCESSABLE_ENTITY, "idempotency key reused")
                .detail(format!(
                    "this Idempotency-Key started run {id} with another flow or input; use a new key for a new run"
                )));
        }
        let mut shown = summary(&run);
        for (k, v) in [
            ("output", run.output.as_ref().map(Shared::to_value)),
            ("error", run.error.clone()),
            ("waiting", run.waiting.clone()),
        ] {
            if let Some(v) = v {
                shown[k] = v;
            }
        }
        Ok(Some((StatusCode::OK, Json(shown))))
    }
}

/// `GET /v1/runs?status=&limit=&cursor=`.
#[derive(Deserialize)]
pub(crate) struct ListQuery {
    status: Option<String>,
    // Not a flattened `Paging`: query strings hold only text, which serde reads as
    // numbers only in fields of the struct itself.
    limit: Option<usize>,
    cursor: Option<String>,
}

pub(crate) async fn list(
    State(app): State<App>,
    Params(q): Params<ListQuery>,
) -> Result<Json<Value>, Problem> {
    let status = match q.status.as_deref() {
        None => None,
        Some(s) => Some(RunStatus::parse(s).ok_or_else(|| {
            Problem::new(StatusCode::BAD_REQUEST, "invalid request").detail(format!(
                "`{s}` is not a status: queued, running, paused, completed, failed or cancelled"
            ))
        })?),
    };
    let (limit, after) = crate::listing::Paging::new(q.limit, q.cursor).resolve()?;
    let query = RunQuery {
        status,
        limit,
        after,
    };
    let runs = app
        .engine
        .store()
        .list_runs(&query)
        .await
        .map_err(EngineError::from)?;
    let listed = Listed::new(&runs, limit, |r| Cursor::after(r.created_ms, &r.id));
    Ok(Json(
        listed.with("runs", runs.iter().map(summary).collect()),
    ))
}

fn summary(r: &RunRecord) -> Value {
    json!({
        "run_id": r.id,
        "flow": r.flow_name,
        "flow_id": r.flow_id,
        "dialect": r.dialect,
        "status": r.status.as_str(),
        "created_ms": r.created_ms,
        "updated_ms": r.updated_ms,
    })
}

pub(crate) async fn show(
    State(app): State<App>,
    Path(id): Path<String>,
) -> Result<Json<weft_engine::inspect::RunDetail>, Problem> {
    let detail = weft_engine::inspect::run_detail(app.engine.store().as_ref(), &id)
        .await
        .map_err(EngineError::from)?
        .ok_or(EngineError::NotFound(id))?;
    Ok(Json(detail))
}

/// `POST /v1/runs/{id}/approve`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Answer {
    /// `approve`, `reject`, or another of the approval's options.
    decision: String,
    /// A note for the record.
    #[serde(default)]
    note: String,
    /// Which approval (its key), when the run waits for several.
    step: Option<String>,
    /// A name for who answers, kept as a display note (`by_note`) beside the identity
    /// the server authenticated (`by`, `by_id`), never in its place.
    by: Option<String>,
}

pub(crate) async fn approve(
    State(app): State<App>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    Params(wait): Params<Wait>,
    body: Result<Json<Answer>, JsonRejection>,
) -> Result<(StatusCode, Json<Value>), Problem> {
    let Json(a) = body.map_err(bad_body)?;
    let mut answer = json!({"decision": a.decision, "note": a.note});
    principal.sign(&mut answer, a.by.as_deref());
    let run = app.engine.answer(&id, a.step.as_deref(), answer).await?;
    let status = continued(&run);
    answer_when_done(run, status, wait.duration()).await
}

/// `GET /v1/runs/{id}/retry-plan`.
pub(crate) async fn retry_plan(
    State(app): State<App>,
    Path(id): Path<String>,
) -> Result<Json<weft_engine::inspect::RetryPlan>, Problem> {
    weft_engine::inspect::retry_plan(&app.engine, &id)
        .await?
        .map(Json)
        .ok_or_else(|| EngineError::NotFound(id).into())
}

/// `POST /v1/runs/{id}/resume`: continues a paused run (its approvals are asked again)
/// or one whose process died. Refused (`409`) while its process is alive.
pub(crate) async fn resume(
    State(app): State<App>,
    Path(id): Path<String>,
    Params(wait): Params<Wait>,
) -> Result<(StatusCode, Json<Value>), Problem> {
    let run = app.engine.resume(&id, false).await?;
    let status = continued(&run);
    answer_when_done(run, status, wait.duration()).await
}

/// `POST /v1/runs/{id}/retry`: runs a failed or cancelled run again from the steps that
/// failed, reusing every journaled result, with the flow it was started with.
pub(crate) async fn retry(
    State(app): State<App>,
    Path(id): Path<String>,
    Params(wait): Params<Wait>,
) -> Result<(StatusCode, Json<Value>), Problem> {
    let run = app.engine.retry(&id, None).await?;
    let status = continued(&run);
    answer_when_done(run, status, wait.duration()).await
}

pub(crate) async fn cancel(
    State(app): State<App>,
    Path(id): Path<String>,
) -> Result<Json<Value>, Problem> {
    let r = app.engine.cancel(&id).await?;
    Ok(Json(summary(&r)))
}

/// Resumes, on their own tasks, the runs a server that died left `running` (those whose
/// recorded owner process is gone; a run another live process drives is left alone) and
/// starts the ones it left `queued`.
pub(crate) async fn resume_orphans(service: &weft_service::Service) {
    let engine = service.engine();
    let every = usize::MAX >> 1;
    if let Ok(queued) = engine
        .store()
        .list_runs(&RunQuery::in_status(RunStatus::Queued, every))
        .await
    {
        service.restart_queued(queued);
    }
    let Ok(running) = engine
        .store()
        .list_runs(&RunQuery::in_status(RunStatus::Running, every))
        .await
    else {
        return;
    };
    for r in running {
        let engine = engine.clone();
        tokio::spawn(async move {
            let resumed = match engine.resume(&r.id, false).await {
                Ok(underway) => underway.end().await,
                Err(e) => Err(e),
            };
            if let Err(e) = resumed {
                eprintln!("weft serve: run {} was not resumed: {e}", r.id);
            }
        });
    }
}
