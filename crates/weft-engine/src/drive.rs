//! Driving a run this process holds: load its journal, re-enter the flow from the top,
//! replay what is journaled, run the rest, and record where the run stands. Every
//! lifecycle transition ends here (or hands the run to the workers, who end here).

use crate::Engine;
use crate::budget::Budgets;
use crate::error::EngineError;
use crate::events::{Emitter, now_ms};
use crate::exec::exec;
use crate::prepared::Prepared;
use crate::run::{Cancel, Cx, Outcome, Recorded, RunCtx, Stop};
use crate::run_result::RunResult;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use weft_core::event::EventKind;
use weft_core::ports::{EntryKind, JournalEntry, RunRecord, RunStatus, Usage};
use weft_core::{BlockError, ErrorKind, Flow, Value};
use weft_expr::{Scope, Shared};

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

impl Engine {
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

    /// Drives run `rec` until it ends or pauses. A drive that stops on an error (the
    /// store failed to read or write) has not written where the run stands: the run is
    /// let go, so that a store that keeps leases stops renewing this one and another
    /// process takes the run over, rather than it staying held by nobody driving it.
    pub(crate) async fn drive(
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
        let first_seq = if resumed {
            inner.store.next_event_seq(&rec.id).await?
        } else {
            0
        };
        let run = self.run_context(&rec, &prepared, journal, first_seq);
        announce(&run, entry, &rec, &prepared);
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
            run.cancel.clone(),
        ));
        let flow = &*prepared.flow;
        let state0 = flow
            .state
            .clone()
            .map(weft_core::State::from_value)
            .unwrap_or_default();
        let result = exec(root_cx(&run, flow, state0.clone()), &flow.root).await;
        watcher.abort();
        run.sync().await;
        if run.cancel.is_lost() {
            // Another process drives the run now: its end is not this process's to write.
            return Err(EngineError::Taken(format!(
                "run {} was taken over by another process after this one lost its lease; it goes on there",
                rec.id
            )));
        }
        let result = match run.journal_error.lock().expect("journal error lock").take() {
            Some(e) => Err(Stop::Failed(e)),
            None => result,
        };
        let usage = *run.usage.lock().expect("usage lock");
        rec.usage.add(&usage);
        rec.updated_ms = now_ms() as i64;
        rec.owner = None;
        let waiting = settle(&mut rec, &run, state0, result);
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

    /// What every block of run `rec` shares while this process drives it.
    fn run_context(
        &self,
        rec: &RunRecord,
        prepared: &Arc<Prepared>,
        journal: Vec<JournalEntry>,
        first_seq: u64,
    ) -> RunCtx {
        let inner = &self.inner;
        let id: Arc<str> = Arc::from(rec.id.as_str());
        RunCtx {
            id: id.clone(),
            engine: inner.clone(),
            prepared: prepared.clone(),
            journal: recorded(journal),
            emitter: Arc::new(Emitter::new(id, inner.run_sinks(), first_seq)),
            cancel: Arc::new(Cancel::default()),
            usage: Mutex::new(Usage::default()),
            // The run's input, once: its `run_started`, `input` in expressions and the
            // root block's input share it.
            initial: Arc::new(rec.input.clone()),
            journal_error: Mutex::new(None),
            unsynced: Mutex::default(),
            scoped: (!rec.scopes.is_empty()).then(|| weft_core::ports::ScopedStore {
                scopes: Arc::new(rec.scopes.clone()),
                store: inner.store.clone(),
            }),
            retries: rec.retries,
            binding: Arc::new(serde_json::json!({"id": rec.id, "retries": rec.retries})),
            fallback_warned: Default::default(),
        }
    }
}

/// The context of the flow's root block.
fn root_cx<'a>(run: &'a RunCtx, flow: &'a Flow, state: weft_core::State) -> Cx<'a> {
    let budgets = match &flow.budget {
        Some(b) => Budgets::default().push("", b),
        None => Budgets::default(),
    };
    Cx {
        run,
        flow,
        vars: Arc::new(Value::Object(flow.vars.clone().into_iter().collect())),
        key: root_key(flow),
        input: Shared::from(run.initial.clone()),
        state,
        locals: Scope::new(),
        budgets,
        stall: Default::default(),
        parent: None,
        depth: 0,
        attempt: 1,
        retried: None,
    }
}

/// The run's first events of this drive: the answer that continued it, then that it
/// started or resumed.
fn announce(run: &RunCtx, entry: Entry, rec: &RunRecord, prepared: &Prepared) {
    let resumed = !matches!(entry, Entry::New);
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
            input: Shared::from(run.initial.clone()),
            flow_hash: prepared.hash.clone(),
            dialect: rec.dialect.clone(),
        });
    }
}

/// Writes where the drive left the run into `rec` (status, output or error, state,
/// what it waits for) and emits the event that says so; the approvals it waits for.
fn settle(
    rec: &mut RunRecord,
    run: &RunCtx,
    mut state: weft_core::State,
    result: Result<Outcome, Stop>,
) -> Vec<Value> {
    let mut waiting = Vec::new();
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
        Err(Stop::Failed(e)) if e.kind == ErrorKind::Cancelled || run.cancel.is_cancelled() => {
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
    waiting
}

fn root_key(flow: &Flow) -> Arc<str> {
    Arc::from(flow.root.label().unwrap_or("root"))
}

/// The journal as the steps read it, by step key.
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
