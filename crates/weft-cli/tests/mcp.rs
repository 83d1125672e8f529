//! Weft's MCP server with a real MCP client: the official Python SDK (`mcp` on PyPI,
//! installed by `scripts/setup` into its own virtual environment) holds a model's
//! conversation (`tests/mcp/conversation.py`) with `weft mcp` over stdio, and with
//! `/mcp` on a `weft serve` over streamable HTTP.

mod support;

use support::Env;

/// The Python that has the `mcp` package: `$WEFT_MCP_PYTHON`, else the one
/// `scripts/setup` installs.
fn mcp_python() -> std::path::PathBuf {
    match std::env::var_os("WEFT_MCP_PYTHON") {
        Some(p) => p.into(),
        None => support::installed_client(support::client_cache().join("mcp-client/bin/python")),
    }
}

/// Runs the conversation over `transport` (`stdio` or `http`) at `place` with `secret`
/// (the database, or the bearer token), and checks it ended well.
fn converse(env: &Env, transport: &str, place: &str, secret: &str) {
    let python = mcp_python();
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
    support::assert_client_ok(transport, &out, "conversation ok");
}

#[test]
fn a_model_builds_runs_and_inspects_a_flow_over_stdio() {
    if support::left_out_of_fast_profile("the MCP Python SDK") {
        return;
    }
    let env = Env::new();
    let db = env.db_file();
    converse(
        &env,
        "stdio",
        env!("CARGO_BIN_EXE_weft"),
        db.to_str().unwrap(),
    );
}

#[test]
fn the_same_conversation_over_http_on_weft_serve() {
    if support::left_out_of_fast_profile("the MCP Python SDK") {
        return;
    }
    let env = Env::new();
    let token = env.write_private("token", "s3cret-token\n");
    let served = support::Served::start_args(&env, &[], &["--token-file", token.to_str().unwrap()]);
    let base = &served.base;
    converse(&env, "http", &format!("{base}/mcp"), "s3cret-token");
    // Without the token, /mcp is refused like every other route.
    assert_eq!(support::post_status(base, "/mcp"), 401);
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
        .arg(env.db_file())
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

/// One JSON-RPC request to `/mcp` of the 2026-07-28 revision (stateless: what the
/// client is travels in `_meta`), from a client that takes MCP Tasks.
fn mcp_request(
    base: &str,
    method: &str,
    name: &str,
    params: serde_json::Value,
) -> serde_json::Value {
    let meta = serde_json::json!({
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "weft-test", "version": "1"},
        "io.modelcontextprotocol/protocolVersion": "2026-07-28"
    });
    let mut params = params;
    params["_meta"] = meta;
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let answer: serde_json::Value = reqwest::blocking::Client::new()
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
        .header("mcp-name", name)
        .json(&body)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert!(answer["error"].is_null(), "{method}: {answer}");
    answer["result"].clone()
}

/// Polls task `id` until it is `status`.
fn task_until(base: &str, id: &str, status: &str) -> serde_json::Value {
    for _ in 0..200 {
        let task = mcp_request(base, "tasks/get", id, serde_json::json!({"taskId": id}));
        if task["status"] == status {
            return task;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    panic!("task {id} never became {status}")
}

#[test]
fn a_task_waits_for_a_person_outlives_its_server_and_finishes_when_answered_through_the_api() {
    let env = Env::new();
    let served = support::Served::start(&env);
    let flow = "weft: 1\nname: ship\nroot:\n  sequence:\n    - {id: review, approval: {prompt: 'Ship {{ input.what }}?'}}\n    - {transform: {output: 'shipped {{ initial.what }}'}}\n";
    let created = mcp_request(
        &served.base,
        "tools/call",
        "run_flow",
        serde_json::json!({"name": "run_flow", "arguments": {"source": flow, "input": {"what": "v2"}}}),
    );
    assert_eq!(created["resultType"], "task", "{created}");
    let id = created["taskId"].as_str().unwrap().to_owned();
    let asking = task_until(&served.base, &id, "input_required");
    let request = &asking["inputRequests"]["root/review"];
    assert_eq!(request["method"], "elicitation/create", "{asking}");
    assert_eq!(request["params"]["message"], "Ship v2?");

    // The task is the run: a new server on the same database answers for it.
    served.kill();
    let served = support::Served::start(&env);
    task_until(&served.base, &id, "input_required");
    let approved = reqwest::blocking::Client::new()
        .post(format!("{}/v1/runs/{id}/approve", served.base))
        .json(&serde_json::json!({"decision": "approve"}))
        .send()
        .unwrap();
    assert!(approved.status().is_success(), "{:?}", approved.text());
    let done = task_until(&served.base, &id, "completed");
    assert_eq!(
        done["result"]["structuredContent"]["output"], "shipped v2",
        "{done}"
    );

    // Cancelling a task cancels its run.
    let waiting = "weft: 1\nname: nap\nroot: {wait: {for: 1h}}\n";
    let created = mcp_request(
        &served.base,
        "tools/call",
        "run_flow",
        serde_json::json!({"name": "run_flow", "arguments": {"source": waiting}}),
    );
    let id = created["taskId"].as_str().unwrap().to_owned();
    let ack = mcp_request(
        &served.base,
        "tasks/cancel",
        &id,
        serde_json::json!({"taskId": id}),
    );
    assert_eq!(ack["resultType"], "complete", "{ack}");
    task_until(&served.base, &id, "cancelled");
    let run = env.weft(&["runs", "show", &id]);
    assert_eq!(support::stdout_json(&run)["status"], "cancelled");
}
