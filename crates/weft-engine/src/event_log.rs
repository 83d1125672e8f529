//! Every run's event log: each event but token deltas is written to the store (in the
//! journal's group commits) and, once durable, published to live followers. A follower
//! reads the log from any point and then follows it, so a reconnect, a restart or a
//! month's delay never loses an event; deltas are live only.

use crate::error::EngineError;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::{Notify, broadcast, mpsc, oneshot};
use tokio::time::Instant;
use weft_core::event::{Event, SharedEvent};
use weft_core::ports::{EventSink, Store};

/// Events written to the store together at most.
const BATCH: usize = 1024;
/// How often events are written while they keep coming (a follower sees them this much
/// later at most; a burst of them shares one commit).
const WRITE_INTERVAL: Duration = Duration::from_millis(1);
/// Events a live follower may fall behind by before it reads the store instead.
const LIVE_BUFFER: usize = 4096;
/// Feeds kept before those nobody follows any more are dropped.
const FEEDS_BEFORE_PRUNING: usize = 1024;
/// How often a follower looks at the store for events live publishing cannot bring
/// (a run driven by another process).
const POLL: Duration = Duration::from_millis(250);
/// Events read from the store per page when replaying.
const PAGE: usize = 512;
/// Events emitted but not yet stored before runs wait for the store to catch up (see
/// [`EventLog::room`]): a loop of cheap steps makes events faster than SQLite stores
/// them, and without a bound the queue held a long loop's whole log in memory.
const MAX_BACKLOG: usize = 16 * BATCH;

enum Message {
    Event(Event),
    /// Answered once every event sent before it is durable.
    Flush(oneshot::Sender<()>),
}

/// The writer of every run's events for one engine, and the live feeds of them.
pub(crate) struct EventLog {
    store: Arc<dyn Store>,
    /// Started on first use, inside the runtime that drives runs.
    writer: OnceLock<mpsc::UnboundedSender<Message>>,
    live: Arc<Feeds>,
    backlog: Arc<Backlog>,
}

/// How many events wait for the writer, and a wake-up for runs waiting for room.
#[derive(Default)]
struct Backlog {
    queued: AtomicUsize,
    drained: Notify,
}

impl Backlog {
    fn is_full(&self) -> bool {
        self.queued.load(Ordering::Relaxed) >= MAX_BACKLOG
    }

    /// `n` events were stored (or given up on): wakes the runs waiting for room.
    fn written(&self, n: usize) {
        self.queued.fetch_sub(n, Ordering::Relaxed);
        if !self.is_full() {
            self.drained.notify_waiters();
        }
    }
}

/// One live feed per run that someone follows, so that an event wakes only the
/// followers of its own run, and publishing for a run nobody follows costs a lookup.
#[derive(Default)]
struct Feeds {
    by_run: Mutex<HashMap<Arc<str>, broadcast::Sender<Arc<SharedEvent>>>>,
}

impl Feeds {
    fn subscribe(&self, run_id: &str) -> broadcast::Receiver<Arc<SharedEvent>> {
        let Ok(mut feeds) = self.by_run.lock() else {
            // A poisoned lock: a receiver that never gets anything; the store has all.
            return broadcast::channel(1).1;
        };
        if feeds.len() >= FEEDS_BEFORE_PRUNING {
            feeds.retain(|_, tx| tx.receiver_count() > 0);
        }
        match feeds.get(run_id) {
            Some(tx) => tx.subscribe(),
            None => {
                let (tx, rx) = broadcast::channel(LIVE_BUFFER);
                feeds.insert(Arc::from(run_id), tx);
                rx
            }
        }
    }

    fn publish(&self, event: Event) {
        self.publish_all(std::iter::once(event));
    }

    /// Publishes `events` to the feeds of their runs, under one lock; an event of a run
    /// nobody follows is only dropped (most runs have no follower).
    fn publish_all(&self, events: impl IntoIterator<Item = Event>) {
        let Ok(mut feeds) = self.by_run.lock() else {
            return;
        };
        if feeds.is_empty() {
            return;
        }
        for event in events {
            let Some(tx) = feeds.get(&event.run_id) else {
                continue;
            };
            let last = event.kind.is_final();
            let run_id = event.run_id.clone();
            // Nobody follows any more, or nobody will need more: the feed goes (its
            // receivers still get what it sent them).
            if tx.send(Arc::new(SharedEvent::new(event))).is_err() || last {
                feeds.remove(&run_id);
            }
        }
    }
}

impl EventLog {
    pub(crate) fn new(store: Arc<dyn Store>) -> EventLog {
        EventLog {
            store,
            writer: OnceLock::new(),
            live: Arc::default(),
            backlog: Arc::default(),
        }
    }

    fn writer(&self) -> &mpsc::UnboundedSender<Message> {
        self.writer.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(write_events(
                self.store.clone(),
                self.live.clone(),
                self.backlog.clone(),
                rx,
            ));
            tx
        })
    }

    /// Waits until every event emitted so far is durable (and published).
    pub(crate) async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.writer().send(Message::Flush(tx)).is_ok() {
            let _ = rx.await;
        }
    }

    /// Returns once fewer than [`MAX_BACKLOG`] events wait to be stored: a run calls it
    /// between steps, so that it cannot make events faster than they are stored for
    /// long (costs an atomic load when there is room).
    pub(crate) async fn room(&self) {
        loop {
            let drained = self.backlog.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if !self.backlog.is_full() {
                return;
            }
            drained.await;
        }
    }

    /// A live receiver of run `run_id`'s events as they become durable (and of its
    /// deltas as they happen).
    fn subscribe(&self, run_id: &str) -> broadcast::Receiver<Arc<SharedEvent>> {
        self.live.subscribe(run_id)
    }
}

impl EventSink for EventLog {
    fn emit(&self, event: &Event) {
        self.emit_owned(event.clone());
    }

    fn emit_owned(&self, event: Event) {
        if event.kind.is_live_only() {
            self.live.publish(event);
        } else {
            // Counted before it is sent, so the writer never counts it out first.
            self.backlog.queued.fetch_add(1, Ordering::Relaxed);
            if self.writer().send(Message::Event(event)).is_err() {
                self.backlog.queued.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

async fn write_events(
    store: Arc<dyn Store>,
    live: Arc<Feeds>,
    backlog: Arc<Backlog>,
    mut rx: mpsc::UnboundedReceiver<Message>,
) {
    let mut events = Vec::new();
    let mut flushes = Vec::new();
    let mut last_write: Option<Instant> = None;
    while let Some(first) = rx.recv().await {
        take(first, &mut events, &mut flushes);
        take_queued(&mut rx, &mut events, &mut flushes);
        // Events that keep coming are written once per interval, not one commit (and
        // two thread wake-ups) each. The first after a quiet spell, a full batch, and
        // one someone waits for (a flush) go at once.
        if events.len() < BATCH
            && flushes.is_empty()
            && let Some(due) = last_write.map(|t| t + WRITE_INTERVAL)
            && due > Instant::now()
        {
            tokio::time::sleep_until(due).await;
            take_queued(&mut rx, &mut events, &mut flushes);
        }
        // A store that cannot take events must not fail the run: the journal is the
        // record the run depends on; the log is what watchers see of it.
        let written = events.len();
        if store.append_events(&events).await.is_ok() {
            live.publish_all(events.drain(..));
        }
        events.clear();
        backlog.written(written);
        last_write = Some(Instant::now());
        for f in flushes.drain(..) {
            let _ = f.send(());
        }
    }
}

fn take(m: Message, events: &mut Vec<Event>, flushes: &mut Vec<oneshot::Sender<()>>) {
    match m {
        Message::Event(e) => events.push(e),
        Message::Flush(f) => flushes.push(f),
    }
}

/// Moves what is queued into `events` and `flushes`, up to a full batch (a flush behind
/// a full batch stays queued: it waits for the events before it).
fn take_queued(
    rx: &mut mpsc::UnboundedReceiver<Message>,
    events: &mut Vec<Event>,
    flushes: &mut Vec<oneshot::Sender<()>>,
) {
    while events.len() < BATCH {
        match rx.try_recv() {
            Ok(m) => take(m, events, flushes),
            Err(_) => return,
        }
    }
}

/// Follows run `run_id`'s events with `seq` above `after` (from the start when `None`):
/// the stored ones first, then each as it becomes durable, until the run's last event.
/// The receiver ends after that event, or with an error.
pub(crate) fn follow(
    log: &EventLog,
    run_id: String,
    after: Option<u64>,
    before_start: bool,
) -> mpsc::Receiver<Result<Arc<SharedEvent>, EngineError>> {
    let (tx, rx) = mpsc::channel(PAGE);
    let live = log.subscribe(&run_id);
    tokio::spawn(
        Follower {
            store: log.store.clone(),
            run_id,
            next: after.map_or(0, |a| a + 1),
            before_start,
            tx,
        }
        .run(live),
    );
    rx
}

struct Follower {
    store: Arc<dyn Store>,
    run_id: String,
    /// The `seq` of the next stored event to deliver.
    next: u64,
    /// The run is about to be made: until it is stored, it is not missing.
    before_start: bool,
    tx: mpsc::Sender<Result<Arc<SharedEvent>, EngineError>>,
}

/// Why following stopped.
enum Stopped {
    /// The run's last event was delivered, or the follower went away.
    Done,
}

impl Follower {
    async fn run(mut self, mut live: broadcast::Receiver<Arc<SharedEvent>>) {
        if let Err(e) = self.follow(&mut live).await {
            let _ = self.tx.send(Err(e)).await;
        }
    }

    async fn follow(
        &mut self,
        live: &mut broadcast::Receiver<Arc<SharedEvent>>,
    ) -> Result<(), EngineError> {
        loop {
            if let Some(Stopped::Done) = self.catch_up().await? {
                return Ok(());
            }
            if self.finished_without_more_events().await? {
                return Ok(());
            }
            let wait = tokio::time::sleep(POLL);
            tokio::pin!(wait);
            loop {
                tokio::select! {
                    got = live.recv() => match got {
                        Ok(e) if *e.run_id == *self.run_id => {
                            if e.kind.is_live_only() {
                                if self.tx.send(Ok(e)).await.is_err() {
                                    return Ok(());
                                }
                            } else if e.seq == self.next {
                                if let Some(Stopped::Done) = self.deliver(e).await {
                                    return Ok(());
                                }
                            } else if e.seq > self.next {
                                // A gap: what is missing is in the store.
                                break;
                            }
                        }
                        Ok(_) => {}
                        // Fallen behind, or the engine is gone: the store has it all.
                        Err(broadcast::error::RecvError::Lagged(_)) => break,
                        Err(broadcast::error::RecvError::Closed) => break,
                    },
                    _ = &mut wait => break,
                    _ = self.tx.closed() => return Ok(()),
                }
            }
        }
    }

    /// Delivers every stored event from `next` on.
    async fn catch_up(&mut self) -> Result<Option<Stopped>, EngineError> {
        loop {
            let page = self
                .store
                .events(&self.run_id, self.next.checked_sub(1), PAGE)
                .await?;
            let full = page.len() == PAGE;
            for e in page {
                if let Some(stopped) = self.deliver(Arc::new(SharedEvent::new(e))).await {
                    return Ok(Some(stopped));
                }
            }
            if !full {
                return Ok(None);
            }
        }
    }

    async fn deliver(&mut self, e: Arc<SharedEvent>) -> Option<Stopped> {
        self.next = e.seq + 1;
        let last = e.kind.is_final();
        if self.tx.send(Ok(e)).await.is_err() || last {
            return Some(Stopped::Done);
        }
        None
    }

    /// A run that has finished and has no events after `next` (a run recorded before
    /// event logs, or one whose last events a crash lost) ends the stream.
    async fn finished_without_more_events(&self) -> Result<bool, EngineError> {
        let run = match self.store.get_run(&self.run_id).await? {
            Some(run) => run,
            None if self.before_start => return Ok(false),
            None => return Err(EngineError::NotFound(self.run_id.clone())),
        };
        Ok(run.status.has_ended()
            && self
                .store
                .events(&self.run_id, self.next.checked_sub(1), 1)
                .await?
                .is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_core::event::EventKind;

    fn event(run: &str, seq: u64, kind: EventKind) -> Event {
        Event {
            run_id: Arc::from(run),
            seq,
            at_ms: 0,
            kind,
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn runs_wait_for_room_while_the_store_is_far_behind() {
        let log = EventLog::new(Arc::new(weft_store::MemoryStore::new()));
        // A run that never yields fills the queue: the writer has not run yet.
        for seq in 0..MAX_BACKLOG as u64 + 10 {
            log.emit(&event("r", seq, EventKind::RunCancelled));
        }
        assert_eq!(log.backlog.queued.load(Ordering::Relaxed), MAX_BACKLOG + 10);
        let room = log.room();
        tokio::pin!(room);
        assert!(
            futures::poll!(room.as_mut()).is_pending(),
            "no room while {MAX_BACKLOG} events wait"
        );
        // Waiting lets the writer store them; then there is room, and it is all stored.
        tokio::time::timeout(Duration::from_secs(10), room)
            .await
            .expect("room once the writer catches up");
        log.flush().await;
        assert_eq!(log.backlog.queued.load(Ordering::Relaxed), 0);
        assert_eq!(
            log.store.events("r", None, usize::MAX).await.unwrap().len(),
            MAX_BACKLOG + 10
        );
        tokio::time::timeout(Duration::from_secs(1), log.room())
            .await
            .expect("room at once when nothing waits");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_dropped_log_s_writer_stores_what_was_queued() {
        let store: Arc<dyn Store> = Arc::new(weft_store::MemoryStore::new());
        let log = EventLog::new(store.clone());
        for seq in 0..3000 {
            log.emit(&event("r", seq, EventKind::RunCancelled));
        }
        drop(log);
        // The writer still takes what was sent before the log went, then ends.
        tokio::time::timeout(Duration::from_secs(10), async {
            while store.events("r", None, usize::MAX).await.unwrap().len() < 3000 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("every event sent before the log was dropped is stored");
    }

    #[test]
    fn a_feed_carries_only_its_run_and_goes_when_its_run_ends() {
        let feeds = Feeds::default();
        let mut a = feeds.subscribe("a");
        let mut b = feeds.subscribe("b");
        feeds.publish(event("a", 0, EventKind::RunCancelled));
        feeds.publish(event("c", 0, EventKind::RunCancelled));
        assert_eq!(a.try_recv().unwrap().run_id.as_ref(), "a");
        assert!(
            b.try_recv().is_err(),
            "b's follower is not woken by a's events"
        );
        // a's run ended: its feed is gone, and its follower was told before it went.
        assert_eq!(feeds.by_run.lock().unwrap().len(), 1);
        assert!(matches!(
            a.try_recv(),
            Err(broadcast::error::TryRecvError::Closed)
        ));
        // A feed nobody follows any more goes at its next event.
        drop(b);
        feeds.publish(event(
            "b",
            0,
            EventKind::RunResumed {
                journaled: 0,
                flow: String::new(),
                flow_hash: String::new(),
                dialect: None,
            },
        ));
        assert!(feeds.by_run.lock().unwrap().is_empty());
    }
}
