//! Per-call cost of a trivial code block: Lua in process, Python through the worker
//! pool, Python in process (monty alone, for reference), and CPython in a subprocess.

use criterion::{Criterion, criterion_group, criterion_main};
use monty::MontyRun;
use monty_types::{CompileOptions, MontyObject, PrintWriter, ResourceTracker};
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;
use weft_code::{Sandboxes, WorkerCommand};
use weft_core::ir::CodeLimits;
use weft_core::ports::{CodeRequest, CodeRunner};

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let worker = PathBuf::from(env!("CARGO_BIN_EXE_weft-sandbox-worker"));
    let sandboxes = Sandboxes::new(
        WorkerCommand {
            program: worker,
            args: vec![],
        },
        1,
    );
    let limits = CodeLimits::default();
    let mut g = c.benchmark_group("code");
    g.sample_size(30)
        .measurement_time(Duration::from_secs(4))
        .warm_up_time(Duration::from_secs(1));

    // As the engine calls it: from inside a running task, so no runtime entry per call.
    // Each language's own way of saying "x + 1" for x = 41.
    let per_call =
        |language: &'static str, source: &'static str, limits: &CodeLimits, iters: u64| {
            let (args, expected) = match language {
                "prolog" => (json!({"state": {"x": 41}}), json!({"y": 42})),
                _ => (json!({"x": 41}), json!(42)),
            };
            rt.block_on(async {
                let start = std::time::Instant::now();
                for _ in 0..iters {
                    let req = CodeRequest {
                        language,
                        source,
                        entry: None,
                        args: args.clone().into(),
                        imports: None,
                        builtins: None,
                        limits,
                    };
                    assert_eq!(sandboxes.run(req).await.unwrap(), expected);
                }
                start.elapsed()
            })
        };
    let short = CodeLimits {
        time_ms: weft_code::INLINE_MAX_MS,
        ..CodeLimits::default()
    };
    g.bench_function("lua_in_process", |b| {
        b.iter_custom(|n| per_call("lua", "return x + 1", &limits, n))
    });
    g.bench_function("lua_in_process_short_time_limit", |b| {
        b.iter_custom(|n| per_call("lua", "return x + 1", &short, n))
    });
    g.bench_function("prolog_worker_process", |b| {
        b.iter_custom(|n| {
            per_call(
                "prolog",
                "state(x, X), Y is X + 1, return(y, Y).",
                &limits,
                n,
            )
        })
    });
    g.bench_function("python_worker_process", |b| {
        b.iter_custom(|n| per_call("python", "x + 1", &limits, n))
    });
    let lua = weft_code::LuaPool::default();
    let args = weft_core::value::Shared::from(json!({"x": 41}));
    g.bench_function("lua_pool_without_runtime", |b| {
        b.iter(|| {
            assert_eq!(
                lua.run("return x + 1", None, &args, &limits).unwrap(),
                json!(42)
            )
        })
    });

    let compiled = MontyRun::new(
        "x + 1".into(),
        "b.py",
        vec!["x".into()],
        CompileOptions::default(),
    )
    .unwrap();
    g.bench_function("python_in_process_monty_precompiled", |b| {
        b.iter(|| {
            let r = compiled
                .run(
                    vec![MontyObject::Int(41)],
                    ResourceTracker::default(),
                    PrintWriter::Disabled,
                )
                .unwrap();
            assert_eq!(r, MontyObject::Int(42));
        })
    });
    g.bench_function("python_in_process_monty_parse_and_run", |b| {
        b.iter(|| {
            let run = MontyRun::new(
                "x + 1".into(),
                "b.py",
                vec!["x".into()],
                CompileOptions::default(),
            )
            .unwrap();
            run.run(
                vec![MontyObject::Int(41)],
                ResourceTracker::default(),
                PrintWriter::Disabled,
            )
            .unwrap()
        })
    });

    if Command::new("python3")
        .arg("-c")
        .arg("pass")
        .status()
        .is_ok_and(|s| s.success())
    {
        g.sample_size(10);
        g.bench_function("cpython_subprocess", |b| {
            b.iter(|| {
                let mut child = Command::new("python3")
                    .args([
                        "-c",
                        "import json,sys; a = json.load(sys.stdin); print(json.dumps(a['x'] + 1))",
                    ])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap();
                child
                    .stdin
                    .take()
                    .unwrap()
                    .write_all(br#"{"x": 41}"#)
                    .unwrap();
                let out = child.wait_with_output().unwrap();
                assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "42");
            })
        });
    }
    g.finish();
}

criterion_group!(code_benches, benches);
criterion_main!(code_benches);
