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
//! Values are recognised by pointer. A remembered value is held by a weak reference,
//! which keeps its allocation (so its pointer cannot be reused for another value
//! meanwhile) but not the value: remembering a step's 100,000-item output costs its
//! compressed body, not the tree. Values behind a shared `Arc` are never changed in
//! place.

use super::err;
use rusqlite::{Connection, OptionalExtension, params};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use weft_core::event::EventKind;
use weft_core::ports::StoreError;
use weft_core::value::{Kind, Node, Shared, SharedMap, Value};

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
/// Runs remembered at most; past it, all are forgotten (they only store values again).
const RUNS_KEPT: usize = 4096;

/// A large value, serialized and compressed once, under its id.
#[derive(Clone)]
pub(super) struct StoredValue {
    id: [u8; 16],
    /// LZ4-compressed JSON, its length first (as event chunks are).
    body: Arc<[u8]>,
}

impl StoredValue {
    fn new(value: &Shared) -> Result<StoredValue, StoreError> {
        let json = serde_json::to_vec(value).map_err(|e| err("values", e))?;
        Ok(StoredValue {
            // A v7 UUID: unique across processes and restarts of a run without asking
            // the database which ids it holds.
            id: uuid::Uuid::now_v7().into_bytes(),
            body: lz4_flex::block::compress_prepend_size(&json).into(),
        })
    }

    /// The id as journal entries and events write it.
    pub(super) fn id(&self) -> String {
        uuid::Uuid::from_bytes(self.id).simple().to_string()
    }
}

/// A value a run has stored, and when.
struct Remembered {
    value: Held,
    stored: StoredValue,
    at: Instant,
}

/// A [`Shared`] value's allocation, held without the value.
enum Held {
    Json(Weak<Value>),
    Object(Weak<SharedMap>),
    Array(Weak<Vec<Shared>>),
}

impl Held {
    fn of(value: &Shared) -> Held {
        match value {
            Shared::Json(v) => Held::Json(Arc::downgrade(v)),
            Shared::Object(m) => Held::Object(Arc::downgrade(m)),
            Shared::Array(a) => Held::Array(Arc::downgrade(a)),
        }
    }

    /// Whether `value` is the one held: the same allocation, which the weak reference
    /// keeps from being reused.
    fn is(&self, value: &Shared) -> bool {
        match (self, value) {
            (Held::Json(h), Shared::Json(v)) => std::ptr::eq(h.as_ptr(), Arc::as_ptr(v)),
            (Held::Object(h), Shared::Object(m)) => std::ptr::eq(h.as_ptr(), Arc::as_ptr(m)),
            (Held::Array(h), Shared::Array(a)) => std::ptr::eq(h.as_ptr(), Arc::as_ptr(a)),
            _ => false,
        }
    }
}

/// The large values each run has stored, by pointer.
#[derive(Default)]
pub(super) struct SharedValues {
    by_run: Mutex<HashMap<Arc<str>, VecDeque<Remembered>>>,
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
        if !json_reaches(value.node(), LARGE) {
            return Ok(None);
        }
        let stored = StoredValue::new(value)?;
        self.remember(run, value, stored.clone());
        Ok(Some(stored))
    }

    fn find(&self, run: &str, value: &Shared) -> Option<StoredValue> {
        let runs = self.by_run.lock().ok()?;
        runs.get(run)?
            .iter()
            .find(|r| r.value.is(value))
            .map(|r| r.stored.clone())
    }

    fn remember(&self, run: &str, value: &Shared, stored: StoredValue) {
        let Ok(mut runs) = self.by_run.lock() else {
            return;
        };
        if !runs.contains_key(run) {
            if runs.len() >= RUNS_KEPT {
                runs.clear();
            }
            runs.insert(Arc::from(run), VecDeque::new());
        }
        let Some(kept) = runs.get_mut(run) else {
            return;
        };
        let now = Instant::now();
        while kept.len() >= KEPT_AT_MOST
            || (kept.len() >= KEPT_PER_RUN && kept.front().is_some_and(|r| now - r.at > KEPT_FOR))
        {
            kept.pop_front();
        }
        kept.push_back(Remembered {
            value: Held::of(value),
            stored,
            at: now,
        });
    }

    /// `run` ended or paused: its values are not held (a resumed run stores its next
    /// large value again).
    pub(super) fn forget(&self, run: &str) {
        if let Ok(mut runs) = self.by_run.lock() {
            runs.remove(run);
        }
    }
}

/// Whether `node`'s JSON is at least `limit` bytes long, walking no more of it than
/// that: a lower bound (strings count their bytes unescaped, numbers other than
/// integers three), which is all the choice between inline and stored needs.
fn json_reaches(node: Node<'_>, limit: usize) -> bool {
    let mut left = Budget(limit);
    left.node(node)
}

/// Bytes still to find before a value counts as large.
struct Budget(usize);

impl Budget {
    /// Counts `n` bytes; true once the limit is reached.
    fn spend(&mut self, n: usize) -> bool {
        self.0 = self.0.saturating_sub(n);
        self.0 == 0
    }

    fn node(&mut self, node: Node<'_>) -> bool {
        if let Some(v) = node.as_json() {
            return self.json(v);
        }
        match node.kind() {
            // `{` and `}`, and per entry its quoted key, a colon and a comma but one.
            Kind::Object(_) => {
                self.spend(1)
                    || node.keys().into_iter().any(|k| {
                        self.spend(k.len() + 4) || node.get(k).is_some_and(|v| self.node(v))
                    })
            }
            Kind::Array(n) => {
                self.spend(1 + n) || (0..n).any(|i| node.at(i).is_some_and(|v| self.node(v)))
            }
            Kind::Scalar(v) => self.json(v),
        }
    }

    fn json(&mut self, v: &Value) -> bool {
        match v {
            Value::Null | Value::Bool(_) => self.spend(4),
            Value::Number(n) => self.spend(number_len(n)),
            Value::String(s) => self.spend(s.len() + 2),
            Value::Array(a) => self.spend(1 + a.len()) || a.iter().any(|v| self.json(v)),
            Value::Object(m) => {
                self.spend(1)
                    || m.iter()
                        .any(|(k, v)| self.spend(k.len() + 4) || self.json(v))
            }
        }
    }
}

/// How many characters a number takes at least.
fn number_len(n: &serde_json::Number) -> usize {
    let digits = |mut u: u64| {
        let mut d = 1;
        while u >= 10 {
            u /= 10;
            d += 1;
        }
        d
    };
    match (n.as_u64(), n.as_i64()) {
        (Some(u), _) => digits(u),
        (None, Some(i)) => 1 + digits(i.unsigned_abs()),
        _ => 3,
    }
}

/// Writes the rows of `values` (each with its run) that are not there yet.
pub(super) fn insert<'a>(
    conn: &Connection,
    values: impl IntoIterator<Item = (&'a str, &'a StoredValue)>,
) -> Result<(), StoreError> {
    let mut seen = HashSet::new();
    let mut insert = conn
        .prepare_cached("INSERT OR IGNORE INTO run_values (run_id, id, body) VALUES (?1, ?2, ?3)")
        .map_err(|e| err("values", e))?;
    for (run_id, value) in values {
        if seen.insert((run_id, value.id)) {
            insert
                .execute(params![run_id, &value.id[..], &value.body[..]])
                .map_err(|e| err("values", e))?;
        }
    }
    Ok(())
}

/// Reads the values a run's journal entries and events refer to, each once per reader.
#[derive(Default)]
pub(super) struct ValueReader {
    read: HashMap<String, Shared>,
}

impl ValueReader {
    /// The value stored under `id` for run `run_id`.
    pub(super) fn get(
        &mut self,
        conn: &Connection,
        run_id: &str,
        id: &str,
    ) -> Result<Shared, StoreError> {
        if let Some(v) = self.read.get(id) {
            return Ok(v.clone());
        }
        let corrupt = |why: String| {
            StoreError::Corrupt(format!("the stored value {id} of run {run_id}: {why}"))
        };
        let key = uuid::Uuid::try_parse(id).map_err(|e| corrupt(e.to_string()))?;
        let body: Option<Vec<u8>> = conn
            .prepare_cached("SELECT body FROM run_values WHERE run_id = ?1 AND id = ?2")
            .and_then(|mut s| {
                s.query_row(params![run_id, &key.as_bytes()[..]], |r| r.get(0))
                    .optional()
            })
            .map_err(|e| err("values", e))?;
        let body = body.ok_or_else(|| corrupt("it is missing".into()))?;
        let json = super::decompress(&body).map_err(corrupt)?;
        let value: Value = serde_json::from_slice(&json).map_err(|e| corrupt(e.to_string()))?;
        let value = Shared::new(value);
        self.read.insert(id.to_owned(), value.clone());
        Ok(value)
    }
}

/// The value an event carries that may be large and shared with another write.
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use weft_core::value::SharedMap;

    #[test]
    fn the_size_check_agrees_with_serialized_json_around_the_limit() {
        for n in [0, 1, 10, 100, 500, 700, 1000, 1200, 2000, 5000] {
            let plain =
                Shared::new(json!({"items": (0..n).collect::<Vec<_>>(), "s": "x".repeat(n)}));
            let mut parts = SharedMap::new();
            parts.insert("state".into(), plain.clone());
            parts.insert("n".into(), Shared::new(json!(n)));
            parts.insert("f".into(), Shared::new(json!([1.5, -3, null, true])));
            let built = Shared::object(parts);
            for v in [&plain, &built] {
                let len = serde_json::to_vec(v).unwrap().len();
                let reaches = json_reaches(v.node(), LARGE);
                // A lower bound: never says large of a small value, and says it of any
                // value a little past the limit.
                assert!(!reaches || len >= LARGE, "n={n}: {len} bytes said large");
                assert!(reaches || len < LARGE + 64, "n={n}: {len} bytes said small");
            }
        }
    }

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
