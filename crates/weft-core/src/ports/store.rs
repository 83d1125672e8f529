//! The store port: durable flows, runs, journals, event logs and scoped state.

use crate::error::BlockError;
use crate::event::Event;
use crate::ports::listing::{Cursor, FlowSource, FlowVersion, RunQuery};
use crate::usage::Usage;
use crate::value::{Shared, Value};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// Resolves once a queued journal entry is durable (see [`Store::append_queued`]).
pub type Durable =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), StoreError>> + Send>>;

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Accepted and stored, waiting for a slot (a server's `--max-runs`).
    Queued,
    /// Executing (or its process died while executing).
    Running,
    /// Waiting for an approval.
    Paused,
    /// Finished with an output.
    Completed,
    /// Finished with an error.
    Failed,
    /// Stopped on request.
    Cancelled,
}

impl RunStatus {
    /// Every status, in the order a run can reach them.
    pub const ALL: [RunStatus; 6] = [
        RunStatus::Queued,
        RunStatus::Running,
        RunStatus::Paused,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ];

    /// The lowercase name.
    pub fn as_str(&self) -> &'static str {
        match self {
            RunStatus::Queued => "queued",
            RunStatus::Running => "running",
            RunStatus::Paused => "paused",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }

    /// Whether the run has ended: completed, failed or cancelled.
    pub fn has_ended(&self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
        )
    }

    /// Parses a lowercase name.
    pub fn parse(s: &str) -> Option<RunStatus> {
        Some(match s {
            "queued" => RunStatus::Queued,
            "running" => RunStatus::Running,
            "paused" => RunStatus::Paused,
            "completed" => RunStatus::Completed,
            "failed" => RunStatus::Failed,
            "cancelled" => RunStatus::Cancelled,
            _ => return None,
        })
    }
}

/// A run as the store keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run's id.
    pub id: String,
    /// Content hash of the flow it runs.
    pub flow_hash: String,
    /// The flow's name.
    pub flow_name: String,
    /// The file the flow came from, if any.
    pub source: Option<String>,
    /// Content hash of that file when the run started.
    pub source_hash: Option<String>,
    /// The dialect the file was written in.
    pub dialect: Option<String>,
    /// The id of the flow's stored text ([`crate::ports::FlowSource`]), when it was stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_id: Option<String>,
    /// The run's input.
    pub input: Value,
    /// Where the run stands.
    pub status: RunStatus,
    /// The final output, once completed; shared, since a fan-out's results can be most
    /// of a run's memory and the output goes to the run's last event, the store and the
    /// caller at once.
    pub output: Option<crate::value::Shared>,
    /// The final state, once finished or paused; shared as the output is.
    pub state: Option<crate::value::Shared>,
    /// The error, once failed.
    pub error: Option<Value>,
    /// The approvals it waits for, when paused.
    pub waiting: Option<Value>,
    /// Model usage so far.
    pub usage: Usage,
    /// Which process runs it (`host:pid`), while running.
    pub owner: Option<String>,
    /// Creation time, Unix milliseconds.
    pub created_ms: i64,
    /// Last change, Unix milliseconds.
    pub updated_ms: i64,
    /// The session, user and project the run belongs to (its scoped state).
    #[serde(default, skip_serializing_if = "Scopes::is_empty")]
    pub scopes: Scopes,
    /// How the flow's dialect names the run's events and shapes its result (opaque to the
    /// engine and the store; written by the front end that started the run), so that every
    /// later reader presents the run the same way without the flow's file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<Value>,
    /// The settings of the front end that started the run which its effects depend on
    /// (opaque to the engine and the store): the CLI keeps the files directory and the
    /// default model here, so a run continued from elsewhere acts where it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<Value>,
    /// How many times the run was retried after failing. Part of every step's
    /// idempotency key: a deliberate retry is a new request to a service that
    /// deduplicates, a resume after a crash is the same one.
    #[serde(default)]
    pub retries: u32,
    /// Until when (Unix milliseconds, the database's clock) the process driving this
    /// running run holds its lease, which that process renews while it lives; once it
    /// has passed, another process may take the run over. `None` where the store keeps
    /// no leases (SQLite, memory), which check the owner's process instead. Kept by the
    /// store: [`Store::update_run`] does not write it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_until_ms: Option<i64>,
    /// When a paused run waits for a time (a `wait` step), the earliest such time,
    /// Unix milliseconds: a process that serves timers continues it then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_ms: Option<i64>,
}

/// The session, user and project a run belongs to. Each names a scoped-state document
/// kept in the store across runs (`session/<id>`, `user/<id>`, `project/<id>`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scopes {
    /// The session's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The user's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The project's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
}

impl Scopes {
    /// Whether the run belongs to no scope.
    pub fn is_empty(&self) -> bool {
        self.session.is_none() && self.user.is_none() && self.project.is_none()
    }

    /// The store key of scope `scope` (`session`, `user` or `project`), when the run has
    /// that scope.
    pub fn key(&self, scope: &str) -> Option<String> {
        let id = match scope {
            "session" => self.session.as_ref(),
            "user" => self.user.as_ref(),
            "project" => self.project.as_ref(),
            _ => None,
        }?;
        Some(format!("{scope}/{id}"))
    }
}

/// A change to a scoped-state document (a JSON object), applied atomically by the store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopedChange {
    /// Sets these top-level fields (an object), leaving the others.
    Patch(Value),
    /// Adds `by` to the number at the dotted `path` (0 when absent).
    Inc {
        /// The field.
        path: String,
        /// The amount.
        by: f64,
    },
}

impl ScopedChange {
    /// The document `doc` (an empty object when there is none) after every change of
    /// `changes`, or why one did not apply (the caller keeps `doc` as it was).
    pub fn apply_all(doc: Option<&Value>, changes: &[ScopedChange]) -> Result<Value, String> {
        let mut next = doc
            .cloned()
            .unwrap_or_else(|| Value::Object(Default::default()));
        for c in changes {
            c.apply(&mut next)?;
        }
        Ok(next)
    }

    /// Applies the change to `doc`, which becomes an object if it is not one.
    pub fn apply(&self, doc: &mut Value) -> Result<(), String> {
        if !doc.is_object() {
            *doc = Value::Object(Default::default());
        }
        match self {
            ScopedChange::Patch(Value::Object(fields)) => {
                let m = doc.as_object_mut().expect("made an object above");
                for (k, v) in fields {
                    m.insert(k.clone(), v.clone());
                }
                Ok(())
            }
            ScopedChange::Patch(other) => Err(format!("a state patch is an object, not {other}")),
            ScopedChange::Inc { path, by } => {
                let segments = crate::value::split_path(path);
                if segments.is_empty() {
                    return Err(format!("`{path}` is not a state path"));
                }
                let mut cur = doc;
                for seg in &segments[..segments.len() - 1] {
                    let m = cur.as_object_mut().ok_or_else(|| {
                        format!("`{path}` runs through a value that is not an object")
                    })?;
                    cur = m
                        .entry(seg.clone())
                        .or_insert_with(|| Value::Object(Default::default()));
                }
                let m = cur.as_object_mut().ok_or_else(|| {
                    format!("`{path}` runs through a value that is not an object")
                })?;
                let last = segments.last().expect("not empty");
                let old = match m.get(last) {
                    None | Some(Value::Null) => 0.0,
                    Some(v) => v
                        .as_f64()
                        .ok_or_else(|| format!("`{path}` is {v}, not a number"))?,
                };
                let new = old + by;
                // Whole numbers stay integers, as a counter should.
                let v = if new.fract() == 0.0 && new.abs() < 9.0e15 {
                    Value::from(new as i64)
                } else {
                    Value::from(new)
                };
                m.insert(last.clone(), v);
                Ok(())
            }
        }
    }
}

impl RunRecord {
    /// A new run of flow `flow_hash` (named `flow_name`) with `input`, running since `now_ms`.
    pub fn new(
        id: String,
        flow_hash: String,
        flow_name: String,
        input: Value,
        now_ms: i64,
    ) -> RunRecord {
        RunRecord {
            id,
            flow_hash,
            flow_name,
            source: None,
            source_hash: None,
            dialect: None,
            flow_id: None,
            input,
            status: RunStatus::Running,
            output: None,
            state: None,
            error: None,
            waiting: None,
            usage: Usage::default(),
            owner: None,
            created_ms: now_ms,
            updated_ms: now_ms,
            scopes: Scopes::default(),
            view: None,
            settings: None,
            retries: 0,
            lease_until_ms: None,
            wake_ms: None,
        }
    }
}

/// Totals over every run a store holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunStats {
    /// How many runs stand in each status (statuses with none are left out).
    pub runs: Vec<(RunStatus, u64)>,
    /// Effectful steps whose result is journaled.
    pub steps: u64,
    /// Model usage summed over the runs.
    pub usage: Usage,
}

/// What a journal entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    /// A completed step's result: `{output, exit?, patch?, usage?}`.
    Result,
    /// An answer to an approval step: `{decision, note, ...}`.
    Answer,
    /// A step's final failure (after retries), so a resumed run takes the same path;
    /// retrying a failed run forgets these entries and runs the steps again.
    Failure,
    /// A step that must not run twice is about to reach outside the run: `{}`, durable
    /// before it starts. Found without a result after it, the step's outcome is unknown.
    Started,
}

impl EntryKind {
    /// The lowercase name.
    pub fn as_str(&self) -> &'static str {
        match self {
            EntryKind::Result => "result",
            EntryKind::Answer => "answer",
            EntryKind::Failure => "failure",
            EntryKind::Started => "started",
        }
    }

    /// Parses a lowercase name.
    pub fn parse(s: &str) -> Option<EntryKind> {
        Some(match s {
            "result" => EntryKind::Result,
            "answer" => EntryKind::Answer,
            "failure" => EntryKind::Failure,
            "started" => EntryKind::Started,
            _ => return None,
        })
    }
}

/// One journaled fact about a step, under its deterministic key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    /// The step key: the block path plus loop, map and visit indexes.
    pub key: String,
    /// What it records.
    pub kind: EntryKind,
    /// The recorded value: a step's result shares its output with the running step
    /// (and with the events that carry it), so journaling it copies nothing and a store
    /// can tell by pointer that it already holds it.
    pub value: Shared,
}

/// A process's request to take a run and drive it: granted only if the run is still in
/// one of the statuses the process saw (and, when given, still has the owner it saw), so
/// that of two processes that answer, resume or retry one run at the same instant
/// exactly one continues it.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// The run.
    pub run_id: String,
    /// The statuses it may be in.
    pub from: Vec<RunStatus>,
    /// The owner it must still have (`Some(None)`: none), or `None` not to check.
    pub owner_was: Option<Option<String>>,
    /// The claiming process (`host:pid`).
    pub owner: String,
    /// When, Unix milliseconds.
    pub now_ms: i64,
    /// An entry appended in the same atomic step (an approval's answer), so the journal
    /// holds only the winner's.
    pub entry: Option<JournalEntry>,
}

impl Claim {
    /// Whether the claim may take run `now` as it is: still in one of the statuses the
    /// claimant saw, and with the owner it saw when it said which. The one rule every
    /// store applies, inside its own atomic step.
    pub fn may_take(&self, now: &RunRecord) -> bool {
        let owner_ok = self.owner_was.as_ref().is_none_or(|o| *o == now.owner);
        self.from.contains(&now.status) && owner_ok
    }

    /// The error for a claim of a run no store holds.
    pub fn missing(&self) -> StoreError {
        StoreError::Conflict(format!("no run with id `{}`", self.run_id))
    }
}

/// What became of a [`Claim`].
#[derive(Debug, Clone, PartialEq)]
pub enum Claimed {
    /// The run is now `running`, owned by the claimant.
    Taken,
    /// Another process got there first (or the run moved on): the run as it is now.
    Lost(Box<RunRecord>),
}

/// A failure of the store itself, by what a caller can do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database cannot be opened or is not one of Weft's: choose another.
    #[error("{0}")]
    Unusable(String),
    /// A newer Weft wrote the database: upgrade Weft to read it.
    #[error("{0}")]
    TooNew(String),
    /// The database refused or failed an operation (I/O, locking, a constraint).
    #[error("{context}: {message}")]
    Backend {
        /// What the store was doing.
        context: String,
        /// What the database said.
        message: String,
    },
    /// A stored value does not read back (a damaged row, an unknown entry kind).
    #[error("{0}")]
    Corrupt(String),
    /// The caller asked for something that conflicts with what is stored (a run id that
    /// exists, a prefix that matches several runs).
    #[error("{0}")]
    Conflict(String),
    /// The store cannot serve any more requests (its worker stopped, a lock was
    /// poisoned by a panic).
    #[error("{0}")]
    Closed(String),
    /// This process no longer holds the run it wrote to: its lease lapsed and another
    /// process took the run over. Nothing was written; the process must stop driving
    /// the run, which goes on elsewhere.
    #[error("{0}")]
    Fenced(String),
}

impl StoreError {
    /// A failed operation of the database, while doing `context`.
    pub fn backend(context: &str, message: impl std::fmt::Display) -> StoreError {
        StoreError::Backend {
            context: context.to_owned(),
            message: message.to_string(),
        }
    }
}

impl From<StoreError> for BlockError {
    fn from(e: StoreError) -> BlockError {
        BlockError::new(crate::error::ErrorKind::Store, e.to_string())
    }
}

/// Durable storage of flows, runs and their journals.
#[async_trait]
pub trait Store: Send + Sync {
    /// Stores a flow's IR (JSON) under its hash; idempotent.
    async fn put_flow(&self, hash: &str, ir_json: &str) -> Result<(), StoreError>;
    /// The IR (JSON) stored under `hash`.
    async fn get_flow(&self, hash: &str) -> Result<Option<String>, StoreError>;
    /// Creates a run; [`StoreError::Conflict`] when a run with its id exists.
    async fn create_run(&self, run: &RunRecord) -> Result<(), StoreError>;
    /// Replaces a run's record.
    async fn update_run(&self, run: &RunRecord) -> Result<(), StoreError>;
    /// A run by id (a unique prefix of at least 4 characters also matches).
    async fn get_run(&self, id: &str) -> Result<Option<RunRecord>, StoreError>;
    /// The runs `query` asks for, newest first.
    async fn list_runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>, StoreError>;
    /// Stores a flow's text under its id; the first text stored under an id stays.
    async fn put_source(&self, source: &FlowSource) -> Result<(), StoreError>;
    /// The flow text stored under `id`.
    async fn get_source(&self, id: &str) -> Result<Option<FlowSource>, StoreError>;
    /// Stored flow texts, newest first, at most `limit`, after `after` when given.
    async fn list_sources(
        &self,
        limit: usize,
        after: Option<&Cursor>,
    ) -> Result<Vec<FlowSource>, StoreError>;
    /// Saves stored text `flow_id` as the next version of the flow called `name` (1 for
    /// a new name), unless it is that flow's latest version already; the version that
    /// holds it. Two saves at once get two versions, never one number twice.
    async fn save_version(
        &self,
        name: &str,
        flow_id: &str,
        now_ms: i64,
    ) -> Result<FlowVersion, StoreError>;
    /// Version `version` of the flow called `name`, or its latest when `None`.
    async fn flow_version(
        &self,
        name: &str,
        version: Option<u32>,
    ) -> Result<Option<FlowVersion>, StoreError>;
    /// The latest version of every named flow, by name.
    async fn named_flows(&self) -> Result<Vec<FlowVersion>, StoreError>;
    /// Totals over every run, for monitoring.
    async fn run_stats(&self) -> Result<RunStats, StoreError>;
    /// Every journal entry of a run, in append order.
    async fn journal(&self, run_id: &str) -> Result<Vec<JournalEntry>, StoreError>;
    /// Appends an entry and returns once it is durable, so that a step's result is
    /// committed before anything that depends on it starts. Entries become durable in
    /// append order; a store may commit appends made concurrently (by parallel branches
    /// or other runs) together (group commit), but never reports one durable early.
    async fn append(&self, run_id: &str, entry: JournalEntry) -> Result<(), StoreError>;
    /// Queues an entry behind every earlier append and returns once it is queued, with
    /// a future that resolves when it is durable. It becomes durable in append order,
    /// with the next commit, so a later [`Store::append`] that returns has made it
    /// durable too. For steps that a crash may run again from the same inputs (sandboxed
    /// code): they need not wait for a commit each. The default waits, as `append` does.
    async fn append_queued(
        &self,
        run_id: &str,
        entry: JournalEntry,
    ) -> Result<Durable, StoreError> {
        self.append(run_id, entry).await?;
        Ok(Box::pin(std::future::ready(Ok(()))))
    }
    /// Appends events to their runs' event logs and returns once they are durable (in
    /// the same group commits as journal entries). An event whose run already has one
    /// at its `seq` is ignored: the log is append-only.
    async fn append_events(&self, events: &[Event]) -> Result<(), StoreError>;
    /// A run's stored events with `seq` above `after` (all when `None`), in order, at
    /// most `limit`.
    async fn events(
        &self,
        run_id: &str,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError>;
    /// The `seq` a run's next event takes: one past the last stored.
    async fn next_event_seq(&self, run_id: &str) -> Result<u64, StoreError>;
    /// Removes journal entries of a run whose key is in `keys` (used to re-ask approvals).
    async fn forget(&self, run_id: &str, keys: &[String]) -> Result<(), StoreError>;
    /// Takes a run for one process, atomically (compare-and-set on its status and owner,
    /// with the claim's entry appended in the same step). A missing run is an error.
    async fn claim_run(&self, claim: Claim) -> Result<Claimed, StoreError>;
    /// The scoped-state document `key` (`session/<id>`, `user/<id>/resources/plan`, ...).
    async fn scoped_state(&self, key: &str) -> Result<Option<Value>, StoreError>;
    /// Applies `changes` to the document `key` in order, atomically with respect to other
    /// changes of it, and returns the document as it is then. A change that does not
    /// apply leaves the document as it was.
    async fn change_scoped_state(
        &self,
        key: &str,
        changes: &[ScopedChange],
    ) -> Result<Value, StoreError>;
    /// Whether this process has lost the lease of run `run_id`, which it drives: the
    /// lease lapsed before it was renewed, or another process took the run over. The
    /// process must then stop driving the run (its writes are refused). Stores that
    /// keep no leases never lose one.
    fn lease_lost(&self, run_id: &str) -> bool {
        let _ = run_id;
        false
    }
    /// This process stops driving run `run_id` without finishing it (it could not read
    /// what it needs to): a store that keeps leases stops renewing this one, so another
    /// process takes the run over once it lapses. Others need do nothing.
    fn let_go(&self, run_id: &str) {
        let _ = run_id;
    }
    /// The same database's schedules, webhooks and timers, where it keeps them.
    fn triggers(&self) -> Option<&dyn crate::ports::TriggerStore> {
        None
    }
    /// The same database's threads, where it keeps them.
    fn threads(&self) -> Option<&dyn crate::ports::ThreadStore> {
        None
    }
    /// The same database's API keys, where it keeps them.
    fn keys(&self) -> Option<&dyn crate::ports::KeyStore> {
        None
    }
    /// The same database's audit log, where it keeps one.
    fn audit(&self) -> Option<&dyn crate::ports::AuditStore> {
        None
    }
}
