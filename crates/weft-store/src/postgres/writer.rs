//! Journal entries and events: written by one task per store, which commits everything
//! queued at once as one transaction (group commit), in the order it was queued.
//!
//! A journal entry is a row of `weft.journal`, ordered by an identity column: a step's
//! entries read back in the order they were appended. An event is a row of
//! `weft.events` keyed by `(run_id, seq)`; a second event at a `seq` is ignored, so the
//! log is append-only.
//!
//! Writes of a run this process holds the lease of carry its fencing number. The commit
//! locks those runs' rows (`FOR SHARE`, so a claim by another process waits for it) and
//! leaves out every write of a run whose number has changed: a process that lost a run
//! commits nothing more of it.
//!
//! A batch of appends is one statement (one round trip, committed on its own: the lock,
//! the check and both inserts in one snapshot); a batch with a forget, whose place
//! among the entries matters, is a transaction.

use super::leases::Leases;
use super::runs::{fenced, let_go};
use super::{pg_err, pool_err};
use deadpool_postgres::{Client, GenericClient, Pool, Transaction};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use weft_core::ports::{EntryKind, JournalEntry, StoreError};

/// The most writes one transaction takes.
const MAX_BATCH: usize = 4096;

/// A write waiting for the writer, with where to say when it is durable.
pub(super) enum Write {
    /// A journal entry.
    Entry {
        run_id: String,
        epoch: Option<i64>,
        entry: JournalEntry,
        durable: oneshot::Sender<Result<(), StoreError>>,
    },
    /// Events of one call.
    Events {
        rows: Vec<EventRow>,
        durable: oneshot::Sender<Result<(), StoreError>>,
    },
    /// Removes the run's entries under these keys, after the entries queued before it.
    Forget {
        run_id: String,
        epoch: Option<i64>,
        keys: Vec<String>,
        durable: oneshot::Sender<Result<(), StoreError>>,
    },
}

impl Write {
    /// The run whose lease this write is fenced by, if any (events are fenced row by
    /// row instead).
    fn fenced_run(&self) -> Option<&str> {
        match self {
            Write::Entry { run_id, .. } | Write::Forget { run_id, .. } => Some(run_id),
            Write::Events { .. } => None,
        }
    }

    /// The runs this process holds whose writes are in this one.
    fn held_runs(&self) -> Vec<&str> {
        match self {
            Write::Entry {
                run_id,
                epoch: Some(_),
                ..
            }
            | Write::Forget {
                run_id,
                epoch: Some(_),
                ..
            } => vec![run_id],
            Write::Events { rows, .. } => rows
                .iter()
                .filter(|r| r.epoch.is_some())
                .map(|r| r.run_id.as_str())
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Answers a write that failed with `e`. A held run's write of unknown outcome lets
    /// the run go (see [`let_go`]); its events are the log of a run that goes on
    /// elsewhere from what was committed.
    fn failed(self, leases: &Leases, e: &StoreError) {
        let held: Vec<String> = self.held_runs().into_iter().map(str::to_owned).collect();
        let outcome = match (&self, held.first()) {
            (Write::Events { .. }, _) => {
                held.iter().for_each(|id| leases.mark_lost(id));
                Err(e.clone())
            }
            (_, Some(id)) => Err(let_go(leases, id, e)),
            (_, None) => Err(e.clone()),
        };
        self.reply(outcome);
    }

    /// Answers a write whose commit went through, leaving out the runs in `lost`: a
    /// journal write of a lost run is refused as fenced. An event of a lost run is left
    /// out silently: the events of the runs it was written with are stored, and the
    /// lost run's journal writes say it was lost.
    fn committed(self, lost: &HashSet<String>, leases: &Leases) {
        let outcome = match self.fenced_run().filter(|r| lost.contains(*r)) {
            Some(run_id) => {
                leases.mark_lost(run_id);
                Err(fenced(run_id))
            }
            None => Ok(()),
        };
        self.reply(outcome);
    }

    fn reply(self, outcome: Result<(), StoreError>) {
        let durable = match self {
            Write::Entry { durable, .. }
            | Write::Events { durable, .. }
            | Write::Forget { durable, .. } => durable,
        };
        // The caller may have stopped waiting (a cancelled run): nothing to tell.
        let _ = durable.send(outcome);
    }
}

/// One event as stored.
pub(super) struct EventRow {
    pub(super) run_id: String,
    /// The fencing number of the writer's lease on the run, if it holds one.
    pub(super) epoch: Option<i64>,
    pub(super) seq: i64,
    pub(super) at_ms: i64,
    pub(super) body: String,
}

/// Commits queued writes until the store is dropped.
pub(super) async fn run(
    pool: Pool,
    shown: String,
    leases: Arc<Leases>,
    mut queued: mpsc::Receiver<Write>,
) {
    let mut batch = Vec::new();
    while queued.recv_many(&mut batch, MAX_BATCH).await > 0 {
        match commit(&pool, &shown, &batch).await {
            Ok(lost) => batch.drain(..).for_each(|w| w.committed(&lost, &leases)),
            // One write the database refuses (a value it cannot hold) must not fail the
            // others that shared its commit: write each alone, and report each outcome.
            Err(StoreError::Backend { .. }) if batch.len() > 1 => {
                for w in batch.drain(..) {
                    match commit(&pool, &shown, std::slice::from_ref(&w)).await {
                        Ok(lost) => w.committed(&lost, &leases),
                        Err(e) => w.failed(&leases, &e),
                    }
                }
            }
            Err(e) => batch.drain(..).for_each(|w| w.failed(&leases, &e)),
        }
    }
}

/// The fencing number each run of `batch`'s fenced writes is written under.
fn held_epochs(batch: &[Write]) -> BTreeMap<&str, i64> {
    let mut held: BTreeMap<&str, i64> = BTreeMap::new();
    for w in batch {
        match w {
            Write::Entry {
                run_id,
                epoch: Some(e),
                ..
            }
            | Write::Forget {
                run_id,
                epoch: Some(e),
                ..
            } => {
                held.insert(run_id, *e);
            }
            Write::Events { rows, .. } => {
                for r in rows {
                    if let Some(e) = r.epoch {
                        held.insert(&r.run_id, e);
                    }
                }
            }
            _ => {}
        }
    }
    held
}

/// The runs among the fenced writes of `batch` that another process has claimed since
/// this one did, with their rows locked until the transaction ends.
async fn lost_runs(tx: &Transaction<'_>, batch: &[Write]) -> Result<HashSet<String>, StoreError> {
    let held = held_epochs(batch);
    if held.is_empty() {
        return Ok(HashSet::new());
    }
    let ids: Vec<&str> = held.keys().copied().collect();
    // In id order, so two processes locking the same runs never wait on each other.
    let rows = tx
        .query(
            "SELECT id, lease_epoch FROM weft.runs WHERE id = ANY($1) ORDER BY id FOR SHARE",
            &[&ids],
        )
        .await
        .map_err(|e| pg_err("checking leases", e))?;
    let current: BTreeMap<String, i64> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    Ok(held
        .into_iter()
        .filter(|(id, epoch)| current.get(*id) != Some(epoch))
        .map(|(id, _)| id.to_owned())
        .collect())
}

/// Writes `batch` in one transaction, in order, leaving out the writes of runs this
/// process lost; returns those runs.
async fn commit(pool: &Pool, shown: &str, batch: &[Write]) -> Result<HashSet<String>, StoreError> {
    if let Some(columns) = append_columns(batch) {
        return commit_appends(pool, shown, batch, columns).await;
    }
    let mut client = pool.get().await.map_err(|e| pool_err(shown, e))?;
    let tx = client
        .transaction()
        .await
        .map_err(|e| pg_err("journal", e))?;
    let lost = lost_runs(&tx, batch).await?;
    let mut entries = Columns::default();
    let mut events = EventColumns::default();
    for w in batch {
        if w.fenced_run().is_some_and(|r| lost.contains(r)) {
            continue;
        }
        match w {
            Write::Entry {
                run_id,
                epoch,
                entry,
                ..
            } => entries.push(run_id, *epoch, entry),
            Write::Forget { run_id, keys, .. } => {
                entries.insert(&tx).await?;
                entries = Columns::default();
                tx.execute(
                    "DELETE FROM weft.journal WHERE run_id = $1 AND key = ANY($2)",
                    &[run_id, keys],
                )
                .await
                .map_err(|e| pg_err("journal", e))?;
            }
            Write::Events { rows, .. } => {
                rows.iter()
                    .filter(|r| !lost.contains(&r.run_id))
                    .for_each(|r| events.push(r));
            }
        }
    }
    entries.insert(&tx).await?;
    if !events.runs.is_empty() {
        let statement = tx
            .prepare_cached(
                "INSERT INTO weft.events (run_id, seq, at_ms, body)
                 SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[])
                 ON CONFLICT DO NOTHING",
            )
            .await
            .map_err(|e| pg_err("events", e))?;
        tx.execute(
            &statement,
            &[&events.runs, &events.seqs, &events.times, &events.bodies],
        )
        .await
        .map_err(|e| pg_err("events", e))?;
    }
    tx.commit().await.map_err(|e| pg_err("journal commit", e))?;
    Ok(lost)
}

/// Checks the leases, inserts the entries and the events of a batch of appends (no
/// forgets) in one statement, so one round trip to the database instead of five:
/// `held` locks the fenced runs' rows (`FOR SHARE`, in id order, as [`lost_runs`] does),
/// and the rows of runs whose number changed are left out of both inserts.
const APPEND: &str = "
    WITH held AS (
        SELECT id, lease_epoch FROM weft.runs WHERE id = ANY($1::text[]) ORDER BY id FOR SHARE),
    lost AS (
        SELECT f.id FROM unnest($1::text[], $2::bigint[]) AS f (id, epoch)
        WHERE NOT EXISTS (SELECT 1 FROM held WHERE held.id = f.id AND held.lease_epoch = f.epoch)),
    entries AS (
        INSERT INTO weft.journal (run_id, key, kind, value, epoch)
        SELECT r, k, c, v, e
        FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[])
            WITH ORDINALITY AS t (r, k, c, v, e, n)
        WHERE NOT EXISTS (SELECT 1 FROM lost WHERE lost.id = t.r)
        ORDER BY n
        RETURNING 1),
    events AS (
        INSERT INTO weft.events (run_id, seq, at_ms, body)
        SELECT r, s, a, b FROM unnest($8::text[], $9::bigint[], $10::bigint[], $11::text[])
            AS t (r, s, a, b)
        WHERE NOT EXISTS (SELECT 1 FROM lost WHERE lost.id = t.r)
        ON CONFLICT DO NOTHING
        RETURNING 1)
    SELECT id FROM lost";

/// The entries and events of `batch` as columns, for [`APPEND`]; `None` when it holds a
/// forget, which must come between the entries before and after it.
fn append_columns(batch: &[Write]) -> Option<(Columns<'_>, EventColumns<'_>)> {
    let mut entries = Columns::default();
    let mut events = EventColumns::default();
    for w in batch {
        match w {
            Write::Entry {
                run_id,
                epoch,
                entry,
                ..
            } => entries.push(run_id, *epoch, entry),
            Write::Events { rows, .. } => rows.iter().for_each(|r| events.push(r)),
            Write::Forget { .. } => return None,
        }
    }
    Some((entries, events))
}

/// [`commit`] of a batch without forgets, as one statement ([`APPEND`]).
async fn commit_appends(
    pool: &Pool,
    shown: &str,
    batch: &[Write],
    (entries, events): (Columns<'_>, EventColumns<'_>),
) -> Result<HashSet<String>, StoreError> {
    let (ids, epochs): (Vec<&str>, Vec<i64>) = held_epochs(batch).into_iter().unzip();
    let client = pool.get().await.map_err(|e| pool_err(shown, e))?;
    let statement = client
        .prepare_cached(APPEND)
        .await
        .map_err(|e| pg_err("journal", e))?;
    let lost = client
        .query(
            &statement,
            &[
                &ids,
                &epochs,
                &entries.runs,
                &entries.keys,
                &entries.kinds,
                &entries.values,
                &entries.epochs,
                &events.runs,
                &events.seqs,
                &events.times,
                &events.bodies,
            ],
        )
        .await
        .map_err(|e| pg_err("journal", e))?;
    Ok(lost.iter().map(|r| r.get(0)).collect())
}

/// Event rows as columns, for one multi-row insert.
#[derive(Default)]
struct EventColumns<'a> {
    runs: Vec<&'a str>,
    seqs: Vec<i64>,
    times: Vec<i64>,
    bodies: Vec<&'a str>,
}

impl<'a> EventColumns<'a> {
    fn push(&mut self, row: &'a EventRow) {
        self.runs.push(&row.run_id);
        self.seqs.push(row.seq);
        self.times.push(row.at_ms);
        self.bodies.push(&row.body);
    }
}

/// Journal entries as columns, for one multi-row insert.
#[derive(Default)]
struct Columns<'a> {
    runs: Vec<&'a str>,
    epochs: Vec<Option<i64>>,
    keys: Vec<&'a str>,
    kinds: Vec<&'a str>,
    values: Vec<String>,
}

impl<'a> Columns<'a> {
    fn push(&mut self, run_id: &'a str, epoch: Option<i64>, entry: &'a JournalEntry) {
        self.runs.push(run_id);
        self.epochs.push(epoch);
        self.keys.push(&entry.key);
        self.kinds.push(entry.kind.as_str());
        self.values.push(entry.value.to_string());
    }

    /// Inserts the entries in the order they were pushed (the identity column follows
    /// the order of the rows inserted, which `ORDER BY n` fixes).
    async fn insert(&self, client: &impl GenericClient) -> Result<(), StoreError> {
        if self.runs.is_empty() {
            return Ok(());
        }
        let statement = client
            .prepare_cached(
                "INSERT INTO weft.journal (run_id, key, kind, value, epoch)
                 SELECT r, k, c, v, e
                 FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[])
                     WITH ORDINALITY AS t (r, k, c, v, e, n)
                 ORDER BY n",
            )
            .await
            .map_err(|e| pg_err("journal", e))?;
        client
            .execute(
                &statement,
                &[
                    &self.runs,
                    &self.keys,
                    &self.kinds,
                    &self.values,
                    &self.epochs,
                ],
            )
            .await
            .map(|_| ())
            .map_err(|e| pg_err("journal", e))
    }
}

/// Inserts one entry under lease `epoch` (inside a caller's transaction: a claim's
/// answer).
pub(super) async fn insert_entry(
    client: &impl GenericClient,
    run_id: &str,
    epoch: i64,
    entry: &JournalEntry,
) -> Result<(), StoreError> {
    let mut columns = Columns::default();
    columns.push(run_id, Some(epoch), entry);
    columns.insert(client).await
}

/// A run's journal, in append order.
pub(super) async fn journal(
    client: &Client,
    run_id: &str,
) -> Result<Vec<JournalEntry>, StoreError> {
    let statement = client
        .prepare_cached("SELECT key, kind, value FROM weft.journal WHERE run_id = $1 ORDER BY id")
        .await
        .map_err(|e| pg_err("journal", e))?;
    client
        .query(&statement, &[&run_id])
        .await
        .map_err(|e| pg_err("journal", e))?
        .iter()
        .map(|r| {
            let (key, kind, value): (String, &str, &str) = (r.get(0), r.get(1), r.get(2));
            let kind = EntryKind::parse(kind).ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "journal entry `{key}` of run {run_id} has the unknown kind `{kind}`"
                ))
            })?;
            let value = serde_json::from_str(value).map_err(|e| {
                StoreError::Corrupt(format!(
                    "journal entry `{key}` of run {run_id} does not read as JSON: {e}"
                ))
            })?;
            Ok(JournalEntry { key, kind, value })
        })
        .collect()
}
