//! LangGraph's Agent Chat UI, built from its repository, with `weft serve` as its
//! LangGraph server: the app is served by its own `next start` and pointed at the real
//! binary on 127.0.0.1 (its `?apiUrl=` and `?assistantId=`, the server allowing the
//! app's origin); headless Chromium holds a conversation in its page (the answers
//! stream in), reloads the thread from its history, and goes on with it.
//!
//! `scripts/agent-chat-ui` builds the app (pnpm, from the npm registry) and runs this
//! test with `WEFT_AGENT_CHAT_UI_DIR` (the built checkout). It is ignored otherwise: CI
//! reaches package registries only, and Agent Chat UI is a git repository, not a
//! package.

use fantoccini::key::Key;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

mod support;

use support::browser::{Driver, Page};
use support::{Env, Served};

/// A child process, killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Agent Chat UI's own `next start` of its build, on `port`.
fn next_start(checkout: &Path, port: u16) -> Killed {
    let child = Command::new("node")
        .arg(checkout.join("node_modules/next/dist/bin/next"))
        .args(["start", "-H", "127.0.0.1", "-p", &port.to_string()])
        .current_dir(checkout)
        .env("NEXT_TELEMETRY_DISABLED", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("node runs Agent Chat UI's next");
    support::await_listening(port, "next start", Duration::from_secs(60));
    Killed(child)
}

/// Sends `text` from the page's message box.
async fn say(page: &Page, text: &str) {
    page.type_into("textarea", text).await;
    page.type_into("textarea", &char::from(Key::Enter).to_string())
        .await;
}

/// Waits until the page shows `text`.
async fn shows(page: &Page, text: &str) {
    let script = format!(
        "return document.body.innerText.includes({});",
        Value::from(text)
    );
    page.wait_for(&format!("`{text}`"), &script).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Agent Chat UI's build: scripts/agent-chat-ui builds it and runs this"]
async fn agent_chat_ui_holds_a_conversation_with_weft() {
    if support::left_out_of_fast_profile("Chromium and Node") {
        return;
    }
    let checkout = PathBuf::from(std::env::var("WEFT_AGENT_CHAT_UI_DIR").unwrap_or_else(|_| {
        panic!("WEFT_AGENT_CHAT_UI_DIR is not set: run scripts/agent-chat-ui")
    }));
    let env = Env::new();
    let port = support::free_port();
    let origin = format!("http://127.0.0.1:{port}");
    let flow = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/langgraph/chat.yaml");
    let weft = Served::start_args(&env, &[], &["--flow", flow, "--allow-origin", &origin]);
    let api = &weft.base;
    let _app = next_start(&checkout, port);
    let driver = Driver::start();
    let page = Page {
        c: driver.browser().await,
    };
    page.open(&format!("{origin}/?apiUrl={api}&assistantId=chat"))
        .await;
    page.wait_for(
        "the message box",
        "return document.querySelector('textarea');",
    )
    .await;
    say(&page, "what's the weather?").await;
    shows(&page, "It is sunny.").await;

    // The page names its new thread in its address; Weft has it, listed by graph.
    let thread = page
        .wait_for(
            "the thread in the address",
            "return new URL(location.href).searchParams.get('threadId');",
        )
        .await;
    let thread = thread.as_str().unwrap().to_owned();
    let http = reqwest::Client::new();
    let listed: Value = support::post_json(
        &http,
        &format!("{api}/threads/search"),
        &serde_json::json!({"metadata": {"graph_id": "chat"}}),
    )
    .await;
    assert_eq!(listed[0]["thread_id"], thread.as_str(), "{listed}");
    assert_eq!(listed[0]["status"], "idle", "{listed}");

    // A reload reads the conversation back from the thread, and it goes on.
    page.open(&format!(
        "{origin}/?apiUrl={api}&assistantId=chat&threadId={thread}"
    ))
    .await;
    shows(&page, "what's the weather?").await;
    shows(&page, "It is sunny.").await;
    say(&page, "hi").await;
    shows(&page, "Hello from Weft.").await;
    page.screenshot("agent-chat-ui.png").await;
    let state = support::get_json(&http, &format!("{api}/threads/{thread}/state")).await;
    // The page sends a message's content as blocks (`[{type: text, text}]`).
    let text = |content: &Value| match content {
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect(),
        other => other.as_str().unwrap_or_default().to_owned(),
    };
    let texts: Vec<String> = state["values"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| text(&m["content"]))
        .collect();
    assert_eq!(
        texts,
        [
            "what's the weather?",
            "It is sunny.",
            "hi",
            "Hello from Weft."
        ],
        "{state}"
    );
}
