//! `--events FILE`: every engine event as a JSON line, each followed by the flow
//! dialect's own event when its specification names one (spec 004's `LoopStart`, ...).

use std::io::Write;
use std::sync::Mutex;
use weft_core::event::Event;
use weft_core::ports::EventSink;
use weft_dialects::EventView;

/// Writes events, and their dialect names, as JSON lines.
pub struct EventFile {
    out: Mutex<Box<dyn Write + Send>>,
    view: EventView,
}

impl EventFile {
    /// Writes to `out`, naming events as `view` does.
    pub fn new(out: Box<dyn Write + Send>, view: EventView) -> EventFile {
        EventFile {
            out: Mutex::new(out),
            view,
        }
    }
}

impl EventSink for EventFile {
    fn emit(&self, event: &Event) {
        let Ok(mut out) = self.out.lock() else { return };
        // A failing event file must not fail the run; the journal is the record.
        let _ = serde_json::to_writer(&mut *out, event);
        let _ = out.write_all(b"\n");
        if let Some(named) = self.view.translate(event) {
            let _ = serde_json::to_writer(&mut *out, &named);
            let _ = out.write_all(b"\n");
        }
        let _ = out.flush();
    }
}
