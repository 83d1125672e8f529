//! MCP Tasks and progress through rmcp's own client over a real SQLite file: a run that
//! pauses at an approval is a task that asks for input, finishes once a person answers,
//! can be cancelled; a client without the extension gets today's answers; a waiting tool
//! call reports each step.

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    GetTaskParams, ProgressNotificationParam, ProgressToken, RequestMetaObject, TaskPayload,
    TaskStatus,
};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use weft_engine::Engine;
use weft_mcp::{McpOptions, WeftMcp};

/// A client that declares the tasks extension (or not) and records progress.
#[derive(Clone)]
struct Client {
    info: ClientConfig,
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl rmcp::ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

struct Session {
    client: RunningService<RoleClient, Client>,
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    engine: Engine,
    _dir: tempfile::TempDir,
}

async fn session(tasks: bool) -> Session {
    let dir = tempfile::tempdir().unwrap();
    let store =
        weft_store::SqliteStore::open(dir.path().join("runs.db"), weft_store::Durability::Process)
            .unwrap();
    let engine = Engine::builder(Arc::new(store)).build();
    // Test runs: a memory store of their own.
    let test_engines: weft_mcp::TestEngines = Arc::new(|| {
        Engine::builder(Arc::new(weft_store::MemoryStore::new()))
            .models(Arc::new(weft_llm::Router::new()))
            .build()
    });
    let options = McpOptions {
        test_engines: Some(test_engines),
        ..McpOptions::default()
    };
    let server = WeftMcp::new(weft_service::Service::new(engine.clone(), None), options);
    let (server_end, client_end) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        let running = server.serve(server_end).await.unwrap();
        let _ = running.waiting().await;
    });
    let capabilities = if tasks {
        ClientCapabilities::builder().enable_tasks().build()
    } else {
        ClientCapabilities::default()
    };
    let mut info = ClientConfig::default();
    info.capabilities = capabilities;
    let progress = Arc::new(Mutex::new(Vec::new()));
    let handler = Client {
        info,
        progress: progress.clone(),
    };
    let client = handler.serve(client_end).await.unwrap();
    Session {
        client,
        progress,
        engine,
        _dir: dir,
    }
}

fn params(tool: &str, arguments: Value) -> CallToolRequestParams {
    let Value::Object(map) = arguments else {
        panic!("arguments are an object")
    };
    CallToolRequestParams::new(tool.to_owned()).with_arguments(map)
}

impl Session {
    async fn task(&self, tool: &str, arguments: Value) -> String {
        match self
            .client
            .call_tool_once(params(tool, arguments))
            .await
            .unwrap()
        {
            CallToolResponse::Task(created) => created.task.task_id,
            other => panic!("{tool} gave no task: {other:?}"),
        }
    }

    async fn get(&self, id: &str) -> rmcp::model::DetailedTask {
        self.client
            .get_task(GetTaskParams::new(id))
            .await
            .unwrap()
            .task
    }

    /// Polls task `id` until its status is `status`.
    async fn until(&self, id: &str, status: TaskStatus) -> rmcp::model::DetailedTask {
        for _ in 0..200 {
            let t = self.get(id).await;
            if t.status() == status {
                return t;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!(
            "task {id} never became {status:?}: {:?}",
            self.get(id).await
        );
    }
}

const APPROVAL: &str = "weft: 1\nname: ship\nroot:\n  sequence:\n    - {id: review, approval: {prompt: 'Ship {{ input.what }}?', options: [ship, hold]}}\n    - {transform: {output: '{{ input.decision }} it'}}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_paused_at_an_approval_is_a_task_asking_for_input_until_a_person_answers() {
    let s = session(true).await;
    let id = s
        .task(
            "run_flow",
            json!({"source": APPROVAL, "input": {"what": "v2"}, "wait_seconds": 30}),
        )
        .await;
    let asking = s.until(&id, TaskStatus::InputRequired).await;
    let TaskPayload::InputRequired { input_requests } = &asking.payload else {
        panic!("{asking:?}")
    };
    let request = serde_json::to_value(&input_requests["root/review"]).unwrap();
    assert_eq!(request["method"], json!("elicitation/create"));
    assert_eq!(request["params"]["message"], json!("Ship v2?"));
    assert_eq!(
        request["params"]["requestedSchema"]["properties"]["decision"]["enum"],
        json!(["ship", "hold"])
    );
    // A person answers (the API, the page and `weft approve` all come here).
    s.engine
        .answer(&id, None, json!({"decision": "ship"}))
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    let done = s.until(&id, TaskStatus::Completed).await;
    let TaskPayload::Completed { result } = &done.payload else {
        panic!("{done:?}")
    };
    assert_eq!(
        result["structuredContent"]["output"],
        json!("ship it"),
        "{result:?}"
    );
    assert_ne!(result.get("isError"), Some(&json!(true)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_cancelled_a_failed_run_completes_as_a_tool_error_and_ids_are_checked() {
    let s = session(true).await;
    let waiting = "weft: 1\nname: nap\nroot: {wait: {for: 1h}}\n";
    let id = s.task("run_flow", json!({"source": waiting})).await;
    // Paused for time, the task is still working, and says what it waits for.
    let mut working = s.get(&id).await;
    for _ in 0..200 {
        if working.task.status_message.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        working = s.get(&id).await;
    }
    assert_eq!(working.status(), TaskStatus::Working, "{working:?}");
    assert!(working.task.status_message.is_some(), "{working:?}");
    s.client
        .cancel_task(CancelTaskParams::new(&id))
        .await
        .unwrap();
    s.until(&id, TaskStatus::Cancelled).await;
    // Cancelling an ended task is acknowledged all the same.
    s.client
        .cancel_task(CancelTaskParams::new(&id))
        .await
        .unwrap();

    let failing = "weft: 1\nname: f\nroot: {transform: {output: '{{ input.missing.field }}'}}\n";
    let id = s.task("run_flow", json!({"source": failing})).await;
    let done = s.until(&id, TaskStatus::Completed).await;
    let TaskPayload::Completed { result } = &done.payload else {
        panic!("{done:?}")
    };
    assert_eq!(result.get("isError"), Some(&json!(true)), "{result:?}");

    let unknown = s.client.get_task(GetTaskParams::new("no-such-task")).await;
    assert!(unknown.is_err());
    // A call refused before any run started is answered at once, not as a task.
    let refused = s
        .client
        .call_tool_once(params(
            "run_flow",
            json!({"source": "weft: 1\nname: x\nroot: {nope: {}}\n"}),
        ))
        .await
        .unwrap();
    let CallToolResponse::Complete(r) = refused else {
        panic!("{refused:?}")
    };
    assert_eq!(r.is_error, Some(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_flow_is_a_task_kept_in_memory() {
    let s = session(true).await;
    let flow = "weft: 1\nname: t\nroot: {transform: {output: '{{ input.n * 2 }}'}}\n";
    let id = s
        .task("test_flow", json!({"source": flow, "input": {"n": 21}}))
        .await;
    let done = s.until(&id, TaskStatus::Completed).await;
    let TaskPayload::Completed { result } = &done.payload else {
        panic!("{done:?}")
    };
    assert_eq!(
        result["structuredContent"]["output"],
        json!(42),
        "{result:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_extension_a_tool_waits_and_reports_each_step_as_progress() {
    let s = session(false).await;
    let steps: String = (1..=10)
        .map(|i| format!("    - {{id: s{i}, transform: {{output: {i}}}}}\n"))
        .collect();
    let flow = format!("weft: 1\nname: ten\nroot:\n  sequence:\n{steps}");
    let mut p = params("run_flow", json!({"source": flow, "wait_seconds": 30}));
    p.meta = Some(RequestMetaObject::with_progress_token(ProgressToken(
        rmcp::model::NumberOrString::String("ten".into()),
    )));
    let answer = s.client.call_tool_once(p).await.unwrap();
    let CallToolResponse::Complete(result) = answer else {
        panic!("without tasks the call completes: {answer:?}")
    };
    let shown = result.structured_content.unwrap();
    assert_eq!(shown["status"], json!("completed"), "{shown}");
    // Notifications may trail the answer by a moment.
    tokio::time::sleep(Duration::from_millis(200)).await;
    // rmcp's client hands each notification to its own task, so they may be seen out
    // of the order they were sent in (the Python SDK's test checks that order): each
    // value once, each naming its step.
    let mut progress = s.progress.lock().unwrap().clone();
    progress.sort_by(|a, b| a.progress.total_cmp(&b.progress));
    let values: Vec<f64> = progress.iter().map(|p| p.progress).collect();
    assert_eq!(
        values,
        (1..=10).map(f64::from).collect::<Vec<_>>(),
        "{progress:?}"
    );
    assert!(progress.iter().all(|p| p.total == Some(10.0)));
    for p in &progress {
        assert_eq!(
            p.message.as_deref(),
            Some(format!("root/s{}", p.progress).as_str())
        );
    }
}
