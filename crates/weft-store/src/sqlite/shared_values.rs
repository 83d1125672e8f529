//! A large value is stored once for a run, and the journal and the event log refer to it.
//!
//! A step's output is in its journal entry (a code step's result), in its
//! `step_completed` event and, as the next step's input, in that step's `step_started`: a
//! pipeline of 50 steps passing a list of 100,000 items on wrote that list 100 times
//! (99 MB) before any value was shared, and a chain of code steps wrote it a third time
//! into the journal. The engine hands all of them the same `Arc`, so the store knows it is
//! the same value without comparing it: the first writer serializes and compresses it
//! once into a row of `run_values`, and every journal entry or event that carries it
//! holds the row's id instead (`output_id`, `value_id`). Reading puts the value back.
//!
//! Each chunk that refers to a value also writes the value's row (`INSERT OR IGNORE`) in
//! its own transaction, so no chunk can outlive a write of its value that failed or was
//! never committed, and the journal never depends on the event log; the row is written
//! once and the second write is a lookup. Rows stay as long as the run does: retrying a
//! run forgets journal entries, never the values its events refer to.
//!
//! A large value's own large shared parts are stored apart in turn ([`parts`]), so a
//! value that holds one list many times (a fan-out's results, each holding a state that
//! holds the list) is stored with the list once.
//!
//! Values are recognised by pointer. A remembered value is held by a weak reference,
//! which keeps its allocation (so its pointer cannot be reused for another value
//! meanwhile) but not the value: remembering a step's 100,000-item output costs its
//! compressed body, not the tree. Values behind a shared `Arc` are never changed in
//! place.

mod parts;
mod reader;
mod size;

pub(super) use reader::{ValueReader, read_apart};

use super::err;
use rusqlite::{Connection, params};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use weft_core::event::EventKind;
use weft_core::ports::StoreError;
use weft_core::value::{Shared, WeakShared};

/// Values whose JSON is at least this long are stored once and referred to: a smaller
/// value costs less inline than a reference costs to resolve.
pub(super) const LARGE: usize = 4096;
/// Values remembered per run at least: a step's output is referred to by its journal
/// entry, its `step_completed` and the next step's `step_started`.
const KEPT_PER_RUN: usize = 4;
/// How long a value is remembered past the last [`KEPT_PER_RUN`]: the journal stores a
/// step's result as the step ends, and the event log serializes the step's events up to
/// a few milliseconds later, by which time a chain of quick steps may have journaled
/// several more results (all five of a chain of Lua steps passing 100,000 items on).
const KEPT_FOR: Duration = Duration::from_secs(1);
/// Values remembered per run at most, however recent (a run without an event log, whose
/// journal's values nothing else refers to, holds no more than this).
const KEPT_AT_MOST: usize = 32;
/// Runs remembered at most, and bytes of compressed values held for them; past either,
/// all are forgotten (they only store values again). A run's values are let go when its
/// record says it ended or paused; these bound what runs that never say so (their
/// process died) hold.
const RUNS_KEPT: usize = 4096;
const BYTES_KEPT: usize = 256 << 20;

/// A large value, serialized and compressed once, under its id.
#[derive(Clone)]
pub(super) struct StoredValue {
    id: [u8; 16],
    /// LZ4-compressed JSON, its length first (as event chunks are), `null` where a part
    /// is stored apart.
    body: Arc<[u8]>,
    /// The parts stored apart, as JSON: `[[path, id], ...]`, a path the keys and
    /// indexes (as strings) from the value's root.
    refs: Option<Arc<str>>,
    /// Those parts, written with the value wherever it is.
    parts: Arc<[StoredValue]>,
}

impl StoredValue {
    fn new(written: parts::Written) -> Result<StoredValue, StoreError> {
        let refs = match written.refs.is_empty() {
            true => None,
            false => Some(
                serde_json::to_string(&written.refs)
                    .map_err(|e| err("values", e))?
                    .into(),
            ),
        };
        Ok(StoredValue {
            // A v7 UUID: unique across processes and restarts of a run without asking
            // the database which ids it holds.
            id: uuid::Uuid::now_v7().into_bytes(),
            body: lz4_flex::block::compress_prepend_size(&written.json).into(),
            refs,
            parts: written.parts.into(),
        })
    }

    /// The id as journal entries and events write it.
    pub(super) fn id(&self) -> String {
        uuid::Uuid::from_bytes(self.id).simple().to_string()
    }
}

/// A value written for a column of its own: its JSON, `null` where a part is stored
/// apart, and those parts (`refs` as a stored value holds them).
pub(super) struct Apart {
    pub(super) json: String,
    pub(super) refs: Option<String>,
    pub(super) parts: Vec<StoredValue>,
}

/// A value a run has stored, and when.
struct Remembered {
    value: WeakShared,
    stored: StoredValue,
    at: Instant,
}

/// The large values each run has stored, by pointer.
#[derive(Default)]
pub(super) struct SharedValues {
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    by_run: HashMap<Arc<str>, VecDeque<Remembered>>,
    /// The compressed bytes of every value held.
    bytes: usize,
}

impl Kept {
    fn clear(&mut self) {
        self.by_run.clear();
        self.bytes = 0;
    }
}

impl SharedValues {
    /// Where `value` of `run` is stored, when it is large: found by pointer among the
    /// run's recent values, else serialized and compressed now (and remembered). `None`
    /// when the value is small enough to write inline.
    pub(super) fn store(
        &self,
        run: &str,
        value: &Shared,
    ) -> Result<Option<StoredValue>, StoreError> {
        if let Some(stored) = self.find(run, value) {
            return Ok(Some(stored));
        }
        if !size::json_reaches(value.node(), LARGE) {
            return Ok(None);
        }
        let written = parts::write(self, run, value, parts::NewParts::Store)?;
        Ok(Some(self.remember(run, value, StoredValue::new(written)?)))
    }

    /// `value` of `run` as JSON to keep in a column of its own (a run's output or state),
    /// referring to what the run has stored already (the whole value, or parts of it: a
    /// run's last output is its last step's, its state holds values its steps carried)
    /// and holding the rest inline, so that rewriting the record stores nothing new.
    pub(super) fn apart(&self, run: &str, value: &Shared) -> Result<Apart, StoreError> {
        if let Some(stored) = self.find(run, value) {
            let whole: parts::Path = Vec::new();
            let refs =
                serde_json::to_string(&[(whole, stored.id())]).map_err(|e| err("values", e))?;
            return Ok(Apart {
                json: "null".into(),
                refs: Some(refs),
                parts: vec![stored],
            });
        }
        let written = parts::write(self, run, value, parts::NewParts::Inline)?;
        let refs = match written.refs.is_empty() {
            true => None,
            false => Some(serde_json::to_string(&written.refs).map_err(|e| err("values", e))?),
        };
        Ok(Apart {
            json: String::from_utf8(written.json).map_err(|e| err("values", e))?,
            refs,
            parts: written.parts,
        })
    }

    /// Where `value` of `run` is stored, when this process stored it recently.
    fn find(&self, run: &str, value: &Shared) -> Option<StoredValue> {
        let kept = self.kept.lock().ok()?;
        kept.by_run
            .get(run)?
            .iter()
            .find(|r| r.value.is(value))
            .map(|r| r.stored.clone())
    }

    /// Remembers that `value` of `run` is `stored`, and returns it.
    fn remember(&self, run: &str, value: &Shared, stored: StoredValue) -> StoredValue {
        let Ok(mut kept) = self.kept.lock() else {
            return stored;
        };
        let kept = &mut *kept;
        if (!kept.by_run.contains_key(run) && kept.by_run.len() >= RUNS_KEPT)
            || kept.bytes + stored.body.len() > BYTES_KEPT
        {
            kept.clear();
        }
        let values = kept.by_run.entry(Arc::from(run)).or_default();
        let now = Instant::now();
        while values.len() >= KEPT_AT_MOST
            || (values.len() >= KEPT_PER_RUN
                && values.front().is_some_and(|r| now - r.at > KEPT_FOR))
        {
            if let Some(gone) = values.pop_front() {
                kept.bytes = kept.bytes.saturating_sub(gone.stored.body.len());
            }
        }
        kept.bytes += stored.body.len();
        values.push_back(Remembered {
            value: WeakShared::of(value),
            stored: stored.clone(),
            at: now,
        });
        stored
    }

    /// `run` ended or paused: its values are not held (a resumed run stores its next
    /// large value again).
    pub(super) fn forget(&self, run: &str) {
        if let Ok(mut kept) = self.kept.lock()
            && let Some(values) = kept.by_run.remove(run)
        {
            let held: usize = values.iter().map(|r| r.stored.body.len()).sum();
            kept.bytes = kept.bytes.saturating_sub(held);
        }
    }
}

/// Writes the rows of `values` (each with its run), and of the parts they refer to, that
/// are not there yet.
pub(super) fn insert<'a>(
    conn: &Connection,
    values: impl IntoIterator<Item = (&'a str, &'a StoredValue)>,
) -> Result<(), StoreError> {
    let mut seen = HashSet::new();
    let mut insert = conn
        .prepare_cached(
            "INSERT OR IGNORE INTO run_values (run_id, id, body, refs) VALUES (?1, ?2, ?3, ?4)",
        )
        .map_err(|e| err("values", e))?;
    let mut pending: Vec<(&str, &StoredValue)> = values.into_iter().collect();
    while let Some((run_id, value)) = pending.pop() {
        if seen.insert((run_id, value.id)) {
            insert
                .execute(params![
                    run_id,
                    &value.id[..],
                    &value.body[..],
                    value.refs.as_deref()
                ])
                .map_err(|e| err("values", e))?;
            pending.extend(value.parts.iter().map(|p| (run_id, p)));
        }
    }
    Ok(())
}

/// The value an event carries that may be large and shared with another write.
pub(super) fn carried(kind: &EventKind) -> Option<&Shared> {
    match kind {
        EventKind::RunStarted { input, .. } => Some(input),
        EventKind::StepStarted { input, .. } => input.as_ref(),
        EventKind::StepCompleted { output, .. } => output.as_ref(),
        _ => None,
    }
}

/// `kind` without the value it carries (stored as a reference instead).
pub(super) fn without_carried(kind: &EventKind) -> EventKind {
    let mut kind = kind.clone();
    match &mut kind {
        EventKind::RunStarted { input, .. } => *input = Shared::null(),
        EventKind::StepStarted { input: slot, .. }
        | EventKind::StepCompleted { output: slot, .. } => *slot = None,
        _ => {}
    }
    kind
}

/// Puts `value` back into `kind`, which was stored without it; false when `kind`
/// carries no value.
pub(super) fn restore_carried(kind: &mut EventKind, value: Shared) -> bool {
    match kind {
        EventKind::RunStarted { input, .. } => *input = value,
        EventKind::StepStarted { input: slot, .. }
        | EventKind::StepCompleted { output: slot, .. } => *slot = Some(value),
        _ => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_run_keeps_its_recent_values_and_its_last_few() {
        let shared = SharedValues::default();
        let run = "r";
        let values: Vec<Shared> = (0..40)
            .map(|i| Shared::new(json!({"i": i, "pad": "x".repeat(LARGE)})))
            .collect();
        let stored: Vec<String> = values
            .iter()
            .map(|v| shared.store(run, v).unwrap().unwrap().id())
            .collect();
        // The last 32 are found again (stored within the last second); older ones are
        // stored anew.
        for (i, v) in values.iter().enumerate().skip(8) {
            assert_eq!(
                shared.store(run, v).unwrap().unwrap().id(),
                stored[i],
                "{i}"
            );
        }
        assert_ne!(
            shared.store(run, &values[0]).unwrap().unwrap().id(),
            stored[0]
        );
        // Small values stay inline.
        assert!(
            shared
                .store(run, &Shared::new(json!({"n": 1})))
                .unwrap()
                .is_none()
        );
        shared.forget(run);
        assert_ne!(
            shared.store(run, &values[39]).unwrap().unwrap().id(),
            stored[39]
        );
    }
}
