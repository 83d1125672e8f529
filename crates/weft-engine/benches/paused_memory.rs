//! Memory held per paused run: pauses 10,000 runs at an approval and measures the live
//! Rust heap (a counting allocator) and the resident set size before and after, then
//! answers and resumes them all. Prints one report; `cargo bench --bench paused_memory`.
//!
//! SQLite allocates with the system allocator, so the heap figure is what the engine
//! itself keeps; the RSS figure includes SQLite's page cache, which is bounded.

use serde_json::json;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Instant;
use weft_core::Flow;
use weft_core::ir::{ApprovalSpec, Block, BlockKind};
use weft_core::ports::RunStatus;
use weft_engine::{Engine, Prepared, RunOptions};
use weft_store::{Durability, SqliteStore};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn rss_bytes() -> i64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: i64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

const RUNS: usize = 10_000;

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing and wants speed.
    let runs = if std::env::args().any(|a| a == "--bench") {
        RUNS
    } else {
        100
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store =
        Arc::new(SqliteStore::open(dir.path().join("paused.db"), Durability::Process).unwrap());
    let engine = Engine::builder(store).build();
    let flow = Flow::new(
        "paused",
        Block::new(BlockKind::Approval(ApprovalSpec {
            prompt: None,
            options: vec!["approve".into(), "reject".into()],
        }))
        .with_id("ok"),
    );
    let prepared = Arc::new(Prepared::new(flow).unwrap());

    // Warm up caches, prepared statements and the runtime before measuring.
    for _ in 0..100 {
        let r = rt
            .block_on(async {
                engine
                    .start(prepared.clone(), None, RunOptions::default())
                    .await?
                    .end()
                    .await
            })
            .unwrap();
        rt.block_on(async {
            engine
                .answer(&r.run_id, None, json!({"decision": "approve"}))
                .await?
                .end()
                .await
        })
        .unwrap();
    }
    let (heap0, rss0) = (LIVE.load(Ordering::SeqCst), rss_bytes());
    let t = Instant::now();
    let mut ids = Vec::with_capacity(runs);
    for _ in 0..runs {
        let r = rt
            .block_on(async {
                engine
                    .start(prepared.clone(), None, RunOptions::default())
                    .await?
                    .end()
                    .await
            })
            .unwrap();
        assert_eq!(r.status, RunStatus::Paused);
        ids.push(r.run_id);
    }
    let suspend = t.elapsed();
    let ids_bytes = (ids.capacity() * std::mem::size_of::<String>()
        + ids.iter().map(|s| s.capacity()).sum::<usize>()) as isize;
    let (heap1, rss1) = (LIVE.load(Ordering::SeqCst), rss_bytes());
    let t = Instant::now();
    for id in &ids {
        let r = rt
            .block_on(async {
                engine
                    .answer(id, None, json!({"decision": "approve"}))
                    .await?
                    .end()
                    .await
            })
            .unwrap();
        assert_eq!(r.status, RunStatus::Completed);
    }
    let resume = t.elapsed();
    let held = (heap1 - heap0 - ids_bytes) as f64 / runs as f64;
    println!("paused runs:               {runs}");
    println!(
        "suspend (start to paused): {:.1} µs per run",
        suspend.as_secs_f64() * 1e6 / runs as f64
    );
    println!(
        "answer + resume to done:   {:.1} µs per run",
        resume.as_secs_f64() * 1e6 / runs as f64
    );
    println!(
        "engine heap held per paused run: {held:.1} bytes (live Rust heap delta, run ids excluded)"
    );
    println!(
        "process RSS delta per paused run: {:.1} bytes (includes SQLite's bounded page cache)",
        (rss1 - rss0) as f64 / runs as f64
    );
}
