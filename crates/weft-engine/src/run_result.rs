//! Where a run stands after the engine drove it as far as it could, as callers read it.

use weft_core::ports::{RunRecord, RunStatus, Usage};
use weft_core::{BlockError, Value};
use weft_expr::Shared;

/// A run driven on its own task: its result when it ends or pauses.
pub type RunHandle = tokio::task::JoinHandle<Result<RunResult, crate::EngineError>>;

/// Where a run stands after the engine drove it as far as it could.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RunResult {
    /// The run's id.
    pub run_id: String,
    /// Completed, failed, paused or cancelled.
    pub status: RunStatus,
    /// The output, when completed (shared with the run's record: a fan-out's results
    /// are pointed at, not copied; [`Shared::to_value`] makes a plain copy).
    pub output: Option<Shared>,
    /// The run state, shared as the output is.
    pub state: Shared,
    /// The error, when failed.
    pub error: Option<BlockError>,
    /// The approvals it waits for, when paused: `[{key, prompt, options}]`.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub waiting: Vec<Value>,
    /// Model usage of this drive.
    pub usage: Usage,
}

impl RunResult {
    /// Where stored run `rec` stands, as a result (for a run driven by another process).
    pub fn of_record(rec: RunRecord) -> RunResult {
        RunResult {
            run_id: rec.id,
            status: rec.status,
            output: rec.output,
            state: rec.state.unwrap_or_default(),
            error: rec.error.and_then(|e| serde_json::from_value(e).ok()),
            waiting: match rec.waiting {
                Some(Value::Array(waiting)) => waiting,
                _ => Vec::new(),
            },
            usage: rec.usage,
        }
    }

    /// The object `weft run --json` prints and the server's and MCP's waits answer:
    /// `{run_id, status, output, state, error, usage}`, and `waiting` when paused.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self.json_view()).unwrap_or(Value::Null)
    }

    /// [`RunResult::to_json`]'s object as a view of this result, to write out without
    /// copying it first (a fan-out's output can be most of a run's memory).
    pub fn json_view(&self) -> impl serde::Serialize + '_ {
        #[derive(serde::Serialize)]
        struct View<'a> {
            run_id: &'a str,
            status: &'a str,
            output: &'a Option<Shared>,
            state: &'a Shared,
            error: &'a Option<BlockError>,
            usage: &'a Usage,
            #[serde(skip_serializing_if = "<[Value]>::is_empty")]
            waiting: &'a [Value],
        }
        View {
            run_id: &self.run_id,
            status: self.status.as_str(),
            output: &self.output,
            state: &self.state,
            error: &self.error,
            usage: &self.usage,
            waiting: &self.waiting,
        }
    }
}

/// `null` read as no approvals, as a stored run without any shows them.
fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Value>, D::Error> {
    use serde::Deserialize;
    Ok(Option::<Vec<Value>>::deserialize(d)?.unwrap_or_default())
}
