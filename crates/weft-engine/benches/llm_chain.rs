//! Model calls at scale: 1,000 concurrent runs of a five-step LLM chain against a real
//! HTTP server on 127.0.0.1 that speaks OpenAI's wire format and answers after 20 ms, and
//! the engine's own cost per model call with the in-process scripted model.
//!
//! The ideal wall time of the concurrent case is five round trips, 100 ms; the target is
//! within 1.2x of it. The server runs on its own runtime thread, as a separate process
//! would, but shares the machine's cores with the engine. After the criterion groups the
//! benchmark prints the whole process's CPU time per call (engine, HTTP client, server).
//! A reference row sends the same calls as plain `reqwest` POSTs, with no engine and no
//! `genai`: the floor this machine's HTTP stack sets for the concurrent case.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use weft_core::ports::{RunStatus, Store};
use weft_engine::{Engine, Prepared, RunOptions};
use weft_fakes::{FakeServer, Reply, Wire};
use weft_store::{Durability, MemoryStore, SqliteStore};

const STEPS: usize = 5;
const RUNS: usize = 1000;
const LATENCY: Duration = Duration::from_millis(20);

/// A chain of `STEPS` model calls, each prompt carrying the previous answer.
fn chain(model: &str) -> Arc<Prepared> {
    let mut steps = String::new();
    for i in 1..=STEPS {
        steps.push_str(&format!(
            "    - id: step{i}\n      llm:\n        model: m\n        prompt: \"Step {i} on {{{{ initial.topic }}}}; so far: {{{{ input }}}}\"\n"
        ));
    }
    let yaml = format!("weft: 1\nname: chain\nmodels:\n  m: {model}\nroot:\n  sequence:\n{steps}");
    let loaded =
        weft_dialects::load_str(&yaml, "chain.yaml", None, None).unwrap_or_else(|e| panic!("{e}"));
    Arc::new(Prepared::new(loaded.flow).unwrap_or_else(|d| panic!("{d:?}")))
}

fn engine(store: Arc<dyn Store>) -> Engine {
    let router = weft_llm::Router::new().with_env(Arc::new(|k: &str| {
        k.ends_with("_API_KEY").then(|| "sk-bench".to_owned())
    }));
    Engine::builder(store).models(Arc::new(router)).build()
}

/// Starts `n` runs at once and waits for all of them.
async fn run_many(engine: &Engine, flow: &Arc<Prepared>, n: usize) {
    let mut runs = tokio::task::JoinSet::new();
    for i in 0..n {
        let (engine, flow) = (engine.clone(), flow.clone());
        runs.spawn(async move {
            let input = json!({"topic": format!("topic {i}")});
            engine
                .start(flow, Some(input), RunOptions::default())
                .await?
                .end()
                .await
        });
    }
    while let Some(r) = runs.join_next().await {
        let r = r.expect("run task").expect("run");
        assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
    }
}

/// The transport alone, for reference: the same 1,000 × 5 calls as plain `reqwest` POSTs
/// of an OpenAI chat body, each answer parsed as JSON (streamed: the event stream read
/// whole and its last text frame parsed), with no engine and no model client.
async fn transport_floor(client: &reqwest::Client, url: &str, stream: bool) {
    let mut runs = tokio::task::JoinSet::new();
    for i in 0..RUNS {
        let (client, url) = (client.clone(), url.to_owned());
        runs.spawn(async move {
            let mut answer = format!("topic {i}");
            for step in 1..=STEPS {
                let body = json!({"model": "gpt-bench", "stream": stream, "messages": [
                    {"role": "user", "content": format!("Step {step} on topic {i}; so far: {answer}")}
                ]});
                let sent = client.post(&url).json(&body).send().await.expect("send");
                answer = if stream {
                    let text = sent.text().await.expect("events");
                    let last = text
                        .lines()
                        .filter_map(|l| l.strip_prefix("data: "))
                        .rfind(|d| d.contains("content"))
                        .unwrap_or("{}");
                    let frame: serde_json::Value = serde_json::from_str(last).expect("frame");
                    frame["choices"][0]["delta"]["content"].to_string()
                } else {
                    let reply: serde_json::Value = sent.json().await.expect("json");
                    reply["choices"][0]["message"]["content"].to_string()
                };
            }
        });
    }
    while let Some(r) = runs.join_next().await {
        r.expect("transport task");
    }
}

/// The fake provider on its own runtime thread; dropped with the returned guard.
fn start_server() -> (FakeServer, tokio::runtime::Runtime) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(FakeServer::start_with(Wire::OpenAi, LATENCY, |_| {
        Reply::text("A short answer of about ten tokens for the next step.")
    }));
    (server, rt)
}

/// User + system CPU time of this process.
fn process_cpu() -> Duration {
    // SAFETY: getrusage only writes the struct we hand it.
    let usage = unsafe {
        let mut u = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    let mut g = c.benchmark_group("llm_chain");
    g.sample_size(20)
        .measurement_time(Duration::from_secs(5))
        .warm_up_time(Duration::from_secs(1));

    // The engine's own cost per call: the scripted model answers in process, instantly.
    let scripted = chain("{provider: scripted, rules: [{reply: \"A short answer.\"}]}");
    let mem = engine(Arc::new(MemoryStore::new()));
    g.throughput(Throughput::Elements(STEPS as u64));
    g.bench_function(BenchmarkId::new("one_run", "scripted_memory"), |b| {
        b.iter(|| rt.block_on(run_many(&mem, &scripted, 1)))
    });
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::open(dir.path().join("bench.db"), Durability::Process).unwrap();
    let durable = engine(Arc::new(sqlite));
    g.bench_function(BenchmarkId::new("one_run", "scripted_sqlite"), |b| {
        b.iter(|| rt.block_on(run_many(&durable, &scripted, 1)))
    });

    // The concurrent case over HTTP.
    let (server, _server_rt) = start_server();
    let model = format!(
        "{{provider: openai, model: gpt-bench, base_url: \"{}\"}}",
        server.base_url()
    );
    let http = chain(&model);
    let whole = chain(&model.replace("model: gpt-bench", "model: gpt-bench, stream: false"));
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Elements((RUNS * STEPS) as u64));
    g.bench_function(
        BenchmarkId::new("1000_runs", "openai_http_20ms_memory"),
        |b| {
            b.iter(|| {
                rt.block_on(run_many(&mem, &http, RUNS));
                assert_eq!(server.take_received().len(), RUNS * STEPS);
            })
        },
    );
    g.bench_function(
        BenchmarkId::new("1000_runs", "openai_http_20ms_memory_unstreamed"),
        |b| {
            b.iter(|| {
                rt.block_on(run_many(&mem, &whole, RUNS));
                assert_eq!(server.take_received().len(), RUNS * STEPS);
            })
        },
    );
    let client = reqwest::Client::new();
    let url = format!("{}/chat/completions", server.base_url());
    g.bench_function(BenchmarkId::new("1000_runs", "reqwest_alone_20ms"), |b| {
        b.iter(|| {
            rt.block_on(transport_floor(&client, &url, false));
            assert_eq!(server.take_received().len(), RUNS * STEPS);
        })
    });
    g.bench_function(
        BenchmarkId::new("1000_runs", "openai_http_20ms_sqlite"),
        |b| {
            b.iter(|| {
                rt.block_on(run_many(&durable, &http, RUNS));
                assert_eq!(server.take_received().len(), RUNS * STEPS);
            })
        },
    );
    g.finish();

    // Whole-process CPU per call (engine, model client, the axum server, SQLite).
    for (name, engine, flow) in [
        ("memory", &mem, &http),
        ("memory_unstreamed", &mem, &whole),
        ("sqlite", &durable, &http),
    ] {
        let rounds = 5;
        let before = process_cpu();
        for _ in 0..rounds {
            rt.block_on(run_many(engine, flow, RUNS));
        }
        let per_call = (process_cpu() - before) / (rounds * RUNS * STEPS) as u32;
        server.take_received();
        println!("llm_chain/process_cpu_per_http_call/{name}: {per_call:.1?}");
    }
    for (name, stream) in [("reqwest_alone", false), ("reqwest_alone_streamed", true)] {
        let before = process_cpu();
        for _ in 0..5 {
            rt.block_on(transport_floor(&client, &url, stream));
        }
        let per_call = (process_cpu() - before) / (5 * RUNS * STEPS) as u32;
        server.take_received();
        println!("llm_chain/process_cpu_per_http_call/{name}: {per_call:.1?}");
    }
}

criterion_group!(llm, benches);
criterion_main!(llm);
