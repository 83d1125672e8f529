//! TEA's `validate.extraction` (issue 20): its Prolog constraints and its semantic
//! probes (a fake OpenAI server on 127.0.0.1 answers the questions); the structural
//! layer is in `retry_loop.rs`.

use super::run;
use serde_json::{Value, json};

const FAMILY: &str = r#"
extraction_schema:
  relationships:
    types: [mother, sibling]
    required_fields: [type, subject, object]
validation_constraints:
  language: prolog
  rules: |
    % A person has at most one mother.
    validation_error(multiple_mothers, Child) :-
        relationship('mother', M1, Child),
        relationship('mother', M2, Child),
        M1 \= M2.
    validation_error(asymmetric_sibling, Pair) :-
        relationship('sibling', A, B),
        \+ relationship('sibling', B, A),
        Pair = A-B.
    validation_error(dated, X) :- relationship(_, X, _, _, _).
nodes:
  - name: check
    uses: validate.extraction
    with:
      entities: "{{ state.entities }}"
      relationships: "{{ state.relationships }}"
    output: verdict
"#;

fn rel(kind: &str, subject: &str, object: &str) -> Value {
    json!({"type": kind, "subject": subject, "object": object})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prolog_constraints_over_the_extraction_s_facts_give_tea_s_records() {
    let ran = run(
        FAMILY,
        json!({"entities": [], "relationships": [
            rel("mother", "Mary", "Ann"), rel("mother", "Jane", "Ann"),
            rel("sibling", "Bob's", "Carl"),
        ]}),
    )
    .await;
    let v = &ran.output()["verdict"];
    assert_eq!(v["valid"], false, "{v}");
    let errors = v["errors"].as_array().unwrap();
    let messages: Vec<&str> = errors
        .iter()
        .map(|e| e["message"].as_str().unwrap())
        .collect();
    assert!(
        messages.contains(&"Constraint violation: multiple_mothers(Ann)")
            && messages.contains(&"Constraint violation: asymmetric_sibling(Bob's-Carl)"),
        "{messages:?}"
    );
    assert!(
        errors
            .iter()
            .all(|e| e["type"] == "prolog_constraint_violation")
    );
    assert_eq!(errors[0]["error_type"], "multiple_mothers");

    // A consistent extraction passes, a rule naming an arity with no facts included.
    let ran = run(
        FAMILY,
        json!({"entities": [], "relationships": [rel("mother", "Mary", "Ann")]}),
    )
    .await;
    assert_eq!(ran.output()["verdict"]["valid"], true, "{}", ran.output());
    assert_eq!(ran.output()["verdict"]["errors"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_that_do_not_load_are_tea_s_prolog_error() {
    let yaml = FAMILY.replace("        M1 \\= M2.", "        M1 \\= .");
    let ran = run(
        &yaml,
        json!({"entities": [], "relationships": [rel("mother", "Mary", "Ann")]}),
    )
    .await;
    let v = &ran.output()["verdict"];
    assert_eq!(v["valid"], false);
    assert_eq!(v["errors"][0]["type"], "prolog_error", "{v}");
}

fn probing(base: &str, first: &str) -> String {
    format!(
        r#"
settings:
  llm: {{model: gpt-4o-mini, api_base: "{base}"}}
semantic_probes:
  - for_each: relationship
    where: "type == 'mother'"
    probe: "Is {{{{ subject }}}} the mother of {{{{ object }}}} in: {{{{ state.input_text }}}}"
    on_fail: {first}
  - for_each: entity
    probe: "Is {{{{ name }}}} a person in: {{{{ text }}}}"
    on_fail: warn
nodes:
  - name: check
    uses: validate.extraction
    with:
      source_text: "{{{{ state.input_text }}}}"
    output: verdict
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_probe_asks_about_the_items_it_selects_and_a_no_is_an_error() {
    use weft_fakes::{FakeServer, Reply, Wire};
    let server = FakeServer::start(
        Wire::OpenAi,
        vec![Reply::text("Yes, it is."), Reply::text("No.")],
    )
    .await;
    let input = json!({
        "input_text": "Mary is Ann's mother.",
        "entities": [{"name": "Ann", "type": "Person"}],
        "relationships": [rel("mother", "Mary", "Ann"), rel("sibling", "Ann", "Bob")],
    });
    let ran = run(&probing(&server.base_url(), "reject"), input).await;
    let v = &ran.output()["verdict"];
    // A warning's `no` is still an error (TEA's verdict is valid only without any).
    assert_eq!(v["valid"], false, "{v}");
    let errors = v["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0]["type"], "semantic_probe_failed");
    assert_eq!(
        errors[0]["question"],
        "Is Ann a person in: Mary is Ann's mother."
    );
    assert_eq!(
        errors[0]["message"],
        "LLM probe failed: Is Ann a person in: Mary is Ann's mother."
    );
    assert_eq!(errors[0]["probe"], "Is {{ name }} a person in: {{ text }}");
    let sent = server.received();
    assert_eq!(sent.len(), 2, "the sibling is not asked about");
    let first = sent[0].body["messages"].to_string();
    assert!(
        first.contains("Is Mary the mother of Ann in: Mary is Ann's mother."),
        "{first}"
    );
    assert_eq!(sent[0].body["max_tokens"], 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejecting_probe_s_no_ends_the_probing() {
    use weft_fakes::{FakeServer, Reply, Wire};
    let server = FakeServer::start(Wire::OpenAi, vec![Reply::text("Not correct.")]).await;
    let input = json!({
        "input_text": "Mary knows Ann.",
        "entities": [{"name": "Ann", "type": "Person"}],
        "relationships": [rel("mother", "Mary", "Ann")],
    });
    let ran = run(&probing(&server.base_url(), "reject"), input).await;
    let v = &ran.output()["verdict"];
    assert_eq!(v["valid"], false);
    assert_eq!(v["errors"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(server.received().len(), 1, "the entity probe is not asked");
}

#[test]
fn a_probe_weft_cannot_read_is_refused_when_the_file_loads() {
    let yaml = probing("http://127.0.0.1:9", "reject").replace("type == 'mother'", "len(type) > 3");
    let err = super::support::load_error(&yaml, "tea");
    assert!(
        err.contains("`where`") && err.contains("type == 'mother'"),
        "{err}"
    );
}
