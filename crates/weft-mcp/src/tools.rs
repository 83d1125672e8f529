//! The tool table: each tool's name, what a model is told about it, the JSON Schema of
//! its arguments, and what runs it. The names are the contract clients rely on.

use crate::WeftMcp;
use crate::args::{self, *};
use crate::failure::Failure;
use crate::progress::Progress;
use rmcp::ErrorData;
use rmcp::model::{CallToolResult, Tool};
use serde_json::{Map, Value};
use std::sync::Arc;

/// One tool as clients see it.
struct Spec {
    name: &'static str,
    description: &'static str,
    schema: fn() -> schemars::Schema,
}

fn schema_of<T: schemars::JsonSchema>() -> schemars::Schema {
    schemars::schema_for!(T)
}

/// Every tool, in the order `tools/list` gives them.
const TOOLS: &[Spec] = &[
    Spec {
        name: "describe_format",
        description: "The reference for writing flows in a dialect: its block kinds, fields with types and defaults, examples, and its JSON Schema. Without `dialect`: the dialects, one line each.",
        schema: schema_of::<DescribeFormat>,
    },
    Spec {
        name: "validate_flow",
        description: "Check a flow's text. Returns {valid, dialect, diagnostics (each with pointer, line:col, message, hint), graph (nodes, edges) when valid}.",
        schema: schema_of::<ValidateFlow>,
    },
    Spec {
        name: "save_flow",
        description: "Save a flow's text under a name; each save that changes it is a new version. Refuses an invalid flow (returning its diagnostics) unless `force`.",
        schema: schema_of::<SaveFlow>,
    },
    Spec {
        name: "get_flow",
        description: "A saved flow: `view: source` gives its text, `view: structure` its document as JSON (the paths edit_flow patches) and its graph.",
        schema: schema_of::<GetFlow>,
    },
    Spec {
        name: "list_flows",
        description: "The saved flows: name, latest version, dialect.",
        schema: schema_of::<ListFlows>,
    },
    Spec {
        name: "edit_flow",
        description: "Change a saved flow with an RFC 6902 JSON Patch against its document as JSON (YAML flows are written back as YAML); a new name starts from an empty document. Refuses a patch that leaves the flow invalid, returning the diagnostics, unless `force`.",
        schema: schema_of::<EditFlow>,
    },
    Spec {
        name: "test_flow",
        description: "Run a flow's text with no side effects: an in-memory store, each llm block answered from `answers` (by block id) or by the offline local model, actions that write denied. Returns the result, each step's input and output, and which blocks asked the local model.",
        schema: schema_of::<TestFlow>,
    },
    Spec {
        name: "run_flow",
        description: "Run a saved flow (`name`) or a flow's text (`source`) with `input`. Returns {run_id, status} at once, or the result if the run ends or pauses within `wait_seconds`.",
        schema: schema_of::<RunFlow>,
    },
    Spec {
        name: "get_run",
        description: "A run: status, output, error, the failing step (path, kind, input, error kind and message), waiting approvals, usage, each step's status and time, and its events after `after_event`.",
        schema: schema_of::<GetRun>,
    },
    Spec {
        name: "list_runs",
        description: "Runs, newest first: run_id, flow, status, times.",
        schema: schema_of::<ListRuns>,
    },
    Spec {
        name: "cancel_run",
        description: "Cancel a running or paused run.",
        schema: schema_of::<RunId>,
    },
    Spec {
        name: "retry_run",
        description: "Run a failed or cancelled run again from its failing steps, reusing every completed step's result.",
        schema: schema_of::<RetryRun>,
    },
    Spec {
        name: "schedule_flow",
        description: "Run a saved flow on a cron schedule (`0 9 * * MON-FRI`, in `tz`), with `input`; `overlap` (skip, queue, cancel-previous) says what a firing does while the previous run goes on, `catch_up` (last, none, all) what is started for firings missed while no server ran. Returns the schedule with its next five fire times. A `weft serve` or `weft worker` on the database fires it.",
        schema: schema_of::<weft_triggers::manage::NewSchedule>,
    },
    Spec {
        name: "list_schedules",
        description: "The schedules, each with its next fire times and latest firings (each with its run_id); with `id`, that one with its last 20 firings.",
        schema: schema_of::<crate::schedules::ListSchedules>,
    },
    Spec {
        name: "change_schedule",
        description: "Pause, resume (firing from now on), delete, or trigger (start its flow now, out of schedule) a schedule.",
        schema: schema_of::<crate::schedules::ChangeSchedule>,
    },
    Spec {
        name: "answer_approval",
        description: "Answer a paused run's approval and continue it. Only when the server allows models to answer approvals; otherwise a person answers.",
        schema: schema_of::<AnswerApproval>,
    },
];

/// The tools as `tools/list` gives them.
pub fn list() -> Vec<Tool> {
    TOOLS
        .iter()
        .map(|t| {
            let schema = match serde_json::to_value((t.schema)()) {
                Ok(Value::Object(map)) => map,
                _ => Map::new(),
            };
            Tool::new(t.name, t.description, Arc::new(schema))
        })
        .collect()
}

/// The names of every tool.
pub fn names() -> Vec<&'static str> {
    TOOLS.iter().map(|t| t.name).collect()
}

/// Runs tool `name` with `arguments`; a failure is a tool error the model reads. Only a
/// name no tool has is a protocol error (`-32602`, as the specification asks), with
/// the tools there are in its data.
pub(crate) async fn call(
    mcp: &WeftMcp,
    name: &str,
    arguments: Map<String, Value>,
    progress: Option<Progress>,
) -> Result<CallToolResult, ErrorData> {
    if !names().contains(&name) {
        return Err(unknown(name));
    }
    Ok(match dispatch(mcp, name, arguments, progress).await {
        Ok(value) => CallToolResult::structured(value),
        Err(failure) => failure.into_result(),
    })
}

/// The protocol error for a call of tool `name`, which does not exist.
pub(crate) fn unknown(name: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("Unknown tool: {}", crate::failure::quoted(name)),
        Some(serde_json::json!({ "tools": names() })),
    )
}

/// Runs tool `name`; a tool that waits for a run reports its steps to `progress`.
pub(crate) async fn dispatch(
    mcp: &WeftMcp,
    name: &str,
    a: Map<String, Value>,
    progress: Option<Progress>,
) -> Result<Value, Failure> {
    match name {
        "describe_format" => crate::format::describe(args::read(name, a)?),
        "validate_flow" => crate::flows::validate(mcp, args::read(name, a)?),
        "save_flow" => crate::flows::save(mcp, args::read(name, a)?).await,
        "get_flow" => crate::flows::get(mcp, args::read(name, a)?).await,
        "list_flows" => {
            let _: ListFlows = args::read(name, a)?;
            crate::flows::list(mcp).await
        }
        "edit_flow" => crate::flows::edit(mcp, args::read(name, a)?).await,
        "test_flow" => crate::testing::test(mcp, args::read(name, a)?).await,
        "run_flow" => crate::runs::run(mcp, args::read(name, a)?, progress).await,
        "get_run" => crate::runs::get(mcp, args::read(name, a)?).await,
        "list_runs" => crate::runs::list(mcp, args::read(name, a)?).await,
        "cancel_run" => crate::runs::cancel(mcp, args::read(name, a)?).await,
        "retry_run" => crate::runs::retry(mcp, args::read(name, a)?, progress).await,
        "answer_approval" => crate::runs::answer(mcp, args::read(name, a)?, progress).await,
        "schedule_flow" => crate::schedules::add(mcp, args::read(name, a)?).await,
        "list_schedules" => crate::schedules::list(mcp, args::read(name, a)?).await,
        "change_schedule" => crate::schedules::change(mcp, args::read(name, a)?).await,
        other => Err(Failure::new(format!(
            "there is no tool {}",
            crate::failure::quoted(other)
        ))
        .hint(format!("the tools: {}", names().join(", ")))),
    }
}
