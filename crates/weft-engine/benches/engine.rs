//! Engine overhead, in memory and with the durable SQLite journal.
//!
//! Each benchmark runs a whole flow; the per-block cost is the time divided by the
//! number of blocks (printed by `bench-report`, see docs/performance.md).

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_core::ir::{Block, BlockKind, HandlerSpec, LoopSpec, MapSpec, ValueTemplate};
use weft_core::ports::{Native, NativeCall, NativeOutput, RunStatus, Store};
use weft_core::{BlockError, Flow};
use weft_engine::{Engine, Prepared, RunOptions};
use weft_store::{Durability, MemoryStore, SqliteStore};

struct Noop;

#[async_trait::async_trait]
impl Native for Noop {
    async fn call(&self, call: NativeCall) -> Result<NativeOutput, BlockError> {
        Ok(NativeOutput::from(call.input))
    }
}

fn engine(store: Arc<dyn Store>) -> Engine {
    Engine::builder(store)
        .handler("noop", Arc::new(Noop))
        .build()
}

/// The same engine with runs' events kept out of the store.
fn engine_without_event_log(store: Arc<dyn Store>) -> Engine {
    Engine::builder(store)
        .handler("noop", Arc::new(Noop))
        .without_event_log()
        .build()
}

fn prepared(root: Block) -> Arc<Prepared> {
    Arc::new(Prepared::new(Flow::new("bench", root)).unwrap())
}

fn sequence_of(n: usize, leaf: impl Fn(usize) -> Block) -> Block {
    Block::new(BlockKind::Sequence((0..n).map(leaf).collect()))
}

fn handler(i: usize) -> Block {
    Block::new(BlockKind::Handler(HandlerSpec {
        name: "noop".into(),
        config: serde_json::Value::Null,
    }))
    .with_id(format!("h{i}"))
}

fn sqlite() -> (tempfile::TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("bench.db"), Durability::Process).unwrap();
    (dir, Arc::new(store))
}

fn run(rt: &tokio::runtime::Runtime, e: &Engine, p: &Arc<Prepared>) {
    let r = rt
        .block_on(async {
            e.start(p.clone(), Some(json!({"x": 1})), RunOptions::default())
                .await?
                .end()
                .await
        })
        .unwrap();
    assert_eq!(r.status, RunStatus::Completed, "{:?}", r.error);
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut g = c.benchmark_group("engine");
    g.sample_size(20)
        .measurement_time(Duration::from_secs(5))
        .warm_up_time(Duration::from_secs(1));

    let seq_pass = prepared(sequence_of(1000, |_| Block::new(BlockKind::Passthrough)));
    let mem = engine(Arc::new(MemoryStore::new()));
    g.throughput(Throughput::Elements(1000));
    g.bench_function(
        BenchmarkId::new("sequence_1000", "passthrough_memory"),
        |b| b.iter(|| run(&rt, &mem, &seq_pass)),
    );

    let mem_quiet = engine_without_event_log(Arc::new(MemoryStore::new()));
    g.bench_function(
        BenchmarkId::new("sequence_1000", "passthrough_memory_no_event_log"),
        |b| b.iter(|| run(&rt, &mem_quiet, &seq_pass)),
    );

    let seq_handler = prepared(sequence_of(1000, handler));
    g.bench_function(
        BenchmarkId::new("sequence_1000", "handler_memory_journal"),
        |b| b.iter(|| run(&rt, &mem, &seq_handler)),
    );
    let (_dir, sq) = sqlite();
    let durable = engine(sq);
    g.bench_function(
        BenchmarkId::new("sequence_1000", "handler_sqlite_journal"),
        |b| b.iter(|| run(&rt, &durable, &seq_handler)),
    );
    let (_dir_quiet, sq_quiet) = sqlite();
    let durable_quiet = engine_without_event_log(sq_quiet);
    g.bench_function(
        BenchmarkId::new("sequence_1000", "handler_sqlite_journal_no_event_log"),
        |b| b.iter(|| run(&rt, &durable_quiet, &seq_handler)),
    );
    // Ten runs at once: their steps share commits.
    g.throughput(Throughput::Elements(10_000));
    g.bench_function(
        BenchmarkId::new("sequence_1000_x10_concurrent", "handler_sqlite_journal"),
        |b| {
            b.iter(|| {
                rt.block_on(async {
                    let runs = (0..10).map(|_| async {
                        durable
                            .start(seq_handler.clone(), None, RunOptions::default())
                            .await?
                            .end()
                            .await
                    });
                    for r in futures::future::join_all(runs).await {
                        assert_eq!(r.unwrap().status, RunStatus::Completed);
                    }
                })
            })
        },
    );
    g.throughput(Throughput::Elements(1000));

    let items: Vec<serde_json::Value> = (0..10_000).map(|i| json!(i)).collect();
    let fan = prepared(Block::new(BlockKind::Sequence(vec![
        Block::new(BlockKind::Map(MapSpec {
            items: ValueTemplate(json!("{{ input.items }}")),
            item_var: "item".into(),
            index_var: "index".into(),
            item_input: None,
            body: Box::new(Block::new(BlockKind::Passthrough)),
            max_concurrency: None,
            fail_fast: false,
            on_error: Default::default(),
            isolate: false,
        })),
        // Fan-in: one block that sees every branch's result.
        Block::new(BlockKind::Transform(weft_core::ir::TransformSpec {
            output: ValueTemplate(json!("{{ input | length }}")),
            exit: None,
        })),
    ])));
    let fan_input = json!({"items": items});
    g.throughput(Throughput::Elements(10_000));
    g.bench_function(
        BenchmarkId::new("map_fanout_10000", "passthrough_memory"),
        |b| {
            b.iter(|| {
                let r = rt
                    .block_on(async {
                        mem.start(fan.clone(), Some(fan_input.clone()), RunOptions::default())
                            .await?
                            .end()
                            .await
                    })
                    .unwrap();
                assert_eq!(r.output.unwrap(), json!(10_000));
            })
        },
    );

    let looped = prepared(Block::new(BlockKind::Loop(LoopSpec {
        body: Box::new(Block::new(BlockKind::Passthrough)),
        max_iterations: 10_000,
        while_: None,
        until: None,
        fail_at_max: false,
        warn_at_max: false,
    })));
    g.bench_function(BenchmarkId::new("loop_10000", "passthrough_memory"), |b| {
        b.iter(|| run(&rt, &mem, &looped))
    });
    let looped_cond = prepared(Block::new(BlockKind::Loop(LoopSpec {
        body: Box::new(Block::new(BlockKind::Passthrough)),
        max_iterations: 10_000,
        while_: Some(weft_core::ir::Expr("iteration < 100000".into())),
        until: None,
        fail_at_max: false,
        warn_at_max: false,
    })));
    g.bench_function(
        BenchmarkId::new("loop_10000", "passthrough_while_condition_memory"),
        |b| b.iter(|| run(&rt, &mem, &looped_cond)),
    );

    // The library API's closures: the same loop, its condition a host function.
    let native_cond = prepared(Block::new(BlockKind::Loop(LoopSpec {
        body: Box::new(Block::new(BlockKind::Passthrough)),
        max_iterations: 10_000,
        while_: Some(weft_core::ir::Expr(
            "native('below', iteration, 100000)".into(),
        )),
        until: None,
        fail_at_max: false,
        warn_at_max: false,
    })));
    let with_functions = Engine::builder(Arc::new(MemoryStore::new()))
        .function("below", |args| {
            Ok(json!(args[0].as_u64() < args[1].as_u64()))
        })
        .build();
    g.bench_function(
        BenchmarkId::new("loop_10000", "passthrough_native_condition_memory"),
        |b| b.iter(|| run(&rt, &with_functions, &native_cond)),
    );

    // Suspend and resume: each run pauses at an approval, and is answered and resumed.
    let approval = prepared(Block::new(BlockKind::Sequence(vec![
        handler(0),
        Block::new(BlockKind::Approval(weft_core::ir::ApprovalSpec {
            prompt: None,
            options: vec!["approve".into(), "reject".into()],
        }))
        .with_id("ok"),
        handler(1),
    ])));
    let (_dir2, sq2) = sqlite();
    let pausing = engine(sq2);
    g.throughput(Throughput::Elements(1));
    g.bench_function(
        BenchmarkId::new("approval", "suspend_and_resume_sqlite"),
        |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    let r = rt
                        .block_on(async {
                            pausing
                                .start(approval.clone(), None, RunOptions::default())
                                .await?
                                .end()
                                .await
                        })
                        .unwrap();
                    assert_eq!(r.status, RunStatus::Paused);
                    let r = rt
                        .block_on(async {
                            pausing
                                .answer(&r.run_id, None, json!({"decision": "approve"}))
                                .await?
                                .end()
                                .await
                        })
                        .unwrap();
                    assert_eq!(r.status, RunStatus::Completed);
                }
                start.elapsed()
            })
        },
    );
    g.finish();
}

criterion_group!(engine_benches, benches);
criterion_main!(engine_benches);
