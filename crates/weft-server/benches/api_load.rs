//! A load generator for `weft serve` and, beside it, LangGraph's own server (`langgraph
//! dev`): the same client measures both. It only speaks HTTP; `scripts/bench-serve`
//! starts the servers and runs it.
//!
//! ```text
//! api_load throughput --target weft|weft-langgraph|langgraph --url URL [--runs N] [--concurrency C]
//! api_load sse --url URL [--subscribers S] [--rounds R]
//! api_load idle --url URL --pid PID [--subscribers S]
//! ```
//!
//! Each mode prints one JSON line.

use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Five model calls on the scripted (offline, deterministic) model.
const FIVE: &str = include_str!("../../../scripts/bench-serve.d/bench.yaml");

/// Pauses at once; once approved, ten steps 5 ms apart.
const GATED: &str = "weft: 1\nname: gated\nroot:\n  sequence:\n    - {id: gate, approval: {prompt: go?}}\n    - id: work\n      loop:\n        max_iterations: 10\n        body:\n          sequence:\n            - {id: note, transform: {output: '{{ iteration }}'}}\n            - {id: pause, action: {uses: time.sleep, with: {ms: 5}}}\n";

struct Args(HashMap<String, String>);

impl Args {
    fn parse() -> (String, Args) {
        let mut it = std::env::args().skip(1).filter(|a| a != "--bench");
        let mode = it.next().unwrap_or_default();
        let mut map = HashMap::new();
        while let Some(k) = it.next() {
            if let Some(name) = k.strip_prefix("--") {
                map.insert(name.to_owned(), it.next().unwrap_or_default());
            }
        }
        (mode, Args(map))
    }

    fn text(&self, name: &str, default: &str) -> String {
        self.0
            .get(name)
            .cloned()
            .unwrap_or_else(|| default.to_owned())
    }

    fn number(&self, name: &str, default: usize) -> usize {
        self.0
            .get(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `q` quantile of `xs` (sorted here), in the unit they are in.
fn quantile(xs: &mut [f64], q: f64) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[((xs.len() - 1) as f64 * q).round() as usize]
}

/// The client every request goes through; with `WEFT_BENCH_KEY` set, each request
/// carries that API key (`x-api-key`), which the server then checks.
fn client() -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(key) = std::env::var("WEFT_BENCH_KEY")
        .ok()
        .and_then(|k| reqwest::header::HeaderValue::from_str(&k).ok())
    {
        headers.insert("x-api-key", key);
    }
    reqwest::Client::builder()
        .pool_max_idle_per_host(1024)
        .default_headers(headers)
        .build()
        .unwrap()
}

async fn post(client: &reqwest::Client, url: &str, body: &Value) -> (u16, Value) {
    let r = client.post(url).json(body).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Runs `runs` runs of the five-call flow, `concurrency` at a time, each answered when
/// it ends; on Weft from its stored flow (`weft`), or as a stateless run of the flow
/// named `bench` through Weft's LangGraph door (`weft-langgraph`, the server started
/// with `--flow scripts/bench-serve.d/bench.yaml`); on LangGraph as a stateless run of
/// its graph.
async fn throughput(args: &Args) -> Value {
    let (target, base) = (args.text("target", "weft"), args.text("url", ""));
    let (runs, concurrency) = (args.number("runs", 2000), args.number("concurrency", 32));
    let client = client();
    let (url, template) = if target == "weft" {
        let (status, flow) = post(
            &client,
            &format!("{base}/v1/flows"),
            &json!({"source": FIVE}),
        )
        .await;
        assert!(status < 300, "{flow}");
        (
            format!("{base}/v1/runs?wait=60"),
            json!({"flow_id": flow["flow_id"]}),
        )
    } else {
        // LangGraph's own server and Weft's LangGraph door take the same request.
        (
            format!("{base}/runs/wait"),
            json!({"assistant_id": "bench"}),
        )
    };
    let started = Instant::now();
    let latencies: Vec<f64> = futures::stream::iter(0..runs)
        .map(|n| {
            let (client, url, mut body) = (client.clone(), url.clone(), template.clone());
            async move {
                body["input"] = json!({"n": n});
                let t = Instant::now();
                let (status, out) = post(&client, &url, &body).await;
                assert_eq!(status, 200, "{out}");
                t.elapsed().as_secs_f64() * 1e3
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let wall = started.elapsed().as_secs_f64();
    let mut ms = latencies;
    json!({
        "mode": "throughput", "target": target, "runs": runs, "concurrency": concurrency,
        "wall_s": wall, "runs_per_s": runs as f64 / wall,
        "p50_ms": quantile(&mut ms, 0.5), "p99_ms": quantile(&mut ms, 0.99),
        "loadavg": loadavg(),
    })
}

/// A stream's events, each with when it arrived.
struct Received {
    seqs: Vec<u64>,
    answered_at: Option<Instant>,
}

/// Follows `url` until the stream closes; `ready` is told once the run's pause has
/// arrived (the subscriber is caught up).
async fn subscribe(
    client: reqwest::Client,
    url: String,
    ready: tokio::sync::mpsc::UnboundedSender<()>,
) -> Received {
    let response = client.get(&url).send().await.unwrap();
    let mut body = response.bytes_stream();
    let (mut text, mut got) = (
        String::new(),
        Received {
            seqs: Vec::new(),
            answered_at: None,
        },
    );
    while let Some(Ok(chunk)) = body.next().await {
        text.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            let field = |name: &str| {
                block
                    .lines()
                    .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_owned()))
            };
            if let Some(seq) = field("id:").and_then(|v| v.parse().ok()) {
                got.seqs.push(seq);
            }
            match field("event:").as_deref() {
                Some("run_paused") => {
                    let _ = ready.send(());
                }
                Some("approval_answered") => got.answered_at = Some(Instant::now()),
                _ => {}
            }
        }
    }
    got
}

/// `n` subscribers of run `id`, each caught up on its pause.
async fn caught_up(
    client: &reqwest::Client,
    base: &str,
    id: &str,
    n: usize,
) -> Vec<tokio::task::JoinHandle<Received>> {
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::unbounded_channel();
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let url = format!("{base}/v1/runs/{id}/events");
            tokio::spawn(subscribe(client.clone(), url, ready_tx.clone()))
        })
        .collect();
    for _ in 0..n {
        ready_rx.recv().await.unwrap();
    }
    tasks
}

/// One gated run watched by `subscribers`: each is caught up on the paused run, then
/// the run is approved. Returns each subscriber's delay from sending the approval to
/// receiving its event, whether every stream was whole, and how long until the last
/// stream closed.
async fn watched_run(
    client: &reqwest::Client,
    base: &str,
    subscribers: usize,
) -> (Vec<f64>, bool, f64) {
    let (_, run) = post(
        client,
        &format!("{base}/v1/runs?wait=10"),
        &json!({"source": GATED}),
    )
    .await;
    assert_eq!(run["status"], "paused", "{run}");
    let id = run["run_id"].as_str().unwrap().to_owned();
    let tasks = caught_up(client, base, &id, subscribers).await;
    let sent = Instant::now();
    let (status, answer) = post(
        client,
        &format!("{base}/v1/runs/{id}/approve"),
        &json!({"decision": "approve"}),
    )
    .await;
    assert!(status < 300, "{answer}");
    let mut delays = Vec::with_capacity(subscribers);
    let mut whole = true;
    let mut first: Option<Vec<u64>> = None;
    for t in tasks {
        let got = t.await.unwrap();
        delays.push(
            got.answered_at
                .map_or(f64::NAN, |at| (at - sent).as_secs_f64() * 1e3),
        );
        let expected: Vec<u64> = (0..got.seqs.len() as u64).collect();
        whole &= got.seqs == expected && first.as_ref().is_none_or(|f| *f == got.seqs);
        first.get_or_insert(got.seqs);
    }
    (delays, whole, sent.elapsed().as_secs_f64() * 1e3)
}

async fn sse(args: &Args) -> Value {
    let base = args.text("url", "");
    let (subscribers, rounds) = (args.number("subscribers", 100), args.number("rounds", 20));
    let client = client();
    let mut delays = Vec::new();
    let mut all_whole = true;
    let mut until_closed = Vec::new();
    let mut spreads = Vec::new();
    for _ in 0..rounds {
        let (mut d, whole, closed) = watched_run(&client, &base, subscribers).await;
        // How much later the last subscriber got the event than the first.
        spreads.push(quantile(&mut d, 1.0) - quantile(&mut d, 0.0));
        delays.extend(d);
        all_whole &= whole;
        until_closed.push(closed);
    }
    json!({
        "mode": "sse", "subscribers": subscribers, "rounds": rounds,
        "approve_to_event_p50_ms": quantile(&mut delays, 0.5),
        "approve_to_event_p99_ms": quantile(&mut delays, 0.99),
        "approve_to_event_max_ms": quantile(&mut delays, 1.0),
        "first_to_last_subscriber_p50_ms": quantile(&mut spreads, 0.5),
        "every_stream_whole": all_whole,
        "approve_to_last_close_p50_ms": quantile(&mut until_closed, 0.5),
        "loadavg": loadavg(),
    })
}

/// The resident memory of process `pid`, in KiB.
fn rss_kib(pid: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// `subscribers` idle streams on one paused run: the server's memory for them; then
/// the run is approved and every stream must arrive whole.
async fn idle(args: &Args) -> Value {
    let (base, pid) = (args.text("url", ""), args.text("pid", ""));
    let subscribers = args.number("subscribers", 1000);
    let client = client();
    // Warm the server's pools and caches first, so they are not counted.
    let _ = watched_run(&client, &base, 10).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, run) = post(
        &client,
        &format!("{base}/v1/runs?wait=10"),
        &json!({"source": GATED}),
    )
    .await;
    let id = run["run_id"].as_str().unwrap().to_owned();
    let before = rss_kib(&pid);
    let tasks = caught_up(&client, &base, &id, subscribers).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = rss_kib(&pid);
    let sent = Instant::now();
    post(
        &client,
        &format!("{base}/v1/runs/{id}/approve"),
        &json!({"decision": "approve"}),
    )
    .await;
    let mut whole = true;
    let mut delays = Vec::new();
    for t in tasks {
        let got = t.await.unwrap();
        whole &= got.seqs == (0..got.seqs.len() as u64).collect::<Vec<_>>();
        delays.push(
            got.answered_at
                .map_or(f64::NAN, |at| (at - sent).as_secs_f64() * 1e3),
        );
    }
    json!({
        "mode": "idle", "subscribers": subscribers,
        "rss_before_kib": before, "rss_after_kib": after,
        "kib_per_idle_subscriber": (after.saturating_sub(before)) as f64 / subscribers as f64,
        "every_stream_whole": whole,
        "approve_to_event_p50_ms": quantile(&mut delays, 0.5),
        "approve_to_event_p99_ms": quantile(&mut delays, 0.99),
        "approve_to_all_closed_ms": sent.elapsed().as_secs_f64() * 1e3,
        "loadavg": loadavg(),
    })
}

fn main() {
    let (mode, args) = Args::parse();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let line = rt.block_on(async {
        match mode.as_str() {
            "throughput" => throughput(&args).await,
            "sse" => sse(&args).await,
            "idle" => idle(&args).await,
            _ => {
                json!({"usage": "api_load throughput|sse|idle --url URL ... (see the file's top)"})
            }
        }
    });
    println!("{line}");
}
