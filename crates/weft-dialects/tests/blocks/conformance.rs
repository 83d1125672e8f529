use super::{answering, run, run_with};
use serde_json::json;
use weft_core::event::EventKind;
use weft_core::ports::RunStatus;

const MODEL: &str = "openai/gpt-test";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llm_templates_read_the_pipeline_input_and_initial_and_answer_with_the_output_fields() {
    // 000: "{{fieldName}} references resolve to keys in pipeline_input.
    // {{initial.fieldName}} references the flow's global input." — "Output: A dict whose
    // keys match the block's output_schema field names."
    let server = answering(|prompt, _| {
        assert_eq!(prompt, "Translate 'good morning' into fr for Ada.");
        r#"{"translation": "bonjour", "confidence": 0.9}"#.into()
    })
    .await;
    let flow = format!(
        r#"
name: translate
root:
  type: h
  children:
    - step_id: translate
      type: llm
      model: {MODEL}
      prompt: "Translate '{{{{text}}}}' into {{{{lang}}}} for {{{{initial.user.name}}}}."
      input_schema: {{fields: [{{name: text, type: string}}, {{name: lang, type: string}}]}}
      output_schema:
        fields:
          - {{name: translation, type: string, description: The translated text}}
          - {{name: confidence, type: number}}
"#
    );
    let input = json!({"text": "good morning", "lang": "fr", "user": {"name": "Ada"}});
    let ran = run_with(&flow, input, Some(&server)).await;
    assert_eq!(
        ran.output(),
        &json!({"translation": "bonjour", "confidence": 0.9})
    );
    // The fields became a strict JSON Schema for the provider's structured output.
    let sent = server.received();
    assert_eq!(sent[0].body["model"], "gpt-test");
    let format = sent[0].body["response_format"].to_string();
    assert!(
        format.contains("translation") && format.contains("The translated text"),
        "{format}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_llm_block_without_an_output_schema_puts_its_answer_under_response() {
    // 000 says the output is "A dict whose keys match the block's output_schema field
    // names" and is silent when there is none: docs/dialects/blocks.md records
    // `{response: <answer>}`.
    let server = answering(|p, _| format!("echo: {p}")).await;
    let flow = format!(
        "name: t\nroot: {{type: h, children: [{{step_id: a, type: llm, model: {MODEL}, prompt: \"hi {{{{who}}}}\"}}]}}\n"
    );
    let ran = run_with(&flow, json!({"who": "there"}), Some(&server)).await;
    assert_eq!(ran.output(), &json!({"response": "echo: hi there"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_code_wrapper_takes_initial_then_the_input_fields_in_order() {
    // 000: "Parameters: initial — always present ... One positional parameter per field
    // in the block's input_schema, in array order." "Call site: _block(initial=
    // <flow_global_input>, **pipeline_input)". The spec's own example: input fields
    // [first_name, last_name, age], output fields [full_name, is_adult].
    let flow = r#"
name: people
root:
  type: h
  children:
    - step_id: describe
      type: code
      input_schema:
        fields: [{name: first_name, type: string}, {name: last_name, type: string}, {name: age, type: integer}]
      output_schema:
        fields: [{name: full_name, type: string}, {name: is_adult, type: boolean}]
      code: |
        full = first_name + " " + last_name
        return {"full_name": full, "is_adult": age >= initial["adult_at"]}
"#;
    let ran = run(
        flow,
        json!({"first_name": "Ada", "last_name": "Lovelace", "age": 17, "adult_at": 18}),
    )
    .await;
    // The flow input is the first block's pipeline_input, so `adult_at` would be an
    // unexpected keyword: the runtime calls with **pipeline_input exactly.
    assert_eq!(ran.result.status, RunStatus::Failed);
    let e = ran.result.error.unwrap();
    assert!(e.message.contains("adult_at"), "{}", e.message);

    let flow = flow.replace(
        "    - step_id: describe",
        "    - step_id: pick\n      type: code\n      input_schema: {fields: [{name: first_name}, {name: last_name}, {name: age}, {name: adult_at}]}\n      code: |\n        return {\"first_name\": first_name, \"last_name\": last_name, \"age\": age}\n    - step_id: describe",
    );
    let ran = run(
        &flow,
        json!({"first_name": "Ada", "last_name": "Lovelace", "age": 17, "adult_at": 18}),
    )
    .await;
    assert_eq!(
        ran.output(),
        &json!({"full_name": "Ada Lovelace", "is_adult": false})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_must_return_a_dict() {
    // 000: "Return contract: Must return a dict."
    let flow = "name: t\nroot: {type: h, children: [{step_id: c, type: code, input_schema: {fields: [{name: x}]}, code: \"return [x]\"}]}\n";
    let ran = run(flow, json!({"x": 1})).await;
    assert_eq!(ran.result.status, RunStatus::Failed);
    let e = ran.result.error.unwrap();
    assert!(e.message.contains("must return a dict"), "{}", e.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_error_names_the_line_of_the_flow_file() {
    // docs/dialects/blocks.md: an error in `code` names the flow file's line, not a line
    // of the `def _block(...)` Weft wraps the body in.
    let flow = "name: t\nroot:\n  type: h\n  children:\n    - step_id: c\n      type: code\n      input_schema: {fields: [{name: x}]}\n      code: |\n        y = x + 1\n        return {\"y\": y / 0}\n";
    let e = run(flow, json!({"x": 1})).await.result.error.unwrap();
    assert!(
        e.message.contains("ZeroDivisionError")
            && e.message.ends_with("(line 10 of the flow file)"),
        "{}",
        e.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_allows_the_listed_builtins_and_refuses_imports_eval_files_and_introspection() {
    // 000, "Sandbox Rules": "Allowed builtins: abs, bool, dict, enumerate, float, int,
    // isinstance, len, list, max, min, range, reversed, round, set, sorted, str, sum,
    // tuple, zip, True, False, None" — "Forbidden: No import statements; No eval() or
    // exec(); No file I/O (open, os, pathlib, etc.); No getattr, type, vars, dir".
    let allowed = r#"
pairs = list(zip(xs, reversed(xs)))
return {"n": len(xs), "s": sum(xs), "top": max(xs), "low": min(xs), "sorted": sorted(xs),
        "pairs": [list(p) for p in pairs], "idx": [i for i, _ in enumerate(xs)],
        "r": round(abs(-2.567), 1), "ok": isinstance(xs, list) and bool(True),
        "u": len(set(xs)), "t": len(tuple(range(3))), "f": float(int("3")), "d": dict(a=str(1)),
        "none": None}
"#;
    let flow = json!({"name": "t", "root": {"type": "h", "children": [
        {"step_id": "c", "type": "code", "input_schema": {"fields": [{"name": "xs", "type": "array"}]}, "code": allowed}
    ]}})
    .to_string();
    let ran = run(&flow, json!({"xs": [3, 1, 2]})).await;
    assert_eq!(
        ran.output(),
        &json!({"n": 3, "s": 6, "top": 3, "low": 1, "sorted": [1, 2, 3],
                "pairs": [[3, 2], [1, 1], [2, 3]], "idx": [0, 1, 2], "r": 2.6, "ok": true,
                "u": 3, "t": 3, "f": 3.0, "d": {"a": "1"}, "none": null})
    );
    for (body, refused) in [
        ("import os\nreturn {}", "import"),
        ("return {'x': eval('1')}", "eval"),
        ("exec('x = 1')\nreturn {}", "exec"),
        ("return {'x': open('/etc/passwd').read()}", "open"),
        ("return {'x': getattr(xs, 'count')}", "getattr"),
        ("return {'x': str(type(xs))}", "type"),
        ("return {'x': vars()}", "vars"),
        ("return {'x': dir()}", "dir"),
    ] {
        let flow = json!({"name": "t", "root": {"type": "h", "children": [
            {"step_id": "c", "type": "code", "input_schema": {"fields": [{"name": "xs"}]}, "code": body}
        ]}})
        .to_string();
        let ran = run(&flow, json!({"xs": [1]})).await;
        assert_eq!(ran.result.status, RunStatus::Failed, "{body}");
        let e = ran.result.error.unwrap();
        assert!(e.message.contains(refused), "{body}: {}", e.message);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passthrough_forwards_its_input_unchanged() {
    // 000: "passthrough — Forwards input to output unchanged."
    let flow = "name: t\nroot: {type: h, children: [{step_id: p, type: passthrough}]}\n";
    let input = json!({"a": [1, {"b": null}], "c": "d"});
    assert_eq!(run(flow, input.clone()).await.output(), &input);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h_container_feeds_each_block_the_previous_output_and_the_first_the_flow_input() {
    // 000: "Blocks in an h (horizontal/sequential) container execute left-to-right. Each
    // block receives the previous block's output dict as its pipeline_input." "The first
    // block in a sequence receives ... The flow's global input (if it's the root-level
    // first block), or The output from the previous sibling of its parent container."
    let flow = r#"
name: chain
root:
  type: h
  children:
    - step_id: double
      type: code
      input_schema: {fields: [{name: n, type: integer}]}
      code: "return {'n': n * 2}"
    - type: h
      children:
        - step_id: add_one
          type: code
          input_schema: {fields: [{name: n}]}
          code: "return {'n': n + 1, 'seen_initial': initial['n']}"
        - step_id: keep
          type: passthrough
    - step_id: square
      type: code
      input_schema: {fields: [{name: n}, {name: seen_initial}]}
      code: "return {'n': n * n, 'initial_n': seen_initial}"
"#;
    let ran = run(flow, json!({"n": 3})).await;
    assert_eq!(ran.output(), &json!({"n": 49, "initial_n": 3}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v_container_runs_its_children_concurrently_on_one_input_and_merges_their_outputs() {
    // 000: "Blocks in a v (vertical/parallel) container execute concurrently. All children
    // receive the same pipeline_input" — "their outputs are merged into a single dict:
    // For block children: {<step_id>: <block_output>}; For nested container children:
    // {<index_as_string>: <container_output>}. The downstream block receives this merged
    // dict as its pipeline_input."
    let server = FakeLatency::new().await;
    let flow = format!(
        r#"
name: fan
root:
  type: v
  children:
    - step_id: left
      type: llm
      model: {MODEL}
      prompt: "left {{{{topic}}}}"
      output_schema: {{fields: [{{name: said, type: string}}]}}
    - type: h
      children:
        - step_id: inner
          type: code
          input_schema: {{fields: [{{name: topic}}]}}
          code: "return {{'upper': topic.upper()}}"
    - step_id: right
      type: llm
      model: {MODEL}
      prompt: "right {{{{topic}}}}"
      output_schema: {{fields: [{{name: said, type: string}}]}}
"#
    );
    let ran = run_with(&flow, json!({"topic": "rust"}), Some(&server.server)).await;
    assert_eq!(
        ran.output(),
        &json!({
            "left": {"said": "left rust"},
            "1": {"upper": "RUST"},
            "right": {"said": "right rust"}
        })
    );
    // Both model calls began before either ended: they ran concurrently.
    let llm_events: Vec<(bool, String)> = ran
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::StepStarted { path, kind, .. } if kind == "llm" => {
                Some((true, path.to_string()))
            }
            EventKind::StepCompleted { path, kind, .. } if kind == "llm" => {
                Some((false, path.to_string()))
            }
            _ => None,
        })
        .collect();
    let starts: Vec<bool> = llm_events.iter().map(|(s, _)| *s).collect();
    assert_eq!(starts, vec![true, true, false, false], "{llm_events:?}");
}

/// A server that echoes the prompt as `{"said": ...}` after 150 ms.
struct FakeLatency {
    server: weft_fakes::FakeServer,
}

impl FakeLatency {
    async fn new() -> FakeLatency {
        let server = weft_fakes::FakeServer::start_with(
            weft_fakes::Wire::OpenAi,
            std::time::Duration::from_millis(150),
            |r| weft_fakes::Reply::text(json!({ "said": r.last_message() }).to_string()),
        )
        .await;
        FakeLatency { server }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_runs_its_children_per_item_with_the_sibling_fields_and_outputs_a_list() {
    // 000: "Per-iteration input: Each child receives {...sibling_fields, [arrayField]:
    // single_item}" — the spec's example: input {items: ["a", "b", "c"], lang: "en"},
    // arrayField = "items" gives {items: "a", lang: "en"} ... — "Loop output: A list
    // (array) of per-iteration results, in order. The downstream block receives this
    // list."
    let flow = r#"
name: each
root:
  type: h
  children:
    - type: loop
      arrayField: items
      children:
        - step_id: seen
          type: passthrough
        - step_id: tag
          type: code
          input_schema: {fields: [{name: items}, {name: lang}]}
          code: "return {'word': items, 'lang': lang, 'n': len(initial['items'])}"
"#;
    let ran = run(flow, json!({"items": ["a", "b", "c"], "lang": "en"})).await;
    assert_eq!(
        ran.output(),
        &json!([
            {"word": "a", "lang": "en", "n": 3},
            {"word": "b", "lang": "en", "n": 3},
            {"word": "c", "lang": "en", "n": 3}
        ])
    );
    // The downstream block receives the list.
    let then_more = format!("{flow}    - step_id: after\n      type: passthrough\n");
    let ran = run(&then_more, json!({"items": [1], "lang": "en"})).await;
    assert_eq!(ran.output(), &json!([{"word": 1, "lang": "en", "n": 1}]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_iterations_pass_the_spec_example_input_to_each_child() {
    // 000's example, checked directly: "Iteration 0: {items: "a", lang: "en"}" ...
    let flow = "name: t\nroot: {type: loop, arrayField: items, children: [{step_id: p, type: passthrough}]}\n";
    let ran = run(flow, json!({"items": ["a", "b", "c"], "lang": "en"})).await;
    assert_eq!(
        ran.output(),
        &json!([
            {"lang": "en", "items": "a"},
            {"lang": "en", "items": "b"},
            {"lang": "en", "items": "c"}
        ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_over_a_missing_array_field_fails_with_a_clear_error() {
    // 000: "A loop node iterates over an array field in its input. The arrayField property
    // names which key contains the array."
    let flow = "name: t\nroot: {type: loop, arrayField: items, children: [{step_id: p, type: passthrough}]}\n";
    let ran = run(flow, json!({"item": [1]})).await;
    assert_eq!(ran.result.status, RunStatus::Failed);
    let e = ran.result.error.unwrap();
    assert!(e.message.contains("no list under `items`"), "{}", e.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_is_available_to_llm_blocks_inside_loops() {
    // 000: "The flow's global input is available to every block: LLM blocks: via
    // {{initial.fieldName}} template syntax".
    let server = answering(|p, _| json!({ "line": p }).to_string()).await;
    let flow = format!(
        r#"
name: t
root:
  type: loop
  arrayField: names
  children:
    - step_id: greet
      type: llm
      model: {MODEL}
      prompt: "{{{{initial.greeting}}}}, {{{{names}}}}!"
      output_schema: {{fields: [{{name: line, type: string}}]}}
"#
    );
    let ran = run_with(
        &flow,
        json!({"names": ["Ada", "Alan"], "greeting": "Hello"}),
        Some(&server),
    )
    .await;
    assert_eq!(
        ran.output(),
        &json!([{"line": "Hello, Ada!"}, {"line": "Hello, Alan!"}])
    );
}

#[test]
fn a_blocks_file_is_detected_from_its_content_in_yaml_and_json() {
    // The issue: "`weft run` detects the dialect from the file's content".
    for text in [
        "name: t\nroot: {type: h, children: []}\n",
        r#"{"name": "t", "root": {"type": "loop", "arrayField": "x", "children": []}}"#,
        "name: t\nroot: {step_id: a, type: passthrough}\n",
    ] {
        let loaded = weft_dialects::load_str(text, "f", None, None).unwrap();
        assert_eq!(loaded.dialect, "blocks", "{text}");
    }
    // Weft's own format, which also has `name` and `root`, is still native.
    let native = "name: t\nroot: {passthrough: {}}\n";
    assert_eq!(
        weft_dialects::load_str(native, "f", None, None)
            .unwrap()
            .dialect,
        "native"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_containers_pass_through_merge_nothing_or_list_the_items() {
    // 000 is silent on empty containers; docs/dialects/blocks.md: an empty `h` forwards
    // its input, an empty `v` merges nothing (`{}`), an empty loop lists its
    // per-iteration inputs.
    let h = run("name: t\nroot: {type: h, children: []}\n", json!({"a": 1})).await;
    assert_eq!(h.output(), &json!({"a": 1}));
    let v = run("name: t\nroot: {type: v, children: []}\n", json!({"a": 1})).await;
    assert_eq!(v.output(), &json!({}));
    let l = run(
        "name: t\nroot: {type: loop, arrayField: a, children: []}\n",
        json!({"a": [1, 2]}),
    )
    .await;
    assert_eq!(l.output(), &json!([{"a": 1}, {"a": 2}]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_field_missing_from_the_input_fails_the_block_instead_of_rendering_empty() {
    // 000: "{{fieldName}} references resolve to keys in pipeline_input" — a key that is not
    // there must not silently become an empty string in the prompt.
    let server = answering(|p, _| p.to_owned()).await;
    let flow = format!(
        "name: t\nroot: {{type: h, children: [{{step_id: ask, type: llm, model: {MODEL}, prompt: \"About {{{{topic}}}} for {{{{initial.user}}}}\"}}]}}\n"
    );
    let ran = run_with(&flow, json!({"topic": "rust"}), Some(&server)).await;
    assert_eq!(ran.result.status, RunStatus::Failed);
    let e = ran.result.error.unwrap();
    assert!(
        e.message
            .contains("reads `{{initial.user}}`, which its flow input does not have"),
        "{}",
        e.message
    );
    assert!(server.received().is_empty(), "no call was made");
    let ran = run_with(&flow, json!({"user": "Ada"}), Some(&server)).await;
    let e = ran.result.error.unwrap();
    assert!(
        e.message
            .contains("reads `{{topic}}`, which its input does not have"),
        "{}",
        e.message
    );
}
