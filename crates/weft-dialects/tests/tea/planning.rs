//! TEA's planner (issue 20): `plan.decompose`, `plan.execute` (waves of ready subtasks,
//! failure strategies), `plan.replan` and `plan.status`, against a fake OpenAI server
//! on 127.0.0.1 and real files for the subtasks' actions.

use super::{run, run_in};
use serde_json::{Value, json};
use weft_core::ports::RunStatus;

fn flow(base: &str, execute: &str) -> String {
    format!(
        r#"
nodes:
  - name: plan_it
    action: plan.decompose
    with:
      goal: "Write about {{{{ state.topic }}}}"
      planner:
        model: gpt-4o-mini
        api_base: "{base}"
        prompt_template: "Plan this goal: {{{{ goal }}}}"
    output: plan_result
  - name: keep
    run: |
      return {{"plan": state["plan_result"].get("plan")}}
  - name: before
    action: plan.status
    with: {{include_completed: false, include_details: true}}
    output: before
  - name: execute
    action: plan.execute
    with:
{execute}
    output: executed
  - name: after
    action: plan.status
    with:
      plan: "{{{{ state.executed.plan }}}}"
    output: after
"#
    )
}

fn plan_reply(subtasks: Value) -> weft_fakes::Reply {
    weft_fakes::Reply::text(format!(
        "Here is the plan:\n```json\n{}\n```",
        json!({"subtasks": subtasks})
    ))
}

fn statuses(plan: &Value) -> Vec<(String, String)> {
    plan["subtasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap().to_owned(),
                s["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_runs_in_waves_of_ready_subtasks_and_each_sees_its_dependencies() {
    use weft_fakes::{FakeServer, Reply, Wire};
    let server = FakeServer::start(
        Wire::OpenAi,
        vec![
            plan_reply(json!([
                {"id": "draft", "description": "Write the draft", "dependencies": ["research", "outline"]},
                {"id": "research", "description": "Find sources", "dependencies": []},
                {"id": "outline", "description": "Outline it", "dependencies": []},
            ])),
            Reply::text("finished"),
            Reply::text("finished"),
            Reply::text("the draft"),
        ],
    )
    .await;
    let execute = format!(
        r#"      parallel: true
      max_concurrent: 2
      subtask_executor:
        action: llm.call
        with:
          model: gpt-4o-mini
          api_base: "{}""#,
        server.base_url()
    );
    let ran = run(&flow(&server.base_url(), &execute), json!({"topic": "tea"})).await;
    let out = ran.output();
    let planned = &out["plan_result"];
    assert_eq!(planned["success"], true, "{planned}");
    assert_eq!(planned["subtask_count"], 3);
    assert!(planned["plan_id"].as_str().unwrap().starts_with("plan_"));
    assert_eq!(out["before"]["status"]["pending"], 3);
    assert_eq!(out["before"]["progress"], 0.0);
    let executed = &out["executed"];
    assert_eq!(executed["success"], true, "{executed}");
    assert_eq!(
        executed["subtask_results"],
        json!({"research": "finished", "outline": "finished", "draft": "the draft"})
    );
    assert_eq!(executed["plan_status"]["completed"], 3);
    assert_eq!(out["after"]["progress"], 1.0);
    let sent = server.received();
    assert_eq!(sent.len(), 4);
    let asked = sent[0].body["messages"].to_string();
    assert!(asked.contains("Plan this goal: Write about tea"), "{asked}");
    // The draft ran last, after both of its dependencies, and saw their results.
    let draft = sent[3].body["messages"].to_string();
    assert!(
        draft.contains("Subtask: Write the draft")
            && draft.contains("Result from 'research': finished")
            && draft.contains("Result from 'outline': finished"),
        "{draft}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subtask_s_own_prompt_reads_the_subtask_and_the_results_so_far_from_the_state() {
    // TEA's _execute_subtask: exec_state["current_subtask"] and
    // exec_state["subtask_results"] are set on a copy of the state for the action; its
    // planning examples read `state.subtask_results` in the executor's messages.
    use weft_fakes::{FakeServer, Reply, Wire};
    let server = FakeServer::start(
        Wire::OpenAi,
        vec![
            plan_reply(json!([
                {"id": "a", "description": "First", "dependencies": []},
                {"id": "b", "description": "Second", "dependencies": ["a"]},
            ])),
            Reply::text("one"),
            Reply::text("two"),
        ],
    )
    .await;
    let execute = format!(
        r#"      subtask_executor:
        action: llm.call
        with:
          model: gpt-4o-mini
          api_base: "{}"
          messages:
            - role: user
              content: "Do {{{{ state.current_subtask.description }}}}; done: {{{{ state.subtask_results | length }}}}{{% if state.subtask_results %}}, a said {{{{ state.subtask_results.a }}}}{{% endif %}}""#,
        server.base_url()
    );
    let ran = run(&flow(&server.base_url(), &execute), json!({"topic": "tea"})).await;
    assert_eq!(
        ran.output()["executed"]["success"],
        true,
        "{}",
        ran.output()
    );
    assert!(
        ran.output().get("subtask_results").is_none(),
        "the copy's keys stay in the branch"
    );
    let sent = server.received();
    let asked = super::first_messages(&sent[1..]);
    assert_eq!(
        asked,
        ["Do First; done: 0", "Do Second; done: 1, a said one"]
    );
}

/// A plan of `a`, then `bad` (after `a`): `file.read` of `ID.txt` runs each subtask,
/// and there is no `bad.txt`.
fn file_plan(strategy: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "A done").unwrap();
    std::fs::write(dir.path().join("b.txt"), "B done").unwrap();
    let execute = format!(
        r#"      subtask_executor:
        action: file.read
        with: {{path: "{{{{ subtask.id }}}}.txt"}}
      on_subtask_failure: {strategy}
      max_replans: 1
      max_retries: 1
      retry_delay: 0.01
      model: gpt-4o-mini"#
    );
    (dir, execute)
}

fn two_step_plan() -> weft_fakes::Reply {
    plan_reply(json!([
        {"id": "a", "description": "First", "dependencies": []},
        {"id": "bad", "description": "Second", "dependencies": ["a"]},
    ]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_subtask_aborts_skips_or_retries_as_the_strategy_says() {
    use weft_fakes::{FakeServer, Wire};
    for (strategy, success, last) in [
        ("abort", false, "failed"),
        ("skip", true, "skipped"),
        ("retry", false, "failed"),
    ] {
        let server = FakeServer::start(Wire::OpenAi, vec![two_step_plan()]).await;
        let (dir, execute) = file_plan(strategy);
        let ran = run_in(
            &flow(&server.base_url(), &execute),
            json!({"topic": "x"}),
            dir.path(),
        )
        .await;
        assert_eq!(
            ran.result.status,
            RunStatus::Completed,
            "{strategy}: {:?}",
            ran.result.error
        );
        let executed = &ran.output()["executed"];
        assert_eq!(executed["success"], success, "{strategy}: {executed}");
        assert_eq!(
            statuses(&executed["plan"]),
            [
                ("a".to_owned(), "completed".to_owned()),
                ("bad".to_owned(), last.to_owned())
            ],
            "{strategy}"
        );
        assert_eq!(
            executed["subtask_results"]["a"],
            json!("A done"),
            "{strategy}: {executed}"
        );
        let steps = super::trace_steps(&executed["planning_trace"]);
        match strategy {
            "abort" => {
                assert!(
                    executed["error"].as_str().unwrap().contains("bad.txt"),
                    "{executed}"
                );
                assert!(steps.contains(&"subtask_bad_failed_abort"), "{steps:?}");
            }
            "retry" => {
                assert!(
                    executed["error"]
                        .as_str()
                        .unwrap()
                        .starts_with("Max retries (1) exceeded: "),
                    "{executed}"
                );
                assert!(
                    steps.contains(&"subtask_bad_retry_1")
                        && steps.contains(&"subtask_bad_max_retries"),
                    "{steps:?}"
                );
            }
            _ => assert!(steps.contains(&"subtask_bad_skipped"), "{steps:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replan_keeps_the_completed_work_and_runs_the_new_subtasks() {
    use weft_fakes::{FakeServer, Reply, Wire};
    let server = FakeServer::start(
        Wire::OpenAi,
        vec![
            two_step_plan(),
            Reply::text(
                r#"{"subtasks": [{"id": "b", "description": "Another way", "dependencies": ["a"]}], "adjustment_rationale": "bad cannot be read"}"#,
            ),
        ],
    )
    .await;
    let (dir, execute) = file_plan("replan");
    // The replan goes to the fake server too.
    let execute = execute.replace(
        "model: gpt-4o-mini",
        &format!(
            "model: gpt-4o-mini\n      api_base: \"{}\"",
            server.base_url()
        ),
    );
    let ran = run_in(
        &flow(&server.base_url(), &execute),
        json!({"topic": "x"}),
        dir.path(),
    )
    .await;
    let executed = &ran.output()["executed"];
    assert_eq!(executed["success"], true, "{executed}");
    assert_eq!(executed["replan_count"], 1);
    assert_eq!(
        statuses(&executed["plan"]),
        [
            ("a".to_owned(), "completed".to_owned()),
            ("b".to_owned(), "completed".to_owned())
        ]
    );
    assert_eq!(
        executed["subtask_results"],
        json!({"a": "A done", "b": "B done"})
    );
    assert_eq!(executed["plan"]["metadata"]["replan_count"], 1);
    let sent = server.received();
    assert_eq!(sent.len(), 2, "one plan, one replan");
    let asked = sent[1].body["messages"].to_string();
    assert!(
        asked.contains("Failed subtask: bad") && asked.contains("- a: First (result: A done)"),
        "{asked}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_no_plan_is_tea_s_error_result_and_the_run_goes_on() {
    use weft_fakes::{FakeServer, Reply, Wire};
    for (reply, error) in [
        (
            Reply::text("PASS\nA canned answer."),
            "Failed to parse plan: Could not parse JSON from response: PASS",
        ),
        (
            plan_reply(json!([
                {"id": "a", "description": "x", "dependencies": ["b"]},
                {"id": "b", "description": "y", "dependencies": ["a"]},
            ])),
            "Invalid plan structure: Cycle detected: a -> b -> a",
        ),
        (plan_reply(json!([])), "No subtasks returned from LLM"),
    ] {
        let server = FakeServer::start(Wire::OpenAi, vec![reply]).await;
        let ran = run(
            &flow(&server.base_url(), "      parallel: false"),
            json!({"topic": "x"}),
        )
        .await;
        let out = ran.output();
        assert_eq!(out["plan_result"]["success"], false);
        assert!(
            out["plan_result"]["error"]
                .as_str()
                .unwrap()
                .starts_with(error),
            "{}",
            out["plan_result"]
        );
        assert_eq!(out["before"]["error"], "No plan found");
        assert_eq!(
            out["executed"]["error"],
            "No plan provided. Use plan.decompose first or provide plan parameter."
        );
    }
}

#[test]
fn an_unknown_strategy_is_refused_when_the_file_loads() {
    let yaml = flow("http://127.0.0.1:9", "      on_subtask_failure: retyr");
    let err = super::support::load_error(&yaml, "tea");
    assert!(
        err.contains("unknown failure strategy `retyr`") && err.contains("retry"),
        "{err}"
    );
}
