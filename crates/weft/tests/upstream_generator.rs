//! flow-state-dev's own generator suite (`packages/core/test/generator.test.ts`, commit
//! 038ef4b), case by case: each test is named after the upstream case it ports (its
//! `describe` group first). Upstream drives a mock model object; here the harness's
//! scripted model answers and the run's events and compiled flow show what the
//! generator sent and did. Cases not ported are listed in `docs/library.md`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use weft::prelude::*;
use weft::testing::TestHarness;
use weft_core::event::EventKind;
use weft_core::ir::{BlockKind, LlmSpec};

/// The generator's compiled model call.
fn llm_of(block: &Block) -> LlmSpec {
    let flow = TestHarness::new().flow(block).expect("the block builds");
    let mut stack = vec![&flow.root];
    while let Some(b) = stack.pop() {
        match &b.kind {
            BlockKind::Llm(l) => return l.clone(),
            BlockKind::Sequence(steps) => stack.extend(steps),
            _ => {}
        }
    }
    panic!("no model call in {:?}", flow.root.kind);
}

#[derive(Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
struct Done {
    done: bool,
}

#[derive(Debug, Default, Serialize)]
struct Notes {
    content: String,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
struct Echo {
    text: String,
    ok: bool,
}

// ---- generator builder -------------------------------------------------------------

#[tokio::test]
async fn generator_builder_defaults_output_schema_to_string_when_omitted() {
    let block = generator("string-output")
        .prompt("Return a string")
        .user("{{ input.value }}");
    assert!(llm_of(&block.clone().into()).output_schema.is_none());
    let run = TestHarness::new()
        .reply("x", "hello")
        .run(block, json!({"value": "x"}))
        .await;
    assert_eq!(run.output(), "hello");
}

#[tokio::test]
async fn generator_builder_resolves_model_and_prompt_from_functions() {
    // Templates over the input stand for upstream's functions of the input.
    let block = generator("dynamic-model-prompt")
        .model("model-{{ input.count }}")
        .user("prompt-{{ input.count }}");
    let run = TestHarness::new()
        .reply("prompt-2", "ok")
        .run(block, json!({"count": 2}))
        .await;
    assert_eq!(run.output(), "ok", "the prompt was rendered from the input");
}

#[tokio::test]
async fn generator_builder_supports_repair_mode_auto() {
    // Weft repairs by sending the invalid answer back to the model (upstream's
    // `repairOutput` function has no counterpart).
    let block = generator("repair-auto")
        .user("p")
        .output::<Done>()
        .max_repairs(1);
    let run = TestHarness::new()
        // Rules match in order: the repair request first (it mentions "p" too).
        .rule(json!({"when": "not valid", "reply": "{\"done\": true}"}))
        .rule(json!({"when": "p", "reply": "{\"done\": \"nope\"}"}))
        .run(block, json!({"value": 1}))
        .await;
    assert_eq!(run.output_as::<Done>(), Done { done: true });
}

#[tokio::test]
async fn generator_builder_fails_immediately_in_repair_fail_mode() {
    let block = generator("repair-fail")
        .user("p")
        .output::<Done>()
        .max_repairs(0);
    let run = TestHarness::new()
        .reply("p", "{\"done\": \"bad\"}")
        .run(block, json!({"value": 1}))
        .await;
    let e = run
        .error()
        .expect("an invalid answer without repairs fails");
    assert!(e.message.contains("invalid"), "{}", e.message);
    let calls = run
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::LlmCall { .. }))
        .count();
    assert_eq!(calls, 1, "no repair was asked for");
}

#[tokio::test]
async fn generator_builder_runs_model_requested_tools_via_execute_wrappers() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let succeeds = handler("succeeds").execute(move |input: Value, _ctx| {
        counted.fetch_add(1, Ordering::SeqCst);
        async move { Ok(json!({"text": input["text"], "ok": true})) }
    });
    let block = generator("tool-loop")
        .user("{{ input.text }}")
        .output::<Echo>()
        .max_tool_rounds(2)
        .tools([succeeds]);
    let run = TestHarness::new()
        // The tool's answer first: it mentions "hello" too.
        .after_tool("{last}")
        .tool_call("hello", "succeeds", json!({"input": {"text": "hello"}}))
        .run(block, json!({"text": "hello"}))
        .await;
    assert_eq!(
        run.output_as::<Echo>(),
        Echo {
            text: "hello".into(),
            ok: true
        }
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn generator_builder_passes_max_steps_to_the_model_loop() {
    // `maxIterations` bounds the tool loop: a model that keeps calling tools is stopped
    // after that many rounds.
    let tool = handler("again").execute(|_: Value, _ctx| async move { Ok("more") });
    let block = generator("max-steps")
        .user("go")
        .max_tool_rounds(4)
        .tools([tool]);
    let run = TestHarness::new()
        .tool_call("", "again", json!({"input": 1}))
        .run(block, json!({"n": 1}))
        .await;
    assert_eq!(run.tool_calls().len(), 4, "{:?}", run.error());
}

#[tokio::test]
async fn generator_builder_does_not_auto_inject_resource_content_tools() {
    // A generator offers the model exactly the tools it is given, resources or not.
    let block = generator("no-auto-resource-tools").user("p");
    let handler_with_resource = handler("keeps-notes")
        .session_resource("soul", weft::define_resource::<Notes>(true))
        .execute(|v: Value, _ctx| async move { Ok(v) });
    let flow_block: Block = sequencer("with-resource")
        .then(handler_with_resource)
        .then(block)
        .into();
    assert!(llm_of(&flow_block).tools.is_empty());
}

#[tokio::test]
async fn generator_builder_emits_block_tool_output_items_when_a_tool_executes() {
    // Weft's record of a tool call: `tool_called` (the generator's step, the tool, its
    // arguments) and the tool block's own step with its output.
    let lookup = handler("lookup-tool").execute(|input: Value, _ctx| async move {
        Ok(json!({"answer": format!("result for {}", input["query"].as_str().unwrap())}))
    });
    let block = generator("tool-generator")
        .user("Use the tool")
        .tools([lookup]);
    let run = TestHarness::new()
        .tool_call(
            "Use the tool",
            "lookup-tool",
            json!({"input": {"query": "test"}}),
        )
        .after_tool("done")
        .run(block, json!({"value": "x"}))
        .await;
    assert_eq!(run.output(), "done");
    let called = run
        .events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolCalled {
                path, tool, step, ..
            } => Some((path.clone(), tool.clone(), step.clone())),
            _ => None,
        })
        .expect("a tool_called event");
    assert!(called.0.ends_with("tool-generator"), "{called:?}");
    assert_eq!(called.1, "lookup-tool");
    let step = called.2.expect("the tool's step path");
    let output = run.events.iter().find_map(|e| match &e.kind {
        EventKind::StepCompleted {
            path,
            output: Some(o),
            ..
        } if path.starts_with(&step) && o.get("answer").is_some() => Some(o.clone()),
        _ => None,
    });
    assert_eq!(
        output.map(|o| o.to_value()),
        Some(json!({"answer": "result for test"}))
    );
}

#[tokio::test]
async fn generator_builder_stamps_a_sanitized_alias_when_the_tool_name_contains_namespace_characters()
 {
    // Providers accept only letters, digits, `_` and `-` in tool names: the model sees
    // the alias; the block keeps its name.
    let recall = handler("tf.memory/recall")
        .execute(|_: Value, _ctx| async move { Ok(json!({"results": ["found"]})) });
    let block = generator("ns-tool-generator").user("p").tools([recall]);
    let spec = llm_of(&block.clone().into());
    assert_eq!(spec.tools[0].name, "tf_memory_recall");
    let run = TestHarness::new()
        .tool_call("p", "tf_memory_recall", json!({"input": {"query": "wife"}}))
        .after_tool("{last}")
        .run(block, json!({"value": "x"}))
        .await;
    assert_eq!(run.output(), &json!({"results": ["found"]}).to_string());
    assert_eq!(run.tool_calls()[0].0, "tf_memory_recall");
}

#[tokio::test]
async fn generator_builder_stamps_the_alias_on_a_failed_tool_as_well() {
    let failing = handler("tf.memory/recall").execute(|_: Value, _ctx| async move {
        Err::<Value, _>(BlockError::new(ErrorKind::Handler, "boom"))
    });
    let block = generator("failing-tool-gen").user("p").tools([failing]);
    let run = TestHarness::new()
        .tool_call("p", "tf_memory_recall", json!({"input": {"query": "x"}}))
        .after_tool("recovered from: {last}")
        .run(block, json!({"value": "x"}))
        .await;
    let out = run.output().as_str().unwrap().to_owned();
    assert!(
        out.starts_with("recovered from: ") && out.contains("boom"),
        "{out}"
    );
    assert_eq!(run.tool_calls()[0].0, "tf_memory_recall");
}

#[tokio::test]
async fn generator_builder_gives_two_tools_with_one_alias_names_of_their_own() {
    // Not upstream's: two blocks whose names sanitize alike stay two tools.
    let a = handler("web.search").execute(|_: Value, _ctx| async move { Ok("a") });
    let b = handler("web/search").execute(|_: Value, _ctx| async move { Ok("b") });
    let spec = llm_of(&generator("two").user("p").tools([a, b]).into());
    let names: Vec<&str> = spec.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["web_search", "web_search_2"]);
}

// ---- generator streaming -----------------------------------------------------------

#[tokio::test]
async fn generator_streaming_does_not_pass_output_schema_for_text_generators() {
    let spec = llm_of(
        &generator("stream-schema")
            .agent_type(AgentType::Primary)
            .user("Return text")
            .into(),
    );
    assert!(spec.output_schema.is_none());
}

#[tokio::test]
async fn generator_streaming_does_not_emit_any_items_when_agent_type_is_unset() {
    let run = TestHarness::new()
        .reply("x", "result")
        .run(
            generator("no-identity").user("{{ input.value }}"),
            json!({"value": "x"}),
        )
        .await;
    assert_eq!(run.output(), "result");
    assert!(run.messages().is_empty());
}

#[tokio::test]
async fn generator_streaming_still_streams_text_through_when_agent_type_is_set() {
    let run = TestHarness::new()
        .reply("x", "hello world")
        .run(
            generator("text-still-flows")
                .agent_type(AgentType::Primary)
                .user("{{ input.value }}"),
            json!({"value": "x"}),
        )
        .await;
    assert_eq!(run.output(), "hello world");
    let said: Vec<&Value> = run.messages();
    assert_eq!(said.len(), 1, "{said:?}");
    assert_eq!(said[0]["content"], "hello world");
}

// ---- generator — structured output repair (`generator-repair.test.ts`, commit 0ebee79)

#[derive(Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Decision {
    Continue,
    Replan,
    Complete,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
struct Verdict {
    decision: Decision,
    reasoning: String,
}

fn evaluator() -> Block {
    generator("evaluator")
        .user("decide")
        .output::<Verdict>()
        .into()
}

fn model_calls(run: &weft::testing::TestRun) -> usize {
    run.events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::LlmCall { .. }))
        .count()
}

#[tokio::test]
async fn structured_output_repair_coerces_off_schema_output_renamed_keys() {
    // Weft coerces by sending the invalid answer back to the same model with the schema
    // (upstream asks a separate coercion model).
    let run = TestHarness::new()
        .reply(
            "not valid",
            r#"{"decision": "replan", "reasoning": "research errored"}"#,
        )
        .reply(
            "decide",
            r#"{"action": "replan", "reason": "research errored"}"#,
        )
        .run(evaluator(), json!({"value": "x"}))
        .await;
    assert_eq!(
        run.output_as::<Verdict>(),
        Verdict {
            decision: Decision::Replan,
            reasoning: "research errored".into()
        }
    );
    assert_eq!(model_calls(&run), 2);
}

#[tokio::test]
async fn structured_output_repair_recovers_malformed_json_deterministically_without_a_coercion_call()
 {
    let run = TestHarness::new()
        .reply("decide", r#"{"decision":"complete","reasoning":"done",}"#)
        .run(evaluator(), json!({"value": "x"}))
        .await;
    assert_eq!(
        run.output_as::<Verdict>(),
        Verdict {
            decision: Decision::Complete,
            reasoning: "done".into()
        }
    );
    assert_eq!(model_calls(&run), 1, "repaired without asking again");
    assert!(
        run.warnings()
            .iter()
            .any(|(_, code, _)| *code == "structured_answer_repaired"),
        "{:?}",
        run.warnings()
    );
}

#[tokio::test]
async fn structured_output_repair_throws_without_coercion_when_repair_coerce_is_false() {
    let block = generator("evaluator")
        .user("decide")
        .output::<Verdict>()
        .max_repairs(0);
    let run = TestHarness::new()
        .reply("decide", r#"{"action": "replan", "reason": "x"}"#)
        .run(block, json!({"value": "x"}))
        .await;
    assert!(run.error().is_some());
    assert_eq!(model_calls(&run), 1);
}

#[tokio::test]
async fn structured_output_repair_does_not_repair_when_the_model_returns_valid_structured_output() {
    let run = TestHarness::new()
        .reply("decide", r#"{"decision": "continue", "reasoning": "ok"}"#)
        .run(evaluator(), json!({"value": "x"}))
        .await;
    assert_eq!(run.output_as::<Verdict>().decision, Decision::Continue);
    assert_eq!(model_calls(&run), 1);
    assert!(run.warnings().is_empty());
}

// ---- generator owned step loop (`generator-owned-loop.test.ts`, commit 43189ce) ------

#[tokio::test]
async fn generator_owned_step_loop_makes_exactly_one_model_call_per_step_and_completes_with_text() {
    let runs = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = runs.clone();
    let adder = handler("adder").execute(move |input: Value, _ctx| {
        seen.lock().unwrap().push(input.clone());
        async move { Ok(json!({"sum": input["a"].as_i64().unwrap() + 1})) }
    });
    let block = generator("loop-gen").user("p").tools([adder]);
    let run = TestHarness::new()
        .rule(json!({"role": "tool", "when": "\"sum\":3", "reply": "done"}))
        .rule(json!({"role": "tool", "tool_calls": [{"name": "adder", "arguments": {"input": {"a": 2}}}]}))
        .rule(json!({"tool_calls": [{"name": "adder", "arguments": {"input": {"a": 1}}}]}))
        .run(block, json!({"q": 1}))
        .await;
    assert_eq!(run.output(), "done");
    assert_eq!(model_calls(&run), 3);
    assert_eq!(*runs.lock().unwrap(), [json!({"a": 1}), json!({"a": 2})]);
}

#[tokio::test]
async fn generator_owned_step_loop_disambiguates_colliding_tool_names_across_steps_via_unique_aliases()
 {
    let executed = Arc::new(std::sync::Mutex::new(Vec::new()));
    let tool = |name: &'static str, from: &'static str| {
        let executed = executed.clone();
        handler(name).execute(move |_: Value, _ctx| {
            executed.lock().unwrap().push(name);
            async move { Ok(json!({"from": from})) }
        })
    };
    let block = generator("collide-gen")
        .user("p")
        .tools([tool("foo.bar", "dot"), tool("foo/bar", "slash")]);
    let names: Vec<String> = llm_of(&block.clone().into())
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(names, ["foo_bar", "foo_bar_2"]);
    let run = TestHarness::new()
        .rule(json!({"role": "tool", "when": "dot", "reply": "done"}))
        .rule(json!({"role": "tool", "when": "slash", "tool_calls": [{"name": "foo_bar", "arguments": {}}]}))
        .rule(json!({"tool_calls": [{"name": "foo_bar_2", "arguments": {}}]}))
        .run(block, json!({}))
        .await;
    assert_eq!(run.output(), "done");
    assert_eq!(*executed.lock().unwrap(), ["foo/bar", "foo.bar"]);
}

#[tokio::test]
async fn generator_owned_step_loop_propagates_a_tool_s_suspension_out_of_the_loop() {
    // A tool that asks a person (an approval in it) pauses the run; the model is not
    // called again until the answer comes.
    let gated = sequencer("gated-tool")
        .then(approval("sign-off", "Go ahead?", ["approve", "reject"]))
        .map(|_: Value| json!({"ok": true}));
    let block = generator("suspend-gen").user("p").tools([gated]);
    let run = TestHarness::new()
        .after_tool("carried on")
        .rule(json!({"tool_calls": [{"name": "gated-tool", "arguments": {"input": {}}}]}))
        .run(block, json!({}))
        .await;
    assert_eq!(run.result.status, weft_core::ports::RunStatus::Paused);
    assert_eq!(model_calls(&run), 1);
}

#[tokio::test]
async fn generator_owned_step_loop_records_a_step_before_dispatching_its_tools() {
    // Weft's record of a step: the model call, then `tool_called`, then the tool's own
    // step.
    let tool = handler("do-thing").execute(|_: Value, _ctx| async move { Ok(json!({"ok": true})) });
    let block = generator("artifact-gen").user("p").tools([tool]);
    let run = TestHarness::new()
        .after_tool("done")
        .rule(json!({"tool_calls": [{"name": "do-thing", "arguments": {"input": {"a": 1}}}]}))
        .run(block, json!({}))
        .await;
    let mut order: Vec<&str> = run
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::LlmCall { .. } => Some("model"),
            EventKind::ToolCalled { .. } => Some("tool_called"),
            // The tool's step, and the block's own inside it.
            EventKind::StepStarted { path, .. } if path.ends_with("do-thing") => Some("tool_step"),
            _ => None,
        })
        .collect();
    order.dedup();
    assert_eq!(order, ["model", "tool_called", "tool_step", "model"]);
}

#[tokio::test]
async fn generator_owned_step_loop_still_surfaces_a_model_visible_error_for_a_genuine_hallucinated_unknown_tool()
 {
    let real = handler("real").execute(|_: Value, _ctx| async move { Ok(json!({"ok": true})) });
    let block = generator("hallucinated-gen").user("p").tools([real]);
    let run = TestHarness::new()
        .rule(json!({"role": "tool", "when": "no tool named `ghost`", "reply": "recovered"}))
        .rule(json!({"tool_calls": [{"name": "ghost", "arguments": {}}]}))
        .run(block, json!({}))
        .await;
    assert_eq!(
        run.output(),
        "recovered",
        "the model saw the error and went on"
    );
    assert_eq!(model_calls(&run), 2);
}

#[tokio::test]
async fn generator_owned_step_loop_throws_when_built_with_two_tools_sharing_an_identical_name() {
    let a = handler("same-name").execute(|_: Value, _ctx| async move { Ok(json!({"ok": true})) });
    let b = handler("same-name").execute(|_: Value, _ctx| async move { Ok(json!({"ok": false})) });
    let block: Block = generator("dup-tools-gen").user("p").tools([a, b]).into();
    let e = block.to_flow().unwrap_err().to_string();
    assert!(
        e.contains("two different handlers are named `same-name`"),
        "{e}"
    );
}

#[tokio::test]
async fn generator_owned_step_loop_allows_the_same_tool_instance_appearing_twice() {
    let shared =
        handler("shared-tool").execute(|_: Value, _ctx| async move { Ok(json!({"ok": true})) });
    let block = generator("dup-ref-gen")
        .user("p")
        .tools([shared.clone(), shared]);
    assert_eq!(llm_of(&block.clone().into()).tools.len(), 1, "one tool");
    let run = TestHarness::new()
        .reply("p", "ok")
        .run(block, json!({}))
        .await;
    assert_eq!(run.output(), "ok");
}

#[tokio::test]
async fn generator_owned_step_loop_aggregates_per_step_usage_into_one_report() {
    let echo = handler("echo").execute(|_: Value, _ctx| async move { Ok(json!({"ok": true})) });
    let block = generator("usage-gen").user("p").tools([echo]);
    let usage = |input: u64, output: u64| json!({"input_tokens": input, "output_tokens": output});
    let run = TestHarness::new()
        .rule(json!({"role": "tool", "reply": "done", "usage": usage(20, 10)}))
        .rule(json!({"tool_calls": [{"name": "echo", "arguments": {}}], "usage": usage(10, 5)}))
        .run(block, json!({}))
        .await;
    assert_eq!(run.output(), "done");
    assert_eq!(run.result.usage.input_tokens, 30);
    assert_eq!(run.result.usage.output_tokens, 15);
}
