//! `--events FILE`: every engine event as a JSON line, each followed by the flow
//! dialect's own event when its specification names one (spec 004's `LoopStart`, ...).

use std::io::Write;
use std::sync::Mutex;
use weft_core::event::Event;
use weft_core::ports::EventSink;
use weft_dialects::EventView;
use weft_dialects::view::RunSummary;

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
        for named in self.view.translate(event) {
            let _ = serde_json::to_writer(&mut *out, &named);
            let _ = out.write_all(b"\n");
        }
        let _ = out.flush();
    }
}

/// Keeps a dialect's lines in memory for the run result, for a dialect whose result
/// carries its events (the `graph` dialect's `{runId, status, logs, ...}`).
pub struct DialectLog {
    view: EventView,
    lines: Mutex<Vec<serde_json::Value>>,
}

impl DialectLog {
    /// A log for `view`, when its dialect reports results in a shape of its own.
    pub fn for_view(view: &EventView) -> Option<DialectLog> {
        view.shapes_result().then(|| DialectLog {
            view: view.clone(),
            lines: Mutex::new(Vec::new()),
        })
    }

    /// The run result in the dialect's shape.
    pub fn result(&self, r: &weft_engine::RunResult) -> Option<serde_json::Value> {
        let logs = self.lines.lock().map(|l| l.clone()).unwrap_or_default();
        let error = serde_json::to_value(&r.error).unwrap_or_default();
        let (state, output) = (r.state.json(), r.output.as_ref().map(|o| o.json()));
        let summary = RunSummary {
            run_id: &r.run_id,
            status: r.status.as_str(),
            state: &state,
            waiting: &r.waiting,
            output: output.as_deref(),
            error: &error,
        };
        self.view.result(&summary, &logs)
    }
}

impl EventSink for DialectLog {
    fn emit(&self, event: &Event) {
        let named = self.view.translate(event);
        if !named.is_empty()
            && let Ok(mut lines) = self.lines.lock()
        {
            lines.extend(named);
        }
    }
}
