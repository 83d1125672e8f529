//! Runs on the real engine, exported over OTLP/HTTP to a collector on 127.0.0.1 that
//! decodes the protobuf: span names, GenAI attributes, nesting, the replay rule, pauses
//! and resumes, and a collector that is down.

use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_engine::{Engine, Prepared, RunOptions};
use weft_fakes::{Collector, FakeServer, ReceivedSpan, Reply, Wire};
use weft_otel::{Telemetry, TelemetryConfig};

fn config(endpoint: &str, capture: bool) -> TelemetryConfig {
    let mut vars = HashMap::from([
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT".to_owned(),
            endpoint.to_owned(),
        ),
        ("OTEL_SERVICE_NAME".to_owned(), "weft-test".to_owned()),
        (
            "OTEL_EXPORTER_OTLP_HEADERS".to_owned(),
            "x-api-key=k1".to_owned(),
        ),
    ]);
    if capture {
        vars.insert(
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT".into(),
            "true".into(),
        );
    }
    TelemetryConfig::resolve(None, |k| vars.get(k).cloned()).unwrap()
}

fn engine(store: Arc<dyn weft_core::ports::Store>, telemetry: &Telemetry) -> Engine {
    let router = weft_llm::Router::new().with_env(Arc::new(|k: &str| {
        k.ends_with("_API_KEY").then(|| "sk-test".to_owned())
    }));
    let mut b = Engine::builder(store)
        .models(Arc::new(router))
        .sink(telemetry.sink());
    if telemetry.config().capture_content {
        b = b.capture_model_content(telemetry.config().content_chars);
    }
    b.build()
}

fn prepare(engine: &Engine, yaml: &str) -> Arc<Prepared> {
    let loaded = weft_dialects::load_str(yaml, "t.yaml", None, None).unwrap();
    engine.prepare(loaded.flow).unwrap()
}

fn named<'a>(spans: &'a [ReceivedSpan], name: &str) -> Vec<&'a ReceivedSpan> {
    spans.iter().filter(|s| s.name == name).collect()
}

fn one<'a>(spans: &'a [ReceivedSpan], name: &str) -> &'a ReceivedSpan {
    let found = named(spans, name);
    assert_eq!(found.len(), 1, "one `{name}` in {:#?}", names(spans));
    found[0]
}

fn names(spans: &[ReceivedSpan]) -> Vec<&str> {
    spans.iter().map(|s| s.name.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_a_trace_of_steps_model_calls_and_tools() {
    let collector = Collector::start().await;
    let server = FakeServer::start_with(Wire::OpenAi, Duration::ZERO, |req| {
        if req.body.to_string().contains("Oslo is sunny") {
            Reply::text("It is sunny in Oslo.")
        } else {
            Reply::tool_call("weather", json!({"city": "Oslo"}))
        }
    })
    .await;
    let telemetry = Telemetry::start(config(&collector.endpoint(), true)).unwrap();
    let engine = engine(Arc::new(weft_store::MemoryStore::new()), &telemetry);
    let flow = prepare(
        &engine,
        &format!(
            r#"weft: 1
name: forecast
models:
  m: {{provider: openai, model: gpt-test, base_url: "{}"}}
flows:
  weather:
    name: weather
    root: {{transform: {{output: '{{{{ input.city }}}} is sunny'}}}}
root:
  sequence:
    - id: ask
      llm:
        model: m
        prompt: What is the weather in Oslo?
        tools: [{{name: weather, description: Looks up the weather, flow: weather, parameters: {{type: object, properties: {{city: {{type: string}}}}}}}}]
    - id: shout
      transform: {{output: '{{{{ input | upper }}}}'}}
"#,
            server.base_url()
        ),
    );
    let opts = RunOptions {
        dialect: Some("native".into()),
        ..RunOptions::default()
    };
    let r = engine
        .start(flow, None, opts)
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(r.output.unwrap(), "IT IS SUNNY IN OSLO.");
    assert!(telemetry.flush(Duration::from_secs(5)));
    let spans = collector.spans();

    let run = one(&spans, "invoke_workflow forecast");
    assert_eq!(run.parent_span_id, "", "the run is the root");
    assert_eq!(run.attributes["weft.run.id"], json!(r.run_id));
    assert_eq!(run.attributes["weft.dialect"], json!("native"));
    assert_eq!(
        run.attributes["gen_ai.operation.name"],
        json!("invoke_workflow")
    );
    assert_eq!(run.attributes["weft.run.status"], json!("completed"));
    assert_eq!(run.service_name, "weft-test");
    assert!(
        spans.iter().all(|s| s.trace_id == run.trace_id),
        "one trace"
    );

    let ask = one(&spans, "llm ask");
    let root_step = one(&spans, "sequence root");
    assert_eq!(root_step.parent_span_id, run.span_id);
    assert_eq!(ask.parent_span_id, root_step.span_id);
    assert_eq!(ask.attributes["weft.replayed"], json!(false));

    let chats = named(&spans, "chat gpt-test");
    assert_eq!(chats.len(), 2, "a call for the tool, one for the answer");
    for chat in &chats {
        assert_eq!(chat.parent_span_id, ask.span_id);
        assert_eq!(chat.kind, 3, "a call over the network is a CLIENT span");
        assert_eq!(chat.attributes["gen_ai.operation.name"], json!("chat"));
        assert_eq!(chat.attributes["gen_ai.provider.name"], json!("openai"));
        assert_eq!(chat.attributes["gen_ai.request.model"], json!("gpt-test"));
        assert!(chat.attributes["gen_ai.usage.input_tokens"].as_i64() > Some(0));
        assert!(chat.attributes.contains_key("weft.usage.cost_usd"));
        assert!(chat.start_ns <= chat.end_ns && ask.start_ns <= chat.start_ns);
    }
    assert_eq!(
        chats[1].attributes["gen_ai.response.finish_reasons"],
        json!(["stop"])
    );
    assert!(
        chats[1].attributes["gen_ai.output.messages"]
            .as_str()
            .is_some_and(|a| a.contains("sunny in Oslo")),
        "content is captured when asked for"
    );

    let tool = one(&spans, "execute_tool weather");
    assert_eq!(tool.parent_span_id, ask.span_id);
    assert_eq!(tool.attributes["gen_ai.tool.name"], json!("weather"));
    assert_eq!(
        tool.attributes["gen_ai.tool.call.arguments"],
        json!("{\"city\":\"Oslo\"}")
    );
    assert_eq!(
        one(&spans, "transform shout").parent_span_id,
        root_step.span_id
    );
    assert_eq!(
        collector.headers()[0]["x-api-key"],
        "k1",
        "OTEL_EXPORTER_OTLP_HEADERS are sent"
    );
}

/// The spans a collector receives of one run of `yaml`, without content capture.
async fn spans_of_one_run(yaml: &str) -> Vec<ReceivedSpan> {
    let collector = Collector::start().await;
    let telemetry = Telemetry::start(config(&collector.endpoint(), false)).unwrap();
    let engine = engine(Arc::new(weft_store::MemoryStore::new()), &telemetry);
    let flow = prepare(&engine, yaml);
    engine
        .start(flow, None, RunOptions::default())
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert!(telemetry.flush(Duration::from_secs(5)));
    collector.spans()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_stay_out_of_traces_unless_asked_for() {
    let spans = spans_of_one_run(
        "weft: 1\nname: quiet\nmodels:\n  local-ish: {provider: scripted, rules: [{reply: secret answer}]}\nroot:\n  id: ask\n  llm: {model: local-ish, prompt: my secret question}\n",
    )
    .await;
    let chat = one(&spans, "chat local-ish");
    assert_eq!(chat.kind, 1, "a scripted model runs here: INTERNAL");
    assert_eq!(chat.attributes["gen_ai.provider.name"], json!("scripted"));
    let everything = format!("{spans:?}");
    assert!(!everything.contains("secret"), "{everything}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedding_call_is_an_embeddings_span() {
    let spans = spans_of_one_run(
        "weft: 1\nname: vectors\nmodels:\n  e: {provider: scripted, rules: [{embedding: [0.5, 0.5]}]}\nroot:\n  id: embed_it\n  embed: {model: e, input: [a, b]}\n",
    )
    .await;
    let call = one(&spans, "embeddings e");
    assert_eq!(
        call.attributes["gen_ai.operation.name"],
        json!("embeddings")
    );
    assert_eq!(call.attributes["gen_ai.provider.name"], json!("scripted"));
    assert!(named(&spans, "chat e").is_empty(), "{:?}", names(&spans));
}

/// Pauses at an approval (a span event), then resumes in a new engine: a new trace,
/// linked to the first, whose replayed step has no new `chat` span.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_run_is_a_linked_trace_that_does_not_repeat_its_calls() {
    let collector = Collector::start().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let yaml = "weft: 1\nname: release\nmodels:\n  m: {provider: scripted, rules: [{reply: notes}]}\nroot:\n  sequence:\n    - id: draft\n      llm: {model: m, prompt: write notes}\n    - id: review\n      approval: {prompt: Ship?}\n    - id: polish\n      llm: {model: m, prompt: polish them}\n";
    let open = |t: &Telemetry| {
        let store = weft_store::SqliteStore::open(&db, weft_store::Durability::Process).unwrap();
        engine(Arc::new(store), t)
    };
    let first = Telemetry::start(config(&collector.endpoint(), false)).unwrap();
    let e1 = open(&first);
    let paused = e1
        .start(prepare(&e1, yaml), None, RunOptions::default())
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(paused.status, weft_core::ports::RunStatus::Paused);
    drop(first); // sends what is queued
    let before = collector.spans();
    let run1 = one(&before, "invoke_workflow release");
    assert!(run1.events.contains(&"weft.run.paused".to_owned()));
    assert_eq!(run1.attributes["weft.run.status"], json!("paused"));
    assert_eq!(named(&before, "chat m").len(), 1);

    let second = Telemetry::start(config(&collector.endpoint(), false)).unwrap();
    let e2 = open(&second);
    let done = e2
        .answer(&paused.run_id, None, json!({"decision": "approve"}))
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(done.status, weft_core::ports::RunStatus::Completed);
    drop(second);
    let all = collector.spans();
    let later: Vec<ReceivedSpan> = all
        .iter()
        .filter(|s| s.trace_id != run1.trace_id)
        .cloned()
        .collect();
    let run2 = one(&later, "invoke_workflow release");
    assert_eq!(run2.links, [(run1.trace_id.clone(), run1.span_id.clone())]);
    assert_eq!(run2.attributes["weft.run.resumed"], json!(true));
    assert_eq!(
        one(&later, "llm draft").attributes["weft.replayed"],
        json!(true)
    );
    assert_eq!(
        one(&later, "llm polish").attributes["weft.replayed"],
        json!(false)
    );
    let chats: Vec<&str> = named(&later, "chat m")
        .iter()
        .map(|c| c.attributes["weft.step.path"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        chats,
        ["root/polish"],
        "the journaled call is not a new chat span"
    );
    assert!(run2.events.contains(&"weft.approval.answered".to_owned()));
}

/// A collector that accepts connections and never answers: the run does not wait for
/// it (its export timeout is far longer than the run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_never_answers_costs_a_run_nothing() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", silent.local_addr().unwrap());
    let mut cfg = config(&endpoint, false);
    cfg.timeout = Duration::from_secs(30);
    let telemetry = Telemetry::start(cfg).unwrap();
    let engine = engine(Arc::new(weft_store::MemoryStore::new()), &telemetry);
    let flow = prepare(
        &engine,
        "weft: 1\nname: quick\nroot:\n  sequence:\n    - transform: {output: '{{ input + 1 }}'}\n    - transform: {output: '{{ input * 2 }}'}\ninput: 1\n",
    );
    let started = Instant::now();
    for _ in 0..20 {
        let r = engine
            .start(flow.clone(), None, RunOptions::default())
            .await
            .unwrap()
            .end()
            .await
            .unwrap();
        assert_eq!(r.output.unwrap(), 4);
    }
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "20 runs waited on the collector: {took:?}"
    );
    // Flushing gives up at its deadline instead of hanging.
    let flushing = Instant::now();
    assert!(!telemetry.flush(Duration::from_millis(300)));
    assert!(flushing.elapsed() < Duration::from_secs(5));
    std::mem::forget(telemetry); // its drop would wait two more seconds for nothing
    drop(silent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_is_down_fails_nothing() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let telemetry = Telemetry::start(config(&format!("http://{closed}"), false)).unwrap();
    let engine = engine(Arc::new(weft_store::MemoryStore::new()), &telemetry);
    let flow = prepare(
        &engine,
        "weft: 1\nname: quick\nroot: {transform: {output: done}}\n",
    );
    let r = engine
        .start(flow, None, RunOptions::default())
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(r.output.unwrap(), "done");
    assert!(
        telemetry.flush(Duration::from_secs(5)),
        "a refused export ends at once"
    );
}
