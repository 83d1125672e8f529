//! Behaviour spec 001 promises, block type by block type.

use super::{answering, run, run_in, system_message, tool_result, user_message};
use serde_json::{Value, json};
use weft_core::event::EventKind;
use weft_core::ports::RunStatus;
use weft_fakes::{FakeServer, Reply, Wire};

const SOULS: &str = r#"
config:
  provider: openai
  model_name: gpt-4o-mini
souls:
  writer:
    id: writer
    kind: soul
    name: Writer
    role: Writer
    system_prompt: You write short, clear text.
    temperature: 0.2
    max_tokens: 300
  reviewer:
    system_prompt: You review text strictly.
"#;

fn flow(blocks_and_workflow: &str) -> String {
    format!("version: \"1.0\"\n{SOULS}{blocks_and_workflow}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linear_calls_its_soul_on_the_task_and_writes_results() {
    // 001, linear: "Single LLM call through a soul." The issue: souls carry
    // `system_prompt, provider, model_name, temperature, max_tokens`, `config` gives
    // defaults such as `model_name`; the run state is `results` (block id -> output),
    // `shared_memory`, `metadata`.
    let server = answering(|_, _| "A haiku about rust.".into()).await;
    let text = flow(
        "blocks:\n  draft:\n    type: linear\n    soul_ref: writer\nworkflow:\n  name: w\n  entry: draft\n  transitions:\n    - {from: draft, to: null}\n",
    );
    let ran = run(
        &text,
        json!({"instruction": "Write a haiku", "context": "about rust"}),
        Some(&server),
    )
    .await;
    assert_eq!(ran.output(), &json!("A haiku about rust."));
    assert_eq!(
        ran.state,
        json!({"results": {"draft": "A haiku about rust."}, "shared_memory": {}, "metadata": {}})
    );
    let sent = &server.received()[0];
    assert_eq!(sent.body["model"], "gpt-4o-mini");
    assert_eq!(sent.body["temperature"], 0.2);
    assert_eq!(sent.body["max_tokens"], 300);
    assert_eq!(
        system_message(sent).as_deref(),
        Some("You write short, clear text.")
    );
    assert_eq!(user_message(sent), "Write a haiku\n\nContext:\nabout rust");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soul_not_defined_inline_is_read_from_the_souls_directory() {
    // The issue: "a `soul_ref` not defined inline is looked up in a `souls/` directory
    // beside the flow, one `<id>.yaml` per soul".
    let server = answering(|_, _| "ok".into()).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("souls")).unwrap();
    std::fs::write(
        dir.path().join("souls/analyst.yaml"),
        "id: analyst\nkind: soul\nname: Analyst\nrole: Analyst\nsystem_prompt: You analyse data.\nprovider: openai\nmodel_name: gpt-4.1-mini\n",
    )
    .unwrap();
    let text = flow(
        "blocks:\n  a:\n    type: linear\n    soul_ref: analyst\nworkflow:\n  name: w\n  entry: a\n  transitions: [{from: a, to: null}]\n",
    );
    let ran = run_in(&text, json!("Analyse"), Some(&server), dir.path()).await;
    assert_eq!(
        ran.result.status,
        RunStatus::Completed,
        "{:?}",
        ran.result.error
    );
    let sent = &server.received()[0];
    assert_eq!(sent.body["model"], "gpt-4.1-mini");
    assert_eq!(system_message(sent).as_deref(), Some("You analyse data."));
    assert_eq!(user_message(sent), "Analyse", "a text task has no context");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inputs_put_earlier_results_in_the_context() {
    // 001, common fields: "inputs | Dict[str, InputRef] | Explicit upstream data
    // references (each entry has a from field)".
    let server = answering(|p, _| {
        if p.starts_with("Research") {
            "{\"facts\": \"rust is safe\"}".into()
        } else {
            "done".into()
        }
    })
    .await;
    let text = flow(
        "blocks:\n  research:\n    type: linear\n    soul_ref: writer\n  write:\n    type: linear\n    soul_ref: writer\n    inputs:\n      notes: {from: research}\n      facts: {from: research.facts}\nworkflow:\n  name: w\n  entry: research\n  transitions:\n    - {from: research, to: write}\n    - {from: write, to: null}\n",
    );
    let ran = run(&text, json!("Research rust"), Some(&server)).await;
    assert_eq!(
        ran.result.status,
        RunStatus::Completed,
        "{:?}",
        ran.result.error
    );
    let second = user_message(&server.received()[1]);
    assert_eq!(
        second,
        "Research rust\n\nContext:\nnotes: {\"facts\": \"rust is safe\"}\n\nfacts: rust is safe"
    );
}

fn gate_flow(shorthand: bool) -> String {
    let (gate_routes, conditional) = if shorthand {
        ("    pass: publish\n    fail: revise\n", "")
    } else {
        (
            "",
            "  conditional_transitions:\n    - {from: check, pass: publish, fail: revise}\n",
        )
    };
    flow(&format!(
        "blocks:\n  draft:\n    type: linear\n    soul_ref: writer\n  publish:\n    type: code\n    code: |\n      def main(data):\n          return {{\"published\": data[\"results\"][\"draft\"]}}\n  revise:\n    type: code\n    code: |\n      def main(data):\n          return {{\"feedback\": data[\"results\"][\"check\"]}}\n  check:\n    type: gate\n    soul_ref: reviewer\n    eval_key: draft\n{gate_routes}workflow:\n  name: w\n  entry: draft\n  transitions:\n    - {{from: draft, to: check}}\n    - {{from: publish, to: null}}\n    - {{from: revise, to: null}}\n{conditional}"
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_routes_on_pass_or_fail_with_its_reason() {
    // 001, gate: "LLM quality gate — evaluates another block's output and routes on
    // pass/fail"; "pass | Target block on pass (shorthand). Must be set with fail."; the
    // issue: "A gate's soul answers `PASS` or `FAIL: <reason>` on its first line."
    // "When pass and fail are omitted, the gate auto-creates two ExitDef entries with IDs
    // "pass" and "fail"."
    for shorthand in [true, false] {
        for (verdict, reached, stored) in [
            ("PASS\nLooks good.", "publish", "PASS"),
            ("FAIL: too long\nCut it down.", "revise", "too long"),
        ] {
            let server =
                FakeServer::start_with(Wire::OpenAi, std::time::Duration::ZERO, move |r| {
                    if system_message(r).unwrap_or_default().contains("review") {
                        Reply::text(verdict)
                    } else {
                        Reply::text("Draft text.")
                    }
                })
                .await;
            let ran = run(&gate_flow(shorthand), json!("Write"), Some(&server)).await;
            assert_eq!(
                ran.result.status,
                RunStatus::Completed,
                "{:?}",
                ran.result.error
            );
            let results = &ran.state["results"];
            assert_eq!(results["check"], stored);
            assert!(
                results.get(reached).is_some(),
                "{shorthand} {verdict}: {results}"
            );
            // The gate's soul sees the evaluated block's output.
            let judged = user_message(&server.received()[1]);
            assert!(judged.ends_with("Context:\nDraft text."), "{judged}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_s_extract_field_passes_a_field_of_the_last_item_on() {
    // 001, gate: "extract_field | JSON field to extract before evaluation".
    let server = FakeServer::start_with(Wire::OpenAi, std::time::Duration::ZERO, |r| {
        if system_message(r).unwrap_or_default().contains("review") {
            Reply::text("PASS")
        } else {
            Reply::text("[{\"title\": \"first\"}, {\"title\": \"Final title\"}]")
        }
    })
    .await;
    let text = flow(
        "blocks:\n  draft:\n    type: linear\n    soul_ref: writer\n  check:\n    type: gate\n    soul_ref: reviewer\n    eval_key: draft\n    extract_field: title\nworkflow:\n  name: w\n  entry: draft\n  transitions:\n    - {from: draft, to: check}\n",
    );
    let ran = run(&text, json!("Titles"), Some(&server)).await;
    assert_eq!(ran.state["results"]["check"], "Final title");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_gets_results_metadata_and_shared_memory_and_may_pick_an_exit() {
    // 001, code: "The main function receives a data dict with keys results, metadata,
    // and shared_memory. ... If the return value is a dict containing exit_handle, that
    // value is extracted and used as the block's exit handle."
    let text = r#"
version: "1.0"
blocks:
  classify:
    type: code
    exits: [{id: big, label: Big}, {id: small, label: Small}]
    code: |
      import json
      def main(data):
          n = data["metadata"]["n"]
          return {"n": n, "keys": sorted(data.keys()), "exit_handle": "big" if n > 10 else "small"}
  big:
    type: code
    code: |
      def main(data):
          return "big"
  small:
    type: code
    code: |
      def main(data):
          return "small"
workflow:
  name: w
  entry: classify
  conditional_transitions:
    - {from: classify, big: big, default: small}
"#;
    for (n, reached) in [(42, "big"), (3, "small")] {
        let ran = run(
            text,
            json!({"instruction": "classify", "metadata": {"n": n}}),
            None,
        )
        .await;
        assert_eq!(
            ran.result.status,
            RunStatus::Completed,
            "{:?}",
            ran.result.error
        );
        let results = &ran.state["results"];
        assert_eq!(
            results["classify"]["keys"],
            json!(["metadata", "results", "shared_memory"])
        );
        assert_eq!(results[reached], reached, "{results}");
        assert_eq!(ran.output(), &json!(reached));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_imports_only_its_allowed_modules() {
    // 001, code: "allowed_imports | List[str] | ["json", "re", "math", ...] | Whitelist
    // of importable modules".
    let text = |imports: &str| {
        format!(
            "version: \"1.0\"\nblocks:\n  c:\n    type: code\n{imports}    code: |\n      import re\n      def main(data):\n          return re.sub('a', 'b', 'aa')\nworkflow: {{name: w, entry: c}}\n"
        )
    };
    let ran = run(&text(""), json!("t"), None).await;
    assert_eq!(ran.output(), &json!("bb"), "re is allowed by default");
    let ran = run(&text("    allowed_imports: [json]\n"), json!("t"), None).await;
    assert_eq!(ran.result.status, RunStatus::Failed);
    assert!(
        ran.result
            .error
            .clone()
            .unwrap()
            .message
            .contains("not allowed")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_runs_rounds_until_its_break_exit_and_carries_context() {
    // 001, loop: "inner_block_refs | Block IDs to execute each round", "max_rounds |
    // 1—50", "break_on_exit | Exit handle value that triggers loop break",
    // CarryContextConfig: "mode | "last" (previous round only) or "all" (accumulate all
    // rounds)", "inject_as | Key name for injected context in shared_memory".
    let server = answering(|p, _| {
        let round = p.matches("draft").count();
        if p.starts_with("Review") {
            if round >= 2 {
                "PASS".into()
            } else {
                "FAIL: more".into()
            }
        } else {
            format!("draft {round}")
        }
    })
    .await;
    let text = flow(
        "blocks:\n  write:\n    type: linear\n    soul_ref: writer\n  judge:\n    type: gate\n    soul_ref: reviewer\n    eval_key: write\n  refine:\n    type: loop\n    inner_block_refs: [write, judge]\n    max_rounds: 4\n    break_on_exit: pass\n    carry_context:\n      mode: all\n      source_blocks: [write]\n      inject_as: history\nworkflow:\n  name: w\n  entry: refine\n  transitions: [{from: refine, to: null}]\n",
    );
    let ran = run(&text, json!("Write"), Some(&server)).await;
    assert_eq!(
        ran.result.status,
        RunStatus::Completed,
        "{:?}",
        ran.result.error
    );
    let state = &ran.state;
    // Round 1's review counts one draft (FAIL), round 2's two (PASS).
    assert_eq!(
        state["shared_memory"]["history"],
        json!([{"write": "draft 0"}, {"write": "draft 1"}])
    );
    assert_eq!(state["results"]["refine"], "PASS");
    let ended = ran.kinds().into_iter().find_map(|k| match k {
        EventKind::LoopEnded { iterations, .. } => Some(*iterations),
        _ => None,
    });
    assert_eq!(ended, Some(2));
    // The second round's writer saw the first round's draft.
    let calls: Vec<String> = server.received().iter().map(user_message).collect();
    assert!(
        calls[2].contains("history:\n[{\"write\":\"draft 0\"}]"),
        "{}",
        calls[2]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_stops_at_max_rounds_or_when_its_retry_exit_does_not_come() {
    // 001, loop: "retry_on_exit | Exit handle value that triggers another round";
    // "max_rounds | int | 5".
    let text = |extra: &str| {
        format!(
            "version: \"1.0\"\nblocks:\n  tick:\n    type: code\n    code: |\n      def main(data):\n          n = len(data[\"shared_memory\"].get(\"seen\", [])) + 1\n          return {{\"n\": n, \"exit_handle\": \"again\" if n < 3 else \"stop\"}}\n  spin:\n    type: loop\n    inner_block_refs: [tick]\n{extra}    carry_context: {{mode: all, inject_as: seen}}\nworkflow: {{name: w, entry: spin}}\n"
        )
    };
    let rounds = |ran: &super::Ran| ran.state["shared_memory"]["seen"].as_array().map(Vec::len);
    let ran = run(&text("    retry_on_exit: again\n"), json!("t"), None).await;
    assert_eq!(
        rounds(&ran),
        Some(3),
        "stops on the first exit that is not `again`"
    );
    let ran = run(&text(""), json!("t"), None).await;
    assert_eq!(rounds(&ran), Some(5), "the default max_rounds");
    let ran = run(&text("    max_rounds: 2\n"), json!("t"), None).await;
    assert_eq!(rounds(&ran), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_break_condition_tests_the_last_inner_output() {
    // 001, loop: "break_condition | ConditionDef or ConditionGroupDef | Condition
    // evaluated against last inner block's output".
    let text = "version: \"1.0\"\nblocks:\n  tick:\n    type: code\n    code: |\n      def main(data):\n          return {\"status\": \"done\" if len(data[\"shared_memory\"].get(\"seen\", [])) >= 1 else \"working\"}\n  spin:\n    type: loop\n    inner_block_refs: [tick]\n    break_condition: {eval_key: status, operator: equals, value: done}\n    carry_context: {mode: all, inject_as: seen}\nworkflow: {name: w, entry: spin}\n";
    let ran = run(text, json!("t"), None).await;
    assert_eq!(
        ran.state["shared_memory"]["seen"].as_array().map(Vec::len),
        Some(2)
    );
    assert_eq!(ran.output(), &json!({"status": "done"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synthesize_combines_its_input_blocks() {
    // 001, synthesize: "Combines outputs from multiple upstream blocks into a single
    // result via an LLM."
    let server = answering(|p, _| {
        if p.starts_with("Combine") {
            "combined".into()
        } else {
            p.split_whitespace().last().unwrap_or("").into()
        }
    })
    .await;
    let text = flow(
        "blocks:\n  a:\n    type: linear\n    soul_ref: writer\n  b:\n    type: linear\n    soul_ref: writer\n  all:\n    type: synthesize\n    soul_ref: writer\n    input_block_ids: [a, b]\nworkflow:\n  name: w\n  entry: a\n  transitions:\n    - {from: a, to: b}\n    - {from: b, to: all}\n    - {from: all, to: null}\n",
    );
    let ran = run(&text, json!("topic"), Some(&server)).await;
    assert_eq!(ran.output(), &json!("combined"));
    let prompt = user_message(&server.received()[2]);
    assert!(
        prompt.contains("[a]\ntopic") && prompt.contains("[b]\ntopic"),
        "{prompt}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dispatch_runs_its_branches_at_once_and_stores_each_and_all() {
    // 001, dispatch: "Parallel branching — each exit port gets its own soul and task
    // instruction. All branches execute concurrently." "Results are stored per-exit at
    // state.results["{block_id}.{exit_id}"] and combined at state.results[block_id] as a
    // JSON array."
    let server = FakeServer::start_with(Wire::OpenAi, std::time::Duration::from_millis(300), |r| {
        Reply::text(if user_message(r).starts_with("Sentiment") {
            "positive"
        } else {
            "Ada, London"
        })
    })
    .await;
    let text = flow(
        "blocks:\n  analyze:\n    type: dispatch\n    exits:\n      - {id: sentiment, label: Sentiment, soul_ref: writer, task: Sentiment of the text.}\n      - {id: entities, label: Entities, soul_ref: reviewer, task: Named entities in the text.}\nworkflow:\n  name: w\n  entry: analyze\n  transitions: [{from: analyze, to: null}]\n",
    );
    let ran = run(&text, json!("Ada loves London."), Some(&server)).await;
    assert_eq!(
        ran.result.status,
        RunStatus::Completed,
        "{:?}",
        ran.result.error
    );
    let results = &ran.state["results"];
    assert_eq!(results["analyze.sentiment"], "positive");
    assert_eq!(results["analyze.entities"], "Ada, London");
    assert_eq!(
        results["analyze"],
        json!([{"exit_id": "sentiment", "output": "positive"}, {"exit_id": "entities", "output": "Ada, London"}])
    );
    assert_eq!(
        user_message(&server.received()[0])
            .split("\n\nContext:\n")
            .nth(1),
        Some("Ada loves London.")
    );
    let order: Vec<&str> = ran
        .kinds()
        .into_iter()
        .filter_map(|k| match k {
            EventKind::StepStarted { kind, .. } if kind == "llm" => Some("start"),
            EventKind::LlmCall { .. } => Some("done"),
            _ => None,
        })
        .collect();
    assert_eq!(
        order,
        ["start", "start", "done", "done"],
        "concurrent branches"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_block_takes_its_error_route() {
    // 001, common fields: "error_route | str | Target block on error".
    let text = "version: \"1.0\"\nblocks:\n  risky:\n    type: code\n    error_route: recover\n    code: |\n      def main(data):\n          return 1 / 0\n  recover:\n    type: code\n    code: |\n      def main(data):\n          return \"recovered\"\nworkflow: {name: w, entry: risky}\n";
    let ran = run(text, json!("t"), None).await;
    assert_eq!(ran.output(), &json!("recovered"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_and_retries_become_policies() {
    // 001, common fields: "timeout_seconds | int | 300 | 1—3600"; code: "timeout_seconds
    // | int | 30 | Execution timeout (overrides base default of 300)"; "retry_config |
    // RetryConfig | Retry on failure".
    let text = flow(
        "blocks:\n  a:\n    type: linear\n    soul_ref: writer\n    retry_config: {max_attempts: 4, backoff: fixed, backoff_base_seconds: 0.5}\n  b:\n    type: code\n    code: |\n      def main(data):\n          return 1\n  c:\n    type: code\n    timeout_seconds: 5\n    code: |\n      def main(data):\n          return 1\nworkflow:\n  name: w\n  entry: a\n  transitions: [{from: a, to: b}, {from: b, to: c}]\n",
    );
    let dir = tempfile::tempdir().unwrap();
    let prepared = super::support::load(&text, dir.path(), "souls");
    let flow = serde_json::to_value(prepared.flow()).unwrap();
    let nodes = &flow["root"]["sequence"][1]["graph"]["nodes"];
    assert_eq!(nodes["a"]["timeout_ms"], 300_000);
    assert_eq!(nodes["a"]["retry"]["attempts"], 4);
    assert_eq!(nodes["a"]["retry"]["backoff_ms"], 500);
    assert_eq!(nodes["a"]["retry"]["multiplier"], 1.0);
    assert_eq!(nodes["b"]["timeout_ms"], 30_000);
    assert_eq!(nodes["c"]["timeout_ms"], 5_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_over_its_budget_stops_before_the_call() {
    // 001, common fields: "limits | BlockLimitsDef | Per-block budget constraints"; the
    // issue: "(token, cost and time budgets, enforced before each model call and rolled
    // up to parent blocks)" and "A souls flow whose budget is exceeded stops before the
    // call that would exceed it, with a clear error naming the block and the budget."
    let server = answering(|_, _| "a long answer".into()).await;
    let text = flow(
        "blocks:\n  a:\n    type: linear\n    soul_ref: writer\n  b:\n    type: linear\n    soul_ref: writer\n    limits: {token_cap: 100}\nworkflow:\n  name: w\n  entry: a\n  transitions: [{from: a, to: b}]\n",
    );
    let ran = run(&text, json!("Write"), Some(&server)).await;
    assert_eq!(ran.result.status, RunStatus::Failed);
    let e = ran.result.error.clone().unwrap();
    assert!(
        e.message.contains("`b`") && e.message.contains("token"),
        "{}",
        e.message
    );
    assert_eq!(server.received().len(), 1, "only block a called the model");
    // A loop's budget covers the calls of its inner blocks.
    let text = flow(
        "blocks:\n  a:\n    type: linear\n    soul_ref: reviewer\n  again:\n    type: loop\n    inner_block_refs: [a]\n    max_rounds: 5\n    limits: {token_cap: 40}\nworkflow:\n  name: w\n  entry: again\n",
    );
    let server = answering(|_, _| "ok".into()).await;
    let ran = run(
        &text,
        json!("Review this short text, please."),
        Some(&server),
    )
    .await;
    assert_eq!(ran.result.status, RunStatus::Failed);
    assert!(
        ran.result
            .error
            .clone()
            .unwrap()
            .message
            .contains("`again`"),
        "{:?}",
        ran.result.error
    );
    let calls = server.received().len();
    assert!(
        (1..5).contains(&calls),
        "stopped before the round that would exceed: {calls} calls"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateful_block_keeps_its_conversation_across_rounds() {
    // 001, common fields: "stateful | bool | false | Maintain conversation history across
    // re-invocations".
    let server = answering(|_, r| {
        format!(
            "reply {}",
            r.body["messages"].as_array().map_or(0, Vec::len)
        )
    })
    .await;
    let text = flow(
        "blocks:\n  chat:\n    type: linear\n    soul_ref: writer\n    stateful: true\n  again:\n    type: loop\n    inner_block_refs: [chat]\n    max_rounds: 2\nworkflow:\n  name: w\n  entry: again\n",
    );
    let ran = run(&text, json!("Hello"), Some(&server)).await;
    assert_eq!(
        ran.result.status,
        RunStatus::Completed,
        "{:?}",
        ran.result.error
    );
    let sent = server.received();
    // system + user, then system + the first exchange + user.
    assert_eq!(sent[0].body["messages"].as_array().map(Vec::len), Some(2));
    assert_eq!(sent[1].body["messages"].as_array().map(Vec::len), Some(4));
    assert_eq!(sent[1].body["messages"][2]["content"], "reply 2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_required() {
    // docs/dialects/souls.md: the run input is the task, text or {instruction, context?}.
    let text = "version: \"1.0\"\nblocks:\n  c:\n    type: code\n    code: |\n      def main(data):\n          return 1\nworkflow: {name: w, entry: c}\n";
    let ran = run(text, Value::Null, None).await;
    assert_eq!(ran.result.status, RunStatus::Failed);
    assert!(
        ran.result
            .error
            .clone()
            .unwrap()
            .message
            .contains("runs a task")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_conditions_pick_the_first_matching_case() {
    // 001, common fields: "output_conditions | List[CaseDef] | ... | Named output
    // branches"; cases are read as `{case_id, condition_group: {combinator, conditions:
    // [{eval_key, operator, value}]}, default}` (docs/dialects/souls.md).
    let text = r#"
version: "1.0"
blocks:
  score:
    type: code
    code: |
      def main(data):
          return {"score": data["metadata"]["score"], "tags": data["metadata"]["tags"]}
    output_conditions:
      - case_id: high
        condition_group:
          conditions:
            - {eval_key: score, operator: gte, value: "8"}
      - case_id: tagged
        condition_group:
          combinator: or
          conditions:
            - {eval_key: tags, operator: regex, value: "urgent|asap"}
            - {eval_key: missing, operator: exists}
      - {case_id: low, default: true}
  high: {type: code, code: "def main(data):\n    return 'high'\n"}
  tagged: {type: code, code: "def main(data):\n    return 'tagged'\n"}
  low: {type: code, code: "def main(data):\n    return 'low'\n"}
workflow:
  name: w
  entry: score
  conditional_transitions:
    - {from: score, high: high, tagged: tagged, low: low}
"#;
    for (score, tags, reached) in [
        (9, "none", "high"),
        (3, "very urgent", "tagged"),
        (3, "none", "low"),
    ] {
        let ran = run(
            text,
            json!({"instruction": "t", "metadata": {"score": score, "tags": tags}}),
            None,
        )
        .await;
        assert_eq!(ran.output(), &json!(reached), "{score} {tags}");
        assert_eq!(
            ran.state["results"]["score"]["score"], score,
            "the output is unchanged"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_send_a_block_s_result_to_its_case_s_goto() {
    // 001, common fields: "routes | List[RouteDef] | ... | Shorthand routing", "requires
    // exactly one default". A result that is JSON text is read as its value.
    let server = answering(|p, _| {
        if p.starts_with("Decide") {
            "{\"status\": \"approved\"}".into()
        } else {
            "x".into()
        }
    })
    .await;
    let text = flow(
        "blocks:\n  decide:\n    type: linear\n    soul_ref: reviewer\n    routes:\n      - case: ok\n        when: {conditions: [{eval_key: status, operator: equals, value: approved}]}\n        goto: ship\n      - {case: other, default: true, goto: fix}\n  ship: {type: code, code: \"def main(data):\\n    return 'shipped'\\n\"}\n  fix: {type: code, code: \"def main(data):\\n    return 'fixing'\\n\"}\nworkflow:\n  name: w\n  entry: decide\n",
    );
    let ran = run(&text, json!("Decide"), Some(&server)).await;
    assert_eq!(ran.output(), &json!("shipped"));
    let ran = run(&text, json!("Other"), Some(&server)).await;
    assert_eq!(ran.output(), &json!("fixing"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_conditions_map_the_output_text_to_an_exit() {
    // 001, common fields: "exit_conditions | List[ExitCondition] | Output pattern to exit
    // handle mapping" (`{contains | regex, exit_handle}`).
    let server = answering(|p, _| p.to_owned()).await;
    let text = flow(
        "blocks:\n  judge:\n    type: linear\n    soul_ref: reviewer\n    exit_conditions:\n      - {contains: APPROVED, exit_handle: yes}\n      - {regex: \"rej(ected)?\\\\b\", exit_handle: no}\n  yes: {type: code, code: \"def main(data):\\n    return 'yes'\\n\"}\n  no: {type: code, code: \"def main(data):\\n    return 'no'\\n\"}\n  other: {type: code, code: \"def main(data):\\n    return 'other'\\n\"}\nworkflow:\n  name: w\n  entry: judge\n  conditional_transitions:\n    - {from: judge, yes: yes, no: no, default: other}\n",
    );
    for (task, reached) in [
        ("APPROVED by all", "yes"),
        ("it was rejected", "no"),
        ("unclear", "other"),
    ] {
        let ran = run(&text, json!(task), Some(&server)).await;
        assert_eq!(ran.output(), &json!(reached), "{task}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_block_runs_a_child_file_with_its_inputs_and_outputs() {
    // 001, workflow: "Executes a child workflow as a sub-step"; "inputs | Interface name
    // to parent state path mapping. Keys must not contain dots."; "outputs | Parent path
    // to interface name mapping. Values must not contain dots."; "on_error | "raise"
    // (propagate error) or "catch" (absorb error, continue parent)".
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("summarizer.yaml"),
        "version: \"1.0\"\nblocks:\n  summarize:\n    type: code\n    code: |\n      def main(data):\n          topic = data[\"shared_memory\"][\"topic\"]\n          if topic == \"boom\":\n              raise ValueError(\"cannot summarize\")\n          return {\"summary\": topic.upper()}\nworkflow: {name: summarizer, entry: summarize}\n",
    )
    .unwrap();
    let parent = |on_error: &str| {
        format!(
            "version: \"1.0\"\nblocks:\n  research:\n    type: code\n    code: |\n      def main(data):\n          return data[\"metadata\"][\"topic\"]\n  sub:\n    type: workflow\n    workflow_ref: summarizer\n    inputs: {{topic: results.research}}\n    outputs: {{shared_memory.summary: summarize}}\n    on_error: {on_error}\nworkflow:\n  name: parent\n  entry: research\n  transitions:\n    - {{from: research, to: sub}}\n    - {{from: sub, to: null}}\n"
        )
    };
    let task = |topic: &str| json!({"instruction": "t", "metadata": {"topic": topic}});
    let ran = run_in(&parent("raise"), task("rust"), None, dir.path()).await;
    assert_eq!(
        ran.result.status,
        RunStatus::Completed,
        "{:?}",
        ran.result.error
    );
    assert_eq!(ran.state["results"]["sub"], json!({"summary": "RUST"}));
    assert_eq!(
        ran.state["shared_memory"]["summary"],
        json!({"summary": "RUST"})
    );
    assert!(
        ran.state["results"].get("summarize").is_none(),
        "the child's results stay its own"
    );

    let ran = run_in(&parent("raise"), task("boom"), None, dir.path()).await;
    assert_eq!(ran.result.status, RunStatus::Failed);
    assert!(
        ran.result
            .error
            .clone()
            .unwrap()
            .message
            .contains("cannot summarize")
    );
    let ran = run_in(&parent("catch"), task("boom"), None, dir.path()).await;
    assert_eq!(
        ran.result.status,
        RunStatus::Completed,
        "{:?}",
        ran.result.error
    );
    assert!(
        ran.state["results"]["sub"]["error"]
            .as_str()
            .unwrap()
            .contains("cannot summarize")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_that_runs_itself_is_refused_at_load() {
    // 001, workflow: "max_depth | int | none | Maximum nesting depth limit (default
    // engine limit is 10)".
    let dir = tempfile::tempdir().unwrap();
    let text = "version: \"1.0\"\nblocks:\n  again:\n    type: workflow\n    workflow_ref: loop\n    max_depth: 3\nworkflow: {name: loop, entry: again}\n";
    std::fs::write(dir.path().join("loop.yaml"), text).unwrap();
    let e = weft_dialects::load_str(text, "loop.yaml", Some(dir.path()), None).unwrap_err();
    assert!(e.render().contains("nest deeper than 3"), "{}", e.render());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn string_assertions_that_do_not_hold_are_recorded_as_warnings() {
    // 001, common fields: "assertions | List[Dict[str, Any]] | Block-level quality
    // assertions"; the checks are read as `{type, value}` (docs/dialects/souls.md). As
    // in runsight (evaluation/assertions.md), a check is recorded after the block and the
    // run goes on.
    let text = |checks: &str| {
        flow(&format!(
            "blocks:\n  a:\n    type: linear\n    soul_ref: writer\n    assertions:\n{checks}workflow:\n  name: w\n  entry: a\n"
        ))
    };
    let s = answering(|_, _| "Rust is safe. Rust is fast.".into()).await;
    let ok = text(
        "      - {type: contains, value: safe}\n      - {type: not-icontains, value: SLOW}\n      - {type: word-count, value: {min: 3, max: 10}}\n      - {type: contains-any, value: [fast, quick]}\n      - {type: regex, value: \"^Rust\"}\n",
    );
    let ran = run(&ok, json!("Describe Rust"), Some(&s)).await;
    assert_eq!(
        ran.result.status,
        RunStatus::Completed,
        "{:?}",
        ran.result.error
    );
    assert!(assertion_warnings(&ran).is_empty());
    let bad = text("      - {type: contains-all, value: [safe, cheap]}\n");
    let ran = run(&bad, json!("Describe Rust"), Some(&s)).await;
    assert_eq!(ran.output(), &json!("Rust is safe. Rust is fast."));
    let warned = assertion_warnings(&ran);
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(warned[0].contains("contains-all"), "{warned:?}");
}

/// The messages of a run's `assertion_failed` warnings.
pub(crate) fn assertion_warnings(ran: &super::Ran) -> Vec<String> {
    ran.kinds()
        .into_iter()
        .filter_map(|k| match k {
            EventKind::Warning { code, message, .. } if code == "assertion_failed" => {
                Some(message.clone())
            }
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_llm_judge_passes_or_warns_of_the_output() {
    // The issue: "`assertions` (including an LLM judge)". The judge answers a verdict
    // {pass, score, reason} (structured output); a threshold bounds the score.
    let server = FakeServer::start_with(Wire::OpenAi, std::time::Duration::ZERO, |r| {
        if user_message(r).starts_with("Judge") {
            let draft = user_message(r);
            let good = draft.contains("sources: 2");
            Reply::text(if good {
                "{\"pass\": true, \"score\": 0.9, \"reason\": \"cites\"}"
            } else {
                "{\"pass\": true, \"score\": 0.4, \"reason\": \"weak\"}"
            })
        } else if user_message(r).contains("good") {
            Reply::text("Answer (sources: 2)")
        } else {
            Reply::text("Answer")
        }
    })
    .await;
    let text = flow(
        "blocks:\n  a:\n    type: linear\n    soul_ref: writer\n    assertions:\n      - type: llm_judge\n        value: The answer cites its sources.\n        threshold: 0.8\n        config: {judge_soul: reviewer}\nworkflow:\n  name: w\n  entry: a\n",
    );
    let ran = run(&text, json!("a good answer"), Some(&server)).await;
    assert_eq!(
        ran.result.status,
        RunStatus::Completed,
        "{:?}",
        ran.result.error
    );
    assert_eq!(
        ran.output(),
        &json!("Answer (sources: 2)"),
        "the output passes on unchanged"
    );
    let judged = server
        .received()
        .iter()
        .find(|r| user_message(r).starts_with("Judge"))
        .cloned()
        .unwrap();
    assert_eq!(
        system_message(&judged).as_deref(),
        Some("You review text strictly.")
    );
    assert!(
        judged.body["response_format"].to_string().contains("score"),
        "structured output"
    );
    assert!(assertion_warnings(&ran).is_empty());
    let ran = run(&text, json!("a poor answer"), Some(&server)).await;
    assert_eq!(ran.output(), &json!("Answer"));
    let warned = assertion_warnings(&ran);
    assert!(
        warned.len() == 1 && warned[0].contains("judge"),
        "{warned:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_budget_covers_every_block() {
    // The issue: budgets "enforced before each model call and rolled up to parent
    // blocks"; a workflow's own `limits` bound the whole run (docs/dialects/souls.md).
    let server = answering(|_, _| "an answer of some length".into()).await;
    // Each call is estimated at its prompt plus the soul's 100 max_tokens, so the
    // second call would pass the cap once the first one's usage is counted.
    let text = format!(
        "version: \"1.0\"\nconfig: {{provider: openai, model_name: gpt-4o-mini}}\nsouls:\n  capped: {{system_prompt: Review., max_tokens: 100}}\n{}",
        "limits: {token_cap: 110}\nblocks:\n  a:\n    type: linear\n    soul_ref: capped\n  b:\n    type: linear\n    soul_ref: capped\n  c:\n    type: linear\n    soul_ref: capped\nworkflow:\n  name: w\n  entry: a\n  transitions: [{from: a, to: b}, {from: b, to: c}]\n",
    );
    let ran = run(&text, json!("Review."), Some(&server)).await;
    assert_eq!(ran.result.status, RunStatus::Failed);
    let e = ran.result.error.clone().unwrap();
    assert!(e.message.contains("token"), "{}", e.message);
    let calls = server.received().len();
    assert!(
        (1..3).contains(&calls),
        "stopped before the call over the cap: {calls} calls"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_declare_the_fields_of_a_block_s_result() {
    // 001, common fields: "outputs | Dict[str, str] | Output field name to type string
    // mapping". A soul answers with those fields (structured output); a code block's
    // result is checked to have them (docs/dialects/souls.md).
    let server = answering(|_, _| "{\"title\": \"Rust\", \"stars\": 5}".into()).await;
    let text = flow(
        "blocks:\n  rate:\n    type: linear\n    soul_ref: reviewer\n    outputs: {title: str, stars: int}\n  check:\n    type: code\n    outputs: {ok: bool}\n    code: |\n      def main(data):\n          return {\"ok\": data[\"results\"][\"rate\"][\"stars\"] > 3}\nworkflow:\n  name: w\n  entry: rate\n  transitions: [{from: rate, to: check}]\n",
    );
    let ran = run(&text, json!("Rate Rust"), Some(&server)).await;
    assert_eq!(
        ran.result.status,
        RunStatus::Completed,
        "{:?}",
        ran.result.error
    );
    assert_eq!(
        ran.state["results"]["rate"],
        json!({"title": "Rust", "stars": 5})
    );
    let schema = &server.received()[0].body["response_format"];
    assert!(schema.to_string().contains("stars"), "{schema}");
    let bad = text.replace("{ok: bool}", "{ok: str}");
    let ran = run(&bad, json!("Rate Rust"), Some(&server)).await;
    assert_eq!(ran.result.status, RunStatus::Failed);
    assert!(
        ran.result
            .error
            .clone()
            .unwrap()
            .message
            .contains("declared fields"),
        "{:?}",
        ran.result.error
    );
}

/// Two tools: Python code, and a built-in action.
const TOOLS: &str = r#"
tools:
  word_count:
    type: code
    description: Counts the words of a text.
    parameters: {type: object, properties: {text: {type: string}}, required: [text]}
    code: |
      def main(args):
          return {"words": len(args["text"].split())}
  parse:
    type: builtin
    action: json.parse
    description: Parses JSON text.
    parameters: {type: object, properties: {text: {type: string}}, required: [text]}
"#;

/// The tool a request forces, if it forces one.
fn forced(r: &weft_fakes::Received) -> Option<String> {
    r.body["tool_choice"]["function"]["name"]
        .as_str()
        .map(str::to_owned)
}

fn tools_flow(soul: &str) -> String {
    format!(
        "version: \"1.0\"\nconfig: {{provider: openai, model_name: gpt-4o-mini}}\n{TOOLS}souls:\n  counter:\n{soul}blocks:\n  count:\n    type: linear\n    soul_ref: counter\nworkflow:\n  name: w\n  entry: count\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soul_calls_its_tools_and_answers_from_their_results() {
    // The issue: souls carry `tools` and `max_tool_iterations`, and the file has a
    // top-level `tools`; docs/dialects/souls.md gives the tool shapes Weft reads.
    let server =
        FakeServer::start_with(
            Wire::OpenAi,
            std::time::Duration::ZERO,
            |r| match tool_result(r) {
                Some(result) => Reply::text(format!("Counted: {result}")),
                None => Reply::tool_call("word_count", json!({"text": "the cat sat"})),
            },
        )
        .await;
    let text = tools_flow(
        "    system_prompt: You count words.\n    tools: [word_count, parse]\n    max_tool_iterations: 3\n",
    );
    let ran = run(&text, json!("Count the words"), Some(&server)).await;
    assert_eq!(ran.output(), &json!("Counted: {\"words\":3}"));
    let sent = server.received();
    assert_eq!(sent.len(), 2);
    let offered: Vec<&str> = sent[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["word_count", "parse"]);
    assert_eq!(
        sent[0].body["tools"][0]["function"]["description"],
        "Counts the words of a text."
    );
    assert!(
        ran.kinds()
            .iter()
            .any(|k| matches!(k, EventKind::ToolCalled { tool, .. } if tool == "word_count"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_tool_iterations_bounds_the_tool_loop() {
    // A model that would call tools forever gets `max_tool_iterations` rounds, then one
    // more turn offered no tool, so it answers.
    let server = FakeServer::start_with(Wire::OpenAi, std::time::Duration::ZERO, |r| {
        if r.body.get("tools").is_some() {
            Reply::tool_call("parse", json!({"text": "[1, 2]"}))
        } else {
            Reply::text("enough")
        }
    })
    .await;
    let text = tools_flow(
        "    system_prompt: You parse.\n    tools: [parse]\n    max_tool_iterations: 2\n",
    );
    let ran = run(&text, json!("Parse"), Some(&server)).await;
    assert_eq!(ran.output(), &json!("enough"));
    let sent = server.received();
    assert_eq!(sent.len(), 3, "two tool rounds, then the answer");
    assert_eq!(tool_result(&sent[2]).as_deref(), Some("[1,2]"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_tool_calls_are_made_before_the_answer() {
    let server =
        FakeServer::start_with(Wire::OpenAi, std::time::Duration::ZERO, |r| {
            match forced(r) {
                Some(tool) => Reply::tool_call(tool, json!({"text": "one two"})),
                None => Reply::text("done"),
            }
        })
        .await;
    let text = tools_flow(
        "    system_prompt: You count words.\n    tools: [word_count, parse]\n    required_tool_calls: [word_count]\n",
    );
    let ran = run(&text, json!("Count"), Some(&server)).await;
    assert_eq!(ran.output(), &json!("done"));
    let sent = server.received();
    assert_eq!(forced(&sent[0]).as_deref(), Some("word_count"));
    assert_eq!(tool_result(&sent[1]).as_deref(), Some("{\"words\":2}"));
    assert_eq!(forced(&sent[1]), None, "then the model decides");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_tool_sends_the_arguments_and_gives_the_model_the_body() {
    let api = super::support::http_server(r#"{"seen": "$REQUEST"}"#).await;
    let server =
        FakeServer::start_with(
            Wire::OpenAi,
            std::time::Duration::ZERO,
            |r| match tool_result(r) {
                Some(result) => Reply::text(result),
                None => Reply::tool_call("weather", json!({"city": "Oslo"})),
            },
        )
        .await;
    let text = format!(
        "version: \"1.0\"\nconfig: {{provider: openai, model_name: gpt-4o-mini}}\ntools:\n  weather:\n    type: http\n    description: The weather in a city.\n    url: \"{api}/weather/{{{{ args.city }}}}\"\n    query: {{units: metric}}\n    parameters: {{type: object, properties: {{city: {{type: string}}}}}}\nsouls:\n  w:\n    system_prompt: Weather.\n    tools: [weather]\nblocks:\n  a:\n    type: linear\n    soul_ref: w\nworkflow:\n  name: w\n  entry: a\n"
    );
    let ran = run(&text, json!("Weather in Oslo?"), Some(&server)).await;
    assert_eq!(
        ran.output(),
        &json!("{\"seen\":\"GET /weather/Oslo?units=metric HTTP/1.1\"}")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_soul_fails_its_block_naming_the_phase() {
    // 001, common fields: "stall_thresholds | Dict[str, int] | Per-phase stall detection
    // thresholds". The phases are Weft's (docs/dialects/souls.md): here the answer's
    // words come 1.5 s apart and the block allows 1 s of silence.
    let server = FakeServer::start(
        Wire::OpenAi,
        vec![Reply::Slow {
            text: "slow words".into(),
            gap: std::time::Duration::from_millis(1500),
        }],
    )
    .await;
    let text = flow(
        "blocks:\n  a:\n    type: linear\n    soul_ref: writer\n    stall_thresholds: {token_gap: 1}\nworkflow:\n  name: w\n  entry: a\n",
    );
    let ran = run(&text, json!("Write"), Some(&server)).await;
    assert_eq!(ran.result.status, RunStatus::Failed);
    let e = ran.result.error.as_ref().unwrap();
    assert!(
        e.message.contains("stall threshold `token_gap`"),
        "{}",
        e.message
    );
    assert!(e.path.ends_with("/a"), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_retryable_errors_are_not_retried() {
    // 001, common fields: "retry_config | RetryConfig | Retry on failure"; the kinds
    // Weft does not retry are named with its error kinds (docs/dialects/souls.md).
    let throttled =
        || async { FakeServer::start(Wire::OpenAi, vec![Reply::error(429, "slow down")]).await };
    let retry = |extra: &str| {
        flow(&format!(
            "blocks:\n  a:\n    type: linear\n    soul_ref: writer\n    retry_config: {{max_attempts: 3, backoff_base_seconds: 0.1{extra}}}\nworkflow:\n  name: w\n  entry: a\n"
        ))
    };
    let server = throttled().await;
    let ran = run(&retry(""), json!("Write"), Some(&server)).await;
    assert_eq!(ran.result.status, RunStatus::Failed);
    // The provider retries a throttled call itself (3 tries, docs/models.md); the block
    // runs 3 times on top of that.
    assert_eq!(server.received().len(), 9, "a rate limit is retried");
    let server = throttled().await;
    let ran = run(
        &retry(", non_retryable_errors: [rate_limit]"),
        json!("Write"),
        Some(&server),
    )
    .await;
    assert_eq!(ran.result.status, RunStatus::Failed);
    assert_eq!(
        server.received().len(),
        3,
        "the block is not run again for a non-retryable rate limit"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warning_budget_reports_and_goes_on() {
    // BlockLimitsDef's `on_exceed: warn` (docs/dialects/souls.md): a call that would
    // exceed the cap is made, and a `budget_warning` event says so; a workflow's
    // `warn_at_pct` warns once usage reaches that share of a cap.
    let server = answering(|_, _| "a long answer".into()).await;
    let text = flow(
        "limits: {token_cap: 100000, warn_at_pct: 0.00001}\nblocks:\n  a:\n    type: linear\n    soul_ref: writer\n    limits: {token_cap: 5, on_exceed: warn}\nworkflow:\n  name: w\n  entry: a\n",
    );
    let ran = run(&text, json!("Write something long"), Some(&server)).await;
    assert_eq!(ran.output(), &json!("a long answer"));
    let warnings: Vec<(String, bool)> = ran
        .kinds()
        .into_iter()
        .filter_map(|k| match k {
            EventKind::BudgetWarning {
                owner,
                exceeded,
                budget,
                ..
            } => {
                assert_eq!(budget, "tokens");
                Some((owner.clone(), *exceeded))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        warnings,
        vec![("a".to_owned(), true), (String::new(), false)],
        "the block's cap is exceeded (and the call made), then the run's threshold is reached"
    );
}

fn code_block(returns: &str) -> String {
    format!("{{type: code, code: \"def main(data):\\n    return {returns}\\n\"}}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn depends_alone_chains_blocks_as_transitions() {
    // runsight's parser expands `depends: X` into the transition `X -> block`, so a
    // workflow may chain its blocks with `depends` and no `transitions`.
    let text = format!(
        "version: \"1.0\"\nblocks:\n  a: {}\n  b:\n    depends: a\n    type: code\n    code: \"def main(data):\\n    return data['results']['a'] + 1\\n\"\n  c:\n    depends: [b]\n    type: code\n    code: \"def main(data):\\n    return data['results']['b'] * 10\\n\"\nworkflow:\n  name: chain\n  entry: a\n",
        code_block("1")
    );
    let ran = run(&text, json!("go"), None).await;
    assert_eq!(ran.output(), &json!(20), "{:?}", ran.result.error);
    assert_eq!(
        ran.state["results"],
        json!({"a": 1, "b": 2, "c": 20}),
        "every block ran"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn depends_on_a_block_that_goes_elsewhere_is_refused() {
    let text = format!(
        "version: \"1.0\"\nblocks:\n  a: {a}\n  b: {a}\n  c:\n    depends: a\n    type: code\n    code: \"def main(data):\\n    return 3\\n\"\nworkflow:\n  name: w\n  entry: a\n  transitions: [{{from: a, to: b}}]\n",
        a = code_block("1")
    );
    let Err(e) = weft_dialects::load_str(&text, "w.yaml", None, Some("souls")) else {
        panic!("the conflict is an error");
    };
    let d = &e.diagnostics[0];
    assert_eq!(d.pointer, "/blocks/c/depends");
    assert!(
        d.message
            .contains("`c` depends on `a`, which already goes to `b`"),
        "{}",
        d.message
    );
    // Repeating a transition with `depends` adds nothing and is fine.
    let same = text.replace("to: b", "to: c");
    let ran = run(&same, json!("go"), None).await;
    assert_eq!(ran.output(), &json!(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exit_that_no_transition_handles_fails_the_run() {
    // runsight: an exit handle not in a block's conditional transitions, with no
    // `default`, is an error ("exit_handle ... not found in condition_map"); a run
    // never reports `completed` having skipped the rest of its blocks.
    let text = format!(
        "version: \"1.0\"\nblocks:\n  classify:\n    type: code\n    exits: [{{id: big, label: Big}}, {{id: small, label: Small}}]\n    code: \"def main(data):\\n    return {{'exit_handle': 'small'}}\\n\"\n  big: {}\nworkflow:\n  name: w\n  entry: classify\n  conditional_transitions:\n    - {{from: classify, big: big}}\n",
        code_block("'big'")
    );
    let ran = run(&text, json!("go"), None).await;
    assert_eq!(ran.result.status, RunStatus::Failed);
    let e = ran.result.error.unwrap();
    assert_eq!(e.kind.as_str(), "unrouted");
    assert!(
        e.message.contains(
            "`classify` took exit `small`, and none of its transitions matches (on `big` to `big`)"
        ),
        "{}",
        e.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runsight_project_s_soul_library_is_found_from_its_workflows() {
    // runsight keeps a project's souls in custom/souls/<id>.yaml and its workflows in
    // custom/workflows/.
    let server = answering(|_, _| "reviewed".into()).await;
    let project = tempfile::tempdir().unwrap();
    let souls = project.path().join("custom/souls");
    let workflows = project.path().join("custom/workflows");
    std::fs::create_dir_all(&souls).unwrap();
    std::fs::create_dir_all(&workflows).unwrap();
    std::fs::write(
        souls.join("reviewer.yaml"),
        "id: reviewer\nkind: soul\nname: Reviewer\nrole: Reviewer\nsystem_prompt: You review.\nprovider: openai\nmodel_name: gpt-4o-mini\n",
    )
    .unwrap();
    let text = "version: \"1.0\"\nblocks:\n  review:\n    type: linear\n    soul_ref: reviewer\nworkflow:\n  name: w\n  entry: review\n";
    let ran = run_in(text, json!("Review this"), Some(&server), &workflows).await;
    assert_eq!(ran.output(), &json!("reviewed"), "{:?}", ran.result.error);
    assert_eq!(server.received()[0].body["model"], "gpt-4o-mini");

    // A soul in neither place: the error says where it looked.
    let missing = text.replace("soul_ref: reviewer", "soul_ref: editor");
    let Err(e) = weft_dialects::load_str(&missing, "w.yaml", Some(&workflows), Some("souls"))
    else {
        panic!("a missing soul is an error");
    };
    let m = &e.diagnostics[0].message;
    assert!(
        m.contains("no soul `editor`") && m.contains("custom/souls/editor.yaml"),
        "{m}"
    );
}
