//! What the dialect conformance suites share: an engine as `weft run` builds it (real
//! sandboxes in worker processes, an in-memory store, the model router with test keys,
//! the built-in actions), loading and running a file.

#![allow(dead_code)] // each suite uses its own part

use serde_json::Value;
use std::path::Path;
use std::sync::Arc;
use weft_core::event::{Event, EventKind};
use weft_core::ports::RunStatus;
use weft_engine::{CollectingSink, Engine, Prepared, RunOptions, RunResult};

pub use weft_llm::Env;

/// Test keys for every provider, and nothing else.
pub fn test_keys() -> Env {
    Arc::new(|k: &str| k.ends_with("_API_KEY").then(|| "sk-test".to_owned()))
}

/// An engine as `weft run` builds it, over files in `files`, its models configured
/// from `env`.
pub fn engine(files: &Path, events: Arc<CollectingSink>, env: Env) -> Engine {
    let router = weft_llm::Router::new().with_env(env);
    let worker = weft_code::WorkerCommand {
        program: sandbox_worker(),
        args: vec![],
    };
    let mut b = Engine::builder(Arc::new(weft_store::MemoryStore::new()))
        .models(Arc::new(router))
        .code_runner(Arc::new(weft_code::Sandboxes::new(worker, 1)))
        .secrets(serde_json::json!({"api_key": "s3cret"}))
        .sink(events);
    for (name, action) in weft_actions::builtins(files.to_path_buf(), Default::default()) {
        b = b.action(name, action);
    }
    b.build()
}

/// `weft-code`'s standalone sandbox worker, built beside this test binary: Cargo builds
/// it for `weft-code`'s own tests, so `cargo test --workspace` has it. (A test cannot
/// name another package's binary through `CARGO_BIN_EXE_*`.)
fn sandbox_worker() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/<test> -> target/<profile>/weft-sandbox-worker
    let worker = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("weft-sandbox-worker"))
        .expect("the test binary lives in target/<profile>/deps");
    assert!(
        worker.is_file(),
        "{} is missing: build it with `cargo build -p weft-code --bin weft-sandbox-worker` (cargo test --workspace does)",
        worker.display()
    );
    worker
}

/// Compiles `text` in `dir`, checking that it is detected as `dialect` (or panics with
/// the diagnostics).
pub fn load(text: &str, dir: &Path, dialect: &str) -> Arc<Prepared> {
    let loaded = weft_dialects::load_str(text, "flow.yaml", Some(dir), None)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(loaded.dialect, dialect);
    Arc::new(Prepared::new(loaded.flow).unwrap_or_else(|d| panic!("{d:?}")))
}

/// The diagnostics of a `dialect` file that must not load, rendered.
pub fn load_error(yaml: &str, dialect: &str) -> String {
    match weft_dialects::load_str(yaml, "flow.yaml", None, Some(dialect)) {
        Ok(l) => match Prepared::new(l.flow.clone()) {
            Ok(_) => panic!("the flow loaded:\n{yaml}"),
            Err(d) => d
                .into_iter()
                .map(|d| l.locate(d).render("flow.yaml"))
                .collect::<Vec<_>>()
                .join("\n"),
        },
        Err(e) => e.render(),
    }
}

/// A run's result and its events.
pub struct Ran {
    /// Where the run stands.
    pub result: RunResult,
    /// Every event the run emitted, in order.
    pub events: Vec<Event>,
    /// The result's output and state as plain JSON, for assertions.
    pub output: Option<Value>,
    /// The run's state as plain JSON.
    pub state: Value,
}

impl Ran {
    /// `result` and its `events`, with the output and state copied out as plain JSON.
    pub fn new(result: RunResult, events: Vec<Event>) -> Ran {
        Ran {
            output: result.output.as_ref().map(|o| o.to_value()),
            state: result.state.to_value(),
            result,
            events,
        }
    }
}

impl Ran {
    /// The run's output, for a completed run.
    pub fn output(&self) -> &Value {
        assert_eq!(
            self.result.status,
            RunStatus::Completed,
            "{:?}",
            self.result.error
        );
        self.output.as_ref().expect("an output")
    }

    /// The kinds of the run's events, in order.
    pub fn kinds(&self) -> Vec<&EventKind> {
        self.events.iter().map(|e| &e.kind).collect()
    }
}

/// Runs the `dialect` file `text` with `input`, with its files (subgraphs, `file.*`) in
/// `dir`.
pub async fn run_in(text: &str, dialect: &str, input: Value, dir: &Path, env: Env) -> Ran {
    let events = Arc::new(CollectingSink::new());
    let engine = engine(dir, events.clone(), env);
    let result = engine
        .start(load(text, dir, dialect), Some(input), RunOptions::default())
        .await
        .expect("the engine drives the run")
        .end()
        .await
        .expect("the engine drives the run");
    Ran::new(result, events.events())
}

/// The diagnostic whose message contains `message` among those of loading `text` as
/// `dialect` (its errors, or its warnings when it loads), checked to stand at `at`
/// (line, column) with `severity` and a hint containing `hint`.
pub fn assert_diagnostic(
    text: &str,
    dialect: &str,
    message: &str,
    at: (u32, u32),
    severity: weft_core::Severity,
    hint: &str,
) -> weft_core::Diagnostic {
    let found = match weft_dialects::load_str(text, "f.yaml", None, Some(dialect)) {
        Err(e) => e.diagnostics,
        Ok(l) => l.warnings,
    };
    let d = found
        .iter()
        .find(|d| d.message.contains(message))
        .unwrap_or_else(|| panic!("no `{message}` in {found:#?}\n{text}"))
        .clone();
    let loc = d.loc.expect("located");
    assert_eq!(
        (loc.line, loc.col, d.severity),
        (at.0, at.1, severity),
        "{d:#?}\n{text}"
    );
    assert!(d.hint.as_deref().unwrap_or("").contains(hint), "{d:#?}");
    d
}

/// Loads `text` as `dialect`, which must give neither an error nor a warning.
pub fn assert_clean(text: &str, dialect: &str) {
    let loaded = weft_dialects::load_str(text, "f.yaml", None, Some(dialect))
        .unwrap_or_else(|e| panic!("{:#?}\n{text}", e.diagnostics));
    assert!(loaded.warnings.is_empty(), "{:#?}\n{text}", loaded.warnings);
}

/// Checks invalid `dialect` documents: each `(file, line, message words, hint words)`
/// fails to load with an error at that line whose text and hint contain those words.
pub fn assert_invalid(dialect: &str, cases: &[(&str, u32, &str, &str)]) {
    for (i, (text, line, message, hint)) in cases.iter().enumerate() {
        let rendered = load_error(text, dialect);
        let case = i + 1;
        assert!(
            rendered.contains(&format!("flow.yaml:{line}:")),
            "case {case}: expected line {line} in:\n{rendered}"
        );
        assert!(
            rendered.contains(message),
            "case {case}: expected `{message}` in:\n{rendered}"
        );
        assert!(
            rendered.contains(hint),
            "case {case}: expected hint `{hint}` in:\n{rendered}"
        );
    }
}

/// An HTTP server on 127.0.0.1 that answers every request with `body` as JSON and
/// echoes the request line in a header; `$REQUEST` in `body` is replaced by the request
/// line too, and `$BODY` by the request's body (escaped for a JSON string), so what a
/// client sent can reach whoever reads the body.
pub async fn http_server(body: &'static str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = vec![0u8; 65536];
                // Headers, then as many body bytes as Content-Length says.
                let (head, sent) = loop {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let head = text[..end].to_owned();
                        let length = head
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length")
                                    .then(|| v.trim().parse::<usize>().ok())?
                            })
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + length || n == 0 {
                            let sent = String::from_utf8_lossy(&buf[end + 4..]).to_string();
                            break (head, sent);
                        }
                    } else if n == 0 {
                        break (text, String::new());
                    }
                };
                let line = head.lines().next().unwrap_or("").to_owned();
                let escaped = serde_json::to_string(&sent).unwrap();
                let body = body
                    .replace("$REQUEST", &line)
                    .replace("$BODY", &escaped[1..escaped.len() - 1]);
                let resp = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Request: {line}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}")
}
