//! Each provider against a real HTTP server on 127.0.0.1 speaking its wire format:
//! streamed and whole answers, tool calls, typed errors, `Retry-After`, a connection
//! dropped mid-stream, usage and cost.

use indexmap::IndexMap;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use weft_core::ErrorKind;
use weft_core::ir::ModelDef;
use weft_core::ports::{
    EmbedRequest, Message, Model, ModelRequest, ModelResolver, ToolCall, ToolDef,
};
use weft_fakes::{FakeServer, Reply, Wire};
use weft_llm::Router;

const WIRES: [(Wire, &str); 4] = [
    (Wire::OpenAi, "openai"),
    (Wire::Anthropic, "anthropic"),
    (Wire::Gemini, "gemini"),
    (Wire::Ollama, "ollama"),
];

fn def(provider: &str, server: &FakeServer, extra: Value) -> ModelDef {
    let mut options = IndexMap::new();
    options.insert("base_url".to_owned(), json!(server.base_url()));
    if let Value::Object(m) = extra {
        options.extend(m);
    }
    ModelDef {
        provider: provider.to_owned(),
        model: Some("test-model".to_owned()),
        options,
    }
}

fn router() -> Router {
    Router::new().with_env(Arc::new(|k: &str| {
        matches!(k, "OPENAI_API_KEY" | "ANTHROPIC_API_KEY" | "GEMINI_API_KEY")
            .then(|| "sk-test".to_owned())
    }))
}

fn model(router: &Router, provider: &str, server: &FakeServer, extra: Value) -> Arc<dyn Model> {
    let d = def(provider, server, extra);
    router.resolve("m", Some(&d)).expect("resolves").0
}

fn ask(text: &str) -> ModelRequest {
    ModelRequest {
        model: "test-model".into(),
        messages: vec![
            Message::new("system", "Be brief."),
            Message::new("user", text),
        ],
        ..ModelRequest::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_provider_streams_text_with_usage() {
    for (wire, provider) in WIRES {
        let server =
            FakeServer::start(wire, vec![Reply::text("The capital of France is Paris.")]).await;
        let router = router();
        let m = model(
            &router,
            provider,
            &server,
            json!({"price": {"input": 1.0, "output": 2.0}}),
        );
        let deltas = Mutex::new(Vec::new());
        let r = m
            .complete(&ask("Capital of France?"), &|d: &str| {
                deltas.lock().unwrap().push(d.to_owned())
            })
            .await
            .unwrap_or_else(|e| panic!("{provider}: {e:?}"));
        assert_eq!(r.content, "The capital of France is Paris.", "{provider}");
        let deltas = deltas.into_inner().unwrap();
        assert!(
            deltas.len() >= 6,
            "{provider}: streamed in pieces: {deltas:?}"
        );
        assert_eq!(deltas.concat(), r.content, "{provider}");
        assert_eq!(r.usage.output_tokens, 6, "{provider}");
        assert!(r.usage.input_tokens > 0, "{provider}");
        let expected = (r.usage.input_tokens as f64 + 6.0 * 2.0) / 1e6;
        assert!((r.usage.cost_usd - expected).abs() < 1e-12, "{provider}");
        // What went over the wire: the system prompt, the question, and the key.
        let sent = server.received();
        assert_eq!(sent.len(), 1, "{provider}");
        let body = sent[0].body.to_string();
        assert!(
            body.contains("Be brief.") && body.contains("Capital of France?"),
            "{provider}: {body}"
        );
        if provider != "ollama" {
            assert!(
                sent[0]
                    .credential
                    .as_deref()
                    .unwrap_or("")
                    .contains("sk-test"),
                "{provider}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_provider_answers_whole_when_not_streaming() {
    for (wire, provider) in WIRES {
        let server = FakeServer::start(wire, vec![Reply::text("Paris.")]).await;
        let router = router();
        let m = model(&router, provider, &server, json!({"stream": false}));
        let r = m
            .complete(&ask("Capital?"), &|_| {})
            .await
            .unwrap_or_else(|e| panic!("{provider}: {e:?}"));
        assert_eq!(r.content, "Paris.", "{provider}");
        assert_eq!(r.usage.output_tokens, 1, "{provider}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_provider_calls_tools_and_reads_their_results() {
    for stream in [true, false] {
        for (wire, provider) in WIRES {
            let server = FakeServer::start(
                wire,
                vec![
                    Reply::tool_call("weather", json!({"city": "Oslo", "days": 2})),
                    Reply::text("Rain in Oslo."),
                ],
            )
            .await;
            let router = router();
            let m = model(&router, provider, &server, json!({"stream": stream}));
            let mut req = ask("Weather in Oslo?");
            req.tools = vec![ToolDef {
                name: "weather".into(),
                description: "Forecast for a city".into(),
                parameters: json!({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}),
            }];
            let r = m
                .complete(&req, &|_| {})
                .await
                .unwrap_or_else(|e| panic!("{provider}/{stream}: {e:?}"));
            assert_eq!(r.tool_calls.len(), 1, "{provider}/{stream}: {r:?}");
            assert_eq!(r.tool_calls[0].name, "weather");
            assert_eq!(
                r.tool_calls[0].arguments,
                json!({"city": "Oslo", "days": 2}),
                "{provider}/{stream}"
            );
            // The tool's result goes back, and the model answers.
            let call: ToolCall = r.tool_calls[0].clone();
            req.messages.push(Message {
                role: "assistant".into(),
                content: String::new(),
                tool_calls: vec![call.clone()],
                tool_call_id: None,
            });
            req.messages.push(Message {
                role: "tool".into(),
                content: "{\"forecast\": \"rain\"}".into(),
                tool_calls: Vec::new(),
                tool_call_id: Some(call.id.clone()),
            });
            let r = m
                .complete(&req, &|_| {})
                .await
                .unwrap_or_else(|e| panic!("{provider}/{stream}: {e:?}"));
            assert_eq!(r.content, "Rain in Oslo.", "{provider}/{stream}");
            let second = server.received()[1].body.to_string();
            assert!(
                second.contains("rain") && second.contains("weather"),
                "{provider}/{stream}: {second}"
            );
            let offered = server.received()[0].body.to_string();
            assert!(
                offered.contains("Forecast for a city"),
                "{provider}/{stream}: {offered}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_typed() {
    let cases = [
        (401, ErrorKind::Auth),
        (404, ErrorKind::Config),
        (400, ErrorKind::Model),
    ];
    for (wire, provider) in WIRES {
        for (status, kind) in cases.clone() {
            let server = FakeServer::start(wire, vec![Reply::error(status, "nope")]).await;
            let router = router();
            let m = model(&router, provider, &server, json!({"max_retries": 0}));
            let e = m.complete(&ask("x"), &|_| {}).await.unwrap_err();
            assert_eq!(e.kind, kind, "{provider} HTTP {status}: {}", e.message);
            assert!(e.message.contains("nope"), "{provider}: {}", e.message);
        }
        let server = FakeServer::start(
            wire,
            vec![Reply::error(
                400,
                "This model's maximum context length is 8192 tokens",
            )],
        )
        .await;
        let router = router();
        let e = model(&router, provider, &server, json!({}))
            .complete(&ask("x"), &|_| {})
            .await
            .unwrap_err();
        assert_eq!(
            e.kind,
            ErrorKind::ContextOverflow,
            "{provider}: {}",
            e.message
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_is_retried_after_what_the_provider_asked() {
    for (wire, provider) in WIRES {
        let server = FakeServer::start(
            wire,
            vec![
                Reply::Error {
                    status: 429,
                    message: "slow down".into(),
                    retry_after: Some(1),
                },
                Reply::text("ok"),
            ],
        )
        .await;
        let router = router();
        let m = model(&router, provider, &server, json!({}));
        let t0 = Instant::now();
        let r = m
            .complete(&ask("x"), &|_| {})
            .await
            .unwrap_or_else(|e| panic!("{provider}: {e:?}"));
        assert_eq!(r.content, "ok");
        assert!(
            t0.elapsed() >= Duration::from_millis(990),
            "{provider}: waited {:?}",
            t0.elapsed()
        );
        assert_eq!(server.received().len(), 2);
    }
    // With retries spent, the error carries the provider's wait for the engine's retry.
    let server = FakeServer::start(
        Wire::OpenAi,
        vec![Reply::Error {
            status: 429,
            message: "slow down".into(),
            retry_after: Some(7),
        }],
    )
    .await;
    let router = router();
    let e = model(&router, "openai", &server, json!({"max_retries": 0}))
        .complete(&ask("x"), &|_| {})
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::RateLimit);
    assert_eq!(e.detail_field("retry_after_ms"), Some(&json!(7000)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_dropped_mid_stream_is_retried() {
    for (wire, provider) in WIRES {
        let server = FakeServer::start(
            wire,
            vec![
                Reply::DropAfter {
                    text: "one two three four".into(),
                    chunks: 2,
                },
                Reply::text("one two three four"),
            ],
        )
        .await;
        let router = router();
        let m = model(&router, provider, &server, json!({}));
        let r = m
            .complete(&ask("count"), &|_| {})
            .await
            .unwrap_or_else(|e| panic!("{provider}: {e:?}"));
        assert_eq!(r.content, "one two three four", "{provider}");
        assert_eq!(server.received().len(), 2, "{provider}");
        // Without retries the break is a `model` error that says what happened.
        let server = FakeServer::start(
            wire,
            vec![Reply::DropAfter {
                text: "one two three".into(),
                chunks: 1,
            }],
        )
        .await;
        let e = model(&router, provider, &server, json!({"max_retries": 0}))
            .complete(&ask("count"), &|_| {})
            .await
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Model, "{provider}: {}", e.message);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_output_and_options_reach_the_provider() {
    for (wire, provider) in WIRES {
        let server = FakeServer::start(wire, vec![Reply::text("{\"city\": \"Paris\"}")]).await;
        let router = router();
        let m = model(&router, provider, &server, json!({}));
        let mut req = ask("Capital of France as JSON");
        req.output_schema = Some(
            json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        );
        req.temperature = Some(0.25);
        req.max_tokens = Some(77);
        let r = m
            .complete(&req, &|_| {})
            .await
            .unwrap_or_else(|e| panic!("{provider}: {e:?}"));
        assert_eq!(
            serde_json::from_str::<Value>(&r.content).unwrap(),
            json!({"city": "Paris"})
        );
        let body = server.received()[0].body.to_string();
        assert!(
            body.contains("0.25") && body.contains("77"),
            "{provider}: {body}"
        );
        // Every provider gets the schema itself (Ollama as `format`, which it enforces).
        assert!(
            body.contains("\"city\""),
            "{provider}: the schema went out: {body}"
        );
        if provider == "ollama" {
            let sent = &server.received()[0].body;
            assert_eq!(sent["format"]["required"], json!(["city"]), "{sent}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_key_and_an_unknown_option_are_clear() {
    let server = FakeServer::start(Wire::OpenAi, vec![Reply::text("x")]).await;
    let bare = Router::new().with_env(Arc::new(|_: &str| None));
    let d = def("openai", &server, json!({}));
    let e = bare.resolve("m", Some(&d)).err().unwrap();
    assert_eq!(e.kind, ErrorKind::Auth);
    assert!(e.message.contains("OPENAI_API_KEY"), "{}", e.message);
    let d = def("openai", &server, json!({"time_out_ms": 5}));
    let e = router().resolve("m", Some(&d)).err().unwrap();
    assert!(
        e.message.contains("`time_out_ms`") && e.message.contains("timeout_ms"),
        "{}",
        e.message
    );
    // An id without a provider goes to openai.
    let e = bare.resolve("gpt-4o-mini", None).err().unwrap();
    assert!(e.message.contains("openai/gpt-4o-mini"), "{}", e.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_tools_are_sent_beside_the_function_tools_in_each_wire_format() {
    // Spec 002's providerTools: "raw provider tool objects" that the provider executes,
    // merged "into the same generation request" as block tools and search.
    let raw = json!({"type": "code_execution_20250522", "name": "code_execution"});
    for (wire, provider) in WIRES {
        let server = FakeServer::start(
            wire,
            vec![
                Reply::tool_call("weather", json!({"city": "Oslo"})),
                Reply::text("done"),
            ],
        )
        .await;
        let router = router();
        let m = model(&router, provider, &server, json!({"stream": false}));
        let mut req = ask("Run some code.");
        req.tools = vec![ToolDef {
            name: "weather".into(),
            description: "Forecast for a city".into(),
            parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        }];
        req.provider_tools = vec![raw.clone()];
        let r = m.complete(&req, &|_| {}).await;
        if provider == "ollama" {
            let e = r.unwrap_err();
            assert_eq!(e.kind, ErrorKind::Config);
            assert!(
                e.message.contains("Ollama runs no provider tools"),
                "{}",
                e.message
            );
            continue;
        }
        let r = r.unwrap_or_else(|e| panic!("{provider}: {e:?}"));
        assert_eq!(
            r.tool_calls[0].name, "weather",
            "{provider}: calls still read back"
        );
        let tools = server.received()[0].body["tools"].clone();
        let expected = match provider {
            "openai" => json!([
                {"type": "function", "function": {"name": "weather", "description": "Forecast for a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
                raw
            ]),
            "anthropic" => json!([
                {"name": "weather", "description": "Forecast for a city", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
                raw
            ]),
            _ => json!([
                {"functionDeclarations": [{"name": "weather", "description": "Forecast for a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]},
                raw
            ]),
        };
        assert_eq!(tools, expected, "{provider}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_openai_chat_goes_over_the_wire_as_chat_completions_expects() {
    // Plain chats take Weft's own OpenAI client (genai for the rest): the body must be
    // what Chat Completions documents, as genai would send it.
    let server = FakeServer::start(Wire::OpenAi, vec![Reply::text("Paris.")]).await;
    let router = router();
    let m = model(&router, "openai", &server, json!({}));
    let mut req = ask("Capital?");
    req.messages
        .push(Message::new("assistant", "Of which country?"));
    req.messages.push(Message::new("user", "France."));
    req.temperature = Some(0.2);
    req.max_tokens = Some(50);
    m.complete(&req, &|_| {}).await.unwrap();
    let body = &server.received()[0].body;
    assert_eq!(
        body,
        &json!({
            "model": "test-model",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Capital?"},
                {"role": "assistant", "content": "Of which country?"},
                {"role": "user", "content": "France."},
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
            "temperature": 0.2,
            "max_tokens": 50,
        })
    );
    // OpenAI's newer models take the bound as `max_completion_tokens`.
    let server = FakeServer::start(Wire::OpenAi, vec![Reply::text("Paris.")]).await;
    let m = model(&router, "openai", &server, json!({"stream": false}));
    let mut req = ask("Capital?");
    req.model = "gpt-5-mini".into();
    req.max_tokens = Some(50);
    let r = m.complete(&req, &|_| {}).await.unwrap();
    assert_eq!(r.content, "Paris.");
    let body = &server.received()[0].body;
    assert_eq!(body["max_completion_tokens"], 50);
    assert!(body.get("max_tokens").is_none() && body.get("stream_options").is_none());
    assert_eq!(body["stream"], false);
    // A name ending in a reasoning effort is genai's way of setting one: it still works.
    let server = FakeServer::start(Wire::OpenAi, vec![Reply::text("Paris.")]).await;
    let m = model(&router, "openai", &server, json!({"stream": false}));
    let mut req = ask("Capital?");
    req.model = "o3-mini-high".into();
    m.complete(&req, &|_| {}).await.unwrap();
    let body = &server.received()[0].body;
    assert_eq!(body["model"], "o3-mini", "{body}");
    assert_eq!(body["reasoning_effort"], "high", "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_provider_with_embedding_models_embeds_texts_in_order() {
    let vectors = vec![vec![0.25, -0.5, 1.0], vec![0.0, 0.75, -1.0]];
    for (wire, provider, path) in [
        (Wire::OpenAi, "openai", "/v1/embeddings"),
        (Wire::Ollama, "ollama", "/api/embed"),
        (
            Wire::Gemini,
            "gemini",
            "/v1beta/models/test-model:batchEmbedContents",
        ),
    ] {
        let server = FakeServer::start(wire, vec![Reply::Embeddings(vectors.clone())]).await;
        let router = router();
        let request = EmbedRequest {
            model: "test-model".into(),
            inputs: vec!["a cat".into(), "a dog".into()],
            dimensions: Some(3),
        };
        let r = model(&router, provider, &server, json!({}))
            .embed(&request)
            .await
            .unwrap_or_else(|e| panic!("{provider}: {e:?}"));
        assert_eq!(r.vectors, vectors, "{provider}");
        let sent = server.received();
        assert_eq!(sent.len(), 1, "{provider}");
        assert_eq!(sent[0].path, path, "{provider}");
        let body = sent[0].body.to_string();
        assert!(
            body.contains("a cat") && body.contains("a dog"),
            "{provider}: {body}"
        );
        if provider != "gemini" {
            assert_eq!(sent[0].body["model"], "test-model", "{provider}");
            assert_eq!(sent[0].body["dimensions"], 3, "{provider}");
            assert!(r.usage.input_tokens > 0, "{provider}: {:?}", r.usage);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_without_embedding_models_says_so_and_sends_nothing() {
    let server = FakeServer::start(Wire::Anthropic, vec![Reply::Embeddings(vec![])]).await;
    let router = router();
    let e = model(&router, "anthropic", &server, json!({}))
        .embed(&EmbedRequest {
            model: "test-model".into(),
            inputs: vec!["x".into()],
            dimensions: None,
        })
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Config);
    assert!(
        e.message.contains("Anthropic offers no embedding models"),
        "{e:?}"
    );
    assert!(server.received().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_embedding_call_is_retried() {
    let server = FakeServer::start(
        Wire::OpenAi,
        vec![
            Reply::Error {
                status: 429,
                message: "slow down".into(),
                retry_after: Some(1),
            },
            Reply::Embeddings(vec![vec![1.0]]),
        ],
    )
    .await;
    let router = router();
    let r = model(&router, "openai", &server, json!({}))
        .embed(&EmbedRequest {
            model: "test-model".into(),
            inputs: vec!["x".into()],
            dimensions: None,
        })
        .await
        .unwrap();
    assert_eq!(r.vectors, vec![vec![1.0]]);
    assert_eq!(server.received().len(), 2);
}
