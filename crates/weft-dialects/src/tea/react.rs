//! TEA's `reason.react`: thought, action, observation, until the model gives its final
//! answer or the steps run out. It compiles to Weft's own blocks, so every model call
//! and every action is journaled:
//!
//! ```text
//! sequence: start -> loop max_steps [model call -> read its JSON -> final answer |
//!           not JSON (asked again) | one case per tool (the action, its result or
//!           error as the observation) | unknown action] -> result
//! ```
//!
//! The model answers `{thought, action, action_input}` as JSON (read leniently, as TEA
//! reads it). A tool is one of Weft's built-in actions, run with `action_input` as its
//! options; a tool Weft does not have (TEA's web search, memory, ...) observes the
//! error a run of it would give, as TEA observes a failing action. The conversation is
//! the goal and a scratchpad of the earlier replies and their observations (TEA sends
//! them as alternating messages). The record of the steps travels from one block to
//! the next as its input, so the state holds nothing but the node's result, TEA's
//! `{steps, final_answer, reasoning_trace, react_steps, reasoning_answer, model,
//! total_steps}` (with `warning` when the steps ran out).

use super::actions::BUILTIN;
use super::{Compiler, template, transform};
use indexmap::IndexMap;
use serde_json::{Value, json};
use weft_core::Diagnostic;
use weft_core::ir::{
    ActionSpec, Block, BlockKind, BranchSpec, Case, Expr, LoopSpec, Rescue, ValueTemplate,
};

/// The options `reason.react` reads.
const OPTIONS: &[&str] = &[
    "goal",
    "model",
    "tools",
    "max_steps",
    "temperature",
    "max_tokens",
    "provider",
    "api_base",
];

/// The most steps a file may ask for.
const MAX_STEPS: u64 = 50;

/// What the model is told after a reply that is not JSON (TEA's words).
const NOT_JSON: &str = "Your response was not valid JSON. Please respond with valid JSON.";

impl Compiler<'_> {
    /// The block of `uses: reason.react` with `with`, at node pointer `ptr`.
    pub(super) fn reason_react(
        &mut self,
        with: Option<&Value>,
        ptr: &str,
        node: &str,
    ) -> Option<Block> {
        let uses = "reason.react";
        let wptr = format!("{ptr}/with");
        let with = self.with_options(
            uses,
            with,
            &wptr,
            (
                "its `goal`",
                "with: {goal: \"{{ state.question }}\", tools: [http.get]}",
            ),
            OPTIONS,
        )?;
        let goal = self.required_text(
            uses,
            with,
            (
                "goal",
                "a string (a template)",
                Some("goal: \"{{ state.question }}\""),
            ),
            &wptr,
        )?;
        let max = self.constant_count(
            with.get("max_steps"),
            &format!("{wptr}/max_steps"),
            10,
            MAX_STEPS,
        )?;
        let tools = self.react_tools(with.get("tools"), &format!("{wptr}/tools"))?;
        let call = self.model_turn(
            uses,
            with,
            (system_prompt(&tools), scratchpad(goal)),
            with.get("model"),
            (ptr, node),
        )?;
        let model = self.reported_model(with.get("model"));
        let names: Vec<Value> = tools.iter().map(|(n, _)| Value::from(n.as_str())).collect();
        let start = transform(json!({
            "step_num": 0,
            "done": false,
            "answer": null,
            "model": model,
            "steps": [],
            "transcript": [],
            "trace": [{"step": "react_start", "goal": goal, "tools": names, "max_steps": max}],
        }));
        let repeat = Block::new(BlockKind::Loop(LoopSpec {
            body: Box::new(step(call, tools, &names)),
            max_iterations: max,
            while_: None,
            until: Some(Expr("output.done".into())),
            fail_at_max: false,
            warn_at_max: false,
        }));
        Some(Block::new(BlockKind::Sequence(vec![
            start,
            repeat,
            result(max),
        ])))
    }

    /// Each tool's name and the block that runs it with the model's `action_input`.
    fn react_tools(&mut self, tools: Option<&Value>, ptr: &str) -> Option<Vec<(String, Block)>> {
        let names: Vec<&str> = match tools {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(list)) if list.iter().all(Value::is_string) => {
                list.iter().filter_map(Value::as_str).collect()
            }
            Some(_) => {
                self.diags.push(
                    Diagnostic::error(ptr, "tools is a list of action names")
                        .hint("tools: [http.get, file.read]"),
                );
                return None;
            }
        };
        let mut out = Vec::new();
        for (i, name) in names.into_iter().enumerate() {
            let block = if BUILTIN.contains(&name) {
                Block::new(BlockKind::Action(ActionSpec {
                    uses: name.to_owned(),
                    params: Some(ValueTemplate(Value::from(
                        "{{ turn.parsed.action_input if turn.parsed.action_input is mapping else {'input': turn.parsed.action_input} }}",
                    ))),
                }))
            } else {
                let why = match super::foreign::needs(name) {
                    Some(need) => super::foreign::message(name, need),
                    None => format!(
                        "Weft runs only its built-in actions as tools ({}), with the model's `action_input` as their options",
                        BUILTIN.join(", ")
                    ),
                };
                self.diags.push(Diagnostic::warning(
                    format!("{ptr}/{i}"),
                    format!("tool `{name}`: {why}; when the model picks it, that error is what it observes"),
                ));
                super::actions::refusal(why)
            };
            out.push((name.to_owned(), block));
        }
        Some(out)
    }
}

/// The system prompt: how to answer, and the tools (Weft's wording of TEA's).
fn system_prompt(tools: &[(String, Block)]) -> String {
    let mut list: Vec<String> = tools
        .iter()
        .map(|(n, _)| format!("- {n}: run the {n} action with action_input as its options"))
        .collect();
    list.push("- final_answer: give the final answer to the goal".to_owned());
    format!(
        "You reach a goal in steps. In each step, think about what to do next, then either take an action and wait for its observation, or give the final answer once you truly have it.\n\nYour tools:\n{}\n\nReply with JSON only: {{\"thought\": \"your reasoning\", \"action\": \"a tool's name\", \"action_input\": {{\"option\": \"value\"}}}}, or, to finish, {{\"thought\": \"why you can answer now\", \"action\": \"final_answer\", \"action_input\": {{\"answer\": \"your final answer\"}}}}.",
        list.join("\n")
    )
}

/// The user message: the goal, then each earlier reply with what it observed.
fn scratchpad(goal: &str) -> String {
    format!(
        "Goal: {goal}{{% for t in carried.transcript %}}\n\nYour reply {{{{ loop.index }}}}:\n{{{{ t.reply }}}}\nObservation: {{{{ t.observation }}}}{{% endfor %}}"
    )
}

/// One step: the model's reply read, then what it asks for.
fn step(call: Block, tools: Vec<(String, Block)>, names: &[Value]) -> Block {
    let read = transform(Value::from(
        "{{ {'reply': input.content | string, 'parsed': find_json(input.content | string) if find_json(input.content | string) is mapping else none} }}",
    ));
    let mut cases = vec![
        Case {
            name: Some("not_json".into()),
            when: Expr("input.parsed is none".into()),
            then: record(
                &format!("{{{{ {} }}}}", Value::from(NOT_JSON)),
                "{'step': 'step_' ~ step_num ~ '_parse_error', 'error': 'the reply holds no JSON object', 'raw_content': input.reply[:500]}",
                false,
            ),
        },
        Case {
            name: Some("final_answer".into()),
            when: Expr("input.parsed.action == 'final_answer'".into()),
            then: finish(),
        },
    ];
    for (name, tool) in tools {
        cases.push(Case {
            name: Some(name.clone()),
            when: Expr(format!(
                "input.parsed.action == {}",
                Value::from(name.as_str())
            )),
            then: act(&name, tool),
        });
    }
    let unknown = record(
        &format!(
            "Unknown action: {{{{ input.parsed.action }}}}. Available: {}",
            Value::Array(names.to_vec())
        ),
        "none",
        true,
    );
    let mut dispatch = Block::new(BlockKind::Branch(BranchSpec {
        cases,
        otherwise: Some(Box::new(unknown)),
    }));
    dispatch.data.bind = IndexMap::from([("turn".to_owned(), template("{{ input }}"))]);
    let mut body = Block::new(BlockKind::Sequence(vec![call, read, dispatch]));
    body.data.bind = IndexMap::from([
        ("carried".to_owned(), template("{{ input }}")),
        ("step_num".to_owned(), template("{{ input.step_num + 1 }}")),
    ]);
    body
}

/// The record after a step: its observation (a template), a trace entry for a reply
/// that was not JSON (`parse_error`, an expression, or `none`), and whether the step
/// counts in `steps` (`counted`: it named an action). `turn` is the reply, read.
fn record(observation: &str, parse_error: &str, counted: bool) -> Block {
    let mut b = transform(Value::from(format!(
        "{{{{ merge(carried, {{'step_num': step_num, 'transcript': carried.transcript + [{{'reply': turn.reply, 'observation': observation}}], 'steps': carried.steps + ([entry] if {counted} else []), 'trace': carried.trace + ([{parse_error}] if {parse_error} else [merge(entry, {{'step': 'step_' ~ step_num, 'type': 'action'}})])}}) }}}}",
        counted = if counted { "true" } else { "false" },
    )));
    b.data.bind = IndexMap::from([(
        "entry".to_owned(),
        template(
            "{{ {'step': step_num, 'thought': (turn.parsed or {}).thought or '', 'action': (turn.parsed or {}).action or '', 'action_input': (turn.parsed or {}).action_input or {}, 'observation': observation} }}",
        ),
    )]);
    // `entry` reads `observation`, so it is bound a level further in.
    let mut around = Block::new(BlockKind::Sequence(vec![b]));
    around.data.bind = IndexMap::from([("observation".to_owned(), template(observation))]);
    around
}

/// The final answer: the step is recorded and the loop ends.
fn finish() -> Block {
    let mut b = transform(Value::from(
        "{{ merge(carried, {'step_num': step_num, 'done': true, 'answer': answer, 'steps': carried.steps + [entry], 'trace': carried.trace + [merge(entry, {'step': 'step_' ~ step_num, 'type': 'final_answer'}), {'step': 'react_complete', 'total_steps': step_num, 'final_answer': answer}]}) }}",
    ));
    b.data.bind = IndexMap::from([
        (
            "answer".to_owned(),
            template(
                "{{ turn.parsed.action_input.answer if turn.parsed.action_input is mapping and 'answer' in turn.parsed.action_input else turn.parsed.action_input }}",
            ),
        ),
        (
            "entry".to_owned(),
            template(
                "{{ {'step': step_num, 'thought': turn.parsed.thought or '', 'action': 'final_answer', 'action_input': turn.parsed.action_input, 'observation': 'Goal achieved.'} }}",
            ),
        ),
    ]);
    b
}

/// A tool's step: the action with the model's input, its result (as JSON text) or its
/// error as the observation.
fn act(name: &str, tool: Block) -> Block {
    let observed = transform(Value::from("{{ {'observation': input | tojson} }}"));
    let mut run = Block::new(BlockKind::Sequence(vec![tool, observed]));
    run.policy.rescue.push(Rescue {
        when: Vec::new(),
        then: transform(Value::from(format!(
            "{{{{ {{'observation': {} ~ input.error.message}} }}}}",
            Value::from(format!("Error executing {name}: "))
        ))),
    });
    Block::new(BlockKind::Sequence(vec![
        run,
        record("{{ input.observation }}", "none", true),
    ]))
}

/// TEA's result, from the record.
fn result(max: u32) -> Block {
    transform(Value::from(format!(
        "{{{{ merge({{'steps': input.steps, 'final_answer': input.answer, 'react_steps': input.steps, 'model': input.model}}, {{'reasoning_trace': input.trace, 'reasoning_answer': input.answer, 'total_steps': input.step_num}} if input.done else {{'reasoning_trace': input.trace + [{{'step': 'react_max_steps', 'total_steps': {max}, 'warning': 'Max steps reached without final answer'}}], 'total_steps': {max}, 'warning': 'Max steps ({max}) reached without achieving goal'}}) }}}}"
    )))
}
