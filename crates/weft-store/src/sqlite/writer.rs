//! The one thread that owns the SQLite connection: every request travels to it over a
//! channel and is served in turn. Journal appends and events are committed in groups
//! (every write queued behind the first, in one transaction); any other request is a
//! closure run on the connection ([`Request::With`]).

use super::journal;
use super::{err, events, shared_values};
use rusqlite::Connection;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use weft_core::ports::StoreError;

/// Appends committed together at most.
pub(super) const MAX_BATCH: usize = 4096;
/// Requests waiting for the writer before senders wait too.
pub(super) const QUEUE: usize = 8192;

pub(super) type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

/// One journal append waiting for its commit.
pub(super) struct Append {
    pub(super) run_id: String,
    pub(super) entry: journal::SerializedEntry,
    pub(super) durable: Reply<()>,
    /// The caller waits for the commit (`append`), rather than queueing the entry.
    pub(super) awaited: bool,
}

/// Events waiting for their commit, serialized.
pub(super) struct EventBatch {
    pub(super) events: events::Serialized,
    pub(super) durable: Reply<()>,
}

/// What one group commit writes.
pub(super) enum Write {
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

pub(super) enum Request {
    /// A journal entry or events, committed with every write queued behind it.
    Write(Box<Write>),
    /// Any other work on the connection, in turn with the rest (see `SqliteStore::with`).
    With(Box<dyn FnOnce(&Connection) + Send>),
}

pub(super) fn writer(conn: Connection, rx: mpsc::Receiver<Request>) {
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
                Request::With(work) => work(&conn),
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
pub(super) fn by_run<'a, T>(items: impl Iterator<Item = (&'a str, T)>) -> Vec<(&'a str, Vec<T>)> {
    let mut runs: Vec<(&str, Vec<T>)> = Vec::new();
    for (run_id, item) in items {
        match runs.iter_mut().find(|(r, _)| *r == run_id) {
            Some((_, v)) => v.push(item),
            None => runs.push((run_id, vec![item])),
        }
    }
    runs
}
