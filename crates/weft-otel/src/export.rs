//! The thread that sends finished spans to the collector, so that a run never waits
//! for it: spans queue in a bounded channel (a full queue drops spans, never blocks),
//! leave in batches once a second or every [`BATCH`] spans, and a collector that is
//! down costs a warning line, once.

use crate::config::TelemetryConfig;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

/// Spans sent in one request, at most.
const BATCH: usize = 512;
/// Spans waiting to be sent, at most; more are dropped.
const QUEUE: usize = 16_384;
/// How long spans wait for a batch to fill.
const LINGER: Duration = Duration::from_secs(1);

pub(crate) enum Message {
    Span(Box<SpanData>),
    /// Send what is queued, then say so.
    Flush(mpsc::Sender<()>),
}

/// The sending side: what the event sink holds.
#[derive(Clone)]
pub(crate) struct Queue {
    tx: SyncSender<Message>,
    dropped: Arc<AtomicU64>,
}

impl Queue {
    pub(crate) fn push(&self, span: SpanData) {
        if let Err(TrySendError::Full(_)) = self.tx.try_send(Message::Span(Box::new(span))) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Asks the thread to send what is queued and waits for it, at most `wait`; true
    /// when it finished in time.
    pub(crate) fn flush(&self, wait: Duration) -> bool {
        let (done, finished) = mpsc::channel();
        if self.tx.send(Message::Flush(done)).is_err() {
            return false;
        }
        finished.recv_timeout(wait).is_ok()
    }

    /// Spans dropped because the queue was full.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// Builds the OTLP/HTTP (protobuf) exporter `config` describes and starts the thread
/// that feeds it.
pub(crate) fn start(config: &TelemetryConfig) -> Result<Queue, String> {
    let headers = config.headers.iter().cloned().collect();
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(config.endpoint.clone())
        .with_headers(headers)
        .with_timeout(config.timeout)
        .with_retry_policy(retry_policy())
        .build()
        .map_err(|e| format!("cannot export traces to {}: {e}", config.endpoint))?;
    exporter.set_resource(
        &Resource::builder_empty()
            .with_service_name(config.service_name.clone())
            .with_attribute(opentelemetry::KeyValue::new(
                "service.version",
                env!("CARGO_PKG_VERSION"),
            ))
            .build(),
    );
    let (tx, rx) = mpsc::sync_channel(QUEUE);
    let endpoint = config.endpoint.clone();
    std::thread::Builder::new()
        .name("weft-otel-export".into())
        .spawn(move || run(exporter, rx, &endpoint))
        .map_err(|e| format!("cannot start the trace exporter: {e}"))?;
    Ok(Queue {
        tx,
        dropped: Arc::default(),
    })
}

/// Two quick retries: enough for a collector that blinks, short enough that a command
/// whose collector is down exits promptly (the library's recommended policy waits
/// about 0.9 s before giving up on a refused connection).
fn retry_policy() -> opentelemetry_otlp::RetryPolicy {
    opentelemetry_otlp::RetryPolicy::recommended()
        .with_max_retries(2)
        .with_initial_delay(Duration::from_millis(40))
        .with_max_delay(Duration::from_millis(400))
        .with_max_jitter(Duration::from_millis(20))
}

/// Sends batches until every sender is gone.
fn run(exporter: opentelemetry_otlp::SpanExporter, rx: Receiver<Message>, endpoint: &str) {
    let mut batch = Vec::with_capacity(BATCH);
    let mut warned = false;
    let mut send = |batch: &mut Vec<SpanData>| {
        if batch.is_empty() {
            return;
        }
        let spans = std::mem::replace(batch, Vec::with_capacity(BATCH));
        if let Err(e) = futures::executor::block_on(exporter.export(spans))
            && !std::mem::replace(&mut warned, true)
        {
            eprintln!("weft: cannot send traces to {endpoint} ({e}); runs go on without them");
        }
    };
    let mut deadline = Instant::now() + LINGER;
    loop {
        let wait = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(wait) {
            Ok(Message::Span(span)) => {
                batch.push(*span);
                if batch.len() >= BATCH {
                    send(&mut batch);
                }
            }
            Ok(Message::Flush(done)) => {
                send(&mut batch);
                let _ = done.send(());
            }
            Err(RecvTimeoutError::Timeout) => {
                send(&mut batch);
                deadline = Instant::now() + LINGER;
            }
            Err(RecvTimeoutError::Disconnected) => {
                send(&mut batch);
                return;
            }
        }
    }
}
