//! Behaviour the spec promises, node type by node type.

use super::support::http_server;
use super::{run, run_in};
use serde_json::json;
use weft_core::event::{EventKind, LoopExit};
use weft_core::ports::RunStatus;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_counter_example_ends_with_count_5_and_sum_15() {
    // 004, Method 6: "Final state: {count: 5, sum: 15}" and "Exit reason: condition_false".
    let yaml = include_str!("../../../../examples/tea/counter.yaml");
    let ran = run(yaml, json!({"count": 0, "sum": 0})).await;
    assert_eq!(ran.output(), &json!({"count": 5, "sum": 15}));
    // 004: "LoopStart {node_name, max_iterations}", "LoopIteration {node_name, iteration,
    // condition_result}", "LoopEnd {node_name, iterations_completed, exit_reason}".
    let kinds = ran.kinds();
    assert!(kinds.iter().any(|k| matches!(
        k,
        EventKind::LoopStarted {
            max_iterations: 10,
            ..
        }
    )));
    let iterations = kinds
        .iter()
        .filter(|k| matches!(k, EventKind::LoopIteration { .. }))
        .count();
    assert_eq!(
        iterations, 6,
        "five runs of the body and the check that ends it"
    );
    assert!(kinds.iter().any(|k| matches!(
        k,
        EventKind::LoopEnded {
            iterations: 5,
            reason: LoopExit::ConditionFalse,
            ..
        }
    )));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_run_reads_state_and_its_dict_merges_into_state() {
    // 004, Method 1: "Full Python with state access" ... "Must return a dict to update state".
    let yaml = r#"
name: py
nodes:
  - name: process_data
    run: |
      # Full Python with state access
      data = state["input"]
      processed = data.upper()
      count = len(data.split())

      # Must return a dict to update state
      return {
        "processed": processed,
        "word_count": count
      }
"#;
    let ran = run(yaml, json!({"input": "hello tea world"})).await;
    assert_eq!(
        ran.output(),
        &json!({"input": "hello tea world", "processed": "HELLO TEA WORLD", "word_count": 3})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_is_an_alias_of_run_and_json_variables_and_secrets_are_in_scope() {
    // 004, Method 2: "Alias for run:"; Method 1: "variables - Global variables from YAML
    // variables: section", "secrets - Secrets from configured backend", "json - Python json module".
    let yaml = r#"
name: scope
variables:
  greeting: Hello
nodes:
  - name: process_data
    script: |
      result = state["value"] * 2
      return {"doubled": result, "text": json.dumps({"g": variables["greeting"]}), "has_key": secrets["api_key"] == "s3cret"}
"#;
    let ran = run(yaml, json!({"value": 21})).await;
    assert_eq!(
        ran.output(),
        &json!({"value": 21, "doubled": 42, "text": "{\"g\": \"Hello\"}", "has_key": true})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lua_by_first_line_or_language_key() {
    // 004, Method 2b: "-- lua"; tea-notes: "`language: lua` ... selects the language as the
    // `-- lua` first line does".
    let yaml = r#"
name: lua
nodes:
  - name: process_lua
    run: |
      -- lua
      local result = {}
      result.value = state.value * 2
      result.message = state.name .. "!"
      return result
  - name: again
    language: lua
    run: |
      return { twice = state.value * 2 }
"#;
    let ran = run(yaml, json!({"value": 4, "name": "tea"})).await;
    assert_eq!(
        ran.output(),
        &json!({"value": 8, "name": "tea", "message": "tea!", "twice": 16})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prolog_reads_state_and_returns_values() {
    // 004, Method 2c: "state(value, V), V2 is V * 2, return(result, V2)."
    let yaml = r#"
name: prolog
nodes:
  - name: validate
    language: prolog
    run: |
      state(value, V),
      V2 is V * 2,
      return(result, V2).
"#;
    let ran = run(yaml, json!({"value": 21})).await;
    assert_eq!(ran.output(), &json!({"value": 21, "result": 42}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expression_writes_its_output_key() {
    // 004, Method 4: "value: len(state.get("items", [])) > 0" with "output_key: has_items".
    let yaml = r#"
name: expr
nodes:
  - name: check_count
    run:
      type: expression
      value: len(state.get("items", [])) > 0
      output_key: has_items
"#;
    assert_eq!(
        run(yaml, json!({"items": [1]})).await.output()["has_items"],
        json!(true)
    );
    assert_eq!(
        run(yaml, json!({})).await.output()["has_items"],
        json!(false)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steps_run_in_order_each_seeing_the_state_so_far() {
    // 004, Method 5: "GitHub Actions-style sequential steps within a node"; tea-notes:
    // "`steps:` runs its steps in order, each seeing the state merged so far".
    let yaml = r#"
name: steps
nodes:
  - name: multi_step_process
    steps:
      - name: step1
        run: |
          return {"intermediate": state["input"] + " processed"}
      - name: step2
        run:
          type: expression
          value: state.intermediate | length
          output_key: length
      - name: step3
        run: |
          return {"final": f"Submitted: {state['intermediate']}"}
"#;
    let ran = run(yaml, json!({"input": "doc"})).await;
    assert_eq!(
        ran.output(),
        &json!({"input": "doc", "intermediate": "doc processed", "length": 13, "final": "Submitted: doc processed"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_while_loop_at_its_bound_ends_normally() {
    // 004: "Loop exits when condition is false or max_iterations reached" and
    // "exit_reason is either "condition_false" or "max_iterations_reached"".
    let yaml = r#"
name: bounded
nodes:
  - name: spin
    type: while_loop
    condition: "True"
    max_iterations: 3
    body:
      - name: tick
        run: |
          return {"n": state.get("n", 0) + 1}
  - name: after
    run:
      type: expression
      value: state.n * 10
      output_key: after
"#;
    let ran = run(yaml, json!({})).await;
    assert_eq!(ran.output(), &json!({"n": 3, "after": 30}));
    assert!(ran.kinds().iter().any(|k| matches!(
        k,
        EventKind::LoopEnded {
            iterations: 3,
            reason: LoopExit::MaxIterationsReached,
            ..
        }
    )));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_false_condition_runs_the_body_zero_times() {
    // 004: "Evaluate condition before each iteration".
    let yaml = r#"
name: zero
nodes:
  - name: never
    type: while_loop
    condition: "state.count < 5"
    max_iterations: 5
    body:
      - name: inc
        run: |
          return {"count": state["count"] + 1}
"#;
    assert_eq!(
        run(yaml, json!({"count": 9})).await.output(),
        &json!({"count": 9})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_error_propagates_immediately() {
    // 004: "Body execution errors propagate immediately (no automatic retry)".
    let yaml = r#"
name: boom
nodes:
  - name: loop
    type: while_loop
    condition: "True"
    max_iterations: 5
    body:
      - name: fail
        run: |
          raise ValueError("bad value")
"#;
    let ran = run(yaml, json!({})).await;
    assert_eq!(ran.result.status, RunStatus::Failed);
    let e = ran.result.error.clone().unwrap();
    assert!(e.message.contains("ValueError: bad value"), "{}", e.message);
    let iterations = ran
        .kinds()
        .iter()
        .filter(|k| matches!(k, EventKind::LoopIteration { .. }))
        .count();
    assert_eq!(iterations, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_parallel_steps_mode_collects_results_in_item_order() {
    // 004, Method 7: "collect results from all branches into output as a list of
    // ParallelFlowResult" with "state", "source_node", "index"; tea-notes: "each branch
    // starts from a deep copy of the state with the item and index variables set as state keys".
    let yaml = r#"
name: fanout
nodes:
  - name: process_documents
    type: dynamic_parallel
    items: "{{ state.documents }}"
    item_var: doc
    index_var: i
    max_concurrency: 2
    steps:
      - name: extract
        run: |
          return {"words": len(state["doc"].split())}
      - name: label
        run:
          type: expression
          value: "'doc ' ~ state.i ~ ': ' ~ state.words"
          output_key: label
    output: processed_docs
  - name: after
    run: |
      return {"labels": [r["state"]["label"] for r in state["processed_docs"]]}
"#;
    let ran = run(yaml, json!({"documents": ["a b c", "d", "e f"]})).await;
    let s = ran.output();
    assert_eq!(s["labels"], json!(["doc 0: 3", "doc 1: 1", "doc 2: 2"]));
    let first = &s["processed_docs"][0];
    assert_eq!(first["source_node"], "process_documents");
    assert_eq!(first["index"], 0);
    assert_eq!(first["state"]["doc"], "a b c");
    assert_eq!(first["state"]["i"], 0);
    // Branch writes stay in their branch: the run state has no `words`.
    assert!(s.get("words").is_none(), "{s}");
    // The four events, as engine fan-out events.
    let kinds = ran.kinds();
    assert!(kinds.iter().any(|k| matches!(
        k,
        EventKind::FanOutStarted {
            branches: 3,
            max_concurrency: Some(2),
            ..
        }
    )));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_parallel_default_names_and_output() {
    // 004: "item_var ... (default: "item")", "index_var ... (default: "index")",
    // "output: State key to store collected results (default: "parallel_results")";
    // "Empty items list results in empty output (no branches executed)".
    let yaml = r#"
name: defaults
nodes:
  - name: each
    type: dynamic_parallel
    items: "{{ state.xs }}"
    steps:
      - name: sq
        run: |
          return {"sq": state["item"] * state["item"], "at": state["index"]}
"#;
    let s = run(yaml, json!({"xs": [2, 3]})).await.output().clone();
    let got: Vec<_> = s["parallel_results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["state"]["sq"].clone(), r["state"]["at"].clone()))
        .collect();
    assert_eq!(got, vec![(json!(4), json!(0)), (json!(9), json!(1))]);
    let s = run(yaml, json!({"xs": []})).await.output().clone();
    assert_eq!(s["parallel_results"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_parallel_keeps_failed_branches_unless_fail_fast() {
    // 004: "Branch errors are captured in results unless fail_fast cancels execution".
    let yaml = |fail_fast: bool| {
        format!(
            r#"
name: errors
nodes:
  - name: each
    type: dynamic_parallel
    items: "{{{{ state.xs }}}}"
    fail_fast: {fail_fast}
    steps:
      - name: inv
        run: |
          return {{"inv": 1 / state["item"]}}
"#
        )
    };
    let ran = run(&yaml(false), json!({"xs": [1, 0, 2]})).await;
    let results = ran.output()["parallel_results"].as_array().unwrap().clone();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["state"]["inv"], json!(1.0));
    assert_eq!(results[0]["success"], json!(true));
    // As TEA's ParallelFlowResult of a failed branch: its item and index as its state,
    // the message as its error, and the node's fields read as attributes in Python.
    let failed = &results[1];
    assert_eq!(failed["state"], json!({"item": 0, "index": 1}));
    assert_eq!(
        (&failed["success"], &failed["index"]),
        (&json!(false), &json!(1))
    );
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("ZeroDivisionError"),
        "{failed}"
    );
    assert_eq!(results[2]["state"]["inv"], json!(0.5));
    let ran = run(&yaml(true), json!({"xs": [1, 0, 2]})).await;
    assert_eq!(ran.result.status, RunStatus::Failed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_parallel_subgraph_mode_runs_a_file_per_item() {
    // 004: "Subgraph mode (subgraph:): Load and execute an external YAML file per item",
    // with "input:" mapping the item into the subgraph's state.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("analysis-workflow.yaml"),
        "name: analysis\nnodes:\n  - name: analyse\n    run: |\n      return {\"size\": len(state[\"data_source\"]), \"mode\": state[\"config\"][\"mode\"]}\n",
    )
    .unwrap();
    let yaml = r#"
name: per-source
nodes:
  - name: run_analysis_per_item
    type: dynamic_parallel
    items: "{{ state.data_sources }}"
    item_var: source
    max_concurrency: 3
    fail_fast: true
    subgraph: "./analysis-workflow.yaml"
    input:
      data_source: "{{ source }}"
      config: "{{ state.analysis_config }}"
    output: analysis_results
"#;
    let ran = run_in(
        yaml,
        json!({"data_sources": ["ab", "abcd"], "analysis_config": {"mode": "fast"}}),
        dir.path(),
    )
    .await;
    let r = &ran.output()["analysis_results"];
    assert_eq!(r[0]["state"]["size"], 2);
    assert_eq!(r[1]["state"]["size"], 4);
    assert_eq!(r[1]["state"]["mode"], "fast");
    assert_eq!(r[1]["index"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_error_names_the_line_of_the_yaml_file() {
    // docs/dialects/tea.md: an error in a `run:` body names the flow file's line, not a
    // line of the function Weft wraps the body in.
    let python = "name: lines\nnodes:\n  - name: ok\n    run: |\n      x = 1\n      return {\"x\": x}\n  - name: broken\n    run: |\n      y = 2\n\n      return {\"z\": undefined_name}\n";
    let ran = run(python, json!({})).await;
    let e = ran.result.error.clone().unwrap();
    assert!(
        e.message.contains("undefined_name") && e.message.ends_with("(line 11 of the flow file)"),
        "{}",
        e.message
    );
    assert_eq!(e.detail.as_deref().unwrap()["file_line"], 11);

    let lua = "name: lines\nnodes:\n  - name: broken\n    language: lua\n    run: |\n      local t = nil\n      return t.x\n";
    let e = run(lua, json!({})).await.result.error.clone().unwrap();
    assert!(
        e.message.contains("(line 7 of the flow file)"),
        "{}",
        e.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sibling_fan_in_continues_after_every_branch() {
    // tea-notes: "Newer files give `dynamic_parallel` a sibling `fan_in: NODE`: run
    // continues at that node once every branch has finished."
    let yaml = r#"
name: sibling
nodes:
  - name: each
    type: dynamic_parallel
    items: "{{ state.xs }}"
    fan_in: total
    steps:
      - name: double
        run: |
          return {"d": state["item"] * 2}
  - name: skipped
    run: |
      return {"skipped": True}
  - name: total
    run: |
      return {"total": sum(r["state"]["d"] for r in state["parallel_results"])}
"#;
    let s = run(yaml, json!({"xs": [1, 2, 3]})).await.output().clone();
    assert_eq!(s["total"], 12);
    assert!(s.get("skipped").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dynamic_parallel_s_fan_in_node_sees_its_results_as_parallel_results() {
    // TEA's engine passes `parallel_results` to a code node whenever the state holds
    // them (stategraph.py: `if "parallel_results" in state`), so a dynamic_parallel's
    // fan-in node reads them by that name, as parallel edges' fan-in nodes do; also
    // under a custom `output` key. Each result holds its branch's whole state (steps
    // mode), the list included: the sandbox makes room for the arguments it is given.
    let yaml = r#"
name: sibling
nodes:
  - name: each
    type: dynamic_parallel
    items: "{{ state.xs }}"
    fan_in: total
    output: doubled
    steps:
      - name: double
        run: |
          return {"d": state["item"] * 2}
  - name: total
    run: |
      return {"total": sum(r["state"]["d"] for r in parallel_results), "seen": len(parallel_results)}
"#;
    let xs: Vec<u32> = (0..1000).collect();
    let s = run(yaml, json!({ "xs": xs })).await.output().clone();
    assert_eq!(s["total"], 999 * 1000);
    assert_eq!(s["seen"], 1000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_edges_meet_at_a_fan_in_node_with_parallel_results() {
    // 004, Fan-In Nodes: "parallel_results contains list of states from parallel flows";
    // tea-notes: "the branches run concurrently from a copy of the state; the fan-in node is
    // marked `fan_in: true` and sees `parallel_results`".
    let yaml = r#"
name: fan
nodes:
  - name: start
    run: |
      return {"topic": "tea"}
  - name: left
    run: |
      return {"data": "left " + state["topic"]}
  - name: right
    run: |
      return {"data": "right " + state["topic"]}
  - name: aggregate
    fan_in: true
    run: |
      all_data = [r.get("data") for r in parallel_results]
      combined = "\n".join(all_data)
      return {"combined_results": combined}
edges:
  - {from: __start__, to: start}
  - {from: start, to: left, type: parallel, fan_in: aggregate}
  - {from: start, to: right, type: parallel, fan_in: aggregate}
  - {from: left, to: aggregate}
  - {from: right, to: aggregate}
  - {from: aggregate, to: __end__}
"#;
    let s = run(yaml, json!({})).await.output().clone();
    assert_eq!(s["combined_results"], "left tea\nright tea");
    // Each branch wrote `data` into its own copy of the state.
    assert!(s.get("data").is_none(), "{s}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goto_jumps_and_conditional_goto_loops_back() {
    // tea-notes: "`goto: NAME` jumps to a node; `goto: __end__` ends the run" and
    // "rules are tried in order, the first whose `if` is true wins, a rule without `if`
    // always matches. The node's result is merged into `state` before the rules are
    // evaluated. A rule may point back to an earlier node (a loop)."
    let yaml = r#"
name: goto
nodes:
  - name: draft
    run: |
      return {"drafts": state.get("drafts", 0) + 1}
  - name: review
    run: |
      return {"good": state["drafts"] >= 3}
    goto:
      - if: "state.good"
        to: publish
      - to: draft
  - name: skipped
    run: |
      return {"skipped": True}
  - name: publish
    run: |
      return {"published": True}
    goto: __end__
  - name: never
    run: |
      return {"never": True}
"#;
    let s = run(yaml, json!({})).await.output().clone();
    assert_eq!(s, json!({"drafts": 3, "good": true, "published": true}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_chain_in_list_order_without_navigation() {
    // tea-notes: "Nodes run in the order listed. After a node: its `goto` if it has one,
    // else the next node in the list, else the end."
    let yaml = r#"
name: chain
nodes:
  - name: a
    run: |
      return {"trail": state.get("trail", "") + "a"}
  - name: b
    run: |
      return {"trail": state["trail"] + "b"}
  - name: c
    run: |
      return {"trail": state["trail"] + "c"}
"#;
    assert_eq!(run(yaml, json!({})).await.output()["trail"], "abc");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_conditional_edges() {
    // tea-notes: "conditional edges with `condition: {type: expression, value: EXPR}` plus
    // `when: true|false`, or a bare `when: EXPR` (a leading `!` negates a variable name)".
    let yaml = r#"
name: legacy
nodes:
  - name: check
    run: |
      return {"ok": state["n"] > 0}
  - name: positive
    run: |
      return {"sign": "+"}
  - name: negative
    run: |
      return {"sign": "-"}
  - name: note
    run: |
      return {"noted": True}
edges:
  - {from: __start__, to: check}
  - from: check
    to: positive
    condition: {type: expression, value: "state.ok"}
    when: true
  - from: check
    to: negative
    condition: {type: expression, value: "state.ok"}
    when: false
  - {from: positive, to: note, when: "ok"}
  - {from: positive, to: __end__}
  - {from: negative, to: __end__, when: "!ok"}
  - {from: note, to: __end__}
"#;
    assert_eq!(
        run(yaml, json!({"n": 3})).await.output(),
        &json!({"n": 3, "ok": true, "sign": "+", "noted": true})
    );
    assert_eq!(
        run(yaml, json!({"n": -3})).await.output(),
        &json!({"n": -3, "ok": false, "sign": "-"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goto_takes_precedence_over_edges() {
    // tea-notes: "Precedence: a node's `goto`, then the legacy `edges` section, then
    // implicit chaining."
    let yaml = r#"
name: precedence
nodes:
  - name: a
    run: |
      return {"trail": "a"}
    goto: c
  - name: b
    run: |
      return {"trail": state["trail"] + "b"}
  - name: c
    run: |
      return {"trail": state["trail"] + "c"}
edges:
  - {from: a, to: b}
"#;
    assert_eq!(run(yaml, json!({})).await.output()["trail"], "ac");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_cycle_stops_at_the_step_limit() {
    // The issue: "cycles are bounded by a configurable limit with a clear error".
    let yaml = r#"
name: forever
nodes:
  - name: a
    run:
      type: expression
      value: "1"
      output_key: x
    goto: a
"#;
    let ran = run(yaml, json!({})).await;
    assert_eq!(ran.result.status, RunStatus::Failed);
    let e = ran.result.error.unwrap();
    assert_eq!(e.kind.as_str(), "limit");
    assert!(e.message.contains("more than 1000 times"), "{}", e.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_chain_without_cycles_never_meets_the_step_limit() {
    // The limit counts steps around cycles: 5,000 nodes in a row each run once.
    let mut yaml = String::from("name: chain\nnodes:\n");
    for i in 0..5000 {
        yaml.push_str(&format!(
            "  - name: n{i}\n    run:\n      type: expression\n      value: \"{i}\"\n      output_key: last\n"
        ));
    }
    let ran = run(&yaml, json!({})).await;
    assert_eq!(
        ran.result.status,
        RunStatus::Completed,
        "{:?}",
        ran.result.error
    );
    assert_eq!(ran.state["last"], json!(4999));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn templates_see_state_variables_and_python_style_calls() {
    // tea-notes: "Conditions and `{{ ... }}` templates ... over `state`, `variables`,
    // `secrets`"; "Python-style `state.get('k', default)` and `state["k"]` appear in real
    // files and must work."
    let dir = tempfile::tempdir().unwrap();
    let yaml = r#"
name: templates
variables:
  folder: notes
nodes:
  - name: write
    uses: file.write
    with:
      path: "{{ variables.folder }}/{{ state['name'] }}.txt"
      content: "{{ state.get('greeting', 'hi') }} {{ state.name }}"
    output: written
  - name: read
    uses: file.read
    with:
      path: "{{ state.written.path }}"
    output: text
"#;
    let s = run_in(yaml, json!({"name": "ada"}), dir.path())
        .await
        .output()
        .clone();
    assert_eq!(s["text"], "hi ada");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes/ada.txt")).unwrap(),
        "hi ada"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llm_tools_runs_the_mapped_action_for_each_call_and_reports_the_calls() {
    // The issue: "`uses` + `with` + `output` actions (at least `llm.call` and `llm.stream`
    // returning `{content, usage}` as The Edge Agent does, `llm.tools`, ...)". The Edge
    // Agent's `llm.tools`: tools `{name, description, parameters: {arg: {type, required}},
    // action}`, `max_tool_rounds`, and a result `{content, tool_calls, tool_results,
    // rounds}`.
    use weft_fakes::{FakeServer, Reply, Wire};
    let server = FakeServer::start(
        Wire::OpenAi,
        vec![
            Reply::tool_call("read_note", json!({"path": "notes/today.txt"})),
            Reply::text("Your note says: buy tea."),
        ],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("notes")).unwrap();
    std::fs::write(dir.path().join("notes/today.txt"), "buy tea").unwrap();
    let yaml = format!(
        r#"
name: agent
nodes:
  - name: agent
    uses: llm.tools
    with:
      model: gpt-4o-mini
      api_base: "{}"
      prompt: "What does {{{{ state.which }}}} say?"
      max_tool_rounds: 3
      tools:
        - name: read_note
          description: Read a note file
          parameters:
            path: {{type: string, description: The note's path, required: true}}
          action: file.read
    output: answer
"#,
        server.base_url()
    );
    let s = run_in(&yaml, json!({"which": "today's note"}), dir.path())
        .await
        .output()
        .clone();
    let answer = &s["answer"];
    assert_eq!(answer["content"], "Your note says: buy tea.");
    assert_eq!(answer["rounds"], 1);
    assert_eq!(answer["tool_calls"][0]["name"], "read_note");
    assert_eq!(
        answer["tool_calls"][0]["arguments"]["path"],
        "notes/today.txt"
    );
    assert_eq!(answer["tool_results"][0]["result"], "buy tea");
    assert_eq!(
        answer["tool_results"][0]["tool_call_id"],
        answer["tool_calls"][0]["id"]
    );
    let sent = server.received();
    let offered = &sent[0].body["tools"][0]["function"];
    assert_eq!(offered["name"], "read_note");
    assert_eq!(offered["parameters"]["required"], json!(["path"]));
    assert_eq!(
        offered["parameters"]["properties"]["path"]["type"],
        "string"
    );
    // The second request carries the action's result back to the model.
    assert!(sent[1].body["messages"].to_string().contains("buy tea"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llm_tools_asks_for_the_answer_once_its_tool_rounds_are_spent() {
    // The Edge Agent's `llm.tools`: "max_tool_rounds: Maximum tool call rounds". Once
    // they are spent the model is asked once more with no tool offered (docs/models.md).
    use weft_fakes::{FakeServer, Reply, Wire};
    let server = FakeServer::start(
        Wire::OpenAi,
        vec![
            Reply::tool_call("now", json!({"ms": 1})),
            Reply::tool_call("now", json!({"ms": 1})),
            Reply::text("Done waiting."),
        ],
    )
    .await;
    let yaml = format!(
        r#"
name: rounds
nodes:
  - name: agent
    uses: llm.tools
    with:
      model: gpt-4o-mini
      api_base: "{}"
      prompt: Wait twice, then say so.
      max_tool_rounds: 2
      tools:
        - {{name: now, description: Wait a moment, parameters: {{ms: {{type: integer, required: true}}}}, action: time.sleep}}
    output: reply
"#,
        server.base_url()
    );
    let s = run(&yaml, json!({})).await.output().clone();
    assert_eq!(s["reply"]["content"], "Done waiting.");
    assert_eq!(s["reply"]["rounds"], 2);
    let sent = server.received();
    assert_eq!(sent.len(), 3);
    assert!(sent[1].body.get("tools").is_some());
    assert!(
        sent[2].body.get("tools").is_none(),
        "the last turn offers no tool"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llm_tools_tool_choice_makes_the_first_turn_call_that_tool() {
    // The Edge Agent's `llm.tools`: "tool_choice: auto # "auto" (default), "none", or
    // specific tool".
    use weft_fakes::{FakeServer, Reply, Wire};
    let server = FakeServer::start(
        Wire::OpenAi,
        vec![
            Reply::tool_call("parse", json!({"text": "{\"a\": 1}"})),
            Reply::text("a is 1"),
        ],
    )
    .await;
    let yaml = format!(
        r#"
name: choice
nodes:
  - name: agent
    uses: llm.tools
    with:
      model: gpt-4o-mini
      api_base: "{}"
      prompt: What is a?
      tool_choice: parse
      tools:
        - {{name: parse, description: Parse JSON text, parameters: {{text: {{type: string, required: true}}}}, action: json.parse}}
        - {{name: wait, description: Wait, parameters: {{ms: {{type: integer}}}}, action: time.sleep}}
    output: reply
"#,
        server.base_url()
    );
    let s = run(&yaml, json!({})).await.output().clone();
    assert_eq!(s["reply"]["content"], "a is 1");
    assert_eq!(s["reply"]["tool_results"][0]["result"], "{\"a\":1}");
    let sent = server.received();
    assert_eq!(sent[0].body["tool_choice"]["function"]["name"], "parse");
    assert_eq!(
        sent[0].body["tools"].as_array().map(Vec::len),
        Some(2),
        "both tools offered"
    );
    assert!(
        sent[1].body.get("tool_choice").is_none(),
        "then the model decides"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llm_call_response_format_checks_and_repairs_the_json_answer() {
    // tea-notes: "`uses: llm.call` with `with: {model, messages: [{role, content}],
    // temperature?, provider?, api_base?, response_format?}`". An answer that does not
    // match the schema is sent back once with the reason (docs/dialects/tea.md).
    use weft_fakes::{FakeServer, Reply, Wire};
    let server = FakeServer::start(
        Wire::OpenAi,
        vec![
            Reply::text("{\"city\": 7}"),
            Reply::text("{\"city\": \"Paris\"}"),
        ],
    )
    .await;
    let yaml = format!(
        r#"
name: ask
nodes:
  - name: ask
    uses: llm.call
    with:
      model: gpt-4o-mini
      api_base: "{}"
      prompt: Capital of France, as JSON?
      response_format:
        type: json_schema
        json_schema:
          name: capital
          schema: {{type: object, properties: {{city: {{type: string}}}}, required: [city]}}
    output: answer
"#,
        server.base_url()
    );
    let s = run(&yaml, json!({})).await.output().clone();
    // tea-notes: it "returns `{"content": TEXT, ...}`": the checked answer, as text.
    assert_eq!(s["answer"]["content"], json!("{\"city\":\"Paris\"}"));
    assert!(s["answer"]["usage"].is_object(), "{s}");
    let sent = server.received();
    assert_eq!(sent.len(), 2, "one repair round");
    assert!(sent[1].body["messages"].to_string().contains("not valid"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_actions_stay_in_their_directory() {
    // The issue: "`file.read`/`file.write` confined to a configured directory".
    let yaml = r#"
name: escape
nodes:
  - name: read
    uses: file.read
    with: {path: "../../etc/passwd"}
    output: text
"#;
    let ran = run(yaml, json!({})).await;
    assert_eq!(ran.result.status, RunStatus::Failed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_parse_and_an_output_key() {
    // 004, Method 3: "output: - State key for result (optional)".
    let yaml = r#"
name: parse
nodes:
  - name: parse
    uses: json.parse
    with: {text: "{{ state.raw }}"}
    output: parsed
"#;
    let s = run(yaml, json!({"raw": "{\"a\": [1, 2]}"}))
        .await
        .output()
        .clone();
    assert_eq!(s["parsed"], json!({"a": [1, 2]}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_get_in_dynamic_parallel_action_mode() {
    // 004, Action mode: "uses: http.get" with "url: "{{ url }}"" per item.
    let base = http_server(r#"{"ok": true}"#).await;
    let yaml = format!(
        r#"
name: fetch
variables:
  api_url: "{base}"
nodes:
  - name: fetch_all_urls
    type: dynamic_parallel
    items: "{{{{ state.paths }}}}"
    item_var: path
    max_concurrency: 10
    action:
      uses: http.get
      with:
        url: "{{{{ variables.api_url }}}}/{{{{ path }}}}"
        params: {{q: "tea"}}
      output: response
    output: responses
"#
    );
    let s = run(&yaml, json!({"paths": ["a", "b"]}))
        .await
        .output()
        .clone();
    let r = &s["responses"];
    assert_eq!(r[0]["state"]["response"]["body"], json!({"ok": true}));
    assert_eq!(r[0]["state"]["response"]["status"], 200);
    assert_eq!(
        r[1]["state"]["response"]["headers"]["x-request"],
        "GET /b?q=tea HTTP/1.1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_nodes_see_the_keys_they_read_as_in_the_whole_state() {
    // A node whose code reads `state` only by literal keys is sent only those keys
    // (docs/dialects/tea.md); what it sees of them, missing ones included, is the same.
    let yaml = r#"
name: reads
nodes:
  - name: picked
    run: |
      return {"a2": state["a"] * 2, "d": state.get("nope", 5), "n": state.get("n")}
  - name: whole
    run: |
      return {"keys": sorted(list(state.keys()))}
"#;
    let s = run(yaml, json!({"a": 4, "big": [1, 2, 3]}))
        .await
        .output()
        .clone();
    assert_eq!(s["a2"], 8);
    assert_eq!(s["d"], 5);
    assert_eq!(s["n"], json!(null));
    assert_eq!(s["keys"], json!(["a", "a2", "big", "d", "n"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_parallel_action_mode_results_hold_what_the_action_wrote() {
    // TEA's engine (yaml_nodes.py, `run_action`): an action-mode branch returns the
    // action's result under `output` (or each key of an `output` mapping, or the result
    // itself, `{result: ...}` when it is no mapping), then the item and index; steps
    // mode returns the branch's whole state. The run's other keys stay out of it.
    let yaml = r#"
name: parse
nodes:
  - name: by_key
    type: dynamic_parallel
    items: "{{ state.texts }}"
    item_var: text
    action:
      uses: json.parse
      with: {text: "{{ text }}"}
      output: parsed
    output: keyed
  - name: merged
    type: dynamic_parallel
    items: "{{ state.texts }}"
    action:
      uses: json.parse
      with: {text: "{{ item }}"}
    output: merged
  - name: mapped
    type: dynamic_parallel
    items: "{{ state.texts }}"
    index_var: at
    action:
      uses: json.parse
      # Reads the branch's state: the item and index are state keys there, as in TEA.
      with: {text: "{{ state.item }}"}
      output: {doubled: "{{ result * 2 if result is number else state.label }}"}
    output: mapped
"#;
    let s = run(yaml, json!({"texts": ["1", "{\"a\": 2}"], "label": "x"}))
        .await
        .output()
        .clone();
    assert_eq!(
        s["keyed"][0]["state"],
        json!({"parsed": 1, "text": "1", "index": 0})
    );
    assert_eq!(
        s["keyed"][1]["state"],
        json!({"parsed": {"a": 2}, "text": "{\"a\": 2}", "index": 1})
    );
    assert_eq!(s["keyed"][1]["source_node"], "by_key");
    assert_eq!(s["keyed"][1]["success"], true);
    assert_eq!(
        s["merged"][0]["state"],
        json!({"result": 1, "item": "1", "index": 0})
    );
    assert_eq!(
        s["merged"][1]["state"],
        json!({"a": 2, "item": "{\"a\": 2}", "index": 1})
    );
    assert_eq!(
        s["mapped"][0]["state"],
        json!({"doubled": 2, "item": "1", "at": 0})
    );
    assert_eq!(s["mapped"][1]["state"]["doubled"], "x");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llm_call_returns_content_and_usage_from_a_real_server() {
    // tea-notes: "`uses: llm.call` with `with: {model, messages: [{role, content}], ...}`
    // ... returns `{"content": TEXT, "usage": {"prompt_tokens": N, "completion_tokens": N}}`,
    // stored under `output`"; "an `api_base` selects the endpoint".
    use weft_fakes::{FakeServer, Reply, Wire};
    let server = FakeServer::start(Wire::OpenAi, vec![Reply::text("Paris.")]).await;
    let yaml = format!(
        r#"
name: ask
nodes:
  - name: ask
    uses: llm.call
    with:
      model: gpt-4o-mini
      api_base: "{}"
      temperature: 0
      messages:
        - role: system
          content: Answer briefly.
        - role: user
          content: "Capital of {{{{ state.country }}}}?"
    output: answer
"#,
        server.base_url()
    );
    let s = run(&yaml, json!({"country": "France"}))
        .await
        .output()
        .clone();
    assert_eq!(s["answer"]["content"], "Paris.");
    // The model the file names, not the alias Weft makes for the `api_base` route.
    assert_eq!(s["answer"]["model"], "gpt-4o-mini");
    assert!(s["answer"]["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    assert!(s["answer"]["usage"]["completion_tokens"].is_u64());
    let sent = server.received();
    assert_eq!(sent[0].body["model"], "gpt-4o-mini");
    let text = sent[0].body["messages"].to_string();
    assert!(
        text.contains("Capital of France?") && text.contains("Answer briefly."),
        "{text}"
    );
}
