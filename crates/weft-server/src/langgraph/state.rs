//! A thread's state as LangGraph reads and writes it: the values after its latest run
//! (a checkpoint per run, whose id is the run's), its history newest first, and values
//! a client writes between runs (`update_state`), which the next run starts from.

use super::threads::{current_values, find, latest_run};
use super::{LgError, interrupts_of, thread_store, time, values_of};
use crate::App;
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use weft_core::ports::{RunRecord, RunStatus, Thread};

/// A thread's state after `run` (the checkpoint `run` left), with `parent` the run
/// before it.
fn state_after(thread: &Thread, run: Option<&RunRecord>, parent: Option<&str>) -> Value {
    let checkpoint = |id: Option<&str>| {
        id.map(|id| json!({"thread_id": thread.id, "checkpoint_ns": "", "checkpoint_id": id}))
    };
    let Some(run) = run else {
        return json!({
            "values": {}, "next": [], "tasks": [], "interrupts": [],
            "checkpoint": null, "parent_checkpoint": null,
            "metadata": {}, "created_at": null,
        });
    };
    let interrupts = interrupts_of(run);
    let paused = !interrupts.is_empty();
    let tasks = if paused {
        json!([{
            "id": run.id, "name": run.flow_name, "error": null,
            "interrupts": interrupts, "checkpoint": null, "state": null, "result": null,
        }])
    } else {
        json!([])
    };
    json!({
        "values": values_of(run),
        "next": if paused { json!([run.flow_name]) } else { json!([]) },
        "tasks": tasks,
        "interrupts": interrupts,
        "checkpoint": checkpoint(Some(&run.id)),
        "parent_checkpoint": checkpoint(parent),
        "checkpoint_id": run.id,
        "parent_checkpoint_id": parent,
        "metadata": {
            "run_id": run.id,
            "thread_id": thread.id,
            "graph_id": run.flow_name,
            "assistant_id": run.flow_name,
            "source": "loop",
            "parents": {},
            "run_attempt": 1,
            "status": super::run_status(run.status),
        },
        "created_at": time(run.updated_ms),
    })
}

/// The state a client's written values make: a checkpoint of their own (named after
/// when they were written), after the latest run's.
fn state_written(thread: &Thread, values: &Value, latest: Option<&RunRecord>) -> Value {
    let id = written_checkpoint(thread);
    let parent =
        latest.map(|r| json!({"thread_id": thread.id, "checkpoint_ns": "", "checkpoint_id": r.id}));
    json!({
        "values": values,
        "next": [],
        "tasks": [],
        "interrupts": [],
        "checkpoint": {"thread_id": thread.id, "checkpoint_ns": "", "checkpoint_id": id},
        "parent_checkpoint": parent,
        "checkpoint_id": id,
        "parent_checkpoint_id": latest.map(|r| r.id.as_str()),
        "metadata": {"thread_id": thread.id, "source": "update", "parents": {}},
        "created_at": time(thread.updated_ms),
    })
}

/// The id of the checkpoint a client's written values make.
pub(crate) fn written_checkpoint(thread: &Thread) -> String {
    format!("{}-update-{}", thread.id, thread.updated_ms)
}

/// `GET /threads/{id}/state`.
pub(crate) async fn read(
    State(app): State<App>,
    Path(id): Path<String>,
) -> Result<Json<Value>, LgError> {
    let thread = find(&app, &id).await?;
    let latest = latest_run(&app, &thread).await?;
    if let Some(values) = &thread.values {
        return Ok(Json(state_written(&thread, values, latest.as_ref())));
    }
    let runs = thread_store(&app)?.thread_runs(&id, 2).await?;
    Ok(Json(state_after(
        &thread,
        latest.as_ref(),
        runs.get(1).map(String::as_str),
    )))
}

/// `POST /threads/{id}/state`: `{values}` written over the thread's values as a run's
/// input would be (`messages` appended); `as_node` is accepted and has no meaning here.
#[derive(Deserialize)]
pub(crate) struct Update {
    values: Value,
    #[serde(default)]
    checkpoint: Option<Value>,
    #[serde(default)]
    checkpoint_id: Option<String>,
}

pub(crate) async fn update(
    State(app): State<App>,
    Path(id): Path<String>,
    body: Result<Json<Update>, JsonRejection>,
) -> Result<Json<Value>, LgError> {
    let Json(u) = body?;
    if u.checkpoint.is_some() || u.checkpoint_id.is_some() {
        return Err(LgError::invalid(
            "`checkpoint` is not supported by Weft: values are written over the thread's latest",
        ));
    }
    let thread = find(&app, &id).await?;
    let latest = latest_run(&app, &thread).await?;
    if latest
        .as_ref()
        .is_some_and(|r| matches!(r.status, RunStatus::Queued | RunStatus::Running))
    {
        return Err(LgError::new(
            StatusCode::CONFLICT,
            "Thread is busy: its values can be written once its run ends or pauses",
        ));
    }
    let base = current_values(&thread, latest.as_ref()).unwrap_or_else(|| json!({}));
    let now = weft_core::event::now_ms() as i64;
    let mut values = super::start::with_input(base, u.values);
    super::messages::normalize(&mut values, &format!("{id}-update-{now}"));
    let written = thread_store(&app)?
        .set_thread_values(&id, &values, now)
        .await?
        .ok_or_else(|| LgError::not_found("Thread", &id))?;
    let checkpoint = written_checkpoint(&written);
    Ok(Json(json!({
        "checkpoint": {"thread_id": id, "checkpoint_ns": "", "checkpoint_id": checkpoint},
    })))
}

/// `POST /threads/{id}/history`.
#[derive(Deserialize, Default)]
pub(crate) struct History {
    #[serde(default = "ten")]
    limit: usize,
}

fn ten() -> usize {
    10
}

pub(crate) async fn history(
    State(app): State<App>,
    Path(id): Path<String>,
    body: Option<Json<History>>,
) -> Result<Json<Vec<Value>>, LgError> {
    let limit = body.map(|Json(h)| h.limit).unwrap_or_else(ten);
    let thread = find(&app, &id).await?;
    // One more than asked for: the oldest shown names its parent.
    let ids = thread_store(&app)?
        .thread_runs(&id, limit.saturating_add(1))
        .await?;
    let mut states = Vec::new();
    if let Some(values) = &thread.values {
        let latest = latest_run(&app, &thread).await?;
        states.push(state_written(&thread, values, latest.as_ref()));
    }
    for (i, run_id) in ids.iter().enumerate() {
        if states.len() >= limit {
            break;
        }
        if let Some(run) = app.engine.store().get_run(run_id).await? {
            let parent = ids.get(i + 1).map(String::as_str);
            states.push(state_after(&thread, Some(&run), parent));
        }
    }
    Ok(Json(states))
}
