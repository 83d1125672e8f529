//! The sandboxes: calling conventions from the specs, limits, and an escape suite run in
//! one process that must still serve a normal block afterwards.

use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_code::{FileAccess, LuaCall, LuaPool, Sandboxes, WorkerCommand};
use weft_core::ir::CodeLimits;
use weft_core::ports::{CodeRequest, CodeRunner};
use weft_core::value::{Shared, SharedMap};
use weft_core::{BlockError, ErrorKind};

fn sandboxes() -> Sandboxes {
    sandboxes_of(2)
}

/// Sandboxes with `workers` Python workers (one, for a test that needs every call to
/// reach the same worker).
fn sandboxes_of(workers: usize) -> Sandboxes {
    Sandboxes::new(
        WorkerCommand {
            program: PathBuf::from(env!("CARGO_BIN_EXE_weft-sandbox-worker")),
            args: vec![],
        },
        workers,
    )
}

fn limits() -> CodeLimits {
    CodeLimits {
        time_ms: 1000,
        memory_bytes: 64 << 20,
        max_depth: 200,
        output_bytes: 1 << 20,
    }
}

async fn run(
    s: &dyn CodeRunner,
    language: &str,
    source: &str,
    entry: Option<&str>,
    args: impl Into<Shared>,
) -> Result<Value, BlockError> {
    let limits = limits();
    s.run(CodeRequest {
        language,
        source,
        entry,
        args: args.into(),
        imports: None,
        builtins: None,
        limits: &limits,
    })
    .await
}

/// [`run`] with two minutes to spare: for work a debug build is slow at (loading a
/// Prolog library, reading a very large request).
async fn run_patiently(
    s: &dyn CodeRunner,
    language: &str,
    source: &str,
    args: Value,
) -> Result<Value, BlockError> {
    let limits = CodeLimits {
        time_ms: 120_000,
        ..limits()
    };
    s.run(CodeRequest {
        language,
        source,
        entry: None,
        args: args.into(),
        imports: None,
        builtins: None,
        limits: &limits,
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_scripts_return_their_last_expression() {
    let s = sandboxes();
    let v = run(
        &s,
        "python",
        "x = a + b\n{'sum': x, 'words': 'hello world'.split()}",
        None,
        json!({"a": 2, "b": 3}),
    )
    .await
    .unwrap();
    assert_eq!(v, json!({"sum": 5, "words": ["hello", "world"]}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_the_blocks_wrapper_convention() {
    // Spec 000: the runtime wraps the body as def _block(initial, <input fields in order>)
    // and calls _block(initial=<flow input>, **pipeline_input).
    let s = sandboxes();
    let body = "full_name = first_name + ' ' + last_name\nreturn {'full_name': full_name, 'is_adult': age >= 18}";
    let indented: String = body.lines().map(|l| format!("    {l}\n")).collect();
    let source = format!("def _block(initial, first_name, last_name, age):\n{indented}");
    let args = json!({"initial": {"source": "form"}, "first_name": "Ada", "last_name": "Lovelace", "age": 36});
    let v = run(&s, "python", &source, Some("_block"), args)
        .await
        .unwrap();
    assert_eq!(v, json!({"full_name": "Ada Lovelace", "is_adult": true}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_the_souls_main_convention() {
    // Spec 001: `def main(data)` receives results, metadata and shared_memory.
    let s = sandboxes();
    let source = "import json\ndef main(data):\n    return {'count': len(data.get('results', {})), 'exit_handle': 'done', 'dump': json.dumps(data['metadata'])}";
    let args =
        json!({"data": {"results": {"a": 1, "b": 2}, "metadata": {"k": 1}, "shared_memory": {}}});
    let v = run(&s, "python", source, Some("main"), args).await.unwrap();
    assert_eq!(
        v,
        json!({"count": 2, "exit_handle": "done", "dump": "{\"k\": 1}"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_methods_may_be_handed_around_as_values() {
    // Issue 20: `max(scores, key=scores.get)`, as TEA's examples write it.
    let s = sandboxes();
    let v = run(
        &s,
        "python",
        "best = max(scores, key=scores.get)\nseen = []\nlist(map(seen.append, [1, 2]))\n{'best': best, 'seen': seen}",
        None,
        json!({"scores": {"low": 1, "high": 9}}),
    )
    .await
    .unwrap();
    assert_eq!(v, json!({"best": "high", "seen": [1, 2]}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_random_is_seedable_and_draws_within_its_bounds() {
    // Issue 20: TEA's examples `import random`; a seed makes the draws repeatable.
    let s = sandboxes();
    let code = r#"
import random
from random import randint as ri
random.seed(seed)
xs = [ri(1, 6) for _ in range(200)]
deck = list(range(10))
random.shuffle(deck)
f = random.random()
{"xs": xs, "deck": deck, "f": f, "pick": random.choice(["a", "b"]),
 "sample": random.sample([1, 2, 3, 4], 2), "r": random.randrange(0, 10, 5)}
"#;
    let a = run(&s, "python", code, None, json!({"seed": 7}))
        .await
        .unwrap();
    let b = run(&s, "python", code, None, json!({"seed": 7}))
        .await
        .unwrap();
    let c = run(&s, "python", code, None, json!({"seed": 8}))
        .await
        .unwrap();
    assert_eq!(a, b, "the same seed draws the same");
    assert_ne!(a["xs"], c["xs"]);
    let xs: Vec<i64> = a["xs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect();
    assert!(xs.iter().all(|x| (1..=6).contains(x)), "{xs:?}");
    assert!(
        (1..=6).all(|face| xs.contains(&face)),
        "every face comes up: {xs:?}"
    );
    let mut deck: Vec<i64> = a["deck"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect();
    assert_ne!(deck, (0..10).collect::<Vec<_>>(), "shuffled");
    deck.sort();
    assert_eq!(deck, (0..10).collect::<Vec<_>>(), "a permutation");
    let f = a["f"].as_f64().unwrap();
    assert!((0.0..1.0).contains(&f));
    assert!([json!(0), json!(5)].contains(&a["r"]));
    assert_eq!(a["sample"].as_array().unwrap().len(), 2);
    let unseeded = "import random\n[random.random() for _ in range(3)]";
    let first = run(&s, "python", unseeded, None, json!({})).await.unwrap();
    let second = run(&s, "python", unseeded, None, json!({})).await.unwrap();
    assert_ne!(first, second, "unseeded draws start from fresh entropy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lua_the_tea_counter_body() {
    // Spec 004's counter example, one iteration.
    let s = sandboxes();
    let source = "local count = state.count or 0\nlocal sum = state.sum or 0\nreturn { count = count + 1, sum = sum + count + 1 }";
    let v = run(
        &s,
        "lua",
        source,
        None,
        json!({"state": {"count": 2, "sum": 3}}),
    )
    .await
    .unwrap();
    assert_eq!(v, json!({"count": 3, "sum": 6}));
    let v = run(
        &s,
        "lua",
        "function double(a) return a.n * 2 end",
        Some("double"),
        json!({"n": 21}),
    )
    .await
    .unwrap();
    assert_eq!(v, json!(42));
}

/// A busy Lua block holds the async thread it started on for its first slice only: with
/// a single runtime worker, another task keeps running while the block spins (it would
/// not run at all if the block held the worker to its end), also when the block spins
/// inside a coroutine of its own (which the hook cannot suspend: such code is handed
/// off at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_busy_lua_block_lets_the_runtime_run_other_tasks() {
    for source in [
        "while true do end",
        "return coroutine.wrap(function() while true do end end)()",
    ] {
        let ticks = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let ticker = {
            let ticks = ticks.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    ticks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            })
        };
        tokio::task::yield_now().await;
        // On the runtime's one worker, beside the ticker (the test's body runs elsewhere).
        let block = tokio::spawn(async move {
            let spin = CodeLimits {
                time_ms: 400,
                ..limits()
            };
            sandboxes()
                .run(CodeRequest {
                    language: "lua",
                    source,
                    entry: None,
                    args: json!({}).into(),
                    imports: None,
                    builtins: None,
                    limits: &spin,
                })
                .await
        });
        let e = block.await.unwrap().unwrap_err();
        let seen = ticks.load(std::sync::atomic::Ordering::Relaxed);
        ticker.abort();
        assert_eq!(e.kind, ErrorKind::Timeout, "{source}: {}", e.message);
        assert!(
            seen >= 5,
            "{source}: the other task ran {seen} times in 400 ms"
        );
    }
}

#[test]
fn lua_a_call_past_its_first_slice_is_suspended_then_finished() {
    let pool = LuaPool::default();
    let none = Shared::from(json!({}));
    let start = |source: &str| pool.start(source, None, &none, &limits(), Some(Duration::ZERO));
    // A call longer than its slice stops at the hook's first check, and finishes with
    // its own result.
    let long = "local n = 0 for i = 1, 100000 do n = n + i end return n";
    let LuaCall::Unfinished(call) = start(long) else {
        panic!("a call past its slice is suspended");
    };
    assert_eq!(pool.finish(call).unwrap(), json!(5000050000u64));
    // One that ends within the hook's first thousand instructions is done at once.
    assert!(matches!(start("return 1"), LuaCall::Done(Ok(v)) if v == json!(1)));
    // Code that names the coroutine library is not started under a slice: it runs whole
    // where it is finished (as a plain call, where nothing is yieldable).
    let named = start("return coroutine.isyieldable()");
    let LuaCall::Unfinished(call) = named else {
        panic!("code making coroutines of its own is handed off before it starts");
    };
    assert_eq!(pool.finish(call).unwrap(), json!(false));
    // Code reaching the library under another name is sliced, and its own coroutines are
    // never the ones suspended: their `resume` sees only their own yields.
    let own = "local c = _ENV['co' .. 'routine']
      local co = c.wrap(function()
        for i = 1, 3 do local s = 0 for j = 1, 20000 do s = s + j end c.yield(s + i) end
      end)
      return {co(), co(), co()}";
    let value = match start(own) {
        LuaCall::Done(r) => r.unwrap(),
        LuaCall::Unfinished(call) => pool.finish(call).unwrap(),
    };
    assert_eq!(value, json!([200010001u64, 200010002u64, 200010003u64]));
    // A yield outside any coroutine the code made fails, as a plain call of the chunk
    // failed, sliced or not.
    let yields = [
        "coroutine.yield(1) return 2",
        "_ENV['co' .. 'routine'].yield(1) return 2",
    ];
    for (source, slice) in yields
        .into_iter()
        .flat_map(|s| [(s, None), (s, Some(Duration::ZERO))])
    {
        let e = match pool.start(source, None, &none, &limits(), slice) {
            LuaCall::Done(r) => r.unwrap_err(),
            LuaCall::Unfinished(call) => pool.finish(call).unwrap_err(),
        };
        assert!(
            e.message.contains("outside a coroutine"),
            "{source}: {}",
            e.message
        );
    }
    // The time limit holds across the slices.
    let short = CodeLimits {
        time_ms: 50,
        ..limits()
    };
    let started = Instant::now();
    let e = match pool.start(
        "while true do end",
        None,
        &none,
        &short,
        Some(Duration::ZERO),
    ) {
        LuaCall::Done(r) => r.unwrap_err(),
        LuaCall::Unfinished(call) => pool.finish(call).unwrap_err(),
    };
    assert!(e.message.contains("time limit"), "{}", e.message);
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lua_calls_do_not_see_each_others_globals() {
    let s = sandboxes();
    run(&s, "lua", "leak = 'secret'; return 1", None, json!({}))
        .await
        .unwrap();
    let v = run(&s, "lua", "return leak == nil", None, json!({}))
        .await
        .unwrap();
    assert_eq!(v, json!(true));
    // How a call's environment reaches its chunk is out of the code's reach, and the
    // chunk is called with no arguments.
    let v = run(
        &s,
        "lua",
        "return {hidden = __weft_environment == nil, args = select('#', ...)}",
        None,
        json!({}),
    )
    .await
    .unwrap();
    assert_eq!(v, json!({"hidden": true, "args": 0}));
    // Nor can a call change the environment the next call gets.
    let _ = run(
        &s,
        "lua",
        "local m = getmetatable(_ENV); if m then m.__index = {} end; return 1",
        None,
        json!({}),
    )
    .await;
    let v = run(&s, "lua", "return string.upper('x')", None, json!({}))
        .await
        .unwrap();
    assert_eq!(v, json!("X"));
    // A syntax error names the source's own line.
    let e = run(&s, "lua", "local a = 1\nreturn a +", None, json!({}))
        .await
        .unwrap_err();
    assert!(e.message.contains("line 2"), "{}", e.message);
}

/// (language, source, expected error kind, a word the message must contain)
const HOSTILE: &[(&str, &str, ErrorKind, &str)] = &[
    // Python: the host's files, processes, network and environment.
    (
        "python",
        "open('/etc/passwd').read()",
        ErrorKind::Code,
        "PermissionError",
    ),
    (
        "python",
        "import os\nos.environ['HOME']",
        ErrorKind::Code,
        "KeyError",
    ),
    ("python", "import os\nos.system('id')", ErrorKind::Code, ""),
    (
        "python",
        "import os\nos.environ['HOME']",
        ErrorKind::Code,
        "",
    ),
    (
        "python",
        "from pathlib import Path\nPath('/etc/passwd').read_text()",
        ErrorKind::Code,
        "PermissionError",
    ),
    ("python", "import subprocess", ErrorKind::Code, "subprocess"),
    ("python", "import socket", ErrorKind::Code, "socket"),
    ("python", "import ctypes", ErrorKind::Code, "ctypes"),
    ("python", "import urllib.request", ErrorKind::Code, ""),
    ("python", "import sys\nsys.modules", ErrorKind::Code, ""),
    // Python: evaluation of strings and the import machinery.
    ("python", "eval('1+1')", ErrorKind::Code, ""),
    ("python", "exec('x = 1')", ErrorKind::Code, ""),
    (
        "python",
        "__import__('o' + 's')",
        ErrorKind::Code,
        "__import__",
    ),
    ("python", "compile('1', 'x', 'eval')", ErrorKind::Code, ""),
    (
        "python",
        "getattr(__builtins__, 'open')('/etc/passwd')",
        ErrorKind::Code,
        "",
    ),
    ("python", "globals()['__builtins__']", ErrorKind::Code, ""),
    ("python", "breakpoint()", ErrorKind::Code, ""),
    ("python", "input()", ErrorKind::Code, ""),
    // Python: object-model walks.
    (
        "python",
        "().__class__.__bases__[0].__subclasses__()",
        ErrorKind::Code,
        "",
    ),
    ("python", "object.__subclasses__()", ErrorKind::Code, ""),
    ("python", "(lambda: 0).__globals__", ErrorKind::Code, ""),
    (
        "python",
        "{}.__class__.__init__.__globals__",
        ErrorKind::Code,
        "",
    ),
    (
        "python",
        "type(1).__mro__[-1].__subclasses__()",
        ErrorKind::Code,
        "",
    ),
    (
        "python",
        "getattr(1, '__cla' + 'ss__')",
        ErrorKind::Code,
        "",
    ),
    // Python: exhausting the host.
    (
        "python",
        "while True:\n    pass",
        ErrorKind::Timeout,
        "time",
    ),
    (
        "python",
        "def f():\n    return f()\nf()",
        ErrorKind::Code,
        "Recursion",
    ),
    ("python", "'x' * (10 ** 10)", ErrorKind::Code, ""),
    ("python", "[0] * (10 ** 10)", ErrorKind::Code, ""),
    (
        "python",
        "x = 2\nwhile True:\n    x = x * x",
        ErrorKind::Code,
        "",
    ),
    ("python", "sum(range(10 ** 13))", ErrorKind::Timeout, "time"),
    (
        "python",
        "'x' * (3 * 10 ** 6)",
        ErrorKind::Code,
        "output limit",
    ),
    (
        "python",
        "raise SystemExit('bye')",
        ErrorKind::Code,
        "SystemExit",
    ),
    ("python", "exit()", ErrorKind::Code, ""),
    // Lua: the host.
    ("lua", "return os.execute('id')", ErrorKind::Code, "os"),
    (
        "lua",
        "return io.open('/etc/passwd')",
        ErrorKind::Code,
        "io",
    ),
    ("lua", "return require('os')", ErrorKind::Code, "require"),
    ("lua", "return load('return 1')()", ErrorKind::Code, "load"),
    (
        "lua",
        "return dofile('/etc/passwd')",
        ErrorKind::Code,
        "dofile",
    ),
    (
        "lua",
        "return loadfile('/etc/passwd')",
        ErrorKind::Code,
        "loadfile",
    ),
    (
        "lua",
        "return package.loadlib('libc.so.6', 'system')",
        ErrorKind::Code,
        "package",
    ),
    (
        "lua",
        "return debug.getregistry()",
        ErrorKind::Code,
        "debug",
    ),
    (
        "lua",
        "return string.dump(function() end)",
        ErrorKind::Code,
        "dump",
    ),
    // Lua: metatables and shared libraries.
    (
        "lua",
        "getmetatable('').__index.upper = nil",
        ErrorKind::Code,
        "",
    ),
    ("lua", "string.upper = nil", ErrorKind::Code, "read-only"),
    (
        "lua",
        "rawset(string, 'upper', nil)",
        ErrorKind::Code,
        "rawset",
    ),
    (
        "lua",
        "setmetatable(string, {})",
        ErrorKind::Code,
        "protected",
    ),
    (
        "lua",
        "collectgarbage('stop')",
        ErrorKind::Code,
        "collectgarbage",
    ),
    // Lua: exhausting the host.
    ("lua", "while true do end", ErrorKind::Timeout, "time"),
    (
        "lua",
        "local function f() return f() end return f()",
        ErrorKind::Timeout,
        "time",
    ),
    (
        "lua",
        "local function f() return 1 + f() end return f()",
        ErrorKind::Code,
        "recursion limit",
    ),
    (
        "lua",
        "return coroutine.wrap(function() while true do end end)()",
        ErrorKind::Timeout,
        "time",
    ),
    (
        "lua",
        "return string.rep('x', 2 ^ 28)",
        ErrorKind::Code,
        "memory",
    ),
    (
        "lua",
        "return string.rep('x', 2 ^ 31)",
        ErrorKind::Code,
        "too large",
    ),
    (
        "lua",
        "local t = {} for i = 1, 1e9 do t[i] = i end",
        ErrorKind::Code,
        "memory",
    ),
    (
        "lua",
        "return string.rep('x', 3 * 1024 * 1024)",
        ErrorKind::Code,
        "output limit",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_code_ends_in_named_errors_and_the_host_stays_healthy() {
    let s = sandboxes();
    let mut failures = Vec::new();
    for (language, source, kind, word) in HOSTILE {
        let started = Instant::now();
        let r = run(&s, language, source, None, json!({})).await;
        let elapsed = started.elapsed();
        match r {
            Ok(v) => failures.push(format!("{language} `{source}` succeeded with {v}")),
            Err(e) => {
                if std::env::var_os("WEFT_SHOW").is_some() {
                    eprintln!(
                        "{language:6} {:<55} -> {} {} ({elapsed:.0?})",
                        source.replace('\n', "; "),
                        e.kind,
                        e.message
                    );
                }
                if e.kind != *kind || !e.message.contains(word) || e.message.is_empty() {
                    failures.push(format!(
                        "{language} `{source}`: got {:?} {:?}",
                        e.kind, e.message
                    ));
                }
            }
        }
        // Every limit holds: the time limit is 1 s, plus the worker's grace period.
        if elapsed > Duration::from_secs(3) {
            failures.push(format!("{language} `{source}` took {elapsed:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} snippets misbehaved:\n{}",
        failures.len(),
        HOSTILE.len(),
        failures.join("\n")
    );
    assert!(HOSTILE.len() >= 40);
    // The same process, the same sandboxes, still serve ordinary blocks.
    assert_eq!(
        run(&s, "python", "1 + 1", None, json!({})).await.unwrap(),
        json!(2)
    );
    assert_eq!(
        run(&s, "lua", "return 1 + 1", None, json!({}))
            .await
            .unwrap(),
        json!(2)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn syntax_errors_name_their_line() {
    let s = sandboxes();
    let e = run(&s, "python", "x = 1\ny = (\n", None, json!({}))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Code);
    let e = run(&s, "lua", "local x = 1\nreturn x +", None, json!({}))
        .await
        .unwrap_err();
    assert!(e.message.contains("line 2"), "{}", e.message);
    let e = run(
        &s,
        "python",
        "x = 1\nraise ValueError('bad value')",
        None,
        json!({}),
    )
    .await
    .unwrap_err();
    assert!(e.message.contains("ValueError: bad value"), "{}", e.message);
    assert!(e.message.contains("line 2"), "{}", e.message);
}

async fn run_restricted(
    s: &Sandboxes,
    source: &str,
    entry: Option<&str>,
    args: Value,
    imports: Option<&[String]>,
    builtins: Option<&[String]>,
) -> Result<Value, BlockError> {
    let limits = limits();
    s.run(CodeRequest {
        language: "python",
        source,
        entry,
        args: args.into(),
        imports,
        builtins,
        limits: &limits,
    })
    .await
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spec_000_allows_only_its_builtins_and_no_import() {
    // Spec 000: "Allowed builtins: abs, bool, dict, enumerate, float, int, isinstance, len,
    // list, max, min, range, reversed, round, set, sorted, str, sum, tuple, zip" and
    // "No import statements ... No getattr, type, vars, dir".
    let s = sandboxes();
    let allowed = names(&[
        "abs",
        "bool",
        "dict",
        "enumerate",
        "float",
        "int",
        "isinstance",
        "len",
        "list",
        "max",
        "min",
        "range",
        "reversed",
        "round",
        "set",
        "sorted",
        "str",
        "sum",
        "tuple",
        "zip",
    ]);
    let ok = "def _block(initial, xs):\n    return {'total': sum(xs), 'n': len(xs)}";
    let v = run_restricted(
        &s,
        ok,
        Some("_block"),
        json!({"initial": {}, "xs": [1, 2, 3]}),
        Some(&[]),
        Some(&allowed),
    )
    .await
    .unwrap();
    assert_eq!(v, json!({"total": 6, "n": 3}));
    for (body, name) in [
        ("import json\n    return {}", "json"),
        ("return {'t': type(xs)}", "type"),
        ("return {'a': getattr(xs, 'append')}", "getattr"),
        ("return {'v': vars()}", "vars"),
        ("return {'d': dir()}", "dir"),
        ("return {'f': open('x')}", "open"),
        ("return {'e': eval('1')}", "eval"),
        ("print(xs)\n    return {}", "print"),
    ] {
        let source = format!("def _block(initial, xs):\n    {body}");
        let e = run_restricted(
            &s,
            &source,
            Some("_block"),
            json!({"initial": {}, "xs": [1]}),
            Some(&[]),
            Some(&allowed),
        )
        .await
        .unwrap_err();
        assert!(
            e.message.contains(&format!("`{name}`")) && e.message.contains("line 2"),
            "{name}: {}",
            e.message
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spec_001_default_imports_all_work() {
    // Spec 001's default `allowed_imports`: json, re, math, datetime, collections,
    // itertools, hashlib, base64, time, urllib.parse. monty lacks hashlib, time and
    // urllib.parse; Weft provides them. Expected values are CPython 3.11's.
    let s = sandboxes();
    let allowed = names(&[
        "json",
        "re",
        "math",
        "datetime",
        "collections",
        "itertools",
        "hashlib",
        "base64",
        "time",
        "urllib.parse",
    ]);
    let code = r#"
import json, re, math, datetime, collections, itertools, base64
import hashlib, time
from urllib.parse import urlencode, urlparse, quote, parse_qs, urljoin

def main(data):
    started = time.monotonic()
    url = urlparse(data['results']['fetch']['url'])
    digest = hashlib.sha256(json.dumps(data['metadata'], sort_keys=True).encode()).hexdigest()
    counts = collections.Counter(re.findall(r'[a-z]+', 'a b a c'))
    return {
        'host': url.netloc,
        'query': parse_qs(url.query),
        'next': urljoin(data['results']['fetch']['url'], '../other?page=2'),
        'link': 'https://example.com/search?' + urlencode({'q': 'weft & warp', 'n': 2}),
        'path': quote('/a b/ü'),
        'digest': digest[:16],
        'counts': dict(counts),
        'pairs': list(itertools.pairwise([1, 2, 3])),
        'b64': base64.b64encode(b'weft').decode(),
        'sqrt': math.sqrt(16),
        'year_ok': datetime.date.today().year >= 2025 and datetime.datetime.utcnow().year >= 2025,
        'printed': print('to stderr', file=None) is None,
        'clock_ok': time.time() > 1.7e9 and time.monotonic() >= started,
    }
"#;
    let args = json!({"data": {
        "results": {"fetch": {"url": "https://api.example.com/v1/items/list?tag=a&tag=b&limit=10"}},
        "metadata": {"run": 7, "flow": "demo"},
        "shared_memory": {},
    }});
    let v = run_restricted(&s, code, Some("main"), args, Some(&allowed), None)
        .await
        .unwrap();
    assert_eq!(
        v,
        json!({
            "host": "api.example.com",
            "query": {"tag": ["a", "b"], "limit": ["10"]},
            "next": "https://api.example.com/v1/other?page=2",
            "link": "https://example.com/search?q=weft+%26+warp&n=2",
            "path": "/a%20b/%C3%BC",
            "digest": "f28446e9498f3d8b",
            "counts": {"a": 2, "b": 1, "c": 1},
            "pairs": [[1, 2], [2, 3]],
            "b64": "d2VmdA==",
            "sqrt": 4.0,
            "year_ok": true,
            "printed": true,
            "clock_ok": true,
        })
    );
    // A provided module keeps the block's own line numbers in errors, and a sleep past
    // the block's deadline is its time limit.
    let e = run(
        &s,
        "python",
        "import hashlib

hashlib.sha256('text')",
        None,
        json!({}),
    )
    .await
    .unwrap_err();
    assert!(
        e.message.contains("Strings must be encoded") && e.message.contains("line 3"),
        "{}",
        e.message
    );
    let started = Instant::now();
    let e = run(
        &s,
        "python",
        "import time
time.sleep(60)",
        None,
        json!({}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Timeout, "{}", e.message);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spec_001_allowed_imports_are_the_only_importable_modules() {
    // Spec 001: `allowed_imports` is a "Whitelist of importable modules".
    let s = sandboxes();
    let allowed = names(&["json", "re", "math"]);
    let ok = "import json, math\ndef main(data):\n    return {'r': math.floor(2.5), 'j': json.dumps([1])}";
    let v = run_restricted(
        &s,
        ok,
        Some("main"),
        json!({"data": {}}),
        Some(&allowed),
        None,
    )
    .await
    .unwrap();
    assert_eq!(v, json!({"r": 2, "j": "[1]"}));
    let bad = "import json\nimport base64\ndef main(data):\n    return {}";
    assert_import_refused(&s, bad, &allowed, "`base64`").await;
    // `__import__('name')` is an import like any other: allowed or refused by name.
    let dynamic =
        "def main(data):\n    return __import__('math').floor(__import__('time').time()) > 0";
    let v = run_restricted(&s, dynamic, Some("main"), json!({"data": {}}), None, None)
        .await
        .unwrap();
    assert_eq!(v, json!(true));
    assert_import_refused(&s, dynamic, &allowed, "`time`").await;
}

/// `code`'s `main` is refused for importing `module` (named with its line, 2) when only
/// `allowed` may be imported.
async fn assert_import_refused(s: &Sandboxes, code: &str, allowed: &[String], module: &str) {
    let e = run_restricted(
        s,
        code,
        Some("main"),
        json!({"data": {}}),
        Some(allowed),
        None,
    )
    .await
    .unwrap_err();
    assert!(
        e.message.contains(module) && e.message.contains("line 2"),
        "{}",
        e.message
    );
}

#[test]
fn worker_processes_run_under_seccomp() {
    use std::io::{BufRead, Write};
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_weft-sandbox-worker"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let req = json!({"id": 1, "language": "python", "source": "1 + 1", "entry": null, "args": {}, "limits": limits()});
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{req}").unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut ready = String::new();
    out.read_line(&mut ready).unwrap();
    assert_eq!(ready.trim(), r#"{"ready":true}"#);
    let mut answer = String::new();
    out.read_line(&mut answer).unwrap();
    assert!(answer.contains("\"Ok\":2"), "{answer}");
    // The worker answered, so it confined itself first: the kernel says so.
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    assert!(
        status
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["Seccomp:", "2"]),
        "{status}"
    );
    assert!(
        status
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["Seccomp_filters:", "2"]),
        "{status}"
    );
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prolog_the_tea_contract() {
    // Spec 004, Method 2c: `state(value, V), V2 is V * 2, return(result, V2).`
    let s = sandboxes();
    let v = run(
        &s,
        "prolog",
        "state(value, V),\nV2 is V * 2,\nreturn(result, V2).",
        None,
        json!({"state": {"value": 21}}),
    )
    .await
    .unwrap();
    assert_eq!(v, json!({"result": 42}));
    let v = run(
        &s,
        "prolog",
        "state(items, Xs), length(Xs, N), state(name, Name), return(count, N), return(name, Name), return(first, Xs), return(ok, true).",
        None,
        json!({"state": {"items": [1, 2, 3], "name": "Ada"}}),
    )
    .await
    .unwrap();
    assert_eq!(
        v,
        json!({"count": 3, "name": "Ada", "first": [1, 2, 3], "ok": true})
    );
}

#[test]
fn every_language_the_sandboxes_run_passes_their_static_check() {
    // `weft validate` asks `check` about each code block: a language the sandboxes run
    // must not be reported as one nobody runs (it was, for Prolog: issue 20).
    let s = sandboxes();
    let sample = |language: &str| match language {
        "lua" => "return 1",
        "prolog" => "X = 1.",
        _ => "1",
    };
    for language in s.languages() {
        assert_eq!(s.check(&language, sample(&language)), Ok(()), "{language}");
    }
    let err = s.check("cobol", "DISPLAY 1").unwrap_err();
    assert!(err.message.contains("no sandbox runs `cobol`"), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prolog_program_runs_as_tea_reads_it() {
    // The Edge Agent reads a Prolog node term by term: directives run, rules and facts
    // are defined, goals are called in order (its introductory examples, issue 20).
    let s = sandboxes();
    let plain = "add_ten(X, Y) :- Y is X + 10.\nstate(value, V), add_ten(V, R), return(result, R).";
    let v = run(&s, "prolog", plain, None, json!({"state": {"value": 5}})).await;
    assert_eq!(v.unwrap(), json!({"result": 15}));
    let program = ":- use_module(library(lists)).\n\
        % rules and facts, then the query\n\
        add_ten(X, Y) :- Y is X + 10.\n\
        parent(alice, bob).\n\
        parent(bob, carol).\n\
        grandparent(G, C) :- parent(G, P), parent(P, C).\n\
        state(value, V), add_ten(V, R), return(result, R).\n\
        grandparent(alice, Who), return(grandchild, Who).\n\
        findall(P, parent(P, _), Ps), sort(Ps, Sorted), return(parents, Sorted).";
    let v = run(&s, "prolog", program, None, json!({"state": {"value": 5}}))
        .await
        .unwrap();
    assert_eq!(
        v,
        json!({"result": 15, "grandchild": "carol", "parents": ["alice", "bob"]})
    );
    // SWI builtins TEA's examples use: atom_string/2 and msort/2.
    let v = run(
        &s,
        "prolog",
        "atom_string(alice, S), atom_string(A, S), msort([bob, al, bob], M), return(s, S), return(a, A), return(m, M).",
        None,
        json!({}),
    )
    .await
    .unwrap();
    assert_eq!(
        v,
        json!({"s": "alice", "a": "alice", "m": ["al", "bob", "bob"]})
    );
    // The facts a block asserted are gone for the next one on the same worker.
    let e = run(
        &s,
        "prolog",
        "parent(alice, X), return(x, X).",
        None,
        json!({}),
    )
    .await
    .unwrap_err();
    assert!(
        e.message.contains("existence_error") || e.message.contains("goal failed"),
        "{}",
        e.message
    );
    // A goal that fails among several fails the block.
    let e = run(
        &s,
        "prolog",
        "f(1).\nf(X), X > 5, return(x, X).",
        None,
        json!({}),
    )
    .await
    .unwrap_err();
    assert!(e.message.contains("goal failed"), "{}", e.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prolog_reads_state_strings_as_atoms_and_loads_program_text_as_tea_does() {
    // Issue 20: TEA passes strings as atoms (so `Class = critical_incident` matches),
    // declares with SWI's prefix `dynamic`, and loads a model's facts and rules from the
    // state with `tea_load_code/1`; those are forgotten after the block like its own.
    let s = sandboxes();
    let program = r#":- dynamic mother/2, flagged/1.
older(X) :- mother(X, _), X \= c.
state(class, Class),
( Class = critical_incident -> return(page, true) ; return(page, false) ),
state(facts, Facts),
tea_load_code(Facts),
findall(X, older(X), Older),
downcase_atom('MiXeD', Lower),
atom_length(Class, N),
return(older, Older), return(lower, Lower), return(length, N)."#;
    let facts = "mother(a, b).\nmother(c, d). % the end. of a comment\nmother('x. y', e).\n";
    let state = json!({"state": {"class": "critical_incident", "facts": facts}});
    let v = run(&s, "prolog", program, None, state.clone())
        .await
        .unwrap();
    assert_eq!(
        v,
        json!({"page": true, "older": ["a", "x. y"], "lower": "mixed", "length": 17})
    );
    let forgotten = run(
        &s,
        "prolog",
        "findall(X, mother(X, _), L), return(mothers, L).",
        None,
        json!({"state": {}}),
    )
    .await
    .unwrap();
    assert_eq!(forgotten, json!({"mothers": []}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prolog_has_swi_s_text_list_and_lambda_builtins() {
    // TEA runs SWI-Prolog, whose text predicates take strings where ISO's take atoms
    // (TEA's `simple-qa-prolog` matches `sub_atom(Question, _, _, _, CountryString)`),
    // and whose libraries load on first use. Each goal must hold.
    let s = sandboxes();
    let goals = [
        r#"atom_string(france, S), sub_atom('the capital of france', _, _, _, S)"#,
        r#"atom_length("abc", 3), atom_concat("ab", c, abc), upcase_atom("ab", 'AB')"#,
        r#"string_concat("a", "b", "ab"), string_length("abc", 3), string_lower("AB", "ab")"#,
        r#"sub_string("hello", 0, 2, _, "he"), string_chars(S, [a]), S == "a""#,
        r#"split_string("a, b", ",", " ", ["a", "b"]), number_string(42, " 42")"#,
        r#"atomic_list_concat([a, b, c], '-', 'a-b-c'), atomic_list_concat(L, '-', 'a-b'), L == [a, b]"#,
        r#"term_to_atom(f(x), 'f(x)'), term_string(T, "g(1)"), T == g(1), atom_number('12', 12)"#,
        "last([1, 2], 2), max_list([1, 3], 3), min_list([1, 3], 1), max_member(3, [1, 3])",
        "include([X]>>(X > 1), [1, 2], [2]), exclude([X]>>(X > 1), [1, 2], [1])",
        "partition([X]>>(X > 1), [1, 2], [2], [1]), subtract([1, 2], [1], [2]), delete([a, b, a], a, [b])",
        "maplist([X, Y]>>(Y is X + 1), [1, 2], [2, 3]), foldl([X, A0, A]>>(A is A0 + X), [1, 2], 0, 3)",
        "N = 10, maplist(N/[X, Y]>>(Y is X * N), [1, 2], [10, 20])",
        "predsort([O, A, B]>>compare(O, A, B), [b, a, b], [a, b]), plus(1, X, 3), X == 2",
        "aggregate_all(count, member(_, [a, b]), 2), aggregate_all(sum(X), member(X, [1, 2]), 3)",
        "aggregate_all(max(X), member(X, [1, 2]), 2), aggregate_all(set(X), member(X, [b, a, b]), [a, b])",
        "list_to_assoc([a-1], A), get_assoc(a, A, 1), pairs_keys_values(P, [a], [1]), P == [a-1]",
        "nb_setval(k, 1), nb_getval(k, 1), ignore(fail), atom_to_term('f(X, Y)', _, B), length(B, 2)",
        r#"format(atom(A), 'Found ~w ~a.', [2, x]), A == 'Found 2 x.', format(string(S), "~d", [7]), S == "7""#,
        r#"format("~w~n", [x]), format("done~n"), format(codes(C), "ab", []), C == [97, 98]"#,
    ];
    for goal in goals {
        let v = run(
            &s,
            "prolog",
            &format!("{goal},\nreturn(ok, true)."),
            None,
            json!({"state": {}}),
        )
        .await
        .unwrap_or_else(|e| panic!("{goal}: {}", e.message));
        assert_eq!(v, json!({"ok": true}), "{goal}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prolog_block_sees_only_what_it_defines_itself() {
    // Workers are reused across blocks and runs: a block's rules, its secrets and a
    // helper it redefines must be gone for the next block.
    let s = sandboxes();
    let first = run(
        &s,
        "prolog",
        "helper(X) :- X = 1.\nlast(_, mine) :- true.\nhelper(X), secrets(k, K), last([1, 2], L),\nreturn(x, X), return(k, K), return(l, L).",
        None,
        json!({"state": {}, "secrets": {"k": "v"}}),
    )
    .await
    .unwrap();
    assert_eq!(first, json!({"x": 1, "k": "v", "l": "mine"}));
    // A block whose goal fails forgets as much: its rule and its asserted fact.
    let e = run(
        &s,
        "prolog",
        "helper(X) :- X = 2.\nflag(on).\nhelper(X), X > 5.",
        None,
        json!({"state": {}}),
    )
    .await
    .unwrap_err();
    assert!(e.message.contains("goal failed"), "{}", e.message);
    for _ in 0..3 {
        let next = run(
            &s,
            "prolog",
            "( catch(helper(_), _, fail) -> H = true ; H = false ),\n( catch(secrets(k, _), _, fail) -> S = true ; S = false ),\n( catch(flag(_), _, fail) -> F = true ; F = false ),\nlast([1, 2], L), return(helper, H), return(secret, S), return(flag, F), return(l, L).",
            None,
            json!({"state": {}}),
        )
        .await
        .unwrap();
        assert_eq!(
            next,
            json!({"helper": false, "secret": false, "flag": false, "l": 2})
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prolog_reads_swi_dicts_and_solves_clp_fd_constraints() {
    // TEA's parity examples: `_{key: Value}` dicts come back as objects, and CLP(FD)
    // (which SWI loads on first use; scryer's clpz here) solves without a use_module.
    let s = sandboxes();
    let program = r#"state(max, Max),
X in 1..Max, Y in 1..Max, Z in 1..Max,
X + Y + Z #= 15, X #< Y, Y #< Z, X #= 1, Y #> 3,
label([X, Y, Z]),
return(solution, _{x: X, y: Y, z: Z, tags: [_{name: 'a: b'}]})."#;
    // Loading clpz takes seconds in a debug build (once per worker).
    let v = run_patiently(&s, "prolog", program, json!({"state": {"max": 10}}))
        .await
        .unwrap();
    assert_eq!(
        v,
        json!({"solution": {"x": 1, "y": 4, "z": 10, "tags": [{"name": "a: b"}]}})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prolog_program_that_does_not_load_leaves_the_next_one_unharmed() {
    // Found by fuzzing: after a load failure scryer 0.10 panicked on the next query, so
    // a valid block failed after a broken one on the same worker.
    let s = sandboxes();
    for _ in 0..3 {
        let e = run(&s, "prolog", "foo(", None, json!({}))
            .await
            .unwrap_err();
        assert!(e.message.contains("does not load"), "{}", e.message);
        let v = run(
            &s,
            "prolog",
            "state(x, X), Y is X + 1, return(y, Y).",
            None,
            json!({"state": {"x": 41}}),
        )
        .await
        .unwrap();
        assert_eq!(v, json!({"y": 42}));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prolog_failures_and_escapes_end_in_named_errors() {
    let s = sandboxes();
    let cases: &[(&str, ErrorKind, &str)] = &[
        (
            "state(value, V), V > 100, return(big, V).",
            ErrorKind::Code,
            "goal failed",
        ),
        (
            "state(value, V), V2 is V *, return(x, V2).",
            ErrorKind::Code,
            "does not load",
        ),
        ("X is 1 / 0, return(x, X).", ErrorKind::Code, "Prolog error"),
        ("repeat, fail.", ErrorKind::Timeout, "time limit"),
        (
            "length(L, N), N > 1000000000000.",
            ErrorKind::Timeout,
            "time limit",
        ),
        (
            "open('/etc/passwd', read, S), read_term(S, T, []), return(t, T).",
            ErrorKind::Code,
            "",
        ),
        (
            "open('/tmp/weft-prolog-escape', write, S), write(S, x), close(S).",
            ErrorKind::Code,
            "",
        ),
        ("consult('/etc/passwd').", ErrorKind::Code, ""),
        (
            "use_module(library(os)), shell(\"id\").",
            ErrorKind::Code,
            "",
        ),
    ];
    let mut failures = Vec::new();
    for (source, kind, word) in cases {
        let started = Instant::now();
        match run(&s, "prolog", source, None, json!({"state": {"value": 1}})).await {
            Ok(v) => failures.push(format!("`{source}` succeeded with {v}")),
            Err(e) if e.kind != *kind || !e.message.contains(word) => {
                failures.push(format!("`{source}`: got {:?} {:?}", e.kind, e.message))
            }
            Err(_) => {}
        }
        if started.elapsed() > Duration::from_secs(10) {
            failures.push(format!("`{source}` took {:?}", started.elapsed()));
        }
    }
    assert!(
        !std::path::Path::new("/tmp/weft-prolog-escape").exists(),
        "Prolog wrote a file"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let v = run(&s, "prolog", "return(ok, yes).", None, json!({}))
        .await
        .unwrap();
    assert_eq!(v, json!({"ok": "yes"}));
}

/// Prolog builtins applied to state values of every JSON kind (text with quotes,
/// backslashes, newlines and non-ASCII; numbers big and small; lists; objects): each
/// answers or fails with a named error at once. Never a crashed worker or a goal that
/// spins until its time limit (`atom_length/2` on a string once killed the worker and
/// an unknown `string_length/2` ran out the clock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prolog_builtins_on_state_values_answer_or_fail_at_once() {
    let s = sandboxes();
    let goals = [
        "atom_length(V, L), return(r, L)",
        "string_length(V, L), return(r, L)",
        "length(V, L), return(r, L)",
        "atom_codes(V, C), return(r, C)",
        "atom_chars(V, C), return(r, C)",
        "number_codes(N, V), return(r, N)",
        "atom_number(V, N), return(r, N)",
        "sub_atom(V, 0, 1, _, S), return(r, S)",
        "upcase_atom(V, U), return(r, U)",
        "X is V + 1, return(r, X)",
        "msort(V, X), return(r, X)",
        "V =.. L, return(r, L)",
        "nth0(0, V, X), return(r, X)",
        "sum_list(V, X), return(r, X)",
        "char_code(V, C), return(r, C)",
        "atom_concat(V, V, X), return(r, X)",
        "format(atom(A), \"~w|~a\", [V, V]), return(r, A)",
        "term_to_atom(V, A), return(r, A)",
    ];
    let values = [
        json!("ab"),
        json!(""),
        json!("Hello"),
        json!("héllo wörld 😀"),
        json!("it's \"quoted\" \\ back\nslash"),
        json!(42),
        json!(-7),
        json!(12345678901234567_i64),
        json!(2.5),
        json!(["a", 1, "ü"]),
        json!({"k": "v", "n": 1}),
        json!(null),
        json!(true),
    ];
    let mut limits = limits();
    limits.time_ms = 3000;
    let (mut problems, mut contained) = (Vec::new(), Vec::new());
    let mut answered = 0;
    for goal in goals {
        for value in &values {
            let source = format!("state(s, V), {goal}.");
            let started = Instant::now();
            let outcome = s
                .run(CodeRequest {
                    language: "prolog",
                    source: &source,
                    entry: None,
                    args: json!({"state": {"s": value}}).into(),
                    imports: None,
                    builtins: None,
                    limits: &limits,
                })
                .await;
            let took = started.elapsed();
            match outcome {
                Ok(_) => answered += 1,
                Err(e) if e.kind == ErrorKind::Code && e.detail_field("limit").is_none() => {}
                // A panic inside scryer (`format/2`'s `~a` on a list) is contained: the
                // worker answers with this error and makes way for a fresh one.
                Err(e) if e.kind == ErrorKind::Code && e.message.contains("scryer-prolog:") => {
                    contained.push(format!("`{goal}` on {value}"))
                }
                Err(e) => problems.push(format!("`{goal}` on {value}: {:?} {}", e.kind, e.message)),
            }
            // Generous: a fresh worker starts its Prolog machine (seconds in a debug
            // build); a goal that spins ends as a `timeout` error, caught above.
            if took > Duration::from_secs(15) {
                problems.push(format!("`{goal}` on {value} took {took:?}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    eprintln!(
        "{answered} of {} goals answered; scryer panicked (contained) on {}: {contained:?}",
        goals.len() * values.len(),
        contained.len()
    );
}

const FILE_WORK: &str = r#"
import os
import glob
import tempfile
from pathlib import Path

def main():
    text = open("in.txt").read()
    with open("out/upper.txt", "w") as f:
        f.write(text.upper())
    Path("out/notes.md").write_text("n")
    todo = os.path.join(tempfile.gettempdir(), "todo.md")
    with open(todo, "a") as f:
        f.write("- [ ] one")
    refused = []
    for path in ["/etc/passwd", "../outside.txt", "link/passwd"]:
        try:
            open(path).read()
        except PermissionError as e:
            refused.append(str(e))
    return {
        "text": text,
        "found": glob.glob("out/*.md") + glob.glob("**/*.txt", recursive=True),
        "todo": [todo, open(todo).read()],
        "isfile": [os.path.isfile("in.txt"), os.path.isdir("out"), os.path.exists("nope")],
        "refused": refused,
    }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_uses_the_files_directory_and_a_private_tmp_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("in.txt"), "hi").unwrap();
    std::fs::create_dir(dir.path().join("out")).unwrap();
    std::os::unix::fs::symlink("/etc", dir.path().join("link")).unwrap();
    let shared = Arc::new(sandboxes());
    let s = shared.with_files(FileAccess::new(dir.path().to_path_buf(), true));
    let v = run(&s, "python", FILE_WORK, Some("main"), json!({}))
        .await
        .unwrap();
    assert_eq!(v["text"], "hi");
    assert_eq!(
        v["found"],
        json!(["out/notes.md", "in.txt", "out/upper.txt"])
    );
    assert_eq!(v["todo"], json!(["/tmp/todo.md", "- [ ] one"]));
    assert_eq!(v["isfile"], json!([true, true, false]));
    let refused = v["refused"].as_array().unwrap();
    assert_eq!(refused.len(), 3, "{refused:?}");
    assert!(
        refused[2].as_str().unwrap().contains("symbolic link"),
        "{refused:?}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out/upper.txt")).unwrap(),
        "HI"
    );

    // Without a files directory, and in a run that leaves no trace, the same code is refused.
    let e = run(&*shared, "python", FILE_WORK, Some("main"), json!({}))
        .await
        .unwrap_err();
    assert!(e.message.contains("no files"), "{}", e.message);
    let read_only = shared.with_files(FileAccess::new(dir.path().to_path_buf(), false));
    let e = run(&read_only, "python", FILE_WORK, Some("main"), json!({}))
        .await
        .unwrap_err();
    assert!(e.message.contains("may not change files"), "{}", e.message);
    // The worker answered file operations and still serves ordinary blocks.
    assert_eq!(
        run(&s, "python", "1 + 1", None, json!({})).await.unwrap(),
        json!(2)
    );
}

/// `os.path`'s string functions, each compared with CPython's own answer.
const OS_PATH_CASES: &[&str] = &[
    "join('a', 'b')",
    "join('a/', 'b', 'c.md')",
    "join('a', '/b')",
    "join('', 'b')",
    "split('a/b/c')",
    "split('/a')",
    "split('a')",
    "split('a//b')",
    "splitext('a/b.c.md')",
    "splitext('.bashrc')",
    "splitext('a/.b')",
    "splitext('a.d/b')",
    "normpath('a/./b/../c')",
    "normpath('/../a')",
    "normpath('')",
    "normpath('../a/..')",
    "basename('a/b/')",
    "dirname('a/b/')",
    "dirname('/a')",
    "relpath('a/b/c', 'a')",
    "isabs('/x')",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn os_path_answers_as_cpython_does() {
    let list = format!("[{}]", OS_PATH_CASES.join(", "));
    let python = std::process::Command::new("python3")
        .args([
            "-c",
            &format!("import json\nfrom os.path import *\nprint(json.dumps({list}))"),
        ])
        .output()
        .expect("python3 runs (scripts/setup installs it)");
    let expected: Value = serde_json::from_slice(&python.stdout).unwrap();
    let s = sandboxes();
    let got = run(
        &s,
        "python",
        &format!("from os.path import join, split, splitext, normpath, basename, dirname, relpath, isabs\n{list}"),
        None,
        json!({}),
    )
    .await
    .unwrap();
    for (i, case) in OS_PATH_CASES.iter().enumerate() {
        assert_eq!(got[i], expected[i], "os.path.{case}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yaml_loads_and_dumps_plain_data() {
    let s = sandboxes();
    let code = r#"
import yaml
doc = yaml.safe_load("name: x\nitems: [1, two]\nnested: {a: true}\n")
try:
    yaml.safe_load("a: [1, 2")
    bad = None
except yaml.YAMLError as e:
    bad = str(e)
{"doc": doc, "bad": bad, "back": yaml.safe_load(yaml.safe_dump(doc)), "empty": yaml.safe_load("")}
"#;
    let v = run(&s, "python", code, None, json!({})).await.unwrap();
    let doc = json!({"name": "x", "items": [1, "two"], "nested": {"a": true}});
    assert_eq!(v["doc"], doc);
    assert_eq!(v["back"], doc, "a dump reads back as the same data");
    assert_eq!(v["empty"], Value::Null);
    assert!(v["bad"].as_str().unwrap().starts_with("yaml: "), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temporary_directory_is_made_filled_and_removed_in_the_private_tmp() {
    let dir = tempfile::tempdir().unwrap();
    let shared = Arc::new(sandboxes());
    let s = shared.with_files(FileAccess::new(dir.path().to_path_buf(), true));
    let code = r#"
import tempfile, os
with tempfile.TemporaryDirectory(prefix="x") as d:
    os.makedirs(os.path.join(d, "a", "b"), exist_ok=True)
    with open(os.path.join(d, "a", "b", "f.txt"), "w") as f:
        f.write("1")
    walked = [w[0] for w in os.walk(d)]
{"under_tmp": d.startswith("/tmp/x"), "walked": len(walked), "gone": not os.path.exists(d)}
"#;
    let v = run(&s, "python", code, None, json!({})).await.unwrap();
    assert_eq!(v, json!({"under_tmp": true, "walked": 3, "gone": true}));
    // Nothing of it reached the files directory.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// A state large enough that Lua reads it through views: `items` 0..100, `rows` 100
/// objects, `big` an object of 100 keys, and small values beside them.
fn large_state() -> Value {
    let rows: Vec<Value> = (0..100)
        .map(|i| json!({"id": i, "tags": ["a", "b"]}))
        .collect();
    let big: serde_json::Map<String, Value> =
        (0..100).map(|i| (format!("k{i}"), json!(i))).collect();
    json!({"state": {"items": (0..100).collect::<Vec<_>>(), "rows": rows, "big": big,
                     "count": 1, "name": "n", "small": [1, 2]}})
}

/// `v` as the engine hands it to code: every object and list a shared value built of
/// shared parts, not one plain JSON value.
fn in_parts(v: &Value) -> Shared {
    match v {
        Value::Object(m) => Shared::from(
            m.iter()
                .map(|(k, x)| (k.clone(), in_parts(x)))
                .collect::<SharedMap>(),
        ),
        Value::Array(a) => Shared::from(a.iter().map(in_parts).collect::<Vec<_>>()),
        scalar => Shared::new(scalar.clone()),
    }
}

/// What Lua code `source` returns over [`large_state`], which it must read the same
/// whether it is plain JSON or built of shared parts (read where it lies, not copied).
async fn lua_on_large_state(source: &str) -> Value {
    let s = sandboxes();
    let plain = run(&s, "lua", source, None, large_state()).await.unwrap();
    let limits = limits();
    let parts = s
        .run(CodeRequest {
            language: "lua",
            source,
            entry: None,
            args: in_parts(&large_state()),
            imports: None,
            builtins: None,
            limits: &limits,
        })
        .await
        .unwrap();
    assert_eq!(plain, parts, "{source}");
    plain
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lua_reads_a_large_state_as_the_tables_it_holds() {
    let cases: &[(&str, Value)] = &[
        (
            "return {#state.items, state.items[1], state.items[100], state.items[101]}",
            json!([100, 0, 99]),
        ),
        (
            "return {state.rows[3].id, state.rows[3].tags[2], state.big.k42, state.count}",
            json!([2, "b", 42, 1]),
        ),
        (
            "return {type(state), type(state.items), state.items[2.0], state.items[0], state.missing}",
            json!(["table", "table", 1]),
        ),
        (
            "local s = 0 for _, v in ipairs(state.items) do s = s + v end return s",
            json!(4950),
        ),
        (
            "local n = 0 for k, v in pairs(state.big) do n = n + v end return n",
            json!(4950),
        ),
        (
            "local n = 0 for k in pairs(state) do n = n + 1 end return n",
            json!(6),
        ),
        (
            "return {next(state.items) ~= nil, rawlen(state.items), rawget(state.big, 'k7')}",
            json!([true, 100, 7]),
        ),
        (
            "return state.items == state.items and state.rows[5] == state.rows[5]",
            json!(true),
        ),
        (
            "return table.concat(state.items, ',', 1, 3)",
            json!("0,1,2"),
        ),
        ("return tostring(getmetatable(state))", json!("false")),
        ("return state.small", json!([1, 2])),
        ("return state.rows[1]", json!({"id": 0, "tags": ["a", "b"]})),
    ];
    for (source, expected) in cases {
        assert_eq!(&lua_on_large_state(source).await, expected, "{source}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lua_writes_to_a_large_state_as_to_the_tables_it_holds() {
    let items: Vec<i64> = (0..100).collect();
    let mut appended = items.clone();
    appended.push(7);
    let cases: &[(&str, Value)] = &[
        // A table read twice is one table: a write through one name is seen by the other.
        (
            "local a = state.items table.insert(a, 7) return {#state.items, state.items[101]}",
            json!([101, 7]),
        ),
        (
            "table.insert(state.items, 7) return state.items",
            json!(appended),
        ),
        (
            "table.sort(state.items, function(a, b) return a > b end) return {state.items[1], state.items[100]}",
            json!([99, 0]),
        ),
        (
            "state.items[1] = 'x' return {state.items[1], state.items[2], #state.items}",
            json!(["x", 1, 100]),
        ),
        (
            "local r = state.rows[2] r.id = 'two' return state.rows[2].id",
            json!("two"),
        ),
        (
            "state.big.k1 = nil return {state.big.k1, state.big.k2}",
            json!([null, 2]),
        ),
        (
            "local b = state.big local x = b.k1 b.k1 = nil return {x, state.big.k1 == nil}",
            json!([1, true]),
        ),
        (
            "state.count = state.count + 1 return {count = state.count, n = #state.items}",
            json!({"count": 2, "n": 100}),
        ),
        ("state.items = nil return state.items == nil", json!(true)),
        (
            "return {first = state.rows[1], all = #state.rows}",
            json!({"first": {"id": 0, "tags": ["a", "b"]}, "all": 100}),
        ),
    ];
    for (source, expected) in cases {
        assert_eq!(&lua_on_large_state(source).await, expected, "{source}");
    }
    // The whole state, returned after changes, is the state with those changes.
    let v = lua_on_large_state("state.count = 5 state.rows[1].id = 'z' return state").await;
    let mut expected = large_state()["state"].clone();
    expected["count"] = json!(5);
    expected["rows"][0]["id"] = json!("z");
    assert_eq!(v, expected);
    // Unchanged, it is the state itself; from a function, the same.
    let v = lua_on_large_state("return state").await;
    assert_eq!(v, large_state()["state"]);
    let s = sandboxes();
    let v = run(
        &s,
        "lua",
        "function f(a) return {a.state.items[100], #a.state.rows} end",
        Some("f"),
        large_state(),
    )
    .await
    .unwrap();
    assert_eq!(v, json!([99, 100]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lua_views_do_not_outlive_their_call() {
    let s = sandboxes();
    // A view cannot be kept for a later call (the environment is fresh), and a call
    // that reads a large state leaves the next call's small one alone.
    run(&s, "lua", "return #state.items", None, large_state())
        .await
        .unwrap();
    let v = run(
        &s,
        "lua",
        "return {state.items, kept == nil}",
        None,
        json!({"state": {"items": [1]}}),
    )
    .await
    .unwrap();
    assert_eq!(v, json!([[1], true]));
    // A read past the memory limit fails as a memory error, not a crash.
    let huge = json!({"state": {"items": vec!["x".repeat(1000); 100_000]}});
    let e = run(
        &s,
        "lua",
        "local t = {} for k, v in pairs(state.items) do t[k] = v .. v end return #t",
        None,
        huge,
    )
    .await
    .unwrap_err();
    assert!(e.message.contains("memory"), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_request_after_small_ones_is_read_under_no_earlier_limit() {
    // One worker, so the large request reaches a process that has answered small ones:
    // the cap set for those must not hold while it reads the next request.
    let s = sandboxes_of(1);
    for x in 0..3 {
        let v = run(&s, "python", "x + 1", None, json!({"x": x})).await;
        assert_eq!(v.unwrap(), json!(x + 1));
    }
    // 20 million empty objects: 60 MB of JSON, well over a gigabyte once parsed. The
    // code does not compile, so the worker answers as soon as it has read the request
    // (no interpreter objects are made of the arguments).
    let big = json!({"items": vec![json!({}); 20_000_000]});
    let e = run_patiently(&s, "python", "y = (\n", big)
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Code);
    assert!(!e.message.contains("memory"), "{}", e.message);
    let v = run(&s, "python", "x * 2", None, json!({"x": 21})).await;
    assert_eq!(v.unwrap(), json!(42));
}

/// `{"items": items, "n": n}` built around `items`, as a node's arguments hold the state's.
fn args_holding(items: &Shared, n: i64) -> Shared {
    let map: SharedMap = [
        ("items".to_owned(), items.clone()),
        ("n".to_owned(), Shared::new(json!(n))),
    ]
    .into_iter()
    .collect();
    Shared::object(map)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_argument_a_worker_keeps_is_the_one_each_call_was_given() {
    // One worker, so that every call reaches the worker that keeps the list.
    let s = sandboxes_of(1);
    let code = "sum(items) + n";
    let first = Shared::new(json!((0..5000).collect::<Vec<i64>>()));
    // Sent, kept on the second call, put back from the worker's copy after that.
    for n in 0..4 {
        let got = run(&s, "python", code, None, args_holding(&first, n))
            .await
            .unwrap();
        assert_eq!(got, json!(12_497_500 + n), "call {n}");
    }
    // An equal-sized list of other items, in another allocation: its own items, not the
    // kept ones, even on the calls where it would be kept and reused in turn.
    let other = Shared::new(json!((1..=5000).collect::<Vec<i64>>()));
    for n in 0..3 {
        assert_eq!(
            run(&s, "python", code, None, args_holding(&other, n))
                .await
                .unwrap(),
            json!(12_502_500 + n)
        );
    }
    // The code's changes to its copy never reach the kept one.
    let mutate = "items[0] = 1000000\nsum(items)";
    for _ in 0..2 {
        assert_eq!(
            run(&s, "python", mutate, None, args_holding(&first, 0))
                .await
                .unwrap(),
            json!(13_497_500)
        );
    }
    assert_eq!(
        run(&s, "python", code, None, args_holding(&first, 0))
            .await
            .unwrap(),
        json!(12_497_500)
    );
}
