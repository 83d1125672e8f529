//! `GET /metrics`: the store's totals and the server's own gauges in the Prometheus
//! (OpenMetrics) text format, read fresh at each scrape.

use crate::App;
use crate::problem::Problem;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use weft_engine::EngineError;

/// Live counts the server keeps itself.
#[derive(Default)]
pub(crate) struct Live {
    /// Event streams open now.
    pub(crate) subscribers: AtomicI64,
}

/// Counts one open event stream until dropped.
pub(crate) struct Subscribed(Arc<Live>);

impl Subscribed {
    pub(crate) fn new(live: Arc<Live>) -> Subscribed {
        live.subscribers.fetch_add(1, Ordering::Relaxed);
        Subscribed(live)
    }
}

impl Drop for Subscribed {
    fn drop(&mut self) {
        self.0.subscribers.fetch_sub(1, Ordering::Relaxed);
    }
}

pub(crate) async fn render(State(app): State<App>) -> Result<impl IntoResponse, Problem> {
    let stats = app
        .engine
        .store()
        .run_stats()
        .await
        .map_err(EngineError::from)?;
    let mut registry = Registry::with_prefix("weft");
    let runs = Family::<Vec<(String, String)>, Gauge>::default();
    for (status, n) in &stats.runs {
        runs.get_or_create(&vec![("status".into(), status.as_str().into())])
            .set(*n as i64);
    }
    registry.register("runs", "Runs in the store, by status", runs);
    let gauge = |v: u64| {
        let g = Gauge::<i64, AtomicI64>::default();
        g.set(v as i64);
        g
    };
    registry.register(
        "steps",
        "Effectful steps whose result is journaled",
        gauge(stats.steps),
    );
    registry.register(
        "model_input_tokens",
        "Prompt tokens over every run",
        gauge(stats.usage.input_tokens),
    );
    registry.register(
        "model_output_tokens",
        "Completion tokens over every run",
        gauge(stats.usage.output_tokens),
    );
    let cost = Gauge::<f64, AtomicU64>::default();
    cost.set(stats.usage.cost_usd);
    registry.register(
        "model_cost_usd",
        "Model cost over every run, in US dollars",
        cost,
    );
    let queued = stats
        .runs
        .iter()
        .find(|(s, _)| *s == weft_core::ports::RunStatus::Queued)
        .map_or(0, |(_, n)| *n);
    registry.register(
        "queue_depth",
        "Runs waiting for a slot (--max-runs)",
        gauge(queued),
    );
    let subscribers = Gauge::<i64, AtomicI64>::default();
    subscribers.set(app.live.subscribers.load(Ordering::Relaxed));
    registry.register("sse_subscribers", "Event streams open now", subscribers);
    for (name, help, n) in app.counters.snapshot() {
        let c = prometheus_client::metrics::counter::Counter::<u64, AtomicU64>::default();
        c.inc_by(n);
        registry.register(name, help, c);
    }
    let mut text = String::new();
    encode(&mut text, &registry).map_err(|e| {
        Problem::new(axum::http::StatusCode::INTERNAL_SERVER_ERROR, "metrics").detail(e.to_string())
    })?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    ))
}
