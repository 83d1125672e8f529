//! The real local model (SmolLM2-135M-Instruct, fetched by scripts/fetch-model), loaded
//! once in one worker process; the checks run one after another in a single test so
//! the model is never loaded twice or run in parallel.

use serde_json::{Value, json};
use std::sync::Mutex;
use std::time::Duration;
use weft_core::ports::{EmbedRequest, Message, Model, ModelRequest, ToolDef};
use weft_local::{LocalModel, ModelCommand, model_path};

fn ask(system: &str, user: &str) -> ModelRequest {
    ModelRequest {
        model: "smollm2".into(),
        messages: vec![Message::new("system", system), Message::new("user", user)],
        max_tokens: Some(48),
        ..ModelRequest::default()
    }
}

#[test]
fn the_local_model_answers_streams_and_follows_a_schema() {
    if std::env::var_os("WEFT_TEST_FAST").is_some() {
        eprintln!("note: the fast test profile leaves out the local model (scripts/test runs it)");
        return;
    }
    let models = std::env::var_os("WEFT_MODELS").map(std::path::PathBuf::from);
    let path = model_path("smollm2", models.as_deref());
    assert!(
        path.is_file(),
        "{} is missing: run scripts/fetch-model (scripts/test does)",
        path.display()
    );
    let model = LocalModel::new(
        ModelCommand {
            program: env!("CARGO_BIN_EXE_weft-model-worker").into(),
            args: vec![],
        },
        path,
        Duration::from_secs(120),
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // A real prompt, greedy: the answer names Paris, and arrives in pieces.
        let deltas = Mutex::new(Vec::new());
        let req = ask(
            "You are a helpful assistant.",
            "What is the capital of France?",
        );
        let r = model
            .complete(&req, &|d: &str| deltas.lock().unwrap().push(d.to_owned()))
            .await
            .unwrap();
        assert!(r.content.contains("Paris"), "{:?}", r.content);
        let deltas = deltas.into_inner().unwrap();
        assert!(deltas.len() > 2, "{deltas:?}");
        assert_eq!(deltas.concat(), r.content);
        assert!(
            r.usage.input_tokens > 10 && r.usage.output_tokens > 0,
            "{:?}",
            r.usage
        );
        assert_eq!(r.usage.cost_usd, 0.0);

        // Greedy sampling is deterministic.
        let again = model.complete(&req, &|_| {}).await.unwrap();
        assert_eq!(again.content, r.content);

        // Grammar-constrained output parses and matches its schema.
        let schema = json!({
            "type": "object",
            "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
            "required": ["city", "country"],
            "additionalProperties": false
        });
        let mut req = ask(
            "Answer in JSON.",
            "Name the capital of France and its country.",
        );
        req.output_schema = Some(schema.clone());
        req.max_tokens = Some(64);
        let r = model.complete(&req, &|_| {}).await.unwrap();
        let v: Value = serde_json::from_str(&r.content)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", r.content));
        let validator = jsonschema::validator_for(&schema).unwrap();
        assert!(validator.is_valid(&v), "{v}");

        // Tool calling: the grammar lets the model only call an offered tool with
        // arguments that match its schema, or answer; fed the result, it answers.
        let weather = ToolDef {
            name: "weather".into(),
            description: "Gives the current weather in a city.".into(),
            parameters: json!({
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": false
            }),
        };
        let mut req = ask(
            "You are a helpful assistant.",
            "Call the weather tool to find the weather in Paris.",
        );
        req.tools = vec![weather.clone()];
        req.max_tokens = Some(64);
        let deltas = Mutex::new(Vec::new());
        let r = model
            .complete(&req, &|d: &str| deltas.lock().unwrap().push(d.to_owned()))
            .await
            .unwrap();
        assert_eq!(r.tool_calls.len(), 1, "{r:?}");
        let call = &r.tool_calls[0];
        assert_eq!(call.name, "weather");
        assert_eq!(call.id, "local-call-1");
        let arguments = jsonschema::validator_for(&weather.parameters).unwrap();
        assert!(arguments.is_valid(&call.arguments), "{}", call.arguments);
        assert!(r.content.is_empty() && deltas.lock().unwrap().is_empty());

        req.messages.push(Message {
            tool_calls: r.tool_calls.clone(),
            ..Message::new("assistant", "")
        });
        req.messages.push(Message {
            tool_call_id: Some(call.id.clone()),
            ..Message::new("tool", "Sunny, 24 degrees Celsius.")
        });
        let r = model.complete(&req, &|_| {}).await.unwrap();
        assert!(
            r.tool_calls
                .iter()
                .all(|c| c.name == "weather" && c.id == "local-call-2"),
            "{r:?}"
        );
        assert!(!r.content.is_empty() || !r.tool_calls.is_empty(), "{r:?}");

        // Embeddings: one unit vector per text, in order, the same for the same text,
        // and closer for related texts than for unrelated ones.
        let texts = [
            "The cat sat on the mat.",
            "A kitten was sitting on the rug.",
            "Quarterly revenue rose by four percent.",
            "The cat sat on the mat.",
        ];
        let r = model
            .embed(&EmbedRequest {
                model: "smollm2".into(),
                inputs: texts.iter().map(|t| (*t).to_owned()).collect(),
                dimensions: None,
            })
            .await
            .unwrap();
        assert_eq!(r.vectors.len(), 4);
        let dims = r.vectors[0].len();
        assert!(
            dims >= 64 && r.vectors.iter().all(|v| v.len() == dims),
            "{dims}"
        );
        let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
        for v in &r.vectors {
            assert!((dot(v, v) - 1.0).abs() < 1e-3, "not unit length");
        }
        assert_eq!(r.vectors[0], r.vectors[3]);
        let related = dot(&r.vectors[0], &r.vectors[1]);
        let unrelated = dot(&r.vectors[0], &r.vectors[2]);
        assert!(related > unrelated, "{related} <= {unrelated}");
        assert!(r.usage.input_tokens > 20, "{:?}", r.usage);
        let e = model
            .embed(&EmbedRequest {
                model: "smollm2".into(),
                inputs: vec!["x".into()],
                dimensions: Some(3),
            })
            .await
            .unwrap_err();
        assert!(e.message.contains("remove `dimensions`"), "{e:?}");
    });
}
