//! The events port: sinks that receive a run's events as they happen.

use crate::event::Event;

/// Receives every event of the runs it is attached to. Must not block.
pub trait EventSink: Send + Sync {
    /// Takes one event.
    fn emit(&self, event: &Event);

    /// Takes one event that nothing else will read: a sink that keeps events takes it
    /// without a copy. The engine hands its last sink each event this way.
    fn emit_owned(&self, event: Event) {
        self.emit(&event);
    }
}
