//! TEA's `reason.self_correct`: generate, then critique and improve for a number of
//! rounds. It compiles to Weft's own blocks, so every model call is journaled:
//!
//! ```text
//! sequence: generate -> read {output, confidence, potential_issues}
//!           -> loop improvement_rounds [critique -> read {issues, suggestions,
//!              improved_output, improvement_score}] -> result
//! ```
//!
//! As in TEA, the answers are asked for as JSON in the prompt and read leniently (the
//! first JSON object in the text): a first answer that is not JSON is the output as it
//! stands, a critique that is not JSON leaves the output as it was (and says so in the
//! trace). The record of the rounds travels from one block to the next as its input,
//! so the state holds nothing but the node's result. The result is TEA's: `output`,
//! `improvement_history`, `reasoning_trace`, `reasoning_answer`, `model`,
//! `generator_model`, `critic_model`, `rounds_completed`.

use super::{Compiler, template, transform};
use indexmap::IndexMap;
use serde_json::{Value, json};
use weft_core::ir::{Block, BlockKind, LoopSpec, ValueTemplate};

/// The options `reason.self_correct` reads.
const OPTIONS: &[&str] = &[
    "task",
    "model",
    "generator_model",
    "critic_model",
    "improvement_rounds",
    "critic_prompt",
    "temperature",
    "max_tokens",
    "provider",
    "api_base",
];

/// The generator's instructions (Weft's wording of TEA's request).
const GENERATE: &str = "You answer a task, then judge your own answer. Reply with JSON only: \"output\" (your answer to the task), \"confidence\" (from 0.0 to 1.0) and \"potential_issues\" (a list of weaknesses of your answer).";

/// What the critic is asked for when the file gives no `critic_prompt` (TEA's default).
const CRITIC_DEFAULT: &str =
    "Identify any issues with correctness, clarity, completeness, and style.";

/// The shape of the critic's answer.
const CRITIQUE: &str = "Reply with JSON only: \"issues\" (a list of the problems you found), \"suggestions\" (a list of how to fix them), \"improved_output\" (the output with your improvements made) and \"improvement_score\" (from 0.0 to 1.0).";

/// The most rounds a file may ask for.
const MAX_ROUNDS: u64 = 20;

impl Compiler<'_> {
    /// The block of `uses: reason.self_correct` with `with`, at node pointer `ptr`.
    pub(super) fn reason_self_correct(
        &mut self,
        with: Option<&Value>,
        ptr: &str,
        node: &str,
    ) -> Option<Block> {
        let uses = "reason.self_correct";
        let wptr = format!("{ptr}/with");
        let with = self.with_options(
            uses,
            with,
            &wptr,
            ("its `task`", "with: {task: \"{{ state.task }}\"}"),
            OPTIONS,
        )?;
        let task = self.required_text(
            uses,
            with,
            (
                "task",
                "a string (a template)",
                Some("task: \"{{ state.task }}\""),
            ),
            &wptr,
        )?;
        let rounds = self.constant_count(
            with.get("improvement_rounds"),
            &format!("{wptr}/improvement_rounds"),
            2,
            MAX_ROUNDS,
        )?;
        let model = with.get("model");
        let pick = |key: &str| with.get(key).or(model);
        let critic_prompt = with
            .get("critic_prompt")
            .and_then(Value::as_str)
            .unwrap_or(CRITIC_DEFAULT);
        let generate = self.model_turn(
            uses,
            with,
            (GENERATE.to_owned(), format!("Task: {task}")),
            pick("generator_model"),
            (ptr, node),
        )?;
        let critique = self.model_turn(
            uses,
            with,
            (
                format!(
                    "You review an output critically and improve it.\n\n{critic_prompt}\n\n{CRITIQUE}"
                ),
                format!("Task: {task}\n\nCurrent output:\n{{{{ output }}}}"),
            ),
            pick("critic_model"),
            (ptr, node),
        )?;
        // The critic may never be asked (no rounds): its model is known from the file.
        let critic = self.reported_model(pick("critic_model"));
        let mut steps = vec![generate, first_record(task, rounds, critic)];
        if rounds > 0 {
            steps.push(critique_rounds(critique, rounds));
        }
        steps.push(result(rounds));
        Some(Block::new(BlockKind::Sequence(steps)))
    }
}

/// The first answer read as TEA reads it, as the record the rounds carry: the output,
/// the history, the trace and the model that answered.
fn first_record(task: &str, rounds: u32, critic: Value) -> Block {
    let mut record = transform(json!({
        "output": "{{ parsed.output if 'output' in parsed else input.content }}",
        "model": "{{ input.model }}",
        "critic_model": critic,
        "history": [{
            "round": 0,
            "type": "initial",
            "output": "{{ parsed.output if 'output' in parsed else input.content }}",
            "confidence": "{{ parsed.confidence if 'confidence' in parsed else 0.5 }}",
            "potential_issues": "{{ parsed.potential_issues if 'potential_issues' in parsed else [] }}",
        }],
        "trace": [
            {"step": "self_correct_start", "task": task, "improvement_rounds": rounds},
            {
                "step": "initial_generation",
                "output": "{{ ((parsed.output if 'output' in parsed else input.content) | string)[:500] }}",
                "confidence": "{{ parsed.confidence if 'confidence' in parsed else 0.5 }}",
            },
        ],
    }));
    record.data.bind = parsed_answer();
    record
}

/// `parsed`: the first JSON object in the answer's text, else an empty mapping.
fn parsed_answer() -> IndexMap<String, ValueTemplate> {
    IndexMap::from([(
        "parsed".to_owned(),
        ValueTemplate(Value::from(
            "{{ find_json(input.content | string) if find_json(input.content | string) is mapping else {} }}",
        )),
    )])
}

/// The improvement rounds: each critique's improved output replaces the output; a
/// critique that is not JSON is noted in the trace and changes nothing.
fn critique_rounds(critique: Block, rounds: u32) -> Block {
    let mut read = transform(Value::from(
        "{{ merge(carried, {'output': parsed.improved_output if 'improved_output' in parsed else carried.output, 'history': carried.history + [{'round': iteration + 1, 'type': 'improvement', 'issues_found': parsed.issues or [], 'suggestions': parsed.suggestions or [], 'output': parsed.improved_output if 'improved_output' in parsed else carried.output, 'improvement_score': parsed.improvement_score if 'improvement_score' in parsed else 0.5}], 'trace': carried.trace + [{'step': 'improvement_round_' ~ (iteration + 1), 'issues_count': (parsed.issues or []) | length, 'improvement_score': parsed.improvement_score if 'improvement_score' in parsed else 0.5}]}) if parsed else merge(carried, {'trace': carried.trace + [{'step': 'critique_round_' ~ (iteration + 1) ~ '_parse_error', 'raw_content': (input.content | string)[:200]}]}) }}",
    ));
    read.data.bind = parsed_answer();
    let mut round = Block::new(BlockKind::Sequence(vec![critique, read]));
    round.data.bind = IndexMap::from([
        ("carried".to_owned(), template("{{ input }}")),
        ("output".to_owned(), template("{{ input.output }}")),
    ]);
    Block::new(BlockKind::Loop(LoopSpec {
        body: Box::new(round),
        max_iterations: rounds,
        while_: None,
        until: None,
        fail_at_max: false,
        warn_at_max: false,
    }))
}

/// TEA's result, from the record.
fn result(rounds: u32) -> Block {
    transform(json!({
        "output": "{{ input.output }}",
        "improvement_history": "{{ input.history }}",
        "reasoning_trace": format!("{{{{ input.trace + [{{'step': 'self_correct_complete', 'rounds_completed': {rounds}}}] }}}}"),
        "reasoning_answer": "{{ input.output }}",
        "model": "{{ input.model }}",
        "generator_model": "{{ input.model }}",
        "critic_model": "{{ input.critic_model }}",
        "rounds_completed": rounds,
    }))
}
