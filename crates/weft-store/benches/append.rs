//! Journal append latency, the cost every effectful step pays before the next starts:
//! `append` (returns once durable) one after another on one run, on SQLite and, when
//! `WEFT_BENCH_POSTGRES` names a database, on PostgreSQL. Prints p50, p90, p99 and max
//! as JSON lines.
//!
//!     cargo bench -p weft-store --bench append
//!     WEFT_BENCH_POSTGRES=postgres://weft@127.0.0.1:PORT/bench cargo bench -p weft-store --bench append

use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_core::ports::{EntryKind, JournalEntry, RunRecord, Store};
use weft_store::{Durability, PostgresStore, SqliteStore};

const APPENDS: usize = 2000;

async fn measure(name: &str, store: Arc<dyn Store>, run: &str) {
    let mut rec = RunRecord::new(run.into(), "h".into(), "f".into(), serde_json::json!({}), 0);
    rec.owner = Some("bench".into());
    store.create_run(&rec).await.unwrap();
    let value = serde_json::json!({"output": {"text": "a model's answer of a few words", "n": 1}});
    let mut took: Vec<Duration> = Vec::with_capacity(APPENDS);
    for i in 0..APPENDS {
        let entry = JournalEntry {
            key: format!("root/step{i}"),
            kind: EntryKind::Result,
            value: value.clone().into(),
        };
        let t = Instant::now();
        store.append(run, entry).await.unwrap();
        took.push(t.elapsed());
    }
    took.sort();
    let at = |q: f64| took[((took.len() as f64 * q) as usize).min(took.len() - 1)].as_micros();
    println!(
        "{{\"store\": \"{name}\", \"appends\": {APPENDS}, \"p50_us\": {}, \"p90_us\": {}, \"p99_us\": {}, \"max_us\": {}}}",
        at(0.5),
        at(0.9),
        at(0.99),
        took.last().unwrap().as_micros()
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        for (name, durability) in [
            ("sqlite", Durability::Process),
            ("sqlite-power", Durability::Power),
        ] {
            let path = dir.path().join(format!("{name}.db"));
            let store = Arc::new(SqliteStore::open(path, durability).unwrap());
            measure(name, store, "run-sqlite").await;
        }
        if let Ok(url) = std::env::var("WEFT_BENCH_POSTGRES") {
            let store = Arc::new(PostgresStore::connect(&url).await.unwrap());
            let run = format!("run-{}", std::process::id());
            measure("postgres", store, &run).await;
        }
    });
}
