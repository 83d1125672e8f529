//! A stored run as people and clients read it: its record, each step with its status,
//! timings, input and output (from the run's event log), and its journal. One builder,
//! so that `weft runs show` and the server's `GET /v1/runs/{id}` print the same object.

mod retry;

pub use retry::{Effect, Fate, PlannedStep, RetryPlan, plan as retry_plan_of, retry_plan};

use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use weft_core::error::BlockError;
use weft_core::event::{Event, EventKind};
use weft_core::ports::{RunRecord, Store, StoreError};
use weft_core::usage::Usage;
use weft_core::value::Shared;

/// How many stored events one page of the event log read holds.
const EVENT_PAGE: usize = 10_000;

/// A run with its steps and journal.
#[derive(Debug, Clone, Serialize)]
pub struct RunDetail {
    /// The run's id.
    pub run_id: String,
    /// The flow's name.
    pub flow: String,
    /// Content hash of the flow's compiled form.
    pub flow_hash: String,
    /// The id of the flow's stored text (its content hash), when it was stored.
    pub flow_id: Option<String>,
    /// The file the flow came from, if any.
    pub source: Option<String>,
    /// The dialect the flow was written in.
    pub dialect: Option<String>,
    /// `queued`, `running`, `paused`, `completed`, `failed` or `cancelled`.
    pub status: &'static str,
    /// The run's input.
    pub input: Value,
    /// The output, once completed.
    pub output: Option<Shared>,
    /// The state, once ended or paused.
    pub state: Option<Shared>,
    /// The error, once failed.
    pub error: Option<Value>,
    /// The approvals it waits for (what each asks), when paused.
    pub waiting: Value,
    /// Model tokens and cost so far.
    pub usage: Usage,
    /// How many times it was retried after failing.
    pub retries: u32,
    /// The front end's settings its effects depend on.
    pub settings: Option<Value>,
    /// Creation time, Unix milliseconds.
    pub created_ms: i64,
    /// Last change, Unix milliseconds.
    pub updated_ms: i64,
    /// Every step that started, in the order they first started (empty when the run's
    /// events were not recorded).
    pub steps: Vec<StepDetail>,
    /// The journal: each effectful step's recorded result, in append order.
    pub journal: Vec<Value>,
    /// The `seq` of the run's last stored event (follow its events `?after=` it to see
    /// only what happens next); none before its first.
    pub last_event: Option<u64>,
    /// The approvals answered so far, in the order they were answered.
    pub answered: Vec<AnsweredApproval>,
    /// What the run warned of (a loop stopped at its bound, ...), once per step and
    /// kind of warning, in the order first raised.
    pub warnings: Vec<RunWarning>,
    /// The status the run's last run-level event announced (`running` after a start or
    /// resume, `paused`, `completed`, ...). The record is written a moment after its
    /// event, so a reader that sees the event may still read the older record: a page
    /// that shows both can tell the record is about to change.
    pub announced: Option<&'static str>,
}

/// A `warning` event of a run.
#[derive(Debug, Clone, Serialize)]
pub struct RunWarning {
    /// The step that raised it.
    pub path: String,
    /// Its kind (`loop_bound_reached`).
    pub code: String,
    /// What happened.
    pub message: String,
    /// When it was raised last, Unix milliseconds.
    pub at_ms: u64,
}

/// Where a step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Started and not ended (or its run stopped while it ran).
    Running,
    /// Failed and about to be tried again.
    Retrying,
    /// An approval waiting for its answer.
    Waiting,
    /// Ended with an output.
    Completed,
    /// Ended with an error.
    Failed,
    /// Failed, and a rescue block took over.
    Rescued,
}

/// One step of a run: one execution of a block at one path.
#[derive(Debug, Clone, Serialize)]
pub struct StepDetail {
    /// The block's path (`root/draft`, `root/items/[2]/check`, `root/loop/#1/body`).
    pub path: String,
    /// The block's kind.
    pub kind: String,
    /// Where it stands.
    pub status: StepStatus,
    /// When it (last) started, Unix milliseconds.
    pub started_ms: u64,
    /// When it ended, Unix milliseconds.
    pub ended_ms: Option<u64>,
    /// How long it took, microseconds.
    pub elapsed_us: Option<u64>,
    /// Attempts made (retries included).
    pub attempts: u32,
    /// On the latest resume or retry its result came from the journal, without running
    /// again (the timings are those of the execution that made the result).
    pub replayed: bool,
    /// The exit it chose, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit: Option<String>,
    /// Its input (leaf blocks).
    pub input: Option<Shared>,
    /// Its output (leaf blocks).
    pub output: Option<Shared>,
    /// Its error, when it failed or was rescued (the last one, while retrying).
    pub error: Option<BlockError>,
    /// The model it called last, for a step that called one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Tokens and cost of its model calls, for a step that made any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The tools its model called, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
}

/// A tool a model called during a step.
#[derive(Debug, Clone, Serialize)]
pub struct ToolCall {
    /// The tool's name.
    pub tool: String,
    /// The arguments the model gave.
    pub arguments: Value,
}

/// An approval's answer, as the run's events recorded it.
#[derive(Debug, Clone, Serialize)]
pub struct AnsweredApproval {
    /// The approval's step key.
    pub key: String,
    /// The decision (`approve`, `reject`, ...).
    pub decision: String,
    /// The note given with it.
    pub note: String,
    /// Who answered: the principal a server authenticated (or the name `weft approve`
    /// gave on this machine).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// The authenticated principal's id, when a server signed the answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by_id: Option<String>,
    /// A name the request gave, kept as a note beside the identity.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by_note: Option<String>,
    /// When the answer was taken, Unix milliseconds.
    pub at_ms: u64,
}

/// The run `id` with its steps and journal; `None` when there is no such run.
pub async fn run_detail(store: &dyn Store, id: &str) -> Result<Option<RunDetail>, StoreError> {
    let Some(r) = store.get_run(id).await? else {
        return Ok(None);
    };
    let journal = store
        .journal(&r.id)
        .await?
        .into_iter()
        .map(|e| serde_json::json!({"key": e.key, "kind": e.kind.as_str(), "value": e.value}))
        .collect();
    let mut steps = Steps::default();
    let mut after = None;
    loop {
        let page = store.events(&r.id, after, EVENT_PAGE).await?;
        for e in &page {
            steps.apply(e);
        }
        if let Some(last) = page.last() {
            after = Some(last.seq);
        }
        if page.len() < EVENT_PAGE {
            break;
        }
    }
    Ok(Some(detail(r, steps, journal, after)))
}

fn detail(r: RunRecord, steps: Steps, journal: Vec<Value>, last_event: Option<u64>) -> RunDetail {
    RunDetail {
        last_event,
        announced: steps.announced,
        answered: steps.answered,
        warnings: steps.warnings,
        status: r.status.as_str(),
        flow_id: r.flow_id,
        waiting: r.waiting.unwrap_or_else(|| Value::Array(Vec::new())),
        run_id: r.id,
        flow: r.flow_name,
        flow_hash: r.flow_hash,
        source: r.source,
        dialect: r.dialect,
        input: r.input,
        output: r.output,
        state: r.state,
        error: r.error,
        usage: r.usage,
        retries: r.retries,
        settings: r.settings,
        created_ms: r.created_ms,
        updated_ms: r.updated_ms,
        steps: steps.list,
        journal,
    }
}

/// Folds a run's events into its steps.
#[derive(Default)]
struct Steps {
    list: Vec<StepDetail>,
    by_path: HashMap<String, usize>,
    /// When a completed step started again (a resume): its record changes only if it
    /// then runs anew rather than replaying.
    restarted: HashMap<usize, u64>,
    answered: Vec<AnsweredApproval>,
    warnings: Vec<RunWarning>,
    announced: Option<&'static str>,
}

impl Steps {
    fn apply(&mut self, e: &Event) {
        match &e.kind {
            EventKind::StepStarted { path, kind, input } => {
                self.started(e.at_ms, path, kind, input.as_ref())
            }
            EventKind::StepCompleted {
                path,
                elapsed_us,
                replayed,
                exit,
                output,
                ..
            } => {
                let restarted = self
                    .by_path
                    .get(&**path)
                    .and_then(|i| self.restarted.remove(i));
                let Some(s) = self.step(path) else { return };
                // A resume replays journaled steps: the first execution's record stays,
                // marked as answered from the journal this time.
                if *replayed && s.status == StepStatus::Completed {
                    s.replayed = true;
                    return;
                }
                if let Some(at) = restarted {
                    s.started_ms = at;
                }
                s.status = StepStatus::Completed;
                s.ended_ms = Some(e.at_ms);
                s.elapsed_us = Some(*elapsed_us);
                s.replayed = *replayed;
                s.exit.clone_from(exit);
                s.output = output.clone();
                s.error = None;
            }
            EventKind::StepFailed { path, error } => {
                let Some(s) = self.step(path) else { return };
                s.status = StepStatus::Failed;
                s.ended_ms = Some(e.at_ms);
                s.elapsed_us = Some(e.at_ms.saturating_sub(s.started_ms) * 1000);
                s.error = Some(error.clone());
            }
            EventKind::StepRetrying { path, error, .. } => {
                let Some(s) = self.step(path) else { return };
                s.status = StepStatus::Retrying;
                s.attempts += 1;
                s.error = Some(error.clone());
            }
            EventKind::ApprovalRequested { key, .. } => {
                if let Some(s) = self.step(key) {
                    s.status = StepStatus::Waiting;
                }
            }
            EventKind::StepRescued { path, error } => {
                let Some(s) = self.step(path) else { return };
                s.status = StepStatus::Rescued;
                s.error = Some(error.clone());
            }
            EventKind::LlmCall {
                path, model, usage, ..
            } => {
                let Some(s) = self.step(path) else { return };
                s.model = Some(model.clone());
                s.usage.get_or_insert_with(Usage::default).add(usage);
            }
            EventKind::ToolCalled {
                path,
                tool,
                arguments,
                ..
            } => {
                let Some(s) = self.step(path) else { return };
                s.tool_calls.push(ToolCall {
                    tool: tool.clone(),
                    arguments: arguments.clone(),
                });
            }
            EventKind::ApprovalAnswered { key, answer } => {
                let text = |field: &str| answer.get(field).and_then(Value::as_str);
                self.answered.push(AnsweredApproval {
                    key: key.clone(),
                    decision: text("decision").unwrap_or_default().to_owned(),
                    note: text("note").unwrap_or_default().to_owned(),
                    by: text("by").map(str::to_owned),
                    by_id: text("by_id").map(str::to_owned),
                    by_note: text("by_note").map(str::to_owned),
                    at_ms: e.at_ms,
                });
            }
            EventKind::Warning {
                path,
                code,
                message,
            } => self.warned(e.at_ms, path, code, message),
            EventKind::RunStarted { .. } | EventKind::RunResumed { .. } => {
                self.announced = Some("running")
            }
            EventKind::RunPaused { .. } => self.announced = Some("paused"),
            EventKind::RunCompleted { .. } => self.announced = Some("completed"),
            EventKind::RunFailed { .. } => self.announced = Some("failed"),
            EventKind::RunCancelled => self.announced = Some("cancelled"),
            _ => {}
        }
    }

    /// Keeps one warning per step and code: a resumed run raises again what its pure
    /// steps raised before.
    fn warned(&mut self, at_ms: u64, path: &str, code: &str, message: &str) {
        let w = RunWarning {
            path: path.to_owned(),
            code: code.to_owned(),
            message: message.to_owned(),
            at_ms,
        };
        match self
            .warnings
            .iter_mut()
            .find(|w| w.path == path && w.code == code)
        {
            Some(old) => *old = w,
            None => self.warnings.push(w),
        }
    }

    fn started(&mut self, at_ms: u64, path: &str, kind: &str, input: Option<&Shared>) {
        if let Some(&i) = self.by_path.get(path) {
            let s = &mut self.list[i];
            // Started again: on a resume (a completed step replays, or runs anew if it
            // is pure), or when a failed run is retried.
            if s.status == StepStatus::Completed {
                self.restarted.insert(i, at_ms);
            } else {
                s.status = StepStatus::Running;
                s.started_ms = at_ms;
                s.ended_ms = None;
                s.elapsed_us = None;
                s.error = None;
                s.usage = None;
                s.tool_calls.clear();
            }
            if input.is_some() {
                s.input = input.cloned();
            }
            return;
        }
        self.by_path.insert(path.to_owned(), self.list.len());
        self.list.push(StepDetail {
            path: path.to_owned(),
            kind: kind.to_owned(),
            status: StepStatus::Running,
            started_ms: at_ms,
            ended_ms: None,
            elapsed_us: None,
            attempts: 1,
            replayed: false,
            exit: None,
            input: input.cloned(),
            output: None,
            error: None,
            model: None,
            usage: None,
            tool_calls: Vec::new(),
        });
    }

    fn step(&mut self, path: &str) -> Option<&mut StepDetail> {
        let i = *self.by_path.get(path)?;
        self.list.get_mut(i)
    }
}
