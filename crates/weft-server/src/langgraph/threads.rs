//! Threads: create, read, search, change metadata, delete; a thread's values and
//! status, read from its latest run (its state and history are [`super::state`]'s).

use super::{LgError, interrupts_of, thread_store, time, values_of};
use crate::App;
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use weft_core::ports::{RunRecord, RunStatus, Thread, ThreadQuery};

/// The latest run of `thread`, if it has one that the store still holds.
pub(crate) async fn latest_run(app: &App, thread: &Thread) -> Result<Option<RunRecord>, LgError> {
    match &thread.last_run {
        Some(id) => Ok(app.engine.store().get_run(id).await?),
        None => Ok(None),
    }
}

/// Thread `id`, or a `404`.
pub(crate) async fn find(app: &App, id: &str) -> Result<Thread, LgError> {
    thread_store(app)?
        .thread(id)
        .await?
        .ok_or_else(|| LgError::not_found("Thread", id))
}

/// The thread's values now: those a client wrote since its latest run, else that
/// run's; `None` for a thread that has neither.
pub(crate) fn current_values(thread: &Thread, latest: Option<&RunRecord>) -> Option<Value> {
    thread.values.clone().or_else(|| latest.map(values_of))
}

/// A thread's status as LangGraph names it, from its latest run.
pub(crate) fn thread_status(latest: Option<&RunRecord>) -> &'static str {
    match latest.map(|r| r.status) {
        Some(RunStatus::Queued | RunStatus::Running) => "busy",
        Some(RunStatus::Paused) => "interrupted",
        Some(RunStatus::Failed) => "error",
        _ => "idle",
    }
}

/// A thread as LangGraph's clients read one.
pub(crate) async fn shown(app: &App, thread: &Thread) -> Result<Value, LgError> {
    let latest = latest_run(app, thread).await?;
    let values = current_values(thread, latest.as_ref()).unwrap_or_else(|| json!({}));
    let interrupts = match &latest {
        Some(r) if r.status == RunStatus::Paused => json!({ r.id.clone(): interrupts_of(r) }),
        _ => json!({}),
    };
    let state_updated = latest.as_ref().map_or(thread.updated_ms, |r| r.updated_ms);
    let error = match &latest {
        Some(r) if r.status == RunStatus::Failed => r.error.clone().unwrap_or(Value::Null),
        _ => Value::Null,
    };
    Ok(json!({
        "thread_id": thread.id,
        "created_at": time(thread.created_ms),
        "updated_at": time(thread.updated_ms),
        "state_updated_at": time(state_updated),
        "metadata": thread.metadata,
        "status": thread_status(latest.as_ref()),
        "config": {"configurable": {}},
        "values": values,
        "error": error,
        "interrupts": interrupts,
    }))
}

/// `POST /threads`.
#[derive(Deserialize, Default)]
pub(crate) struct NewThread {
    thread_id: Option<String>,
    metadata: Option<Map<String, Value>>,
    /// `raise` (the default: `409` when it exists) or `do_nothing` (answer it).
    if_exists: Option<String>,
}

/// A new thread with `metadata`, stored in `threads` under `id` (a new id when `None`).
pub(crate) async fn new_thread(
    threads: &dyn weft_core::ports::ThreadStore,
    id: Option<String>,
    metadata: Map<String, Value>,
) -> Result<Thread, weft_core::ports::StoreError> {
    let now = weft_core::event::now_ms() as i64;
    let thread = Thread {
        id: id.unwrap_or_else(|| uuid::Uuid::now_v7().to_string()),
        metadata: Value::Object(metadata),
        created_ms: now,
        updated_ms: now,
        runs: 0,
        last_run: None,
        values: None,
    };
    threads.create_thread(&thread).await?;
    Ok(thread)
}

pub(crate) async fn create(
    State(app): State<App>,
    body: Result<Json<NewThread>, JsonRejection>,
) -> Result<Json<Value>, LgError> {
    let Json(new) = body?;
    let id = new.thread_id.clone();
    let threads = thread_store(&app)?;
    match new_thread(threads, id.clone(), new.metadata.unwrap_or_default()).await {
        Ok(t) => Ok(Json(shown(&app, &t).await?)),
        Err(weft_core::ports::StoreError::Conflict(_)) => {
            let id = id.unwrap_or_default();
            match new.if_exists.as_deref() {
                Some("do_nothing") => Ok(Json(shown(&app, &find(&app, &id).await?).await?)),
                _ => Err(LgError::new(
                    StatusCode::CONFLICT,
                    format!("Thread {id} already exists"),
                )),
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// `POST /threads/search`.
#[derive(Deserialize, Default)]
pub(crate) struct Search {
    metadata: Option<Map<String, Value>>,
    ids: Option<Vec<String>>,
    status: Option<String>,
    #[serde(default = "super::assistants::fifty")]
    limit: usize,
    #[serde(default)]
    offset: usize,
}

pub(crate) async fn search(
    State(app): State<App>,
    body: Result<Json<Search>, JsonRejection>,
) -> Result<Json<Vec<Value>>, LgError> {
    let Json(q) = body?;
    if let Some(s) = &q.status
        && !["idle", "busy", "interrupted", "error"].contains(&s.as_str())
    {
        return Err(LgError::invalid(format!(
            "status `{s}` is not one of idle, busy, interrupted, error"
        )));
    }
    // The status is read from each thread's latest run: with a status to match, the
    // store's page is the whole match of the rest, paged here once filtered.
    let (offset, limit) = match q.status {
        Some(_) => (0, usize::MAX),
        None => (q.offset, q.limit),
    };
    let query = ThreadQuery {
        metadata: q.metadata,
        ids: q.ids,
        offset,
        limit,
    };
    let mut found = Vec::new();
    for t in thread_store(&app)?.threads(&query).await? {
        let thread = shown(&app, &t).await?;
        if q.status.as_deref().is_none_or(|s| thread["status"] == s) {
            found.push(thread);
        }
    }
    if q.status.is_some() {
        found = found.into_iter().skip(q.offset).take(q.limit).collect();
    }
    Ok(Json(found))
}

pub(crate) async fn show(
    State(app): State<App>,
    Path(id): Path<String>,
) -> Result<Json<Value>, LgError> {
    Ok(Json(shown(&app, &find(&app, &id).await?).await?))
}

/// `PATCH /threads/{id}`: `{metadata}` merged into the thread's.
#[derive(Deserialize)]
pub(crate) struct Update {
    #[serde(default)]
    metadata: Map<String, Value>,
}

pub(crate) async fn update(
    State(app): State<App>,
    Path(id): Path<String>,
    body: Result<Json<Update>, JsonRejection>,
) -> Result<Json<Value>, LgError> {
    let Json(u) = body?;
    let now = weft_core::event::now_ms() as i64;
    let thread = thread_store(&app)?
        .merge_thread_metadata(&id, &u.metadata, now)
        .await?
        .ok_or_else(|| LgError::not_found("Thread", &id))?;
    Ok(Json(shown(&app, &thread).await?))
}

/// `DELETE /threads/{id}`: the thread and its list of runs; the runs queued on it are
/// cancelled (its stored runs stay).
pub(crate) async fn delete(
    State(door): State<super::Door>,
    Path(id): Path<String>,
) -> Result<StatusCode, LgError> {
    let app = &door.app;
    for queued in door.queue.of_thread(&id) {
        if let Some(run_id) = queued["run_id"].as_str() {
            door.queue.cancel(app, &id, run_id).await;
        }
    }
    if thread_store(app)?.delete_thread(&id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(LgError::not_found("Thread", &id))
    }
}
