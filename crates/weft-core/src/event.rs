//! The typed event stream of a run. Dialects present their documented event names as
//! views of these kinds; sinks (terminal, JSONL, SSE, ...) receive them as they happen.

use crate::error::BlockError;
use crate::usage::Usage;
use crate::value::{Shared, Value};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::sync::Arc;

/// Now, in Unix milliseconds, as events are stamped (0 on a clock before 1970).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One event of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The run.
    pub run_id: Arc<str>,
    /// Position in the run's stream: 0 for its first event, one more for each stored
    /// event after it, across every process that drives the run. A live-only event
    /// (`llm_delta`) carries the number of the stored event that will follow it.
    pub seq: u64,
    /// Unix time in milliseconds.
    pub at_ms: u64,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// Why a loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoopExit {
    /// The `while` condition became false.
    ConditionFalse,
    /// The `until` condition became true.
    ConditionTrue,
    /// `max_iterations` was reached.
    MaxIterationsReached,
}

/// A model call beyond its model and usage: who served it, how it ended, how long it
/// took (boxed in [`EventKind::LlmCall`], so that events stay small).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CallDetail {
    /// What was asked of the model: none for a chat, `embeddings` for an `embed` block's
    /// call (OpenTelemetry's `gen_ai.operation.name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// Who serves the model (`openai`, `anthropic`, `local`, `scripted`, ...).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub provider: String,
    /// The model the request asked the provider for.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub request_model: String,
    /// The model that answered, as the provider names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_model: Option<String>,
    /// Why the model stopped, as the provider says (`stop`, `length`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// Microseconds the call took.
    #[serde(default)]
    pub elapsed_us: u64,
    /// The kind of error, when the call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The request's messages as JSON text, truncated; only when the engine was told
    /// to capture model content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// The answer's text, truncated; only when the engine captures model content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// A run began executing.
    RunStarted {
        /// The flow's name.
        flow: String,
        /// The run's input, shared with the run's first step (one value, which a
        /// store writes once).
        input: Shared,
        /// Content hash of the flow's compiled form.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        flow_hash: String,
        /// The dialect the flow was written in, when it came from a file.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dialect: Option<String>,
    },
    /// A run re-entered its flow after a pause or crash (or to be retried).
    RunResumed {
        /// Journal entries available for replay.
        journaled: usize,
        /// The flow's name.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        flow: String,
        /// Content hash of the flow's compiled form.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        flow_hash: String,
        /// The dialect the flow was written in, when it came from a file.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dialect: Option<String>,
    },
    /// The run finished with an output.
    RunCompleted {
        /// The output, shared with the run's record and its result.
        output: Shared,
    },
    /// The run finished with an error.
    RunFailed {
        /// The error.
        error: BlockError,
    },
    /// The run waits for approvals; nothing stays in memory.
    RunPaused {
        /// The pending approvals.
        waiting: Value,
    },
    /// The run was cancelled.
    RunCancelled,
    /// A block began.
    StepStarted {
        /// Block path (with indexes).
        path: Arc<str>,
        /// Block kind (the engine's names are static: no allocation per event).
        kind: Cow<'static, str>,
        /// The block's input, for a leaf block (a composite's input is its first
        /// child's); shared with the running step, not copied.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input: Option<Shared>,
    },
    /// A block finished.
    StepCompleted {
        /// Block path.
        path: Arc<str>,
        /// Block kind (the engine's names are static: no allocation per event).
        kind: Cow<'static, str>,
        /// Microseconds it took.
        elapsed_us: u64,
        /// The result came from the journal instead of running again.
        replayed: bool,
        /// The exit handle it chose, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit: Option<String>,
        /// The block's output, for a leaf block (a composite's output is its last
        /// child's); shared with the running step, not copied.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<Shared>,
    },
    /// A block failed (after its retries).
    StepFailed {
        /// Block path.
        path: Arc<str>,
        /// The error.
        error: BlockError,
    },
    /// A block failed and will be retried.
    StepRetrying {
        /// Block path.
        path: Arc<str>,
        /// The attempt that failed (1-based).
        attempt: u32,
        /// Delay before the next attempt.
        delay_ms: u64,
        /// Why it failed.
        error: BlockError,
    },
    /// A budget's usage reached its warning threshold, or (with `on_exceed: warn`) its
    /// limit, and the run went on.
    BudgetWarning {
        /// The block that asked for the call (or ran past its wall time).
        path: Arc<str>,
        /// The block that owns the budget (empty: the run's own budget).
        owner: String,
        /// `tokens`, `cost_usd` or `wall_ms`.
        budget: String,
        /// Used so far (with the call about to be made, for an exceeded token limit).
        used: f64,
        /// The limit.
        limit: f64,
        /// The limit itself was reached, not only the warning threshold.
        exceeded: bool,
    },
    /// A rescue block took over a failure.
    StepRescued {
        /// Block path.
        path: Arc<str>,
        /// The error it rescued.
        error: BlockError,
    },
    /// A loop began.
    LoopStarted {
        /// Loop path.
        path: Arc<str>,
        /// Its bound.
        max_iterations: u32,
    },
    /// A loop iteration began.
    LoopIteration {
        /// Loop path.
        path: Arc<str>,
        /// 0-based iteration.
        iteration: u32,
        /// The `while` condition's value, if there is one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        condition: Option<bool>,
    },
    /// A loop ended.
    LoopEnded {
        /// Loop path.
        path: Arc<str>,
        /// Iterations completed.
        iterations: u32,
        /// Why it ended.
        reason: LoopExit,
    },
    /// A concurrent composite (parallel, map, graph fan-out) began.
    FanOutStarted {
        /// Composite path.
        path: Arc<str>,
        /// Number of branches.
        branches: usize,
        /// Concurrency bound, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_concurrency: Option<u32>,
    },
    /// One branch of a concurrent composite began.
    BranchStarted {
        /// Composite path.
        path: Arc<str>,
        /// Branch name or index.
        branch: String,
        /// For map items: the item.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item: Option<Value>,
    },
    /// One branch ended.
    BranchEnded {
        /// Composite path.
        path: Arc<str>,
        /// Branch name or index.
        branch: String,
        /// It succeeded.
        success: bool,
        /// Its error, if it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<BlockError>,
    },
    /// A concurrent composite ended.
    FanOutEnded {
        /// Composite path.
        path: Arc<str>,
        /// Branches run.
        total: usize,
        /// Branches that succeeded.
        succeeded: usize,
        /// Branches that failed.
        failed: usize,
    },
    /// A branch or graph chose where to go.
    RouteTaken {
        /// The deciding block's path.
        path: Arc<str>,
        /// Where from (a graph node), if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<String>,
        /// Where to (a case name, node or `end`).
        to: String,
    },
    /// An approval is waiting.
    ApprovalRequested {
        /// The approval's step key.
        key: String,
        /// The question.
        prompt: String,
        /// Allowed decisions.
        options: Vec<String>,
    },
    /// A `wait` step set its timer: the run pauses until then.
    TimerSet {
        /// The wait's step key.
        key: String,
        /// When it wakes, Unix milliseconds.
        until_ms: i64,
    },
    /// A `wait` step's time came and the run goes on.
    TimerFired {
        /// The wait's step key.
        key: String,
    },
    /// An approval was answered.
    ApprovalAnswered {
        /// The approval's step key.
        key: String,
        /// The answer.
        answer: Value,
    },
    /// Streamed model text.
    LlmDelta {
        /// The LLM block's path.
        path: Arc<str>,
        /// New text.
        text: String,
    },
    /// A model call finished (or failed: then `error` says how).
    LlmCall {
        /// The LLM block's path.
        path: Arc<str>,
        /// The model id.
        model: String,
        /// What it cost.
        usage: Usage,
        /// Who served it, how it ended, how long it took.
        #[serde(flatten)]
        call: Box<CallDetail>,
    },
    /// The model called a tool.
    ToolCalled {
        /// The LLM block's path.
        path: Arc<str>,
        /// Tool name.
        tool: String,
        /// Arguments.
        arguments: Value,
        /// The path the tool's steps run at (none when the block has no such tool).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step: Option<String>,
    },
    /// Something its author may not expect happened, and the run went on (a loop
    /// stopped at its bound with its condition unmet, ...).
    Warning {
        /// Block path.
        path: Arc<str>,
        /// A stable name for the kind of warning (`loop_bound_reached`).
        code: String,
        /// What happened, for a person.
        message: String,
    },
    /// A free-form message from a block.
    Message {
        /// Block path.
        path: Arc<str>,
        /// The message.
        message: Value,
    },
}

impl EventKind {
    /// Whether the event is for whoever watches now and is never stored or replayed
    /// (token deltas: the step's output replaces them later).
    pub fn is_live_only(&self) -> bool {
        matches!(self, EventKind::LlmDelta { .. })
    }

    /// Whether the event is a run's last: `run_completed`, `run_failed` or
    /// `run_cancelled` (a pause is not: the run goes on after it).
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            EventKind::RunCompleted { .. } | EventKind::RunFailed { .. } | EventKind::RunCancelled
        )
    }
}

/// An event as many followers receive it: shared, and written as JSON at most once
/// however many of them send it on.
#[derive(Debug)]
pub struct SharedEvent {
    event: Event,
    written: std::sync::OnceLock<(String, String)>,
}

impl SharedEvent {
    /// Shares `event`.
    pub fn new(event: Event) -> SharedEvent {
        SharedEvent {
            event,
            written: std::sync::OnceLock::new(),
        }
    }

    /// The event as JSON, as `weft run --events` writes it.
    pub fn json(&self) -> &str {
        &self.written().0
    }

    /// Its type as the JSON names it (`step_completed`, ...).
    pub fn type_name(&self) -> &str {
        &self.written().1
    }

    fn written(&self) -> &(String, String) {
        self.written.get_or_init(|| {
            let value = serde_json::to_value(&self.event).unwrap_or(serde_json::Value::Null);
            let kind = value["type"].as_str().unwrap_or("event").to_owned();
            (value.to_string(), kind)
        })
    }
}

impl std::ops::Deref for SharedEvent {
    type Target = Event;
    fn deref(&self) -> &Event {
        &self.event
    }
}

#[cfg(test)]
mod shared_tests {
    use super::*;

    #[test]
    fn a_shared_event_is_written_once_as_its_own_json() {
        let e = Event {
            run_id: Arc::from("r"),
            seq: 3,
            at_ms: 9,
            kind: EventKind::RunCancelled,
        };
        let shared = SharedEvent::new(e.clone());
        assert_eq!(shared.type_name(), "run_cancelled");
        assert_eq!(shared.json(), serde_json::to_string(&e).unwrap());
        assert!(std::ptr::eq(shared.json(), shared.json()), "written once");
        assert_eq!(shared.seq, 3);
    }
}
