//! # weft-otel
//!
//! Weft's runs as OpenTelemetry traces in the GenAI semantic conventions, so that they
//! show up in Langfuse, Phoenix, Jaeger, Datadog or whatever a team already reads.
//!
//! [`Telemetry::start`] starts an OTLP/HTTP (protobuf) exporter on a thread of its own;
//! [`Telemetry::sink`] is an [`EventSink`] to give the engines: it folds each run's
//! events into spans — `invoke_workflow {flow}` for the run, one span per step, `chat
//! {model}` per model call, `execute_tool {name}` per tool call — and queues them. A
//! step answered from the journal on resume is marked `weft.replayed` and has no `chat`
//! span (the call did not happen again); a pause is a span event; a resumed run is a new
//! trace linked to its first (ids derive from the run's id, so any process can link).
//!
//! Owns the mapping from events to spans and their export. Depends on `weft-core`'s
//! events only: not on the engine, a store or a dialect.

mod config;
mod conventions;
mod export;
mod ids;
mod spans;

pub use config::TelemetryConfig;

use std::sync::Arc;
use std::time::{Duration, SystemTime};
use weft_core::event::Event;
use weft_core::ports::EventSink;

/// A running export of traces. Dropping it sends what is queued (waiting at most two
/// seconds: a collector that is down does not hold a command up).
pub struct Telemetry {
    config: TelemetryConfig,
    queue: export::Queue,
    sink: Arc<dyn EventSink>,
}

impl Telemetry {
    /// Starts exporting to `config.endpoint`. Fails only when the exporter cannot be
    /// built (a malformed URL); an unreachable collector is not an error.
    pub fn start(config: TelemetryConfig) -> Result<Telemetry, String> {
        let queue = export::start(&config)?;
        let sink = Arc::new(SpanSink {
            tracer: spans::Tracer::new(config.capture_content),
            queue: queue.clone(),
        });
        Ok(Telemetry {
            config,
            queue,
            sink,
        })
    }

    /// The event sink that turns runs into spans.
    pub fn sink(&self) -> Arc<dyn EventSink> {
        self.sink.clone()
    }

    /// What it was started with.
    pub fn config(&self) -> &TelemetryConfig {
        &self.config
    }

    /// Sends every span queued so far, waiting at most `wait`; true when they went.
    pub fn flush(&self, wait: Duration) -> bool {
        self.queue.flush(wait)
    }

    /// Spans dropped because the exporter fell behind.
    pub fn dropped_spans(&self) -> u64 {
        self.queue.dropped()
    }
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("endpoint", &self.config.endpoint)
            .finish_non_exhaustive()
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        self.queue.flush(Duration::from_secs(2));
    }
}

/// Folds events into spans and queues the spans that end.
struct SpanSink {
    tracer: spans::Tracer,
    queue: export::Queue,
}

impl EventSink for SpanSink {
    fn emit(&self, event: &Event) {
        if event.kind.is_live_only() {
            return;
        }
        for span in self.tracer.on_event(event, SystemTime::now()) {
            self.queue.push(span);
        }
    }
}
