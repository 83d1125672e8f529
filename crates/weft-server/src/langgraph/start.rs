//! Starting a run on a thread: its input is the thread's values with the request's
//! input written over them (`messages` appended, as LangGraph's `add_messages` does);
//! a thread whose latest run is still going is dealt with as `multitask_strategy` says;
//! `command: {resume}` answers the approval the thread's latest run waits for.

use super::modes::Modes;
use super::queue::Waiting;
use super::request::RunCreate;
use super::threads::{current_values, find, latest_run, new_thread};
use super::{Door, LgError, thread_store, values_of};
use crate::App;
use crate::auth::Principal;
use axum::http::StatusCode;
use serde_json::{Map, Value, json};
use weft_core::ports::Scope;
use weft_core::ports::{RunRecord, RunStatus, Thread};

/// The settings key under which a run keeps what this door reads back about it: its
/// thread (a run of another thread is not found), the stream modes it was started
/// with (a client that rejoins without naming them gets those) and its strategy.
const SETTING: &str = "langgraph";

/// A run that was started, queued or resumed, with its events from where its stream
/// begins (followed before it started, or before its answer: not even a first token
/// delta is missed).
pub(crate) struct Begun {
    pub(crate) thread_id: String,
    pub(crate) run_id: String,
    /// The flow's name.
    pub(crate) flow: String,
    pub(crate) events: super::stream::Events,
    /// The run on its way (to wait for its end), unless it waits in the queue.
    pub(crate) underway: Option<weft_engine::Underway>,
    pub(crate) modes: Modes,
    /// A resumed run's values at its pause, which its stream sends first.
    pub(crate) values: Option<Value>,
}

/// What to do with a new run while the thread's latest run is still going.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strategy {
    /// Refuse the new run (`409`).
    Reject,
    /// Start it once the running one ends or pauses (LangGraph's default).
    Enqueue,
    /// Cancel the running one, start from its values.
    Interrupt,
    /// Cancel the running one, start from the values before it.
    Rollback,
}

impl Strategy {
    fn name(self) -> &'static str {
        match self {
            Strategy::Reject => "reject",
            Strategy::Enqueue => "enqueue",
            Strategy::Interrupt => "interrupt",
            Strategy::Rollback => "rollback",
        }
    }

    fn parse(given: Option<&str>) -> Result<Strategy, LgError> {
        Ok(match given {
            None | Some("enqueue") => Strategy::Enqueue,
            Some("reject") => Strategy::Reject,
            Some("interrupt") => Strategy::Interrupt,
            Some("rollback") => Strategy::Rollback,
            Some(other) => {
                return Err(LgError::invalid(format!(
                    "`multitask_strategy` is reject, enqueue, interrupt or rollback, not `{other}`"
                )));
            }
        })
    }
}

/// Whether `run` still goes on (a paused run waits, it does not hold its thread).
fn is_active(run: &RunRecord) -> bool {
    matches!(run.status, RunStatus::Queued | RunStatus::Running)
}

pub(crate) fn busy() -> LgError {
    LgError::new(
        StatusCode::CONFLICT,
        "Thread is already running a task. Wait for it to finish or choose a different multitask strategy.",
    )
}

/// A new run of a stored flow, to start on a thread once it may.
#[derive(Clone)]
pub(crate) struct NewRun {
    pub(crate) run_id: String,
    strategy: Strategy,
    /// The content hash of the flow as it was checked.
    pub(crate) flow_hash: String,
    pub(crate) flow_id: String,
    pub(crate) flow: String,
    pub(crate) input: Value,
    pub(crate) modes: Modes,
}

/// Starts (or, with `command.resume`, continues) a run on thread `thread_id`.
pub(crate) async fn begin(
    door: &Door,
    thread_id: &str,
    req: RunCreate,
    principal: &Principal,
) -> Result<Begun, LgError> {
    let app = &door.app;
    req.refuse_unsupported()?;
    let modes = Modes::parse(req.stream_mode.as_ref())?;
    let strategy = Strategy::parse(req.multitask_strategy.as_deref())?;
    let thread = thread_for(app, thread_id, req.if_not_exists.as_deref()).await?;
    let latest = latest_run(app, &thread).await?;
    let checkpoint = req.checkpoint_id().map(str::to_owned);
    if let Some(resume) = req.command.and_then(|c| c.resume) {
        // Resuming answers an approval: the route lets runs:write in, this needs more.
        if !principal.holds(Scope::ApprovalsWrite) {
            return Err(crate::access::missing(principal, Scope::ApprovalsWrite).into());
        }
        return resume_run(app, &thread, latest, resume, modes, principal).await;
    }
    let flow = super::assistants::flow_of(app, &req.assistant_id).await?;
    // Checked now, so that a flow that no longer loads is refused here, with its
    // diagnostics, and not when a queued run's turn comes.
    let checked = crate::flows::stored(app, &flow.flow_id).await?;
    let from = forked_from(app, &thread, latest.as_ref(), checkpoint.as_deref()).await?;
    let new = NewRun {
        run_id: uuid::Uuid::now_v7().to_string(),
        strategy,
        flow_hash: checked.prepared().hash().to_owned(),
        flow_id: flow.flow_id,
        flow: flow.name,
        input: req.input.unwrap_or(Value::Null),
        modes,
    };
    let events = app.engine.follow_before_start(&new.run_id);
    let begun = |new: &NewRun, events| Begun {
        thread_id: thread.id.clone(),
        run_id: new.run_id.clone(),
        flow: new.flow.clone(),
        events,
        underway: None,
        modes: new.modes.clone(),
        values: None,
    };
    let active = latest.as_ref().filter(|r| is_active(r));
    let base = match (active, strategy) {
        (None, _) => from.or_else(|| current_values(&thread, latest.as_ref())),
        (Some(_), Strategy::Reject) => return Err(busy()),
        (Some(_), Strategy::Enqueue) => {
            let started = begun(&new, events);
            door.queue.wait(door.clone(), Waiting::new(&thread.id, new));
            return Ok(started);
        }
        (Some(run), Strategy::Interrupt) => Some(values_of(&app.engine.cancel(&run.id).await?)),
        (Some(run), Strategy::Rollback) => {
            app.engine.cancel(&run.id).await?;
            values_before(app, &thread).await?
        }
    };
    let underway = start_now(app, &thread, &new, base, checked).await?;
    Ok(Begun {
        underway: Some(underway),
        ..begun(&new, events)
    })
}

/// The values a run that names `checkpoint` starts from: `None` when it names the
/// thread's head (its latest run, or the values written since), which the run starts
/// from anyway; an earlier run's values when it names one of the thread's earlier runs
/// (LangGraph's fork: editing or regenerating an earlier message); `404` otherwise.
async fn forked_from(
    app: &App,
    thread: &Thread,
    latest: Option<&RunRecord>,
    checkpoint: Option<&str>,
) -> Result<Option<Value>, LgError> {
    let Some(id) = checkpoint else {
        return Ok(None);
    };
    let head = match (&thread.values, latest) {
        (Some(_), _) => Some(super::state::written_checkpoint(thread)),
        (None, Some(run)) => Some(run.id.clone()),
        (None, None) => None,
    };
    if head.as_deref() == Some(id) {
        return Ok(None);
    }
    let earlier = app.engine.store().get_run(id).await?;
    let earlier = earlier
        .filter(|run| thread_of(run) == Some(thread.id.as_str()))
        .ok_or_else(|| LgError::not_found("Checkpoint", id))?;
    Ok(Some(values_of(&earlier)))
}

/// The values of the run before the thread's latest.
async fn values_before(app: &App, thread: &Thread) -> Result<Option<Value>, LgError> {
    let runs = thread_store(app)?.thread_runs(&thread.id, 2).await?;
    let Some(id) = runs.get(1) else {
        return Ok(None);
    };
    Ok(app.engine.store().get_run(id).await?.map(|r| values_of(&r)))
}

/// Joins `new` to `thread` (as its run count was when read) and starts it from `base`,
/// the thread's values; `409` when another run joined the thread first.
pub(crate) async fn start_now(
    app: &App,
    thread: &Thread,
    new: &NewRun,
    base: Option<Value>,
    checked: weft_service::Checked,
) -> Result<weft_engine::Underway, LgError> {
    let mut input = with_input(base.unwrap_or_else(|| json!({})), new.input.clone());
    super::messages::normalize(&mut input, &new.run_id);
    let now = weft_core::event::now_ms() as i64;
    let threads = thread_store(app)?;
    if !threads
        .join_thread(&thread.id, &new.run_id, thread.runs, now)
        .await?
    {
        return Err(busy());
    }
    // As LangGraph does, a thread names the graph its runs run, so that a client lists
    // a graph's threads by metadata (Agent Chat UI searches `{graph_id}`).
    if thread.metadata.get("graph_id").is_none() {
        let named = [("graph_id", &new.flow), ("assistant_id", &new.flow)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), Value::String(v.clone())))
            .collect();
        threads
            .merge_thread_metadata(&thread.id, &named, now)
            .await?;
    }
    let how = weft_service::How {
        run_id: Some(new.run_id.clone()),
        settings: settings_with(app.service.run_settings().cloned(), &thread.id, new),
        ..weft_service::How::default()
    };
    let started = app.service.start(&checked, Some(input), how).await?;
    Ok(started.underway)
}

/// Starts `new` on thread `thread_id` if its latest run no longer goes on: `false`
/// when it does (or another run joined first), so the caller waits again.
pub(crate) async fn start_if_idle(
    app: &App,
    thread_id: &str,
    new: &NewRun,
) -> Result<bool, LgError> {
    let thread = find(app, thread_id).await?;
    let latest = latest_run(app, &thread).await?;
    if latest.as_ref().is_some_and(is_active) {
        return Ok(false);
    }
    let checked = crate::flows::stored(app, &new.flow_id).await?;
    let base = current_values(&thread, latest.as_ref());
    match start_now(app, &thread, new, base, checked).await {
        Ok(_) => Ok(true),
        Err(e) if e.status == StatusCode::CONFLICT => Ok(false),
        Err(e) => Err(e),
    }
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
    principal: &Principal,
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
    let mut answer = answer_of(resume);
    principal.sign(&mut answer, None);
    let underway = app.engine.answer(&run.id, None, answer).await?;
    Ok(Begun {
        underway: Some(underway),
        thread_id: thread.id.clone(),
        values: Some(values_of(&run)),
        run_id: run.id,
        flow: run.flow_name,
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

/// The server's `settings` with what the door keeps about run `new` of `thread_id`.
pub(crate) fn settings_with(
    settings: Option<Value>,
    thread_id: &str,
    new: &NewRun,
) -> Option<Value> {
    let mut settings = match settings {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let kept = json!({
        "thread_id": thread_id,
        "stream_mode": new.modes.to_json(),
        "multitask_strategy": new.strategy.name(),
    });
    settings.insert(SETTING.into(), kept);
    Some(Value::Object(settings))
}

/// What the door kept about `run` under `key`.
fn kept<'r>(run: &'r RunRecord, key: &str) -> Option<&'r Value> {
    run.settings.as_ref()?.get(SETTING)?.get(key)
}

/// The stream modes `run` was started with.
pub(crate) fn modes_of(run: &RunRecord) -> Modes {
    Modes::parse(kept(run, "stream_mode")).unwrap_or_default()
}

/// The thread `run` was started on, when the door started it.
pub(crate) fn thread_of(run: &RunRecord) -> Option<&str> {
    kept(run, "thread_id")?.as_str()
}

/// The strategy `run` was started with.
pub(crate) fn strategy_of(run: &RunRecord) -> &str {
    kept(run, "multitask_strategy")
        .and_then(Value::as_str)
        .unwrap_or("enqueue")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_run(modes: &Value, strategy: Option<&str>) -> NewRun {
        NewRun {
            run_id: "r1".into(),
            strategy: Strategy::parse(strategy).unwrap(),
            flow_hash: "h".into(),
            flow_id: "f".into(),
            flow: "flow".into(),
            input: Value::Null,
            modes: Modes::parse(Some(modes)).unwrap(),
        }
    }

    #[test]
    fn input_replaces_values_by_key_and_appends_messages_replacing_by_id() {
        let base = json!({
            "topic": "old",
            "kept": 1,
            "messages": [{"id": "m1", "content": "hi"}, {"id": "m2", "content": "there"}]
        });
        let input = json!({
            "topic": "new",
            "messages": [{"id": "m2", "content": "edited"}, {"id": null, "content": "next"}]
        });
        assert_eq!(
            with_input(base, input),
            json!({
                "topic": "new",
                "kept": 1,
                "messages": [
                    {"id": "m1", "content": "hi"},
                    {"id": "m2", "content": "edited"},
                    {"id": null, "content": "next"}
                ]
            })
        );
        // No input keeps the values; an input that is not an object replaces them.
        assert_eq!(with_input(json!({"a": 1}), Value::Null), json!({"a": 1}));
        assert_eq!(with_input(json!({"a": 1}), json!("text")), json!("text"));
        assert_eq!(with_input(Value::Null, json!({"a": 2})), json!({"a": 2}));
    }

    #[test]
    fn a_resume_value_becomes_an_approval_answer_whatever_its_shape() {
        let answer = |decision: &str, note: &str| json!({"decision": decision, "note": note});
        assert_eq!(answer_of(json!(true)), answer("approve", ""));
        assert_eq!(answer_of(json!(false)), answer("reject", ""));
        assert_eq!(answer_of(json!("ship")), answer("ship", ""));
        // Agent Chat UI's human-in-the-loop answers: `type` and `args`.
        assert_eq!(
            answer_of(json!([{"type": "edit", "args": "shorter"}])),
            answer("edit", "shorter")
        );
        assert_eq!(
            answer_of(json!({"decision": "hold", "note": "wait"})),
            answer("hold", "wait")
        );
        assert_eq!(answer_of(json!({})), answer("approve", ""));
        assert_eq!(answer_of(json!([])), answer("approve", ""));
    }

    #[test]
    fn what_the_door_keeps_about_a_run_reads_back_beside_the_server_s_settings() {
        let new = new_run(&json!(["updates", "messages-tuple"]), Some("interrupt"));
        let settings = settings_with(Some(json!({"files": "/srv"})), "t1", &new);
        let mut run = RunRecord::new("r1".into(), "h".into(), "flow".into(), json!({}), 1);
        run.settings = settings;
        assert_eq!(run.settings.as_ref().unwrap()["files"], "/srv");
        assert_eq!(thread_of(&run), Some("t1"));
        assert_eq!(strategy_of(&run), "interrupt");
        assert_eq!(
            modes_of(&run).to_json(),
            json!(["updates", "messages-tuple"])
        );
        // A run the door did not start: no thread, LangGraph's defaults.
        let plain = RunRecord::new("r2".into(), "h".into(), "flow".into(), json!({}), 1);
        assert_eq!((thread_of(&plain), strategy_of(&plain)), (None, "enqueue"));
        assert_eq!(modes_of(&plain), Modes::default());
    }

    #[test]
    fn an_unknown_strategy_is_refused_naming_the_known_ones() {
        for (given, name) in [
            (None, "enqueue"),
            (Some("reject"), "reject"),
            (Some("rollback"), "rollback"),
        ] {
            assert_eq!(Strategy::parse(given).unwrap().name(), name);
        }
        let e = Strategy::parse(Some("later")).unwrap_err();
        assert!(
            e.detail.contains("reject, enqueue, interrupt or rollback"),
            "{}",
            e.detail
        );
    }

    #[test]
    fn a_paused_run_does_not_hold_its_thread() {
        let mut run = RunRecord::new("r".into(), "h".into(), "flow".into(), json!({}), 1);
        for (status, active) in [
            (RunStatus::Queued, true),
            (RunStatus::Running, true),
            (RunStatus::Paused, false),
            (RunStatus::Completed, false),
        ] {
            run.status = status;
            assert_eq!(is_active(&run), active, "{status:?}");
        }
    }
}
