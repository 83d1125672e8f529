//! `weft serve`'s LangGraph door with LangGraph's own Python client (`langgraph-sdk` on
//! PyPI, installed by `scripts/setup` into its own virtual environment):
//! `tests/langgraph/client.py` lists assistants, streams runs in every mode Weft sends,
//! runs twice on a thread and reads its history, pauses at an approval and resumes with
//! `command={"resume": ...}`, rejoins a stream with `Last-Event-ID`, cancels, races a
//! second run against `multitask_strategy`, and checks the refusals; on a SQLite file
//! and on PostgreSQL.

mod support;

use support::Env;

/// The Python that has `langgraph_sdk`: `$WEFT_LANGGRAPH_PYTHON`, else the one
/// `scripts/setup` installs.
fn langgraph_python() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("WEFT_LANGGRAPH_PYTHON") {
        return p.into();
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(std::env::var("HOME").unwrap()).join(".cache"));
    cache.join("weft/langgraph-client/bin/python")
}

/// Serves the test flows from `env`'s database with a token, and has the client hold
/// its conversation with the server.
fn converse(env: &Env) {
    let python = langgraph_python();
    assert!(
        python.exists(),
        "{} is missing: run scripts/setup (it installs the LangGraph client the tests use)",
        python.display()
    );
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
    let out = std::process::Command::new(&python)
        .args([&format!("{here}/client.py"), &base, "lg-token"])
        .output()
        .unwrap();
    // Without the token (a bearer or LangGraph's `x-api-key`), the door is shut.
    let unauthorized = support::post_status(&base, "/threads");
    let _ = child.kill();
    let _ = child.wait();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success() && stdout.contains("langgraph ok"),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert_eq!(unauthorized, 401);
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
