//! LLM blocks against real HTTP servers on 127.0.0.1 that speak a provider's wire
//! format: the repair loop recovers from invalid JSON, and a model calls a Weft
//! sub-flow as a tool.

mod support;

use serde_json::json;
use std::sync::Arc;
use support::{Harness, flow, memory};
use weft_core::event::EventKind;
use weft_engine::{CollectingSink, Engine};
use weft_fakes::{FakeServer, Reply, Wire};

fn harness() -> Harness {
    let events = Arc::new(CollectingSink::new());
    let router = weft_llm::Router::new().with_env(Arc::new(|k: &str| {
        k.ends_with("_API_KEY").then(|| "sk-test".to_owned())
    }));
    Harness {
        engine: Engine::builder(memory())
            .models(Arc::new(router))
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
