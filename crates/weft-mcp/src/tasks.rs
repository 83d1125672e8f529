//! MCP Tasks (`io.modelcontextprotocol/tasks`, SEP-2663) for long runs. With a client
//! that negotiates the extension, `run_flow`, `retry_run`, `answer_approval` and
//! `test_flow` answer with a task at once instead of waiting:
//!
//! - a run's task id is its run id, and the task is the run as the store has it (it
//!   survives restarts and is the same on every server of a shared database): queued or
//!   running is `working`, paused at an approval `input_required` (an elicitation per
//!   approval, with its prompt and options), completed `completed` with the run's
//!   result, failed `completed` with the failure as a tool error (the extension keeps
//!   `failed` for protocol errors), cancelled `cancelled`;
//! - `tasks/cancel` cancels the run; `tasks/update` answers its approvals with the
//!   elicitations' answers, where models may answer approvals;
//! - `test_flow`'s runs are kept by no store: its tasks live in this process's memory
//!   for an hour.

use crate::WeftMcp;
use crate::failure::Failure;
use rmcp::ErrorData;
use rmcp::model::{
    CallToolResponse, CallToolResult, CreateTaskResult, DetailedTask, GetTaskResult, InputRequest,
    InputRequests, InputResponses, JsonObject, Task, TaskPayload, TaskStatus,
};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};
use weft_core::event::now_ms;
use weft_core::ports::{RunRecord, RunStatus};
use weft_engine::{EngineError, RunResult};

/// The tools that answer with a task when the client takes tasks.
pub(crate) const TASK_TOOLS: &[&str] = &["run_flow", "retry_run", "answer_approval", "test_flow"];
/// How often a client is asked to poll, in milliseconds.
const POLL_MS: u64 = 1_000;
/// How long a `test_flow` task is kept, in milliseconds.
const TEST_TTL_MS: u64 = 3_600_000;

/// `test_flow` tasks of this process, by id.
#[derive(Default, Clone)]
pub(crate) struct TestTasks(Arc<Mutex<HashMap<String, TestTask>>>);

struct TestTask {
    created_ms: i64,
    updated_ms: i64,
    /// The tool's result once the test run is over; `None` while it goes on.
    result: Option<CallToolResult>,
    cancelled: bool,
    abort: tokio::task::AbortHandle,
}

fn iso(ms: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_millis(t).to_string()
}

fn object(v: impl serde::Serialize) -> JsonObject {
    match serde_json::to_value(v) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

fn unknown(task_id: &str) -> ErrorData {
    ErrorData::invalid_params(format!("no task `{task_id}`"), None)
}

/// Runs task tool `name` with `arguments` and answers with its task; a call refused
/// before anything started (bad arguments, a flow that does not validate) is answered
/// at once, as without tasks.
pub(crate) async fn call(
    mcp: &WeftMcp,
    name: &str,
    mut arguments: Map<String, Value>,
) -> CallToolResponse {
    // A task answers at once: the client follows it with tasks/get.
    arguments.remove("wait_seconds");
    if name == "test_flow" {
        return start_test(mcp, arguments);
    }
    let started = match crate::tools::dispatch(mcp, name, arguments, None).await {
        Ok(v) => v,
        Err(failure) => return failure.into_result().into(),
    };
    let Some(run_id) = started.get("run_id").and_then(Value::as_str) else {
        return CallToolResult::structured(started).into();
    };
    match mcp.engine.store().get_run(run_id).await {
        Ok(Some(rec)) => CallToolResponse::Task(CreateTaskResult::new(run_task(&rec))),
        Ok(None) => Failure::new(format!("run {run_id} vanished"))
            .into_result()
            .into(),
        Err(e) => Failure::from(e).into_result().into(),
    }
}

/// The task of run `rec`, without its payload.
fn run_task(rec: &RunRecord) -> Task {
    Task::new(
        rec.id.clone(),
        status_of(rec),
        iso(rec.created_ms),
        iso(rec.updated_ms),
    )
    .with_poll_interval_ms(POLL_MS)
}

fn status_of(rec: &RunRecord) -> TaskStatus {
    match rec.status {
        RunStatus::Queued | RunStatus::Running => TaskStatus::Working,
        RunStatus::Paused if !approvals(rec).is_empty() => TaskStatus::InputRequired,
        // Paused only at waits: it goes on by itself.
        RunStatus::Paused => TaskStatus::Working,
        RunStatus::Completed | RunStatus::Failed => TaskStatus::Completed,
        RunStatus::Cancelled => TaskStatus::Cancelled,
    }
}

/// The approvals a paused run waits for (its waits without `or_approval` left out).
fn approvals(rec: &RunRecord) -> Vec<&Value> {
    rec.waiting
        .as_ref()
        .and_then(Value::as_array)
        .map(|w| {
            w.iter()
                .filter(|w| w["timer_only"] != json!(true))
                .collect()
        })
        .unwrap_or_default()
}

/// An elicitation per approval, keyed by the approval's step key.
fn input_requests(rec: &RunRecord) -> InputRequests {
    let mut requests = InputRequests::new();
    for w in approvals(rec) {
        let key = w["key"].as_str().unwrap_or_default().to_owned();
        let options: Vec<Value> = match w["options"].as_array() {
            Some(o) if !o.is_empty() => o.clone(),
            _ => vec![json!("approve"), json!("reject")],
        };
        let prompt = match w["prompt"].as_str() {
            Some(p) if !p.is_empty() => p.to_owned(),
            _ => format!("Run {} waits for an answer at {key}", rec.id),
        };
        let request = json!({
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": prompt,
                "requestedSchema": {
                    "type": "object",
                    "properties": {
                        "decision": {"type": "string", "title": "Decision", "enum": options},
                        "note": {"type": "string", "title": "Note"}
                    },
                    "required": ["decision"]
                }
            }
        });
        if let Ok(r) = serde_json::from_value::<InputRequest>(request) {
            requests.insert(key, r);
        }
    }
    requests
}

/// `tasks/get`.
pub(crate) async fn get(mcp: &WeftMcp, task_id: &str) -> Result<GetTaskResult, ErrorData> {
    if let Some(task) = test_task(mcp, task_id) {
        return Ok(GetTaskResult::new(task));
    }
    let rec = load(mcp, task_id).await?;
    let task = run_task(&rec);
    let payload = match rec.status {
        RunStatus::Paused if task.status == TaskStatus::InputRequired => {
            TaskPayload::InputRequired {
                input_requests: input_requests(&rec),
            }
        }
        RunStatus::Completed => TaskPayload::Completed {
            result: object(CallToolResult::structured(
                RunResult::of_record(rec.clone()).to_json(),
            )),
        },
        RunStatus::Failed => TaskPayload::Completed {
            result: object(CallToolResult::structured_error(
                RunResult::of_record(rec.clone()).to_json(),
            )),
        },
        RunStatus::Cancelled => TaskPayload::Cancelled,
        _ => TaskPayload::Working,
    };
    let message = match (&payload, rec.status) {
        (TaskPayload::Working, RunStatus::Paused) => {
            Some("waiting for a `wait` step's time".to_owned())
        }
        _ => None,
    };
    let mut task = task;
    task.status_message = message;
    Ok(GetTaskResult::new(DetailedTask::new(task, payload)))
}

async fn load(mcp: &WeftMcp, task_id: &str) -> Result<RunRecord, ErrorData> {
    match mcp.engine.store().get_run(task_id).await {
        Ok(Some(rec)) if rec.id == task_id => Ok(rec),
        Ok(_) => Err(unknown(task_id)),
        Err(e) => Err(ErrorData::internal_error(e.to_string(), None)),
    }
}

/// `tasks/cancel`: cancels the run (or the test run); a task that has ended is left as
/// it is, and acknowledged all the same.
pub(crate) async fn cancel(mcp: &WeftMcp, task_id: &str) -> Result<(), ErrorData> {
    if cancel_test(mcp, task_id) {
        return Ok(());
    }
    load(mcp, task_id).await?;
    match mcp.engine.cancel(task_id).await {
        Ok(_) | Err(EngineError::Refused(_)) => Ok(()),
        Err(e) => Err(ErrorData::internal_error(e.to_string(), None)),
    }
}

/// `tasks/update`: each accepted elicitation answers its approval; a declined or
/// cancelled one leaves it waiting.
pub(crate) async fn update(
    mcp: &WeftMcp,
    task_id: &str,
    responses: InputResponses,
) -> Result<(), ErrorData> {
    let rec = load(mcp, task_id).await?;
    if !mcp.options.allow_approvals {
        return Err(ErrorData::invalid_request(
            "models may not answer approvals on this server: a person answers them on the page or through the API",
            None,
        ));
    }
    let waiting: Vec<String> = approvals(&rec)
        .iter()
        .filter_map(|w| w["key"].as_str().map(str::to_owned))
        .collect();
    for (key, response) in responses {
        // Keys the task does not ask for are ignored, as the extension says.
        if !waiting.contains(&key) || response["action"] != json!("accept") {
            continue;
        }
        let content = &response["content"];
        let answer = json!({
            "decision": content["decision"].as_str().unwrap_or_default(),
            "note": content["note"].as_str().unwrap_or_default(),
        });
        mcp.engine
            .answer(task_id, Some(&key), answer)
            .await
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
    }
    Ok(())
}

/// Starts `test_flow` on its own task and answers with the task.
fn start_test(mcp: &WeftMcp, arguments: Map<String, Value>) -> CallToolResponse {
    let id = format!("test-{}", uuid::Uuid::now_v7().simple());
    let now = now_ms() as i64;
    let tasks = mcp.tests.clone();
    let runner = mcp.clone();
    let task_id = id.clone();
    let handle = tokio::spawn(async move {
        let result = match crate::tools::dispatch(&runner, "test_flow", arguments, None).await {
            Ok(v) => CallToolResult::structured(v),
            Err(f) => f.into_result(),
        };
        if let Ok(mut all) = runner.tests.0.lock()
            && let Some(t) = all.get_mut(&task_id)
        {
            t.result = Some(result);
            t.updated_ms = now_ms() as i64;
        }
    });
    if let Ok(mut all) = tasks.0.lock() {
        all.retain(|_, t| now - t.created_ms < TEST_TTL_MS as i64);
        all.insert(
            id.clone(),
            TestTask {
                created_ms: now,
                updated_ms: now,
                result: None,
                cancelled: false,
                abort: handle.abort_handle(),
            },
        );
    }
    let task = Task::new(id, TaskStatus::Working, iso(now), iso(now))
        .with_ttl_ms(TEST_TTL_MS)
        .with_poll_interval_ms(POLL_MS);
    CallToolResponse::Task(CreateTaskResult::new(task))
}

fn test_task(mcp: &WeftMcp, task_id: &str) -> Option<DetailedTask> {
    let all = mcp.tests.0.lock().ok()?;
    let t = all.get(task_id)?;
    let payload = match (&t.result, t.cancelled) {
        (_, true) => TaskPayload::Cancelled,
        (Some(r), false) => TaskPayload::Completed { result: object(r) },
        (None, false) => TaskPayload::Working,
    };
    let task = Task::new(
        task_id,
        payload.status(),
        iso(t.created_ms),
        iso(t.updated_ms),
    )
    .with_ttl_ms(TEST_TTL_MS)
    .with_poll_interval_ms(POLL_MS);
    Some(DetailedTask::new(task, payload))
}

/// Cancels test task `task_id`, if it is one; whether it was.
fn cancel_test(mcp: &WeftMcp, task_id: &str) -> bool {
    let Ok(mut all) = mcp.tests.0.lock() else {
        return false;
    };
    let Some(t) = all.get_mut(task_id) else {
        return false;
    };
    if t.result.is_none() && !t.cancelled {
        t.abort.abort();
        t.cancelled = true;
        t.updated_ms = now_ms() as i64;
    }
    true
}
