//! AgentFlow's own web editor, built from its repository, with `weft serve` as its
//! backend: the editor is served by its own `vite preview`, which sends its `/api` calls
//! to the real binary on 127.0.0.1; headless Chromium draws a graph on its canvas (nodes
//! dropped from its palette, ports joined with the mouse), runs it, approves it in its
//! chat and reads the agents' answers there. The agents are answered by a scripted
//! OpenAI-compatible server.
//!
//! `scripts/agentflow-editor` builds the editor (npm, from the registry) and runs this
//! test with `WEFT_AGENTFLOW_DIR` (the built checkout) and `WEFT_AGENTFLOW_VITE_CONFIG`.
//! It is ignored otherwise: CI reaches package registries only, and AgentFlow is a git
//! repository, not a package.

use fantoccini::Locator;
use fantoccini::actions::{InputSource, MOUSE_BUTTON_LEFT, MouseActions, PointerAction};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use weft_fakes::{FakeServer, Reply, Wire};

mod support;

use support::browser::{Driver, Page};
use support::{Env, Served};

/// AgentFlow's `vite preview` of its built editor; killed when dropped.
struct Preview {
    child: Child,
    url: String,
}

impl Preview {
    fn start(checkout: &Path, config: &str, api: &str) -> Preview {
        let port = support::free_port();
        let child = Command::new("node")
            .arg(checkout.join("node_modules/vite/bin/vite.js"))
            .arg("preview")
            .arg(checkout.join("apps/web"))
            .args(["--config", config, "--host", "127.0.0.1"])
            .args(["--port", &port.to_string()])
            .env("WEFT_API", api)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("node runs AgentFlow's vite");
        support::await_listening(port, "vite preview", Duration::from_secs(30));
        Preview {
            child,
            url: format!("http://127.0.0.1:{port}/"),
        }
    }
}

impl Drop for Preview {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Drops a node of `kind` from the editor's palette onto its canvas at (`x`, `y`), as
/// its own drag handlers see a drop (WebDriver cannot drive HTML5 drag and drop), and
/// answers the new node's id.
async fn drop_node(page: &Page, kind: &str, x: u32, y: u32) -> String {
    let script = r#"
        const [kind, x, y] = arguments;
        const before = new Set(window.editor.nodes.map((n) => n.id));
        const item = document.querySelector(`.draggable-node[data-type="${kind}"]`);
        const data = new DataTransfer();
        item.dispatchEvent(new DragEvent('dragstart', {bubbles: true, dataTransfer: data}));
        document.getElementById('canvas-container').dispatchEvent(new DragEvent('drop', {
            bubbles: true, cancelable: true, dataTransfer: data, clientX: x, clientY: y,
        }));
        const added = window.editor.nodes.find((n) => !before.has(n.id));
        return added ? added.id : null;
    "#;
    let id = page
        .c
        .execute(script, vec![json!(kind), json!(x), json!(y)])
        .await
        .unwrap();
    id.as_str()
        .unwrap_or_else(|| panic!("no {kind} node was added"))
        .to_owned()
}

/// Joins `from`'s port `handle` to `to`'s input with the mouse.
async fn connect(page: &Page, from: &str, handle: &str, to: &str) {
    let port = |node: &str, handle: &str| {
        Locator::Css(Box::leak(
            format!(".port[data-node-id=\"{node}\"][data-handle=\"{handle}\"]").into_boxed_str(),
        ))
    };
    let out = page.c.find(port(from, handle)).await.unwrap();
    let input = page.c.find(port(to, "input")).await.unwrap();
    let drag = MouseActions::new("mouse".into())
        .then(PointerAction::MoveToElement {
            element: out,
            duration: None,
            x: 0.0,
            y: 0.0,
        })
        .then(PointerAction::Down {
            button: MOUSE_BUTTON_LEFT,
        })
        .then(PointerAction::MoveToElement {
            element: input.clone(),
            duration: Some(Duration::from_millis(100)),
            x: 0.0,
            y: 0.0,
        })
        .then(PointerAction::Up {
            button: MOUSE_BUTTON_LEFT,
        });
    page.c.perform_actions(drag).await.unwrap();
}

/// The editor's connections, as `source:handle->target`.
async fn connections(page: &Page) -> Vec<String> {
    let v = page
        .c
        .execute(
            "return window.editor.connections.map((c) => `${c.source}:${c.sourceHandle}->${c.target}`);",
            vec![],
        )
        .await
        .unwrap();
    serde_json::from_value(v).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs AgentFlow's built editor: scripts/agentflow-editor builds it and runs this"]
async fn agentflow_s_editor_draws_runs_and_approves_a_graph_on_weft() {
    if support::left_out_of_fast_profile("Chromium and Node") {
        return;
    }
    let need = |var: &str| {
        std::env::var(var)
            .unwrap_or_else(|_| panic!("{var} is not set: run scripts/agentflow-editor"))
    };
    let checkout = PathBuf::from(need("WEFT_AGENTFLOW_DIR"));
    let config = need("WEFT_AGENTFLOW_VITE_CONFIG");
    let fake = FakeServer::start_with(Wire::OpenAi, Duration::from_millis(200), |r| {
        Reply::text(format!("Answer to: {}", r.last_message()))
    })
    .await;
    let env = Env::new();
    let fake_base = fake.base_url();
    let server = Served::start_with(
        &env,
        &[
            ("OPENAI_BASE_URL", &fake_base),
            ("OPENAI_API_KEY", "sk-test"),
        ],
    );
    let preview = Preview::start(&checkout, &config, &server.base);
    let driver = Driver::start();
    let page = Page {
        c: driver.browser().await,
    };
    page.open(&preview.url).await;
    page.wait_for(
        "the editor with its start node",
        "return window.editor && window.editor.nodes.some((n) => n.type === 'start');",
    )
    .await;

    // Draw start -> agent -> approval -> agent.
    let start = page
        .c
        .execute(
            "return window.editor.nodes.find((n) => n.type === 'start').id;",
            vec![],
        )
        .await
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned();
    let writer = drop_node(&page, "agent", 700, 120).await;
    let gate = drop_node(&page, "approval", 700, 300).await;
    let editor = drop_node(&page, "agent", 700, 480).await;
    connect(&page, &start, "output", &writer).await;
    connect(&page, &writer, "output", &gate).await;
    connect(&page, &gate, "approve", &editor).await;
    assert_eq!(
        connections(&page).await,
        [
            format!("{start}:output->{writer}"),
            format!("{writer}:output->{gate}"),
            format!("{gate}:approve->{editor}"),
        ]
    );
    page.screenshot("agentflow-drawn.png").await;

    page.type_into("#initial-prompt", "otters").await;
    page.click("#btn-run").await;
    page.wait_for(
        "the approval request in the chat",
        "return document.querySelector('.approval-request .approve-btn');",
    )
    .await;
    let chat = page.text("#chat-messages").await;
    assert!(chat.contains("Answer to: otters"), "{chat}");
    page.click(".approval-request .approve-btn").await;
    let chat = page
        .wait_for(
            "the second agent's answer",
            "const t = document.getElementById('chat-messages').innerText; return t.includes('Answer to: Answer to: otters') && t;",
        )
        .await;
    page.screenshot("agentflow-approved.png").await;
    let chat = chat.as_str().unwrap();
    assert!(
        chat.contains("otters"),
        "the user's prompt is shown: {chat}"
    );

    // Weft kept the run: completed, with AgentFlow's state keys.
    let runs: Value = reqwest::get(format!("{}/v1/runs", server.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let run_id = runs["runs"][0]["run_id"].as_str().unwrap().to_owned();
    let run: Value = reqwest::get(format!("{}/api/run/{run_id}", server.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(
        run["state"][format!("{gate}_approval")]["decision"],
        "approve"
    );
    assert_eq!(
        run["state"][editor.as_str()],
        "Answer to: Answer to: otters"
    );
    assert_eq!(fake.received().len(), 2);
}
