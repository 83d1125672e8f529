//! TEA's reasoning patterns beyond `reason.cot` (issue 20): `reason.self_correct`
//! (generate, then critique and improve) and `reason.react` (thought, action,
//! observation), against a fake OpenAI server on 127.0.0.1.

use super::run;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reason_self_correct_improves_for_the_rounds_asked_and_reads_answers_leniently() {
    use weft_fakes::{FakeServer, Reply, Wire};
    let server = FakeServer::start(
        Wire::OpenAi,
        vec![
            Reply::text(
                r#"{"output": "draft", "confidence": 0.4, "potential_issues": ["too short"]}"#,
            ),
            Reply::text(
                "Here you are:\n```json\n{\"issues\": [\"short\"], \"suggestions\": [\"longer\"], \"improved_output\": \"better\", \"improvement_score\": 0.8}\n```",
            ),
            // Not JSON: the round changes nothing and the trace says so.
            Reply::text("It looks fine to me."),
        ],
    )
    .await;
    let yaml = format!(
        r#"
variables:
  rounds: 2
nodes:
  - name: write
    uses: reason.self_correct
    with:
      task: "Write about {{{{ state.topic }}}}"
      model: gpt-4o-mini
      api_base: "{base}"
      improvement_rounds: "{{{{ variables.rounds }}}}"
      critic_prompt: "Review this closely: {{{{ output }}}}"
    output: written
"#,
        base = server.base_url()
    );
    let ran = run(&yaml, json!({"topic": "tea"})).await;
    let w = &ran.output()["written"];
    assert_eq!(w["output"], "better");
    assert_eq!(w["reasoning_answer"], "better");
    assert_eq!(w["rounds_completed"], 2);
    assert_eq!(w["model"], "gpt-4o-mini");
    let history = w["improvement_history"].as_array().unwrap();
    assert_eq!(history.len(), 2, "{history:?}");
    assert_eq!(history[0]["type"], "initial");
    assert_eq!(history[0]["confidence"], 0.4);
    assert_eq!(history[1]["issues_found"], json!(["short"]));
    assert_eq!(history[1]["improvement_score"], 0.8);
    let steps = super::trace_steps(&w["reasoning_trace"]);
    assert_eq!(
        steps,
        [
            "self_correct_start",
            "initial_generation",
            "improvement_round_1",
            "critique_round_2_parse_error",
            "self_correct_complete"
        ]
    );
    let sent = server.received();
    assert_eq!(sent.len(), 3);
    let first = sent[0].body["messages"].to_string();
    assert!(first.contains("Task: Write about tea"), "{first}");
    let critique = sent[1].body["messages"].to_string();
    assert!(
        critique.contains("Review this closely: draft")
            && critique.contains("Current output:\\ndraft"),
        "the critic sees the current output: {critique}"
    );
    let second = sent[2].body["messages"].to_string();
    assert!(second.contains("Current output:\\nbetter"), "{second}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reason_self_correct_keeps_a_first_answer_that_is_not_json_and_refuses_a_bad_count() {
    use weft_fakes::{FakeServer, Reply, Wire};
    let server = FakeServer::start(Wire::OpenAi, vec![Reply::text("Just prose.")]).await;
    let yaml = format!(
        r#"
nodes:
  - name: write
    uses: reason.self_correct
    with: {{task: "t", model: gpt-4o-mini, api_base: "{base}", improvement_rounds: 0}}
"#,
        base = server.base_url()
    );
    let ran = run(&yaml, json!({})).await;
    let out = ran.output();
    assert_eq!(out["output"], "Just prose.");
    assert_eq!(out["improvement_history"][0]["confidence"], 0.5);
    assert_eq!(out["rounds_completed"], 0);
    let bad = yaml.replace(
        "improvement_rounds: 0",
        "improvement_rounds: \"{{ state.n }}\"",
    );
    let err = super::support::load_error(&bad, "tea");
    assert!(
        err.contains("improvement_rounds") && err.contains("whole number"),
        "{err}"
    );
}

const REACT: &str = r#"
nodes:
  - name: research
    uses: reason.react
    with:
      goal: "Find the capital named in {{ state.file }}"
      model: gpt-4o-mini
      api_base: "BASE"
      tools: [file.read, web.search]
      max_steps: MAX
    output: found
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reason_react_acts_observes_and_answers() {
    use weft_fakes::{FakeServer, Reply, Wire};
    let server = FakeServer::start(
        Wire::OpenAi,
        vec![
            Reply::text("Let me think about it."),
            Reply::text(
                r#"{"thought": "read the notes", "action": "file.read", "action_input": {"path": "notes.txt"}}"#,
            ),
            Reply::text(
                r#"{"thought": "search too", "action": "web.search", "action_input": {"query": "capital"}}"#,
            ),
            Reply::text(r#"{"thought": "dance", "action": "dance", "action_input": {}}"#),
            Reply::text(
                r#"Done: {"thought": "the notes say so", "action": "final_answer", "action_input": {"answer": "Paris"}}"#,
            ),
        ],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "The capital is Paris.").unwrap();
    let yaml = REACT
        .replace("BASE", &server.base_url())
        .replace("MAX", "\"{{ variables.steps }}\"")
        + "variables: {steps: 6}\n";
    let ran = super::run_in(&yaml, json!({"file": "notes.txt"}), dir.path()).await;
    let f = &ran.output()["found"];
    assert_eq!(f["final_answer"], "Paris");
    assert_eq!(f["reasoning_answer"], "Paris");
    assert_eq!(f["total_steps"], 5);
    assert_eq!(f["model"], "gpt-4o-mini");
    let steps = f["steps"].as_array().unwrap();
    let actions: Vec<&str> = steps
        .iter()
        .map(|s| s["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        ["file.read", "web.search", "dance", "final_answer"]
    );
    assert_eq!(steps[0]["step"], 2);
    assert!(
        steps[0]["observation"]
            .as_str()
            .unwrap()
            .contains("The capital is Paris."),
        "{}",
        steps[0]
    );
    assert!(
        steps[1]["observation"]
            .as_str()
            .unwrap()
            .starts_with("Error executing web.search: `web.search` is an action of The Edge Agent"),
        "{}",
        steps[1]
    );
    assert_eq!(
        steps[2]["observation"],
        "Unknown action: dance. Available: [\"file.read\",\"web.search\"]"
    );
    assert_eq!(steps[3]["observation"], "Goal achieved.");
    let trace = super::trace_steps(&f["reasoning_trace"]);
    assert_eq!(
        trace,
        [
            "react_start",
            "step_1_parse_error",
            "step_2",
            "step_3",
            "step_4",
            "step_5",
            "react_complete"
        ]
    );
    let sent = server.received();
    assert_eq!(sent.len(), 5);
    let first = sent[0].body["messages"].to_string();
    assert!(
        first.contains("Goal: Find the capital named in notes.txt"),
        "{first}"
    );
    assert!(
        first.contains("- web.search"),
        "the tools are listed: {first}"
    );
    let last = sent[4].body["messages"].to_string();
    assert!(
        last.contains("Your response was not valid JSON")
            && last.contains("The capital is Paris.")
            && last.contains("Unknown action: dance"),
        "the scratchpad holds every observation: {last}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reason_react_out_of_steps_warns_as_tea_does() {
    use weft_fakes::{FakeServer, Reply, Wire};
    let server = FakeServer::start(
        Wire::OpenAi,
        vec![Reply::text("no json"), Reply::text("still none")],
    )
    .await;
    let yaml = REACT
        .replace("BASE", &server.base_url())
        .replace("MAX", "2");
    let ran = run(&yaml, json!({"file": "x"})).await;
    let f = &ran.output()["found"];
    assert_eq!(f["final_answer"], serde_json::Value::Null);
    assert_eq!(f["steps"], json!([]));
    assert_eq!(f["total_steps"], 2);
    assert_eq!(f["warning"], "Max steps (2) reached without achieving goal");
    // A tool Weft does not have is said when the file loads.
    let loaded = weft_dialects::load_str(&yaml, "flow.yaml", None, Some("tea")).unwrap();
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.message.contains("tool `web.search`")),
        "{:?}",
        loaded.warnings
    );
}

#[test]
fn a_pattern_without_its_text_option_is_refused_with_an_example() {
    let yaml = "nodes:\n  - name: r\n    uses: reason.react\n    with: {tools: [http.get]}\n";
    let err = super::support::load_error(yaml, "tea");
    assert!(
        err.contains("reason.react needs `goal`, a string (a template)")
            && err.contains("goal: \"{{ state.question }}\""),
        "{err}"
    );
}
