//! Weft's tables in the SQLite file: created in one transaction when a store opens the
//! file, and upgraded from any older schema version by numbered migrations
//! (`migrations/NNN_*.sql`), under the write lock, so that processes opening one file
//! together create or upgrade it once.

use super::{audit, keys, threads, triggers};
use rusqlite::{Connection, OptionalExtension, params};
use std::path::Path;

pub(super) use super::Durability;

/// The schema version written in the database; a newer one is refused, older ones are
/// upgraded on open by [`MIGRATIONS`].
pub(super) const SCHEMA_VERSION: i64 = 12;

/// Weft's tables, created in one transaction.
const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
     CREATE TABLE IF NOT EXISTS flows (hash TEXT PRIMARY KEY, ir TEXT NOT NULL);
     CREATE TABLE IF NOT EXISTS runs (
         id TEXT PRIMARY KEY, flow_hash TEXT NOT NULL, flow_name TEXT NOT NULL,
         source TEXT, source_hash TEXT, dialect TEXT, input TEXT NOT NULL,
         status TEXT NOT NULL, output TEXT, state TEXT, error TEXT, waiting TEXT,
         usage TEXT NOT NULL, owner TEXT, created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL,
         scopes TEXT, view TEXT, settings TEXT, retries INTEGER NOT NULL DEFAULT 0,
         flow_id TEXT, wake_ms INTEGER, output_refs TEXT, state_refs TEXT);
     CREATE TABLE IF NOT EXISTS sources (
         id TEXT PRIMARY KEY, name TEXT NOT NULL, dialect TEXT NOT NULL, text TEXT NOT NULL,
         created_ms INTEGER NOT NULL);
     CREATE INDEX IF NOT EXISTS sources_by_time ON sources (created_ms DESC, id DESC);
     CREATE TABLE IF NOT EXISTS flow_versions (
         name TEXT NOT NULL, version INTEGER NOT NULL, flow_id TEXT NOT NULL,
         created_ms INTEGER NOT NULL, PRIMARY KEY (name, version)) WITHOUT ROWID;
     CREATE TABLE IF NOT EXISTS scoped (key TEXT PRIMARY KEY, value TEXT NOT NULL);
     CREATE INDEX IF NOT EXISTS runs_by_time ON runs (created_ms DESC);
     CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status, created_ms DESC);
     CREATE TABLE IF NOT EXISTS journal_chunks (
         id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, results INTEGER NOT NULL,
         entries TEXT NOT NULL);
     CREATE INDEX IF NOT EXISTS journal_chunks_by_run ON journal_chunks (run_id, id);
     CREATE TABLE IF NOT EXISTS event_chunks (
         run_id TEXT NOT NULL, first_seq INTEGER NOT NULL, last_seq INTEGER NOT NULL,
         body TEXT NOT NULL, PRIMARY KEY (run_id, first_seq)) WITHOUT ROWID;
     CREATE TABLE IF NOT EXISTS run_values (
         run_id TEXT NOT NULL, id BLOB NOT NULL, body BLOB NOT NULL, refs TEXT,
         PRIMARY KEY (run_id, id));";

/// What each schema version changed, by the version it leads to: the statements that
/// bring a database of the version before to it (new tables are created by [`SCHEMA`]
/// itself, so a version that only added tables has none). Versions that a reader of an
/// older one could not read are marked.
const MIGRATIONS: &[(i64, &str)] = &[
    (2, include_str!("migrations/002_run_scopes.sql")),
    (3, include_str!("migrations/003_run_view.sql")),
    (
        4,
        include_str!("migrations/004_run_settings_and_retries.sql"),
    ),
    // 5: the events table (now event_chunks).
    (5, ""),
    (6, include_str!("migrations/006_run_flow_id.sql")),
    // 7: named versions of flows (a table of its own).
    (7, ""),
    (8, include_str!("migrations/008_event_chunks.sql")),
    (9, include_str!("migrations/009_journal_chunks.sql")),
    // 10: event chunks compressed (unreadable by a version up to 9).
    (10, ""),
    // 11: runs' timers (`runs.wake_ms`, added by `ensure_column`: a table `SCHEMA` has
    // just made has it already) and the trigger tables.
    (11, ""),
    // 12: large values stored once in `run_values`, which the journal and the event log
    // refer to (unreadable by a version up to 11).
    (12, ""),
];

/// Why a file could not be opened as a Weft database.
pub(super) enum OpenError {
    Sqlite(rusqlite::Error),
    /// It holds tables, and none of them is Weft's `meta`.
    Foreign(Vec<String>),
    /// A newer Weft wrote it.
    TooNew(i64),
}

impl From<rusqlite::Error> for OpenError {
    fn from(e: rusqlite::Error) -> OpenError {
        OpenError::Sqlite(e)
    }
}

/// Adds `column` (of `decl`) to `table` unless the table has it.
fn ensure_column(
    tx: &rusqlite::Transaction<'_>,
    table: &str,
    column: &str,
    decl: &str,
) -> rusqlite::Result<()> {
    let has: bool = tx.query_row(
        &format!("SELECT count(*) > 0 FROM pragma_table_info('{table}') WHERE name = ?1"),
        params![column],
        |r| r.get(0),
    )?;
    if !has {
        tx.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {decl};"))?;
    }
    Ok(())
}

/// Indexes on columns a migration may have added, made once the migrations ran.
const LATE_SCHEMA: &str =
    "CREATE INDEX IF NOT EXISTS runs_waking ON runs (wake_ms) WHERE wake_ms IS NOT NULL;";

/// How long opening waits for other processes that hold the database's locks.
const BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

pub(super) fn open_connection(
    path: &Path,
    durability: Durability,
) -> Result<Connection, OpenError> {
    let mut conn = Connection::open(path)?;
    conn.busy_timeout(BUSY_WAIT)?;
    // Before anything writes: switching to WAL alone would change a foreign file's header.
    let tables: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
        )?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    if !tables.is_empty() && !tables.iter().any(|t| t == "meta") {
        return Err(OpenError::Foreign(tables));
    }
    // Switching to WAL takes an exclusive lock without calling the busy handler, so
    // several processes opening a new file at once retry it themselves.
    retry_busy(|| conn.pragma_update(None, "journal_mode", "WAL"))?;
    conn.pragma_update(
        None,
        "synchronous",
        match durability {
            Durability::Process => "NORMAL",
            Durability::Power => "FULL",
        },
    )?;
    // One writer at a time creates or upgrades the schema: the others wait for the
    // write lock, then find it done.
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    tx.execute_batch(SCHEMA)?;
    let version: Option<String> = tx
        .query_row("SELECT value FROM meta WHERE key = 'schema'", [], |r| {
            r.get(0)
        })
        .optional()?;
    match version.map(|v| v.parse::<i64>()) {
        None => {
            tx.execute(
                "INSERT INTO meta (key, value) VALUES ('schema', ?1)",
                params![SCHEMA_VERSION.to_string()],
            )?;
        }
        Some(Ok(v)) if v < SCHEMA_VERSION => {
            for (_, step) in MIGRATIONS.iter().filter(|(to, _)| *to > v) {
                tx.execute_batch(step)?;
            }
            tx.execute(
                "UPDATE meta SET value = ?1 WHERE key = 'schema'",
                params![SCHEMA_VERSION.to_string()],
            )?;
        }
        Some(Ok(v)) if v == SCHEMA_VERSION => {}
        Some(Ok(v)) => return Err(OpenError::TooNew(v)),
        Some(Err(_)) => return Err(OpenError::Foreign(tables)),
    }
    ensure_column(&tx, "runs", "wake_ms", "INTEGER")?;
    ensure_column(&tx, "runs", "output_refs", "TEXT")?;
    ensure_column(&tx, "runs", "state_refs", "TEXT")?;
    tx.execute_batch(LATE_SCHEMA)?;
    tx.execute_batch(triggers::SCHEMA)?;
    tx.execute_batch(threads::SCHEMA)?;
    tx.execute_batch(keys::SCHEMA)?;
    tx.execute_batch(audit::SCHEMA)?;
    tx.commit()?;
    Ok(conn)
}

/// Runs `f` again while SQLite answers that the database is busy, for up to
/// [`BUSY_WAIT`].
fn retry_busy<T>(mut f: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let start = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        match f() {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy && start.elapsed() < BUSY_WAIT =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(50));
            }
            other => return other,
        }
    }
}
