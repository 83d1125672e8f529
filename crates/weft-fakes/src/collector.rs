//! An OpenTelemetry collector's front door: `POST /v1/traces` with an OTLP protobuf
//! body, decoded into plain spans a test can assert on.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One span as the collector received it (ids in lower-case hex).
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedSpan {
    /// The trace.
    pub trace_id: String,
    /// The span.
    pub span_id: String,
    /// Its parent, empty for a root.
    pub parent_span_id: String,
    /// Its name.
    pub name: String,
    /// OTLP's kind: 1 internal, 2 server, 3 client.
    pub kind: i32,
    /// Start and end, Unix nanoseconds.
    pub start_ns: u64,
    /// End, Unix nanoseconds.
    pub end_ns: u64,
    /// Attributes, as JSON values.
    pub attributes: BTreeMap<String, Value>,
    /// The names of its events, in order.
    pub events: Vec<String>,
    /// Links, as `(trace_id, span_id)`.
    pub links: Vec<(String, String)>,
    /// OTLP's status code: 0 unset, 1 ok, 2 error.
    pub status_code: i32,
    /// The resource's `service.name`.
    pub service_name: String,
}

#[derive(Default)]
struct Received {
    spans: Vec<ReceivedSpan>,
    headers: Vec<HeaderMap>,
}

/// A collector on 127.0.0.1; it stops when dropped.
pub struct Collector {
    addr: SocketAddr,
    received: Arc<Mutex<Received>>,
    task: tokio::task::JoinHandle<()>,
}

impl Collector {
    /// Starts listening on a free port.
    pub async fn start() -> Collector {
        let received = Arc::new(Mutex::new(Received::default()));
        let app = Router::new()
            .route("/v1/traces", axum::routing::post(receive))
            .with_state(received.clone());
        let (addr, task) = crate::serve_on_loopback(app).await;
        Collector {
            addr,
            received,
            task,
        }
    }

    /// The base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` takes it.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.received.lock().expect("collector lock").spans.clone()
    }

    /// The headers of every export request so far.
    pub fn headers(&self) -> Vec<HeaderMap> {
        self.received
            .lock()
            .expect("collector lock")
            .headers
            .clone()
    }

    /// Waits (at most `timeout`) until a span named `name` has arrived; every span then.
    pub async fn wait_for(&self, name: &str, timeout: Duration) -> Vec<ReceivedSpan> {
        let until = Instant::now() + timeout;
        loop {
            let spans = self.spans();
            if spans.iter().any(|s| s.name == name) || Instant::now() >= until {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn receive(
    State(received): State<Arc<Mutex<Received>>>,
    headers: HeaderMap,
    body: bytes::Bytes,
) -> (StatusCode, Vec<u8>) {
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return (StatusCode::BAD_REQUEST, Vec::new());
    };
    let mut r = received.lock().expect("collector lock");
    r.headers.push(headers);
    for rs in request.resource_spans {
        let service = rs
            .resource
            .iter()
            .flat_map(|res| &res.attributes)
            .find(|kv| kv.key == "service.name")
            .map(|kv| value_of(kv.value.as_ref()))
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        for span in rs.scope_spans.into_iter().flat_map(|s| s.spans) {
            r.spans.push(ReceivedSpan {
                trace_id: hex(&span.trace_id),
                span_id: hex(&span.span_id),
                parent_span_id: hex(&span.parent_span_id),
                name: span.name,
                kind: span.kind,
                start_ns: span.start_time_unix_nano,
                end_ns: span.end_time_unix_nano,
                attributes: attributes(&span.attributes),
                events: span.events.into_iter().map(|e| e.name).collect(),
                links: span
                    .links
                    .iter()
                    .map(|l| (hex(&l.trace_id), hex(&l.span_id)))
                    .collect(),
                status_code: span.status.map_or(0, |s| s.code),
                service_name: service.clone(),
            });
        }
    }
    // An empty ExportTraceServiceResponse: everything was accepted.
    (StatusCode::OK, Vec::new())
}

fn attributes(kvs: &[KeyValue]) -> BTreeMap<String, Value> {
    kvs.iter()
        .map(|kv| (kv.key.clone(), value_of(kv.value.as_ref())))
        .collect()
}

fn value_of(v: Option<&AnyValue>) -> Value {
    match v.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => json!(s),
        Some(any_value::Value::BoolValue(b)) => json!(b),
        Some(any_value::Value::IntValue(i)) => json!(i),
        Some(any_value::Value::DoubleValue(d)) => json!(d),
        Some(any_value::Value::ArrayValue(a)) => {
            Value::Array(a.values.iter().map(|v| value_of(Some(v))).collect())
        }
        Some(any_value::Value::KvlistValue(l)) => Value::Object(
            l.values
                .iter()
                .map(|kv| (kv.key.clone(), value_of(kv.value.as_ref())))
                .collect(),
        ),
        Some(any_value::Value::BytesValue(b)) => json!(hex(b)),
        // Profiles' string-table references: never in traces.
        Some(_) | None => Value::Null,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
