//! Weft's MCP server with a real MCP client: the official Python SDK (`mcp` on PyPI,
//! installed by `scripts/setup` into its own virtual environment) holds a model's
//! conversation (`tests/mcp/conversation.py`) with `weft mcp` over stdio, and with
//! `/mcp` on a `weft serve` over streamable HTTP.

mod support;

use support::Env;

/// The Python that has the `mcp` package: `$WEFT_MCP_PYTHON`, else the one
/// `scripts/setup` installs.
fn mcp_python() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("WEFT_MCP_PYTHON") {
        return p.into();
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(std::env::var("HOME").unwrap()).join(".cache"));
    cache.join("weft/mcp-client/bin/python")
}

/// Runs the conversation over `transport` (`stdio` or `http`) at `place` with `secret`
/// (the database, or the bearer token), and checks it ended well.
fn converse(env: &Env, transport: &str, place: &str, secret: &str) {
    let python = mcp_python();
    assert!(
        python.exists(),
        "{} is missing: run scripts/setup (it installs the MCP client the tests use)",
        python.display()
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/conversation.py");
    let out = std::process::Command::new(&python)
        .args([
            script,
            transport,
            place,
            secret,
            &support::example("release-approval.yaml"),
        ])
        .current_dir(env.path(""))
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success() && stdout.contains("conversation ok"),
        "{transport}: stdout:\n{stdout}\nstderr:\n{stderr}"
    );
}

#[test]
fn a_model_builds_runs_and_inspects_a_flow_over_stdio() {
    let env = Env::new();
    let db = env.path("runs.db");
    converse(
        &env,
        "stdio",
        env!("CARGO_BIN_EXE_weft"),
        db.to_str().unwrap(),
    );
}

#[test]
fn the_same_conversation_over_http_on_weft_serve() {
    let env = Env::new();
    let token = env.write("token", "s3cret-token\n");
    let mut child = env
        .cmd()
        .args(["serve", "--addr", "127.0.0.1:0", "--token-file"])
        .arg(&token)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let base = support::listening_on(&mut child);
    converse(&env, "http", &format!("{base}/mcp"), "s3cret-token");
    // Without the token, /mcp is refused like every other route.
    assert_eq!(support::post_status(&base, "/mcp"), 401);
    let _ = child.kill();
    let _ = child.wait();
}

/// Lines that are not JSON-RPC, on the raw stdio stream: each gets a protocol error or
/// is ignored, and the server answers the next good request.
#[test]
fn garbage_on_stdin_does_not_stop_the_server() {
    use std::io::{BufRead, BufReader, Write};
    let env = Env::new();
    let mut child = env
        .cmd()
        .args(["mcp", "--db"])
        .arg(env.path("runs.db"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    for line in [
        "this is not json",
        "{\"jsonrpc\": \"2.0\", \"id\": 9, \"method\": ",
        "[1, 2, 3]",
        init,
    ] {
        writeln!(stdin, "{line}").unwrap();
    }
    stdin.flush().unwrap();
    let mut answered = false;
    for _ in 0..10 {
        let mut line = String::new();
        if stdout.read_line(&mut line).unwrap() == 0 {
            break;
        }
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        if v["id"] == 1 {
            assert_eq!(v["result"]["serverInfo"]["name"], "weft", "{v}");
            answered = true;
            break;
        }
    }
    assert!(answered, "the initialize after the garbage was answered");
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "a closed stdin ends the server cleanly: {status}"
    );
}
