//! A large value is stored once in a run's event log, and referred to afterwards.
//!
//! A step's output is usually the next step's input, and both are in the log
//! (`step_completed.output`, `step_started.input`): a pipeline of 50 steps passing a
//! list of 100,000 items on wrote that list 100 times (99 MB). The engine hands both
//! events the same `Arc`, so the writer knows it is the same value without comparing
//! it: an event whose value is one already written for the run is stored with
//! `value_of: SEQ` in its place, and reading puts the value back (one shared `Arc` for
//! every event that refers to it). What a reader gets is what was appended.
//!
//! Only values written inline are referred to, and the `Arc`s are held while they may be
//! referred to, so a pointer cannot be reused for another value meanwhile; values
//! behind a shared `Arc` are never changed in place.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use weft_core::event::EventKind;
use weft_core::value::Shared;

/// Events at least this long (in JSON) are remembered for later events to refer to: a
/// smaller value costs less inline than a reference costs to resolve.
pub(super) const LARGE: usize = 4096;
/// Values remembered per run: a step's output is referred to by the next step's input,
/// so the last few are what later events can share.
const KEPT_PER_RUN: usize = 4;
/// Runs remembered at most; past it, all are forgotten (they only store values again).
const RUNS_KEPT: usize = 4096;

/// A run's last large values written inline, each with the `seq` of its event.
type Written = VecDeque<(Shared, u64)>;

/// The large values each run's log holds inline, by the `seq` of the event holding them.
#[derive(Default)]
pub(super) struct SharedValues {
    by_run: Mutex<HashMap<Arc<str>, Written>>,
}

impl SharedValues {
    /// The `seq` of the event of `run` that holds `value` inline, if any.
    pub(super) fn seq_of(&self, run: &str, value: &Shared) -> Option<u64> {
        let runs = self.by_run.lock().ok()?;
        runs.get(run)?
            .iter()
            .find(|(v, _)| Shared::ptr_eq(v, value))
            .map(|(_, seq)| *seq)
    }

    /// Event `seq` of `run` holds `value` inline.
    pub(super) fn remember(&self, run: &Arc<str>, value: &Shared, seq: u64) {
        let Ok(mut runs) = self.by_run.lock() else {
            return;
        };
        if runs.len() >= RUNS_KEPT && !runs.contains_key(run) {
            runs.clear();
        }
        let kept = runs.entry(run.clone()).or_default();
        if kept.len() >= KEPT_PER_RUN {
            kept.pop_front();
        }
        kept.push_back((value.clone(), seq));
    }

    /// `run` ended or paused: nothing of it is referred to again, and its values are
    /// not held.
    pub(super) fn forget(&self, run: &str) {
        if let Ok(mut runs) = self.by_run.lock() {
            runs.remove(run);
        }
    }

    /// Forgets every run (a write of several runs' events failed).
    pub(super) fn forget_all(&self) {
        if let Ok(mut runs) = self.by_run.lock() {
            runs.clear();
        }
    }
}

/// The value an event carries that may be large and shared with another event.
pub(super) fn carried(kind: &EventKind) -> Option<&Shared> {
    match kind {
        EventKind::StepStarted { input, .. } => input.as_ref(),
        EventKind::StepCompleted { output, .. } => output.as_ref(),
        _ => None,
    }
}

/// `kind` without the value it carries (stored as a reference instead).
pub(super) fn without_carried(kind: &EventKind) -> EventKind {
    let mut kind = kind.clone();
    if let Some(slot) = carried_slot(&mut kind) {
        *slot = None;
    }
    kind
}

/// Puts `value` back into `kind`, which was stored without it.
pub(super) fn restore_carried(kind: &mut EventKind, value: Shared) -> bool {
    match carried_slot(kind) {
        Some(slot) => {
            *slot = Some(value);
            true
        }
        None => false,
    }
}

fn carried_slot(kind: &mut EventKind) -> Option<&mut Option<Shared>> {
    match kind {
        EventKind::StepStarted { input, .. } => Some(input),
        EventKind::StepCompleted { output, .. } => Some(output),
        _ => None,
    }
}
