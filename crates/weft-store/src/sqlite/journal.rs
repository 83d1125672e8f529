//! The journal: each run's entries, stored a chunk at a time.
//!
//! One group commit writes a run's entries as one row of `journal_chunks` — `(id,
//! run_id, results, entries)`, the entries a JSON array of `{key, kind, value}` in the
//! order they came, `results` how many of them are step results (for the store's
//! statistics). A step result's large output is stored once for the run, shared with the
//! events that carry it, and the entry holds its id (`output_id`) with a null output
//! ([`super::shared_values`]). A row per entry cost a B-tree insert into the table, its
//! index by run and SQLite's `AUTOINCREMENT` counter each: a fifth of a loop of Lua
//! steps' CPU.
//!
//! A run's chunks are read in `id` order, which is the order they were committed in (a
//! new row's id is above every id the table holds, its run's rows among them). Forgetting
//! entries (retrying a failed run) rewrites the chunks that hold them. Files written
//! before chunks (one row per entry in `journal`) are moved into chunks when they are
//! opened (schema 9).

use super::err;
use super::shared_values::{SharedValues, StoredValue, ValueReader};
use super::writer::by_run;
use rusqlite::{Connection, params};
use std::sync::Arc;
use weft_core::ports::{EntryKind, JournalEntry, StoreError};
use weft_core::value::{Kind, Shared, SharedMap};

/// One entry as JSON, serialized by the appending task rather than the writer thread:
/// the entry's value is made and dropped on the task's own thread (a tree of allocations
/// freed on another thread made glibc's allocator lock its arenas against each other), and
/// the writer only joins texts.
pub(super) struct SerializedEntry {
    json: String,
    result: bool,
    /// Where the entry's output is stored, when it is stored apart.
    output: Option<StoredValue>,
}

/// An entry as a chunk holds it.
#[derive(serde::Deserialize)]
struct StoredEntry {
    key: String,
    kind: EntryKind,
    value: Shared,
    /// The id of the stored value that is the entry's `output` (the entry holds null).
    #[serde(default)]
    output_id: Option<String>,
}

/// [`StoredEntry`], to write.
#[derive(serde::Serialize)]
struct EntryBody<'a> {
    key: &'a str,
    kind: EntryKind,
    value: &'a Shared,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_id: Option<&'a str>,
}

impl StoredEntry {
    fn body(&self) -> EntryBody<'_> {
        EntryBody {
            key: &self.key,
            kind: self.kind,
            value: &self.value,
            output_id: self.output_id.as_deref(),
        }
    }
}

impl SerializedEntry {
    /// `entry` with every value inline.
    pub(super) fn new(entry: &JournalEntry) -> Result<SerializedEntry, StoreError> {
        Self::stored(&EntryBody {
            key: &entry.key,
            kind: entry.kind,
            value: &entry.value,
            output_id: None,
        })
    }

    /// `entry` of run `run`, its output stored apart when it is large (and referred to
    /// when one of the run's events already stored it).
    pub(super) fn sharing(
        run: &str,
        entry: &JournalEntry,
        shared: &SharedValues,
    ) -> Result<SerializedEntry, StoreError> {
        let output = match output_of(entry) {
            Some(v) => shared.store(run, v)?,
            None => None,
        };
        let Some(output) = output else {
            return Self::new(entry);
        };
        let mut serialized = Self::stored(&EntryBody {
            key: &entry.key,
            kind: entry.kind,
            value: &with_output(&entry.value, Shared::null()).unwrap_or_default(),
            output_id: Some(&output.id()),
        })?;
        serialized.output = Some(output);
        Ok(serialized)
    }

    fn stored(entry: &EntryBody<'_>) -> Result<SerializedEntry, StoreError> {
        Ok(SerializedEntry {
            json: serde_json::to_string(entry).map_err(|e| err("journal", e))?,
            result: entry.kind == EntryKind::Result,
            output: None,
        })
    }

    /// The stored value the entry refers to, if any.
    pub(super) fn values(&self) -> impl Iterator<Item = &StoredValue> {
        self.output.iter()
    }
}

/// The output of a step result, when it is a shared part of the entry (the engine's
/// results share it with the step's events).
fn output_of(entry: &JournalEntry) -> Option<&Shared> {
    match (&entry.kind, &entry.value) {
        (EntryKind::Result, Shared::Object(m)) => m.get("output"),
        _ => None,
    }
}

/// Writes `entries` (of one commit, perhaps of several runs) as one chunk a run.
pub(super) fn write<'a>(
    conn: &Connection,
    entries: impl Iterator<Item = (&'a str, &'a SerializedEntry)>,
) -> Result<(), StoreError> {
    for (run_id, entries) in by_run(entries) {
        insert_serialized(conn, run_id, entries)?;
    }
    Ok(())
}

/// Stores `entries` as one chunk of run `run_id`.
pub(super) fn insert(
    conn: &Connection,
    run_id: &str,
    entries: &[&JournalEntry],
) -> Result<(), StoreError> {
    insert_serialized(conn, run_id, &serialize_all(entries)?)
}

fn serialize_all(entries: &[&JournalEntry]) -> Result<Vec<SerializedEntry>, StoreError> {
    entries.iter().map(|e| SerializedEntry::new(e)).collect()
}

fn insert_serialized<'a>(
    conn: &Connection,
    run_id: &str,
    entries: impl IntoIterator<Item = &'a SerializedEntry>,
) -> Result<(), StoreError> {
    let (body, results) = chunk(entries);
    conn.prepare_cached("INSERT INTO journal_chunks (run_id, results, entries) VALUES (?1, ?2, ?3)")
        .and_then(|mut s| s.execute(params![run_id, results, body]))
        .map(drop)
        .map_err(|e| err("journal", e))
}

/// A chunk's text (the entries as one JSON array) and how many of them are step results.
fn chunk<'a>(entries: impl IntoIterator<Item = &'a SerializedEntry>) -> (String, i64) {
    let mut body = String::from("[");
    let mut results = 0;
    for e in entries {
        if body.len() > 1 {
            body.push(',');
        }
        body.push_str(&e.json);
        results += i64::from(e.result);
    }
    body.push(']');
    (body, results)
}

/// The run's chunks, in order: each row's id and its entries as they are stored.
fn chunks(conn: &Connection, run_id: &str) -> Result<Vec<(i64, Vec<StoredEntry>)>, StoreError> {
    let mut stmt = conn
        .prepare_cached("SELECT id, entries FROM journal_chunks WHERE run_id = ?1 ORDER BY id")
        .map_err(|e| err("journal", e))?;
    let rows = stmt
        .query_map(params![run_id], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
        })
        .map_err(|e| err("journal", e))?;
    rows.map(|row| {
        let (id, body) = row.map_err(|e| err("journal", e))?;
        let entries = serde_json::from_str(&body)
            .map_err(|e| StoreError::Corrupt(format!("a journal entry: {e}")))?;
        Ok((id, entries))
    })
    .collect()
}

/// Every entry of the run, in the order it was appended, with its stored output back.
pub(super) fn read(conn: &Connection, run_id: &str) -> Result<Vec<JournalEntry>, StoreError> {
    let mut values = ValueReader::default();
    let mut out = Vec::new();
    for (_, entries) in chunks(conn, run_id)? {
        for e in entries {
            let value = match &e.output_id {
                Some(id) => {
                    with_output(&e.value, values.get(conn, run_id, id)?).ok_or_else(|| {
                        StoreError::Corrupt(format!(
                            "journal entry {} of run {run_id} refers to an output but is no result",
                            e.key
                        ))
                    })?
                }
                None => e.value,
            };
            out.push(JournalEntry {
                key: e.key,
                kind: e.kind,
                value,
            });
        }
    }
    Ok(out)
}

/// A result with `output` in its `output`'s place, its other parts shared, not copied
/// (null to store the output apart, the stored output when reading it back); `None`
/// when it is no object.
fn with_output(value: &Shared, output: Shared) -> Option<Shared> {
    let node = value.node();
    if !matches!(node.kind(), Kind::Object(_)) {
        return None;
    }
    let mut m: SharedMap = node
        .keys()
        .into_iter()
        .map(|k| {
            (
                k.to_owned(),
                node.get(k).map_or_else(Shared::null, |n| n.to_shared()),
            )
        })
        .collect();
    m.insert("output".into(), output);
    Some(Shared::Object(Arc::new(m)))
}

/// Removes the run's entries under `keys`: each chunk holding one is rewritten without
/// them, or deleted when nothing is left of it.
pub(super) fn forget(conn: &Connection, run_id: &str, keys: &[String]) -> Result<(), StoreError> {
    for (id, entries) in chunks(conn, run_id)? {
        let before = entries.len();
        // Kept entries are written back as they were stored, referring to the same
        // values (which stay: the run's events may refer to them too).
        let kept: Vec<&StoredEntry> = entries.iter().filter(|e| !keys.contains(&e.key)).collect();
        if kept.len() == before {
            continue;
        }
        let changed = if kept.is_empty() {
            conn.prepare_cached("DELETE FROM journal_chunks WHERE id = ?1")
                .and_then(|mut s| s.execute(params![id]))
        } else {
            let kept: Vec<SerializedEntry> = kept
                .into_iter()
                .map(|e| SerializedEntry::stored(&e.body()))
                .collect::<Result<_, _>>()?;
            let (body, results) = chunk(&kept);
            conn.prepare_cached(
                "UPDATE journal_chunks SET entries = ?2, results = ?3 WHERE id = ?1",
            )
            .and_then(|mut s| s.execute(params![id, body, results]))
        };
        changed.map_err(|e| err("journal", e))?;
    }
    Ok(())
}

/// How many step results every run's journal holds.
pub(super) fn result_count(conn: &Connection) -> Result<u64, StoreError> {
    conn.query_row(
        "SELECT coalesce(sum(results), 0) FROM journal_chunks",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n as u64)
    .map_err(|e| err("stats", e))
}
