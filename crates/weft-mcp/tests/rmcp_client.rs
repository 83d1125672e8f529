//! The same conversation as the Python SDK's, through rmcp's own client: a server over a
//! real SQLite file, connected by an in-process pipe.

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};
use std::sync::Arc;
use weft_mcp::{McpOptions, WeftMcp};

struct Session {
    client: RunningService<RoleClient, ()>,
    _dir: tempfile::TempDir,
}

async fn session(options: McpOptions) -> Session {
    let dir = tempfile::tempdir().unwrap();
    let store =
        weft_store::SqliteStore::open(dir.path().join("runs.db"), weft_store::Durability::Process)
            .unwrap();
    let engine = weft_engine::Engine::builder(Arc::new(store)).build();
    // Test runs: a memory store and no actions at all; every llm block here is answered.
    let test_engines: weft_mcp::TestEngines = Arc::new(|| {
        weft_engine::Engine::builder(Arc::new(weft_store::MemoryStore::new()))
            .models(Arc::new(weft_llm::Router::new()))
            .build()
    });
    let options = McpOptions {
        test_engines: Some(test_engines),
        ..options
    };
    let (server_end, client_end) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        let running = WeftMcp::new(weft_service::Service::new(engine, None), options)
            .serve(server_end)
            .await
            .unwrap();
        let _ = running.waiting().await;
    });
    let client = ().serve(client_end).await.unwrap();
    Session { client, _dir: dir }
}

impl Session {
    async fn call(&self, tool: &str, arguments: Value) -> (bool, Value) {
        let Value::Object(map) = arguments else {
            panic!("arguments are an object")
        };
        let r: CallToolResult = self
            .client
            .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(map))
            .await
            .unwrap();
        let body = r.structured_content.clone().unwrap_or(Value::Null);
        (r.is_error.unwrap_or(false), body)
    }
}

const FLOW: &str = "weft: 1\nname: double\ninput: {count: 2}\nroot:\n  sequence:\n    - {id: twice, transform: {output: '{{ input.count * 2 }}'}}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_is_saved_patched_run_and_read_back() {
    let s = session(McpOptions::default()).await;
    let tools = s.client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, weft_mcp::tools::names());

    let (err, saved) = s
        .call("save_flow", json!({"name": "double", "source": FLOW}))
        .await;
    assert!(!err, "{saved}");
    assert_eq!(saved["version"], 1);
    // A patch that breaks the flow is refused with located diagnostics; nothing saved.
    let (err, refused) = s
        .call(
            "edit_flow",
            json!({"name": "double", "patch": [{"op": "add", "path": "/root/sequence/0/retyr", "value": 3}]}),
        )
        .await;
    assert!(err, "{refused}");
    let d = &refused["diagnostics"][0];
    assert_eq!(d["pointer"], "/root/sequence/0/retyr", "{refused}");
    assert!(d["loc"]["line"].as_u64().is_some(), "{refused}");
    assert!(d["hint"].as_str().unwrap().contains("retry"), "{refused}");
    let (_, listed) = s.call("list_flows", json!({})).await;
    assert_eq!(listed["flows"][0]["version"], 1);

    let (err, edited) = s
        .call(
            "edit_flow",
            json!({"name": "double", "patch": [{"op": "replace", "path": "/input/count", "value": 21}]}),
        )
        .await;
    assert!(!err, "{edited}");
    assert_eq!(edited["version"], 2);
    assert!(
        edited["source"].as_str().unwrap().contains("count: 21"),
        "{edited}"
    );

    let (err, run) = s
        .call("run_flow", json!({"name": "double", "wait_seconds": 30}))
        .await;
    assert!(!err, "{run}");
    assert_eq!(
        (run["status"].as_str(), &run["output"]),
        (Some("completed"), &json!(42))
    );
    let (_, first) = s
        .call("get_flow", json!({"name": "double", "version": 1}))
        .await;
    assert_eq!(first["source"], FLOW, "every version is kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_names_its_failing_step_and_approvals_need_the_flag() {
    let s = session(McpOptions::default()).await;
    let failing = "weft: 1\nname: bad\nroot:\n  sequence:\n    - {id: ok, transform: {output: 1}}\n    - {id: boom, transform: {output: '{{ input.missing.deeper }}'}}\n";
    let (_, run) = s
        .call("run_flow", json!({"source": failing, "wait_seconds": 30}))
        .await;
    assert_eq!(run["status"], "failed", "{run}");
    let (_, got) = s.call("get_run", json!({"run_id": run["run_id"]})).await;
    assert_eq!(got["failure"]["path"], "root/boom", "{got}");
    assert_eq!(got["failure"]["input"], json!(1), "{got}");
    assert!(got["failure"]["error"]["kind"].is_string(), "{got}");

    let gate = "weft: 1\nname: gate\nroot: {id: ask, approval: {prompt: 'ship?'}}\n";
    let (_, paused) = s
        .call("run_flow", json!({"source": gate, "wait_seconds": 30}))
        .await;
    assert_eq!(paused["status"], "paused", "{paused}");
    let (err, refused) = s
        .call(
            "answer_approval",
            json!({"run_id": paused["run_id"], "decision": "approve"}),
        )
        .await;
    assert!(
        err && refused["hint"].as_str().unwrap().contains("weft approve"),
        "{refused}"
    );

    let allowed = session(McpOptions {
        allow_approvals: true,
        ..McpOptions::default()
    })
    .await;
    let (_, paused) = allowed
        .call("run_flow", json!({"source": gate, "wait_seconds": 30}))
        .await;
    let (err, answered) = allowed
        .call(
            "answer_approval",
            json!({"run_id": paused["run_id"], "decision": "approve", "wait_seconds": 30}),
        )
        .await;
    assert!(!err, "{answered}");
    assert_eq!(answered["status"], "completed", "{answered}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_flow_answers_model_calls_from_the_answers_and_keeps_no_run() {
    let s = session(McpOptions::default()).await;
    let flow = "weft: 1\nname: t\nroot:\n  sequence:\n    - {id: pick, llm: {model: openai/gpt-4o, prompt: 'pick', output_schema: {type: object, properties: {label: {type: string}}, required: [label]}}}\n    - {id: shape, transform: {output: '{{ input.label }}!'}}\n";
    let (err, tested) = s
        .call(
            "test_flow",
            json!({"source": flow, "answers": {"pick": {"label": "billing"}}}),
        )
        .await;
    assert!(!err, "{tested}");
    assert_eq!(tested["output"], "billing!", "{tested}");
    assert_eq!(tested["answered_blocks"], json!(["pick"]));
    assert_eq!(
        tested["steps"][1]["output"],
        json!({"label": "billing"}),
        "{tested}"
    );
    let (_, runs) = s.call("list_runs", json!({})).await;
    assert_eq!(
        runs["runs"],
        json!([]),
        "a test run stays out of the database"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_hold_dialect_references_saved_flows_and_runs() {
    use rmcp::model::{ReadResourceRequestParams, ResourceContents};
    let s = session(McpOptions::default()).await;
    s.call("save_flow", json!({"name": "double", "source": FLOW}))
        .await;
    let (_, run) = s
        .call("run_flow", json!({"name": "double", "wait_seconds": 30}))
        .await;
    let listed = s.client.list_all_resources().await.unwrap();
    let uris: Vec<&str> = listed.iter().map(|r| r.uri.as_str()).collect();
    for expected in [
        "weft://dialects/blocks/reference",
        "weft://dialects/native/schema",
        "weft://flows/double",
    ] {
        assert!(uris.contains(&expected), "{expected} not in {uris:?}");
    }
    let run_uri = format!("weft://runs/{}", run["run_id"].as_str().unwrap());
    assert!(uris.contains(&run_uri.as_str()), "{uris:?}");
    let templates = s.client.list_all_resource_templates().await.unwrap();
    assert_eq!(templates.len(), 3);

    let read = |uri: String| {
        let client = &s.client;
        async move {
            let r = client
                .read_resource(ReadResourceRequestParams::new(uri))
                .await
                .unwrap();
            match &r.contents[0] {
                ResourceContents::TextResourceContents { text, .. } => text.clone(),
                other => panic!("{other:?}"),
            }
        }
    };
    assert_eq!(read("weft://flows/double".into()).await, FLOW);
    assert_eq!(read("weft://flows/double/versions/1".into()).await, FLOW);
    assert!(
        read("weft://dialects/blocks/reference".into())
            .await
            .contains("loop")
    );
    let schema: Value =
        serde_json::from_str(&read("weft://dialects/native/schema".into()).await).unwrap();
    assert!(schema.is_object());
    let shown: Value = serde_json::from_str(&read(run_uri).await).unwrap();
    assert_eq!(shown["status"], "completed");
    let missing = s
        .client
        .read_resource(ReadResourceRequestParams::new("weft://flows/none"))
        .await;
    assert!(missing.is_err(), "an unknown resource is an error");
    // The server keeps serving after it.
    assert!(s.client.list_all_tools().await.is_ok());
}

/// The Python SDK's conversation (tests/mcp/conversation.py in weft-cli), through rmcp:
/// spec 000's `h` container with a `code` block in a `loop`, built from an empty
/// document by patches, a deliberate mistake fixed from the diagnostics, then run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spec_000_s_example_is_built_by_patches_fixed_and_run() {
    let s = session(McpOptions::default()).await;
    let info = s.client.peer_info().unwrap();
    eprintln!("rmcp negotiated {:?}", info.protocol_version);
    assert_eq!(info.server_info.as_ref().unwrap().name, "weft");
    let patch = |code_type: &str| {
        json!([
            {"op": "add", "path": "/name", "value": "people"},
            {"op": "add", "path": "/root", "value": {"type": "h", "children": []}},
            {"op": "add", "path": "/root/children/-", "value": {
                "type": "loop", "arrayField": "people", "children": [{
                    "step_id": "describe", "type": code_type,
                    "input_schema": {"fields": [{"name": "people", "type": "object"}]},
                    "code": "return {'full_name': people['first'] + ' ' + people['last']}",
                }],
            }},
        ])
    };
    let (err, wrong) = s
        .call(
            "edit_flow",
            json!({"name": "people", "dialect": "blocks", "patch": patch("cod")}),
        )
        .await;
    assert!(err, "{wrong}");
    let d = &wrong["diagnostics"][0];
    assert_eq!(d["pointer"], "/root/children/0/children/0/type", "{wrong}");
    assert!(d["hint"].as_str().unwrap().contains("`code`"), "{wrong}");
    let (err, fixed) = s
        .call(
            "edit_flow",
            json!({"name": "people", "dialect": "blocks", "patch": patch("code")}),
        )
        .await;
    assert!(!err, "{fixed}");
    assert_eq!(fixed["version"], 1);
    assert_eq!(fixed["dialect"], "blocks");
    let people = json!({"people": [{"first": "Ada", "last": "Lovelace"}, {"first": "Alan", "last": "Turing"}]});
    let (err, run) = s
        .call(
            "run_flow",
            json!({"name": "people", "input": people, "wait_seconds": 60}),
        )
        .await;
    assert!(!err, "{run}");
    let (_, got) = s.call("get_run", json!({"run_id": run["run_id"]})).await;
    eprintln!("{got}");
    // This in-process engine has no Python sandbox (the binary's test runs the code):
    // the run fails at the code block, and get_run says where and why.
    assert_eq!(run["status"], "failed", "{run}");
    assert_eq!(got["failure"]["path"], "root/0/1/[0]/describe", "{got}");
    assert_eq!(got["failure"]["error"]["kind"], "config", "{got}");
    assert_eq!(
        got["failure"]["input"],
        json!({"people": {"first": "Ada", "last": "Lovelace"}}),
        "{got}"
    );
}

/// A client of the current protocol revision (2026-07-28) is served as well as one of
/// the revision before it, which the other tests negotiate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_of_the_current_revision_is_served() {
    use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
    let dir = tempfile::tempdir().unwrap();
    let store =
        weft_store::SqliteStore::open(dir.path().join("runs.db"), weft_store::Durability::Process)
            .unwrap();
    let engine = weft_engine::Engine::builder(Arc::new(store)).build();
    let (server_end, client_end) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        let running = WeftMcp::new(
            weft_service::Service::new(engine, None),
            McpOptions::default(),
        )
        .serve(server_end)
        .await
        .unwrap();
        let _ = running.waiting().await;
    });
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    // 2026-07-28 has no initialize handshake: the client discovers the server.
    let config = ClientConfig::new(ClientCapabilities::default(), Implementation::new("t", "1"));
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let client = config
        .serve_with_lifecycle(client_end, lifecycle)
        .await
        .unwrap();
    assert_eq!(
        client.peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2026_07_28
    );
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), weft_mcp::tools::names().len());
    let mut args = serde_json::Map::new();
    args.insert("source".into(), json!(FLOW));
    let r = client
        .call_tool(CallToolRequestParams::new("validate_flow").with_arguments(args))
        .await
        .unwrap();
    assert_eq!(r.structured_content.unwrap()["valid"], true);
}

/// Issue 37's conversation: a model saves a `blocks` flow whose loop reads a field the
/// block before it does not declare, and hears of it (with the field it meant) before
/// anything runs; the corrected flow saves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flawed_read_is_refused_with_the_field_it_meant_before_any_run() {
    let s = session(McpOptions::default()).await;
    let flow = |field: &str| {
        json!({
            "name": "words",
            "root": {"type": "h", "children": [
                {"step_id": "split", "type": "code",
                 "input_schema": {"fields": [{"name": "text", "type": "string"}]},
                 "code": "return {'words': text.split()}",
                 "output_schema": {"fields": [{"name": "words", "type": "array"}]}},
                {"type": "loop", "arrayField": field, "children": [
                    {"step_id": "shout", "type": "llm", "prompt": "Shout {{words}}"}]},
            ]},
        })
        .to_string()
    };
    for (tool, args) in [
        ("validate_flow", json!({"source": flow("wordz")})),
        (
            "save_flow",
            json!({"name": "words", "source": flow("wordz")}),
        ),
    ] {
        let (err, refused) = s.call(tool, args).await;
        assert!(err || refused["valid"] == false, "{tool}: {refused}");
        let d = &refused["diagnostics"][0];
        assert_eq!(
            d["pointer"], "/root/children/1/arrayField",
            "{tool}: {refused}"
        );
        assert_eq!(d["hint"], "did you mean `words`?", "{tool}: {refused}");
        assert!(d["loc"]["line"].as_u64().is_some(), "{tool}: {refused}");
    }
    let (_, listed) = s.call("list_flows", json!({})).await;
    assert_eq!(listed["flows"], json!([]), "nothing was saved");
    let (err, saved) = s
        .call(
            "save_flow",
            json!({"name": "words", "source": flow("words")}),
        )
        .await;
    assert!(!err, "{saved}");
}

/// Issue 39's prompts: one per dialect, listed with a cache lifetime for everyone, each
/// carrying the dialect's reference and an example flow; a task is required.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_help_a_model_write_a_flow_in_each_dialect() {
    use rmcp::model::{CacheScope, GetPromptRequestParams};
    let s = session(McpOptions::default()).await;
    let listed = s.client.list_prompts(None).await.unwrap();
    let names: Vec<&str> = listed.prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        weft_dialects::registry::names()
            .iter()
            .map(|d| format!("write_{d}_flow"))
            .collect::<Vec<_>>()
    );
    assert!(listed.ttl_ms.is_some_and(|t| t > 0), "{listed:?}");
    assert_eq!(listed.cache_scope, Some(CacheScope::Public));
    let task =
        serde_json::Map::from_iter([("task".to_owned(), json!("count the words of a text"))]);
    let got = s
        .client
        .get_prompt(GetPromptRequestParams::new("write_blocks_flow").with_arguments(task.clone()))
        .await
        .unwrap();
    let text: String = got
        .messages
        .iter()
        .map(|m| {
            serde_json::to_value(&m.content).unwrap()["text"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    assert!(
        text.contains("that does this: count the words of a text"),
        "{text}"
    );
    assert!(text.contains("validate_flow"), "{text}");
    assert!(text.contains("arrayField"), "the blocks reference: {text}");
    assert!(text.contains("word-stats"), "the example flow: {text}");
    for (name, args) in [
        ("write_blocs_flow", task),
        ("write_tea_flow", serde_json::Map::new()),
    ] {
        let refused = s
            .client
            .get_prompt(GetPromptRequestParams::new(name).with_arguments(args))
            .await;
        assert!(refused.is_err(), "{name}: {refused:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_schedules_a_saved_flow_triggers_it_and_pauses_it() {
    let s = session(McpOptions::default()).await;
    let (err, missing) = s
        .call(
            "schedule_flow",
            json!({"flow": "double", "cron": "0 9 * * MON-FRI"}),
        )
        .await;
    assert!(err, "{missing}");
    assert!(
        missing["hint"].as_str().unwrap().contains("save_flow"),
        "{missing}"
    );
    s.call("save_flow", json!({"name": "double", "source": FLOW}))
        .await;
    let (err, bad) = s
        .call(
            "schedule_flow",
            json!({"flow": "double", "cron": "at nine"}),
        )
        .await;
    assert!(
        err && bad["error"].as_str().unwrap().contains("cron"),
        "{bad}"
    );
    let (err, added) = s
        .call(
            "schedule_flow",
            json!({"flow": "double", "cron": "0 9 * * MON-FRI", "tz": "Europe/Paris", "input": {"count": 21}}),
        )
        .await;
    assert!(!err, "{added}");
    assert_eq!(added["id"], json!("double"));
    let next = added["next"].as_array().unwrap();
    assert_eq!(next.len(), 5);
    assert!(
        next[0]["at"].as_str().unwrap().contains("T09:00:00+0"),
        "{next:?}"
    );

    let (err, triggered) = s
        .call(
            "change_schedule",
            json!({"id": "double", "action": "trigger"}),
        )
        .await;
    assert!(!err, "{triggered}");
    let run_id = triggered["run_id"].as_str().unwrap().to_owned();
    let run = loop {
        let (_, run) = s.call("get_run", json!({"run_id": run_id})).await;
        if run["status"] == "completed" {
            break run;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(run["output"], json!(42));
    let (_, shown) = s.call("list_schedules", json!({"id": "double"})).await;
    assert_eq!(shown["firings"][0]["outcome"], json!("triggered"));
    assert_eq!(shown["firings"][0]["run_id"], json!(run_id));

    let (err, paused) = s
        .call(
            "change_schedule",
            json!({"id": "double", "action": "pause"}),
        )
        .await;
    assert!(!err && paused["paused"] == json!(true), "{paused}");
    assert!(paused["next"].as_array().unwrap().is_empty());
    let (_, listed) = s.call("list_schedules", json!({})).await;
    assert_eq!(listed["schedules"].as_array().unwrap().len(), 1);
    let (err, _) = s
        .call(
            "change_schedule",
            json!({"id": "double", "action": "delete"}),
        )
        .await;
    assert!(!err);
    let (err, gone) = s
        .call(
            "change_schedule",
            json!({"id": "double", "action": "pause"}),
        )
        .await;
    assert!(err && gone["hint"].is_string(), "{gone}");
}
