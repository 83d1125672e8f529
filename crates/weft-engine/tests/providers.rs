//! LLM blocks against real HTTP servers on 127.0.0.1 that speak a provider's wire
//! format: the repair loop recovers from invalid JSON, and a model calls a Weft
//! sub-flow as a tool.

mod support;

use serde_json::json;
use std::future::Future;
use std::sync::Arc;
use support::{Harness, flow, memory};
use weft_core::event::EventKind;
use weft_engine::{CollectingSink, Engine};
use weft_fakes::{FakeServer, Reply, Wire};

/// Providers with a test key, each pointed at a fake server by the flow's model alias.
fn router() -> Arc<weft_llm::Router> {
    Arc::new(weft_llm::Router::new().with_env(Arc::new(|k: &str| {
        k.ends_with("_API_KEY").then(|| "sk-test".to_owned())
    })))
}

fn harness() -> Harness {
    let events = Arc::new(CollectingSink::new());
    Harness {
        engine: Engine::builder(memory())
            .models(router())
            .sink(events.clone())
            .build(),
        events,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_repair_loop_recovers_from_invalid_json_from_a_real_server() {
    let server = FakeServer::start(
        Wire::OpenAi,
        vec![
            Reply::text("Sure! The city is Paris."),
            Reply::text("{\"city\": \"Paris\", \"population\": 2100000}"),
        ],
    )
    .await;
    let h = harness();
    let f = flow(&format!(
        r#"weft: 1
name: s
models:
  m: {{provider: openai, model: gpt-test, base_url: "{}"}}
root:
  llm:
    model: m
    prompt: Give me a city as JSON.
    output_schema: {{type: object, required: [city, population], properties: {{city: {{type: string}}, population: {{type: integer}}}}}}
"#,
        server.base_url()
    ));
    let r = h.run(f).await;
    assert_eq!(
        r.output.unwrap(),
        json!({"city": "Paris", "population": 2100000})
    );
    let sent = server.received();
    assert_eq!(sent.len(), 2);
    // The second request carries the first answer and why it was refused.
    let retry = sent[1].body.to_string();
    assert!(
        retry.contains("The city is Paris") && retry.contains("not valid"),
        "{retry}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_calls_a_weft_subflow_as_a_tool_over_the_wire() {
    let server = FakeServer::start_with(Wire::Anthropic, std::time::Duration::ZERO, |req| {
        if req.body.to_string().contains("Oslo is sunny") {
            Reply::text("It is sunny in Oslo.")
        } else {
            Reply::tool_call("weather", json!({"city": "Oslo"}))
        }
    })
    .await;
    let h = harness();
    let f = flow(&format!(
        r#"weft: 1
name: tools
models:
  m: {{provider: anthropic, model: claude-test, base_url: "{}"}}
flows:
  weather:
    name: weather
    root: {{transform: {{output: '{{{{ input.city }}}} is sunny'}}}}
root:
  llm:
    model: m
    prompt: What is the weather in Oslo?
    tools: [{{name: weather, description: Looks up the weather, flow: weather, parameters: {{type: object, properties: {{city: {{type: string}}}}}}}}]
"#,
        server.base_url()
    ));
    let r = h.run(f).await;
    assert_eq!(r.output.unwrap(), "It is sunny in Oslo.");
    assert!(
        h.kinds()
            .iter()
            .any(|k| matches!(k, EventKind::ToolCalled { tool, .. } if tool == "weather"))
    );
    let offered = server.received()[0].body.to_string();
    assert!(offered.contains("Looks up the weather"), "{offered}");
    assert_eq!(server.received().len(), 2);
}

/// A flow with one streamed model call to `server`, under the block policy `policy`.
fn slow_call(server: &FakeServer, policy: &str) -> Arc<weft_engine::Prepared> {
    flow(&format!(
        r#"weft: 1
name: stall
models:
  m: {{provider: openai, model: gpt-test, base_url: "{}"}}
root:
  llm: {{model: m, prompt: Tell me a story.}}
  {policy}
"#,
        server.base_url()
    ))
}

fn slow_server(gap_ms: u64) -> impl Future<Output = FakeServer> {
    FakeServer::start(
        Wire::OpenAi,
        vec![Reply::Slow {
            text: "once upon a time".into(),
            gap: std::time::Duration::from_millis(gap_ms),
        }],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_goes_silent_past_its_threshold_stalls() {
    let server = slow_server(400).await;
    let h = harness();
    let r = h
        .run(slow_call(&server, "stall: {token_gap_ms: 100}"))
        .await;
    let e = r.error.expect("the call stalls");
    assert_eq!(e.kind, weft_core::ErrorKind::Timeout);
    assert!(
        e.message.contains("stall threshold `token_gap`"),
        "{}",
        e.message
    );
    assert_eq!(e.detail_field("stall").unwrap(), "token_gap");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_within_its_thresholds_completes() {
    let server = slow_server(50).await;
    let h = harness();
    let r = h
        .run(slow_call(
            &server,
            "stall: {first_token_ms: 5000, token_gap_ms: 5000}",
        ))
        .await;
    assert_eq!(r.output.unwrap(), "once upon a time", "{:?}", r.error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_sends_nothing_in_time_stalls_and_is_retried() {
    // The first answer comes after 600 ms; the threshold is 150 ms, so every attempt
    // stalls, and the stall (a timeout) is retried by the block's retry policy.
    let server =
        FakeServer::start_with(Wire::OpenAi, std::time::Duration::from_millis(600), |_| {
            Reply::text("late")
        })
        .await;
    let h = harness();
    let r = h
        .run(slow_call(
            &server,
            "stall: {first_token_ms: 150}\n  retry: {attempts: 2, backoff_ms: 1}",
        ))
        .await;
    let e = r.error.expect("every attempt stalls");
    assert_eq!(e.detail_field("stall").unwrap(), "first_token");
    assert!(
        h.kinds()
            .iter()
            .any(|k| matches!(k, EventKind::StepRetrying { .. })),
        "a stall is retried like a timeout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enclosing_block_s_thresholds_watch_the_calls_inside_it() {
    let server = slow_server(400).await;
    let h = harness();
    let f = flow(&format!(
        r#"weft: 1
name: stall
models:
  m: {{provider: openai, model: gpt-test, base_url: "{}"}}
root:
  stall: {{token_gap_ms: 100}}
  sequence:
    - transform: {{output: start}}
    - llm: {{model: m, prompt: Tell me a story.}}
"#,
        server.base_url()
    ));
    let e = h.run(f).await.error.expect("the inner call stalls");
    assert_eq!(e.detail_field("stall").unwrap(), "token_gap");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_runs_past_its_threshold_stalls() {
    let server = FakeServer::start(
        Wire::OpenAi,
        vec![Reply::tool_call("slow", json!({})), Reply::text("done")],
    )
    .await;
    let f = flow(&format!(
        r#"weft: 1
name: stall
models:
  m: {{provider: openai, model: gpt-test, base_url: "{}"}}
flows:
  slow:
    name: slow
    root: {{handler: {{name: sleepy}}}}
root:
  stall: {{tool_ms: 100}}
  llm:
    model: m
    prompt: Go.
    tools: [{{name: slow, flow: slow}}]
"#,
        server.base_url()
    ));
    let sleepy = support::native(|_| async {
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        Ok(json!("slept").into())
    });
    let events = Arc::new(CollectingSink::new());
    let h = Harness {
        engine: Engine::builder(memory())
            .models(router())
            .handler("sleepy", sleepy)
            .sink(events.clone())
            .build(),
        events,
    };
    let e = h.run(f).await.error.expect("the tool stalls");
    assert_eq!(e.detail_field("stall").unwrap(), "tool");
    assert!(e.message.contains("`slow`"), "{}", e.message);
}

/// A flow whose model must call `lookup` and then `note` before it answers.
fn required_tools_flow(server: &FakeServer) -> Arc<weft_engine::Prepared> {
    flow(&format!(
        r#"weft: 1
name: required
models:
  m: {{provider: openai, model: gpt-test, base_url: "{}"}}
flows:
  lookup: {{name: lookup, root: {{transform: {{output: found}}}}}}
  note: {{name: note, root: {{transform: {{output: noted}}}}}}
root:
  llm:
    model: m
    prompt: Research and answer.
    tools: [{{name: lookup, flow: lookup}}, {{name: note, flow: note}}]
    required_tools: [lookup, note]
"#,
        server.base_url()
    ))
}

/// The tool a request forces, if it forces one.
fn forced(r: &weft_fakes::Received) -> Option<String> {
    r.body["tool_choice"]["function"]["name"]
        .as_str()
        .map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_tools_are_forced_in_order_before_the_answer() {
    let server =
        FakeServer::start_with(Wire::OpenAi, std::time::Duration::ZERO, |r| {
            match forced(r).as_deref() {
                Some(tool) => Reply::tool_call(tool, json!({})),
                None => Reply::text("the answer"),
            }
        })
        .await;
    let h = harness();
    let r = h.run(required_tools_flow(&server)).await;
    assert_eq!(r.output.unwrap(), "the answer", "{:?}", r.error);
    let forced: Vec<Option<String>> = server.received().iter().map(forced).collect();
    assert_eq!(
        forced,
        vec![Some("lookup".into()), Some("note".into()), None]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_will_not_call_a_required_tool_fails_the_block() {
    // A provider that ignores the forced choice: the model is told once per round, and
    // when the rounds are spent the block fails naming the tool.
    let server = FakeServer::start(Wire::OpenAi, vec![Reply::text("no tools for me")]).await;
    let h = harness();
    let r = h.run(required_tools_flow(&server)).await;
    let e = r.error.expect("the required tools were never called");
    assert_eq!(e.kind, weft_core::ErrorKind::Assertion);
    assert!(e.message.contains("`lookup`, `note`"), "{}", e.message);
    let last = server.received().last().unwrap().body.to_string();
    assert!(
        last.contains("Before you answer, call the tool `lookup`"),
        "{last}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_named_by_a_template_is_chosen_when_the_block_runs() {
    let h = harness();
    let yaml = |which: &str| {
        format!(
            r#"weft: 1
name: pick
input: {{which: "{which}"}}
models:
  fast: {{provider: scripted, rules: [{{reply: "from fast"}}]}}
  careful: {{provider: scripted, rules: [{{reply: "from careful"}}]}}
root:
  llm:
    model: "{{{{ input.which }}}}"
    prompt: Say something.
"#
        )
    };
    let r = h.run(flow(&yaml("careful"))).await;
    assert_eq!(r.output.unwrap(), json!("from careful"), "{:?}", r.error);
    let r = h.run(flow(&yaml("fast"))).await;
    assert_eq!(r.output.unwrap(), json!("from fast"));
    // A template that chooses nothing fails the block with a config error that says so.
    let r = h.run(flow(&yaml(""))).await;
    let e = r.error.expect("fails");
    assert_eq!(e.kind, weft_core::ErrorKind::Config, "{}", e.message);
    assert!(e.message.contains("chose no model"), "{}", e.message);
}

fn embed_flow(server: &FakeServer, input: &str) -> Arc<weft_engine::Prepared> {
    flow(&format!(
        r#"weft: 1
name: e
models:
  m: {{provider: openai, model: text-embedding-test, base_url: "{}"}}
input: {{texts: [a cat, a dog], one: a cat, number: 3}}
root:
  embed:
    model: m
    input: {input}
    dimensions: 2
"#,
        server.base_url()
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embed_block_gets_vectors_from_a_real_server_and_counts_them() {
    let server = FakeServer::start(
        Wire::OpenAi,
        vec![
            Reply::Embeddings(vec![vec![0.5, -0.5]]),
            Reply::Embeddings(vec![vec![1.0, 0.0], vec![0.0, 1.0]]),
        ],
    )
    .await;
    let h = harness();
    let one = h.run(embed_flow(&server, r#""{{ input.one }}""#)).await;
    let out = one.output.clone().expect("completed").into_value();
    assert_eq!(out["embedding"], json!([0.5, -0.5]));
    assert_eq!(out["dimensions"], 2);
    assert_eq!(out["model"], "m");
    assert!(out["usage"]["prompt_tokens"].as_u64().unwrap() > 0, "{out}");
    assert_eq!(
        one.usage.input_tokens,
        out["usage"]["prompt_tokens"].as_u64().unwrap()
    );
    let many = h.run(embed_flow(&server, r#""{{ input.texts }}""#)).await;
    let out = many.output.expect("completed").into_value();
    assert_eq!(out["embeddings"], json!([[1.0, 0.0], [0.0, 1.0]]));
    assert!(out.get("embedding").is_none());
    let sent = server.received();
    assert_eq!(sent[0].path, "/v1/embeddings");
    assert_eq!(sent[1].body["input"], json!(["a cat", "a dog"]));
    assert_eq!(sent[1].body["dimensions"], 2);
    let calls = h
        .events
        .events()
        .into_iter()
        .filter(|e| matches!(e.kind, EventKind::LlmCall { .. }))
        .count();
    assert_eq!(calls, 2, "each embedding call is reported like a chat");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embed_block_refuses_what_is_not_text_and_a_short_answer() {
    let server = FakeServer::start(Wire::OpenAi, vec![Reply::Embeddings(vec![vec![1.0]])]).await;
    let h = harness();
    let r = h.run(embed_flow(&server, r#""{{ input.number }}""#)).await;
    let e = r.error.expect("failed");
    assert_eq!(e.kind, weft_core::ErrorKind::Input);
    assert!(
        e.message.contains("text or a list of texts, not a number"),
        "{e:?}"
    );
    assert!(server.received().is_empty(), "nothing is sent");
    // Two texts, one vector: the vectors cannot be matched to the texts.
    let r = h.run(embed_flow(&server, r#""{{ input.texts }}""#)).await;
    let e = r.error.expect("failed");
    assert!(e.message.contains("1 vectors for 2 texts"), "{e:?}");
}
