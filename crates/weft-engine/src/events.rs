//! Delivers a run's events to the engine's sinks, numbering them in order.

use std::io::Write;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use weft_core::event::{Event, EventKind};
use weft_core::ports::EventSink;

pub(crate) struct Emitter {
    run_id: Arc<str>,
    seq: AtomicU64,
    sinks: Vec<Arc<dyn EventSink>>,
}

pub(crate) use weft_core::event::now_ms;

impl Emitter {
    /// Numbers the run's events from `first_seq`.
    pub(crate) fn new(run_id: Arc<str>, sinks: Vec<Arc<dyn EventSink>>, first_seq: u64) -> Emitter {
        Emitter {
            run_id,
            seq: AtomicU64::new(first_seq),
            sinks,
        }
    }

    /// True when someone listens; callers skip building events otherwise.
    pub(crate) fn active(&self) -> bool {
        !self.sinks.is_empty()
    }

    /// Builds the event only if a sink will receive it.
    pub(crate) fn emit(&self, kind: impl FnOnce() -> EventKind) {
        if self.sinks.is_empty() {
            return;
        }
        let kind = kind();
        // A live-only event takes the number of the next stored one without using it,
        // so the stored log is numbered without gaps.
        let seq = if kind.is_live_only() {
            self.seq.load(Ordering::Relaxed)
        } else {
            self.seq.fetch_add(1, Ordering::Relaxed)
        };
        let event = Event {
            run_id: self.run_id.clone(),
            seq,
            at_ms: now_ms(),
            kind,
        };
        let Some((last, others)) = self.sinks.split_last() else {
            return;
        };
        for s in others {
            s.emit(&event);
        }
        last.emit_owned(event);
    }
}

/// Writes each event as one JSON line.
pub struct JsonlSink {
    out: Mutex<Box<dyn Write + Send>>,
}

impl JsonlSink {
    /// Writes to `out` (a file, stdout, ...).
    pub fn new(out: Box<dyn Write + Send>) -> JsonlSink {
        JsonlSink {
            out: Mutex::new(out),
        }
    }
}

impl EventSink for JsonlSink {
    fn emit(&self, event: &Event) {
        if let Ok(mut out) = self.out.lock() {
            // A failing event file must not fail the run; the journal is the record.
            let _ = serde_json::to_writer(&mut *out, event);
            let _ = out.write_all(b"\n");
            let _ = out.flush();
        }
    }
}

/// Keeps every event in memory, for tests and for callers that inspect a run's events.
#[derive(Default)]
pub struct CollectingSink {
    events: Mutex<Vec<Event>>,
}

impl CollectingSink {
    /// A new, empty sink.
    pub fn new() -> CollectingSink {
        CollectingSink::default()
    }

    /// Every event received so far.
    pub fn events(&self) -> Vec<Event> {
        self.events.lock().map(|e| e.clone()).unwrap_or_default()
    }
}

impl EventSink for CollectingSink {
    fn emit(&self, event: &Event) {
        if let Ok(mut e) = self.events.lock() {
            e.push(event.clone());
        }
    }
}
