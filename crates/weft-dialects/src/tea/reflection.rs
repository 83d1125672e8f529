//! TEA's `reflection.loop`: generate, evaluate, correct, until the output is valid or
//! the iterations run out. It compiles to Weft's own blocks, so each attempt is
//! journaled, streamed and retried like any step:
//!
//! ```text
//! sequence: start (reflection_* state) -> loop until valid [count, generator,
//!           evaluator, record, corrector when invalid and not last] -> result
//! ```
//!
//! The generator and the corrector are an action (`action: llm.call` with its options
//! beside it) or Python (`run:`, which sets `result`, with `state`, `output` and the
//! `reflection_*` values in scope). The evaluator is `type: schema` (a JSON Schema),
//! `type: llm` (a model answers `{valid, score, reason, suggestions}`) or
//! `type: custom` (Python setting `result` to `{valid, score, errors}`). The state keys
//! are TEA's: `reflection_iteration`, `reflection_output`, `reflection_errors`,
//! `reflection_history`, `reflection_best`, `reflection_best_score`; the evaluation of
//! the last attempt is kept as `reflection_evaluation`.

use super::{Compiler, setting, transform};
use serde_json::{Map, Value, json};
use weft_core::Diagnostic;
use weft_core::ir::{
    Assertion, Block, BlockKind, BranchSpec, Case, CodeLimits, CodeSpec, Expr, LoopSpec,
    ValueTemplate,
};

/// What a model judge answers.
fn judgement_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "valid": {"type": "boolean"},
            "score": {"type": "number"},
            "reason": {"type": "string"},
            "suggestions": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["valid", "score"]
    })
}

/// The judge's instructions, before the evaluator's own prompt.
const JUDGE: &str = "You judge an output against the request that follows. Answer with JSON only: \"valid\" (true when the output meets the request), \"score\" (from 0.0, useless, to 1.0, perfect), \"reason\" (why, in a sentence) and \"suggestions\" (how to improve it).";

/// The options `reflection.loop` reads.
const OPTIONS: &[&str] = &[
    "generator",
    "evaluator",
    "corrector",
    "max_iterations",
    "on_failure",
];

/// The latest evaluation, in templates.
const EVALUATION: &str = "state.reflection_evaluation";

/// How a failed loop ends (`on_failure`).
#[derive(Clone, Copy, PartialEq)]
enum OnFailure {
    ReturnBest,
    ReturnLast,
    Raise,
}

impl Compiler<'_> {
    /// The block of `uses: reflection.loop` with `with`, at node pointer `ptr`.
    pub(super) fn reflection_loop(
        &mut self,
        with: Option<&Value>,
        ptr: &str,
        node: &str,
    ) -> Option<Block> {
        let wptr = format!("{ptr}/with");
        let with = self.with_options(
            "reflection.loop",
            with,
            &wptr,
            (
                "its `generator` and `evaluator`",
                "with: {generator: {action: llm.call, prompt: ...}, evaluator: {type: schema, schema: {...}}}",
            ),
            OPTIONS,
        )?;
        let max = self.reflection_max(with.get("max_iterations"), &wptr)?;
        let on_failure = self.on_failure(with.get("on_failure"), &wptr)?;
        let generator = self.reflection_part(with, "generator", &wptr, node)?;
        let evaluator =
            self.evaluator(with.get("evaluator"), &format!("{wptr}/evaluator"), node)?;
        let corrector = match with.get("corrector") {
            None | Some(Value::Null) => None,
            Some(_) => Some(self.reflection_part(with, "corrector", &wptr, node)?),
        };
        Some(assemble(generator, evaluator, corrector, max, on_failure))
    }

    fn reflection_max(&mut self, v: Option<&Value>, wptr: &str) -> Option<u32> {
        match v {
            None => Some(3),
            Some(n) => match n.as_u64().filter(|n| (1..=100).contains(n)) {
                Some(n) => Some(n as u32),
                None => {
                    self.diags.push(Diagnostic::error(
                        format!("{wptr}/max_iterations"),
                        "max_iterations is a whole number from 1 to 100",
                    ));
                    None
                }
            },
        }
    }

    fn on_failure(&mut self, v: Option<&Value>, wptr: &str) -> Option<OnFailure> {
        match v.and_then(Value::as_str) {
            None if v.is_none() => Some(OnFailure::ReturnBest),
            Some("return_best") => Some(OnFailure::ReturnBest),
            Some("return_last") => Some(OnFailure::ReturnLast),
            Some("raise") => Some(OnFailure::Raise),
            _ => {
                self.diags.push(
                    Diagnostic::error(
                        format!("{wptr}/on_failure"),
                        "on_failure is return_best, return_last or raise",
                    )
                    .hint("on_failure: return_best"),
                );
                None
            }
        }
    }

    /// The generator or the corrector: an action with its options, or Python.
    fn reflection_part(
        &mut self,
        with: &Map<String, Value>,
        role: &str,
        wptr: &str,
        node: &str,
    ) -> Option<Block> {
        let ptr = format!("{wptr}/{role}");
        let Some(cfg) = with.get(role).and_then(Value::as_object) else {
            self.diags.push(
                Diagnostic::error(&ptr, format!("reflection.loop needs `{role}`: an `action` with its options, or `run` (Python setting `result`)"))
                    .hint(format!("{role}: {{action: llm.call, prompt: \"...\"}}")),
            );
            return None;
        };
        if let Some(code) = cfg.get("run") {
            return self.reflection_code(code, cfg.get("language"), &ptr);
        }
        let Some(action) = cfg.get("action").and_then(Value::as_str) else {
            self.diags.push(Diagnostic::error(
                &ptr,
                format!("the {role} needs `action` (with its options beside it) or `run`"),
            ));
            return None;
        };
        let params: Map<String, Value> = cfg
            .iter()
            .filter(|(k, _)| k.as_str() != "action")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        self.action(action, Some(&Value::Object(params)), &ptr, node)
    }

    /// Python that sets `result`, as TEA runs it: with `state`, `output` (the latest
    /// output) and the `reflection_*` values as names.
    fn reflection_code(
        &mut self,
        code: &Value,
        language: Option<&Value>,
        ptr: &str,
    ) -> Option<Block> {
        let Some(code) = code.as_str() else {
            self.diags.push(Diagnostic::error(
                format!("{ptr}/run"),
                "`run` is Python code that sets `result`",
            ));
            return None;
        };
        if let Some(l) = language.filter(|l| l.as_str() != Some("python")) {
            self.diags.push(
                Diagnostic::error(
                    format!("{ptr}/language"),
                    format!("reflection.loop runs Python here, not {l}"),
                )
                .hint("write the code in Python, setting `result`"),
            );
            return None;
        }
        let source = format!(
            "import json\nresult = None\n{}\nresult\n",
            crate::python_body::dedent(code)
        );
        Some(Block::new(BlockKind::Code(CodeSpec {
            language: "python".into(),
            source,
            origin: None,
            entry: None,
            args: Some(ValueTemplate(json!({
                "state": "{{ state }}",
                "variables": "{{ variables }}",
                "output": "{{ state.reflection_output }}",
                "reflection_output": "{{ state.reflection_output }}",
                "reflection_errors": "{{ state.reflection_errors }}",
                "reflection_iteration": "{{ state.reflection_iteration }}",
            }))),
            imports: None,
            builtins: None,
            limits: CodeLimits::default(),
        })))
    }

    /// The evaluator, whose block's output is `{valid, score, errors}`.
    fn evaluator(&mut self, cfg: Option<&Value>, ptr: &str, node: &str) -> Option<Block> {
        let Some(cfg) = cfg.and_then(Value::as_object) else {
            self.diags.push(
                Diagnostic::error(ptr, "reflection.loop needs an `evaluator`")
                    .hint("evaluator: {type: schema, schema: {type: object, required: [name]}}"),
            );
            return None;
        };
        match cfg.get("type").and_then(Value::as_str).unwrap_or("schema") {
            "schema" => {
                let schema = cfg.get("schema").cloned().unwrap_or_else(|| json!({}));
                let schema = super::constant_expression(&schema);
                // The check runs once; the verdict is built from its answer.
                let check = transform(Value::from(format!(
                    "{{{{ fits_schema(state.reflection_output, {schema}) }}}}"
                )));
                let verdict = transform(Value::from(
                    "{{ {'valid': input, 'score': 1.0 if input else 0.0, 'errors': [] if input else [{'message': 'the output does not fit the schema', 'type': 'schema'}]} }}",
                ));
                Some(Block::new(BlockKind::Sequence(vec![check, verdict])))
            }
            "llm" => {
                let mut with = Map::new();
                with.insert("system".into(), Value::from(JUDGE));
                let prompt = cfg.get("prompt").cloned().unwrap_or_else(|| {
                    Value::from(
                        "Is this output valid and correct?\n\n{{ state.reflection_output }}",
                    )
                });
                with.insert("prompt".into(), prompt);
                for key in ["model", "provider", "api_base", "temperature"] {
                    if let Some(v) = cfg.get(key) {
                        with.insert(key.into(), v.clone());
                    }
                }
                with.insert(
                    "response_format".into(),
                    json!({"type": "json_schema", "json_schema": {"name": "judgement", "schema": judgement_schema()}}),
                );
                let judge = self.llm_call("llm.call", Some(&Value::Object(with)), ptr, node)?;
                // The verdict reads the judge's answer, its input.
                let verdict = transform(json!({
                    "valid": "{{ input.content.valid == true }}",
                    "score": "{{ input.content.score or 0.0 }}",
                    "errors": "{{ [] if input.content.valid == true else [{'message': input.content.reason or 'judged invalid', 'type': 'llm'}] }}",
                    "suggestions": "{{ input.content.suggestions or [] }}",
                }));
                Some(Block::new(BlockKind::Sequence(vec![judge, verdict])))
            }
            "custom" => self.reflection_code(
                cfg.get("run").unwrap_or(&Value::Null),
                cfg.get("language"),
                ptr,
            ),
            other => {
                let d = Diagnostic::error(
                    format!("{ptr}/type"),
                    format!("unknown evaluator type `{other}`"),
                );
                self.diags.push(d.hint_closest(
                    other,
                    ["schema", "llm", "custom"],
                    "evaluator types: schema, llm, custom",
                ));
                None
            }
        }
    }
}

/// The loop around the parts, its start and its result.
fn assemble(
    mut generator: Block,
    mut evaluator: Block,
    corrector: Option<Block>,
    max: u32,
    on_failure: OnFailure,
) -> Block {
    let start = setting(json!({
        "reflection_iteration": 0,
        "reflection_output": null,
        "reflection_errors": [],
        "reflection_history": [],
        "reflection_best": null,
        "reflection_best_score": -1.0,
        "reflection_evaluation": {"valid": false, "score": 0.0, "errors": []},
    }));
    let count = setting(json!({"reflection_iteration": "{{ state.reflection_iteration + 1 }}"}));
    generator.data.set.insert(
        "reflection_output".into(),
        ValueTemplate(Value::from("{{ output }}")),
    );
    evaluator.data.set.insert(
        "reflection_evaluation".into(),
        ValueTemplate(Value::from(
            "{{ output if output is mapping else {'valid': false, 'score': 0.0, 'errors': [{'message': 'the evaluator gave no verdict'}]} }}",
        )),
    );
    let record = setting(json!({
        "reflection_history": format!("{{{{ state.reflection_history + [{{'iteration': state.reflection_iteration, 'output': state.reflection_output, 'score': {EVALUATION}.score or 0.0, 'valid': {EVALUATION}.valid == true, 'errors': {EVALUATION}.errors or []}}] }}}}"),
        "reflection_best": format!("{{{{ state.reflection_output if ({EVALUATION}.score or 0.0) > state.reflection_best_score else state.reflection_best }}}}"),
        "reflection_best_score": format!("{{{{ [{EVALUATION}.score or 0.0, state.reflection_best_score] | max }}}}"),
        "reflection_errors": format!("{{{{ {EVALUATION}.errors or [] }}}}"),
    }));
    let mut body = vec![count, generator, evaluator, record];
    if let Some(corrector) = corrector {
        // A dict the corrector returns (the input of `apply`) updates the state for the
        // next attempt.
        let mut apply = transform(Value::from("{{ input if input is mapping else {} }}"));
        apply.data.merge_output = true;
        body.push(Block::new(BlockKind::Branch(BranchSpec {
            cases: vec![Case {
                name: Some("correct".into()),
                when: Expr(format!(
                    "not ({EVALUATION}.valid == true) and state.reflection_iteration < {max}"
                )),
                then: Block::new(BlockKind::Sequence(vec![corrector, apply])),
            }],
            otherwise: None,
        })));
    }
    let repeat = Block::new(BlockKind::Loop(LoopSpec {
        body: Box::new(Block::new(BlockKind::Sequence(body))),
        max_iterations: max,
        while_: None,
        until: Some(Expr(format!("{EVALUATION}.valid == true"))),
        fail_at_max: false,
        warn_at_max: false,
    }));
    Block::new(BlockKind::Sequence(vec![
        start,
        repeat,
        result(on_failure, max),
    ]))
}

/// The node's result: the valid output (its keys, when it is a dict, as TEA spreads
/// them), or on failure the best or last attempt, or an error (`raise`).
fn result(on_failure: OnFailure, max: u32) -> Block {
    let failed_output = match on_failure {
        OnFailure::ReturnLast => "state.reflection_output",
        _ => "state.reflection_best",
    };
    let mut b = transform(Value::from(format!(
        "{{{{ merge({{'reflection_iteration': state.reflection_iteration, 'reflection_output': state.reflection_output if {EVALUATION}.valid == true else {failed_output}, 'reflection_errors': [] if {EVALUATION}.valid == true else state.reflection_errors, 'reflection_history': state.reflection_history, 'reflection_best': state.reflection_output if {EVALUATION}.valid == true else state.reflection_best, 'reflection_best_score': state.reflection_best_score, 'success': {EVALUATION}.valid == true, 'valid': {EVALUATION}.valid == true}}, (state.reflection_output if state.reflection_output is mapping else {{'result': state.reflection_output}}) if {EVALUATION}.valid == true else {{}}) }}}}"
    )));
    if on_failure == OnFailure::Raise {
        b.policy.assert.push(Assertion {
            warn: false,
            that: Expr(format!("{EVALUATION}.valid == true")),
            message: Some(format!(
                "reflection.loop: no valid output after {max} iterations (on_failure: raise)"
            )),
        });
    }
    b
}
