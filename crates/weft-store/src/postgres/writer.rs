//! Journal entries and events: written by one task per store, which commits everything
//! queued at once as one transaction (group commit), in the order it was queued.
//!
//! A journal entry is a row of `weft.journal`, ordered by an identity column: a step's
//! entries read back in the order they were appended. An event is a row of
//! `weft.events` keyed by `(run_id, seq)`; a second event at a `seq` is ignored, so the
//! log is append-only.

use super::{pg_err, pool_err};
use deadpool_postgres::{Client, GenericClient, Pool};
use tokio::sync::{mpsc, oneshot};
use weft_core::ports::{EntryKind, JournalEntry, StoreError};

/// The most writes one transaction takes.
const MAX_BATCH: usize = 4096;

/// A write waiting for the writer, with where to say when it is durable.
pub(super) enum Write {
    /// A journal entry.
    Entry {
        run_id: String,
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
        keys: Vec<String>,
        durable: oneshot::Sender<Result<(), StoreError>>,
    },
}

impl Write {
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
    pub(super) seq: i64,
    pub(super) at_ms: i64,
    pub(super) body: String,
}

/// Commits queued writes until the store is dropped.
pub(super) async fn run(pool: Pool, shown: String, mut queued: mpsc::Receiver<Write>) {
    let mut batch = Vec::new();
    while queued.recv_many(&mut batch, MAX_BATCH).await > 0 {
        match commit(&pool, &shown, &batch).await {
            Ok(()) => batch.drain(..).for_each(|w| w.reply(Ok(()))),
            // One write the database refuses (a value it cannot hold) must not fail the
            // others that shared its commit: write each alone, and report each outcome.
            Err(StoreError::Backend { .. }) if batch.len() > 1 => {
                for w in batch.drain(..) {
                    let outcome = commit(&pool, &shown, std::slice::from_ref(&w)).await;
                    w.reply(outcome);
                }
            }
            Err(e) => batch.drain(..).for_each(|w| w.reply(Err(e.clone()))),
        }
    }
}

/// Writes `batch` in one transaction, in order.
async fn commit(pool: &Pool, shown: &str, batch: &[Write]) -> Result<(), StoreError> {
    let mut client = pool.get().await.map_err(|e| pool_err(shown, e))?;
    let tx = client
        .transaction()
        .await
        .map_err(|e| pg_err("journal", e))?;
    let mut entries = Columns::default();
    let mut events = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for w in batch {
        match w {
            Write::Entry { run_id, entry, .. } => entries.push(run_id, entry),
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
                for r in rows {
                    events.0.push(r.run_id.as_str());
                    events.1.push(r.seq);
                    events.2.push(r.at_ms);
                    events.3.push(r.body.as_str());
                }
            }
        }
    }
    entries.insert(&tx).await?;
    if !events.0.is_empty() {
        let statement = tx
            .prepare_cached(
                "INSERT INTO weft.events (run_id, seq, at_ms, body)
                 SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[])
                 ON CONFLICT DO NOTHING",
            )
            .await
            .map_err(|e| pg_err("events", e))?;
        tx.execute(&statement, &[&events.0, &events.1, &events.2, &events.3])
            .await
            .map_err(|e| pg_err("events", e))?;
    }
    tx.commit().await.map_err(|e| pg_err("journal commit", e))
}

/// Journal entries as columns, for one multi-row insert.
#[derive(Default)]
struct Columns<'a> {
    runs: Vec<&'a str>,
    keys: Vec<&'a str>,
    kinds: Vec<&'a str>,
    values: Vec<String>,
}

impl<'a> Columns<'a> {
    fn push(&mut self, run_id: &'a str, entry: &'a JournalEntry) {
        self.runs.push(run_id);
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
                "INSERT INTO weft.journal (run_id, key, kind, value)
                 SELECT r, k, c, v FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])
                     WITH ORDINALITY AS t (r, k, c, v, n)
                 ORDER BY n",
            )
            .await
            .map_err(|e| pg_err("journal", e))?;
        client
            .execute(
                &statement,
                &[&self.runs, &self.keys, &self.kinds, &self.values],
            )
            .await
            .map(|_| ())
            .map_err(|e| pg_err("journal", e))
    }
}

/// Inserts one entry (inside a caller's transaction: a claim's answer).
pub(super) async fn insert_entry(
    client: &impl GenericClient,
    run_id: &str,
    entry: &JournalEntry,
) -> Result<(), StoreError> {
    let mut columns = Columns::default();
    columns.push(run_id, entry);
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
