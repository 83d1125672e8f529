//! The PostgreSQL store: the same `Store` contract as the SQLite file, on a database
//! that many Weft processes share.
//!
//! Reads and single-row writes go through a connection pool (`deadpool-postgres`, which
//! replaces a connection that broke, so a restarted server is reconnected to). Journal
//! entries and events go through one writer task per store that commits whatever has
//! queued up as one transaction ([`writer`]): appends become durable in the order they
//! were made, and concurrent branches and runs share commits, as on SQLite.
//!
//! Many processes share one database safely: a process that drives a run holds a lease
//! on it with a fencing number that every one of its writes of the run checks
//! ([`leases`]), and workers take runs that wait for one with `FOR UPDATE SKIP LOCKED`,
//! woken by `LISTEN`/`NOTIFY` ([`WorkQueue`]).
//!
//! Connections are made without TLS: point Weft at a server on the same host or a
//! private network, or through a TLS-terminating proxy.

mod audit;
mod catalog;
mod keys;
mod leases;
mod listen;
mod runs;
mod schema;
mod threads;
mod triggers;
mod writer;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use leases::Leases;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::NoTls;
use weft_core::event::{Event, EventKind};
use weft_core::ports::{
    Claim, Claimed, Cursor, Durable, FlowSource, FlowVersion, JournalEntry, RunQuery, RunRecord,
    RunStats, ScopedChange, Store, StoreError, WorkQueue,
};
use writer::{EventRow, Write};

/// Connections a store keeps open for reads and single writes (the writer task takes one
/// of them for each commit).
const POOL_SIZE: usize = 8;
/// How long a request waits for a connection before it fails, so that an unreachable
/// server is an error, not a hang.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Appends that may wait for the writer at once.
const QUEUE: usize = 8192;

/// How long a lease lasts unrenewed by default: a run whose process died is taken over
/// by a worker within this (and a poll) of its last renewal.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(3);

/// A store in a PostgreSQL database, in the schema `weft`.
pub struct PostgresStore {
    pool: Pool,
    writes: mpsc::Sender<Write>,
    shown: String,
    leases: Arc<Leases>,
    /// Wakes workers when another process makes a run ready; listening starts with the
    /// first wait.
    work: listen::WorkSignal,
}

/// A failure of PostgreSQL while doing `context`, with what the server said.
/// The error of a row column that does not read back as `what` (`a run's row`).
fn unreadable(what: &'static str) -> impl Fn(tokio_postgres::Error) -> StoreError + Copy {
    move |e| StoreError::Corrupt(format!("{what} does not read back: {e}"))
}

fn pg_err(context: &str, e: tokio_postgres::Error) -> StoreError {
    let message = match e.as_db_error() {
        Some(db) => match db.detail() {
            Some(detail) => format!("{} ({detail})", db.message()),
            None => db.message().to_owned(),
        },
        None => {
            let mut text = e.to_string();
            if let Some(source) = std::error::Error::source(&e) {
                text = format!("{text}: {source}");
            }
            text
        }
    };
    StoreError::backend(context, message)
}

/// A connection could not be had from the pool.
fn pool_err(shown: &str, e: deadpool_postgres::PoolError) -> StoreError {
    StoreError::backend(&format!("connecting to {shown}"), e)
}

fn stopped() -> StoreError {
    StoreError::Closed("the PostgreSQL writer has stopped".into())
}

/// `host:port/database` of a connection string, for messages: never its password.
fn describe(config: &tokio_postgres::Config) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".into());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("postgres://{host}:{port}/{db}")
}

impl PostgresStore {
    /// Connects to the database `url` (`postgres://user[:password]@host[:port]/db`),
    /// creating Weft's tables, or checking and upgrading them; leases last
    /// [`DEFAULT_LEASE`].
    pub async fn connect(url: &str) -> Result<PostgresStore, StoreError> {
        PostgresStore::connect_with_lease(url, DEFAULT_LEASE).await
    }

    /// [`PostgresStore::connect`], with leases that last `lease` unrenewed: shorter
    /// takes a dead process's runs over sooner, longer tolerates longer stalls (a
    /// stopped process, a slow database) before a live process loses its runs.
    pub async fn connect_with_lease(
        url: &str,
        lease: Duration,
    ) -> Result<PostgresStore, StoreError> {
        let mut config: tokio_postgres::Config = url.parse().map_err(|e| {
            StoreError::Unusable(format!(
                "the database address is not a PostgreSQL connection string ({e}); write it as postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE"
            ))
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        config.application_name("weft");
        let shown = describe(&config);
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .create_timeout(Some(CONNECT_TIMEOUT))
            .wait_timeout(Some(CONNECT_TIMEOUT * 3))
            .build()
            .map_err(|e| StoreError::Unusable(format!("{shown}: {e}")))?;
        let mut client = pool.get().await.map_err(|e| {
            StoreError::Unusable(format!(
                "cannot connect to {shown} ({e}); check that PostgreSQL runs there and accepts this user, or choose another database with --db or WEFT_DB"
            ))
        })?;
        schema::prepare(&mut client, &shown).await?;
        drop(client);
        let leases = Arc::new(Leases::new(lease));
        let (writes, queued) = mpsc::channel(QUEUE);
        tokio::spawn(writer::run(
            pool.clone(),
            shown.clone(),
            leases.clone(),
            queued,
        ));
        tokio::spawn(leases::renew(pool.clone(), Arc::downgrade(&leases)));
        Ok(PostgresStore {
            pool,
            writes,
            shown,
            leases,
            work: listen::WorkSignal::new(config),
        })
    }

    /// The database, as `postgres://host:port/database` (without credentials).
    pub fn describe(&self) -> &str {
        &self.shown
    }

    /// The fencing number of this process's lease on `run_id` for a write, `None`
    /// when it holds none; refused at once when it has lost the run.
    fn held_epoch(&self, run_id: &str) -> Result<Option<i64>, StoreError> {
        match self.leases.epoch_of(run_id) {
            Some(_) if self.leases.lost(run_id) => Err(runs::fenced(run_id)),
            epoch => Ok(epoch),
        }
    }

    async fn client(&self) -> Result<deadpool_postgres::Client, StoreError> {
        self.pool.get().await.map_err(|e| pool_err(&self.shown, e))
    }

    /// Queues a write for the writer task; the receiver of its outcome.
    async fn queue(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<(), StoreError>>) -> Write,
    ) -> Result<oneshot::Receiver<Result<(), StoreError>>, StoreError> {
        let (durable, outcome) = oneshot::channel();
        self.writes
            .send(make(durable))
            .await
            .map_err(|_| stopped())?;
        Ok(outcome)
    }
}

/// `events` as rows: each body is the event's kind (the run, `seq` and time are
/// columns), with the fencing number of this process's lease on its run.
fn event_rows(events: &[Event], leases: &Leases) -> Result<Vec<EventRow>, StoreError> {
    events
        .iter()
        .map(|e| {
            Ok(EventRow {
                run_id: e.run_id.to_string(),
                epoch: leases.epoch_of(&e.run_id),
                seq: i64::try_from(e.seq)
                    .map_err(|_| StoreError::backend("events", "seq out of range"))?,
                at_ms: i64::try_from(e.at_ms).unwrap_or(i64::MAX),
                body: serde_json::to_string(&e.kind)
                    .map_err(|x| StoreError::backend("events", x))?,
            })
        })
        .collect()
}

#[async_trait]
impl Store for PostgresStore {
    async fn put_flow(&self, hash: &str, ir_json: &str) -> Result<(), StoreError> {
        catalog::put_flow(&self.client().await?, hash, ir_json).await
    }
    async fn get_flow(&self, hash: &str) -> Result<Option<String>, StoreError> {
        catalog::get_flow(&self.client().await?, hash).await
    }
    async fn create_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        runs::write(&self.client().await?, &self.leases, run, true).await
    }
    async fn update_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        runs::write(&self.client().await?, &self.leases, run, false).await
    }
    async fn get_run(&self, id: &str) -> Result<Option<RunRecord>, StoreError> {
        runs::get(&self.client().await?, id).await
    }
    async fn list_runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>, StoreError> {
        runs::list(&self.client().await?, query).await
    }
    async fn put_source(&self, source: &FlowSource) -> Result<(), StoreError> {
        catalog::put_source(&self.client().await?, source).await
    }
    async fn get_source(&self, id: &str) -> Result<Option<FlowSource>, StoreError> {
        catalog::get_source(&self.client().await?, id).await
    }
    async fn list_sources(
        &self,
        limit: usize,
        after: Option<&Cursor>,
    ) -> Result<Vec<FlowSource>, StoreError> {
        catalog::list_sources(&self.client().await?, limit, after).await
    }
    async fn save_version(
        &self,
        name: &str,
        flow_id: &str,
        now_ms: i64,
    ) -> Result<FlowVersion, StoreError> {
        catalog::save_version(&mut self.client().await?, name, flow_id, now_ms).await
    }
    async fn flow_version(
        &self,
        name: &str,
        version: Option<u32>,
    ) -> Result<Option<FlowVersion>, StoreError> {
        catalog::flow_version(&self.client().await?, name, version).await
    }
    async fn named_flows(&self) -> Result<Vec<FlowVersion>, StoreError> {
        catalog::named_flows(&self.client().await?).await
    }
    async fn run_stats(&self) -> Result<RunStats, StoreError> {
        runs::stats(&self.client().await?).await
    }
    async fn journal(&self, run_id: &str) -> Result<Vec<JournalEntry>, StoreError> {
        writer::journal(&self.client().await?, run_id).await
    }
    async fn append(&self, run_id: &str, entry: JournalEntry) -> Result<(), StoreError> {
        let epoch = self.held_epoch(run_id)?;
        let run_id = run_id.to_owned();
        self.queue(|durable| Write::Entry {
            run_id,
            epoch,
            entry,
            durable,
        })
        .await?
        .await
        .map_err(|_| stopped())?
    }
    async fn append_queued(
        &self,
        run_id: &str,
        entry: JournalEntry,
    ) -> Result<Durable, StoreError> {
        let epoch = self.held_epoch(run_id)?;
        let run_id = run_id.to_owned();
        let outcome = self
            .queue(|durable| Write::Entry {
                run_id,
                epoch,
                entry,
                durable,
            })
            .await?;
        Ok(Box::pin(
            async move { outcome.await.map_err(|_| stopped())? },
        ))
    }
    async fn append_events(&self, events: &[Event]) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        let mut rows = event_rows(events, &self.leases)?;
        // The events of a run this process has let go are not its to write.
        rows.retain(|r| r.epoch.is_none() || !self.leases.lost(&r.run_id));
        if rows.is_empty() {
            return Ok(());
        }
        self.queue(|durable| Write::Events { rows, durable })
            .await?
            .await
            .map_err(|_| stopped())?
    }
    async fn events(
        &self,
        run_id: &str,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        let client = self.client().await?;
        let after = after.map_or(-1, |a| i64::try_from(a).unwrap_or(i64::MAX));
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = client
            .query(
                "SELECT seq, at_ms, body FROM weft.events
                 WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                &[&run_id, &after, &limit],
            )
            .await
            .map_err(|e| pg_err("events", e))?;
        let run: Arc<str> = Arc::from(run_id);
        rows.iter()
            .map(|r| {
                let (seq, at_ms, body): (i64, i64, &str) = (r.get(0), r.get(1), r.get(2));
                let kind: EventKind = serde_json::from_str(body).map_err(|e| {
                    StoreError::Corrupt(format!("event {seq} of run {run_id} does not read: {e}"))
                })?;
                Ok(Event {
                    run_id: run.clone(),
                    seq: seq as u64,
                    at_ms: at_ms as u64,
                    kind,
                })
            })
            .collect()
    }
    async fn next_event_seq(&self, run_id: &str) -> Result<u64, StoreError> {
        let last: Option<i64> = self
            .client()
            .await?
            .query_one(
                "SELECT max(seq) FROM weft.events WHERE run_id = $1",
                &[&run_id],
            )
            .await
            .map_err(|e| pg_err("events", e))?
            .get(0);
        Ok(last.map_or(0, |s| s as u64 + 1))
    }
    async fn forget(&self, run_id: &str, keys: &[String]) -> Result<(), StoreError> {
        let epoch = self.held_epoch(run_id)?;
        let (run_id, keys) = (run_id.to_owned(), keys.to_vec());
        self.queue(|durable| Write::Forget {
            run_id,
            epoch,
            keys,
            durable,
        })
        .await?
        .await
        .map_err(|_| stopped())?
    }
    async fn claim_run(&self, claim: Claim) -> Result<Claimed, StoreError> {
        runs::claim(&mut self.client().await?, &self.leases, claim).await
    }
    async fn scoped_state(&self, key: &str) -> Result<Option<serde_json::Value>, StoreError> {
        catalog::scoped_state(&self.client().await?, key).await
    }
    async fn change_scoped_state(
        &self,
        key: &str,
        changes: &[ScopedChange],
    ) -> Result<serde_json::Value, StoreError> {
        catalog::change_scoped_state(&mut self.client().await?, key, changes).await
    }
    fn lease_lost(&self, run_id: &str) -> bool {
        self.leases.lost(run_id)
    }
    fn let_go(&self, run_id: &str) {
        self.leases.mark_lost(run_id);
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

#[async_trait]
impl WorkQueue for PostgresStore {
    async fn claim_ready(&self, owner: &str, limit: usize) -> Result<Vec<RunRecord>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        runs::claim_ready(&self.client().await?, &self.leases, owner, limit).await
    }

    async fn wait_for_work(&self, timeout: Duration) {
        self.work.wait(timeout).await;
    }
}
