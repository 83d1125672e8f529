//! Runs on a thread: started in the background, waited for, or streamed ([`super::start`]
//! says how a run starts); rejoined, listed, read and cancelled, queued ones too.

use super::modes::{EventId, Modes};
use super::parts::Streamed;
use super::request::RunCreate;
use super::start::{Begun, begin, modes_of, strategy_of, thread_of};
use super::stream::{self, Opening};
use super::threads::find;
use super::{Door, LgError, run_status, thread_store, time};
use crate::App;
use crate::auth::Principal;
use axum::Extension;
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use weft_core::ports::RunRecord;
use weft_engine::EngineError;

/// A run as LangGraph's clients read one.
fn shown(run: &RunRecord, thread_id: &str) -> Value {
    json!({
        "run_id": run.id,
        "thread_id": thread_id,
        "assistant_id": run.flow_name,
        "created_at": time(run.created_ms),
        "updated_at": time(run.updated_ms),
        "status": run_status(run.status),
        "metadata": {},
        "multitask_strategy": strategy_of(run),
        "kwargs": {
            "input": run.input,
            "command": null,
            "config": {"configurable": {
                "run_id": run.id,
                "thread_id": thread_id,
                "graph_id": run.flow_name,
                "assistant_id": run.flow_name,
            }},
            "stream_mode": modes_of(run).to_json(),
        },
    })
}

fn locations(
    thread_id: &str,
    run_id: &str,
    stream: bool,
) -> [(header::HeaderName, HeaderValue); 2] {
    let run = format!("/threads/{thread_id}/runs/{run_id}");
    let follow = if stream {
        format!("{run}/stream")
    } else {
        format!("{run}/join")
    };
    let value = |s: String| HeaderValue::from_str(&s).unwrap_or(HeaderValue::from_static("/"));
    [
        (header::CONTENT_LOCATION, value(run)),
        (header::LOCATION, value(follow)),
    ]
}

/// The run `run_id` of thread `thread_id` (a run of another thread is not found).
async fn run_of(app: &App, thread_id: &str, run_id: &str) -> Result<RunRecord, LgError> {
    app.engine
        .store()
        .get_run(run_id)
        .await?
        .filter(|run| thread_of(run) == Some(thread_id))
        .ok_or_else(|| LgError::not_found("Run", run_id))
}

/// A run of a thread: stored, or queued in this process behind the thread's running run.
enum Found {
    Stored(Box<RunRecord>),
    Queued(Value),
}

/// The run `run_id` of thread `thread_id` (a run of another thread is not found).
async fn found(door: &Door, thread_id: &str, run_id: &str) -> Result<Found, LgError> {
    match run_of(&door.app, thread_id, run_id).await {
        Ok(run) => Ok(Found::Stored(Box::new(run))),
        Err(e) if e.is_not_found() => match door.queue.shown(thread_id, run_id) {
            Some(queued) => Ok(Found::Queued(queued)),
            // Started between the two reads.
            None => run_of(&door.app, thread_id, run_id)
                .await
                .map(|r| Found::Stored(Box::new(r))),
        },
        Err(e) => Err(e),
    }
}

/// `POST /threads/{id}/runs`: starts a run in the background (or queues it).
pub(crate) async fn create(
    State(door): State<Door>,
    Extension(principal): Extension<Principal>,
    Path(thread_id): Path<String>,
    body: Result<Json<RunCreate>, JsonRejection>,
) -> Result<Response, LgError> {
    let Json(req) = body?;
    let begun = begin(&door, &thread_id, req, &principal).await?;
    created(&door, &begun).await
}

/// The answer to a run started in the background: the run (queued or stored), where it
/// is and where to wait for it.
async fn created(door: &Door, begun: &Begun) -> Result<Response, LgError> {
    let shown = match found(door, &begun.thread_id, &begun.run_id).await? {
        Found::Stored(run) => shown(&run, &begun.thread_id),
        Found::Queued(queued) => queued,
    };
    let headers = locations(&begun.thread_id, &begun.run_id, false);
    Ok((headers, Json(shown)).into_response())
}

/// The values run `begun` ends or pauses with: waited for as it goes on, or, queued,
/// followed through its events once it starts.
async fn values_when_done(app: &App, begun: Begun) -> Result<Value, LgError> {
    match begun.underway {
        Some(underway) => {
            underway.end().await?;
            settled_values(app, &begun.run_id).await
        }
        None => result_when_done(app, &begun.run_id, begun.events).await,
    }
}

/// The values run `run_id` ended or paused with, once its record says so.
async fn settled_values(app: &App, run_id: &str) -> Result<Value, LgError> {
    let run = stream::settled(app, run_id)
        .await
        .ok_or_else(|| EngineError::NotFound(run_id.to_owned()))?;
    Ok(stream::final_values(&run))
}

/// The values a run ended or paused with, as `/runs/wait` and `/join` answer them: a
/// paused run's interrupts under `__interrupt__`, a failed run's error as `{__error__}`.
async fn result_when_done(
    app: &App,
    run_id: &str,
    mut events: stream::Events,
) -> Result<Value, LgError> {
    stream::until_it_stops(&mut events).await?;
    settled_values(app, run_id).await
}

/// `POST /threads/{id}/runs/wait`.
pub(crate) async fn wait(
    State(door): State<Door>,
    Extension(principal): Extension<Principal>,
    Path(thread_id): Path<String>,
    body: Result<Json<RunCreate>, JsonRejection>,
) -> Result<Response, LgError> {
    let Json(req) = body?;
    let begun = begin(&door, &thread_id, req, &principal).await?;
    Ok(waited(&door, begun).await?.into_response())
}

/// The answer to a run waited for: the values it ends or pauses with, where it is and
/// where to join it.
async fn waited(door: &Door, begun: Begun) -> Result<impl IntoResponse + use<>, LgError> {
    let headers = locations(&begun.thread_id, &begun.run_id, false);
    let values = values_when_done(&door.app, begun).await?;
    Ok((headers, Json(values)))
}

/// `POST /threads/{id}/runs/stream`.
pub(crate) async fn stream(
    State(door): State<Door>,
    Extension(principal): Extension<Principal>,
    Path(thread_id): Path<String>,
    body: Result<Json<RunCreate>, JsonRejection>,
) -> Result<Response, LgError> {
    let Json(req) = body?;
    let begun = begin(&door, &thread_id, req, &principal).await?;
    Ok(streamed(&door, begun))
}

/// The SSE answer of a run that was begun, with where it is and where its stream is.
fn streamed(door: &Door, begun: Begun) -> Response {
    let who = Streamed {
        run_id: begun.run_id,
        thread_id: begun.thread_id,
        flow: begun.flow,
    };
    let opening = Opening {
        metadata: true,
        values: begun.values,
        after: None,
    };
    sse_answer(door, who, begun.events, begun.modes, opening)
}

/// A run's stream as an answer, with where the run is and where its stream is.
fn sse_answer(
    door: &Door,
    who: Streamed,
    events: stream::Events,
    modes: Modes,
    opening: Opening,
) -> Response {
    let headers = locations(&who.thread_id, &who.run_id, true);
    let sse = stream::sse(&door.app, who, events, modes, opening);
    (headers, sse).into_response()
}

/// `GET /threads/{id}/runs/{run_id}/stream`: the run's stream again, from after
/// `Last-Event-ID` or from its start, in the modes it was started with (or those of
/// `?stream_mode=`).
pub(crate) async fn join_stream(
    State(door): State<Door>,
    Path((thread_id, run_id)): Path<(String, String)>,
    query: axum::extract::Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Result<Response, LgError> {
    let app = &door.app;
    let run = found(&door, &thread_id, &run_id).await?;
    let asked: Vec<Value> = query
        .0
        .iter()
        .filter(|(k, v)| k == "stream_mode" && !v.is_empty())
        .map(|(_, v)| Value::String(v.clone()))
        .collect();
    let modes = match (&run, asked.is_empty()) {
        (_, false) => Modes::parse(Some(&Value::Array(asked)))?,
        (Found::Stored(run), true) => modes_of(run),
        (Found::Queued(_), true) => door.queue.modes(&run_id).unwrap_or_default(),
    };
    let resume_from = match headers.get("last-event-id") {
        None => None,
        Some(v) => Some(v.to_str().ok().and_then(EventId::parse).ok_or_else(|| {
            LgError::invalid("Last-Event-ID is an id this server sent (`<seq>-<part>`)")
        })?),
    };
    let (events, flow) = match run {
        Found::Stored(run) => {
            let after = resume_from.and_then(|id| id.seq.checked_sub(1));
            (app.engine.follow(&run_id, after), run.flow_name)
        }
        Found::Queued(queued) => (
            app.engine.follow_before_start(&run_id),
            queued["assistant_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        ),
    };
    let who = Streamed {
        run_id,
        thread_id,
        flow,
    };
    let opening = Opening {
        metadata: resume_from.is_none(),
        values: None,
        after: resume_from,
    };
    Ok(sse_answer(&door, who, events, modes, opening))
}

/// `GET /threads/{id}/runs/{run_id}/join`: waits for the run to end or pause.
pub(crate) async fn join(
    State(door): State<Door>,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> Result<Json<Value>, LgError> {
    let events = match found(&door, &thread_id, &run_id).await? {
        Found::Stored(_) => door.app.engine.follow(&run_id, None),
        Found::Queued(_) => door.app.engine.follow_before_start(&run_id),
    };
    Ok(Json(result_when_done(&door.app, &run_id, events).await?))
}

/// `GET /threads/{id}/runs/{run_id}`.
pub(crate) async fn show(
    State(door): State<Door>,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> Result<Json<Value>, LgError> {
    Ok(Json(match found(&door, &thread_id, &run_id).await? {
        Found::Stored(run) => shown(&run, &thread_id),
        Found::Queued(queued) => queued,
    }))
}

/// `GET /threads/{id}/runs`: the thread's runs, newest first (queued ones first).
pub(crate) async fn list(
    State(door): State<Door>,
    Path(thread_id): Path<String>,
) -> Result<Json<Vec<Value>>, LgError> {
    let app = &door.app;
    find(app, &thread_id).await?;
    let ids = thread_store(app)?.thread_runs(&thread_id, 100).await?;
    let mut runs = door.queue.of_thread(&thread_id);
    for id in ids {
        if let Some(run) = app.engine.store().get_run(&id).await? {
            runs.push(shown(&run, &thread_id));
        }
    }
    Ok(Json(runs))
}

/// `POST /threads/{id}/runs/{run_id}/cancel`: cancels a running or paused run, or
/// drops a queued one; `409` once it has ended.
pub(crate) async fn cancel(
    State(door): State<Door>,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> Result<StatusCode, LgError> {
    if door.queue.cancel(&door.app, &thread_id, &run_id).await {
        return Ok(StatusCode::ACCEPTED);
    }
    run_of(&door.app, &thread_id, &run_id).await?;
    door.app.engine.cancel(&run_id).await?;
    Ok(StatusCode::ACCEPTED)
}

/// A thread made for a run without one (`/runs`, `/runs/wait`, `/runs/stream`), with
/// whether to keep it once the run ends or pauses.
async fn made_thread(door: &Door, req: &RunCreate) -> Result<(String, bool), LgError> {
    let keep = req.keeps_its_thread()?;
    let threads = thread_store(&door.app)?;
    let thread = super::threads::new_thread(threads, None, Default::default()).await?;
    Ok((thread.id, keep))
}

/// Drops the thread made for run `begun` once the run ends or pauses (its runs stay),
/// waiting on the run itself (a new thread has no run before it to queue behind).
fn drop_when_done(door: &Door, begun: &mut Begun) {
    let (door, thread_id) = (door.clone(), begun.thread_id.clone());
    let underway = begun.underway.take();
    tokio::spawn(async move {
        if let Some(underway) = underway {
            let _ = underway.end().await;
        }
        if let Ok(threads) = thread_store(&door.app) {
            let _ = threads.delete_thread(&thread_id).await;
        }
    });
}

/// Begins a run without a thread on one made for it, which is dropped once the run
/// ends or pauses unless the request keeps it.
async fn begin_without_thread(
    door: &Door,
    req: RunCreate,
    principal: &Principal,
) -> Result<Begun, LgError> {
    let (thread_id, keep) = made_thread(door, &req).await?;
    let mut begun = begin(door, &thread_id, req, principal).await?;
    if !keep {
        drop_when_done(door, &mut begun);
    }
    Ok(begun)
}

/// `POST /runs`: a run without a thread, in the background.
pub(crate) async fn create_stateless(
    State(door): State<Door>,
    Extension(principal): Extension<Principal>,
    body: Result<Json<RunCreate>, JsonRejection>,
) -> Result<Response, LgError> {
    let Json(req) = body?;
    let begun = begin_without_thread(&door, req, &principal).await?;
    created(&door, &begun).await
}

/// `POST /runs/wait`: a run without a thread, answered with the values it ends or
/// pauses with.
pub(crate) async fn wait_stateless(
    State(door): State<Door>,
    Extension(principal): Extension<Principal>,
    body: Result<Json<RunCreate>, JsonRejection>,
) -> Result<Response, LgError> {
    let Json(req) = body?;
    let (thread_id, keep) = made_thread(&door, &req).await?;
    let begun = begin(&door, &thread_id, req, &principal).await?;
    let answer = waited(&door, begun).await?;
    if !keep {
        thread_store(&door.app)?.delete_thread(&thread_id).await?;
    }
    Ok(answer.into_response())
}

/// `POST /runs/stream`: a run without a thread, streamed.
pub(crate) async fn stream_stateless(
    State(door): State<Door>,
    Extension(principal): Extension<Principal>,
    body: Result<Json<RunCreate>, JsonRejection>,
) -> Result<Response, LgError> {
    let Json(req) = body?;
    let begun = begin_without_thread(&door, req, &principal).await?;
    Ok(streamed(&door, begun))
}
