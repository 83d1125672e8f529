//! The event log: each run's events, stored a chunk at a time.
//!
//! One group commit writes a run's events as one row of `event_chunks` (or several, a
//! megabyte of JSON each, when its events are large) — `(run_id, first_seq, last_seq,
//! body)`, the body a JSON array of the events, each with its `seq` but without the run
//! (the row's key). A row per event cost more than the rest of a short step (a B-tree
//! insert keyed by the 32-character run id, its page writes), so a loop of cheap steps
//! spent most of its time in SQLite (docs/performance.md).
//!
//! Bodies are stored compressed (LZ4, as a BLOB whose first four bytes are the JSON's
//! length): a loop's events repeat their keys and paths, and compressed they are an
//! eighth of the bytes SQLite writes twice (the WAL, then the checkpoint). Chunks
//! written as TEXT by earlier versions are read as they are.
//!
//! The log is append-only: an event whose `seq` is not after the run's last stored one
//! is a repeat and is dropped, as a repeated row was ignored before. Files written before
//! chunks (one row per event in `events`) are moved into chunks when they are opened
//! (schema 8).

use super::err;
use super::shared_values::{
    SharedValues, StoredValue, ValueReader, carried, restore_carried, without_carried,
};
use super::writer::by_run;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, params};
use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use weft_core::event::{Event, EventKind};
use weft_core::ports::StoreError;
use weft_core::value::Shared;

/// What a chunk holds of an event: its position, time and kind.
#[derive(serde::Serialize)]
struct EventBody<'a> {
    seq: u64,
    at_ms: u64,
    /// The event's input or output is the run's value stored under this id
    /// ([`super::shared_values`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    value_id: Option<String>,
    #[serde(flatten)]
    kind: Cow<'a, EventKind>,
}

/// [`EventBody`], read back. (Bodies moved from `events` may also hold the run id,
/// which is ignored.)
#[derive(serde::Deserialize)]
struct StoredEvent {
    seq: u64,
    at_ms: u64,
    /// Schema 10 and 11: the event's value is that of an earlier event of the run,
    /// which holds it inline.
    #[serde(default)]
    value_of: Option<u64>,
    #[serde(default)]
    value_id: Option<String>,
    #[serde(flatten)]
    kind: EventKind,
}

/// Events ready to store, in the order they came: their JSON bodies in one text (one
/// allocation a batch, which the writer thread frees as one block rather than a string
/// an event), and each event's run, `seq` and place in it.
pub(super) struct Serialized {
    text: Vec<u8>,
    events: Vec<(Arc<str>, u64, Range<usize>)>,
    /// The stored values the events refer to, by run.
    values: Vec<(Arc<str>, StoredValue)>,
}

impl Serialized {
    /// The stored values the events refer to, with their runs.
    pub(super) fn values(&self) -> impl Iterator<Item = (&str, &StoredValue)> {
        self.values.iter().map(|(run, v)| (&**run, v))
    }

    /// Each event's run, `seq` and body (JSON).
    pub(super) fn iter(&self) -> impl Iterator<Item = (&str, u64, &[u8])> {
        self.events
            .iter()
            .map(|(run, seq, at)| (&**run, *seq, &self.text[at.clone()]))
    }
}

/// `events` serialized, in the order they came; a large value an event carries is
/// stored once for the run and referred to ([`super::shared_values`]).
pub(super) fn serialize(events: &[Event], shared: &SharedValues) -> Result<Serialized, StoreError> {
    let mut out = Serialized {
        // About what a step's event takes: most batches never grow their text.
        text: Vec::with_capacity(events.len() * 192),
        events: Vec::with_capacity(events.len()),
        values: Vec::new(),
    };
    for e in events {
        let stored = match carried(&e.kind) {
            Some(v) => shared.store(&e.run_id, v)?,
            None => None,
        };
        let kind = match stored {
            Some(_) => Cow::Owned(without_carried(&e.kind)),
            None => Cow::Borrowed(&e.kind),
        };
        let start = out.text.len();
        let body = EventBody {
            seq: e.seq,
            at_ms: e.at_ms,
            value_id: stored.as_ref().map(StoredValue::id),
            kind,
        };
        serde_json::to_writer(&mut out.text, &body).map_err(|x| err("events", x))?;
        if let Some(v) = stored {
            out.values.push((e.run_id.clone(), v));
        }
        out.events
            .push((e.run_id.clone(), e.seq, start..out.text.len()));
    }
    Ok(out)
}

/// A chunk is closed once its JSON passes this many bytes: a commit of many large events
/// (a fan-out's results, each holding its branch's state) is written as several chunks
/// rather than one body the size of all of them.
const CHUNK_BYTES: usize = 1 << 20;

/// Writes the events of one commit (several batches, perhaps of the same runs) as one
/// chunk a run (several when they pass [`CHUNK_BYTES`]), after dropping repeats.
pub(super) fn write<'a>(
    conn: &Connection,
    events: impl Iterator<Item = (&'a str, u64, &'a [u8])>,
) -> Result<(), StoreError> {
    let runs = by_run(events.map(|(run_id, seq, body)| (run_id, (seq, body))));
    let mut insert = conn
        .prepare_cached(
            "INSERT OR IGNORE INTO event_chunks (run_id, first_seq, last_seq, body) VALUES (?1, ?2, ?3, ?4)",
        )
        .map_err(|e| err("events", e))?;
    for (run_id, events) in runs {
        let mut after = last_seq(conn, run_id)?;
        let mut chunk = Chunk::default();
        for (seq, event) in events {
            if after.is_some_and(|a| seq <= a) {
                continue;
            }
            chunk.push(seq, event);
            after = Some(seq);
            if chunk.body.len() >= CHUNK_BYTES {
                std::mem::take(&mut chunk).insert(&mut insert, run_id)?;
            }
        }
        chunk.insert(&mut insert, run_id)?;
    }
    Ok(())
}

/// Events of one run on their way into one row of `event_chunks`.
#[derive(Default)]
struct Chunk {
    body: Vec<u8>,
    first: Option<u64>,
    last: u64,
}

impl Chunk {
    fn push(&mut self, seq: u64, event: &[u8]) {
        self.body
            .push(if self.first.is_some() { b',' } else { b'[' });
        self.body.extend_from_slice(event);
        self.first.get_or_insert(seq);
        self.last = seq;
    }

    /// Writes the chunk (nothing when it holds no event).
    fn insert(
        mut self,
        insert: &mut rusqlite::CachedStatement<'_>,
        run_id: &str,
    ) -> Result<(), StoreError> {
        let Some(first) = self.first else {
            return Ok(());
        };
        self.body.push(b']');
        let body = lz4_flex::block::compress_prepend_size(&self.body);
        insert
            .execute(params![run_id, first as i64, self.last as i64, body])
            .map_err(|e| err("events", e))?;
        Ok(())
    }
}

/// Puts back the values `chunk`'s events refer to: stored values (`value_id`), and
/// values of earlier events (`value_of`, as schema 10 and 11 wrote them) from earlier
/// events of the chunk, `resolved` (what this read has resolved so far) or the chunk
/// that holds them.
fn restore_values(
    conn: &Connection,
    run_id: &str,
    chunk: &mut [StoredEvent],
    resolved: &mut HashMap<u64, Shared>,
    values: &mut ValueReader,
) -> Result<(), StoreError> {
    for i in 0..chunk.len() {
        if let Some(id) = chunk[i].value_id.take() {
            let value = values.get(conn, run_id, &id)?;
            restore(&mut chunk[i], run_id, value)?;
            continue;
        }
        let Some(of) = chunk[i].value_of else {
            continue;
        };
        let value = match resolved.get(&of) {
            Some(v) => v.clone(),
            None => {
                let here = chunk[..i].iter().find(|e| e.seq == of);
                let value = match here {
                    Some(e) => carried(&e.kind).cloned(),
                    None => carried_at(conn, run_id, of)?,
                };
                let value = value.ok_or_else(|| {
                    StoreError::Corrupt(format!(
                        "event {} of run {run_id} refers to event {of}, which holds no value",
                        chunk[i].seq
                    ))
                })?;
                resolved.insert(of, value.clone());
                value
            }
        };
        restore(&mut chunk[i], run_id, value)?;
    }
    Ok(())
}

fn restore(event: &mut StoredEvent, run_id: &str, value: Shared) -> Result<(), StoreError> {
    if restore_carried(&mut event.kind, value) {
        Ok(())
    } else {
        Err(StoreError::Corrupt(format!(
            "event {} of run {run_id} refers to a value but carries none",
            event.seq
        )))
    }
}

/// The value event `seq` of the run holds inline, read from the chunk that has it.
fn carried_at(conn: &Connection, run_id: &str, seq: u64) -> Result<Option<Shared>, StoreError> {
    let chunk = conn
        .prepare_cached(
            "SELECT body FROM event_chunks WHERE run_id = ?1 AND first_seq <= ?2 ORDER BY first_seq DESC LIMIT 1",
        )
        .and_then(|mut s| {
            s.query_row(params![run_id, seq as i64], |r| Ok(parse_chunk(r.get_ref(0)?)))
                .optional()
        })
        .map_err(|e| err("events", e))?
        .transpose()?;
    Ok(chunk
        .into_iter()
        .flatten()
        .find(|e| e.seq == seq)
        .and_then(|e| carried(&e.kind).cloned()))
}

/// A stored chunk's events: LZ4-compressed JSON, or JSON as earlier versions wrote it.
fn parse_chunk(body: ValueRef<'_>) -> Result<Vec<StoredEvent>, StoreError> {
    let corrupt =
        |e: &dyn std::fmt::Display| StoreError::Corrupt(format!("a stored event chunk: {e}"));
    let parsed = match body {
        ValueRef::Blob(b) => {
            let json = super::decompress(b).map_err(|e| corrupt(&e))?;
            serde_json::from_slice(&json)
        }
        ValueRef::Text(t) => serde_json::from_slice(t),
        other => {
            return Err(corrupt(&format!(
                "a {:?} where events were",
                other.data_type()
            )));
        }
    };
    parsed.map_err(|e| corrupt(&e))
}

/// The run's last stored seq, if it has events.
fn last_seq(conn: &Connection, run_id: &str) -> Result<Option<u64>, StoreError> {
    conn.prepare_cached(
        "SELECT last_seq FROM event_chunks WHERE run_id = ?1 ORDER BY first_seq DESC LIMIT 1",
    )
    .and_then(|mut s| {
        s.query_row(params![run_id], |r| r.get::<_, i64>(0))
            .optional()
    })
    .map(|s| s.map(|s| s as u64))
    .map_err(|e| err("events", e))
}

/// The seq the run's next event takes.
pub(super) fn next_seq(conn: &Connection, run_id: &str) -> Result<u64, StoreError> {
    Ok(last_seq(conn, run_id)?.map_or(0, |s| s + 1))
}

/// Up to `limit` of the run's events after seq `after` (from its first without one).
pub(super) fn read(
    conn: &Connection,
    run_id: &str,
    after: Option<u64>,
    limit: usize,
) -> Result<Vec<Event>, StoreError> {
    // last_seq > -1 reads from the start.
    let floor = after.map_or(-1, |a| a as i64);
    let mut stmt = conn
        .prepare_cached(
            "SELECT body FROM event_chunks WHERE run_id = ?1 AND last_seq > ?2 ORDER BY first_seq",
        )
        .map_err(|e| err("events", e))?;
    let mut rows = stmt
        .query(params![run_id, floor])
        .map_err(|e| err("events", e))?;
    let run: Arc<str> = run_id.into();
    let mut out = Vec::new();
    let mut resolved = HashMap::new();
    let mut values = ValueReader::default();
    while out.len() < limit {
        let Some(row) = rows.next().map_err(|e| err("events", e))? else {
            break;
        };
        let body = row.get_ref(0).map_err(|e| err("events", e))?;
        let mut chunk = parse_chunk(body)?;
        restore_values(conn, run_id, &mut chunk, &mut resolved, &mut values)?;
        let room = limit - out.len();
        out.extend(
            chunk
                .into_iter()
                .filter(|e| after.is_none_or(|a| e.seq > a))
                .take(room)
                .map(|e| Event {
                    run_id: run.clone(),
                    seq: e.seq,
                    at_ms: e.at_ms,
                    kind: e.kind,
                }),
        );
    }
    Ok(out)
}
