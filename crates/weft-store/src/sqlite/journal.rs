//! The journal: each run's entries, stored a chunk at a time.
//!
//! One group commit writes a run's entries as one row of `journal_chunks` — `(id,
//! run_id, results, entries)`, the entries a JSON array of `{key, kind, value}` in the
//! order they came, `results` how many of them are step results (for the store's
//! statistics). A row per entry cost a B-tree insert into the table, its index by run
//! and SQLite's `AUTOINCREMENT` counter each: a fifth of a loop of Lua steps' CPU.
//!
//! A run's chunks are read in `id` order, which is the order they were committed in (a
//! new row's id is above every id the table holds, its run's rows among them). Forgetting
//! entries (retrying a failed run) rewrites the chunks that hold them. Files written
//! before chunks (one row per entry in `journal`) are moved into chunks when they are
//! opened (schema 9).

use super::{by_run, err};
use rusqlite::{Connection, params};
use weft_core::ports::{EntryKind, JournalEntry, StoreError};

/// Schema 9: the rows of `journal` (schema 1 to 8) as chunks of one entry each, in the
/// order they were appended.
pub(super) const MIGRATION: &str = "
    CREATE TABLE IF NOT EXISTS journal (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL,
        key TEXT NOT NULL, kind TEXT NOT NULL, value TEXT NOT NULL);
    INSERT INTO journal_chunks (run_id, results, entries)
        SELECT run_id, kind = 'result',
               json_array(json_object('key', key, 'kind', kind, 'value', json(value)))
        FROM journal ORDER BY seq;
    DROP TABLE journal;";

/// One entry as JSON, serialized by the appending task rather than the writer thread:
/// the entry's value is made and dropped on the task's own thread (a tree of allocations
/// freed on another thread made glibc's allocator lock its arenas against each other), and
/// the writer only joins texts.
pub(super) struct SerializedEntry {
    json: String,
    result: bool,
}

impl SerializedEntry {
    pub(super) fn new(entry: &JournalEntry) -> Result<SerializedEntry, StoreError> {
        Ok(SerializedEntry {
            json: serde_json::to_string(entry).map_err(|e| err("journal", e))?,
            result: entry.kind == EntryKind::Result,
        })
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

/// The run's chunks, in order: each row's id and its entries.
fn chunks(conn: &Connection, run_id: &str) -> Result<Vec<(i64, Vec<JournalEntry>)>, StoreError> {
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

/// Every entry of the run, in the order it was appended.
pub(super) fn read(conn: &Connection, run_id: &str) -> Result<Vec<JournalEntry>, StoreError> {
    Ok(chunks(conn, run_id)?
        .into_iter()
        .flat_map(|(_, entries)| entries)
        .collect())
}

/// Removes the run's entries under `keys`: each chunk holding one is rewritten without
/// them, or deleted when nothing is left of it.
pub(super) fn forget(conn: &Connection, run_id: &str, keys: &[String]) -> Result<(), StoreError> {
    for (id, entries) in chunks(conn, run_id)? {
        let before = entries.len();
        let kept: Vec<&JournalEntry> = entries.iter().filter(|e| !keys.contains(&e.key)).collect();
        if kept.len() == before {
            continue;
        }
        let changed = if kept.is_empty() {
            conn.prepare_cached("DELETE FROM journal_chunks WHERE id = ?1")
                .and_then(|mut s| s.execute(params![id]))
        } else {
            let (body, results) = chunk(&serialize_all(&kept)?);
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
