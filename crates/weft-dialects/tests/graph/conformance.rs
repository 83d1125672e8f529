//! Behaviour spec 003 promises, node type by node type.

use super::{edge, graph, run, run_with};
use serde_json::{Value, json};
use weft_core::event::EventKind;
use weft_core::ports::RunStatus;
use weft_fakes::{FakeServer, Reply, Wire};

fn start(input: Option<&str>) -> Value {
    match input {
        Some(i) => json!({"id": "s", "type": "start", "x": 0, "y": 0, "data": {"initialInput": i}}),
        None => json!({"id": "s", "type": "start", "x": 0, "y": 0}),
    }
}

fn agent(id: &str, data: Value) -> Value {
    json!({"id": id, "type": "agent", "x": 0, "y": 0, "data": data})
}

fn end(id: &str) -> Value {
    json!({"id": id, "type": "end", "x": 0, "y": 0, "data": {}})
}

/// The user message of each request the server received, in order.
fn user_messages(server: &FakeServer) -> Vec<String> {
    server
        .received()
        .iter()
        .map(|r| r.last_user_message().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_outputs_its_initial_input_or_an_empty_string() {
    // 003, start: "Output value is node.data.initialInput or empty string."
    let g = run(&graph(
        json!([start(Some("hello")), end("e")]),
        json!([edge("s", "e", None)]),
    ))
    .await;
    assert_eq!(g.result.status, RunStatus::Completed);
    assert_eq!(g.output, Some(json!("hello")));
    assert_eq!(g.state()["s"], "hello");
    // AgentFlow's engine keeps the last output as `previous_output`.
    assert_eq!(g.state()["previous_output"], "hello");
    let g = run(&graph(
        json!([start(None), end("e")]),
        json!([edge("s", "e", None)]),
    ))
    .await;
    assert_eq!(g.output, Some(json!("")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_reads_its_prompts_model_and_effort_and_replaces_previous_output() {
    // 003, agent: "Reads: systemPrompt, userPrompt, model, reasoningEffort"; "{{PREVIOUS_OUTPUT}}
    // is replaced with prior node output."
    let server = FakeServer::start(Wire::OpenAi, vec![Reply::text("Bonjour.")]).await;
    let text = graph(
        json!([
            start(Some("hello {{ not a template }}")),
            agent(
                "a",
                json!({
                    "systemPrompt": "You translate to French.",
                    "userPrompt": "Translate: {{PREVIOUS_OUTPUT}}!",
                    "model": "gpt-4o-mini",
                    "reasoningEffort": "low",
                    "tools": {"web_search": false, "subagents": false}
                })
            ),
            end("e")
        ]),
        json!([edge("s", "a", Some("output")), edge("a", "e", None)]),
    );
    let g = run_with(&text, None, Some(&server), None).await;
    assert_eq!(g.output, Some(json!("Bonjour.")));
    assert_eq!(g.state()["a"], "Bonjour.");
    let sent = &server.received()[0].body;
    assert_eq!(sent["model"], "gpt-4o-mini");
    assert_eq!(sent["reasoning_effort"], "low");
    assert_eq!(sent["messages"][0]["content"], "You translate to French.");
    // The start text's braces stay literal text.
    assert_eq!(
        user_messages(&server),
        vec!["Translate: hello {{ not a template }}!"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_user_prompt_falls_back_to_the_previous_output() {
    // 003, agent: "If userPrompt is empty, engine falls back to previous output text."
    let server = FakeServer::start(Wire::OpenAi, vec![Reply::text("ok")]).await;
    let text = graph(
        json!([
            start(Some("the previous text")),
            agent("a", json!({"userPrompt": "", "model": "gpt-4o-mini"}))
        ]),
        json!([edge("s", "a", None)]),
    );
    let g = run_with(&text, None, Some(&server), None).await;
    assert_eq!(g.result.status, RunStatus::Completed);
    assert_eq!(user_messages(&server), vec!["the previous text"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_search_is_offered_to_the_model() {
    // 003, agent: "tools (web_search, subagents)".
    let server = FakeServer::start(Wire::OpenAi, vec![Reply::text("found")]).await;
    let text = graph(
        json!([
            start(Some("q")),
            agent(
                "a",
                json!({"model": "gpt-4o-mini", "tools": {"web_search": true}})
            )
        ]),
        json!([edge("s", "a", None)]),
    );
    let g = run_with(&text, None, Some(&server), None).await;
    assert_eq!(
        g.result.status,
        RunStatus::Completed,
        "{:?}",
        g.result.error
    );
    // OpenAI's Chat Completions takes `web_search_options` (docs/models.md).
    let body = &server.received()[0].body;
    assert_eq!(body["web_search_options"], json!({}), "{body}");
    assert!(body.get("tools").is_none(), "{body}");
}

/// An if node on `input` with `conditions`; each handle leads to an end node of its name.
async fn route(input: &str, conditions: Value, handles: &[&str]) -> Vec<String> {
    let mut nodes = vec![
        start(Some(input)),
        json!({"id": "check", "type": "if", "x": 0, "y": 0, "data": {"conditions": conditions}}),
    ];
    let mut edges = vec![edge("s", "check", None)];
    for h in handles {
        let id = h.replace('-', "_");
        nodes.push(end(&id));
        edges.push(edge("check", &id, Some(h)));
    }
    let g = run(&graph(Value::Array(nodes), Value::Array(edges))).await;
    assert_eq!(
        g.result.status,
        RunStatus::Completed,
        "{:?}",
        g.result.error
    );
    g.log_kinds()
        .into_iter()
        .filter(|(k, n)| k == "step_start" && n != "s" && n != "check")
        .map(|(_, n)| n)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn if_matches_equal_and_contains_on_the_lowercased_output_first_match_wins() {
    // 003, if: "Evaluates conditions against previous output (stringified/lowercased).
    // Supported operators: equal, contains. First matching condition wins. Connection
    // handles: condition-<index> for condition branches, false for fallback branch".
    let conditions = json!([
        {"operator": "equal", "value": "APPROVED"},
        {"operator": "contains", "value": "ok"},
        {"operator": "contains", "value": "o"}
    ]);
    let handles = ["condition-0", "condition-1", "condition-2", "false"];
    assert_eq!(
        route("Approved", conditions.clone(), &handles).await,
        ["condition_0"]
    );
    assert_eq!(
        route("it is OK now", conditions.clone(), &handles).await,
        ["condition_1"]
    );
    assert_eq!(
        route("so", conditions.clone(), &handles).await,
        ["condition_2"]
    );
    assert_eq!(route("nil", conditions.clone(), &handles).await, ["false"]);
    // A value is trimmed; a blank one never matches, not even a blank output
    // (AgentFlow's engine: `if (!expectedValue) return false`).
    let blank = json!([
        {"operator": "contains", "value": "  "},
        {"operator": "equal", "value": ""},
        {"operator": "contains", "value": " Yes "}
    ]);
    let handles = ["condition-0", "condition-1", "condition-2", "false"];
    assert_eq!(
        route("yes!", blank.clone(), &handles).await,
        ["condition_2"]
    );
    assert_eq!(route("", blank, &handles).await, ["false"]);
    // Numbers are compared as their text.
    assert_eq!(
        route(
            "42",
            json!([{"operator": "equal", "value": 42}]),
            &["condition-0", "false"]
        )
        .await,
        ["condition_0"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_if_data_and_the_true_handle_still_work() {
    // 003, Backward Compatibility: "Legacy if.data.condition is mapped to
    // if.data.conditions"; "Legacy true connection handle remains supported for first
    // condition branch."
    let text = graph(
        json!([
            start(Some("Yes please")),
            {"id": "check", "type": "if", "x": 0, "y": 0, "data": {"condition": {"operator": "contains", "value": "yes"}}},
            end("yes"), end("no")
        ]),
        json!([
            edge("s", "check", None),
            edge("check", "yes", Some("true")),
            edge("check", "no", Some("false"))
        ]),
    );
    let g = run(&text).await;
    assert!(g.log_kinds().contains(&("step_start".into(), "yes".into())));
    assert!(!g.log_kinds().iter().any(|(_, n)| n == "no"));

    // Older files wrote the legacy condition as its text alone: a `contains` check
    // (issue 20).
    let bare = text.replace(r#"{"operator":"contains","value":"yes"}"#, r#""yes""#);
    assert_ne!(bare, text, "the legacy condition is in the file");
    let g = run(&bare).await;
    assert!(g.log_kinds().contains(&("step_start".into(), "yes".into())));
    assert!(!g.log_kinds().iter().any(|(_, n)| n == "no"));
}

fn approval_graph() -> String {
    graph(
        json!([
            start(Some("ship it")),
            {"id": "gate", "type": "input", "x": 0, "y": 0, "data": {"prompt": "Ship?"}},
            end("shipped"), end("held")
        ]),
        json!([
            edge("s", "gate", None),
            edge("gate", "shipped", Some("approve")),
            edge("gate", "held", Some("reject"))
        ]),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_pauses_and_resumes_down_the_decision_s_edge() {
    // 003, approval: "Pauses execution with status = paused, waitingForInput = true,
    // currentNodeId = node.id."; "Resume follows outgoing branch where sourceHandle ===
    // decision." Backward Compatibility: "Node type input is mapped to approval."
    let g = run(&approval_graph()).await;
    assert_eq!(g.result.status, RunStatus::Paused);
    let error = serde_json::to_value(&g.result.error).unwrap();
    let summary = RunSummary {
        run_id: &g.result.run_id,
        status: g.result.status.as_str(),
        state: &g.state,
        waiting: &g.result.waiting,
        output: g.output.as_ref(),
        error: &error,
    };
    let shaped = g
        .view
        .result(&summary, &g.logs)
        .expect("the editor's shape");
    assert_eq!(shaped["status"], "paused");
    assert_eq!(shaped["waitingForInput"], true);
    assert_eq!(shaped["currentNodeId"], "gate");
    assert_eq!(
        shaped["state"]["previous_output"], "ship it",
        "the state so far"
    );

    for (decision, reached, skipped) in [
        ("approve", "shipped", "held"),
        ("reject", "held", "shipped"),
    ] {
        let g = run_with(
            &approval_graph(),
            None,
            None,
            Some(json!({"decision": decision, "note": "ok"})),
        )
        .await;
        assert_eq!(
            g.result.status,
            RunStatus::Completed,
            "{:?}",
            g.result.error
        );
        // "Resume input is normalized to: { "decision": "approve" | "reject", "note": "" }"
        assert_eq!(
            g.state()["gate_approval"],
            json!({"decision": decision, "note": "ok"})
        );
        let kinds = g.log_kinds();
        assert!(
            kinds.contains(&("step_start".into(), reached.into())),
            "{kinds:?}"
        );
        assert!(!kinds.iter().any(|(_, n)| n == skipped), "{kinds:?}");
        assert!(kinds.contains(&("wait_input".into(), "gate".into())));
        assert!(kinds.contains(&("input_received".into(), "gate".into())));
        // AgentFlow's editor reads the decision and the feedback back from this text.
        let said =
            |kind: &str| g.logs.iter().find(|l| l["type"] == kind).unwrap()["content"].clone();
        let verb = if decision == "approve" {
            "approved"
        } else {
            "rejected"
        };
        assert_eq!(
            said("input_received"),
            format!("User {verb} this step. Feedback: ok")
        );
        assert_eq!(said("wait_input"), "Waiting for user approval");
        assert_eq!(said("step_start"), "start node");
    }
}

use weft_dialects::view::RunSummary;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outgoing_branches_run_concurrently() {
    // 003: "Multiple outgoing execution branches run concurrently (Promise.all)."
    let server = FakeServer::start_with(Wire::OpenAi, std::time::Duration::from_millis(300), |r| {
        let user = r.body["messages"].to_string();
        Reply::text(if user.contains("left") { "L" } else { "R" })
    })
    .await;
    let text = graph(
        json!([
            start(Some("x")),
            agent(
                "left",
                json!({"model": "gpt-4o-mini", "userPrompt": "left {{PREVIOUS_OUTPUT}}"})
            ),
            agent(
                "right",
                json!({"model": "gpt-4o-mini", "userPrompt": "right {{PREVIOUS_OUTPUT}}"})
            )
        ]),
        json!([edge("s", "left", None), edge("s", "right", None)]),
    );
    let g = run_with(&text, None, Some(&server), None).await;
    assert_eq!(
        g.result.status,
        RunStatus::Completed,
        "{:?}",
        g.result.error
    );
    assert_eq!(g.state()["left"], "L");
    assert_eq!(g.state()["right"], "R");
    // Both calls began before either finished.
    let order: Vec<&str> = g
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::StepStarted { kind, .. } if kind == "llm" => Some("start"),
            EventKind::LlmCall { .. } => Some("done"),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["start", "start", "done", "done"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_lets_the_other_branches_finish_and_resume_drains_the_rest() {
    // 003: "If execution pauses while other branches remain, downstream nodes are queued
    // and resumed later. After resume, engine drains deferred queue while status remains
    // running."
    let server = FakeServer::start(
        Wire::OpenAi,
        vec![Reply::text("drafted"), Reply::text("polished")],
    )
    .await;
    let text = graph(
        json!([
            start(Some("topic")),
            {"id": "gate", "type": "approval", "x": 0, "y": 0, "data": {}},
            agent("draft", json!({"model": "gpt-4o-mini"})),
            agent("polish", json!({"model": "gpt-4o-mini"})),
            end("done")
        ]),
        json!([
            edge("s", "gate", None),
            edge("s", "draft", None),
            edge("draft", "polish", None),
            edge("gate", "done", Some("approve"))
        ]),
    );
    let paused = run_with(&text, None, Some(&server), None).await;
    assert_eq!(paused.result.status, RunStatus::Paused);
    assert_eq!(
        paused.state()["polish"],
        "polished",
        "the other branch ran to its end"
    );
    let g = run_with(
        &text,
        None,
        Some(&server),
        Some(json!({"decision": "approve", "note": ""})),
    )
    .await;
    assert_eq!(
        g.result.status,
        RunStatus::Completed,
        "{:?}",
        g.result.error
    );
    assert!(
        g.log_kinds()
            .contains(&("step_start".into(), "done".into()))
    );
    assert_eq!(g.state()["polish"], "polished");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_carries_the_spec_s_types() {
    // 003, Log Event Semantics: "step_start, start_prompt, logic_check, wait_input,
    // input_received, llm_response, llm_error, error".
    let server = FakeServer::start(
        Wire::OpenAi,
        vec![Reply::text("yes"), Reply::error(400, "bad request")],
    )
    .await;
    let text = graph(
        json!([
            start(Some("go")),
            agent("ask", json!({"model": "gpt-4o-mini", "agentName": "Asker", "collapsed": true})),
            {"id": "check", "type": "if", "x": 0, "y": 0, "data": {"conditions": [
                {"operator": "contains", "value": "no"},
                {"operator": "equal", "value": " Yes "},
                {"operator": "contains", "value": "y"}
            ]}},
            agent("fail", json!({"model": "gpt-4o-mini"}))
        ]),
        json!([
            edge("s", "ask", None),
            edge("ask", "check", None),
            edge("check", "fail", Some("condition-1"))
        ]),
    );
    let g = run_with(&text, None, Some(&server), None).await;
    assert_eq!(g.result.status, RunStatus::Failed);
    let kinds: Vec<String> = g
        .log_kinds()
        .into_iter()
        .map(|(k, n)| format!("{k}:{n}"))
        .collect();
    // As AgentFlow's engine logs them: no `start_prompt` for the start node; an agent's
    // `start_prompt` (the user message it sends) before its call.
    assert_eq!(
        kinds,
        [
            "step_start:s",
            "step_start:ask",
            "start_prompt:ask",
            "llm_response:ask",
            "step_start:check",
            "logic_check:check",
            "logic_check:check",
            "step_start:fail",
            "start_prompt:fail",
            "llm_error:fail"
        ]
    );
    let contents = |kind: &str| -> Vec<Value> {
        g.logs
            .iter()
            .filter(|l| l["type"] == kind)
            .map(|l| l["content"].clone())
            .collect()
    };
    assert_eq!(contents("llm_response"), [json!("yes")]);
    assert_eq!(
        contents("step_start"),
        [
            json!("start node"),
            json!("Asker agent node"),
            json!("condition node"),
            json!("Agent agent node")
        ]
    );
    assert_eq!(contents("start_prompt"), [json!("go"), json!("yes")]);
    // One `logic_check` per condition evaluated, up to the first that matched.
    assert_eq!(
        contents("logic_check"),
        [
            json!("Condition 1 (contains \"no\") evaluated as false"),
            json!("Condition 2 (equal \" Yes \") evaluated as true")
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subagent_edges_make_a_nested_agent_a_tool() {
    // 003, Subagent edges: "Tool-delegation edges only, not execution flow edges. Marked
    // by sourceHandle: "subagent". Used to build nested agent-tool trees for agent
    // nodes."; "Subagent runtime events are logged as JSON payloads in content with
    // types: subagent_call_start, subagent_call_end, subagent_call_error".
    let server = FakeServer::start_with(Wire::OpenAi, std::time::Duration::ZERO, |r| {
        let tools = r.body["tools"].to_string();
        let messages = r.body["messages"].to_string();
        if tools.contains("researcher") && !messages.contains("\"tool\"") {
            Reply::tool_call("researcher", json!({"input": "find the capital of France"}))
        } else if tools.contains("researcher") {
            Reply::text("The capital is Paris.")
        } else {
            Reply::text("Paris")
        }
    })
    .await;
    let text = graph(
        json!([
            start(Some("What is the capital of France?")),
            agent(
                "lead",
                json!({"model": "gpt-4o-mini", "tools": {"subagents": true}})
            ),
            agent(
                "helper",
                json!({"name": "researcher", "description": "Looks things up", "model": "gpt-4o-mini", "userPrompt": "Task: {{PREVIOUS_OUTPUT}}"})
            )
        ]),
        json!([edge("s", "lead", None), {"source": "lead", "target": "helper", "sourceHandle": "subagent"}]),
    );
    let g = run_with(&text, None, Some(&server), None).await;
    assert_eq!(
        g.result.status,
        RunStatus::Completed,
        "{:?}",
        g.result.error
    );
    assert_eq!(g.state()["lead"], "The capital is Paris.");
    assert!(
        g.state().get("helper").is_none(),
        "a subagent is not an execution node"
    );
    let sent = server.received();
    assert_eq!(sent.len(), 3);
    assert_eq!(
        sent[0].body["tools"][0]["function"]["description"],
        "Looks things up"
    );
    assert_eq!(
        user_messages(&server)[1],
        "Task: find the capital of France"
    );
    let start = g
        .logs
        .iter()
        .find(|l| l["type"] == "subagent_call_start")
        .expect("a start entry");
    let payload: Value = serde_json::from_str(start["content"].as_str().unwrap()).unwrap();
    assert_eq!(payload["type"], "subagent_call_start");
    assert_eq!(payload["parentNodeId"], "lead");
    assert_eq!(payload["subagentNodeId"], "helper");
    assert_eq!(payload["input"], "find the capital of France");
    let end = g
        .logs
        .iter()
        .find(|l| l["type"] == "subagent_call_end")
        .expect("an end entry");
    let ended: Value = serde_json::from_str(end["content"].as_str().unwrap()).unwrap();
    assert_eq!(ended["subagentNodeId"], "helper");
    // The fields AgentFlow's editor needs to show the call (it ignores a payload
    // without them): one call id from start to end, the subagent's name, the depth.
    assert_eq!(payload["subagentName"], "Agent");
    assert_eq!(payload["depth"], 1);
    assert!(payload.get("parentCallId").is_none());
    assert_eq!(payload["callId"], ended["callId"]);
    assert!(payload["callId"].as_str().unwrap().ends_with("researcher"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_subagent_s_calls_belong_to_the_top_level_agent() {
    // AgentFlow's runtime events: parentNodeId is the top-level agent, depth counts the
    // nesting, parentCallId names the enclosing call.
    let server = FakeServer::start_with(Wire::OpenAi, std::time::Duration::ZERO, |r| {
        let tools = r.body["tools"].to_string();
        let answered = r.body["messages"].to_string().contains("\"tool\"");
        match (
            tools.contains("Checker"),
            tools.contains("Researcher"),
            answered,
        ) {
            (true, _, false) => Reply::tool_call("Checker", json!({"input": "check Paris"})),
            (_, true, false) => Reply::tool_call("Researcher", json!({"input": "capital?"})),
            (true, _, true) => Reply::text("Paris, checked"),
            (_, true, true) => Reply::text("Paris"),
            _ => Reply::text("checked"),
        }
    })
    .await;
    let sub = json!({"model": "gpt-4o-mini", "tools": {"subagents": true}});
    let text = graph(
        json!([
            start(Some("capital of France?")),
            agent("lead", sub.clone()),
            agent(
                "research",
                json!({"agentName": "Researcher", "model": "gpt-4o-mini", "tools": {"subagents": true}})
            ),
            agent(
                "check",
                json!({"agentName": "Checker", "model": "gpt-4o-mini"})
            )
        ]),
        json!([
            edge("s", "lead", None),
            {"source": "lead", "target": "research", "sourceHandle": "subagent"},
            {"source": "research", "target": "check", "sourceHandle": "subagent"}
        ]),
    );
    let g = run_with(&text, None, Some(&server), None).await;
    assert_eq!(
        g.result.status,
        RunStatus::Completed,
        "{:?}",
        g.result.error
    );
    let calls: Vec<(String, Value)> = g
        .logs
        .iter()
        .filter(|l| l["type"].as_str().unwrap().starts_with("subagent_call"))
        .map(|l| {
            assert_eq!(
                l["nodeId"], "lead",
                "every call belongs to the top-level agent"
            );
            let p: Value = serde_json::from_str(l["content"].as_str().unwrap()).unwrap();
            (l["type"].as_str().unwrap().to_owned(), p)
        })
        .collect();
    let kinds: Vec<&str> = calls
        .iter()
        .map(|(k, p)| {
            assert_eq!(p["parentNodeId"], "lead");
            k.as_str()
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "subagent_call_start",
            "subagent_call_start",
            "subagent_call_end",
            "subagent_call_end"
        ]
    );
    let (outer, inner) = (&calls[0].1, &calls[1].1);
    assert_eq!(
        (outer["subagentName"].as_str(), outer["depth"].as_u64()),
        (Some("Researcher"), Some(1))
    );
    assert_eq!(
        (inner["subagentName"].as_str(), inner["depth"].as_u64()),
        (Some("Checker"), Some(2))
    );
    assert_eq!(inner["parentCallId"], outer["callId"]);
    assert_eq!(
        calls[2].1["callId"], inner["callId"],
        "the inner call ends first"
    );
    assert_eq!(calls[3].1["callId"], outer["callId"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_subagent_is_logged_and_answered_to_its_parent() {
    // 003: "subagent_call_error". The parent model is told the call failed, and answers.
    let server = FakeServer::start(
        Wire::OpenAi,
        vec![
            Reply::tool_call("helper", json!({"input": "x"})),
            Reply::error(400, "the helper's model refused"),
            Reply::text("I could not ask the helper."),
        ],
    )
    .await;
    let text = graph(
        json!([
            start(Some("go")),
            agent(
                "lead",
                json!({"model": "gpt-4o-mini", "tools": {"subagents": true}})
            ),
            agent("helper", json!({"model": "gpt-4o-mini"}))
        ]),
        json!([edge("s", "lead", None), {"source": "lead", "target": "helper", "sourceHandle": "subagent", "targetHandle": "input"}]),
    );
    let g = run_with(&text, None, Some(&server), None).await;
    assert_eq!(
        g.result.status,
        RunStatus::Completed,
        "{:?}",
        g.result.error
    );
    assert_eq!(g.state()["lead"], "I could not ask the helper.");
    assert!(
        g.logs.iter().any(|l| l["type"] == "subagent_call_error"),
        "{:?}",
        g.logs
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_input_replaces_the_initial_input() {
    // docs/dialects/graph.md: `weft run --input` gives the start node's output.
    let g = run_with(
        &graph(
            json!([start(Some("default")), end("e")]),
            json!([edge("s", "e", None)]),
        ),
        Some(json!("given")),
        None,
        None,
    )
    .await;
    assert_eq!(g.output, Some(json!("given")));
}

#[test]
fn a_placeholder_other_than_previous_output_is_warned_of_as_literal_text() {
    // 003: "{{PREVIOUS_OUTPUT}} is replaced with prior node output" — and nothing else
    // is, so `{{previous_output}}` or `{{topic}}` reaches the model as written.
    let warnings = |prompt: &str| {
        let text = graph(
            json!([
                start(Some("a topic")),
                agent("a", json!({"userPrompt": prompt, "model": "gpt-4o-mini"})),
                end("e")
            ]),
            json!([edge("s", "a", Some("output")), edge("a", "e", None)]),
        );
        weft_dialects::load_str(&text, "g.json", None, Some("graph"))
            .unwrap()
            .warnings
    };
    let found = warnings("Summarize {{previous_output}} for {{ topic }}");
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found[0]
            .message
            .contains("`{{previous_output}}` stays in the prompt as written"),
        "{found:#?}"
    );
    assert_eq!(
        found[0].hint.as_deref(),
        Some("did you mean `PREVIOUS_OUTPUT`?")
    );
    assert_eq!(found[0].pointer, "/nodes/1/data/userPrompt");
    assert!(found[0].loc.is_some());
    assert!(
        found[1]
            .hint
            .as_deref()
            .unwrap()
            .contains("write the text itself"),
        "{found:#?}"
    );
    assert!(warnings("Summarize {{PREVIOUS_OUTPUT}}; JSON like {{\"a\": 1}} stays").is_empty());
}
