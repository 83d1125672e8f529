//! Starting, resuming, answering, retrying and cancelling runs. Every path goes through
//! [`Engine::drive`]: load the journal, re-enter the flow from the top, replay what is
//! journaled, run the rest, and record where the run stands.

use crate::Engine;
use crate::budget::Budgets;
use crate::events::{Emitter, now_ms};
use crate::exec::exec;
use crate::prepared::Prepared;
use crate::run::{Cancel, Cx, Outcome, Recorded, RunCtx, Stop};
use crate::underway::Underway;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use weft_core::event::EventKind;
use weft_core::ports::{
    Claim, Claimed, EntryKind, JournalEntry, RunRecord, RunStatus, StoreError, Usage,
};
use weft_core::{BlockError, Diagnostic, ErrorKind, Flow, Value};
use weft_expr::{Scope, Shared};

/// How a run is started.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The file the flow came from.
    pub source: Option<String>,
    /// Content hash of that file.
    pub source_hash: Option<String>,
    /// The dialect the file was written in.
    pub dialect: Option<String>,
    /// Use this run id instead of a new one.
    pub run_id: Option<String>,
    /// The session, user and project the run belongs to (handlers read and change their
    /// state in the store).
    pub scopes: weft_core::ports::Scopes,
    /// How the flow's dialect presents the run (stored with it, opaque to the engine).
    pub view: Option<Value>,
    /// The front end's settings the run's effects depend on (stored with it, opaque to
    /// the engine; see [`RunRecord::settings`]).
    pub settings: Option<Value>,
    /// The flow's text, stored (once per id) and linked to the run, so that clients can
    /// read and draw the run's flow and start new runs of it by id.
    pub flow_source: Option<weft_core::ports::FlowSource>,
}

/// A changed version of a run's flow to retry the run with: the run keeps the journaled
/// steps whose keys still exist and records the new version.
#[derive(Clone)]
pub struct Revision {
    /// The new flow.
    pub flow: Arc<Prepared>,
    /// Content hash of the file it came from.
    pub source_hash: Option<String>,
    /// How its dialect presents the run (see [`RunOptions::view`]).
    pub view: Option<Value>,
}

/// A run driven on its own task: its result when it ends or pauses.
pub type RunHandle = tokio::task::JoinHandle<Result<RunResult, EngineError>>;

/// How a drive begins.
pub(crate) enum Entry {
    /// A new run, from its start.
    New,
    /// A run continued from its journal.
    Resumed,
    /// A run continued because its approval was answered: the answer's event comes
    /// first in the continued run's stream.
    Answered(EventKind),
}

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

/// Why the engine could not drive a run.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No run has that id.
    #[error("no run with id `{0}`")]
    NotFound(String),
    /// The run is not in a state that allows the request.
    #[error("{0}")]
    Refused(String),
    /// Another process answered, resumed or retried the run first.
    #[error("{0}")]
    Taken(String),
    /// The flow is invalid.
    #[error("the flow is invalid: {}", .0.iter().map(|d| d.message.as_str()).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<Diagnostic>),
}

/// What another process did to run `now` first, for the process that lost the race;
/// `answer` is the decision journaled last, if any.
fn taken_message(now: &RunRecord, answer: Option<&str>) -> String {
    let by = now
        .owner
        .as_deref()
        .map(|o| format!(" by {o}"))
        .unwrap_or_default();
    let at = humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + Duration::from_millis(u64::try_from(now.updated_ms).unwrap_or(0)),
    );
    match answer {
        Some(decision) if now.status != RunStatus::Paused => format!(
            "run {} was already answered: {decision}{by} at {at}; it is {} now, not paused",
            now.id,
            now.status.as_str()
        ),
        _ => format!(
            "run {} was taken first{by} at {at}: it is {} now",
            now.id,
            now.status.as_str()
        ),
    }
}

fn new_run_id() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

fn root_key(flow: &Flow) -> Arc<str> {
    Arc::from(flow.root.label().unwrap_or("root"))
}

fn recorded(entries: Vec<JournalEntry>) -> HashMap<String, Recorded> {
    entries
        .into_iter()
        .map(|e| {
            let r = match e.kind {
                EntryKind::Result => Recorded::Result(e.value),
                EntryKind::Answer => Recorded::Answer(e.value.into_value()),
                EntryKind::Started => Recorded::Started(e.value.into_value()),
                EntryKind::Failure => {
                    Recorded::Failure(serde_json::from_value(e.value.into_value()).unwrap_or_else(
                        |_| BlockError::new(ErrorKind::Store, "unreadable failure entry"),
                    ))
                }
            };
            (e.key, r)
        })
        .collect()
}

/// Whether the process that drives running run `rec` is alive: its lease has not
/// lapsed, where the store keeps leases (and, when its owner is on this machine, that
/// process still runs), else its owner on this machine runs.
fn driver_alive(rec: &RunRecord) -> bool {
    let local = rec.owner.as_deref().and_then(owner_alive);
    match rec.lease_until_ms {
        Some(until) => until > now_ms() as i64 && local != Some(false),
        None => local.unwrap_or(false),
    }
}

/// Whether owner `pid:N@host` (or `pid:N`, as older versions wrote) runs: `None` when
/// it is on another machine, which this one cannot tell.
fn owner_alive(owner: &str) -> Option<bool> {
    let rest = owner.strip_prefix("pid:")?;
    let (pid, host) = match rest.split_once('@') {
        Some((pid, host)) => (pid, Some(host)),
        None => (rest, None),
    };
    if host.is_some_and(|h| h != crate::host_name()) {
        return None;
    }
    let pid: u32 = pid.parse().ok()?;
    Some(pid != std::process::id() && process_running(pid))
}

/// Whether process `pid` exists and has not exited. A process killed a moment ago
/// stays in `/proc` as a zombie until its parent reaps it (a server restarted right
/// after `kill -9` saw its dead predecessor as alive and left its runs alone).
fn process_running(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // `pid (comm) state ...`: the command name may itself hold spaces and parentheses.
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].trim_start().chars().next());
    !matches!(state, Some('Z' | 'X') | None)
}

impl Engine {
    /// Validates `flow` (its models too, against this engine's providers, and the
    /// secrets it reads, against this engine's) and compiles its expressions.
    pub fn prepare(&self, flow: impl Into<Arc<Flow>>) -> Result<Arc<Prepared>, Vec<Diagnostic>> {
        let flow = flow.into();
        let mut unreachable = match &self.inner.models {
            Some(models) => models.check(&flow),
            None => Vec::new(),
        };
        unreachable.extend(crate::secret_reads::unset_secrets(
            &flow,
            &self.inner.secrets,
        ));
        let prepared = Prepared::new(flow)?;
        if unreachable.is_empty() {
            Ok(Arc::new(prepared))
        } else {
            Err(unreachable)
        }
    }

    /// Starts a new run of `prepared` with `input` (default: the flow's own `input`) and
    /// drives it until it ends or pauses.
    pub async fn start(
        &self,
        prepared: Arc<Prepared>,
        input: Option<Value>,
        opts: RunOptions,
    ) -> Result<RunResult, EngineError> {
        let rec = self.create(&prepared, input, opts, false).await?;
        self.drive(rec, prepared, Vec::new(), Entry::New).await
    }

    /// Creates a new run durably, then drives it on its own task: the run id is known
    /// (and the run survives a crash, to be resumed) before the returned handle's run
    /// ends. For servers, which answer as soon as a run is accepted. Needs a Tokio
    /// runtime.
    pub async fn start_detached(
        &self,
        prepared: Arc<Prepared>,
        input: Option<Value>,
        opts: RunOptions,
    ) -> Result<(String, RunHandle), EngineError> {
        let rec = self.create(&prepared, input, opts, false).await?;
        let id = rec.id.clone();
        Ok((
            id,
            self.spawn(|e| async move { e.drive(rec, prepared, Vec::new(), Entry::New).await }),
        ))
    }

    /// Runs `drive` with a clone of this engine on its own task.
    pub(crate) fn spawn<F>(&self, drive: impl FnOnce(Engine) -> F) -> RunHandle
    where
        F: std::future::Future<Output = Result<RunResult, EngineError>> + Send + 'static,
    {
        tokio::spawn(drive(self.clone()))
    }

    /// Starts a new run of `prepared`: drives it on its own task as
    /// [`Engine::start_detached`] does, or, for an engine whose runs the workers drive
    /// ([`crate::EngineBuilder::continue_on_workers`]), stores it `queued` for them.
    pub async fn submit(
        &self,
        prepared: Arc<Prepared>,
        input: Option<Value>,
        opts: RunOptions,
    ) -> Result<Underway, EngineError> {
        if self.continues_on_workers() {
            let id = self.enqueue(&prepared, input, opts).await?;
            return Ok(Underway::on_workers(id, self.clone()));
        }
        let (id, handle) = self.start_detached(prepared, input, opts).await?;
        Ok(Underway::here(id, handle))
    }

    /// Stores a new run of `prepared` as `queued`, owned by no process: it waits for
    /// [`Engine::start_queued`] (a server's run limit), and survives a restart meanwhile.
    pub async fn enqueue(
        &self,
        prepared: &Prepared,
        input: Option<Value>,
        opts: RunOptions,
    ) -> Result<String, EngineError> {
        Ok(self.create(prepared, input, opts, true).await?.id)
    }

    /// Takes a queued run for this process (the first taker wins) and drives it on its
    /// own task from its start. Needs a Tokio runtime.
    pub async fn start_queued(&self, run_id: &str) -> Result<RunHandle, EngineError> {
        let rec = self.load(run_id).await?;
        if rec.status != RunStatus::Queued {
            return Err(EngineError::Refused(format!(
                "run {} is {}, not queued",
                rec.id,
                rec.status.as_str()
            )));
        }
        self.take(&rec, vec![RunStatus::Queued], None, None).await?;
        let prepared = self.stored_flow(&rec).await?;
        Ok(self.spawn(|e| async move { e.drive(rec, prepared, Vec::new(), Entry::New).await }))
    }

    /// Follows run `run_id`, which another process drives (a worker of a shared store),
    /// on its own task, until it ends or pauses, reading its record every 50 ms.
    pub fn follow_elsewhere(&self, run_id: String) -> RunHandle {
        let store = self.inner.store.clone();
        tokio::spawn(async move {
            loop {
                match store.get_run(&run_id).await? {
                    None => return Err(EngineError::NotFound(run_id)),
                    Some(r) if matches!(r.status, RunStatus::Queued | RunStatus::Running) => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    Some(r) => return Ok(RunResult::of_record(r)),
                }
            }
        })
    }

    /// Drives, on its own task, a run a worker of this process has claimed from a shared
    /// store ([`weft_core::ports::WorkQueue::claim_ready`]); `rec` is the run as it was
    /// before the claim: a queued run starts, a running one (its process died or lost
    /// it) continues from its journal. A run whose stored flow is missing or invalid
    /// fails, so that it does not stay claimed; one the store could not read right now
    /// is let go, for a worker to take again.
    pub async fn continue_claimed(&self, mut rec: RunRecord) -> Result<RunHandle, EngineError> {
        let store = &self.inner.store;
        let loaded = match self.stored_flow(&rec).await {
            // A queued run with an empty journal may still have been run before (a
            // retry that forgot every failure, a resume before any step): its log says
            // which, read at the same time.
            Ok(prepared) => tokio::try_join!(store.journal(&rec.id), store.next_event_seq(&rec.id))
                .map(|(j, seq)| (prepared, j, seq))
                .map_err(EngineError::from),
            Err(e) => Err(e),
        };
        let (prepared, journal, next_seq) = match loaded {
            Ok(loaded) => loaded,
            // A passing store fault: another worker (or this one) takes the run again.
            Err(e @ EngineError::Store(_)) => {
                store.let_go(&rec.id);
                return Err(e);
            }
            Err(e) => {
                rec.status = RunStatus::Failed;
                rec.owner = None;
                rec.updated_ms = now_ms() as i64;
                let error = BlockError::new(ErrorKind::Store, e.to_string());
                rec.error = Some(serde_json::to_value(&error).unwrap_or(Value::Null));
                if let Err(failed) = store.update_run(&rec).await {
                    store.let_go(&rec.id);
                    return Err(failed.into());
                }
                return Err(e);
            }
        };
        let new = rec.status == RunStatus::Queued && journal.is_empty() && next_seq == 0;
        let entry = if new { Entry::New } else { Entry::Resumed };
        rec.status = RunStatus::Running;
        rec.owner = Some(self.inner.owner.clone());
        Ok(self.spawn(|e| async move { e.drive(rec, prepared, journal, entry).await }))
    }

    /// Stores the flow and a new run of it: `running` and owned by this process, or
    /// `queued` and owned by none.
    async fn create(
        &self,
        prepared: &Prepared,
        input: Option<Value>,
        opts: RunOptions,
        queued: bool,
    ) -> Result<RunRecord, EngineError> {
        let mut rec = self.new_record(prepared, input, opts).await?;
        if !queued {
            rec.status = RunStatus::Running;
            rec.owner = Some(self.inner.owner.clone());
        }
        self.inner.store.create_run(&rec).await?;
        Ok(rec)
    }

    /// Stores the flow (and its text) and returns a new `queued` run of it, owned by no
    /// process, which is not stored yet: for a caller that stores it together with
    /// something else (a schedule's firing), then starts it with
    /// [`Engine::start_queued`] or leaves it to the workers.
    pub async fn new_record(
        &self,
        prepared: &Prepared,
        input: Option<Value>,
        opts: RunOptions,
    ) -> Result<RunRecord, EngineError> {
        let store = &self.inner.store;
        if !self.inner.has_stored(&prepared.hash) {
            store.put_flow(&prepared.hash, &prepared.ir_json).await?;
            self.inner.remember_stored(&prepared.hash);
        }
        if let Some(source) = &opts.flow_source
            && !self.inner.has_stored(&source.id)
        {
            store.put_source(source).await?;
            self.inner.remember_stored(&source.id);
        }
        let input = input
            .or_else(|| prepared.flow.input.clone())
            .unwrap_or_else(|| Value::Object(Default::default()));
        let mut rec = RunRecord::new(
            opts.run_id.unwrap_or_else(new_run_id),
            prepared.hash.clone(),
            prepared.flow.name.clone(),
            input,
            now_ms() as i64,
        );
        rec.source = opts.source;
        rec.source_hash = opts.source_hash;
        rec.dialect = opts.dialect;
        rec.scopes = opts.scopes;
        rec.view = opts.view;
        rec.settings = opts.settings;
        rec.flow_id = opts.flow_source.map(|s| s.id);
        rec.status = RunStatus::Queued;
        Ok(rec)
    }

    /// Loads the flow a run was started with.
    pub async fn stored_flow(&self, rec: &RunRecord) -> Result<Arc<Prepared>, EngineError> {
        self.flow_of_run(&rec.id, &rec.flow_hash).await
    }

    /// Loads the flow stored under `flow_hash`, which run `run_id` was started with (for
    /// a caller that holds the run's detail rather than its record).
    pub async fn flow_of_run(
        &self,
        run_id: &str,
        flow_hash: &str,
    ) -> Result<Arc<Prepared>, EngineError> {
        if let Some(prepared) = self.inner.prepared_flow(flow_hash) {
            return Ok(prepared);
        }
        let json = self.inner.store.get_flow(flow_hash).await?.ok_or_else(|| {
            EngineError::Refused(format!(
                "the flow of run {run_id} is missing from the store"
            ))
        })?;
        let flow: Flow = serde_json::from_str(&json).map_err(|e| {
            EngineError::Refused(format!(
                "the stored flow of run {run_id} is unreadable: {e}"
            ))
        })?;
        let prepared = self.prepare(flow).map_err(EngineError::Invalid)?;
        // Only a flow whose hash is its stored text's: a stored flow is never changed.
        if prepared.hash == flow_hash {
            self.inner.remember_prepared(flow_hash, &prepared);
        }
        Ok(prepared)
    }

    pub(crate) async fn load(&self, run_id: &str) -> Result<RunRecord, EngineError> {
        self.inner
            .store
            .get_run(run_id)
            .await?
            .ok_or_else(|| EngineError::NotFound(run_id.to_owned()))
    }

    /// Continues a paused run, or a run whose process died, from its journal.
    pub async fn resume(&self, run_id: &str, force: bool) -> Result<RunResult, EngineError> {
        let rec = self.accept_resume(run_id, force).await?;
        self.continue_run(rec, Entry::Resumed).await
    }

    /// [`Engine::resume`], driving the run on its own task (or handing it to the
    /// workers, see [`crate::EngineBuilder::continue_on_workers`]) once this process has
    /// taken it: a refusal comes back here, the run's end through what is returned.
    pub async fn resume_detached(
        &self,
        run_id: &str,
        force: bool,
    ) -> Result<Underway, EngineError> {
        let rec = self.accept_resume(run_id, force).await?;
        if self.continues_on_workers() {
            return self.hand_over(rec, None).await;
        }
        let id = rec.id.clone();
        let handle = self.spawn(|e| async move { e.continue_run(rec, Entry::Resumed).await });
        Ok(Underway::here(id, handle))
    }

    /// Checks that run `run_id` may resume and takes it for this process.
    async fn accept_resume(&self, run_id: &str, force: bool) -> Result<RunRecord, EngineError> {
        let rec = self.load(run_id).await?;
        match rec.status {
            RunStatus::Paused => {}
            RunStatus::Running => {
                if driver_alive(&rec) && !force {
                    let by = rec.owner.as_deref().unwrap_or("another process");
                    return Err(EngineError::Refused(format!(
                        "run {} is still running in {by}; resume it only if that process is gone (--force)",
                        rec.id
                    )));
                }
            }
            s => {
                return Err(EngineError::Refused(format!(
                    "run {} is {}; only paused or interrupted runs resume{}",
                    rec.id,
                    s.as_str(),
                    if s == RunStatus::Failed {
                        " (retry a failed run with `weft runs retry`)"
                    } else {
                        ""
                    }
                )));
            }
        }
        let owner_was = Some(rec.owner.clone());
        self.take(&rec, vec![rec.status], owner_was, None).await?;
        Ok(rec)
    }

    /// Continues a run this process has taken, from its journal.
    pub(crate) async fn continue_run(
        &self,
        rec: RunRecord,
        entry: Entry,
    ) -> Result<RunResult, EngineError> {
        let prepared = self.stored_flow(&rec).await?;
        let journal = self.inner.store.journal(&rec.id).await?;
        self.drive(rec, prepared, journal, entry).await
    }

    /// Takes `rec` for this process if it is still in one of the statuses `from` (and
    /// has the owner `owner_was`, when given), appending `entry` in the same step.
    pub(crate) async fn take(
        &self,
        rec: &RunRecord,
        from: Vec<RunStatus>,
        owner_was: Option<Option<String>>,
        entry: Option<JournalEntry>,
    ) -> Result<(), EngineError> {
        let claim = Claim {
            run_id: rec.id.clone(),
            from,
            owner_was,
            owner: self.inner.owner.clone(),
            now_ms: now_ms() as i64,
            entry,
        };
        match self.inner.store.claim_run(claim).await? {
            Claimed::Taken => Ok(()),
            Claimed::Lost(now) => {
                let answer = self.last_answer(&now.id).await;
                Err(EngineError::Taken(taken_message(&now, answer.as_deref())))
            }
        }
    }

    /// The decision of the last answer journaled for run `id`, if any.
    async fn last_answer(&self, id: &str) -> Option<String> {
        let journal = self.inner.store.journal(id).await.unwrap_or_default();
        journal
            .iter()
            .rev()
            .find(|e| e.kind == EntryKind::Answer)
            .and_then(|e| {
                e.value
                    .get("decision")?
                    .as_json()?
                    .as_str()
                    .map(str::to_owned)
            })
    }

    /// Answers a paused run's approval and continues the run.
    ///
    /// `key` picks the approval when several wait; `answer` must hold a `decision` that is
    /// one of the approval's options.
    pub async fn answer(
        &self,
        run_id: &str,
        key: Option<&str>,
        answer: Value,
    ) -> Result<RunResult, EngineError> {
        let (rec, answered) = self.accept_answer(run_id, key, answer).await?;
        self.continue_run(rec, Entry::Answered(answered)).await
    }

    /// Answers a paused run's approval (the first answer wins, as in [`Engine::answer`])
    /// and continues the run on its own task, or hands it to the workers (see
    /// [`crate::EngineBuilder::continue_on_workers`]). Errors about the answer are
    /// returned here; the run's end through what is returned. Needs a Tokio runtime.
    pub async fn answer_detached(
        &self,
        run_id: &str,
        key: Option<&str>,
        answer: Value,
    ) -> Result<Underway, EngineError> {
        let (rec, answered) = self.accept_answer(run_id, key, answer).await?;
        if self.continues_on_workers() {
            return self.hand_over(rec, Some(answered)).await;
        }
        let id = rec.id.clone();
        let handle =
            self.spawn(|e| async move { e.continue_run(rec, Entry::Answered(answered)).await });
        Ok(Underway::here(id, handle))
    }

    /// Checks `answer` against the run's waiting approval and journals it, taking the
    /// run for this process; a run answered, resumed or retried first is `Taken`.
    /// Returns the run and the event that announces the answer.
    async fn accept_answer(
        &self,
        run_id: &str,
        key: Option<&str>,
        answer: Value,
    ) -> Result<(RunRecord, EventKind), EngineError> {
        let rec = self.load(run_id).await?;
        if rec.status != RunStatus::Paused {
            let answer = self.last_answer(&rec.id).await;
            if rec.status == RunStatus::Running || answer.is_some() {
                return Err(EngineError::Taken(taken_message(&rec, answer.as_deref())));
            }
            return Err(EngineError::Refused(format!(
                "run {} is {}, not paused: there is nothing to answer",
                rec.id,
                rec.status.as_str()
            )));
        }
        let waiting: Vec<Value> = rec
            .waiting
            .as_ref()
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let keys: Vec<&str> = waiting
            .iter()
            .filter_map(|w| w.get("key")?.as_str())
            .collect();
        let key = match key {
            Some(k) if keys.contains(&k) => k.to_owned(),
            Some(k) => {
                return Err(EngineError::Refused(format!(
                    "run {} does not wait for `{k}`; it waits for: {}",
                    rec.id,
                    keys.join(", ")
                )));
            }
            None if keys.len() == 1 => keys[0].to_owned(),
            None => {
                return Err(EngineError::Refused(format!(
                    "run {} waits for {} approvals; name one: {}",
                    rec.id,
                    keys.len(),
                    keys.join(", ")
                )));
            }
        };
        let waited = waiting
            .iter()
            .find(|w| w.get("key").and_then(Value::as_str) == Some(key.as_str()));
        if let Some(w) = waited.filter(|w| w.get("timer_only") == Some(&Value::Bool(true))) {
            let until = w.get("wake_ms").and_then(Value::as_i64).unwrap_or_default();
            return Err(EngineError::Refused(format!(
                "`{key}` of run {} waits until {until} (Unix ms) and takes no answer; give the wait an `or_approval` to let a person continue it early",
                rec.id
            )));
        }
        let options: Vec<&str> = waited
            .and_then(|w| w.get("options")?.as_array())
            .map(|o| o.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let decision = answer.get("decision").and_then(Value::as_str).unwrap_or("");
        if !options.is_empty() && !options.contains(&decision) {
            return Err(EngineError::Refused(format!(
                "`{decision}` is not a decision this approval accepts ({})",
                options.join(", ")
            )));
        }
        // The first answer wins: the run leaves `paused` in the same step that journals
        // the answer, so a second answer finds it taken and the journal holds one.
        let entry = JournalEntry {
            key: key.clone(),
            kind: EntryKind::Answer,
            value: answer.clone().into(),
        };
        self.take(&rec, vec![RunStatus::Paused], None, Some(entry))
            .await?;
        Ok((rec, EventKind::ApprovalAnswered { key, answer }))
    }

    /// Runs a failed run again from the steps that failed, reusing every journaled
    /// result. With `flow`, runs that flow instead of the stored one (the caller decides
    /// whether a changed flow is acceptable).
    pub async fn retry(
        &self,
        run_id: &str,
        flow: Option<Revision>,
    ) -> Result<RunResult, EngineError> {
        let (rec, prepared, kept) = self.accept_retry(run_id, flow).await?;
        self.drive(rec, prepared, kept, Entry::Resumed).await
    }

    /// [`Engine::retry`], driving the run on its own task (or handing it to the
    /// workers, see [`crate::EngineBuilder::continue_on_workers`]) once this process has
    /// taken it: a refusal comes back here, the run's end through what is returned.
    pub async fn retry_detached(
        &self,
        run_id: &str,
        flow: Option<Revision>,
    ) -> Result<Underway, EngineError> {
        let (rec, prepared, kept) = self.accept_retry(run_id, flow).await?;
        if self.continues_on_workers() {
            return self.hand_over(rec, None).await;
        }
        let id = rec.id.clone();
        let handle =
            self.spawn(|e| async move { e.drive(rec, prepared, kept, Entry::Resumed).await });
        Ok(Underway::here(id, handle))
    }

    /// Checks that run `run_id` may be retried, takes it for this process and forgets
    /// its journaled failures: the run, its flow and the journal it continues from.
    async fn accept_retry(
        &self,
        run_id: &str,
        flow: Option<Revision>,
    ) -> Result<(RunRecord, Arc<Prepared>, Vec<JournalEntry>), EngineError> {
        let mut rec = self.load(run_id).await?;
        if !matches!(rec.status, RunStatus::Failed | RunStatus::Cancelled) {
            return Err(EngineError::Refused(format!(
                "run {} is {}; only failed or cancelled runs are retried",
                rec.id,
                rec.status.as_str()
            )));
        }
        let prepared = match flow {
            Some(Revision {
                flow: p,
                source_hash,
                view,
            }) => {
                self.inner.store.put_flow(&p.hash, &p.ir_json).await?;
                rec.flow_hash = p.hash.clone();
                rec.source_hash = source_hash;
                rec.view = view;
                p
            }
            None => self.stored_flow(&rec).await?,
        };
        self.take(&rec, vec![rec.status], None, None).await?;
        let store = &self.inner.store;
        let journal = store.journal(&rec.id).await?;
        let failed: Vec<String> = journal
            .iter()
            .filter(|e| e.kind == EntryKind::Failure)
            .map(|e| e.key.clone())
            .collect();
        store.forget(&rec.id, &failed).await?;
        // A failed step's other entries go with its failure (the mark that it had
        // started, which would otherwise fail it again as of unknown outcome).
        let kept = journal
            .into_iter()
            .filter(|e| !failed.contains(&e.key))
            .collect();
        rec.error = None;
        rec.retries += 1;
        Ok((rec, prepared, kept))
    }

    /// Marks a run cancelled. A process executing it notices within a second and stops.
    pub async fn cancel(&self, run_id: &str) -> Result<RunRecord, EngineError> {
        let mut rec = self.load(run_id).await?;
        if !matches!(
            rec.status,
            RunStatus::Queued | RunStatus::Running | RunStatus::Paused
        ) {
            return Err(EngineError::Refused(format!(
                "run {} is already {}",
                rec.id,
                rec.status.as_str()
            )));
        }
        rec.status = RunStatus::Cancelled;
        rec.waiting = None;
        rec.updated_ms = now_ms() as i64;
        self.inner.store.update_run(&rec).await?;
        Ok(rec)
    }

    /// Drives run `rec` until it ends or pauses. A drive that stops on an error (the
    /// store failed to read or write) has not written where the run stands: the run is
    /// let go, so that a store that keeps leases stops renewing this one and another
    /// process takes the run over, rather than it staying held by nobody driving it.
    async fn drive(
        &self,
        rec: RunRecord,
        prepared: Arc<Prepared>,
        journal: Vec<JournalEntry>,
        entry: Entry,
    ) -> Result<RunResult, EngineError> {
        let id = rec.id.clone();
        let driven = self.drive_to_end(rec, prepared, journal, entry).await;
        if driven.is_err() {
            self.inner.store.let_go(&id);
        }
        driven
    }

    async fn drive_to_end(
        &self,
        mut rec: RunRecord,
        prepared: Arc<Prepared>,
        journal: Vec<JournalEntry>,
        entry: Entry,
    ) -> Result<RunResult, EngineError> {
        let inner = &self.inner;
        let resumed = !matches!(entry, Entry::New);
        let id: Arc<str> = Arc::from(rec.id.as_str());
        let cancel = Arc::new(Cancel::default());
        let first_seq = if resumed {
            inner.store.next_event_seq(&rec.id).await?
        } else {
            0
        };
        let sinks = inner.run_sinks();
        // The run's input, once: its `run_started`, `input` in expressions and the root
        // block's input share it.
        let initial = Arc::new(rec.input.clone());
        let run = RunCtx {
            id: id.clone(),
            engine: inner.clone(),
            prepared: prepared.clone(),
            journal: recorded(journal),
            emitter: Arc::new(Emitter::new(id.clone(), sinks, first_seq)),
            cancel: cancel.clone(),
            usage: Mutex::new(Usage::default()),
            initial: initial.clone(),
            journal_error: Mutex::new(None),
            unsynced: Mutex::default(),
            scoped: (!rec.scopes.is_empty()).then(|| weft_core::ports::ScopedStore {
                scopes: Arc::new(rec.scopes.clone()),
                store: inner.store.clone(),
            }),
            retries: rec.retries,
            binding: Arc::new(serde_json::json!({"id": rec.id, "retries": rec.retries})),
            fallback_warned: Default::default(),
        };
        if let Entry::Answered(answered) = entry {
            run.emitter.emit(|| answered);
        }
        if resumed {
            run.emitter.emit(|| EventKind::RunResumed {
                journaled: run.journal.len(),
                flow: prepared.flow.name.clone(),
                flow_hash: prepared.hash.clone(),
                dialect: rec.dialect.clone(),
            });
        } else {
            run.emitter.emit(|| EventKind::RunStarted {
                flow: prepared.flow.name.clone(),
                input: Shared::from(initial.clone()),
                flow_hash: prepared.hash.clone(),
                dialect: rec.dialect.clone(),
            });
        }
        if resumed {
            rec.status = RunStatus::Running;
            rec.owner = Some(inner.owner.clone());
            rec.waiting = None;
            rec.updated_ms = now_ms() as i64;
            inner.store.update_run(&rec).await?;
        }
        let watcher = tokio::spawn(watch_for_cancel(
            inner.store.clone(),
            rec.id.clone(),
            cancel.clone(),
        ));

        let flow = &*prepared.flow;
        let state0 = flow
            .state
            .clone()
            .map(weft_core::State::from_value)
            .unwrap_or_default();
        let budgets = match &flow.budget {
            Some(b) => Budgets::default().push("", b),
            None => Budgets::default(),
        };
        let cx = Cx {
            run: &run,
            flow,
            vars: Arc::new(Value::Object(flow.vars.clone().into_iter().collect())),
            key: root_key(flow),
            input: Shared::from(initial.clone()),
            state: state0.clone(),
            locals: Scope::new(),
            budgets,
            stall: Default::default(),
            parent: None,
            depth: 0,
            attempt: 1,
            retried: None,
        };
        let result = exec(cx, &flow.root).await;
        watcher.abort();
        run.sync().await;
        if cancel.is_lost() {
            // Another process drives the run now: its end is not this process's to write.
            return Err(EngineError::Taken(format!(
                "run {} was taken over by another process after this one lost its lease; it goes on there",
                rec.id
            )));
        }
        let journal_error = run.journal_error.lock().expect("journal error lock").take();

        let mut state = state0;
        let usage = *run.usage.lock().expect("usage lock");
        rec.usage.add(&usage);
        rec.updated_ms = now_ms() as i64;
        rec.owner = None;
        let mut waiting = Vec::new();
        let result = match journal_error {
            Some(e) => Err(Stop::Failed(e)),
            None => result,
        };
        match result {
            Ok(Outcome { output, patch, .. }) => {
                state.apply(&patch);
                rec.status = RunStatus::Completed;
                rec.error = None;
                run.emitter.emit(|| EventKind::RunCompleted {
                    output: output.clone(),
                });
                rec.output = Some(output);
            }
            Err(Stop::Failed(e)) if e.kind == ErrorKind::Cancelled || cancel.is_cancelled() => {
                rec.status = RunStatus::Cancelled;
                rec.error = Some(serde_json::to_value(&e).unwrap_or(Value::Null));
                run.emitter.emit(|| EventKind::RunCancelled);
            }
            Err(Stop::Failed(e)) => {
                rec.status = RunStatus::Failed;
                rec.error = Some(serde_json::to_value(&e).unwrap_or(Value::Null));
                run.emitter
                    .emit(|| EventKind::RunFailed { error: e.clone() });
            }
            Err(Stop::Suspended(suspension)) => {
                rec.status = RunStatus::Paused;
                // The paused run's state shows what happened before the pause.
                state.apply(&suspension.patch);
                waiting = suspension
                    .pending
                    .iter()
                    .map(|p| serde_json::to_value(p).unwrap_or(Value::Null))
                    .collect();
                rec.waiting = Some(Value::Array(waiting.clone()));
                rec.wake_ms = suspension.pending.iter().filter_map(|p| p.wake_ms).min();
                run.emitter.emit(|| EventKind::RunPaused {
                    waiting: Value::Array(waiting.clone()),
                });
            }
        }
        rec.state = Some(state.to_shared());
        // The run's last events are durable before its record says it ended: a follower
        // that sees the end has every event.
        inner.flush_events().await;
        inner.store.update_run(&rec).await?;
        Ok(RunResult {
            run_id: rec.id.clone(),
            status: rec.status,
            // The record is not read again: its output and state move, not copied (a
            // fan-out's results can be most of a run's memory).
            output: rec.output.take(),
            state: rec.state.take().unwrap_or_default(),
            error: rec
                .error
                .as_ref()
                .and_then(|e| serde_json::from_value(e.clone()).ok()),
            waiting,
            usage,
        })
    }
}

/// Stops this run when `weft runs cancel` from another process cancels it (read from
/// the store every half second), or when this process has lost the run's lease (asked
/// of the store, which knows without a query, every tenth of a second).
async fn watch_for_cancel(
    store: Arc<dyn weft_core::ports::Store>,
    id: String,
    cancel: Arc<Cancel>,
) {
    for tick in 1u64.. {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if store.lease_lost(&id) {
            cancel.lose();
            return;
        }
        if tick % 5 == 0
            && let Ok(Some(r)) = store.get_run(&id).await
            && r.status == RunStatus::Cancelled
        {
            cancel.cancel();
            return;
        }
    }
}

#[cfg(test)]
mod owner_tests {
    use super::{owner_alive, process_running};

    #[test]
    fn an_owner_on_another_machine_cannot_be_told_dead() {
        let host = crate::host_name();
        // PID 1 runs on every Linux machine; this process drives nothing for itself.
        assert_eq!(owner_alive(&format!("pid:1@{host}")), Some(true));
        assert_eq!(owner_alive("pid:1"), Some(true));
        let me = std::process::id();
        assert_eq!(owner_alive(&format!("pid:{me}@{host}")), Some(false));
        assert_eq!(owner_alive("pid:1@another-machine"), None);
        assert_eq!(owner_alive("someone"), None);
    }

    #[test]
    fn an_exited_but_unreaped_process_is_not_running() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        // Not reaped yet: a zombie, still listed in /proc.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::fs::read_to_string(format!("/proc/{}/stat", child.id()))
            .is_ok_and(|s| !s.contains(") Z"))
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the child never exited"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(std::path::Path::new(&format!("/proc/{}", child.id())).exists());
        assert!(!process_running(child.id()));
        child.wait().unwrap();
        assert!(!process_running(child.id()));
        assert!(process_running(std::process::id()));
    }
}
