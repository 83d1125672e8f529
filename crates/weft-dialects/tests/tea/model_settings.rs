//! Every model call in a TEA file resolves its model as TEA does (issue 40): the call's
//! own `model`, `provider` and `api_base`, else `settings.llm`'s (`model`, or
//! `default_model` as TEA's examples write it). One case per action family that calls a
//! model; none may fall back to Weft's default model when the settings name one.

use weft_core::ir::{BlockKind, Flow};

/// `(provider, model)` of every model call in `yaml`, compiled as a tea file.
fn calls(yaml: &str) -> Vec<(String, String)> {
    let loaded = weft_dialects::load_str(yaml, "flow.yaml", None, Some("tea"))
        .unwrap_or_else(|e| panic!("{e}"));
    let flow: &Flow = &loaded.flow;
    let mut found = Vec::new();
    weft_core::validate::walk_blocks(flow, &mut |ptr, b| {
        if let BlockKind::Llm(spec) = &b.kind {
            let id = spec
                .model
                .clone()
                .unwrap_or_else(|| panic!("{ptr} names no model"));
            found.push(match flow.models.get(&id) {
                Some(def) => (def.provider.clone(), def.model.clone().unwrap_or_default()),
                None => (String::new(), id),
            });
        }
    });
    assert!(!found.is_empty(), "no model call in:\n{yaml}");
    found
}

const SETTINGS: &str = "settings:\n  llm: {provider: ollama, default_model: llama3.2}\n";

fn with_settings(nodes: &str) -> String {
    format!("{SETTINGS}nodes:\n{nodes}")
}

fn all_from_settings(family: &str, nodes: &str) {
    let yaml = with_settings(nodes);
    for call in calls(&yaml) {
        assert_eq!(
            call,
            ("ollama".to_owned(), "llama3.2".to_owned()),
            "{family}:\n{yaml}"
        );
    }
}

#[test]
fn llm_actions_take_the_settings_model() {
    for uses in ["llm.call", "llm.stream"] {
        all_from_settings(
            uses,
            &format!("  - name: a\n    uses: {uses}\n    with: {{prompt: hi}}\n"),
        );
    }
    all_from_settings(
        "llm.tools",
        "  - name: a\n    uses: llm.tools\n    with:\n      prompt: hi\n      tools:\n        - {name: read, action: file.read}\n",
    );
}

#[test]
fn a_reflection_loop_s_llm_evaluator_takes_the_settings_model() {
    // TEA's examples/reflection/llm-evaluator-example.yaml: an evaluator naming no model.
    all_from_settings(
        "reflection.loop",
        "  - name: w\n    uses: reflection.loop\n    with:\n      generator: {run: 'result = {\"text\": \"x\"}'}\n      evaluator: {type: llm}\n      max_iterations: 2\n",
    );
}

#[test]
fn reasoning_patterns_take_the_settings_model() {
    all_from_settings(
        "reason.cot",
        "  - name: r\n    uses: reason.cot\n    with: {problem: 'two plus two?'}\n",
    );
    all_from_settings(
        "reason.self_correct",
        "  - name: r\n    uses: reason.self_correct\n    with: {task: 'write a line'}\n",
    );
    all_from_settings(
        "reason.react",
        "  - name: r\n    uses: reason.react\n    with: {goal: 'read it', tools: [file.read]}\n",
    );
}

#[test]
fn agents_and_the_planner_take_the_settings_model() {
    let agents = "settings:\n  llm: {provider: ollama, default_model: llama3.2}\n  agents:\n    helper: {system_prompt: 'You help.'}\nnodes:\n  - name: d\n    action: agent.dispatch\n    params: {agent: helper, task: 'do it'}\n";
    for call in calls(agents) {
        assert_eq!(
            call,
            ("ollama".to_owned(), "llama3.2".to_owned()),
            "agent.dispatch"
        );
    }
    all_from_settings(
        "plan.decompose",
        "  - name: p\n    action: plan.decompose\n    with:\n      goal: 'Write about tea'\n      planner: {prompt_template: 'Plan: {{ goal }}'}\n",
    );
}

#[test]
fn a_call_s_own_model_wins_over_the_settings() {
    let yaml =
        with_settings("  - name: a\n    uses: llm.call\n    with: {prompt: hi, model: qwen2.5}\n");
    assert_eq!(calls(&yaml), [("ollama".to_owned(), "qwen2.5".to_owned())]);
    let own_provider = with_settings(
        "  - name: a\n    uses: llm.call\n    with: {prompt: hi, model: gpt-4o-mini, provider: openai}\n",
    );
    assert_eq!(
        calls(&own_provider),
        [("openai".to_owned(), "gpt-4o-mini".to_owned())]
    );
}
