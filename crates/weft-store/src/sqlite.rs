//! The SQLite store: one database file in WAL mode, owned by one writer thread.
//!
//! Every request travels to that thread over a channel. The thread drains every journal
//! append queued behind the first and commits them in one transaction (group commit),
//! in order, then answers each: an append returns only once its entry is durable, and
//! appends made at the same moment (parallel branches, other runs) share one commit.
//! Queued entries (of sandboxed code steps, whose callers do not wait) that keep coming
//! are committed once a millisecond rather than one by one.
//!
//! One module a concern, as the PostgreSQL store: the [`writer`] thread, the
//! [`schema`] and its numbered migrations, [`runs`], the [`journal`], [`events`],
//! stored values ([`shared_values`], [`run_values`]), flow [`sources`], [`scoped`]
//! state, [`triggers`] and [`threads`].

mod audit;
mod events;
mod journal;
mod keys;
mod run_values;
mod runs;
mod schema;
mod scoped;
mod shared_values;
mod sources;
mod threads;
mod triggers;
mod writer;

use async_trait::async_trait;
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use tokio::sync::{mpsc, oneshot};
use weft_core::event::Event;
use weft_core::ports::{
    Claim, Claimed, Cursor, Durable, FlowSource, FlowVersion, JournalEntry, RunQuery, RunRecord,
    RunStats, RunStatus, ScopedChange, Store, StoreError,
};
use writer::{Append, EventBatch, Reply, Request, Write};

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
        let conn = schema::open_connection(&path, durability).map_err(|e| match e {
            schema::OpenError::Sqlite(e) => StoreError::Unusable(format!(
                "{shown} is not a usable Weft database ({e}); move it aside or choose another with --db or WEFT_DB"
            )),
            schema::OpenError::Foreign(tables) => StoreError::Unusable(format!(
                "{shown} is not a Weft database (it holds the tables {}); Weft leaves it alone: choose another with --db or WEFT_DB",
                tables.join(", ")
            )),
            schema::OpenError::TooNew(v) => StoreError::TooNew(format!(
                "{shown} was written by a newer Weft (schema {v}; this one reads up to {}): upgrade Weft to use it, or choose another with --db or WEFT_DB",
                schema::SCHEMA_VERSION
            )),
        })?;
        // From here on no flow of this process may read, write or remove the database
        // or its side files, whatever its files directory holds.
        weft_files::protect_database(&path);
        let (tx, rx) = mpsc::channel(writer::QUEUE);
        std::thread::Builder::new()
            .name("weft-sqlite".into())
            .spawn(move || writer::writer(conn, rx))
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

#[async_trait]
impl Store for SqliteStore {
    async fn put_flow(&self, hash: &str, ir_json: &str) -> Result<(), StoreError> {
        let (hash, ir) = (hash.to_owned(), ir_json.to_owned());
        self.with(move |c| sources::put_flow(c, &hash, &ir)).await
    }
    async fn get_flow(&self, hash: &str) -> Result<Option<String>, StoreError> {
        let hash = hash.to_owned();
        self.with(move |c| sources::get_flow(c, &hash)).await
    }
    async fn create_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        let values = run_values::RunValues::of(run, &self.shared_values)?;
        let run = run.clone();
        self.with(move |c| runs::write_run_with_values(c, &run, &values, true))
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
        let run = run.clone();
        self.with(move |c| runs::write_run_with_values(c, &run, &values, false))
            .await
    }
    async fn get_run(&self, id: &str) -> Result<Option<RunRecord>, StoreError> {
        let id = id.to_owned();
        self.with(move |c| runs::get_run(c, &id)).await
    }
    async fn list_runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>, StoreError> {
        let query = query.clone();
        self.with(move |c| runs::list_runs(c, &query)).await
    }
    async fn put_source(&self, source: &FlowSource) -> Result<(), StoreError> {
        let source = source.clone();
        self.with(move |c| sources::put(c, &source)).await
    }
    async fn get_source(&self, id: &str) -> Result<Option<FlowSource>, StoreError> {
        let id = id.to_owned();
        self.with(move |c| sources::get(c, &id)).await
    }
    async fn list_sources(
        &self,
        limit: usize,
        after: Option<&Cursor>,
    ) -> Result<Vec<FlowSource>, StoreError> {
        let after = after.cloned();
        self.with(move |c| sources::list(c, limit, after.as_ref()))
            .await
    }
    async fn save_version(
        &self,
        name: &str,
        flow_id: &str,
        now_ms: i64,
    ) -> Result<FlowVersion, StoreError> {
        let (name, flow_id) = (name.to_owned(), flow_id.to_owned());
        self.with(move |c| sources::save_version(c, &name, &flow_id, now_ms))
            .await
    }
    async fn flow_version(
        &self,
        name: &str,
        version: Option<u32>,
    ) -> Result<Option<FlowVersion>, StoreError> {
        let name = name.to_owned();
        self.with(move |c| sources::version(c, &name, version))
            .await
    }
    async fn named_flows(&self) -> Result<Vec<FlowVersion>, StoreError> {
        self.with(sources::named).await
    }
    async fn journal(&self, run_id: &str) -> Result<Vec<JournalEntry>, StoreError> {
        let run_id = run_id.to_owned();
        self.with(move |c| journal::read(c, &run_id)).await
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
        self.with(runs::run_stats).await
    }
    async fn events(
        &self,
        run_id: &str,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        let run_id = run_id.to_owned();
        self.with(move |c| events::read(c, &run_id, after, limit))
            .await
    }
    async fn next_event_seq(&self, run_id: &str) -> Result<u64, StoreError> {
        let run_id = run_id.to_owned();
        self.with(move |c| events::next_seq(c, &run_id)).await
    }
    async fn forget(&self, run_id: &str, keys: &[String]) -> Result<(), StoreError> {
        let (run_id, keys) = (run_id.to_owned(), keys.to_vec());
        // The chunks it rewrites change together or not at all.
        self.with(move |c| {
            let tx = c.unchecked_transaction().map_err(|e| err("journal", e))?;
            journal::forget(&tx, &run_id, &keys)?;
            tx.commit().map_err(|e| err("journal", e))
        })
        .await
    }
    async fn claim_run(&self, claim: Claim) -> Result<Claimed, StoreError> {
        self.with(move |c| runs::claim_run(c, claim)).await
    }
    async fn scoped_state(&self, key: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let key = key.to_owned();
        self.with(move |c| scoped::scoped(c, &key)).await
    }
    async fn change_scoped_state(
        &self,
        key: &str,
        changes: &[ScopedChange],
    ) -> Result<serde_json::Value, StoreError> {
        let (key, changes) = (key.to_owned(), changes.to_vec());
        self.with(move |c| scoped::change(c, &key, &changes)).await
    }
    fn triggers(&self) -> Option<&dyn weft_core::ports::TriggerStore> {
        Some(self)
    }
    fn threads(&self) -> Option<&dyn weft_core::ports::ThreadStore> {
        Some(self)
    }
    fn keys(&self) -> Option<&dyn weft_core::ports::KeyStore> {
        Some(self)
    }
    fn audit(&self) -> Option<&dyn weft_core::ports::AuditStore> {
        Some(self)
    }
}

#[cfg(test)]
mod tests;
