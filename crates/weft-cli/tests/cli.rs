//! The `weft` binary as scripts use it: real processes, a real SQLite file, exit codes.

use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

mod support;

use support::{Env, code, example, stderr, stdout_json};

#[test]
fn every_example_runs_offline() {
    let env = Env::new();
    for (file, expected_code) in [
        ("hello.yaml", 0),
        ("fan-out.yaml", 0),
        ("refine-loop.yaml", 0),
        ("support-graph.yaml", 0),
        ("code-blocks.yaml", 0),
        ("prolog-rules.yaml", 0),
        ("local-model.yaml", 0),
        ("semantic-search.yaml", 0),
        ("release-approval.yaml", 3),
    ] {
        let o = env.weft(&["run", &example(file), "--json", "-q"]);
        assert_eq!(code(&o), expected_code, "{file}: {}", stderr(&o));
        let v = stdout_json(&o);
        assert!(v["run_id"].is_string());
        if file == "semantic-search.yaml" {
            // The local model's vectors put the note about the cat first.
            assert_eq!(
                v["output"]["best"], "The cat slept on the warm windowsill all afternoon.",
                "{v}"
            );
        }
    }
}

/// Runs the example `file` with `input`, converts it to native YAML, runs that too, and
/// checks both give the same output, which it returns.
fn run_and_round_trip(env: &Env, file: &str, input: &str) -> Value {
    let o = env.weft(&["run", &example(file), "--json", "-q", "--input", input]);
    assert_eq!(code(&o), 0, "{file}: {}", stderr(&o));
    let v = stdout_json(&o);
    // Round trip: the native conversion runs to the same output.
    let c = env.weft(&["convert", &example(file)]);
    assert_eq!(code(&c), 0, "{file}: {}", stderr(&c));
    let native = env.path("converted.yaml");
    std::fs::write(&native, &c.stdout).unwrap();
    let o = env.weft(&[
        "run",
        native.to_str().unwrap(),
        "--json",
        "-q",
        "--input",
        input,
    ]);
    assert_eq!(code(&o), 0, "{file} converted: {}", stderr(&o));
    assert_eq!(stdout_json(&o)["output"], v["output"], "{file} converted");
    v["output"].clone()
}

#[test]
fn tea_examples_run_convert_to_native_identically_and_bad_files_exit_2() {
    let env = Env::new();
    for (file, input, key, expected) in [
        (
            "tea/counter.yaml",
            r#"{"count": 0, "sum": 0}"#,
            "sum",
            json!(15),
        ),
        (
            "tea/review-loop.yaml",
            r#"{"feature": "retries"}"#,
            "published",
            json!("[Weft] Now Weft supports retries that resume from the failing step."),
        ),
        (
            "tea/fan-out.yaml",
            r#"{"documents": ["a b", "c"]}"#,
            "ranking",
            json!([{"doc": "a b", "score": 23}, {"doc": "c", "score": 11}]),
        ),
        (
            "tea/ask-local.yaml",
            r#"{"country": "France"}"#,
            "mentions_paris",
            json!(true),
        ),
        // llm.tools on the local model: whether it calls the tool is the model's choice;
        // that it ends with an answer within its rounds is Weft's.
        (
            "tea/notes-agent.yaml",
            r#"{"note": "today.txt"}"#,
            "answered",
            json!(true),
        ),
    ] {
        let output = run_and_round_trip(&env, file, input);
        assert_eq!(output[key], expected, "{file}: {output}");
    }
    // spec 004's event names, in the events file beside the engine's own.
    let events = env.path("events.jsonl");
    let o = env.weft(&[
        "run",
        &example("tea/counter.yaml"),
        "-q",
        "--input",
        r#"{"count": 0, "sum": 0}"#,
        "--events",
        events.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let named: Vec<Value> = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"].as_str().is_some_and(|t| t.starts_with("Loop")))
        .collect();
    assert_eq!(named.len(), 7, "{named:?}");
    assert_eq!(named[0]["type"], "LoopStart");
    assert_eq!(named[0]["node_name"], "count_loop");
    assert_eq!(named[0]["max_iterations"], 10);
    assert_eq!(named[1]["type"], "LoopIteration");
    assert_eq!(named[1]["condition_result"], true);
    assert_eq!(named[6]["type"], "LoopEnd");
    assert_eq!(named[6]["iterations_completed"], 5);
    assert_eq!(named[6]["exit_reason"], "condition_false");
    let o = env.weft(&[
        "run",
        &example("tea/fan-out.yaml"),
        "-q",
        "--input",
        r#"{"documents": ["a b", "c"]}"#,
        "--events",
        events.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let named: Vec<Value> = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| {
            e["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("DynamicParallel"))
        })
        .collect();
    let kinds: Vec<&str> = named.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"DynamicParallelStart"));
    assert_eq!(kinds.last(), Some(&"DynamicParallelEnd"));
    assert_eq!(kinds.len(), 6, "{kinds:?}");
    assert_eq!(named[0]["item_count"], 2);
    assert_eq!(named[5]["total_branches"], 2);
    assert_eq!(named[5]["successful"], 2);
    let starts: Vec<&Value> = named
        .iter()
        .filter(|e| e["type"] == "DynamicParallelBranchStart")
        .collect();
    assert!(
        starts.iter().any(|e| e["index"] == 1 && e["item"] == "c"),
        "{starts:?}"
    );

    let bad = env.dir.path().join("bad.yaml");
    std::fs::write(&bad, "name: t\nnodes:\n  - name: a\n    goto: b\n").unwrap();
    let o = env.weft(&["run", bad.to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("bad.yaml:4:"), "{}", stderr(&o));
}

#[test]
fn blocks_examples_run_convert_to_native_identically_and_bad_files_exit_2() {
    let env = Env::new();
    let people = r#"{"people": [{"first_name": "Ada", "last_name": "Lovelace", "age": 36}, {"first_name": "Alan", "last_name": "Turing", "age": 17}], "adult_at": 18}"#;
    let reviews = r#"{"reviews": ["Great battery, fast shipping.", "Broke after a day."], "product": "headphones"}"#;
    type Check<'a> = &'a dyn Fn(&Value);
    let checks: [(&str, &str, Check); 3] = [
        ("blocks/people.yaml", people, &|out| {
            assert_eq!(
                out,
                &json!([
                    {"full_name": "Ada Lovelace", "is_adult": true},
                    {"full_name": "Alan Turing", "is_adult": false}
                ])
            )
        }),
        (
            "blocks/word-stats.json",
            r#"{"text": "The cat saw the other cat. The end!", "title": "a tiny story"}"#,
            &|out| {
                assert_eq!(
                    out,
                    &json!({
                        "summary": "8 words (5 distinct), longest: other, for a tiny story",
                        "top": [["the", 3], ["cat", 2], ["end", 1]]
                    })
                )
            },
        ),
        // The local model's opinions are not asserted; the grammar's guarantee is.
        ("blocks/classify-local.yaml", reviews, &|out| {
            let items = out.as_array().expect("a list");
            assert_eq!(items.len(), 2, "{out}");
            for item in items {
                assert!(
                    item["sentiment"].is_string() && item["positive"].is_boolean(),
                    "{out}"
                );
                assert_eq!(item.as_object().unwrap().len(), 2, "{out}");
            }
        }),
    ];
    for (file, input, check) in checks {
        check(&run_and_round_trip(&env, file, input));
        // And it draws.
        let g = env.weft(&["graph", &example(file)]);
        assert_eq!(code(&g), 0, "{file}: {}", stderr(&g));
    }
    let bad = env.dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "name: t\nroot:\n  type: h\n  children:\n    - {step_id: a, type: lmm}\n",
    )
    .unwrap();
    let o = env.weft(&["run", bad.to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("bad.yaml:5:") && stderr(&o).contains("did you mean `llm`?"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn json_output_has_the_documented_shape() {
    let env = Env::new();
    let o = env.weft(&[
        "run",
        &example("hello.yaml"),
        "--json",
        "-q",
        "--input",
        r#"{"name": "Grace"}"#,
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v = stdout_json(&o);
    for key in ["run_id", "status", "output", "state", "error"] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    assert_eq!(v["status"], "completed");
    assert_eq!(v["output"]["for"], "Grace");
}

#[test]
fn a_tea_interrupt_pauses_the_run_until_weft_approve_resumes_it() {
    // Issue 20: TEA's `interrupt: before` is an approval that `weft approve` answers.
    let env = Env::new();
    let flow = env.write(
        "interrupt.yaml",
        "name: review\nnodes:\n  - name: draft\n    run: |\n      return {\"draft\": \"v1\"}\n  - name: publish\n    interrupt: before\n    run: |\n      return {\"published\": True}\n",
    );
    let o = env.weft(&["run", flow.to_str().unwrap(), "--json", "-q"]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    let id = stdout_json(&o)["run_id"].as_str().unwrap().to_owned();
    let o = env.weft(&["approve", &id, "--reject", "--json", "-q"]);
    assert_ne!(code(&o), 0, "an interrupt is only resumed");
    assert!(stderr(&o).contains("not a decision"), "{}", stderr(&o));
    let o = env.weft(&["approve", &id, "--json", "-q"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v = stdout_json(&o);
    assert_eq!(v["output"], json!({"draft": "v1", "published": true}));
}

#[test]
fn an_approval_pauses_one_process_and_another_continues_it() {
    let env = Env::new();
    let o = env.weft(&["run", &example("release-approval.yaml"), "--json", "-q"]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    let v = stdout_json(&o);
    assert_eq!(v["status"], "paused");
    let id = v["run_id"].as_str().unwrap().to_owned();
    let shown = stdout_json(&env.weft(&["runs", "show", &id]));
    assert_eq!(shown["status"], "paused");

    let o = env.weft(&["approve", &id, "--json", "-q"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v = stdout_json(&o);
    assert_eq!(v["output"]["released"], true);

    let o = env.weft(&["run", &example("release-approval.yaml"), "--json", "-q"]);
    let id = stdout_json(&o)["run_id"].as_str().unwrap().to_owned();
    let o = env.weft(&[
        "approve",
        &id[..24],
        "--reject",
        "--note",
        "tests are red",
        "--json",
        "-q",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v = stdout_json(&o);
    assert_eq!(v["output"]["released"], false);
    assert_eq!(v["output"]["why"], "tests are red");

    // A finished run has nothing to approve.
    let o = env.weft(&["approve", &id]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("not paused"), "{}", stderr(&o));
}

const SLOW_APPEND: &str = r#"weft: 1
name: slow-append
root:
  loop:
    max_iterations: 5
    body:
      sequence:
        - id: write
          action: {uses: file.append, with: {path: log.txt, content: "step {{ iteration }}\n"}}
        - id: wait
          action: {uses: time.sleep, with: {ms: 400}}
"#;

#[test]
fn kill_9_then_resume_finishes_without_repeating_a_step() {
    let env = Env::new();
    let flow = env.write("slow.yaml", SLOW_APPEND);
    let log = env.path("log.txt");
    let mut child = env
        .cmd()
        .args(["run", flow.to_str().unwrap(), "-q"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let lines = std::fs::read_to_string(&log)
            .map(|t| t.lines().count())
            .unwrap_or(0);
        if lines >= 2 {
            break;
        }
        assert!(Instant::now() < deadline, "the run never wrote two lines");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Past the moment the second write is journaled (it is committed right after its
    // effect; a kill inside that window repeats the write, as docs/durability.md says),
    // and well inside the 400 ms wait that follows it.
    std::thread::sleep(Duration::from_millis(150));
    // SIGKILL: no chance to clean up, exactly like a crash.
    child.kill().unwrap();
    child.wait().unwrap();
    let list = env.weft(&["runs", "list", "--json"]);
    let run: Value = serde_json::from_str(
        String::from_utf8_lossy(&list.stdout)
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(run["status"], "running");
    let id = run["run_id"].as_str().unwrap();

    let o = env.weft(&["runs", "resume", id, "-q"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text, "step 0\nstep 1\nstep 2\nstep 3\nstep 4\n");
}

const RETRYABLE: &str = r#"weft: 1
name: retryable
root:
  sequence:
    - id: record
      action: {uses: file.append, with: {path: out.txt, content: "recorded\n"}}
    - id: read
      action: {uses: file.read, with: {path: needed.txt}}
"#;

/// `(type, nodeId)` of a graph run's log, as `--json` prints it.
/// The `type` of every line of an events file that starts with `prefix`, in order.
fn event_types(events: &Path, prefix: &str) -> Vec<String> {
    std::fs::read_to_string(events)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter_map(|e| e["type"].as_str().map(str::to_owned))
        .filter(|t| t.starts_with(prefix))
        .collect()
}

fn graph_log(v: &Value) -> Vec<(String, String)> {
    v["logs"]
        .as_array()
        .expect("a log")
        .iter()
        .map(|l| {
            (
                l["type"].as_str().unwrap_or("").to_owned(),
                l["nodeId"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

#[test]
fn graph_examples_pause_continue_in_another_process_convert_and_draw() {
    let env = Env::new();
    // Routing by keyword, with a concurrent branch; the run input replaces initialInput.
    let out = run_and_round_trip(&env, "graph/keyword-router.json", r#""Reset my PASSWORD""#);
    assert_eq!(out, "Reset my PASSWORD");
    let o = env.weft(&["run", &example("graph/keyword-router.json"), "--json", "-q"]);
    let log = graph_log(&stdout_json(&o));
    assert!(
        log.contains(&("step_start".into(), "billing".into())),
        "{log:?}"
    );
    assert!(
        log.contains(&("step_start".into(), "recorded".into())),
        "{log:?}"
    );

    // The release gate pauses (exit 3) in the editor's result shape, and a second process
    // continues it down the branch of the decision.
    for (decision, args, reached) in [
        ("approve", vec![], "released"),
        ("reject", vec!["--reject", "--note", "not today"], "stopped"),
    ] {
        let o = env.weft(&["run", &example("graph/release-gate.json"), "--json", "-q"]);
        assert_eq!(code(&o), 3, "{}", stderr(&o));
        let paused = stdout_json(&o);
        assert_eq!(paused["status"], "paused");
        assert_eq!(paused["waitingForInput"], true);
        assert_eq!(paused["currentNodeId"], "sign_off");
        assert_eq!(
            paused["state"]["previous_output"],
            "Deploy v2.1 to PRODUCTION"
        );
        assert_eq!(graph_log(&paused).last().unwrap().0, "wait_input");
        let id = paused["runId"].as_str().unwrap().to_owned();
        let mut approve = vec!["approve", id.as_str(), "--json", "-q"];
        approve.extend(args.iter().copied());
        let o = env.weft(&approve);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let done = stdout_json(&o);
        assert_eq!(done["status"], "completed");
        assert_eq!(done["waitingForInput"], false);
        assert_eq!(done["state"]["sign_off_approval"]["decision"], decision);
        let log = graph_log(&done);
        assert!(
            log.contains(&("step_start".into(), reached.into())),
            "{log:?}"
        );
        assert!(
            log.contains(&("input_received".into(), "sign_off".into())),
            "{log:?}"
        );
    }

    // The local model drafts the refund reply; the manager's approval waits for it.
    let o = env.weft(&["run", &example("graph/support-triage.json"), "--json", "-q"]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    let paused = stdout_json(&o);
    assert_eq!(paused["currentNodeId"], "manager_ok");
    let draft = paused["state"]["refund_reply"]
        .as_str()
        .expect("a drafted reply");
    assert!(!draft.trim().is_empty());
    let id = paused["runId"].as_str().unwrap().to_owned();
    let o = env.weft(&["approve", &id, "--json", "-q"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        stdout_json(&o)["output"],
        draft,
        "the approved draft is the output"
    );

    // Converted to native YAML, the gate pauses and continues the same way.
    let c = env.weft(&["convert", &example("graph/release-gate.json")]);
    assert_eq!(code(&c), 0, "{}", stderr(&c));
    let native = env.write("gate.yaml", &String::from_utf8_lossy(&c.stdout));
    let o = env.weft(&["run", native.to_str().unwrap(), "--json", "-q"]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    let id = stdout_json(&o)["run_id"].as_str().unwrap().to_owned();
    let o = env.weft(&["approve", &id, "--json", "-q"]);
    assert_eq!(stdout_json(&o)["output"], "Deploy v2.1 to PRODUCTION");

    for file in [
        "graph/keyword-router.json",
        "graph/release-gate.json",
        "graph/support-triage.json",
    ] {
        let g = env.weft(&["graph", &example(file)]);
        assert_eq!(code(&g), 0, "{file}: {}", stderr(&g));
    }
    let bad = env.write(
        "bad.json",
        "{\n\"nodes\": [\n{\"id\": \"s\", \"type\": \"start\"},\n{\"id\": \"a\", \"type\": \"agnet\"}\n],\n\"connections\": []\n}\n",
    );
    let o = env.weft(&["run", bad.to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("bad.json:4:"), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("did you mean `agent`?"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn souls_examples_run_convert_to_native_identically_and_bad_files_exit_2() {
    let env = Env::new();
    let task = r#"{"instruction": "Report on the text", "metadata": {"text": "the cat saw the other cat"}}"#;
    let out = run_and_round_trip(&env, "souls/word-stats.yaml", task);
    assert_eq!(out, json!({"words": 6, "top": ["cat", "the"], "rounds": 2}));
    // The run state is the one the souls tool keeps.
    let o = env.weft(&[
        "run",
        &example("souls/word-stats.yaml"),
        "--json",
        "-q",
        "--input",
        task,
    ]);
    let state = &stdout_json(&o)["state"];
    assert_eq!(state["results"]["count"]["words"], 6);
    assert_eq!(
        state["shared_memory"]["rounds"].as_array().map(Vec::len),
        Some(2)
    );
    assert_eq!(state["metadata"]["text"], "the cat saw the other cat");

    // The local model: its words are not asserted, the workflow's shape is.
    let o = env.weft(&[
        "run",
        &example("souls/review-local.yaml"),
        "--json",
        "-q",
        "--input",
        r#""Write one sentence about tea.""#,
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let results = stdout_json(&o)["state"]["results"].clone();
    assert!(results["draft"].is_string(), "{results}");
    assert!(results["review"].is_string(), "{results}");
    assert!(
        results.get("publish").is_some() != results.get("note_rejection").is_some(),
        "one branch: {results}"
    );
    let o = env.weft(&[
        "run",
        &example("souls/briefing-local.yaml"),
        "--json",
        "-q",
        "--input",
        r#"{"instruction": "Brief the team", "context": "The office moves to Lyon in May."}"#,
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let results = stdout_json(&o)["state"]["results"].clone();
    assert!(
        results["brief.summary"].is_string() && results["brief.questions"].is_string(),
        "{results}"
    );
    assert_eq!(results["brief"].as_array().map(Vec::len), Some(2));
    assert!(results["combine"].is_string());

    // A soul's required tool runs (Python in the sandbox) before the local model answers.
    let events = env.path("souls-tools.jsonl");
    let o = env.weft(&[
        "run",
        &example("souls/tools-local.yaml"),
        "-q",
        "--input",
        r#""How many words are in: the cat saw the other cat""#,
        "--events",
        events.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout_json(&o)["answer"]
            .as_str()
            .is_some_and(|a| !a.is_empty()),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let called: Vec<Value> = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "tool_called")
        .collect();
    assert_eq!(called[0]["tool"], "word_stats", "{called:?}");
    assert!(called[0]["arguments"]["text"].is_string(), "{called:?}");

    for file in [
        "souls/word-stats.yaml",
        "souls/review-local.yaml",
        "souls/briefing-local.yaml",
        "souls/tools-local.yaml",
    ] {
        let g = env.weft(&["graph", &example(file)]);
        assert_eq!(code(&g), 0, "{file}: {}", stderr(&g));
    }
    let bad = env.write(
        "bad-souls.yaml",
        "version: \"1.0\"\nblocks:\n  a:\n    type: lineal\nworkflow: {name: w, entry: a}\n",
    );
    let o = env.weft(&["run", bad.to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("bad-souls.yaml:4:"), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("did you mean `linear`?"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_retried_tea_run_writes_the_spec_event_names_too() {
    // Spec 004's loop events for a run that continues in a second process: its events
    // file names them as a first run's does, from the view stored with the run, even
    // with the flow file moved away.
    let env = Env::new();
    let flow = env.write(
        "loop.yaml",
        "name: retry-loop\nnodes:\n  - name: wait_loop\n    type: while_loop\n    condition: \"state.get('count', 0) < 2\"\n    max_iterations: 5\n    body:\n      - name: read\n        uses: file.read\n        with: {path: ready.txt}\n        output: ready\n      - name: step\n        run: |\n          return {\"count\": state.get(\"count\", 0) + 1}\n",
    );
    let o = env.weft(&["run", flow.to_str().unwrap(), "--json", "-q"]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let id = stdout_json(&o)["run_id"].as_str().unwrap().to_owned();
    std::fs::rename(&flow, env.path("moved.yaml")).unwrap();

    env.write("ready.txt", "go");
    let events = env.path("events.jsonl");
    let o = env.weft(&[
        "runs",
        "retry",
        &id,
        "--json",
        "-q",
        "--events",
        events.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout_json(&o)["output"]["count"], 2);
    let kinds = event_types(&events, "Loop");
    assert_eq!(
        kinds.first().map(String::as_str),
        Some("LoopStart"),
        "{kinds:?}"
    );
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("LoopEnd"),
        "{kinds:?}"
    );
}

#[test]
fn a_failed_run_is_retried_from_its_failing_step_and_changed_flows_are_refused() {
    let env = Env::new();
    let flow = env.write("retry.yaml", RETRYABLE);
    let o = env.weft(&["run", flow.to_str().unwrap(), "--json", "-q"]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let v = stdout_json(&o);
    assert_eq!(v["error"]["path"], "root/read");
    let id = v["run_id"].as_str().unwrap().to_owned();

    env.write("needed.txt", "now it exists");
    let o = env.weft(&["runs", "retry", &id, "--json", "-q"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout_json(&o)["output"], "now it exists");
    assert_eq!(
        std::fs::read_to_string(env.path("out.txt")).unwrap(),
        "recorded\n"
    );

    // A second failed run, then the flow file changes: retry refuses unless told.
    std::fs::remove_file(env.path("needed.txt")).unwrap();
    let o = env.weft(&["run", flow.to_str().unwrap(), "--json", "-q"]);
    let id = stdout_json(&o)["run_id"].as_str().unwrap().to_owned();
    env.write(
        "retry.yaml",
        &RETRYABLE.replace("path: needed.txt", "path: other.txt"),
    );
    env.write("other.txt", "from the new flow");
    let o = env.weft(&["runs", "retry", &id, "-q"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("--allow-changed"), "{}", stderr(&o));
    let o = env.weft(&["runs", "retry", &id, "--allow-changed", "--json", "-q"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout_json(&o)["output"], "from the new flow");
    assert_eq!(
        std::fs::read_to_string(env.path("out.txt")).unwrap(),
        "recorded\nrecorded\n"
    );
}

#[test]
fn bad_input_gets_located_errors_and_exit_2_never_a_panic() {
    let env = Env::new();
    let cases: &[(&str, &str, &str)] = &[
        (
            "syntax.yaml",
            "weft: 1\nname: x\nroot: {sequence: [\n",
            "syntax.yaml:",
        ),
        (
            "kind.yaml",
            "weft: 1\nname: x\nroot:\n  sequence:\n    - lmm: {prompt: hi}\n",
            "kind.yaml:5:7: error: unknown key `lmm`",
        ),
        (
            "type.yaml",
            "weft: 1\nname: x\nroot:\n  loop: {max_iterations: many, body: {passthrough: {}}}\n",
            "kind.yaml:",
        ),
        (
            "ref.yaml",
            "weft: 1\nname: x\nroot: {graph: {entry: a, nodes: {a: {passthrough: {}}}, edges: [{from: a, to: b}]}}\n",
            "unknown node `b`",
        ),
        (
            "expr.yaml",
            "weft: 1\nname: x\nroot: {branch: {cases: [{when: 'x ==', then: {passthrough: {}}}]}}\n",
            "expr.yaml:3:",
        ),
        ("empty.yaml", "", "the file is empty"),
        ("list.yaml", "- 1\n- 2\n", "an object"),
        (
            "unknown.yaml",
            "hello: world\n",
            "cannot tell which dialect",
        ),
    ];
    for (name, text, expected) in cases {
        let f = env.write(name, text);
        let o = env.weft(&["run", f.to_str().unwrap(), "-q"]);
        assert_eq!(code(&o), 2, "{name}: {}", stderr(&o));
        let err = stderr(&o);
        let expected = if *name == "type.yaml" {
            "type.yaml:4:"
        } else {
            expected
        };
        assert!(
            err.contains(expected),
            "{name}: expected `{expected}` in:\n{err}"
        );
        assert!(!err.contains("panicked"), "{name} panicked: {err}");
        let o = env.weft(&["validate", f.to_str().unwrap()]);
        assert_eq!(code(&o), 2, "validate {name}");
    }
    let o = env.weft(&["run", "/nonexistent/flow.yaml"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("cannot read the file"));
    let o = env.weft(&["run", &example("hello.yaml"), "--input", "{not json"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("--input is not valid JSON"));
    let o = env.weft(&["run", &example("hello.yaml"), "--dialect", "teaa"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("did you mean `tea`?"), "{}", stderr(&o));
}

#[test]
fn a_damaged_database_is_a_clear_error() {
    let env = Env::new();
    std::fs::write(env.db_file(), vec![7u8; 8192]).unwrap();
    let o = env.weft(&["run", &example("hello.yaml"), "-q"]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("not a usable Weft database"),
        "{}",
        stderr(&o)
    );
    let o = env.weft(&["runs", "list"]);
    assert_eq!(code(&o), 2);
}

#[test]
fn validate_graph_and_convert_agree_with_run() {
    let env = Env::new();
    let o = env.weft(&["validate", &example("hello.yaml"), &example("fan-out.yaml")]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    for format in ["mermaid", "dot", "svg"] {
        let o = env.weft(&["graph", &example("support-graph.yaml"), "--format", format]);
        assert_eq!(code(&o), 0);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains("billing"), "{text}");
    }
    // The SVG names each block's node by its step path, for a page to colour.
    let o = env.weft(&["graph", &example("refine-loop.yaml"), "--format", "svg"]);
    let svg = String::from_utf8_lossy(&o.stdout);
    assert!(
        svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
        "{svg}"
    );
    assert!(svg.contains(r#"data-path="root/refine""#), "{svg}");
    assert!(
        svg.contains(r#"class="edge back""#),
        "the loop's repeat edge: {svg}"
    );
    // Converting to native and running the result gives the same output.
    for file in [
        "hello.yaml",
        "fan-out.yaml",
        "refine-loop.yaml",
        "support-graph.yaml",
        "code-blocks.yaml",
        "prolog-rules.yaml",
    ] {
        let converted = env.path(&format!("converted-{file}"));
        let o = env.weft(&[
            "convert",
            &example(file),
            "--to",
            "native",
            "-o",
            converted.to_str().unwrap(),
        ]);
        assert_eq!(code(&o), 0);
        let a = stdout_json(&env.weft(&["run", &example(file), "--json", "-q"]));
        let b = stdout_json(&env.weft(&["run", converted.to_str().unwrap(), "--json", "-q"]));
        assert_eq!(a["output"], b["output"], "{file}");
        assert_eq!(a["state"], b["state"], "{file}");
    }
}

#[test]
fn events_are_written_as_json_lines() {
    let env = Env::new();
    let events = env.path("events.jsonl");
    let o = env.weft(&[
        "run",
        &example("fan-out.yaml"),
        "-q",
        "--events",
        events.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let text = std::fs::read_to_string(&events).unwrap();
    let types: Vec<String> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(types.first().map(String::as_str), Some("run_started"));
    assert_eq!(types.last().map(String::as_str), Some("run_completed"));
    assert!(types.iter().any(|t| t == "branch_started"));
}

#[test]
fn a_cassette_records_a_real_provider_once_and_replays_it_offline() {
    use weft_fakes::{FakeServer, Reply, Wire};
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FakeServer::start(
        Wire::OpenAi,
        vec![Reply::text("The capital of France is Paris.")],
    ));
    let env = Env::new();
    let flow = env.write(
        "ask.yaml",
        "weft: 1\nname: ask\nroot:\n  llm: {model: openai/gpt-test, prompt: 'Capital of {{ input.country }}?'}\n",
    );
    let cassette = env.path("calls.json");
    let run = |country: &str, mode: &str, base: &str, key: Option<&str>| {
        let mut c = env.cmd();
        c.args(["run", flow.to_str().unwrap(), "--json", "-q", "--input"])
            .arg(format!(r#"{{"country": "{country}"}}"#))
            .env("WEFT_CASSETTE", &cassette)
            .env("WEFT_CASSETTE_MODE", mode)
            .env("OPENAI_BASE_URL", base);
        match key {
            Some(k) => c.env("OPENAI_API_KEY", k),
            None => c.env_remove("OPENAI_API_KEY"),
        };
        c.output().unwrap()
    };
    let o = run("France", "record", &server.base_url(), Some("sk-test"));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout_json(&o)["output"], "The capital of France is Paris.");
    assert_eq!(server.received().len(), 1);
    drop(server);
    // Offline: no key, an endpoint nobody listens on; the cassette answers.
    let o = run("France", "replay", "http://127.0.0.1:9/v1", None);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout_json(&o)["output"], "The capital of France is Paris.");
    // A call the cassette never saw is a clear failure, not a network call.
    let o = run("Spain", "replay", "http://127.0.0.1:9/v1", None);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let all = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(all.contains("holds no answer"), "{all}");
}

/// A run keeps its dialect's presentation in the store: with its flow file deleted, a
/// paused graph run answered by another process still reports spec 003's result shape and
/// log (the tea case: `a_retried_tea_run_writes_the_spec_event_names_too`).
#[test]
fn runs_keep_their_dialect_s_view_when_the_file_is_gone() {
    let env = Env::new();
    let gate = env.write(
        "gate.json",
        &std::fs::read_to_string(example("graph/release-gate.json")).unwrap(),
    );
    let o = env.weft(&["run", gate.to_str().unwrap(), "--json", "-q"]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    let id = stdout_json(&o)["runId"].as_str().unwrap().to_owned();
    std::fs::remove_file(&gate).unwrap();
    let o = env.weft(&["approve", &id, "--json", "-q"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let done = stdout_json(&o);
    assert_eq!(done["runId"], id.as_str());
    assert_eq!(done["status"], "completed");
    assert_eq!(done["waitingForInput"], false);
    let log = graph_log(&done);
    assert!(
        log.contains(&("input_received".into(), "sign_off".into())),
        "{log:?}"
    );
    assert!(
        log.contains(&("step_start".into(), "released".into())),
        "{log:?}"
    );
}

/// `weft schema --dialect NAME` prints each dialect's JSON Schema, `--reference` its
/// reference text; an unknown name is an error naming the closest one.
#[test]
fn schema_prints_every_dialect_s_schema_and_reference() {
    let env = Env::new();
    for dialect in ["native", "tea", "blocks", "graph", "souls"] {
        let o = env.weft(&["schema", "--dialect", dialect]);
        assert_eq!(code(&o), 0, "{dialect}: {}", stderr(&o));
        let schema = stdout_json(&o);
        assert!(
            schema["$schema"].is_string() || schema["$defs"].is_object(),
            "{dialect}"
        );
        let o = env.weft(&["schema", "--dialect", dialect, "--reference"]);
        assert_eq!(code(&o), 0, "{dialect}: {}", stderr(&o));
        assert!(
            String::from_utf8_lossy(&o.stdout).starts_with('#'),
            "{dialect}"
        );
    }
    let o = env.weft(&["schema", "--dialect", "tae"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("did you mean `tea`"), "{}", stderr(&o));
    let o = env.weft(&["schema", "--list"]);
    assert_eq!(code(&o), 0);
    assert!(String::from_utf8_lossy(&o.stdout).contains("souls"));
}

/// `validate` finds a Lua syntax error without running the flow, at the code's line.
#[test]
fn validate_finds_lua_syntax_errors() {
    let env = Env::new();
    let flow = env.write(
        "lua.yaml",
        "name: broken-lua\nnodes:\n  - name: step\n    language: lua\n    run: |\n      local x = \n      return {x = 1\n",
    );
    let o = env.weft(&["validate", flow.to_str().unwrap()]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("lua code does not compile"), "{out}");
    assert!(out.contains("lua.yaml:"), "{out}");
}

/// A run keeps the files directory it started with: approved from another directory
/// without `--files`, it writes where it began; `--files` given then wins.
#[test]
fn a_continued_run_writes_where_it_started() {
    let env = Env::new();
    let flow = env.write(
        "files.yaml",
        "weft: 1\nname: files\nroot:\n  sequence:\n    - {id: before, action: {uses: file.write, with: {path: before.txt, content: a}}}\n    - {id: ask, approval: {prompt: go on?}}\n    - {id: after, action: {uses: file.write, with: {path: after.txt, content: b}}}\n",
    );
    let (started, elsewhere, chosen) = (
        env.path("started"),
        env.path("elsewhere"),
        env.path("chosen"),
    );
    for d in [&started, &elsewhere, &chosen] {
        std::fs::create_dir(d).unwrap();
    }
    let in_dir = |dir: &Path, args: &[&str]| {
        env.cmd()
            .env_remove("WEFT_FILES")
            .current_dir(dir)
            .args(args)
            .output()
            .unwrap()
    };
    let flow = flow.to_str().unwrap();
    for (i, files_flag) in [None, Some(&chosen)].into_iter().enumerate() {
        let o = in_dir(&started, &["run", flow, "--json", "-q"]);
        assert_eq!(code(&o), 3, "{}", stderr(&o));
        let id = stdout_json(&o)["run_id"].as_str().unwrap().to_owned();
        let mut approve = vec!["approve", id.as_str(), "-q"];
        let flag;
        if let Some(dir) = files_flag {
            flag = dir.display().to_string();
            approve.extend(["--files", flag.as_str()]);
        }
        let o = in_dir(&elsewhere, &approve);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let target = files_flag.unwrap_or(&started);
        assert!(
            target.join("after.txt").exists(),
            "case {i}: not written in {}",
            target.display()
        );
        assert!(
            !elsewhere.join("after.txt").exists(),
            "case {i}: written in the current directory"
        );
        std::fs::remove_file(target.join("after.txt")).unwrap();
        let shown = stdout_json(&env.weft(&["runs", "show", &id]));
        assert_eq!(shown["settings"]["files"], started.display().to_string());
    }
}

/// Text that is not UTF-8 is located at its first bad byte; a binary file is named so.
#[test]
fn files_that_are_not_text_get_a_line_and_column() {
    let env = Env::new();
    let latin1 = env.path("latin1.yaml");
    std::fs::write(
        &latin1,
        b"weft: 1\nname: x\nroot: {transform: {output: \"caf\xe9\"}}\n",
    )
    .unwrap();
    let o = env.weft(&["validate", latin1.to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("latin1.yaml:3:32: error: the file is not UTF-8 text"),
        "{out}"
    );
    let binary = env.path("binary.yaml");
    std::fs::write(&binary, b"\x7fELF\x02\x01\x01\x00\xff\x00").unwrap();
    let o = env.weft(&["run", binary.to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("binary.yaml:1:9: error: the file is binary"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_block_that_names_no_model_is_warned_of_by_validate() {
    // A soul with no provider or model (as in runsight's own library) would run on the
    // fallback model: validate says so, at the block, unless a model is chosen.
    let env = Env::new();
    let flow = env.write(
        "plain.yaml",
        "version: \"1.0\"\nsouls:\n  writer:\n    system_prompt: You write.\nblocks:\n  draft:\n    type: linear\n    soul_ref: writer\nworkflow:\n  name: w\n  entry: draft\n",
    );
    let o = env.weft(&["validate", flow.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "a warning is not an error: {}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(
            "plain.yaml:6:3: warning: no model: using local/smollm2; set --model or WEFT_MODEL"
        ),
        "{out}"
    );
    let o = env.weft(&["validate", "--deny-warnings", flow.to_str().unwrap()]);
    assert_eq!(
        code(&o),
        2,
        "--deny-warnings makes it an error: {}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("--deny-warnings makes them errors"),
        "{}",
        stderr(&o)
    );
    let o = env
        .cmd()
        .args(["validate", "--deny-warnings", flow.to_str().unwrap()])
        .env("WEFT_MODEL", "openai/gpt-4o-mini")
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("no model"));

    // A provider Weft cannot reach is an error before the run, not halfway through it.
    let typo = env.write(
        "typo.yaml",
        "version: \"1.0\"\nsouls:\n  writer:\n    system_prompt: You write.\n    provider: opnai\n    model_name: gpt-4o-mini\nblocks:\n  draft:\n    type: linear\n    soul_ref: writer\nworkflow:\n  name: w\n  entry: draft\n",
    );
    for command in ["validate", "run"] {
        let o = env.weft(&[command, typo.to_str().unwrap()]);
        assert_eq!(code(&o), 2, "{command}");
        let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
        assert!(
            out.contains("typo.yaml:8:3: error: Weft knows no model provider `opnai`")
                && out.contains("did you mean `openai`?"),
            "{command}: {out}"
        );
    }
}

#[test]
fn weft_run_sends_its_trace_to_an_otlp_collector_and_a_dead_one_changes_nothing() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let collector = rt.block_on(weft_fakes::Collector::start());
    let env = Env::new();
    let flow = example("hello.yaml");
    // The standard variable.
    let o = env
        .cmd()
        .args(["run", &flow, "-q"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())
        .env("OTEL_SERVICE_NAME", "weft-cli-test")
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let spans = collector.spans();
    let run = spans
        .iter()
        .find(|s| s.name.starts_with("invoke_workflow "))
        .unwrap_or_else(|| panic!("the run's span was sent before exit: {spans:?}"));
    assert_eq!(run.service_name, "weft-cli-test");
    assert_eq!(run.attributes["weft.dialect"], "native");
    assert!(spans.len() > 1, "and its steps: {spans:?}");
    // The flag, with the variables unset.
    let before = spans.len();
    let o = env
        .cmd()
        .args(["run", &flow, "-q", "--otel", &collector.endpoint()])
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(collector.spans().len() > before);
    // A collector that is down: the run's output and exit code are unchanged, and the
    // command says once that traces could not be sent.
    let o = env
        .cmd()
        .args(["run", &flow, "-q", "--json", "--otel", "http://127.0.0.1:9"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout_json(&o)["status"], "completed");
    assert!(stderr(&o).contains("cannot send traces"), "{}", stderr(&o));
    // A malformed URL is a usage error, before anything runs.
    let o = env.weft(&["run", &flow, "--otel", "not a url"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
}

#[test]
fn a_run_without_an_event_log_keeps_its_journal_and_result_but_no_events() {
    use weft_core::ports::Store;
    let env = Env::new();
    let mut ids = Vec::new();
    for flags in [&[][..], &["--no-event-log"][..]] {
        let mut args = vec!["run", "--json", "-q"];
        args.extend_from_slice(flags);
        let file = example("code-blocks.yaml");
        args.push(&file);
        let o = env.weft(&args);
        assert_eq!(code(&o), 0, "{flags:?}: {}", stderr(&o));
        ids.push(stdout_json(&o)["run_id"].as_str().unwrap().to_owned());
    }
    let store =
        weft_store::SqliteStore::open(env.db_file(), weft_store::Durability::Process).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let logged = store.events(&ids[0], None, usize::MAX).await.unwrap();
        assert!(logged.len() > 3, "the default run's events are stored");
        let unlogged = store.events(&ids[1], None, usize::MAX).await.unwrap();
        assert!(unlogged.is_empty(), "{unlogged:?}");
        // What resume and retry need is there as always.
        let run = store.get_run(&ids[1]).await.unwrap().unwrap();
        assert_eq!(run.status, weft_core::ports::RunStatus::Completed);
        assert_eq!(
            store.journal(&ids[1]).await.unwrap().len(),
            store.journal(&ids[0]).await.unwrap().len()
        );
        assert!(!store.journal(&ids[1]).await.unwrap().is_empty());
    });
}

#[test]
fn a_tea_run_whose_calls_name_no_model_says_so_once_up_front_where_one_could_be_named() {
    let env = Env::new();
    // TEA's examples/reflection/llm-evaluator-example.yaml names its model in
    // `settings.llm` as `default_model`: every call, the evaluator's too, takes it.
    let named = env.write(
        "named.yaml",
        "name: t\nsettings:\n  llm: {provider: ollama, default_model: llama3.2}\nnodes:\n  - name: w\n    uses: reflection.loop\n    with:\n      generator: {run: 'result = {\"text\": \"x\"}'}\n      evaluator: {type: llm}\n",
    );
    let o = env.weft(&["validate", named.to_str().unwrap()]);
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains("no model"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    // Without it, one line says so, at the node, even where it compiles to two calls.
    let bare = env.write(
        "bare.yaml",
        "name: t\nnodes:\n  - name: ask\n    uses: reason.self_correct\n    with: {task: 'say hi', improvement_rounds: 1, max_tokens: 4}\n    output: answer\n",
    );
    let o = env.weft(&["validate", bare.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(out.matches("warning: no model").count(), 1, "{out}");
    let o = env.weft(&["run", bare.to_str().unwrap(), "--input", "{}"]);
    let err = stderr(&o);
    assert_eq!(code(&o), 0, "{err}");
    let told = "bare.yaml:3:5: warning: 2 model calls name no model: using local/smollm2; set --model or WEFT_MODEL";
    assert!(
        err.lines().next().unwrap().ends_with(told),
        "said up front: {err}"
    );
    assert!(
        err.contains("hint: name a model in `settings.llm`"),
        "{err}"
    );
    assert_eq!(err.matches("no model").count(), 1, "said once: {err}");
}

/// A secret the flow reads and the environment does not hold stops the run before it
/// starts, naming the variable to set; a secret is read by its name in lower case or as
/// the variable writes it.
#[test]
fn an_unset_secret_is_an_error_before_the_run_starts() {
    let env = Env::new();
    let flow = env.write(
        "secret.yaml",
        "weft: 1\nname: secret\nroot:\n  transform: {output: \"Bearer {{ secrets.API_TOKEN }}\"}\n",
    );
    let flow = flow.to_str().unwrap();
    let o = env.weft(&["run", flow, "-q"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let said = stderr(&o);
    assert!(
        said.contains("secret.yaml:4:") && said.contains("`secrets.API_TOKEN`, which is not set"),
        "{said}"
    );
    assert!(said.contains("WEFT_SECRET_API_TOKEN"), "{said}");
    let listed = env.weft(&["runs", "list", "--json"]);
    assert!(listed.stdout.is_empty(), "no run was stored");
    let o = env
        .cmd()
        .args(["run", flow, "-q"])
        .env("WEFT_SECRET_API_TOKEN", "t0k")
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout_json(&o), json!("Bearer t0k"));
}
