//! What one run shares across its blocks, and what one block invocation carries.

use crate::Inner;
use crate::budget::Budgets;
use crate::events::Emitter;
use crate::prepared::Prepared;
use futures::FutureExt;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;
use weft_core::ir::{Flow, Stall};
use weft_core::ports::{Durable, EntryKind, JournalEntry, ParentBlock, Usage};
use weft_core::{BlockError, ErrorKind, Patch, State, Value};
use weft_expr::{Scope, Shared};

/// A journaled fact, ready for replay.
#[derive(Debug, Clone)]
pub(crate) enum Recorded {
    /// A step's result, sharing its output with the journal entry it was read from.
    Result(Shared),
    Answer(Value),
    Failure(BlockError),
    /// A step that must not run twice started in an earlier drive and recorded nothing
    /// after: its outcome is unknown. What it recorded then (its idempotency key).
    Started(Value),
}

/// Cancels a run: set once, observed by every waiting leaf.
#[derive(Default)]
pub(crate) struct Cancel {
    flag: AtomicBool,
    /// The run stops because this process lost its lease: it goes on elsewhere, and
    /// nothing of its end is written here.
    lost: AtomicBool,
    notify: Notify,
}

impl Cancel {
    pub(crate) fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// Stops the run because another process holds it now.
    pub(crate) fn lose(&self) {
        self.lost.store(true, Ordering::SeqCst);
        self.cancel();
    }

    /// Whether the run stopped because this process lost it.
    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }

    pub(crate) async fn cancelled(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

/// Shared by every block of one run.
pub(crate) struct RunCtx {
    pub(crate) id: Arc<str>,
    pub(crate) engine: Arc<Inner>,
    pub(crate) prepared: Arc<Prepared>,
    pub(crate) journal: HashMap<String, Recorded>,
    pub(crate) emitter: Arc<Emitter>,
    pub(crate) cancel: Arc<Cancel>,
    pub(crate) usage: Mutex<Usage>,
    pub(crate) initial: Arc<Value>,
    pub(crate) journal_error: Mutex<Option<BlockError>>,
    /// Entries queued without waiting for their commit (see [`RunCtx::record_queued`]),
    /// oldest first, until they are known to be durable.
    pub(crate) unsynced: Mutex<VecDeque<Durable>>,
    /// The run's scopes, when it has any.
    pub(crate) scoped: Option<weft_core::ports::ScopedStore>,
    /// How many times the run was retried after failing (part of idempotency keys).
    pub(crate) retries: u32,
    /// `run` in expressions: `{id, retries}`.
    pub(crate) binding: Arc<Value>,
    /// Whether the run has warned that it uses the engine's fallback model.
    pub(crate) fallback_warned: std::sync::atomic::AtomicBool,
}

impl RunCtx {
    /// Looks up a journaled fact for `key`.
    pub(crate) fn recorded(&self, key: &str) -> Option<&Recorded> {
        if self.journal.is_empty() {
            None
        } else {
            self.journal.get(key)
        }
    }

    /// Appends to the journal and returns once the entry is durable, so that nothing
    /// that depends on this step starts before its result would survive a crash. A store
    /// failure is remembered and fails the run at its end, because a step whose result
    /// cannot be recorded must not be reported as durable.
    pub(crate) async fn record(&self, key: &str, kind: EntryKind, value: impl Into<Shared>) {
        let entry = JournalEntry {
            key: key.to_owned(),
            kind,
            value: value.into(),
        };
        if let Err(e) = self.engine.store.append(&self.id, entry).await {
            self.journal_failed(e);
        }
    }

    /// Appends to the journal without waiting for the commit: for steps that a crash
    /// runs again from the same inputs, whose result nothing outside the run has seen.
    /// [`RunCtx::sync`] makes them durable before anything reaches outside the run.
    pub(crate) async fn record_queued(&self, key: &str, kind: EntryKind, value: Shared) {
        let entry = JournalEntry {
            key: key.to_owned(),
            kind,
            value,
        };
        match self.engine.store.append_queued(&self.id, entry).await {
            Ok(durable) => {
                let mut unsynced = self.unsynced.lock().expect("unsynced lock");
                // Forget the ones committed meanwhile, so a long run of code steps
                // holds only what the store has not reached yet.
                while let Some(front) = unsynced.front_mut() {
                    match front.now_or_never() {
                        Some(done) => {
                            unsynced.pop_front();
                            if let Err(e) = done {
                                self.journal_failed(e);
                            }
                        }
                        None => break,
                    }
                }
                unsynced.push_back(durable);
            }
            Err(e) => self.journal_failed(e),
        }
    }

    /// Waits until every entry this run queued is durable: before a step reaches outside
    /// the run (a model, an action, a host function), so that what it was given survives
    /// a crash, and before the run's record says where it stands.
    pub(crate) async fn sync(&self) {
        let pending = std::mem::take(&mut *self.unsynced.lock().expect("unsynced lock"));
        for durable in pending {
            if let Err(e) = durable.await {
                self.journal_failed(e);
            }
        }
    }

    /// The store failure this run met, if any.
    pub(crate) fn journal_failure(&self) -> Option<BlockError> {
        self.journal_error
            .lock()
            .expect("journal error lock")
            .clone()
    }

    /// Remembers the first store failure; it fails the run at its end, because a step
    /// whose result cannot be recorded must not be reported as durable. A refusal
    /// because another process took the run over stops the run at once: no further
    /// step of it may act from this process.
    fn journal_failed(&self, e: weft_core::ports::StoreError) {
        if matches!(e, weft_core::ports::StoreError::Fenced(_)) {
            self.cancel.lose();
        }
        let mut slot = self.journal_error.lock().expect("journal error lock");
        slot.get_or_insert_with(|| BlockError::from(e));
    }
}

/// What a block produced.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    pub(crate) output: Shared,
    pub(crate) exit: Option<Arc<str>>,
    pub(crate) patch: Patch,
    /// The result came from the journal.
    pub(crate) replayed: bool,
}

impl Outcome {
    pub(crate) fn of(output: impl Into<Shared>) -> Outcome {
        Outcome {
            output: output.into(),
            exit: None,
            patch: Patch::default(),
            replayed: false,
        }
    }
}

/// An approval or a timer the run waits for.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Pending {
    pub(crate) key: String,
    pub(crate) prompt: String,
    pub(crate) options: Vec<String>,
    /// When a `wait` wakes, Unix milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) wake_ms: Option<i64>,
    /// A `wait` without `or_approval` takes no answer: only its time continues it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) timer_only: bool,
}

impl Pending {
    /// An approval's question.
    pub(crate) fn approval(key: String, prompt: String, options: Vec<String>) -> Pending {
        Pending {
            key,
            prompt,
            options,
            wake_ms: None,
            timer_only: false,
        }
    }
}

/// A run that waits: the approvals it waits for, and the state writes made before it
/// stopped (so a paused run's state shows what has happened so far; replay redoes them).
#[derive(Debug, Default)]
pub(crate) struct Suspension {
    pub(crate) pending: Vec<Pending>,
    pub(crate) patch: Patch,
}

impl Suspension {
    /// The same suspension, with `earlier` writes before its own.
    pub(crate) fn after(mut self, mut earlier: Patch) -> Suspension {
        earlier.extend(std::mem::take(&mut self.patch));
        self.patch = earlier;
        self
    }

    /// The same suspension without its writes, for a scope whose writes stay its own
    /// (an isolated branch, a sub-flow with a state of its own).
    pub(crate) fn without_writes(mut self) -> Suspension {
        self.patch = Patch::default();
        self
    }

    /// Adds another branch's suspension.
    pub(crate) fn merge(&mut self, other: Suspension) {
        self.pending.extend(other.pending);
        self.patch.extend(other.patch);
    }
}

/// Why a block did not produce an outcome.
#[derive(Debug)]
pub(crate) enum Stop {
    Failed(BlockError),
    Suspended(Suspension),
}

impl Stop {
    /// A suspension gets `earlier` writes before its own; a failure stays as it is.
    pub(crate) fn after(self, earlier: &Patch) -> Stop {
        match self {
            Stop::Suspended(s) => Stop::Suspended(s.after(earlier.clone())),
            failed => failed,
        }
    }
}

impl Stop {
    /// A suspension without its writes when `isolate` (a scope whose writes stay its own).
    pub(crate) fn without_writes_if(self, isolate: bool) -> Stop {
        match self {
            Stop::Suspended(s) if isolate => Stop::Suspended(s.without_writes()),
            other => other,
        }
    }
}

impl From<BlockError> for Stop {
    fn from(e: BlockError) -> Stop {
        Stop::Failed(e)
    }
}

pub(crate) type Exec = Result<Outcome, Stop>;

/// One block invocation's context. Cloned (cheaply) for each child.
#[derive(Clone)]
pub(crate) struct Cx<'r> {
    pub(crate) run: &'r RunCtx,
    pub(crate) flow: &'r Flow,
    /// The current flow's `vars`, as one shared value.
    pub(crate) vars: Arc<Value>,
    pub(crate) key: Arc<str>,
    pub(crate) input: Shared,
    pub(crate) state: State,
    pub(crate) locals: Scope,
    pub(crate) budgets: Budgets,
    /// Stall thresholds of the enclosing blocks (innermost wins per phase).
    pub(crate) stall: Stall,
    /// The nearest enclosing named composite, for native functions (tracked only when
    /// the engine has handlers).
    pub(crate) parent: Option<Arc<ParentBlock>>,
    pub(crate) depth: u32,
    /// This block's attempt under its own retry policy (1 for the first).
    pub(crate) attempt: u32,
    /// The attempts after the first of this block and the blocks around it, as
    /// `key#n` words: a retried block's steps are new requests, with new keys.
    pub(crate) retried: Option<Arc<str>>,
}

impl<'r> Cx<'r> {
    /// The child context reached by path segment `seg`.
    pub(crate) fn child(&self, seg: &str, input: Shared, state: State) -> Cx<'r> {
        let key: Arc<str> = if self.key.is_empty() {
            Arc::from(seg)
        } else {
            Arc::from(format!("{}/{seg}", self.key))
        };
        Cx {
            key,
            input,
            state,
            attempt: 1,
            ..self.clone()
        }
    }

    /// This context at attempt `n` of its block's retry policy.
    pub(crate) fn at_attempt(&self, n: u32) -> Cx<'r> {
        let earlier = self.retried.as_deref().unwrap_or("");
        Cx {
            attempt: n,
            retried: Some(Arc::from(format!("{earlier}{}#{n} ", self.key))),
            ..self.clone()
        }
    }

    /// The idempotency key of this attempt of this step.
    pub(crate) fn idempotency_key(&self) -> String {
        weft_core::hash::idempotency_key(
            &self.run.id,
            &self.key,
            self.run.retries,
            self.retried.as_deref().unwrap_or(""),
        )
    }

    /// This context for an effectful step: `step` (`{key, attempt, idempotency_key}`) is
    /// bound for its templates and code.
    pub(crate) fn for_effect(&self) -> Cx<'r> {
        let step = serde_json::json!({
            "key": *self.key,
            "attempt": self.attempt,
            "idempotency_key": self.idempotency_key(),
        });
        let mut cx = self.clone();
        cx.locals.bind("step", Arc::new(step));
        cx
    }

    /// The expression scope for this block, plus `extra` bindings.
    pub(crate) fn scope(&self) -> Scope {
        // The names are shared, not allocated for every scope (one per template a step
        // evaluates).
        static NAMES: std::sync::LazyLock<[Arc<str>; 6]> = std::sync::LazyLock::new(|| {
            ["input", "state", "initial", "run", "vars", "secrets"].map(Arc::from)
        });
        let [input, state, initial, run, vars, secrets] = &*NAMES;
        let mut s = Scope::with_capacity(6 + self.locals.len());
        s.bind(input.clone(), self.input.clone())
            .bind_map(state.clone(), self.state.shared().clone())
            .bind(initial.clone(), self.run.initial.clone())
            .bind(run.clone(), self.run.binding.clone())
            .bind(vars.clone(), self.vars.clone())
            .bind(secrets.clone(), self.run.engine.secrets.clone());
        if let Some(f) = &self.run.engine.functions {
            s.natives(f.clone());
        }
        s.extend(&self.locals);
        s
    }

    /// Evaluates a template to text.
    pub(crate) fn render(&self, source: &str, scope: &Scope) -> Result<String, BlockError> {
        self.run
            .prepared
            .exprs
            .render(source, scope)
            .map_err(|e| BlockError::new(ErrorKind::Expression, e.message))
    }

    /// Evaluates a value template.
    pub(crate) fn value(&self, template: &Value, scope: &Scope) -> Result<Value, BlockError> {
        self.run
            .prepared
            .exprs
            .value_template(template, scope)
            .map_err(|e| BlockError::new(ErrorKind::Expression, e.message))
    }

    /// Evaluates a value template; one that only names a bound value shares it.
    pub(crate) fn value_shared(
        &self,
        template: &Value,
        scope: &Scope,
    ) -> Result<Shared, BlockError> {
        self.run
            .prepared
            .exprs
            .value_template_shared(template, scope)
            .map_err(|e| BlockError::new(ErrorKind::Expression, e.message))
    }

    /// Evaluates a condition.
    pub(crate) fn truthy(&self, source: &str, scope: &Scope) -> Result<bool, BlockError> {
        self.run
            .prepared
            .exprs
            .truthy(source, scope)
            .map_err(|e| BlockError::new(ErrorKind::Expression, e.message))
    }
}
