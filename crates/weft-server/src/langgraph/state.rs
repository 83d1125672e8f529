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

/// How many of a thread's checkpoints (its runs) are looked through for one a client
/// names; a thread with more answers for its newest this many.
const CHECKPOINTS_SEARCHED: usize = 100_000;

/// One of a thread's checkpoints, newest first: the values a client wrote since the
/// latest run, or the state a run left, with the run before it as its parent.
enum Checkpoint {
    Written,
    AfterRun { run: String, parent: Option<String> },
}

impl Checkpoint {
    fn id(&self, thread: &Thread) -> String {
        match self {
            Checkpoint::Written => written_checkpoint(thread),
            Checkpoint::AfterRun { run, .. } => run.clone(),
        }
    }

    /// The state at this checkpoint, as LangGraph's clients read it (`None` for a run
    /// that is no longer stored).
    async fn state(&self, app: &App, thread: &Thread) -> Result<Option<Value>, LgError> {
        match self {
            Checkpoint::Written => {
                let latest = latest_run(app, thread).await?;
                let values = thread.values.clone().unwrap_or_else(|| json!({}));
                Ok(Some(state_written(thread, &values, latest.as_ref())))
            }
            Checkpoint::AfterRun { run, parent } => {
                let run = app.engine.store().get_run(run).await?;
                Ok(run.map(|r| state_after(thread, Some(&r), parent.as_deref())))
            }
        }
    }
}

/// Thread `thread`'s checkpoints, newest first.
async fn checkpoints(app: &App, thread: &Thread) -> Result<Vec<Checkpoint>, LgError> {
    let runs = thread_store(app)?
        .thread_runs(&thread.id, CHECKPOINTS_SEARCHED)
        .await?;
    let mut out = Vec::with_capacity(runs.len() + 1);
    if thread.values.is_some() {
        out.push(Checkpoint::Written);
    }
    for (i, run) in runs.iter().enumerate() {
        out.push(Checkpoint::AfterRun {
            run: run.clone(),
            parent: runs.get(i + 1).cloned(),
        });
    }
    Ok(out)
}

/// The checkpoint a client names: `{thread_id, checkpoint_ns, checkpoint_id}`, any of
/// them left out.
#[derive(Deserialize, Default)]
pub(crate) struct Named {
    #[serde(default)]
    checkpoint_ns: Option<String>,
    #[serde(default)]
    checkpoint_id: Option<String>,
    /// The thread is the path's; a client sends it too.
    #[serde(default, rename = "thread_id")]
    _thread_id: Option<String>,
    #[serde(default, rename = "checkpoint_map")]
    _map: Option<Value>,
}

impl Named {
    /// A namespace other than the root names a subgraph's checkpoints: Weft's flows
    /// have none.
    fn in_a_subgraph(&self) -> bool {
        self.checkpoint_ns
            .as_deref()
            .is_some_and(|ns| !ns.is_empty())
    }
}

/// `POST /threads/{id}/state/checkpoint`: `{checkpoint, subgraphs}`, what LangGraph's
/// `RemoteGraph` asks for every `get_state`.
#[derive(Deserialize)]
pub(crate) struct AtCheckpoint {
    #[serde(default)]
    checkpoint: Named,
    #[serde(default, rename = "subgraphs")]
    _subgraphs: bool,
}

pub(crate) async fn at_checkpoint(
    State(app): State<App>,
    Path(id): Path<String>,
    body: Result<Json<AtCheckpoint>, JsonRejection>,
) -> Result<Json<Value>, LgError> {
    let Json(at) = body?;
    state_at(&app, &id, &at.checkpoint).await
}

/// `GET /threads/{id}/state/{checkpoint_id}` (the clients' older form).
pub(crate) async fn at_checkpoint_id(
    State(app): State<App>,
    Path((id, checkpoint_id)): Path<(String, String)>,
) -> Result<Json<Value>, LgError> {
    let named = Named {
        checkpoint_id: Some(checkpoint_id),
        ..Named::default()
    };
    state_at(&app, &id, &named).await
}

/// The state of thread `id` at the checkpoint `named` names (its latest when it names
/// none); a checkpoint the thread does not have is a `404`.
async fn state_at(app: &App, id: &str, named: &Named) -> Result<Json<Value>, LgError> {
    let not_found = |c: &str| LgError::not_found("Checkpoint", c);
    if named.in_a_subgraph() {
        return Err(not_found(named.checkpoint_ns.as_deref().unwrap_or("")));
    }
    let Some(wanted) = named.checkpoint_id.as_deref() else {
        return read(State(app.clone()), Path(id.to_owned())).await;
    };
    let thread = find(app, id).await?;
    for c in checkpoints(app, &thread).await? {
        if c.id(&thread) == wanted {
            return c
                .state(app, &thread)
                .await?
                .map(Json)
                .ok_or_else(|| not_found(wanted));
        }
    }
    Err(not_found(wanted))
}

/// `POST /threads/{id}/history`: newest first, at most `limit`; `before` a checkpoint,
/// only older ones; `metadata`, only those whose metadata holds each of its entries;
/// `checkpoint` with a namespace other than the root names a subgraph (none here).
#[derive(Deserialize, Default)]
pub(crate) struct History {
    #[serde(default = "ten")]
    limit: usize,
    #[serde(default)]
    before: Option<Named>,
    #[serde(default)]
    metadata: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    checkpoint: Option<Named>,
}

fn ten() -> usize {
    10
}

pub(crate) async fn history(
    State(app): State<App>,
    Path(id): Path<String>,
    body: Option<Json<History>>,
) -> Result<Json<Vec<Value>>, LgError> {
    let h = body.map(|Json(h)| h).unwrap_or_else(|| History {
        limit: ten(),
        ..History::default()
    });
    let thread = find(&app, &id).await?;
    if h.checkpoint.as_ref().is_some_and(Named::in_a_subgraph) {
        return Ok(Json(Vec::new()));
    }
    let all = checkpoints(&app, &thread).await?;
    let start = match h.before.as_ref().and_then(|b| b.checkpoint_id.as_deref()) {
        Some(before) => match all.iter().position(|c| c.id(&thread) == before) {
            Some(at) => at + 1,
            None => return Err(LgError::not_found("Checkpoint", before)),
        },
        None => 0,
    };
    let mut states = Vec::new();
    for c in &all[start..] {
        if states.len() >= h.limit {
            break;
        }
        let Some(state) = c.state(&app, &thread).await? else {
            continue;
        };
        let holds = |(k, v): (&String, &Value)| state["metadata"].get(k) == Some(v);
        if h.metadata.as_ref().is_none_or(|m| m.iter().all(holds)) {
            states.push(state);
        }
    }
    Ok(Json(states))
}
