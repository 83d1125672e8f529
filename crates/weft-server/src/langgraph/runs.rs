//! Runs on a thread: started in the background, waited for, or streamed; rejoined,
//! listed, read and cancelled. A run's input is the thread's values with the request's
//! input written over them (`messages` appended, as LangGraph's `add_messages` does),
//! and `command: {resume}` answers the approval the thread's latest run waits for.

use super::stream::{self, Modes};
use super::threads::{find, latest_run, new_thread};
use super::{LgError, run_status, thread_store, time, values_of};
use crate::App;
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use weft_core::ports::{RunRecord, RunStatus, Thread};
use weft_engine::EngineError;

/// The settings key a run keeps its stream modes under, so that a client that rejoins
/// without naming them gets the ones it asked for.
const MODES_SETTING: &str = "langgraph_stream_mode";

/// The body of `POST /threads/{id}/runs`, `/runs/wait` and `/runs/stream`.
#[derive(Deserialize, Default)]
pub(crate) struct RunCreate {
    assistant_id: String,
    input: Option<Value>,
    command: Option<Command>,
    stream_mode: Option<Value>,
    multitask_strategy: Option<String>,
    if_not_exists: Option<String>,
    interrupt_before: Option<Value>,
    interrupt_after: Option<Value>,
    checkpoint: Option<Value>,
    checkpoint_id: Option<String>,
    after_seconds: Option<f64>,
    webhook: Option<String>,
}

/// `command`: only `resume` has a Weft meaning (the answer to an approval).
#[derive(Deserialize, Default)]
struct Command {
    resume: Option<Value>,
    update: Option<Value>,
    goto: Option<Value>,
}

impl RunCreate {
    /// Refuses the fields Weft has no meaning for, rather than ignoring them.
    fn refuse_unsupported(&self) -> Result<(), LgError> {
        let refused = [
            (
                "interrupt_before",
                self.interrupt_before.is_some(),
                "Weft pauses at approval steps the flow declares",
            ),
            (
                "interrupt_after",
                self.interrupt_after.is_some(),
                "Weft pauses at approval steps the flow declares",
            ),
            (
                "checkpoint",
                self.checkpoint.is_some() || self.checkpoint_id.is_some(),
                "a run starts from the thread's latest values; retry a failed run with POST /v1/runs/{id}/retry",
            ),
            (
                "after_seconds",
                self.after_seconds.is_some(),
                "use a schedule (POST /v1/schedules) or a `wait` step",
            ),
            (
                "webhook",
                self.webhook.is_some(),
                "not supported on this door",
            ),
        ];
        if let Some((field, _, why)) = refused.iter().find(|(_, given, _)| *given) {
            return Err(LgError::invalid(format!(
                "`{field}` is not supported by Weft: {why}"
            )));
        }
        if let Some(c) = &self.command
            && (c.update.is_some() || c.goto.is_some())
        {
            return Err(LgError::invalid(
                "`command.update` and `command.goto` are not supported by Weft: a command resumes an approval (`command: {resume: ...}`)",
            ));
        }
        if self.input.is_some() && self.command.is_some() {
            return Err(LgError::invalid("give `input` or `command`, not both"));
        }
        Ok(())
    }
}

/// A run that was started or resumed, with its events from where its stream begins
/// (followed before it started, or before its answer: not even a first token delta
/// is missed).
pub(crate) struct Begun {
    pub(crate) thread_id: String,
    pub(crate) run_id: String,
    pub(crate) events: stream::Events,
    pub(crate) modes: Modes,
}

/// The thread `id`, made when `if_not_exists` is `create`.
async fn thread_for(app: &App, id: &str, if_not_exists: Option<&str>) -> Result<Thread, LgError> {
    match (find(app, id).await, if_not_exists) {
        (Err(e), Some("create")) if e.is_not_found() => {
            match new_thread(thread_store(app)?, Some(id.to_owned()), Map::new()).await {
                Ok(t) => Ok(t),
                // Made by a concurrent request: use it.
                Err(weft_core::ports::StoreError::Conflict(_)) => find(app, id).await,
                Err(e) => Err(e.into()),
            }
        }
        (found, None | Some("reject" | "create")) => found,
        (_, Some(other)) => Err(LgError::invalid(format!(
            "`if_not_exists` is `reject` or `create`, not `{other}`"
        ))),
    }
}

/// Starts (or, with `command.resume`, continues) a run on thread `thread_id`.
pub(crate) async fn begin(app: &App, thread_id: &str, req: RunCreate) -> Result<Begun, LgError> {
    req.refuse_unsupported()?;
    let modes = Modes::parse(req.stream_mode.as_ref())?;
    let thread = thread_for(app, thread_id, req.if_not_exists.as_deref()).await?;
    let latest = latest_run(app, &thread).await?;
    if let Some(resume) = req.command.and_then(|c| c.resume) {
        return resume_run(app, &thread, latest, resume, modes).await;
    }
    let flow = super::assistants::flow_of(app, &req.assistant_id).await?;
    let checked = crate::flows::stored(app, &flow.flow_id).await?;
    let base = make_way(
        app,
        &thread,
        latest.as_ref(),
        req.multitask_strategy.as_deref(),
    )
    .await?;
    let input = with_input(base, req.input.unwrap_or(Value::Null));
    let run_id = uuid::Uuid::now_v7().to_string();
    let now = weft_core::event::now_ms() as i64;
    if !thread_store(app)?
        .join_thread(&thread.id, &run_id, thread.runs, now)
        .await?
    {
        return Err(busy());
    }
    let settings = settings_with_modes(app.run_settings.clone(), &modes);
    let events = app.engine.follow_before_start(&run_id);
    crate::runs::start_with(
        app,
        &checked.loaded,
        &checked.prepared,
        checked.source,
        input,
        Some(run_id.clone()),
        settings,
    )
    .await?;
    Ok(Begun {
        thread_id: thread.id,
        run_id,
        events,
        modes,
    })
}

fn busy() -> LgError {
    LgError::new(
        StatusCode::CONFLICT,
        "Thread is already running a task. Wait for it to finish or choose a different multitask strategy.",
    )
}

/// What a new run starts from, once the thread's active run is dealt with as
/// `strategy` says: the values of the thread's latest run (of the one before it, for
/// `rollback`, which also cancels the active run; `interrupt` cancels it and keeps its
/// values).
async fn make_way(
    app: &App,
    thread: &Thread,
    latest: Option<&RunRecord>,
    strategy: Option<&str>,
) -> Result<Value, LgError> {
    let active = latest.filter(|r| matches!(r.status, RunStatus::Queued | RunStatus::Running));
    let strategy = strategy.unwrap_or("reject");
    let Some(active) = active else {
        return match strategy {
            "reject" | "interrupt" | "rollback" | "enqueue" => {
                Ok(latest.map(values_of).unwrap_or_else(|| json!({})))
            }
            other => Err(unknown_strategy(other)),
        };
    };
    match strategy {
        "reject" => Err(busy()),
        "interrupt" => {
            let cancelled = app.engine.cancel(&active.id).await?;
            Ok(values_of(&cancelled))
        }
        "rollback" => {
            app.engine.cancel(&active.id).await?;
            let before = thread_store(app)?.thread_runs(&thread.id, 2).await?;
            match before.get(1) {
                Some(id) => Ok(app
                    .engine
                    .store()
                    .get_run(id)
                    .await?
                    .map(|r| values_of(&r))
                    .unwrap_or_else(|| json!({}))),
                None => Ok(json!({})),
            }
        }
        "enqueue" => Err(LgError::invalid(
            "`multitask_strategy: enqueue` is not supported yet: use `reject` and start the run when the thread is idle, or `interrupt`",
        )),
        other => Err(unknown_strategy(other)),
    }
}

fn unknown_strategy(s: &str) -> LgError {
    LgError::invalid(format!(
        "`multitask_strategy` is reject, interrupt, rollback or enqueue, not `{s}`"
    ))
}

/// The thread's values with `input` written over them: each key replaced, except
/// `messages`, whose new messages are appended (one with the `id` of a message there
/// replaces it).
pub(crate) fn with_input(base: Value, input: Value) -> Value {
    let Value::Object(mut values) = base else {
        return input;
    };
    let Value::Object(input) = input else {
        return if input.is_null() {
            Value::Object(values)
        } else {
            input
        };
    };
    for (key, new) in input {
        match (values.get_mut(&key), new) {
            (Some(Value::Array(old)), Value::Array(added)) if key == "messages" => {
                for m in added {
                    let same_id = m.get("id").filter(|id| !id.is_null());
                    match same_id.and_then(|id| old.iter().position(|o| o.get("id") == Some(id))) {
                        Some(i) => old[i] = m,
                        None => old.push(m),
                    }
                }
            }
            (_, new) => {
                values.insert(key, new);
            }
        }
    }
    Value::Object(values)
}

/// `command: {resume}`: answers the approval the thread's latest run waits for; the
/// stream goes on from where the run paused.
async fn resume_run(
    app: &App,
    thread: &Thread,
    latest: Option<RunRecord>,
    resume: Value,
    modes: Modes,
) -> Result<Begun, LgError> {
    let Some(run) = latest.filter(|r| r.status == RunStatus::Paused) else {
        return Err(LgError::new(
            StatusCode::CONFLICT,
            format!("thread {} has no interrupt to resume", thread.id),
        ));
    };
    let after = app
        .engine
        .store()
        .next_event_seq(&run.id)
        .await?
        .checked_sub(1);
    let events = app.engine.follow(&run.id, after);
    app.engine
        .answer_detached(&run.id, None, answer_of(resume))
        .await?;
    Ok(Begun {
        thread_id: thread.id.clone(),
        run_id: run.id,
        events,
        modes,
    })
}

/// A resume value as an approval's answer: a string is the decision, `true`/`false`
/// approve or reject, an object gives `decision` (or `action`/`type`, Agent Chat UI's
/// names) and `note`.
pub(crate) fn answer_of(resume: Value) -> Value {
    match resume {
        Value::Bool(yes) => json!({"decision": if yes { "approve" } else { "reject" }, "note": ""}),
        Value::String(s) => json!({"decision": s, "note": ""}),
        Value::Object(m) => {
            let decision = ["decision", "action", "type"]
                .iter()
                .find_map(|k| m.get(*k).and_then(Value::as_str))
                .unwrap_or("approve")
                .to_owned();
            let note = ["note", "args", "feedback"]
                .iter()
                .find_map(|k| m.get(*k).and_then(Value::as_str))
                .unwrap_or("")
                .to_owned();
            json!({"decision": decision, "note": note})
        }
        Value::Array(mut items) if !items.is_empty() => answer_of(items.swap_remove(0)),
        _ => json!({"decision": "approve", "note": ""}),
    }
}

fn settings_with_modes(settings: Option<Value>, modes: &Modes) -> Option<Value> {
    let mut settings = match settings {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    settings.insert(MODES_SETTING.into(), modes.to_json());
    Some(Value::Object(settings))
}

/// The stream modes run `run` was started with.
fn modes_of(run: &RunRecord) -> Modes {
    let given = run.settings.as_ref().and_then(|s| s.get(MODES_SETTING));
    Modes::parse(given).unwrap_or_default()
}

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
        "multitask_strategy": "reject",
        "kwargs": {"input": run.input},
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
    let runs = thread_store(app)?
        .thread_runs(thread_id, usize::MAX)
        .await?;
    if !runs.iter().any(|r| r == run_id) {
        return Err(LgError::not_found("Run", run_id));
    }
    app.engine
        .store()
        .get_run(run_id)
        .await?
        .ok_or_else(|| LgError::not_found("Run", run_id))
}

/// `POST /threads/{id}/runs`: starts a run in the background.
pub(crate) async fn create(
    State(app): State<App>,
    Path(thread_id): Path<String>,
    body: Result<Json<RunCreate>, JsonRejection>,
) -> Result<Response, LgError> {
    let Json(req) = body?;
    let begun = begin(&app, &thread_id, req).await?;
    let run = app
        .engine
        .store()
        .get_run(&begun.run_id)
        .await?
        .ok_or_else(|| LgError::not_found("Run", &begun.run_id))?;
    let headers = locations(&begun.thread_id, &begun.run_id, false);
    Ok((headers, Json(shown(&run, &begun.thread_id))).into_response())
}

/// The values a run ended or paused with, as `/runs/wait` and `/join` answer them: a
/// paused run's interrupts under `__interrupt__`, a failed run's error as `{__error__}`.
async fn result_when_done(
    app: &App,
    run_id: &str,
    mut events: stream::Events,
) -> Result<Value, LgError> {
    while let Some(next) = events.recv().await {
        let e = next?;
        if e.kind.is_final() || matches!(e.kind, weft_core::event::EventKind::RunPaused { .. }) {
            break;
        }
    }
    let run = stream::settled(app, run_id)
        .await
        .ok_or_else(|| EngineError::NotFound(run_id.to_owned()))?;
    Ok(stream::final_values(&run))
}

/// `POST /threads/{id}/runs/wait`.
pub(crate) async fn wait(
    State(app): State<App>,
    Path(thread_id): Path<String>,
    body: Result<Json<RunCreate>, JsonRejection>,
) -> Result<Response, LgError> {
    let Json(req) = body?;
    let begun = begin(&app, &thread_id, req).await?;
    let values = result_when_done(&app, &begun.run_id, begun.events).await?;
    let headers = locations(&begun.thread_id, &begun.run_id, false);
    Ok((headers, Json(values)).into_response())
}

/// `POST /threads/{id}/runs/stream`.
pub(crate) async fn stream(
    State(app): State<App>,
    Path(thread_id): Path<String>,
    body: Result<Json<RunCreate>, JsonRejection>,
) -> Result<Response, LgError> {
    let Json(req) = body?;
    let begun = begin(&app, &thread_id, req).await?;
    let headers = locations(&begun.thread_id, &begun.run_id, true);
    let sse = stream::sse(
        &app,
        begun.run_id.clone(),
        begun.events,
        None,
        begun.modes,
        true,
    );
    Ok((headers, sse).into_response())
}

/// `GET /threads/{id}/runs/{run_id}/stream`: the run's stream again, from after
/// `Last-Event-ID` or from its start, in the modes it was started with (or those of
/// `?stream_mode=`).
pub(crate) async fn join_stream(
    State(app): State<App>,
    Path((thread_id, run_id)): Path<(String, String)>,
    query: axum::extract::Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Result<Response, LgError> {
    let run = run_of(&app, &thread_id, &run_id).await?;
    let asked: Vec<Value> = query
        .0
        .iter()
        .filter(|(k, v)| k == "stream_mode" && !v.is_empty())
        .map(|(_, v)| Value::String(v.clone()))
        .collect();
    let modes = if asked.is_empty() {
        modes_of(&run)
    } else {
        Modes::parse(Some(&Value::Array(asked)))?
    };
    let resume_from = match headers.get("last-event-id") {
        None => None,
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(stream::EventId::parse)
                .ok_or_else(|| {
                    LgError::invalid("Last-Event-ID is an id this server sent (`<seq>-<part>`)")
                })?,
        ),
    };
    let after = resume_from.map(|id| id.seq.checked_sub(1)).unwrap_or(None);
    let first = resume_from.is_none();
    let events = app.engine.follow(&run_id, after);
    let sse = stream::sse(&app, run_id.clone(), events, resume_from, modes, first);
    Ok((locations(&thread_id, &run_id, true), sse).into_response())
}

/// `GET /threads/{id}/runs/{run_id}/join`: waits for the run to end or pause.
pub(crate) async fn join(
    State(app): State<App>,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> Result<Json<Value>, LgError> {
    run_of(&app, &thread_id, &run_id).await?;
    let events = app.engine.follow(&run_id, None);
    Ok(Json(result_when_done(&app, &run_id, events).await?))
}

/// `GET /threads/{id}/runs/{run_id}`.
pub(crate) async fn show(
    State(app): State<App>,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> Result<Json<Value>, LgError> {
    let run = run_of(&app, &thread_id, &run_id).await?;
    Ok(Json(shown(&run, &thread_id)))
}

/// `GET /threads/{id}/runs`: the thread's runs, newest first.
pub(crate) async fn list(
    State(app): State<App>,
    Path(thread_id): Path<String>,
) -> Result<Json<Vec<Value>>, LgError> {
    find(&app, &thread_id).await?;
    let ids = thread_store(&app)?.thread_runs(&thread_id, 100).await?;
    let mut runs = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(run) = app.engine.store().get_run(&id).await? {
            runs.push(shown(&run, &thread_id));
        }
    }
    Ok(Json(runs))
}

/// `POST /threads/{id}/runs/{run_id}/cancel`: cancels a running or paused run;
/// `409` once it has ended.
pub(crate) async fn cancel(
    State(app): State<App>,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> Result<StatusCode, LgError> {
    run_of(&app, &thread_id, &run_id).await?;
    app.engine.cancel(&run_id).await?;
    Ok(StatusCode::ACCEPTED)
}
