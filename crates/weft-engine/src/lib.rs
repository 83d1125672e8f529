//! # weft-engine
//!
//! Owns execution of the core IR: scheduling, concurrency (`max_concurrency`,
//! `fail_fast`, deterministic merge order), retries with backoff, timeouts, rescue,
//! budgets, bounded loops and graphs, suspension at approvals, and journal replay.
//!
//! Durability is one mechanism: every effectful step's result is appended to the run's
//! journal under a deterministic step key; resuming a run (after a crash, a restart or an
//! approval) re-enters the flow from the top and answers journaled steps from the journal.
//!
//! The engine drives adapters only through the port traits of `weft-core` (models, code
//! sandboxes, native functions, stores, event sinks). It must not depend on any adapter
//! crate or know any dialect.

mod budget;
mod catalog;
mod drive;
mod error;
mod event_log;
mod events;
mod exec;
pub mod inspect;
mod lifecycle;
mod liveness;
mod options;
mod prepared;
mod run;
mod run_result;
mod secret_reads;
mod underway;

pub use error::EngineError;
pub use events::{CollectingSink, JsonlSink};
pub use options::{Revision, RunOptions};
pub use prepared::Prepared;
pub use run_result::{RunHandle, RunResult};
pub use underway::Underway;

use std::collections::HashMap;
use std::sync::Arc;
use weft_core::ports::{CodeRunner, EventSink, ModelResolver, Native, Store};

/// Runs flows. Cheap to clone; share one per process.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) models: Option<Arc<dyn ModelResolver>>,
    pub(crate) code: Vec<Arc<dyn CodeRunner>>,
    pub(crate) handlers: HashMap<String, Arc<dyn Native>>,
    pub(crate) actions: HashMap<String, Arc<dyn Native>>,
    /// Functions templates call as `native(name, ...)`; `None` when none is registered.
    pub(crate) functions: Option<Arc<Functions>>,
    pub(crate) sinks: Vec<Arc<dyn EventSink>>,
    /// Every run's events, stored and followed.
    pub(crate) event_log: Arc<event_log::EventLog>,
    /// Whether runs write their events to the store (see [`EngineBuilder::without_event_log`]).
    pub(crate) record_events: bool,
    pub(crate) default_model: Option<String>,
    /// The model blocks get when they name none and no default is set, and the advice
    /// its warning gives (see [`EngineBuilder::fallback_model`]).
    pub(crate) fallback_model: Option<(String, String)>,
    /// At most this many characters of each model call's prompt and answer go into
    /// its `llm_call` event; none when content is not captured.
    pub(crate) capture_model_content: Option<usize>,
    pub(crate) secrets: Arc<serde_json::Value>,
    pub(crate) owner: String,
    /// Flow hashes and source ids this engine has stored, so each is written once.
    pub(crate) stored: std::sync::Mutex<std::collections::HashSet<String>>,
    /// Flows read back from the store and prepared, by hash: a worker runs the same few
    /// flows many times, and reading and preparing one each time was a large part of
    /// a short run's cost.
    pub(crate) prepared: std::sync::Mutex<HashMap<String, Arc<Prepared>>>,
    /// Runs this engine submits, answers, resumes or retries are driven by the workers
    /// that share its store, not by this process (see [`EngineBuilder::continue_on_workers`]).
    pub(crate) on_workers: bool,
}

/// How many stored ids an engine remembers before it forgets them all (and stores
/// each again once: the writes are idempotent).
const REMEMBERED_IDS: usize = 4096;

/// How many prepared flows an engine keeps.
const REMEMBERED_FLOWS: usize = 256;

impl Inner {
    /// Whether this engine has stored `id` (a flow hash or source id) already.
    pub(crate) fn has_stored(&self, id: &str) -> bool {
        self.stored.lock().is_ok_and(|s| s.contains(id))
    }

    /// The flow stored under `hash`, prepared before by this engine.
    pub(crate) fn prepared_flow(&self, hash: &str) -> Option<Arc<Prepared>> {
        self.prepared.lock().ok()?.get(hash).cloned()
    }

    /// Remembers flow `hash` as prepared (forgetting them all past a bound: preparing
    /// again is only slower).
    pub(crate) fn remember_prepared(&self, hash: &str, prepared: &Arc<Prepared>) {
        if let Ok(mut all) = self.prepared.lock() {
            if all.len() >= REMEMBERED_FLOWS {
                all.clear();
            }
            all.insert(hash.to_owned(), prepared.clone());
        }
    }

    /// Remembers that `id` is stored.
    pub(crate) fn remember_stored(&self, id: &str) {
        if let Ok(mut stored) = self.stored.lock() {
            if stored.len() >= REMEMBERED_IDS {
                stored.clear();
            }
            stored.insert(id.to_owned());
        }
    }

    /// The sinks of a run: the engine's, and the event log when runs record events.
    pub(crate) fn run_sinks(&self) -> Vec<Arc<dyn EventSink>> {
        let mut sinks = self.sinks.clone();
        if self.record_events {
            sinks.push(self.event_log.clone());
        }
        sinks
    }

    /// Waits while the store is far behind the events runs make (see
    /// [`event_log::EventLog::room`]).
    pub(crate) async fn event_room(&self) {
        if self.record_events {
            self.event_log.room().await;
        }
    }

    /// Waits until the events emitted so far are stored, when runs record events.
    pub(crate) async fn flush_events(&self) {
        if self.record_events {
            self.event_log.flush().await;
        }
    }
}

/// A pure host function, as templates call it.
pub type Function =
    Arc<dyn Fn(&[serde_json::Value]) -> Result<serde_json::Value, String> + Send + Sync>;

/// The functions an engine offers to templates.
#[derive(Default)]
pub(crate) struct Functions(HashMap<String, Function>);

impl std::fmt::Debug for Functions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl weft_expr::Natives for Functions {
    fn call(&self, name: &str, args: &[serde_json::Value]) -> Result<serde_json::Value, String> {
        match self.0.get(name) {
            Some(f) => f(args),
            None => {
                let mut known: Vec<&str> = self.0.keys().map(String::as_str).collect();
                known.sort_unstable();
                Err(format!(
                    "no function `{name}` is registered (registered: {}); the host program registers it with EngineBuilder::function",
                    known.join(", ")
                ))
            }
        }
    }
}

/// Configures an [`Engine`].
pub struct EngineBuilder {
    inner: Inner,
}

impl Engine {
    /// Starts configuring an engine that keeps its runs in `store`.
    pub fn builder(store: Arc<dyn Store>) -> EngineBuilder {
        EngineBuilder {
            inner: Inner {
                event_log: Arc::new(event_log::EventLog::new(store.clone())),
                record_events: true,
                store,
                models: None,
                code: Vec::new(),
                handlers: HashMap::new(),
                actions: HashMap::new(),
                functions: None,
                sinks: Vec::new(),
                default_model: None,
                fallback_model: None,
                capture_model_content: None,
                secrets: Arc::new(serde_json::Value::Object(Default::default())),
                owner: format!("pid:{}@{}", std::process::id(), host_name()),
                stored: Default::default(),
                prepared: Default::default(),
                on_workers: false,
            },
        }
    }

    /// The store this engine keeps runs in.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// How this process names itself as the owner of the runs it drives.
    pub fn owner_name(&self) -> &str {
        &self.inner.owner
    }

    /// Follows run `run_id`'s events with `seq` above `after` (from its first event when
    /// `None`): the stored ones, then each as it becomes durable, ending after the run's
    /// last event (`run_completed`, `run_failed` or `run_cancelled`). Token deltas of
    /// runs this engine drives arrive live and are never replayed. Runs driven by
    /// another process are followed through the store. Needs a Tokio runtime.
    pub fn follow(
        &self,
        run_id: &str,
        after: Option<u64>,
    ) -> tokio::sync::mpsc::Receiver<Result<Arc<weft_core::event::SharedEvent>, EngineError>> {
        event_log::follow(&self.inner.event_log, run_id.to_owned(), after, false)
    }

    /// [`Engine::follow`] for a run about to be started under `run_id`: subscribed
    /// before it starts, so that not even its first token deltas are missed, and
    /// waiting for it to be stored rather than failing. Drop the receiver if the run
    /// is never started.
    pub fn follow_before_start(
        &self,
        run_id: &str,
    ) -> tokio::sync::mpsc::Receiver<Result<Arc<weft_core::event::SharedEvent>, EngineError>> {
        event_log::follow(&self.inner.event_log, run_id.to_owned(), None, true)
    }
}

impl EngineBuilder {
    /// Resolves model ids for `llm` blocks.
    pub fn models(mut self, resolver: Arc<dyn ModelResolver>) -> Self {
        self.inner.models = Some(resolver);
        self
    }

    /// The model for `llm` blocks that name none.
    pub fn default_model(mut self, id: impl Into<String>) -> Self {
        self.inner.default_model = Some(id.into());
        self
    }

    /// The model for `llm` blocks that name none when no default model is set: the
    /// run uses it, and warns once (a `warning` event, code `no_model`) that it did,
    /// followed by `advice` (how to choose a model). For a front end whose stand-in
    /// model is one the user did not choose, such as a small local one.
    pub fn fallback_model(mut self, id: impl Into<String>, advice: impl Into<String>) -> Self {
        self.inner.fallback_model = Some((id.into(), advice.into()));
        self
    }

    /// Puts each model call's prompt and answer, cut to `max_chars` characters, in its
    /// `llm_call` event (and so in the stored event log and in traces). Off by default:
    /// prompts hold what users typed.
    pub fn capture_model_content(mut self, max_chars: usize) -> Self {
        self.inner.capture_model_content = Some(max_chars);
        self
    }

    /// Adds a sandbox for `code` blocks.
    pub fn code_runner(mut self, runner: Arc<dyn CodeRunner>) -> Self {
        self.inner.code.push(runner);
        self
    }

    /// Registers a native function for `handler` blocks named `name`.
    pub fn handler(mut self, name: impl Into<String>, f: Arc<dyn Native>) -> Self {
        self.inner.handlers.insert(name.into(), f);
        self
    }

    /// Registers a built-in action for `action` blocks that use `name`.
    pub fn action(mut self, name: impl Into<String>, f: Arc<dyn Native>) -> Self {
        self.inner.actions.insert(name.into(), f);
        self
    }

    /// Registers a pure function that templates and conditions call as
    /// `native("name", args...)`. It runs again whenever a run is replayed, so it must
    /// not have effects; effects belong in a handler.
    pub fn function(
        mut self,
        name: impl Into<String>,
        f: impl Fn(&[serde_json::Value]) -> Result<serde_json::Value, String> + Send + Sync + 'static,
    ) -> Self {
        let functions = self.inner.functions.get_or_insert_with(Default::default);
        Arc::get_mut(functions)
            .expect("functions are shared only once the engine is built")
            .0
            .insert(name.into(), Arc::new(f));
        self
    }

    /// Keeps runs' events out of the store: nothing can follow or replay them then
    /// (`Engine::follow` sees only what earlier engines stored), and each block costs
    /// less (docs/performance.md). For embedders that only want results.
    pub fn without_event_log(mut self) -> Self {
        self.inner.record_events = false;
        self
    }

    /// Sends every event of every run to `sink`.
    pub fn sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.inner.sinks.push(sink);
        self
    }

    /// Values visible to templates as `secrets`.
    pub fn secrets(mut self, secrets: serde_json::Value) -> Self {
        self.inner.secrets = Arc::new(secrets);
        self
    }

    /// How this process names itself as the owner of the runs it executes.
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.inner.owner = owner.into();
        self
    }

    /// Leaves the runs this engine submits, answers, resumes or retries to the workers
    /// that share its store (`weft serve --role api|all` on PostgreSQL): they are
    /// written `queued` and a worker's claim drives them. Without it, this process
    /// drives them.
    pub fn continue_on_workers(mut self) -> Self {
        self.inner.on_workers = true;
        self
    }

    /// Finishes configuration.
    pub fn build(self) -> Engine {
        Engine {
            inner: Arc::new(self.inner),
        }
    }
}

/// This machine's name, as owners of runs name it (`pid:N@host`): the kernel's host
/// name, read once.
pub(crate) fn host_name() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|n| n.trim().to_owned())
            .ok()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "localhost".to_owned())
    })
}
