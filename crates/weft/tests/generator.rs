//! Generators, blocks as tools, and flows converted to native YAML and back.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use weft::prelude::*;
use weft::testing::TestHarness;
use weft::utility::{self, Combine, Granularity};

#[tokio::test]
async fn a_sequencer_is_a_tool_inside_a_generator_s_tool_loop() {
    // 002: "Any block or sequence of blocks can be used as a tool ... When the LLM calls
    // deep-research, the framework runs the full sequencer pipeline, collects the
    // output, and feeds it back as the tool result — all within the generator's tool
    // loop."
    let search = handler("search-index").execute(|topic: String, _ctx| async move {
        Ok(vec![format!("{topic} book"), format!("{topic} blog")])
    });
    let rank = handler("rank-results")
        .execute(|hits: Vec<String>, _ctx| async move { Ok(hits[0].clone()) });
    let deep_research = sequencer("deep-research")
        .then(search)
        .then(rank)
        .build()
        .describe("Researches a topic in depth.");
    let agent = generator("agent")
        .prompt("You research.")
        .user("{{ input }}")
        .tools([deep_research]);
    let run = TestHarness::new()
        .tool_call("Research rust", "deep-research", json!({"input": "rust"}))
        .after_tool("The best source: {last}")
        .run(agent, "Research rust")
        .await;
    assert_eq!(run.output(), "The best source: rust book");
    assert_eq!(
        run.tool_calls(),
        vec![("deep-research", &json!({"input": "rust"}))]
    );
    assert_eq!(
        run.starts("rank-results"),
        1,
        "the whole pipeline ran as the tool"
    );
}

#[derive(Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
struct Verdict {
    label: String,
    score: f64,
}

#[tokio::test]
async fn structured_output_comes_back_typed_and_identity_decides_emission() {
    // 002: "Structured output repair — if the LLM returns invalid JSON, the framework
    // can auto-retry"; "agentType ... governs where its auto-emitted items flow";
    // "unset: no auto-emission".
    let judge = generator("judge")
        .user("Judge: {{ input }}")
        .output::<Verdict>()
        .agent_type(AgentType::Sub)
        .agent_name("judges");
    let run = TestHarness::new()
        .rule(json!({"when": "Judge:", "reply": "Sure, here it is."}))
        .rule(json!({"when": "not valid", "reply": "{\"label\": \"good\", \"score\": 0.9}"}))
        .run(judge, "a poem")
        .await;
    assert_eq!(
        run.output_as::<Verdict>(),
        Verdict {
            label: "good".into(),
            score: 0.9
        }
    );
    assert_eq!(
        run.messages(),
        vec![
            &json!({"agent_type": "sub", "agent_name": "judges", "content": {"label": "good", "score": 0.9}})
        ]
    );
    let silent = generator("quiet").user("{{ input }}");
    let run = TestHarness::new()
        .reply("hi", "hello")
        .run(silent, "hi")
        .await;
    assert!(run.messages().is_empty());
}

#[tokio::test]
async fn a_primary_generator_keeps_its_history_across_calls() {
    // 002: "primary: Messages + reasoning go to UI and enter history".
    let chat = generator("chat")
        .prompt("You chat.")
        .user("{{ input }}")
        .history(true)
        .agent_type(AgentType::Primary);
    let twice = sequencer("twice")
        .then(chat.clone())
        .map(|_: String| "and again?".to_owned())
        .then(
            generator("chat-again")
                .user("{{ input }}")
                .history(true)
                .agent_name("chat"),
        );
    let run = TestHarness::new()
        .reply("first", "one")
        .rule(json!({"regex": "(?s)again", "reply": "two"}))
        .run(twice, "first")
        .await;
    assert_eq!(run.output(), "two");
    let history = run.state["chat_history"].as_array().unwrap();
    let texts: Vec<&str> = history
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["first", "one", "and again?", "two"]);
}

#[tokio::test]
async fn utility_blocks_are_ordinary_blocks() {
    let classify = utility::intent_classifier(
        "triage",
        [("refund", "money back"), ("bug", "something broke")],
    );
    let run = TestHarness::new()
        .reply("app crashes", "{\"intent\": \"bug\", \"confidence\": 0.8}")
        .run(classify, "The app crashes on start")
        .await;
    assert_eq!(run.output()["intent"], "bug");

    let brief = utility::summarizer("brief", Granularity::Brief);
    let run = TestHarness::new()
        .reply("long text", "Short.")
        .run(brief, "a long text")
        .await;
    assert_eq!(run.output(), "Short.");

    let plan = utility::decomposer("plan");
    let run = TestHarness::new()
        .reply(
            "Ship",
            "{\"tasks\": [{\"title\": \"Test\", \"description\": \"Run the tests.\"}]}",
        )
        .run(plan, "Ship the release")
        .await;
    assert_eq!(run.output()["tasks"][0]["title"], "Test");

    let merge = utility::combiner("merge", Combine::Merge);
    let run = TestHarness::new()
        .run(merge, json!({"a": {"x": 1}, "b": {"y": 2}}))
        .await;
    assert_eq!(run.output(), &json!({"x": 1, "y": 2}));
    let concat = utility::combiner("concat", Combine::Concat);
    let run = TestHarness::new().run(concat, json!([[1, 2], 3])).await;
    assert_eq!(run.output(), &json!([1, 2, 3]));
}

#[tokio::test]
async fn a_flow_converts_to_native_yaml_and_back_and_runs_the_same() {
    // The issue: "A flow built with the API converts to native YAML (native handlers
    // appear as named references that the host program registers) and back, and runs
    // the same."
    let pipeline = sequencer("convert")
        .then(handler("double").execute(|x: i64, _ctx| async move { Ok(x * 2) }))
        .then_if(
            |x: i64| x > 5,
            handler("big").execute(|x: i64, _ctx| async move { Ok(x + 100) }),
        )
        .for_each_in(
            |x: i64| vec![x, x + 1],
            handler("each").execute(|x: i64, _ctx| async move { Ok(x % 7) }),
            Some(2),
        )
        .map(|v: Vec<i64>| v.iter().sum::<i64>())
        .build();
    let yaml = pipeline.to_yaml().unwrap();
    assert!(
        yaml.contains("handler:") && yaml.contains("name: double"),
        "{yaml}"
    );
    assert!(yaml.contains("native(\"convert.then_if."), "{yaml}");

    let runtime = Runtime::builder().register(&pipeline).build().unwrap();
    let direct = runtime.run(&pipeline, 3).await.unwrap();
    let loaded = weft_dialects::load_str(&yaml, "convert.yaml", None, Some("native")).unwrap();
    let again = runtime.run_flow(loaded.flow, 3).await.unwrap();
    assert_eq!(direct.output, again.output);
    assert_eq!(direct.output.unwrap(), json!((106 % 7) + (107 % 7)));

    // A runtime that was not given the blocks says so instead of failing mid-run.
    let bare = Runtime::builder().build().unwrap();
    let e = bare.run(&pipeline, 3).await.unwrap_err().to_string();
    assert!(e.contains("is not registered with this runtime"), "{e}");
}

#[tokio::test]
async fn connect_input_and_output_adapt_a_block() {
    // 002: "attach transforms directly to a block with connectInput and connectOutput".
    #[derive(Deserialize, JsonSchema)]
    struct Query {
        query: String,
        limit: usize,
    }
    let search =
        handler("search").execute(|q: Query, _ctx| async move { Ok(vec![q.query; q.limit]) });
    let from_text = search
        .connect_input(|text: String| json!({"query": text, "limit": 2}))
        .connect_output(|hits: Vec<String>| hits.join(","));
    let run = TestHarness::new().run(from_text, "rust").await;
    assert_eq!(run.output(), "rust,rust");
    let _: Value = run.output().clone();
}

#[tokio::test]
async fn handlers_emit_messages_and_components_and_see_their_parent() {
    // 002: "Handlers are silent by default — they don't emit anything to the client
    // unless you explicitly call ctx.emitMessage() or ctx.emitComponent()"; "ctx.parent
    // provides the immediate parent's identity and the input it was called with";
    // "ctx.parent is undefined at the root level".
    let report = handler("report").execute(|n: i64, ctx: Ctx| async move {
        ctx.emit_message("Processing your request...");
        ctx.emit_component("progress-bar", json!({"percent": 50}));
        let parent = ctx.parent().expect("a step has a parent");
        Ok(json!({"parent": parent.name, "kind": parent.kind, "parent_input": parent.input, "n": n}))
    });
    let p = sequencer("request")
        .map(|x: i64| x + 1)
        .then(report.clone());
    let run = TestHarness::new().run(p, json!(41)).await;
    assert_eq!(
        run.output(),
        &json!({"parent": "request", "kind": "sequencer", "parent_input": 41, "n": 42})
    );
    assert_eq!(
        run.messages(),
        vec![
            &json!({"type": "message", "text": "Processing your request..."}),
            &json!({"type": "component", "name": "progress-bar", "props": {"percent": 50}})
        ]
    );
    let top =
        handler("top").execute(|_: Value, ctx: Ctx| async move { Ok(ctx.parent().is_none()) });
    assert_eq!(
        TestHarness::new().run(top, json!(null)).await.output(),
        &json!(true)
    );

    // A tool's parent is its generator.
    let tool = handler("whoami").execute(|_: Value, ctx: Ctx| async move {
        let p = ctx.parent().unwrap();
        Ok(format!("{} {}", p.kind, p.name))
    });
    let agent = generator("agent").user("{{ input }}").tools([tool]);
    let run = TestHarness::new()
        .tool_call("who", "whoami", json!({"input": null}))
        .after_tool("{last}")
        .run(agent, "who")
        .await;
    assert_eq!(run.output(), "generator agent");
}

#[tokio::test]
async fn provider_tools_travel_with_the_generator() {
    // 002: "The providerTools escape hatch passes raw provider tool objects directly";
    // the wire formats are tested in weft-llm's provider tests.
    let raw = json!({"type": "code_execution_20250522", "name": "code_execution"});
    let agent: Block = generator("code-agent")
        .model("anthropic/claude-sonnet-4-5")
        .user("{{ input }}")
        .provider_tools([raw.clone()])
        .into();
    let yaml = agent.to_yaml().unwrap();
    assert!(
        yaml.contains("provider_tools:") && yaml.contains("code_execution_20250522"),
        "{yaml}"
    );
    let run = TestHarness::new()
        .reply("run", "ran")
        .run(agent, "run it")
        .await;
    assert_eq!(run.output(), "ran");
}

#[tokio::test]
async fn a_model_chosen_at_run_time_is_still_the_harness_s_in_a_test() {
    // A template model could name any provider when the block runs; a test never calls
    // a real one.
    let agent: Block = generator("picker")
        .model("{{ input.model }}")
        .user("{{ input.question }}")
        .into();
    let run = TestHarness::new()
        .reply("capital", "Paris")
        .run(
            agent,
            json!({"model": "openai/gpt-4o", "question": "The capital of France?"}),
        )
        .await;
    assert_eq!(run.output(), "Paris");
}
