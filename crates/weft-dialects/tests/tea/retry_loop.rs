//! TEA's `retry.loop` around `validate.extraction` (issue 20): validate, correct with
//! the file's correction node, validate again, until valid or out of retries.

use super::run;
use serde_json::json;

/// TEA's `test-retry-learning`, shortened: a bad extraction, a correction node that
/// fixes one thing per attempt, and routing on the verdict.
const RETRY: &str = r#"
extraction_schema:
  entities:
    required_fields: [name, type]
  relationships:
    types: [knows, works_at]
    required_fields: [type, subject, object]
    type_requirements:
      works_at: [since]
nodes:
  - name: extract
    run: |
      return {"entities": [{"name": "Alice"}, {"name": "Bob"}],
              "relationships": [{"type": "friends", "subject": "Alice", "object": "Bob"}]}
  - name: check
    uses: retry.loop
    with:
      validate: validate.extraction
      validate_args: {}
      correct: fix
      max_retries: MAX
  - name: fix
    run: |
      errors = state["_retry_errors"]
      seen = state.get("seen", []) + [[e["type"] for e in errors]]
      if state["_retry_count"] == 0:
          return {"entities": [{"name": "Alice", "type": "Person"}, {"name": "Bob", "type": "Person"}], "seen": seen}
      return {"relationships": [{"type": "knows", "subject": "Alice", "object": "Bob"}], "seen": seen}
  - name: done
    run: |
      return {"outcome": "valid" if state["valid"] else "invalid"}
edges:
  - {from: __start__, to: extract}
  - {from: extract, to: check}
  - {from: check, to: done}
  - {from: done, to: __end__}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_loop_corrects_until_the_extraction_validates() {
    let yaml = RETRY.replace("MAX", "2\n      retry_delay: 0.01");
    let ran = run(&yaml, json!({})).await;
    let out = ran.output();
    assert_eq!(out["outcome"], "valid");
    assert_eq!(out["_retry_count"], 2);
    assert_eq!(out["_retry_errors"], json!([]));
    assert_eq!(out["_retry_exhausted"], false);
    assert_eq!(out["_retry_result"]["valid"], true);
    assert!(
        out["validated_at"]
            .as_str()
            .is_some_and(|t| t.starts_with("20")),
        "{out}"
    );
    // The correction saw each validation's errors, in TEA's records.
    assert_eq!(
        out["seen"],
        json!([
            [
                "missing_required_field",
                "missing_required_field",
                "invalid_relationship_type"
            ],
            ["invalid_relationship_type"]
        ])
    );
    assert_eq!(out["relationships"][0]["type"], "knows");
    // Each correction is followed by retry_delay's wait, a step of its own.
    let waits = ran
        .events
        .iter()
        .filter(|e| {
            matches!(&e.kind, weft_core::event::EventKind::StepCompleted { kind, .. } if kind == "action")
        })
        .count();
    assert_eq!(waits, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_loop_out_of_retries_reports_the_last_errors_with_tea_s_messages() {
    let ran = run(&RETRY.replace("MAX", "1"), json!({})).await;
    let out = ran.output();
    assert_eq!(out["outcome"], "invalid");
    assert_eq!(out["valid"], false);
    assert_eq!(out["_retry_exhausted"], true);
    assert_eq!(out["_retry_count"], 1);
    let errors = out["_retry_errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0]["path"], "relationships[0].type");
    assert_eq!(
        errors[0]["message"],
        "Invalid relationship type 'friends', expected one of ['knows', 'works_at']"
    );
    assert_eq!(out["errors"], out["_retry_errors"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_correction_ends_the_loop_with_tea_s_record() {
    let yaml = RETRY.replace("MAX", "3").replace(
        "      errors = state[\"_retry_errors\"]\n",
        "      raise ValueError(\"no fix\")\n",
    );
    let ran = run(&yaml, json!({})).await;
    let out = ran.output();
    assert_eq!(out["valid"], false);
    assert_eq!(out["_retry_exhausted"], false);
    assert_eq!(out["_retry_count"], 0);
    let last = out["_retry_errors"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["type"], "correction_error");
    assert!(
        last["message"]
            .as_str()
            .unwrap()
            .starts_with("Correction node 'fix' failed: ")
            && last["message"].as_str().unwrap().contains("no fix"),
        "{last}"
    );
    assert!(
        out["_retry_result"]["correction_error"]
            .as_str()
            .unwrap()
            .contains("no fix")
    );
}

#[test]
fn a_correction_node_the_file_does_not_have_is_refused_with_its_nodes() {
    let err = super::support::load_error(
        &RETRY
            .replace("MAX", "2")
            .replace("correct: fix", "correct: fixx"),
        "tea",
    );
    assert!(
        err.contains("`fixx` is not a node of this file") && err.contains("fix"),
        "{err}"
    );
}

#[test]
fn a_correction_node_s_warnings_are_said_once() {
    // The node compiles twice (in the graph and in the loop); its warning is one.
    let yaml = RETRY.replace("MAX", "2").replace(
        "  - name: fix\n    run: |",
        "  - name: fix\n    output: ignored\n    run: |",
    );
    let loaded = weft_dialects::load_str(&yaml, "flow.yaml", None, Some("tea")).unwrap();
    let about_output: Vec<_> = loaded
        .warnings
        .iter()
        .filter(|w| w.pointer.ends_with("/output"))
        .collect();
    assert_eq!(about_output.len(), 1, "{:?}", loaded.warnings);
}
