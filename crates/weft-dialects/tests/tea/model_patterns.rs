//! TEA's model patterns (issue 20): `reflection.loop` (generate, evaluate, correct,
//! until valid), `reason.cot`, `agent.dispatch` and `agent.parallel`.

use super::run;
use serde_json::json;
use weft_core::ports::RunStatus;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_evaluator_loops_until_the_generated_output_fits() {
    // TEA's reflection-loop-example: the first attempt lacks a required field; the
    // corrector's hint reaches the next attempt through the state.
    let yaml = r#"
nodes:
  - name: write
    uses: reflection.loop
    with:
      generator:
        run: |
          if state.get("hint"):
              result = {"title": "T", "body": state["hint"]}
          else:
              result = {"title": "T"}
      evaluator:
        type: schema
        schema: {type: object, required: [title, body]}
      corrector:
        run: |
          result = {"hint": "add a body (" + reflection_errors[0]["type"] + ")"}
      max_iterations: 3
"#;
    let ran = run(yaml, json!({})).await;
    let out = ran.output();
    assert_eq!(out["reflection_iteration"], 2);
    assert_eq!(out["valid"], true);
    assert_eq!(
        out["body"], "add a body (schema)",
        "the valid output's keys spread"
    );
    let history = out["reflection_history"].as_array().unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0]["valid"], false);
    assert_eq!(history[1]["score"], 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_evaluator_scores_and_the_best_attempt_is_returned_or_raised() {
    let yaml = |on_failure: &str| {
        format!(
            r#"
nodes:
  - name: grow
    uses: reflection.loop
    with:
      generator:
        run: |
          result = {{"words": reflection_iteration * 10}}
      evaluator:
        type: custom
        run: |
          result = {{"valid": output["words"] >= 100, "score": min(output["words"] / 100, 1.0), "errors": [{{"message": "too short"}}]}}
      max_iterations: 3
      on_failure: {on_failure}
"#
        )
    };
    let ran = run(&yaml("return_best"), json!({})).await;
    let out = ran.output();
    assert_eq!(out["valid"], false);
    assert_eq!(out["reflection_output"], json!({"words": 30}));
    assert_eq!(out["reflection_best_score"], 0.3);
    let ran = run(&yaml("raise"), json!({})).await;
    assert_eq!(ran.result.status, RunStatus::Failed);
    let e = ran.result.error.unwrap();
    assert!(
        e.message.contains("no valid output after 3 iterations"),
        "{}",
        e.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_generates_and_a_model_judges() {
    use weft_fakes::{FakeServer, Reply, Wire};
    let server = FakeServer::start(
        Wire::OpenAi,
        vec![
            Reply::text("a haiku, too long"),
            Reply::text(r#"{"valid": false, "score": 0.4, "reason": "five lines"}"#),
            Reply::text("a haiku"),
            Reply::text(r#"{"valid": true, "score": 0.9, "reason": "three lines"}"#),
        ],
    )
    .await;
    let yaml = format!(
        r#"
nodes:
  - name: haiku
    uses: reflection.loop
    with:
      generator:
        action: llm.call
        model: gpt-4o-mini
        api_base: "{base}"
        prompt: "Write a haiku. {{{{ state.reflection_errors | map(attribute='message') | join('; ') }}}}"
      evaluator:
        type: llm
        model: gpt-4o-mini
        api_base: "{base}"
        prompt: "Is this a haiku? {{{{ state.reflection_output.content }}}}"
      max_iterations: 3
    output: poem
"#,
        base = server.base_url()
    );
    let ran = run(&yaml, json!({})).await;
    let poem = &ran.output()["poem"];
    assert_eq!(poem["reflection_iteration"], 2);
    assert_eq!(poem["content"], "a haiku");
    assert_eq!(poem["reflection_best_score"], 0.9);
    let sent = server.received();
    assert_eq!(sent.len(), 4);
    assert!(
        sent[2].body["messages"].to_string().contains("five lines"),
        "the judge's reason reaches the next attempt: {}",
        sent[2].body["messages"]
    );
    assert!(
        sent[1].body["response_format"]
            .to_string()
            .contains("score"),
        "the judge answers to a schema: {}",
        sent[1].body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reason_cot_asks_for_thinking_and_answer_in_the_format_chosen_at_run_time() {
    use weft_fakes::{FakeServer, Reply, Wire};
    let server = FakeServer::start(
        Wire::OpenAi,
        vec![Reply::text(
            r#"{"thinking": "15% is 0.15; 0.15 * 80 = 12", "answer": 12}"#,
        )],
    )
    .await;
    let yaml = format!(
        r#"
nodes:
  - name: solve
    uses: reason.cot
    with:
      problem: "{{{{ state.problem }}}}"
      model: gpt-4o-mini
      api_base: "{base}"
      thinking_format: "{{{{ state.style | default('step_by_step') }}}}"
      few_shot_examples:
        - {{problem: "2 + 2?", thinking: "Add {{{{ them }}}}.", answer: "4"}}
    output: solution
"#,
        base = server.base_url()
    );
    let ran = run(
        &yaml,
        json!({"problem": "15% of 80?", "style": "pros_cons"}),
    )
    .await;
    let s = &ran.output()["solution"];
    assert_eq!(s["answer"], 12);
    assert_eq!(s["thinking"], "15% is 0.15; 0.15 * 80 = 12");
    assert_eq!(s["reasoning_answer"], 12);
    assert_eq!(s["thinking_format"], "pros_cons");
    let sent = server.received();
    let messages = sent[0].body["messages"].to_string();
    assert!(messages.contains("Weigh the arguments"), "{messages}");
    assert!(
        messages.contains("Add {{ them }}."),
        "examples are text: {messages}"
    );
    assert!(messages.contains("Problem: 15% of 80?"), "{messages}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_dispatch_gives_the_task_to_an_agent_of_settings_agents() {
    use weft_fakes::{FakeServer, Reply, Wire};
    let server = FakeServer::start(Wire::OpenAi, vec![Reply::text("Tea is a drink.")]).await;
    let yaml = format!(
        r#"
settings:
  llm: {{model: gpt-4o-mini, api_base: "{base}", temperature: 0.7}}
  agents:
    researcher:
      system_prompt: "You research. Answer as {{{{ json }}}}."
      temperature: 0.2
nodes:
  - name: research
    action: agent.dispatch
    params:
      agent: researcher
      task: "Research {{{{ state.topic }}}}"
    output: research
"#,
        base = server.base_url()
    );
    let ran = run(&yaml, json!({"topic": "tea"})).await;
    let r = &ran.output()["research"];
    assert_eq!(r["response"], "Tea is a drink.");
    assert_eq!(r["agent"], "researcher");
    assert_eq!(r["success"], true);
    let body = &server.received()[0].body;
    assert_eq!(body["temperature"], 0.2, "the agent's own temperature");
    let messages = body["messages"].to_string();
    assert!(messages.contains("Answer as {{ json }}."), "{messages}");
    assert!(messages.contains("Research tea"), "{messages}");
    let unknown = yaml.replace("agent: researcher", "agent: reseacher");
    let err = super::support::load_error(&unknown, "tea");
    assert!(
        err.contains("no agent `reseacher`") && err.contains("researcher"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_parallel_asks_every_agent_at_once_and_aggregates_as_tea_does() {
    use weft_fakes::{FakeServer, Reply, Wire};
    let server = FakeServer::start(
        Wire::OpenAi,
        vec![Reply::text("yes"), Reply::text("no"), Reply::text("yes")],
    )
    .await;
    let yaml = |aggregation: &str| {
        format!(
            r#"
settings:
  llm: {{model: gpt-4o-mini, api_base: "{base}"}}
  agents:
    a: {{system_prompt: "You are A."}}
    b: {{system_prompt: "You are B."}}
    c: {{system_prompt: "You are C."}}
nodes:
  - name: ask
    action: agent.parallel
    params:
      agents: [a, b, c]
      task: "Is {{{{ state.n }}}} even?"
      aggregation: {aggregation}
    output: verdict
"#,
            base = server.base_url()
        )
    };
    let ran = run(&yaml("vote"), json!({"n": 4})).await;
    let v = &ran.output()["verdict"];
    assert_eq!(v["result"], "yes", "{v}");
    assert_eq!(v["votes"], json!({"yes": 2, "no": 1}));
    assert_eq!(v["unanimous"], false);
    assert_eq!(v["total_votes"], 3);
    assert_eq!(v["agents_called"], json!(["a", "b", "c"]));
    let sent = server.received();
    assert_eq!(sent.len(), 3);
    let systems = super::first_messages(&sent);
    for agent in ["You are A.", "You are B.", "You are C."] {
        assert!(systems.iter().any(|s| s == agent), "{systems:?}");
    }
    assert!(sent[0].body["messages"].to_string().contains("Is 4 even?"));

    let ran = run(&yaml("collect"), json!({"n": 4})).await;
    let v = &ran.output()["verdict"];
    assert_eq!(v["count"], 3);
    assert_eq!(v["responses"].as_array().unwrap().len(), 3);
    assert_eq!(v["raw_results"][1]["agent"], "b");

    let err = super::support::load_error(&yaml("consensus"), "tea");
    assert!(err.contains("cannot aggregate by `consensus`"), "{err}");
    let twice = yaml("collect").replace("[a, b, c]", "[a, b, a]");
    let err = super::support::load_error(&twice, "tea");
    assert!(err.contains("named twice"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llm_embed_gives_tea_s_vector_model_and_dimensions() {
    // TEA's ollama-embed example: `provider: ollama` with its embedding model, the
    // result read by a later node as TEA gives it.
    use weft_fakes::{FakeServer, Reply, Wire};
    let server = FakeServer::start(
        Wire::Ollama,
        vec![Reply::Embeddings(vec![vec![0.5, 0.25, -1.0]])],
    )
    .await;
    let yaml = format!(
        r#"
settings:
  llm: {{model: gpt-4o-mini, api_base: "{base}", provider: ollama}}
nodes:
  - name: generate_embedding
    uses: llm.embed
    with:
      backend: api
      text: "{{{{ state.text | default('The Edge Agent') }}}}"
    output: result
  - name: show
    run: |
      return {{"first": state["result"]["embedding"][0], "n": state["result"]["dimensions"]}}
"#,
        base = server.base_url()
    );
    let ran = run(&yaml, json!({})).await;
    let out = ran.output();
    assert_eq!(
        out["result"],
        json!({"embedding": [0.5, 0.25, -1.0], "model": "nomic-embed-text", "dimensions": 3, "tokens_used": out["result"]["tokens_used"]})
    );
    assert!(out["result"]["tokens_used"].as_u64().unwrap() > 0);
    assert_eq!(
        (out["first"].clone(), out["n"].clone()),
        (json!(0.5), json!(3))
    );
    let sent = server.received();
    assert_eq!(sent[0].path, "/api/embed");
    assert_eq!(
        sent[0].body["model"], "nomic-embed-text",
        "TEA's default, not the chat model"
    );
    assert_eq!(sent[0].body["input"], json!(["The Edge Agent"]));
    let typo = yaml.replace("text:", "txt:");
    let err = super::support::load_error(&typo, "tea");
    assert!(
        err.contains("no option `txt`") && err.contains("text"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_sequential_feeds_each_answer_to_the_next_agent() {
    use weft_fakes::{FakeServer, Reply, Wire};
    let server = FakeServer::start(
        Wire::OpenAi,
        vec![
            Reply::text("entities: tea"),
            Reply::text("enriched: tea, a drink"),
            Reply::text("summary: tea is a drink"),
        ],
    )
    .await;
    let yaml = format!(
        r#"
settings:
  llm: {{model: gpt-4o-mini, api_base: "{base}"}}
  agents:
    extractor: {{system_prompt: "Extract."}}
    enricher: {{system_prompt: "Enrich."}}
    summarizer: {{system_prompt: "Summarize.", temperature: 0.1}}
nodes:
  - name: pipeline
    action: agent.sequential
    params:
      agents: [extractor, enricher, summarizer]
      tasks:
        - "Process: {{{{ state.raw }}}}"
        - "Step {{{{ chain_index }}}} of {{{{ chain_length }}}}: {{{{ previous_response }}}}"
        - "Sum up: {{{{ previous_response }}}}"
      transform: "[{{{{ current_response }}}}]"
      output_key: summary
    output: result
"#,
        base = server.base_url()
    );
    let ran = run(&yaml, json!({"raw": "tea leaves"})).await;
    let r = &ran.output()["result"];
    assert_eq!(r["result"], "[summary: tea is a drink]");
    assert_eq!(r["summary"], r["result"]);
    assert_eq!(r["success"], true);
    assert_eq!(
        r["agents_called"],
        json!(["extractor", "enricher", "summarizer"])
    );
    assert_eq!(
        r["chain"],
        json!([
            {"agent": "extractor", "response": "entities: tea", "success": true},
            {"agent": "enricher", "response": "enriched: tea, a drink", "success": true},
            {"agent": "summarizer", "response": "summary: tea is a drink", "success": true},
        ])
    );
    let sent: Vec<String> = server
        .received()
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    assert!(
        sent[0].contains("Process: tea leaves") && sent[0].contains("Extract."),
        "{}",
        sent[0]
    );
    assert!(
        sent[1].contains("Step 1 of 3: [entities: tea]"),
        "{}",
        sent[1]
    );
    assert!(
        sent[2].contains("Sum up: [enriched: tea, a drink]"),
        "{}",
        sent[2]
    );
    // TEA hands options it does not read on to the model calls, which refuse them: the
    // file loads and the node fails when reached; a typo is refused at once.
    let passed = yaml.replace("output_key: summary", "thread_state: true");
    let ran = run(&passed, json!({"raw": "x"})).await;
    assert_eq!(ran.result.status, RunStatus::Failed);
    let message = ran.result.error.unwrap().message;
    assert!(
        message.contains("passes `thread_state` on to each model call"),
        "{message}"
    );
    let typo = yaml.replace("output_key:", "output_kye:");
    let err = super::support::load_error(&typo, "tea");
    assert!(
        err.contains("no option `output_kye`") && err.contains("output_key"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_coordinate_splits_the_task_runs_the_workers_and_aggregates() {
    use weft_fakes::{FakeServer, Reply, Wire};
    // Each request is answered by who asks: the leader's plan, each worker by its
    // system prompt, the leader's aggregation.
    let server = FakeServer::start_with(Wire::OpenAi, std::time::Duration::ZERO, |r| {
        let body = r.body.to_string();
        let text = if body.contains("Break down this task") {
            "Plan: [\"draw the page\", \"write the copy\"] done"
        } else if body.contains("Aggregate these worker responses") {
            "the page, drawn and written"
        } else if body.contains("You design.") {
            "a drawing"
        } else {
            "some copy"
        };
        Reply::text(text)
    })
    .await;
    let yaml = format!(
        r#"
settings:
  llm: {{model: gpt-4o-mini, api_base: "{base}"}}
  agents:
    lead: {{system_prompt: "You lead."}}
    designer: {{system_prompt: "You design."}}
    writer: {{system_prompt: "You write."}}
nodes:
  - name: team
    action: agent.coordinate
    params:
      leader: lead
      workers: [designer, writer]
      task: "Build a page about {{{{ state.topic }}}}"
      validation_prompt: "Check it covers {{{{ state.topic }}}}."
    output: result
"#,
        base = server.base_url()
    );
    let ran = run(&yaml, json!({"topic": "tea"})).await;
    let r = &ran.output()["result"];
    assert_eq!(r["result"], "the page, drawn and written");
    assert_eq!(r["rounds"], 1);
    assert_eq!(r["success"], true);
    assert_eq!(r["leader"], "lead");
    assert_eq!(r["workers"], json!(["designer", "writer"]));
    assert_eq!(r["worker_results"][0][0]["content"], "a drawing");
    assert_eq!(r["worker_results"][0][1]["content"], "some copy");
    let sent: Vec<String> = server
        .received()
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    assert_eq!(sent.len(), 4);
    assert!(sent[0].contains("for 2 workers") && sent[0].contains("Build a page about tea"));
    let to_designer = sent.iter().find(|b| b.contains("You design.")).unwrap();
    assert!(to_designer.contains("draw the page"), "{to_designer}");
    let to_writer = sent.iter().find(|b| b.contains("You write.")).unwrap();
    assert!(to_writer.contains("write the copy"), "{to_writer}");
    assert!(
        sent[3].contains("- Worker 1: a drawing")
            && sent[3].contains("- Worker 2: some copy")
            && sent[3].contains("Check it covers tea."),
        "{}",
        sent[3]
    );
    // TEA's coordinator-pattern example passes options TEA does not read: it loads,
    // and the node fails when reached.
    let passed = yaml.replace("leader: lead", "coordinator: lead");
    let ran = run(&passed, json!({"topic": "tea"})).await;
    assert_eq!(ran.result.status, RunStatus::Failed);
}
