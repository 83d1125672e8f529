//! The SQLite store: one database file in WAL mode, owned by one writer thread.
//!
//! Every request travels to that thread over a channel. The thread drains every journal
//! append queued behind the first and commits them in one transaction (group commit),
//! in order, then answers each: an append returns only once its entry is durable, and
//! appends made at the same moment (parallel branches, other runs) share one commit.
//! Queued entries (of sandboxed code steps, whose callers do not wait) that keep coming
//! are committed once a millisecond rather than one by one.

mod events;
mod journal;
mod run_values;
mod shared_values;
mod sources;
mod threads;
mod triggers;

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use weft_core::event::Event;
use weft_core::ports::{
    Claim, Claimed, Cursor, Durable, FlowSource, FlowVersion, JournalEntry, RunQuery, RunRecord,
    RunStats, RunStatus, ScopedChange, Store, StoreError, Usage,
};

/// How hard a commit works to survive a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Survives a killed process (`kill -9`); the last commits may be lost if the machine
    /// loses power. SQLite's `synchronous=NORMAL` in WAL mode.
    #[default]
    Process,
    /// Also survives power loss: every commit is synced to disk (`synchronous=FULL`).
    Power,
}

/// Schema version written in the database; a newer one is refused.
/// 2 added runs.scopes and the scoped table; 3 added runs.view; 4 added runs.settings
/// and runs.retries; 5 the events table; 6 runs.flow_id; 8 moved the events into
/// event_chunks; 9 the journal into journal_chunks; 10 compressed event chunks (which
/// a version reading up to 9 could not read); 11 runs' timers and the trigger tables; 12
/// large values stored once in `run_values` for the journal and the event log to refer
/// to (which a version reading up to 11 could not read). Older files are upgraded on open.
const SCHEMA_VERSION: i64 = 12;
/// Appends committed together at most.
const MAX_BATCH: usize = 4096;
/// Requests waiting for the writer before senders wait too.
const QUEUE: usize = 8192;

type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

/// One journal append waiting for its commit.
struct Append {
    run_id: String,
    entry: journal::SerializedEntry,
    durable: Reply<()>,
    /// The caller waits for the commit (`append`), rather than queueing the entry.
    awaited: bool,
}

/// Events waiting for their commit, serialized.
struct EventBatch {
    events: events::Serialized,
    durable: Reply<()>,
}

/// What one group commit writes.
enum Write {
    Entry(Append),
    Events(EventBatch),
}

impl Write {
    /// Whether this is a journal entry whose caller did not wait for its commit.
    fn queued(&self) -> bool {
        matches!(self, Write::Entry(a) if !a.awaited)
    }

    fn reply(self, result: Result<(), StoreError>) {
        let _ = match self {
            Write::Entry(a) => a.durable.send(result),
            Write::Events(b) => b.durable.send(result),
        };
    }
}

enum Request {
    /// A journal entry or events, committed with every write queued behind it.
    Write(Box<Write>),
    ReadEvents(String, Option<u64>, usize, Reply<Vec<Event>>),
    Stats(Reply<RunStats>),
    NextEventSeq(String, Reply<u64>),
    PutFlow(String, String, Reply<()>),
    GetFlow(String, Reply<Option<String>>),
    CreateRun(Box<(RunRecord, run_values::RunValues)>, Reply<()>),
    UpdateRun(Box<(RunRecord, run_values::RunValues)>, Reply<()>),
    GetRun(String, Reply<Option<RunRecord>>),
    ListRuns(RunQuery, Reply<Vec<RunRecord>>),
    PutSource(Box<FlowSource>, Reply<()>),
    GetSource(String, Reply<Option<FlowSource>>),
    ListSources(usize, Option<Cursor>, Reply<Vec<FlowSource>>),
    SaveVersion(String, String, i64, Reply<FlowVersion>),
    GetVersion(String, Option<u32>, Reply<Option<FlowVersion>>),
    NamedFlows(Reply<Vec<FlowVersion>>),
    Journal(String, Reply<Vec<JournalEntry>>),
    Forget(String, Vec<String>, Reply<()>),
    Claim(Box<Claim>, Reply<Claimed>),
    Scoped(String, Reply<Option<serde_json::Value>>),
    ChangeScoped(String, Vec<ScopedChange>, Reply<serde_json::Value>),
    /// Any other work on the connection, in turn with the rest (see [`SqliteStore::with`]).
    With(Box<dyn FnOnce(&Connection) + Send>),
}

/// A durable store in one SQLite file.
pub struct SqliteStore {
    tx: mpsc::Sender<Request>,
    path: PathBuf,
    /// Large values each run's event log holds, for later events to refer to.
    shared_values: shared_values::SharedValues,
}

fn err(context: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::backend(context, e)
}

/// An LZ4 body as event chunks and stored values hold it (the JSON's length first).
fn decompress(body: &[u8]) -> Result<Vec<u8>, String> {
    // LZ4 expands at most 255 times: a larger length is damage, not a body to allocate
    // room for.
    let claimed = body
        .get(..4)
        .map_or(0, |n| u32::from_le_bytes(n.try_into().unwrap_or_default()));
    if claimed as usize > body.len().saturating_mul(255) {
        return Err(format!(
            "a length of {claimed} bytes in a {}-byte body",
            body.len()
        ));
    }
    lz4_flex::block::decompress_size_prepended(body).map_err(|e| e.to_string())
}

fn stopped() -> StoreError {
    StoreError::Closed("the database thread has stopped".into())
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and checks it is a Weft database.
    pub fn open(path: impl AsRef<Path>, durability: Durability) -> Result<SqliteStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| err(&format!("cannot create the directory {}", dir.display()), e))?;
        }
        let shown = path.display();
        let conn = open_connection(&path, durability).map_err(|e| match e {
            OpenError::Sqlite(e) => StoreError::Unusable(format!(
                "{shown} is not a usable Weft database ({e}); move it aside or choose another with --db or WEFT_DB"
            )),
            OpenError::Foreign(tables) => StoreError::Unusable(format!(
                "{shown} is not a Weft database (it holds the tables {}); Weft leaves it alone: choose another with --db or WEFT_DB",
                tables.join(", ")
            )),
            OpenError::TooNew(v) => StoreError::TooNew(format!(
                "{shown} was written by a newer Weft (schema {v}; this one reads up to {SCHEMA_VERSION}): upgrade Weft to use it, or choose another with --db or WEFT_DB"
            )),
        })?;
        // From here on no flow of this process may read, write or remove the database
        // or its side files, whatever its files directory holds.
        weft_files::protect_database(&path);
        let (tx, rx) = mpsc::channel(QUEUE);
        std::thread::Builder::new()
            .name("weft-sqlite".into())
            .spawn(move || writer(conn, rx))
            .map_err(|e| err("cannot start the database thread", e))?;
        Ok(SqliteStore {
            tx,
            path,
            shared_values: Default::default(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    async fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Request) -> Result<T, StoreError> {
        self.queue(make).await?.await.map_err(|_| stopped())?
    }

    /// Runs `work` on the database thread's connection, in turn with every other
    /// request (the thread serves one at a time), and returns what it returned.
    async fn with<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.ask(|reply| {
            Request::With(Box::new(move |conn| {
                let _ = reply.send(work(conn));
            }))
        })
        .await
    }

    /// Sends a request to the writer thread; the receiver of its answer.
    async fn queue<T>(
        &self,
        make: impl FnOnce(Reply<T>) -> Request,
    ) -> Result<oneshot::Receiver<Result<T, StoreError>>, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.tx.send(make(reply)).await.map_err(|_| stopped())?;
        Ok(answer)
    }
}

/// Why a file could not be opened as a Weft database.
enum OpenError {
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

/// What each schema version added to the one before, by the version it leads to (new
/// tables are created by [`SCHEMA`] itself).
const MIGRATIONS: &[(i64, &str)] = &[
    (2, "ALTER TABLE runs ADD COLUMN scopes TEXT;"),
    (3, "ALTER TABLE runs ADD COLUMN view TEXT;"),
    (
        4,
        "ALTER TABLE runs ADD COLUMN settings TEXT;
         ALTER TABLE runs ADD COLUMN retries INTEGER NOT NULL DEFAULT 0;",
    ),
    (5, ""),
    (6, "ALTER TABLE runs ADD COLUMN flow_id TEXT;"),
    (7, ""),
    (8, events::MIGRATION),
    (9, journal::MIGRATION),
    (10, ""),
    // 11 adds `runs.wake_ms` through `ensure_column`: a table `SCHEMA` has just
    // created already has it.
    (11, ""),
    (12, ""),
];

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

fn open_connection(path: &Path, durability: Durability) -> Result<Connection, OpenError> {
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

fn writer(conn: Connection, rx: mpsc::Receiver<Request>) {
    // A runtime of its own, for the one thing the thread waits on with a deadline: more
    // writes to commit together (see `group_commit`).
    match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(rt) => rt.block_on(serve_requests(conn, rx)),
        // Dropping `rx` answers every request with "the database thread has stopped".
        Err(e) => eprintln!("weft: the database thread cannot start: {e}"),
    }
}

async fn serve_requests(mut conn: Connection, mut rx: mpsc::Receiver<Request>) {
    // When the last commit of only queued entries was made.
    let mut last_queued: Option<Instant> = None;
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(req) = next.take() {
            match req {
                Request::Write(w) => {
                    next = group_commit(&mut conn, &mut rx, *w, &mut last_queued).await
                }
                other => serve(&conn, other),
            }
        }
    }
}

/// How often queued journal entries (see [`Store::append_queued`]) are committed while
/// they keep coming: a run of sandboxed code steps shares commits instead of paying one
/// (and a wake-up of this thread) per step.
const QUEUED_COMMIT_INTERVAL: Duration = Duration::from_millis(1);

/// Commits `first` with every write queued behind it in one transaction, answers each,
/// and returns the request that ended the batch, if any.
///
/// A batch of only queued entries that comes less than [`QUEUED_COMMIT_INTERVAL`] after
/// the last such commit waits until the interval is over and takes what arrived
/// meanwhile. Any other batch is committed at once.
async fn group_commit(
    conn: &mut Connection,
    rx: &mut mpsc::Receiver<Request>,
    first: Write,
    last_queued: &mut Option<Instant>,
) -> Option<Request> {
    let mut batch = vec![first];
    let mut next = None;
    drain_writes(rx, &mut batch, &mut next);
    let only_queued = |batch: &[Write]| batch.iter().all(Write::queued);
    if next.is_none()
        && only_queued(&batch)
        && let Some(deadline) = last_queued
            .map(|t| t + QUEUED_COMMIT_INTERVAL)
            .filter(|d| *d > Instant::now())
    {
        tokio::time::sleep_until(deadline.into()).await;
        drain_writes(rx, &mut batch, &mut next);
    }
    *last_queued = only_queued(&batch).then(Instant::now);
    let committed = append_batch(conn, &batch);
    for w in batch {
        w.reply(committed.clone());
    }
    next
}

/// Moves the writes queued now into `batch`, up to [`MAX_BATCH`]; a request of another
/// kind ends it and goes to `next`.
fn drain_writes(
    rx: &mut mpsc::Receiver<Request>,
    batch: &mut Vec<Write>,
    next: &mut Option<Request>,
) {
    while batch.len() < MAX_BATCH {
        match rx.try_recv() {
            Ok(Request::Write(w)) => batch.push(*w),
            Ok(other) => {
                *next = Some(other);
                return;
            }
            Err(_) => return,
        }
    }
}

fn append_batch(conn: &mut Connection, batch: &[Write]) -> Result<(), StoreError> {
    let tx = conn.transaction().map_err(|e| err("journal", e))?;
    // The values the batch's entries and events refer to, before them.
    let entry_values = batch
        .iter()
        .filter_map(|w| match w {
            Write::Entry(a) => Some(a),
            Write::Events(_) => None,
        })
        .flat_map(|a| a.entry.values().map(|v| (a.run_id.as_str(), v)));
    let event_values = batch
        .iter()
        .filter_map(|w| match w {
            Write::Events(b) => Some(b.events.values()),
            Write::Entry(_) => None,
        })
        .flatten();
    shared_values::insert(&tx, entry_values.chain(event_values))?;
    let entries = batch.iter().filter_map(|w| match w {
        Write::Entry(Append { run_id, entry, .. }) => Some((run_id.as_str(), entry)),
        Write::Events(_) => None,
    });
    journal::write(&tx, entries)?;
    let pending = batch
        .iter()
        .filter_map(|w| match w {
            Write::Events(b) => Some(b.events.iter()),
            Write::Entry(_) => None,
        })
        .flatten();
    events::write(&tx, pending)?;
    tx.commit().map_err(|e| err("journal commit", e))
}

/// `items` grouped by their run, runs in the order they first come, each run's items in
/// theirs: what one commit stores as one chunk a run (journal entries, events).
fn by_run<'a, T>(items: impl Iterator<Item = (&'a str, T)>) -> Vec<(&'a str, Vec<T>)> {
    let mut runs: Vec<(&str, Vec<T>)> = Vec::new();
    for (run_id, item) in items {
        match runs.iter_mut().find(|(r, _)| *r == run_id) {
            Some((_, v)) => v.push(item),
            None => runs.push((run_id, vec![item])),
        }
    }
    runs
}

fn json_col<T: serde::Serialize + ?Sized>(v: Option<&T>) -> Option<String> {
    // JSON values (string keys only) always serialize.
    v.and_then(|v| serde_json::to_string(v).ok())
}

fn parse_col(s: Option<String>) -> rusqlite::Result<Option<serde_json::Value>> {
    s.map(|s| {
        serde_json::from_str(&s).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
        })
    })
    .transpose()
}

const RUN_COLUMNS: &str = "id, flow_hash, flow_name, source, source_hash, dialect, input, status, output, state, error, waiting, usage, owner, created_ms, updated_ms, scopes, view, settings, retries, flow_id, wake_ms, output_refs, state_refs";

/// A run row, with the references to the parts its output and state hold apart (put
/// back by [`with_values`]).
fn run_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(RunRecord, run_values::Refs)> {
    let status: String = r.get(7)?;
    let usage: String = r.get(12)?;
    let refs = run_values::Refs {
        output: r.get(22)?,
        state: r.get(23)?,
    };
    let run = RunRecord {
        id: r.get(0)?,
        flow_hash: r.get(1)?,
        flow_name: r.get(2)?,
        source: r.get(3)?,
        source_hash: r.get(4)?,
        dialect: r.get(5)?,
        input: parse_col(r.get(6)?)?.unwrap_or(serde_json::Value::Null),
        status: RunStatus::parse(&status).unwrap_or(RunStatus::Failed),
        output: parse_col(r.get(8)?)?.map(weft_core::value::Shared::new),
        state: parse_col(r.get(9)?)?.map(weft_core::value::Shared::new),
        error: parse_col(r.get(10)?)?,
        waiting: parse_col(r.get(11)?)?,
        usage: serde_json::from_str::<Usage>(&usage).unwrap_or_default(),
        owner: r.get(13)?,
        created_ms: r.get(14)?,
        updated_ms: r.get(15)?,
        scopes: parse_col(r.get(16)?)?
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default(),
        view: parse_col(r.get(17)?)?,
        settings: parse_col(r.get(18)?)?,
        retries: r.get(19)?,
        lease_until_ms: None,
        flow_id: r.get(20)?,
        wake_ms: r.get(21)?,
    };
    Ok((run, refs))
}

/// The runs of `rows`, their output and state whole.
fn with_values(
    conn: &Connection,
    rows: Vec<(RunRecord, run_values::Refs)>,
) -> Result<Vec<RunRecord>, StoreError> {
    rows.into_iter()
        .map(|(mut run, refs)| {
            run_values::put_back(conn, &mut run, refs)?;
            Ok(run)
        })
        .collect()
}

/// The runs `query` asks for: newest first, from its cursor on.
fn list_runs(conn: &Connection, query: &RunQuery) -> Result<Vec<RunRecord>, StoreError> {
    let (after_ms, after_id) = match &query.after {
        Some(c) => (Some(c.created_ms), Some(c.id.as_str())),
        None => (None, None),
    };
    let rows = conn
        .prepare_cached(&format!(
            "SELECT {RUN_COLUMNS} FROM runs
             WHERE (?1 IS NULL OR status = ?1) AND (?2 IS NULL OR (created_ms, id) < (?2, ?3))
             ORDER BY created_ms DESC, id DESC LIMIT ?4"
        ))
        .and_then(|mut s| {
            let status = query.status.map(|s| s.as_str());
            let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
            s.query_map(params![status, after_ms, after_id, limit], run_from_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(|e| err("runs", e))?;
    with_values(conn, rows)
}

/// Writes a run and the values its record refers to in one transaction (one commit, and
/// no record without its values).
fn write_run_with_values(
    conn: &Connection,
    (run, values): &(RunRecord, run_values::RunValues),
    insert: bool,
) -> Result<(), StoreError> {
    let tx = conn.unchecked_transaction().map_err(|e| err("runs", e))?;
    write_run(&tx, run, insert, values)?;
    tx.commit().map_err(|e| err("runs", e))
}

/// Writes `run` (inserting it when `insert`), its output and state as `values` wrote
/// them, and the stored values they refer to.
fn write_run(
    conn: &Connection,
    run: &RunRecord,
    insert: bool,
    values: &run_values::RunValues,
) -> Result<(), StoreError> {
    let sql = if insert {
        format!(
            "INSERT INTO runs ({RUN_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24)"
        )
    } else {
        format!(
            "INSERT OR REPLACE INTO runs ({RUN_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24)"
        )
    };
    values.insert_parts(conn, &run.id)?;
    let (output, output_refs) = values.output();
    let (state, state_refs) = values.state();
    conn.prepare_cached(&sql)
        .and_then(|mut s| {
            s.execute(params![
                run.id,
                run.flow_hash,
                run.flow_name,
                run.source,
                run.source_hash,
                run.dialect,
                run.input.to_string(),
                run.status.as_str(),
                output,
                state,
                json_col(run.error.as_ref()),
                json_col(run.waiting.as_ref()),
                serde_json::to_string(&run.usage).unwrap_or_default(),
                run.owner,
                run.created_ms,
                run.updated_ms,
                (!run.scopes.is_empty())
                    .then(|| serde_json::to_string(&run.scopes).unwrap_or_default()),
                json_col(run.view.as_ref()),
                json_col(run.settings.as_ref()),
                run.retries,
                run.flow_id,
                run.wake_ms.filter(|_| run.status == RunStatus::Paused),
                output_refs,
                state_refs,
            ])
        })
        .map(|_| ())
        .map_err(|e| match e {
            rusqlite::Error::SqliteFailure(f, _)
                if insert && f.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                StoreError::Conflict(format!("a run with id {} exists already", run.id))
            }
            e => err("runs", e),
        })
}

fn get_run(conn: &Connection, id: &str) -> Result<Option<RunRecord>, StoreError> {
    let exact = conn
        .query_row(
            &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"),
            params![id],
            run_from_row,
        )
        .optional()
        .map_err(|e| err("runs", e))?;
    if exact.is_some() || id.len() < 4 {
        return Ok(with_values(conn, exact.into_iter().collect())?.pop());
    }
    // The ids that start with `id` sort between it and it followed by the last code
    // point: a range the primary key answers, case-sensitive, with no wildcards.
    let mut stmt = conn
        .prepare(&format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE id >= ?1 AND id < ?1 || char(1114111) LIMIT 2"
        ))
        .map_err(|e| err("runs", e))?;
    let found = stmt
        .query_map(params![id], run_from_row)
        .and_then(|rows| rows.collect())
        .map_err(|e| err("runs", e))?;
    let found = with_values(conn, found)?;
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.into_iter().next()),
        _ => Err(StoreError::Conflict(format!(
            "the id prefix `{id}` matches several runs; give more of it"
        ))),
    }
}

/// Compare-and-set on the run's status and owner, with the claim's entry, in one write
/// transaction: other processes' claims of the same run wait for the lock and then see
/// the winner's status.
fn claim_run(conn: &Connection, claim: Claim) -> Result<Claimed, StoreError> {
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)
        .map_err(|e| err("claim", e))?;
    let Some(current) = get_run(&tx, &claim.run_id)? else {
        return Err(StoreError::Conflict(format!(
            "no run with id `{}`",
            claim.run_id
        )));
    };
    let owner_ok = claim.owner_was.as_ref().is_none_or(|o| *o == current.owner);
    if !claim.from.contains(&current.status) || !owner_ok {
        return Ok(Claimed::Lost(Box::new(current)));
    }
    tx.execute(
        "UPDATE runs SET status = 'running', owner = ?2, updated_ms = ?3, wake_ms = NULL WHERE id = ?1",
        params![current.id, claim.owner, claim.now_ms],
    )
    .map_err(|e| err("claim", e))?;
    if let Some(e) = &claim.entry {
        journal::insert(&tx, &current.id, &[e])?;
    }
    tx.commit().map_err(|e| err("claim commit", e))?;
    Ok(Claimed::Taken)
}

fn run_stats(conn: &Connection) -> Result<RunStats, StoreError> {
    let mut stats = RunStats::default();
    let mut stmt = conn
        .prepare_cached(
            "SELECT status, count(*),
                    coalesce(sum(json_extract(usage, '$.input_tokens')), 0),
                    coalesce(sum(json_extract(usage, '$.output_tokens')), 0),
                    coalesce(sum(json_extract(usage, '$.cost_usd')), 0.0)
             FROM runs GROUP BY status",
        )
        .map_err(|e| err("stats", e))?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, f64>(4)?,
            ))
        })
        .map_err(|e| err("stats", e))?;
    for row in rows {
        let (status, n, input, output, cost) = row.map_err(|e| err("stats", e))?;
        if let Some(s) = RunStatus::parse(&status) {
            stats.runs.push((s, n as u64));
        }
        stats.usage.add(&Usage {
            input_tokens: input as u64,
            output_tokens: output as u64,
            cost_usd: cost,
        });
    }
    stats.steps = journal::result_count(conn)?;
    Ok(stats)
}

fn scoped(conn: &Connection, key: &str) -> Result<Option<serde_json::Value>, StoreError> {
    let text: Option<String> = conn
        .query_row(
            "SELECT value FROM scoped WHERE key = ?1",
            params![key],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| err("scoped state", e))?;
    text.map(|t| serde_json::from_str(&t).map_err(|e| err("scoped state", e)))
        .transpose()
}

fn serve(conn: &Connection, req: Request) {
    match req {
        Request::PutFlow(hash, ir, reply) => {
            let r = conn
                .execute(
                    "INSERT OR IGNORE INTO flows (hash, ir) VALUES (?1, ?2)",
                    params![hash, ir],
                )
                .map(|_| ())
                .map_err(|e| err("flows", e));
            let _ = reply.send(r);
        }
        Request::GetFlow(hash, reply) => {
            let r = conn
                .query_row("SELECT ir FROM flows WHERE hash = ?1", params![hash], |r| {
                    r.get(0)
                })
                .optional()
                .map_err(|e| err("flows", e));
            let _ = reply.send(r);
        }
        Request::CreateRun(run, reply) => {
            let _ = reply.send(write_run_with_values(conn, &run, true));
        }
        Request::UpdateRun(run, reply) => {
            let _ = reply.send(write_run_with_values(conn, &run, false));
        }
        Request::GetRun(id, reply) => {
            let _ = reply.send(get_run(conn, &id));
        }
        Request::ListRuns(query, reply) => {
            let _ = reply.send(list_runs(conn, &query));
        }
        Request::PutSource(source, reply) => {
            let _ = reply.send(sources::put(conn, &source));
        }
        Request::GetSource(id, reply) => {
            let _ = reply.send(sources::get(conn, &id));
        }
        Request::ListSources(limit, after, reply) => {
            let _ = reply.send(sources::list(conn, limit, after.as_ref()));
        }
        Request::SaveVersion(name, flow_id, now_ms, reply) => {
            let _ = reply.send(sources::save_version(conn, &name, &flow_id, now_ms));
        }
        Request::GetVersion(name, version, reply) => {
            let _ = reply.send(sources::version(conn, &name, version));
        }
        Request::NamedFlows(reply) => {
            let _ = reply.send(sources::named(conn));
        }
        Request::Journal(run, reply) => {
            let _ = reply.send(journal::read(conn, &run));
        }
        Request::Forget(run, keys, reply) => {
            // The chunks it rewrites change together or not at all.
            let r = conn
                .unchecked_transaction()
                .map_err(|e| err("journal", e))
                .and_then(|tx| {
                    journal::forget(&tx, &run, &keys)?;
                    tx.commit().map_err(|e| err("journal", e))
                });
            let _ = reply.send(r);
        }
        Request::Claim(claim, reply) => {
            let _ = reply.send(claim_run(conn, *claim));
        }
        Request::Scoped(key, reply) => {
            let _ = reply.send(scoped(conn, &key));
        }
        Request::ChangeScoped(key, changes, reply) => {
            // The writer thread serves one request at a time: read, change and write
            // are atomic with respect to every other change.
            let r = scoped(conn, &key).and_then(|doc| {
                let next = ScopedChange::apply_all(doc.as_ref(), &changes)
                    .map_err(|e| StoreError::Conflict(format!("scoped state `{key}`: {e}")))?;
                conn.execute(
                    "INSERT OR REPLACE INTO scoped (key, value) VALUES (?1, ?2)",
                    params![key, next.to_string()],
                )
                .map_err(|e| err("scoped state", e))?;
                Ok(next)
            });
            let _ = reply.send(r);
        }
        Request::ReadEvents(run_id, after, limit, reply) => {
            let _ = reply.send(events::read(conn, &run_id, after, limit));
        }
        Request::Stats(reply) => {
            let _ = reply.send(run_stats(conn));
        }
        Request::NextEventSeq(run_id, reply) => {
            let _ = reply.send(events::next_seq(conn, &run_id));
        }
        Request::With(work) => work(conn),
        Request::Write(_) => unreachable!("handled by the writer loop"),
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn put_flow(&self, hash: &str, ir_json: &str) -> Result<(), StoreError> {
        self.ask(|r| Request::PutFlow(hash.to_owned(), ir_json.to_owned(), r))
            .await
    }
    async fn get_flow(&self, hash: &str) -> Result<Option<String>, StoreError> {
        self.ask(|r| Request::GetFlow(hash.to_owned(), r)).await
    }
    async fn create_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        let values = run_values::RunValues::of(run, &self.shared_values)?;
        self.ask(|r| Request::CreateRun(Box::new((run.clone(), values)), r))
            .await
    }
    async fn update_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        let values = run_values::RunValues::of(run, &self.shared_values)?;
        // A run that ended or paused (perhaps for days) holds none of its values here
        // (its record, written last, may refer to them); after a resume it stores its
        // next large value again.
        if !matches!(run.status, RunStatus::Queued | RunStatus::Running) {
            self.shared_values.forget(&run.id);
        }
        self.ask(|r| Request::UpdateRun(Box::new((run.clone(), values)), r))
            .await
    }
    async fn get_run(&self, id: &str) -> Result<Option<RunRecord>, StoreError> {
        self.ask(|r| Request::GetRun(id.to_owned(), r)).await
    }
    async fn list_runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>, StoreError> {
        self.ask(|r| Request::ListRuns(query.clone(), r)).await
    }
    async fn put_source(&self, source: &FlowSource) -> Result<(), StoreError> {
        self.ask(|r| Request::PutSource(Box::new(source.clone()), r))
            .await
    }
    async fn get_source(&self, id: &str) -> Result<Option<FlowSource>, StoreError> {
        self.ask(|r| Request::GetSource(id.to_owned(), r)).await
    }
    async fn list_sources(
        &self,
        limit: usize,
        after: Option<&Cursor>,
    ) -> Result<Vec<FlowSource>, StoreError> {
        self.ask(|r| Request::ListSources(limit, after.cloned(), r))
            .await
    }
    async fn save_version(
        &self,
        name: &str,
        flow_id: &str,
        now_ms: i64,
    ) -> Result<FlowVersion, StoreError> {
        self.ask(|r| Request::SaveVersion(name.to_owned(), flow_id.to_owned(), now_ms, r))
            .await
    }
    async fn flow_version(
        &self,
        name: &str,
        version: Option<u32>,
    ) -> Result<Option<FlowVersion>, StoreError> {
        self.ask(|r| Request::GetVersion(name.to_owned(), version, r))
            .await
    }
    async fn named_flows(&self) -> Result<Vec<FlowVersion>, StoreError> {
        self.ask(Request::NamedFlows).await
    }
    async fn journal(&self, run_id: &str) -> Result<Vec<JournalEntry>, StoreError> {
        self.ask(|r| Request::Journal(run_id.to_owned(), r)).await
    }
    async fn append(&self, run_id: &str, entry: JournalEntry) -> Result<(), StoreError> {
        let entry = journal::SerializedEntry::sharing(run_id, &entry, &self.shared_values)?;
        self.ask(|durable| {
            Request::Write(Box::new(Write::Entry(Append {
                run_id: run_id.to_owned(),
                entry,
                durable,
                awaited: true,
            })))
        })
        .await
    }
    async fn append_queued(
        &self,
        run_id: &str,
        entry: JournalEntry,
    ) -> Result<Durable, StoreError> {
        let entry = journal::SerializedEntry::sharing(run_id, &entry, &self.shared_values)?;
        let answer = self
            .queue(|durable| {
                Request::Write(Box::new(Write::Entry(Append {
                    run_id: run_id.to_owned(),
                    entry,
                    durable,
                    awaited: false,
                })))
            })
            .await?;
        Ok(Box::pin(
            async move { answer.await.map_err(|_| stopped())? },
        ))
    }
    async fn append_events(&self, events: &[Event]) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        // A batch that fails leaves nothing to refer to: each chunk writes the values it
        // refers to itself.
        let serialized = events::serialize(events, &self.shared_values)?;
        self.ask(|durable| {
            Request::Write(Box::new(Write::Events(EventBatch {
                events: serialized,
                durable,
            })))
        })
        .await
    }
    async fn run_stats(&self) -> Result<RunStats, StoreError> {
        self.ask(Request::Stats).await
    }
    async fn events(
        &self,
        run_id: &str,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        self.ask(|r| Request::ReadEvents(run_id.to_owned(), after, limit, r))
            .await
    }
    async fn next_event_seq(&self, run_id: &str) -> Result<u64, StoreError> {
        self.ask(|r| Request::NextEventSeq(run_id.to_owned(), r))
            .await
    }
    async fn forget(&self, run_id: &str, keys: &[String]) -> Result<(), StoreError> {
        self.ask(|r| Request::Forget(run_id.to_owned(), keys.to_vec(), r))
            .await
    }
    async fn claim_run(&self, claim: Claim) -> Result<Claimed, StoreError> {
        self.ask(|r| Request::Claim(Box::new(claim), r)).await
    }
    async fn scoped_state(&self, key: &str) -> Result<Option<serde_json::Value>, StoreError> {
        self.ask(|r| Request::Scoped(key.to_owned(), r)).await
    }
    async fn change_scoped_state(
        &self,
        key: &str,
        changes: &[ScopedChange],
    ) -> Result<serde_json::Value, StoreError> {
        self.ask(|r| Request::ChangeScoped(key.to_owned(), changes.to_vec(), r))
            .await
    }
    fn triggers(&self) -> Option<&dyn weft_core::ports::TriggerStore> {
        Some(self)
    }
    fn threads(&self) -> Option<&dyn weft_core::ports::ThreadStore> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use weft_core::event::{Event, EventKind};
    use weft_core::ports::{EntryKind, Scopes};
    use weft_core::value::{Shared, SharedMap};

    /// Run `run`'s event `seq`, stamped `at_ms`.
    fn event_of(run: &str, seq: u64, at_ms: u64, kind: EventKind) -> Event {
        Event {
            run_id: run.into(),
            seq,
            at_ms,
            kind,
        }
    }

    fn run(id: &str) -> RunRecord {
        RunRecord::new(id.into(), "h".into(), "f".into(), json!({"a": 1}), 1)
    }

    /// A database file as a Weft of schema `version` left it: `meta` says the version,
    /// and `sql` makes the rest.
    fn older_file(dir: &tempfile::TempDir, name: &str, version: u32, sql: &str) -> PathBuf {
        let path = dir.path().join(name);
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(&format!(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             INSERT INTO meta VALUES ('schema', '{version}');
             {sql}"
        ))
        .unwrap();
        path
    }

    fn entry(key: String) -> JournalEntry {
        JournalEntry {
            key,
            kind: EntryKind::Result,
            value: json!({"output": 1}).into(),
        }
    }

    #[tokio::test]
    async fn queued_entries_share_commits_and_keep_their_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db");
        let s = SqliteStore::open(&path, Durability::Process).unwrap();
        s.create_run(&run("r")).await.unwrap();
        let mut durable = Vec::new();
        for i in 0..500 {
            durable.push(s.append_queued("r", entry(format!("q{i}"))).await.unwrap());
        }
        // An awaited append behind them returns once they are all committed too.
        s.append("r", entry("last".into())).await.unwrap();
        for d in durable {
            d.await.unwrap();
        }
        let keys: Vec<String> = s
            .journal("r")
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.key)
            .collect();
        let mut want: Vec<String> = (0..500).map(|i| format!("q{i}")).collect();
        want.push("last".into());
        assert_eq!(keys, want);
        // A read queued behind queued entries sees them, without waiting for an interval.
        let d = s.append_queued("r", entry("seen".into())).await.unwrap();
        assert_eq!(s.journal("r").await.unwrap().len(), 502);
        d.await.unwrap();
        // And they are in the file, for the next process.
        drop(s);
        let again = SqliteStore::open(&path, Durability::Process).unwrap();
        assert_eq!(again.journal("r").await.unwrap().len(), 502);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn scoped_state_changes_atomically_and_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        {
            let s = std::sync::Arc::new(SqliteStore::open(&path, Durability::Process).unwrap());
            // 100 concurrent increments lose none.
            let mut tasks = Vec::new();
            for _ in 0..100 {
                let s = s.clone();
                tasks.push(tokio::spawn(async move {
                    let inc = ScopedChange::Inc {
                        path: "count".into(),
                        by: 1.0,
                    };
                    s.change_scoped_state("session/a", &[inc]).await.unwrap();
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
            let patch = ScopedChange::Patch(json!({"mode": "plan"}));
            s.change_scoped_state("session/a", &[patch]).await.unwrap();
            // A change that does not apply leaves the document as it was.
            let bad = [
                ScopedChange::Patch(json!({"mode": "chat"})),
                ScopedChange::Inc {
                    path: "mode".into(),
                    by: 1.0,
                },
            ];
            let e = s.change_scoped_state("session/a", &bad).await.unwrap_err();
            assert!(e.to_string().contains("is \"chat\", not a number"), "{e}");
            let mut r = run("r1");
            r.scopes.session = Some("a".into());
            s.create_run(&r).await.unwrap();
        }
        let s = SqliteStore::open(&path, Durability::Process).unwrap();
        assert_eq!(
            s.scoped_state("session/a").await.unwrap(),
            Some(json!({"count": 100, "mode": "plan"}))
        );
        assert_eq!(s.scoped_state("session/b").await.unwrap(), None);
        assert_eq!(
            s.get_run("r1")
                .await
                .unwrap()
                .unwrap()
                .scopes
                .session
                .as_deref(),
            Some("a")
        );
    }

    #[tokio::test]
    async fn a_version_1_file_is_upgraded_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = older_file(
            &dir,
            "v1.db",
            1,
            "CREATE TABLE runs (
                 id TEXT PRIMARY KEY, flow_hash TEXT NOT NULL, flow_name TEXT NOT NULL,
                 source TEXT, source_hash TEXT, dialect TEXT, input TEXT NOT NULL,
                 status TEXT NOT NULL, output TEXT, state TEXT, error TEXT, waiting TEXT,
                 usage TEXT NOT NULL, owner TEXT, created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL);
             INSERT INTO runs VALUES ('old', 'h', 'f', NULL, NULL, NULL, '{}', 'completed',
                 '1', NULL, NULL, NULL, '{\"input_tokens\":0,\"output_tokens\":0}', NULL, 1, 1);",
        );
        let s = SqliteStore::open(&path, Durability::Process).unwrap();
        let old = s.get_run("old").await.unwrap().unwrap();
        assert_eq!(
            (old.status, old.scopes),
            (RunStatus::Completed, Scopes::default())
        );
        let mut r = run("new");
        r.scopes.user = Some("u".into());
        r.view = Some(json!({"rules": [{"on": ["loop_started"], "name": {"const": "LoopStart"}}]}));
        s.create_run(&r).await.unwrap();
        let back = s.get_run("new").await.unwrap().unwrap();
        assert_eq!((back.scopes, back.view), (r.scopes, r.view));
        // Version 11's timers and trigger tables.
        let mut waiting = run("waits");
        waiting.status = RunStatus::Paused;
        waiting.wake_ms = Some(7);
        s.create_run(&waiting).await.unwrap();
        let due = weft_core::ports::TriggerStore::due_timers(&s, 10, 10)
            .await
            .unwrap();
        assert_eq!(due.len(), 1);
        assert!(
            weft_core::ports::TriggerStore::schedules(&s)
                .await
                .unwrap()
                .is_empty()
        );
    }

    #[tokio::test]
    async fn journal_survives_reopening_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.db");
        {
            let s = SqliteStore::open(&path, Durability::Process).unwrap();
            s.create_run(&run("r1")).await.unwrap();
            for i in 0..100 {
                let e = JournalEntry {
                    key: format!("k{i}"),
                    kind: EntryKind::Result,
                    value: json!(i).into(),
                };
                s.append("r1", e).await.unwrap();
            }
        }
        let s = SqliteStore::open(&path, Durability::Process).unwrap();
        let j = s.journal("r1").await.unwrap();
        assert_eq!(j.len(), 100);
        assert!(j.iter().enumerate().all(|(i, e)| e.value == json!(i)));
        assert_eq!(
            s.get_run("r1").await.unwrap().unwrap().input,
            json!({"a": 1})
        );
        s.forget("r1", &["k3".into()]).await.unwrap();
        assert_eq!(s.journal("r1").await.unwrap().len(), 99);
    }

    #[tokio::test]
    async fn forgetting_rewrites_only_the_entries_it_names_inside_a_chunk() {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open(dir.path().join("f.db"), Durability::Process).unwrap();
        s.create_run(&run("r")).await.unwrap();
        s.create_run(&run("other")).await.unwrap();
        // Queued entries of two runs, committed together: one chunk per run.
        let mut durable = Vec::new();
        for i in 0..6 {
            durable.push(s.append_queued("r", entry(format!("k{i}"))).await.unwrap());
            durable.push(
                s.append_queued("other", entry(format!("k{i}")))
                    .await
                    .unwrap(),
            );
        }
        s.append("r", entry("gone".into())).await.unwrap();
        for d in durable {
            d.await.unwrap();
        }
        assert_eq!(s.run_stats().await.unwrap().steps, 13);
        let chunks: i64 = Connection::open(dir.path().join("f.db"))
            .unwrap()
            .query_row(
                "SELECT count(*) FROM journal_chunks WHERE run_id = 'r'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(chunks < 7, "entries share chunks ({chunks} chunks)");
        s.forget("r", &["k2".into(), "gone".into(), "k9".into()])
            .await
            .unwrap();
        let keys = |j: Vec<JournalEntry>| j.into_iter().map(|e| e.key).collect::<Vec<_>>();
        assert_eq!(
            keys(s.journal("r").await.unwrap()),
            ["k0", "k1", "k3", "k4", "k5"]
        );
        assert_eq!(keys(s.journal("other").await.unwrap()).len(), 6);
        assert_eq!(s.run_stats().await.unwrap().steps, 11);
        // Appends after a forget still come after what is left.
        s.append("r", entry("after".into())).await.unwrap();
        assert_eq!(keys(s.journal("r").await.unwrap()).last().unwrap(), "after");
    }

    #[tokio::test]
    async fn a_file_with_one_row_per_journal_entry_is_moved_into_chunks_when_opened() {
        let dir = tempfile::tempdir().unwrap();
        // A schema-8 file: one journal row an entry, two runs interleaved.
        let path = older_file(
            &dir,
            "old.db",
            8,
            "CREATE TABLE journal (
                 seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL,
                 key TEXT NOT NULL, kind TEXT NOT NULL, value TEXT NOT NULL);
             INSERT INTO journal (run_id, key, kind, value) VALUES
                 ('r', 'a', 'result', '{\"output\": [1, 2]}'),
                 ('s', 'x', 'answer', '{\"decision\":\"yes\"}'),
                 ('r', 'b', 'failure', '{\"kind\":\"code\"}'),
                 ('r', 'c', 'result', '\"text\"');",
        );
        let s = SqliteStore::open(&path, Durability::Process).unwrap();
        let r = s.journal("r").await.unwrap();
        let shape: Vec<_> = r.iter().map(|e| (e.key.as_str(), e.kind)).collect();
        assert_eq!(
            shape,
            [
                ("a", EntryKind::Result),
                ("b", EntryKind::Failure),
                ("c", EntryKind::Result)
            ]
        );
        assert_eq!(r[0].value, json!({"output": [1, 2]}));
        assert_eq!(r[2].value, json!("text"));
        assert_eq!(
            s.journal("s").await.unwrap()[0].value,
            json!({"decision": "yes"})
        );
        assert_eq!(s.run_stats().await.unwrap().steps, 2);
        s.append("r", entry("d".into())).await.unwrap();
        assert_eq!(s.journal("r").await.unwrap().len(), 4);
    }

    #[test]
    fn a_damaged_file_is_refused_with_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.db");
        std::fs::write(&path, b"this is not a database, just some text padding it out ...............................................................................").unwrap();
        let e = SqliteStore::open(&path, Durability::Process).err().unwrap();
        assert!(e.to_string().contains("not a usable Weft database"), "{e}");
    }

    #[tokio::test]
    async fn a_truncated_database_is_refused_or_reports_errors_without_panicking() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        {
            let s = SqliteStore::open(&path, Durability::Process).unwrap();
            for i in 0..200 {
                s.create_run(&run(&format!("run{i:04}"))).await.unwrap();
            }
        }
        // Checkpoint the WAL into the main file, then cut the file in half.
        let c = Connection::open(&path).unwrap();
        c.pragma_update(None, "wal_checkpoint", "TRUNCATE").unwrap();
        drop(c);
        let len = std::fs::metadata(&path).unwrap().len();
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(len / 2).unwrap();
        drop(f);
        match SqliteStore::open(&path, Durability::Process) {
            Err(e) => assert!(e.to_string().contains("not a usable Weft database"), "{e}"),
            Ok(s) => {
                let r = s.list_runs(&RunQuery::newest(1000)).await;
                assert!(r.is_err() || r.unwrap().len() < 200);
            }
        }
    }

    #[test]
    fn a_foreign_database_is_refused_and_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.db");
        let c = Connection::open(&path).unwrap();
        c.execute_batch("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT);")
            .unwrap();
        drop(c);
        let e = SqliteStore::open(&path, Durability::Process).err().unwrap();
        assert!(matches!(e, StoreError::Unusable(_)), "{e:?}");
        assert!(e.to_string().contains("customers"), "{e}");
        let c = Connection::open(&path).unwrap();
        let tables: i64 = c
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(tables, 1, "Weft added tables to a foreign database");
        let mode: String = c
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "delete", "Weft switched a foreign database to WAL");
    }

    #[test]
    fn a_database_from_a_newer_weft_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.db");
        drop(SqliteStore::open(&path, Durability::Process).unwrap());
        let c = Connection::open(&path).unwrap();
        c.execute("UPDATE meta SET value = '99' WHERE key = 'schema'", [])
            .unwrap();
        drop(c);
        let e = SqliteStore::open(&path, Durability::Process).err().unwrap();
        assert!(matches!(e, StoreError::TooNew(_)), "{e:?}");
        assert!(e.to_string().contains("newer Weft"), "{e}");
    }

    #[tokio::test]
    async fn event_logs_are_read_from_any_point_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.db");
        let event = |run: &str, seq| event_of(run, seq, 1, EventKind::RunCancelled);
        {
            let s = SqliteStore::open(&path, Durability::Process).unwrap();
            assert_eq!(s.next_event_seq("r").await.unwrap(), 0);
            let first: Vec<_> = (0..5).map(|i| event("r", i)).collect();
            s.append_events(&first).await.unwrap();
            s.append_events(&[event("other", 0)]).await.unwrap();
            // A repeat of a stored seq is ignored, never a failure of the batch.
            s.append_events(&[event("r", 2), event("r", 5)])
                .await
                .unwrap();
        }
        let s = SqliteStore::open(&path, Durability::Process).unwrap();
        let seqs =
            |v: Vec<weft_core::event::Event>| v.into_iter().map(|e| e.seq).collect::<Vec<_>>();
        assert_eq!(
            seqs(s.events("r", None, 100).await.unwrap()),
            [0, 1, 2, 3, 4, 5]
        );
        assert_eq!(seqs(s.events("r", Some(2), 2).await.unwrap()), [3, 4]);
        assert_eq!(s.next_event_seq("r").await.unwrap(), 6);
        assert_eq!(s.events("r", None, 1).await.unwrap()[0], event("r", 0));
    }

    #[tokio::test]
    async fn a_commit_stores_a_run_s_events_as_one_chunk_without_its_run_id() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.db");
        let step = |seq| {
            let kind = EventKind::StepStarted {
                path: "root/a".into(),
                kind: "code".into(),
                input: Some(Shared::new(json!({"x": 1}))),
            };
            event_of("r", seq, 7, kind)
        };
        {
            let s = SqliteStore::open(&path, Durability::Process).unwrap();
            s.append_events(&[step(0), step(1), step(2)]).await.unwrap();
        }
        let conn = Connection::open(&path).unwrap();
        let (first, last, body): (i64, i64, Vec<u8>) = conn
            .query_row(
                "SELECT first_seq, last_seq, body FROM event_chunks WHERE run_id = 'r'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!((first, last), (0, 2));
        let body = lz4_flex::block::decompress_size_prepended(&body).unwrap();
        let body = String::from_utf8(body).unwrap();
        assert!(
            !body.contains("run_id") && body.starts_with("[{\"seq\":0,"),
            "{body}"
        );
        drop(conn);
        let s = SqliteStore::open(&path, Durability::Process).unwrap();
        assert_eq!(
            s.events("r", None, 10).await.unwrap(),
            [step(0), step(1), step(2)]
        );
    }

    /// The stored bodies of run `r`'s event chunks, decompressed.
    fn stored_bodies(path: &Path) -> Vec<String> {
        let conn = Connection::open(path).unwrap();
        let mut stmt = conn
            .prepare("SELECT body FROM event_chunks WHERE run_id = 'r' ORDER BY first_seq")
            .unwrap();
        stmt.query_map([], |r| r.get::<_, Vec<u8>>(0))
            .unwrap()
            .map(|b| {
                String::from_utf8(lz4_flex::block::decompress_size_prepended(&b.unwrap()).unwrap())
                    .unwrap()
            })
            .collect()
    }

    /// Run `r`'s transform `root/s{seq}` completed with output `v`.
    fn completed(seq: u64, v: &Shared) -> Event {
        let kind = EventKind::StepCompleted {
            path: format!("root/s{seq}").into(),
            kind: "transform".into(),
            elapsed_us: 1,
            replayed: false,
            exit: None,
            output: Some(v.clone()),
        };
        event_of("r", seq, 7, kind)
    }

    #[tokio::test]
    async fn a_commit_of_many_events_is_written_as_chunks_of_about_a_megabyte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        // Each a distinct value just small enough to stay inline: 3 MB of them.
        let all: Vec<Event> = (0..1000)
            .map(|seq| {
                completed(
                    seq,
                    &Shared::new(json!({"seq": seq, "pad": "x".repeat(3000)})),
                )
            })
            .collect();
        let s = SqliteStore::open(&path, Durability::Process).unwrap();
        s.append_events(&all).await.unwrap();
        let bodies = stored_bodies(&path);
        assert!(bodies.len() >= 3, "{} chunks", bodies.len());
        assert!(bodies.iter().all(|b| b.len() < 1_200_000));
        assert_eq!(stored_values(&path), 0);
        assert_eq!(s.events("r", None, 2000).await.unwrap(), all);
        assert_eq!(s.events("r", Some(14), 2000).await.unwrap(), all[15..]);
    }

    /// How many values run `r` has stored apart.
    fn stored_values(path: &Path) -> usize {
        Connection::open(path)
            .unwrap()
            .query_row(
                "SELECT count(*) FROM run_values WHERE run_id = 'r'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .unwrap() as usize
    }

    /// Run `r`'s transform `root/s{seq}` started with input `v`.
    fn started(seq: u64, v: &Shared) -> Event {
        let kind = EventKind::StepStarted {
            path: format!("root/s{seq}").into(),
            kind: "transform".into(),
            input: Some(v.clone()),
        };
        event_of("r", seq, 7, kind)
    }

    #[tokio::test]
    async fn a_large_value_passed_from_step_to_step_is_stored_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.db");
        let big = Shared::new(json!({"items": (0..10_000).collect::<Vec<_>>()}));
        let small = Shared::new(json!({"n": 1}));
        // Five steps pass `big` on, in three commits (references cross chunks); two
        // pass `small`, which stays inline.
        let all: Vec<Event> = (0..5)
            .flat_map(|i| [started(2 * i, &big), completed(2 * i + 1, &big)])
            .chain([started(10, &small), completed(11, &small)])
            .collect();
        {
            let s = SqliteStore::open(&path, Durability::Process).unwrap();
            for part in [&all[..3], &all[3..7], &all[7..]] {
                s.append_events(part).await.unwrap();
            }
            let bodies = stored_bodies(&path).concat();
            assert!(bodies.len() < 4096, "{} bytes of events", bodies.len());
            assert_eq!(bodies.matches("\"value_id\"").count(), 10);
            assert_eq!(stored_values(&path), 1);
            assert_eq!(s.events("r", None, 100).await.unwrap(), all);
        }
        // Read back by another process, from any point: the same events, and those
        // that referred to one value share it.
        let s = SqliteStore::open(&path, Durability::Process).unwrap();
        for after in [None, Some(0), Some(4), Some(8)] {
            let from = after.map_or(0, |a| a as usize + 1);
            assert_eq!(
                s.events("r", after, 100).await.unwrap(),
                all[from..],
                "{after:?}"
            );
        }
        let read = s.events("r", Some(4), 100).await.unwrap();
        let (a, b) = (carried_of(&read[0]), carried_of(&read[3]));
        assert!(Shared::ptr_eq(a, b));
        // That process has not seen `big` stored: it stores it again (once for both
        // events) rather than look for it.
        s.append_events(&[started(12, &big), completed(13, &big)])
            .await
            .unwrap();
        assert_eq!(stored_values(&path), 2);
        assert_eq!(s.events("r", Some(11), 10).await.unwrap().len(), 2);
        // A pause (the run's record says so) lets go of the run's values: after it,
        // `big` is stored again.
        let mut rec = run("r");
        s.create_run(&rec).await.unwrap();
        rec.status = RunStatus::Paused;
        s.update_run(&rec).await.unwrap();
        let paused = event_of("r", 14, 7, EventKind::RunPaused { waiting: json!([]) });
        s.append_events(&[paused, started(15, &big)]).await.unwrap();
        assert_eq!(stored_values(&path), 3);
        assert_eq!(s.events("r", Some(13), 10).await.unwrap().len(), 2);
        // A reference to a value the run does not have is damage.
        Connection::open(&path)
            .unwrap()
            .execute("DELETE FROM run_values", [])
            .unwrap();
        let e = s.events("r", Some(13), 10).await.unwrap_err();
        assert!(matches!(e, StoreError::Corrupt(_)), "{e:?}");
    }

    /// A state after a TEA fan-out over `list` as the engine builds it: `n` results,
    /// each holding a state that holds the same list (one `Arc`).
    fn fanned_out(list: &Shared, n: usize) -> Shared {
        let results: Vec<Shared> = (0..n)
            .map(|i| {
                let mut state = SharedMap::new();
                state.insert("items".into(), list.clone());
                state.insert("item".into(), Shared::new(json!(i)));
                let mut result = SharedMap::new();
                result.insert("state".into(), Shared::object(state));
                result.insert("index".into(), Shared::new(json!(i)));
                Shared::object(result)
            })
            .collect();
        let mut state = SharedMap::new();
        state.insert("items".into(), list.clone());
        state.insert("parallel_results".into(), Shared::array(results));
        Shared::object(state)
    }

    #[tokio::test]
    async fn a_run_record_refers_to_what_the_run_stored_and_stores_nothing_new() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        let list = Shared::new(json!((0..5_000).collect::<Vec<_>>()));
        let state = fanned_out(&list, 500);
        let s = SqliteStore::open(&path, Durability::Process).unwrap();
        let mut rec = run("r");
        s.create_run(&rec).await.unwrap();
        rec.status = RunStatus::Completed;
        rec.output = Some(Shared::new(json!({"total": 12})));
        let columns = |conn: &Connection| -> (i64, Option<String>, Option<String>) {
            conn.query_row(
                "SELECT length(state), state_refs, output_refs FROM runs WHERE id = 'r'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap()
        };
        let conn = Connection::open(&path).unwrap();
        // The run's events stored the list (a step's input): the state refers to it.
        s.append_events(&[started(0, &list)]).await.unwrap();
        rec.state = Some(state.clone());
        s.update_run(&rec).await.unwrap();
        let (state_len, state_refs, output_refs) = columns(&conn);
        let whole = serde_json::to_vec(&state).unwrap().len() as i64;
        assert!(
            state_len * 100 < whole,
            "{state_len} of {whole} bytes inline"
        );
        assert_eq!(state_refs.unwrap().matches("\"items\"").count(), 501);
        assert!(output_refs.is_none());
        assert_eq!(stored_values(&path), 1);
        // Read back whole, by id, by prefix and in a listing, in another process.
        drop(s);
        let s = SqliteStore::open(&path, Durability::Process).unwrap();
        assert_eq!(s.get_run("r").await.unwrap().unwrap(), rec);
        assert_eq!(
            s.list_runs(&RunQuery::newest(10)).await.unwrap(),
            [rec.clone()]
        );
        // A record rewritten with values read back (a resumed run's) stores nothing new:
        // what this process has not stored is written inline.
        let mut again = s.get_run("r").await.unwrap().unwrap();
        again.updated_ms += 1;
        s.update_run(&again).await.unwrap();
        assert_eq!(stored_values(&path), 1);
        assert!(columns(&conn).1.is_none());
        assert_eq!(s.get_run("r").await.unwrap().unwrap(), again);
        // A state the run's events stored whole is referred to whole.
        s.append_events(&[started(1, &state)]).await.unwrap();
        s.update_run(&rec).await.unwrap();
        let column: String = conn
            .query_row("SELECT state FROM runs WHERE id = 'r'", [], |r| r.get(0))
            .unwrap();
        assert_eq!(column, "null");
        assert_eq!(s.get_run("r").await.unwrap().unwrap(), rec);
    }

    #[tokio::test]
    async fn a_part_held_many_times_in_a_large_value_is_stored_once() {
        // A fan-out's results as the engine builds them: each holds a state that holds
        // the same list (one `Arc`), 500 times.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.db");
        let list = Shared::new(json!((0..5_000).collect::<Vec<_>>()));
        let state = fanned_out(&list, 500);
        let s = SqliteStore::open(&path, Durability::Process).unwrap();
        let events = [started(0, &state), completed(1, &state)];
        s.append_events(&events).await.unwrap();
        // The list once, the results referring to it (still 20 KB without it, so
        // stored apart too), and the state referring to both.
        assert_eq!(stored_values(&path), 3);
        let stored: i64 = Connection::open(&path)
            .unwrap()
            .query_row("SELECT sum(length(body)) FROM run_values", [], |r| r.get(0))
            .unwrap();
        let whole = serde_json::to_vec(&state).unwrap().len() as i64;
        assert!(stored * 20 < whole, "{stored} bytes stored of {whole}");
        // Read back in another process: equal, and the list is one shared value again.
        drop(s);
        let s = SqliteStore::open(&path, Durability::Process).unwrap();
        let read = s.events("r", None, 10).await.unwrap();
        assert_eq!(read, events);
        let node = carried_of(&read[1]).node();
        let list_at = |n: weft_core::value::Node<'_>| match n.get("items") {
            Some(weft_core::value::Node::Shared(v)) => v.clone(),
            _ => panic!("the list is not a shared part"),
        };
        let results = node.get("parallel_results").unwrap();
        let first = list_at(results.at(0).unwrap().get("state").unwrap());
        let last = list_at(results.at(499).unwrap().get("state").unwrap());
        assert!(Shared::ptr_eq(&first, &last) && Shared::ptr_eq(&first, &list_at(node)));
        // A part that refers to itself is damage, not a loop.
        let conn = Connection::open(&path).unwrap();
        conn.execute(
            "UPDATE run_values SET refs = '[[[\"0\"], \"' || lower(hex(id)) || '\"]]' WHERE refs IS NULL",
            [],
        )
        .unwrap();
        let e = s.events("r", None, 10).await.unwrap_err();
        assert!(matches!(e, StoreError::Corrupt(_)), "{e:?}");
    }

    #[tokio::test]
    async fn events_that_refer_to_an_earlier_event_s_value_as_schema_11_wrote_them_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        let s = SqliteStore::open(&path, Durability::Process).unwrap();
        let value = json!({"items": [1, 2, 3]});
        // Two chunks: the value inline in event 0, referred to in the same chunk and in
        // the next one.
        let chunks = [
            (0, 1, format!(
                r#"[{{"seq":0,"at_ms":7,"type":"step_started","path":"root/s0","kind":"transform","input":{value}}},{{"seq":1,"at_ms":7,"value_of":0,"type":"step_completed","path":"root/s0","kind":"transform","elapsed_us":1,"replayed":false}}]"#
            )),
            (2, 2, r#"[{"seq":2,"at_ms":7,"value_of":0,"type":"step_started","path":"root/s2","kind":"transform"}]"#.to_owned()),
        ];
        let conn = Connection::open(&path).unwrap();
        for (first, last, body) in &chunks {
            conn.execute(
                "INSERT INTO event_chunks VALUES ('r', ?1, ?2, ?3)",
                params![
                    first,
                    last,
                    lz4_flex::block::compress_prepend_size(body.as_bytes())
                ],
            )
            .unwrap();
        }
        let read = s.events("r", None, 10).await.unwrap();
        assert_eq!(read.len(), 3);
        assert!(read.iter().all(|e| *carried_of(e) == value));
        assert_eq!(
            *carried_of(&s.events("r", Some(1), 10).await.unwrap()[0]),
            value
        );
        // A reference to an event that holds no value is damage.
        let broken = concat!(
            r#"[{"seq":16,"at_ms":7,"type":"run_cancelled"},"#,
            r#"{"seq":17,"at_ms":7,"value_of":16,"type":"step_started","path":"x","kind":"y"}]"#
        );
        conn.execute(
            "INSERT INTO event_chunks VALUES ('r', 16, 17, ?1)",
            [lz4_flex::block::compress_prepend_size(broken.as_bytes())],
        )
        .unwrap();
        let e = s.events("r", Some(15), 10).await.unwrap_err();
        assert!(matches!(e, StoreError::Corrupt(_)), "{e:?}");
    }

    #[tokio::test]
    async fn a_step_result_s_large_output_is_stored_once_for_the_journal_and_the_events() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.db");
        let s = SqliteStore::open(&path, Durability::Process).unwrap();
        let big = Shared::new(json!({"items": (0..10_000).collect::<Vec<_>>()}));
        // A result as the engine journals it: the output shared with the step's events.
        let mut result = SharedMap::new();
        result.insert("output".into(), big.clone());
        result.insert("exit".into(), Shared::new(json!("done")));
        let result = Shared::object(result);
        let entry = |key: &str| JournalEntry {
            key: key.into(),
            kind: EntryKind::Result,
            value: result.clone(),
        };
        s.append_queued("r", entry("root/s1"))
            .await
            .unwrap()
            .await
            .unwrap();
        s.append_events(&[completed(1, &big), started(2, &big)])
            .await
            .unwrap();
        s.append("r", entry("root/s2")).await.unwrap();
        assert_eq!(stored_values(&path), 1);
        let conn = Connection::open(&path).unwrap();
        let journal: String = conn
            .query_row(
                "SELECT group_concat(entries) FROM journal_chunks",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(
            !journal.contains("items") && journal.matches("\"output_id\"").count() == 2,
            "{journal}"
        );
        let read = s.journal("r").await.unwrap();
        assert_eq!(read, [entry("root/s1"), entry("root/s2")]);
        assert_eq!(
            s.events("r", None, 10).await.unwrap(),
            [completed(1, &big), started(2, &big)]
        );
        // Forgetting an entry keeps the value, which the other entry and the events
        // still refer to.
        s.forget("r", &["root/s1".to_owned()]).await.unwrap();
        assert_eq!(s.journal("r").await.unwrap(), [entry("root/s2")]);
        assert_eq!(s.events("r", None, 10).await.unwrap().len(), 2);
        // A small output stays inline; so does any value that is not a result's output.
        let small = JournalEntry {
            key: "root/s3".into(),
            kind: EntryKind::Answer,
            value: big.clone(),
        };
        s.append("r", small.clone()).await.unwrap();
        assert_eq!(stored_values(&path), 1);
        assert_eq!(s.journal("r").await.unwrap()[1], small);
        // A missing value is damage, not an entry without its output.
        conn.execute("DELETE FROM run_values", []).unwrap();
        let e = s.journal("r").await.unwrap_err();
        assert!(matches!(e, StoreError::Corrupt(_)), "{e:?}");
    }

    fn carried_of(e: &Event) -> &Shared {
        match &e.kind {
            EventKind::StepStarted { input: Some(v), .. } => v,
            EventKind::StepCompleted {
                output: Some(v), ..
            } => v,
            other => panic!("no value in {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_damaged_event_chunk_is_reported_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.db");
        let s = SqliteStore::open(&path, Durability::Process).unwrap();
        s.append_events(&[event_of("r", 0, 7, EventKind::RunCancelled)])
            .await
            .unwrap();
        let conn = Connection::open(&path).unwrap();
        // A length of 4 GiB before a few bytes, then bytes that are not LZ4.
        for body in [
            &b"\xff\xff\xff\xffabc"[..],
            &b"\x10\x00\x00\x00\xf0\xf0"[..],
        ] {
            conn.execute("UPDATE event_chunks SET body = ?1", [body])
                .unwrap();
            let e = s.events("r", None, 10).await.unwrap_err();
            assert!(matches!(e, StoreError::Corrupt(_)), "{e:?}");
        }
    }

    #[tokio::test]
    async fn a_file_with_one_row_per_event_is_moved_into_chunks_when_opened() {
        let dir = tempfile::tempdir().unwrap();
        // A schema-7 file: one row an event, bodies with and without run and seq.
        let path = older_file(
            &dir,
            "old.db",
            7,
            "CREATE TABLE events (run_id TEXT NOT NULL, seq INTEGER NOT NULL,
                 body TEXT NOT NULL, PRIMARY KEY (run_id, seq)) WITHOUT ROWID;
             INSERT INTO events VALUES ('r', 0, '{\"at_ms\":7,\"type\":\"run_cancelled\"}');
             INSERT INTO events VALUES ('r', 1, '{\"run_id\":\"r\",\"seq\":1,\"at_ms\":8,\"type\":\"run_cancelled\"}');",
        );
        let s = SqliteStore::open(&path, Durability::Process).unwrap();
        let expected = |seq, at_ms| event_of("r", seq, at_ms, EventKind::RunCancelled);
        assert_eq!(
            s.events("r", None, 10).await.unwrap(),
            [expected(0, 7), expected(1, 8)]
        );
        assert_eq!(s.next_event_seq("r").await.unwrap(), 2);
        s.append_events(&[expected(1, 9), expected(2, 9)])
            .await
            .unwrap();
        assert_eq!(
            s.events("r", Some(0), 10).await.unwrap(),
            [expected(1, 8), expected(2, 9)],
            "a repeat of seq 1 is dropped"
        );
    }

    #[test]
    fn concurrent_first_use_creates_one_schema() {
        let dir = tempfile::tempdir().unwrap();
        for round in 0..50 {
            let path = dir.path().join(format!("race{round}.db"));
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
            let openers: Vec<_> = (0..8)
                .map(|_| {
                    let (path, barrier) = (path.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        open_connection(&path, Durability::Process)
                            .map(drop)
                            .map_err(|e| match e {
                                OpenError::Sqlite(e) => e.to_string(),
                                OpenError::Foreign(t) => format!("foreign {t:?}"),
                                OpenError::TooNew(v) => format!("too new {v}"),
                            })
                    })
                })
                .collect();
            for o in openers {
                o.join()
                    .unwrap()
                    .unwrap_or_else(|e| panic!("round {round}: {e}"));
            }
            let c = Connection::open(&path).unwrap();
            let rows: i64 = c
                .query_row("SELECT count(*) FROM meta", [], |r| r.get(0))
                .unwrap();
            assert_eq!(rows, 1);
        }
    }
}
