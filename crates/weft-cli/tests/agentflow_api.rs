//! AgentFlow's HTTP API (`/api/*`) on the real `weft serve`, called the way AgentFlow's
//! web editor calls it (`apps/web/src/services/api.ts`: JSON bodies, SSE read as
//! `data:` lines), with the agents answered by a scripted OpenAI-compatible server on
//! 127.0.0.1.

use serde_json::{Value, json};
use std::time::Duration;
use weft_fakes::{FakeServer, Reply, Wire};

mod support;

use support::{Env, Served};

/// `weft serve` whose OpenAI models are `fake`.
fn serve(env: &Env, fake: &FakeServer) -> Served {
    let base = fake.base_url();
    Served::start_with(
        env,
        &[("OPENAI_BASE_URL", &base), ("OPENAI_API_KEY", "sk-test")],
    )
}

/// What the editor draws: start -> Writer -> approval -> Editor (reject ends the run).
fn drawn_graph() -> Value {
    json!({
        "nodes": [
            {"id": "node_1", "type": "start", "x": 80, "y": 120, "data": {"collapsed": true, "initialInput": "Write about otters"}},
            {"id": "node_2", "type": "agent", "x": 320, "y": 120, "data": {
                "agentName": "Writer", "systemPrompt": "You are a helpful assistant.",
                "userPrompt": "Draft: {{PREVIOUS_OUTPUT}}", "model": "gpt-5", "reasoningEffort": "low",
                "tools": {"web_search": false, "subagents": false}, "collapsed": true}},
            {"id": "node_3", "type": "approval", "x": 560, "y": 120, "data": {"prompt": "Review and approve this step.", "collapsed": true}},
            {"id": "node_4", "type": "agent", "x": 800, "y": 60, "data": {
                "agentName": "Editor", "userPrompt": "Polish: {{PREVIOUS_OUTPUT}}", "model": "gpt-5",
                "tools": {"web_search": false, "subagents": false}, "collapsed": true}}
        ],
        "connections": [
            {"source": "node_1", "target": "node_2", "sourceHandle": "output", "targetHandle": "input"},
            {"source": "node_2", "target": "node_3", "sourceHandle": "output", "targetHandle": "input"},
            {"source": "node_3", "target": "node_4", "sourceHandle": "approve", "targetHandle": "input"}
        ]
    })
}

/// Each agent answers with what it was asked, so the test sees what reached it.
async fn echoing_model(latency: Duration) -> FakeServer {
    FakeServer::start_with(Wire::OpenAi, latency, |r| {
        Reply::text(format!("[{}]", r.last_message()))
    })
    .await
}

/// The SSE answer of a POST, read as AgentFlow's client reads it: each `data:` line's
/// JSON, in order.
async fn frames(client: &reqwest::Client, url: &str, body: Value) -> (u16, Vec<Value>) {
    let res = client.post(url).json(&body).send().await.unwrap();
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    let frames = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    (status, frames)
}

/// `(type, nodeId, content)` of each entry.
fn said(logs: &[Value]) -> Vec<(String, String, String)> {
    logs.iter()
        .map(|l| {
            (
                l["type"].as_str().unwrap().to_owned(),
                l["nodeId"].as_str().unwrap().to_owned(),
                l["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn entry(kind: &str, node: &str, content: &str) -> (String, String, String) {
    (kind.to_owned(), node.to_owned(), content.to_owned())
}

/// The log entries a stream carried, and its `done` result.
fn streamed(frames: &[Value]) -> (Vec<Value>, Value) {
    assert_eq!(frames.first().unwrap()["type"], "start", "{frames:?}");
    let logs = frames
        .iter()
        .filter(|f| f["type"] == "log")
        .map(|f| f["entry"].clone())
        .collect();
    let done = frames.last().unwrap();
    assert_eq!(done["type"], "done", "{frames:?}");
    (logs, done["result"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_editor_runs_a_graph_pauses_at_its_approval_and_resumes_it() {
    // Slow enough that a second resume arrives while the first waits for the Editor.
    let fake = echoing_model(Duration::from_millis(1_000)).await;
    let env = Env::new();
    let server = serve(&env, &fake);
    let client = reqwest::Client::new();
    let api = |path: &str| format!("{}/api/{path}", server.base);

    let (status, run) = frames(&client, &api("run-stream"), json!({"graph": drawn_graph()})).await;
    assert_eq!(status, 200);
    let (logs, result) = streamed(&run);
    let run_id = run[0]["runId"].as_str().unwrap().to_owned();
    assert_eq!(result["runId"], run_id);
    assert_eq!(result["status"], "paused");
    assert_eq!(result["waitingForInput"], true);
    assert_eq!(result["currentNodeId"], "node_3");
    let draft = "[Draft: Write about otters]";
    assert_eq!(
        said(&logs),
        [
            entry("step_start", "node_1", "start node"),
            entry("step_start", "node_2", "Writer agent node"),
            entry("start_prompt", "node_2", "Draft: Write about otters"),
            entry("llm_response", "node_2", draft),
            entry("step_start", "node_3", "approval node"),
            entry("wait_input", "node_3", "Waiting for user approval"),
        ]
    );
    assert_eq!(
        result["logs"],
        Value::Array(logs.clone()),
        "the stream and the result say the same"
    );
    assert!(logs[0]["timestamp"].as_str().unwrap().ends_with('Z'));
    assert_eq!(result["state"]["node_2"], draft);
    assert_eq!(result["state"]["previous_output"], draft);
    assert_eq!(result["workflow"]["nodes"][2]["type"], "approval");

    // A reload of the page reads the run back.
    let shown = support::get_json(&client, &api(&format!("run/{run_id}"))).await;
    assert_eq!(shown, result);

    // Approve from the stream; a second resume while it runs is refused.
    let resumed = {
        let (client, url, id) = (client.clone(), api("resume-stream"), run_id.clone());
        tokio::spawn(async move {
            let body = json!({"runId": id, "input": {"decision": "approve", "note": "nice"}});
            frames(&client, &url, body).await
        })
    };
    while fake.received().len() < 2 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let second = client
        .post(api("resume"))
        .json(&json!({"runId": run_id, "input": {"decision": "reject"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(second.status().as_u16(), 409);
    let refusal: Value = second.json().await.unwrap();
    assert_eq!(
        refusal["error"],
        "Run is already being resumed. Use a single resume endpoint per run."
    );
    let (status, resumed) = resumed.await.unwrap();
    assert_eq!(status, 200);
    let (logs, result) = streamed(&resumed);
    let polished = format!("[Polish: {draft}]");
    // Only what happened after the answer: the replayed steps are not logged again.
    assert_eq!(
        said(&logs),
        [
            entry(
                "input_received",
                "node_3",
                "User approved this step. Feedback: nice"
            ),
            entry("step_start", "node_4", "Editor agent node"),
            entry("start_prompt", "node_4", &format!("Polish: {draft}")),
            entry("llm_response", "node_4", &polished),
        ]
    );
    assert_eq!(result["status"], "completed");
    assert_eq!(result["waitingForInput"], false);
    assert_eq!(result["currentNodeId"], Value::Null);
    assert_eq!(result["logs"].as_array().unwrap().len(), 10);
    assert_eq!(
        result["state"]["node_3_approval"],
        json!({"decision": "approve", "note": "nice"})
    );
    assert_eq!(result["state"]["previous_output"], polished.as_str());

    // A finished run is no longer resumable, as in AgentFlow.
    let again = client
        .post(api("resume"))
        .json(&json!({"runId": run_id, "input": "approve"}))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status().as_u16(), 404);
    assert_eq!(fake.received().len(), 2, "each agent was called once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_run_outlives_its_server_and_a_text_answer_rejects() {
    let fake = echoing_model(Duration::ZERO).await;
    let env = Env::new();
    let server = serve(&env, &fake);
    let client = reqwest::Client::new();
    let res = client
        .post(format!("{}/api/run", server.base))
        .json(&json!({"graph": drawn_graph()}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let paused: Value = res.json().await.unwrap();
    assert_eq!(paused["status"], "paused");
    let run_id = paused["runId"].as_str().unwrap().to_owned();
    drop(server); // SIGKILL: AgentFlow would lose the paused run with its process

    let server = serve(&env, &fake);
    let res = client
        .post(format!("{}/api/resume", server.base))
        .json(&json!({"runId": run_id, "input": "Please REJECT this draft"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let done: Value = res.json().await.unwrap();
    assert_eq!(done["status"], "completed");
    assert_eq!(
        done["state"]["node_3_approval"],
        json!({"decision": "reject", "note": ""})
    );
    let kinds: Vec<_> = said(done["logs"].as_array().unwrap());
    assert_eq!(
        kinds.last().unwrap(),
        &entry("input_received", "node_3", "User rejected this step.")
    );
    assert!(
        !kinds.iter().any(|(_, node, _)| node == "node_4"),
        "reject leaves by its own edge, which goes nowhere"
    );
    assert_eq!(fake.received().len(), 1, "the writer is not asked again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_agentflow_s_error_shape_and_the_server_keeps_serving() {
    let fake = echoing_model(Duration::ZERO).await;
    let env = Env::new();
    let server = serve(&env, &fake);
    let client = reqwest::Client::new();
    let call = |method: &str, path: &str, body: Option<Value>| {
        let url = format!("{}/api/{path}", server.base);
        let req = match method {
            "GET" => client.get(url),
            _ => client.post(url),
        };
        let req = match body {
            Some(b) => req.json(&b),
            None => req,
        };
        async move {
            let res = req.send().await.unwrap();
            (res.status().as_u16(), res.json::<Value>().await.unwrap())
        }
    };
    let (status, e) = call("POST", "run", Some(json!({"graph": {"nodes": []}}))).await;
    assert_eq!(
        (status, e["error"].as_str()),
        (400, Some("Invalid workflow graph payload"))
    );
    let typo = json!({"graph": {"nodes": [{"id": "a", "type": "agnet", "x": 0, "y": 0}], "connections": []}});
    let (status, e) = call("POST", "run-stream", Some(typo)).await;
    assert_eq!(status, 400, "checked before the stream starts: {e}");
    let message = e["error"].as_str().unwrap();
    assert!(message.contains("unknown node type `agnet`"), "{message}");
    assert!(message.contains("did you mean `agent`?"), "{message}");
    assert_eq!(e["diagnostics"][0]["pointer"], "/nodes/0/type");
    let (status, e) = call("POST", "resume", Some(json!({"input": "approve"}))).await;
    assert_eq!(
        (status, e["error"].as_str()),
        (400, Some("runId is required"))
    );
    let (status, e) = call(
        "POST",
        "resume-stream",
        Some(json!({"runId": "0123456789"})),
    )
    .await;
    assert_eq!(
        (status, e["error"].as_str()),
        (404, Some("Run ID not found"))
    );
    let (status, e) = call("GET", "run/0123456789", None).await;
    assert_eq!((status, e["error"].as_str()), (404, Some("Run not found")));
    let (status, e) = call("GET", "config", None).await;
    assert_eq!(
        (status, e["error"].as_str()),
        (404, Some("No config found"))
    );
    let (status, _) = call("GET", "default-workflow", None).await;
    assert_eq!(status, 404);

    // A run of another dialect is not AgentFlow's to show.
    let flow = env.write(
        "hello.yaml",
        "weft: 1\nname: hello\nroot:\n  transform: {output: hi}\n",
    );
    let o = env.weft(&["run", flow.to_str().unwrap(), "--json", "-q"]);
    let native_id = support::stdout_json(&o)["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, e) = call("GET", &format!("run/{native_id}"), None).await;
    assert_eq!(status, 404);
    assert!(e["details"].as_str().unwrap().contains("/v1/runs/"), "{e}");

    // And it still runs graphs.
    let (status, ok) = call("POST", "run", Some(json!({"graph": drawn_graph()}))).await;
    assert_eq!((status, ok["status"].as_str()), (200, Some("paused")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_branches_at_approvals_pause_one_after_the_other() {
    // AgentFlow's engine pauses at the first approval reached and queues the other;
    // each resume answers the one it waits at and pauses at the next.
    let fake = echoing_model(Duration::ZERO).await;
    let env = Env::new();
    let server = serve(&env, &fake);
    let client = reqwest::Client::new();
    let approval = |id: &str| json!({"id": id, "type": "approval", "x": 0, "y": 0, "data": {"prompt": format!("{id}?")}});
    let graph = json!({
        "nodes": [
            {"id": "s", "type": "start", "x": 0, "y": 0, "data": {"initialInput": "go"}},
            approval("legal"), approval("finance"),
        ],
        "connections": [
            {"source": "s", "target": "legal", "sourceHandle": "output", "targetHandle": "input"},
            {"source": "s", "target": "finance", "sourceHandle": "output", "targetHandle": "input"},
        ]
    });
    let post = |path: &str, body: Value| {
        let req = client
            .post(format!("{}/api/{path}", server.base))
            .json(&body);
        async move { req.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    let first = post("run", json!({"graph": graph})).await;
    assert_eq!(first["status"], "paused");
    let run_id = first["runId"].as_str().unwrap().to_owned();
    let waits_at = first["currentNodeId"].as_str().unwrap().to_owned();
    let other = if waits_at == "legal" {
        "finance"
    } else {
        "legal"
    };
    let second = post(
        "resume",
        json!({"runId": run_id, "input": {"decision": "approve"}}),
    )
    .await;
    assert_eq!(second["status"], "paused", "{second}");
    assert_eq!(second["currentNodeId"], other);
    assert_eq!(
        second["state"][format!("{waits_at}_approval")]["decision"],
        "approve"
    );
    let third = post("resume", json!({"runId": run_id, "input": "reject"})).await;
    assert_eq!(third["status"], "completed", "{third}");
    assert_eq!(
        third["state"][format!("{other}_approval")]["decision"],
        "reject"
    );
    let answered: Vec<_> = said(third["logs"].as_array().unwrap())
        .into_iter()
        .filter(|(kind, _, _)| kind == "input_received")
        .map(|(_, node, _)| node)
        .collect();
    assert_eq!(answered, [waits_at, other.to_owned()]);
}
