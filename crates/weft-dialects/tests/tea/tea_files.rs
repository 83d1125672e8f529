//! The parts of TEA's YAML reference beyond spec 004 that its own example agents use
//! (issue 20): `initial_state`, `action:`/`params:`, `next:`, string edge conditions,
//! `output:` mappings, `settings` and `config`, `shell_provider`.

use super::run;
use serde_json::json;
use weft_core::event::EventKind;
use weft_core::ports::RunStatus;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_state_is_the_start_and_the_input_wins_over_it() {
    // TEA's CLI: `{**yaml_initial_state, **input}`.
    let yaml = "initial_state: {count: 1, label: start}\nnodes:\n  - name: bump\n    run: |\n      return {\"count\": state[\"count\"] + 1}\n";
    let ran = run(yaml, json!(null)).await;
    assert_eq!(ran.output(), &json!({"count": 2, "label": "start"}));
    let ran = run(yaml, json!({"count": 10})).await;
    assert_eq!(ran.output(), &json!({"count": 11, "label": "start"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn action_params_next_and_string_conditions_are_other_spellings() {
    let yaml = r#"
nodes:
  - name: parse
    action: json.parse
    params: {text: "{{ state.raw }}"}
    output: parsed
    next:
      - condition: "{{ state.parsed.n > 1 }}"
        to: big
      - to: small
  - name: big
    run: |
      return {"size": "big"}
    next: __end__
  - name: small
    run: |
      return {"size": "small"}
"#;
    let ran = run(yaml, json!({"raw": "{\"n\": 5}"})).await;
    assert_eq!(ran.output()["size"], "big");
    let ran = run(yaml, json!({"raw": "{\"n\": 0}"})).await;
    assert_eq!(ran.output()["size"], "small");

    let edges = "nodes:\n  - {name: a, run: \"return {'v': state['v']}\"}\n  - {name: yes, run: \"return {'r': 'yes'}\"}\n  - {name: no, run: \"return {'r': 'no'}\"}\nedges:\n  - {from: __start__, to: a}\n  - {from: a, to: yes, condition: \"state.v > 1\"}\n  - {from: a, to: no, condition: \"state.v <= 1\"}\n  - {from: yes, to: __end__}\n  - {from: no, to: __end__}\n";
    assert_eq!(run(edges, json!({"v": 3})).await.output()["r"], "yes");
    assert_eq!(run(edges, json!({"v": 1})).await.output()["r"], "no");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_mapping_sets_state_keys_from_the_result() {
    let yaml = r#"
nodes:
  - name: parse
    uses: json.parse
    with: {text: "{\"title\": \"T\", \"tags\": [1, 2]}"}
    output:
      title: "{{ result.title }}"
      tags: "{{ (state.tags or []) + result.tags }}"
      results_seen: "{{ state.results_seen }}"
"#;
    let ran = run(yaml, json!({"tags": [0], "results_seen": "kept"})).await;
    assert_eq!(
        ran.output(),
        &json!({"tags": [0, 1, 2], "results_seen": "kept", "title": "T"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_and_config_load_with_warnings_and_shell_providers_fail_when_reached() {
    let yaml = "settings:\n  llm: {backend: local, model: gpt-4o-mini}\n  opik: {project: x}\nconfig: {raise_exceptions: true}\nvalidation_logging: {enabled: true}\nnodes:\n  - name: ask\n    uses: llm.call\n    with: {shell_provider: claude, prompt: hi}\n    output: answer\n";
    assert_warns(
        yaml,
        &[
            "`settings.opik` is read, not used",
            "`config.raise_exceptions`",
            "`validation_logging` is read, not used",
        ],
    );
    assert_fails_with(yaml, json!({}), &["does not run shell commands"]).await;
    // TEA's pinball-learn gives an llm.call's options under `config:`, which neither
    // TEA nor Weft reads: the file loads, the node fails when reached.
    let yaml = "nodes:\n  - name: improve\n    action: llm.call\n    config: {model: m, messages: [{role: user, content: hi}]}\n";
    assert_warns(
        yaml,
        &[
            "`config` is not a key of a node",
            "`llm.call` has no options",
        ],
    );
    assert_fails_with(
        yaml,
        json!({}),
        &["TEA reads them from `with:` or `params:`"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tea_s_actions_weft_lacks_load_with_a_warning_and_fail_when_reached() {
    // TEA looks an action up when its node runs; so does Weft for TEA's own actions
    // that need a service it does not have.
    let yaml = r#"
nodes:
  - name: remember
    uses: memory.mem0.add
    with: {messages: "{{ state.text }}"}
    output: stored
"#;
    assert_warns(
        yaml,
        &["`memory.mem0.add` is an action of The Edge Agent that needs the Mem0 memory service"],
    );
    assert_fails_with(
        yaml,
        json!({"text": "hi"}),
        &[
            "`memory.mem0.add` is an action of The Edge Agent",
            "Weft does not have it",
        ],
    )
    .await;
    // A name a typo away from one Weft knows is refused when the file loads; one unlike
    // any (TEA also loads actions from Python modules) loads and fails when reached.
    let typo = "nodes:\n  - name: a\n    uses: file.reed\n";
    let err = super::support::load_error(typo, "tea");
    assert!(
        err.contains("unknown action `file.reed`") && err.contains("file.read"),
        "{err}"
    );
    let custom = "nodes:\n  - name: a\n    uses: execution.run\n";
    assert_fails_with(
        custom,
        json!({}),
        &["`execution.run` is neither an action of Weft nor of The Edge Agent"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_runtime_spellings_data_and_annotations_load() {
    // `outputs:` with `action_result` (TEA's Rust runtime), `language:` on a steps node,
    // the `data:` section in templates, `_`-keys as annotations, `output:` on a code
    // node (ignored, as TEA ignores it), a JSON-Schema-like state_schema type, `return`,
    // and constants (`initial_state`, `data`) whose strings look like templates.
    let yaml = r#"
state_schema:
  tasks: {type: array, description: the tasks}
initial_state:
  meta: {deep: {t: "{{ kept as text }}"}}
data:
  greeting: "Hello {{ not rendered }}"
_render_items: [x]
nodes:
  - name: parse
    action: json.parse
    language: python
    params: {text: "[1, 2]"}
    outputs:
      parsed: "{{ action_result }}"
  - name: count
    language: lua
    _note: kept out
    steps:
      - run: |
          return {n = #state.parsed}
    output: ignored
  - name: greet
    uses: return
    with:
      value:
        text: "{{ data.greeting }}"
"#;
    let ran = run(yaml, json!({})).await;
    assert_eq!(
        ran.output(),
        &json!({
            "meta": {"deep": {"t": "{{ kept as text }}"}},
            "parsed": [1, 2],
            "n": 2,
            "text": "Hello {{ not rendered }}"
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_stops_the_run_for_a_person_at_the_node() {
    // TEA's `interrupt: before` and `config.interrupt_after` are Weft approvals, so the
    // run pauses there (and survives restarts) until someone answers.
    let yaml = r#"
config:
  interrupt_after: [draft]
nodes:
  - name: draft
    run: |
      return {"draft": "v1"}
  - name: publish
    interrupt: before
    run: |
      return {"published": True}
"#;
    let loaded = weft_dialects::load_str(yaml, "flow.yaml", None, Some("tea")).unwrap();
    assert!(
        !loaded
            .warnings
            .iter()
            .any(|w| w.message.contains("interrupt_after")),
        "applied, so not warned of: {:?}",
        loaded.warnings
    );
    let ran = run(yaml, json!({})).await;
    assert_eq!(ran.result.status, RunStatus::Paused);
    let asked: Vec<&EventKind> = ran
        .kinds()
        .into_iter()
        .filter(|k| matches!(k, EventKind::ApprovalRequested { .. }))
        .collect();
    assert_eq!(asked.len(), 1, "one stop at a time: {asked:?}");
    let bad =
        "config:\n  interrupt_before: [drat]\nnodes:\n  - {name: draft, run: \"return {}\"}\n";
    let err = super::support::load_error(bad, "tea");
    assert!(err.contains("did you mean `draft`"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_tea_ignores_are_warned_of_and_its_other_providers_fail_when_reached() {
    let yaml = r#"
checkpoint: {enabled: true, dir: ./checkpoints}
nodes:
  - name: note
    condition: "{{ state.ready }}"
    prompt: unused
    run: |
      return {"noted": True}
  - name: ask
    uses: llm.call
    with: {provider: azure_openai, model: gpt-4o, prompt: hi}
    output: answer
"#;
    assert_warns(
        yaml,
        &[
            "`condition` belongs to",
            "`prompt` belongs to",
            "`checkpoint.dir`",
        ],
    );
    assert_fails_with(
        yaml,
        json!({}),
        &["provider `azure_openai` needs Azure OpenAI"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn branch_results_read_as_attributes_as_tea_s_result_objects_do() {
    // TEA's dynamic_parallel examples read `result.state` and `result.index` in the
    // node after the fan-out; subscripts keep working.
    let yaml = r#"
nodes:
  - name: fan
    type: dynamic_parallel
    items: "{{ state.xs }}"
    steps:
      - run: |
          return {"doubled": state["item"] * 2}
    output: results
  - name: gather
    run: |
      out = []
      for result in state.get("results", []):
          out.append([result.index, result.state.get("doubled"), result["index"]])
      return {"gathered": out}
"#;
    let ran = run(yaml, json!({"xs": [1, 2, 3]})).await;
    assert_eq!(
        ran.output()["gathered"],
        json!([[0, 2, 0], [1, 4, 1], [2, 6, 2]])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_named_end_and_a_second_start_edge_read_as_tea_reads_them() {
    // TEA takes the first edge whose condition holds: of two edges from `__start__`, the
    // second is never taken. And `end` is an ordinary node name there.
    let yaml = r#"
nodes:
  - name: a
    run: |
      return {"path": ["a"]}
  - name: b
    run: |
      return {"path": state["path"] + ["b"]}
  - name: end
    run: |
      return {"path": state["path"] + ["end"]}
edges:
  - from: __start__
    to: a
  - from: __start__
    to: b
  - from: a
    to: end
  - from: end
    to: __end__
"#;
    assert_warns(
        yaml,
        &[
            "never takes this one to `b`",
            "the node `end` runs as `end_`",
        ],
    );
    let ran = run(yaml, json!({})).await;
    assert_eq!(ran.output()["path"], json!(["a", "end"]));
}

/// Loads `yaml` as a tea file; for each of `wants`, some warning holds it.
fn assert_warns(yaml: &str, wants: &[&str]) {
    let loaded = weft_dialects::load_str(yaml, "flow.yaml", None, Some("tea")).unwrap();
    let warned: Vec<&str> = loaded.warnings.iter().map(|w| w.message.as_str()).collect();
    for want in wants {
        assert!(
            warned.iter().any(|w| w.contains(want)),
            "{want}: {warned:?}"
        );
    }
}

/// Runs `yaml` from `input`: the run fails, and its error holds each of `parts`.
async fn assert_fails_with(yaml: &str, input: serde_json::Value, parts: &[&str]) {
    let ran = run(yaml, input).await;
    assert_eq!(ran.result.status, RunStatus::Failed);
    let e = ran.result.error.unwrap();
    for part in parts {
        assert!(e.message.contains(part), "{part}: {}", e.message);
    }
}

#[test]
fn a_model_chosen_from_the_state_is_left_for_the_run_to_choose() {
    // TEA's llm-prolog-family-reasoning-interview picks provider and model from the state.
    let yaml = r#"
nodes:
  - name: ask
    uses: llm.call
    with:
      provider: "{{ state.llm_provider | default('ollama') }}"
      model: "{{ state.llm_model | default('gemma3n:e4b') }}"
      prompt: Hello
"#;
    let loaded = weft_dialects::load_str(yaml, "flow.yaml", None, Some("tea")).unwrap();
    let mut models = Vec::new();
    weft_core::validate::walk_blocks(&loaded.flow, &mut |_, b| {
        if let weft_core::ir::BlockKind::Llm(l) = &b.kind {
            models.push(l.model.clone());
        }
    });
    assert_eq!(
        models,
        [Some(
            "{{ state.llm_provider | default('ollama') }}/{{ state.llm_model | default('gemma3n:e4b') }}"
                .to_owned()
        )]
    );
    let with_base = yaml.replace(
        "prompt: Hello",
        "prompt: Hello\n      api_base: http://127.0.0.1:1",
    );
    let err = super::support::load_error(&with_base, "tea");
    assert!(err.contains("cannot go to an `api_base`"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_execute_runs_python_without_the_state_and_reports_failures_as_tea_does() {
    let yaml = r#"
nodes:
  - name: ok
    uses: code.execute
    with:
      language: python
      code: |
        x = 1 + 2
        print("x is", x)
        result = x * 10
  - name: reads_state
    uses: code.execute
    with:
      code: |
        y = state["result"]
    output: failed
  - name: chatty
    uses: code.execute
    with:
      code: |
        for i in range(10):
            print("line", i)
      max_output_bytes: 20
    output: cut
"#;
    let ran = run(yaml, json!({})).await;
    let out = ran.output();
    // The first node's output (no `output:`) spreads into the state, as TEA's does.
    assert_eq!(out["success"], true);
    assert_eq!(out["stdout"], "x is 3\n");
    assert_eq!(out["return_value"], 30);
    assert!(out["execution_time_ms"].as_f64().unwrap() >= 0.0);
    let failed = &out["failed"];
    assert_eq!(failed["success"], false);
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("name 'state' is not defined"),
        "{failed}"
    );
    assert_eq!(
        out["cut"]["stdout"],
        "line 0\nline 1\nline 2\n... [output truncated]"
    );
    // A module-level `return` is TEA's syntax error, reported as a result.
    let returning = "nodes:\n  - name: a\n    uses: code.execute\n    with:\n      code: |\n        def f():\n            return 1\n        return f()\n    output: r\n";
    let r = run(returning, json!({})).await;
    assert_eq!(r.output()["r"]["success"], false);
    assert_eq!(
        r.output()["r"]["error"],
        "SyntaxError: 'return' outside function"
    );
    let lua = yaml.replace("language: python", "language: lua");
    let err = super::support::load_error(&lua, "tea");
    assert!(err.contains("runs Python, not \"lua\""), "{err}");
    let templated = "nodes:\n  - name: a\n    uses: code.execute\n    with: {code: \"result = {{ state.x }}\"}\n";
    assert_fails_with(templated, json!({"x": 1}), &["holds a template"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_runtime_s_lua_eval_and_prolog_query_run_in_weft_s_sandboxes() {
    // TEA's qa-neurosymbolic-wasm: a program and a `?- Goal.`, a template rendered into
    // the program as TEA renders it, every answer's bindings; Lua reading the state.
    let yaml = r#"
nodes:
  - name: kids
    action: prolog.query
    with:
      code: |
        parent(tom, bob). parent(tom, liz). parent(bob, ann).
        ?- parent(tom, Child).
    output: kids
  - name: classify
    action: prolog.query
    with:
      code: |
        classify(Q, geography) :- sub_string(Q, _, _, _, "capital"), !.
        classify(_, general).
        ?- classify("{{ state.question }}", Category).
    output: category
  - name: none
    action: prolog.query
    with:
      code: "?- member(X, [])."
    output: nothing
  - name: count
    action: lua.eval
    with:
      code: |
        return { n = #state.kids.bindings, first = state.kids.bindings[1].Child }
    output: lua
"#;
    let ran = run(yaml, json!({"question": "What is the capital of France?"})).await;
    let out = ran.output();
    assert_eq!(
        out["kids"],
        json!({"bindings": [{"Child": "bob"}, {"Child": "liz"}], "success": true})
    );
    assert_eq!(
        out["category"],
        json!({"bindings": [{"Category": "geography"}], "success": true})
    );
    assert_eq!(out["nothing"], json!({"bindings": [], "success": false}));
    assert_eq!(out["lua"], json!({"n": 2, "first": "bob"}));
    // The facts of one query are not there for the next: asking for them is an error,
    // as in TEA.
    let again = yaml.replace(
        "parent(tom, bob). parent(tom, liz). parent(bob, ann).\n",
        "",
    );
    assert_fails_with(
        &again,
        json!({"question": "x"}),
        &["existence_error", "parent"],
    )
    .await;
    let templated =
        "nodes:\n  - name: a\n    action: lua.eval\n    with: {code: \"return {{ state.x }}\"}\n";
    assert_fails_with(templated, json!({"x": 1}), &["holds a template"]).await;
}
