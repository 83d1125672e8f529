//! TEA's `retry.loop`: run a validation action; while it answers `valid: false` and
//! retries remain, run the file's correction node (its block, without its edges) and
//! validate again. It compiles to Weft's own blocks, so every attempt is journaled:
//!
//! ```text
//! sequence: loop max_retries + 1 [_retry_count, validate (a failure is a verdict),
//!           when invalid and retries remain: _retry_errors, correct (a failure ends
//!           the loop)] -> result
//! ```
//!
//! `retry_delay` waits (a `time.sleep` block) after each correction, as TEA does.
//! The state keys are TEA's: `_retry_count`, `_retry_errors`, `_retry_result` (the
//! latest verdict, or TEA's record of a failed correction) and `_retry_exhausted`; the
//! verdict's own keys (`valid`, `errors`, ...) are spread into the state, as TEA
//! spreads them. The correction node writes the state as it would as a node, so the
//! next validation sees what it corrected.

use super::{Compiler, setting, transform};
use serde_json::{Map, Value, json};
use weft_core::Diagnostic;
use weft_core::ir::{
    ActionSpec, Block, BlockKind, BranchSpec, Case, Expr, LoopSpec, Rescue, ValueTemplate,
};

/// The options `retry.loop` reads.
const OPTIONS: &[&str] = &[
    "validate",
    "validate_args",
    "correct",
    "max_retries",
    "retry_delay",
];

/// The most retries a file may ask for.
const MAX_RETRIES: u64 = 50;

/// The latest verdict, in templates.
const VERDICT: &str = "state._retry_result";

impl Compiler<'_> {
    /// The block of `uses: retry.loop` with `with`, at node pointer `ptr`.
    pub(super) fn retry_loop(
        &mut self,
        with: Option<&Value>,
        ptr: &str,
        node: &str,
    ) -> Option<Block> {
        let wptr = format!("{ptr}/with");
        let with = self.with_options(
            "retry.loop",
            with,
            &wptr,
            (
                "its `validate` action and `correct` node",
                "with: {validate: validate.extraction, correct: fix_extraction, max_retries: 2}",
            ),
            OPTIONS,
        )?;
        let max = self.constant_count(
            with.get("max_retries"),
            &format!("{wptr}/max_retries"),
            1,
            MAX_RETRIES,
        )?;
        let pause = self.retry_delay(with.get("retry_delay"), &wptr)?;
        let validate = self.retry_validation(with, &wptr, node)?;
        let (name, correct) = self.correction(with.get("correct"), &format!("{wptr}/correct"))?;
        Some(assemble(validate, &name, correct, pause, max))
    }

    /// The validation action, run with `validate_args` as its options (rendered for
    /// each attempt, so a corrected state is what it checks).
    fn retry_validation(
        &mut self,
        with: &Map<String, Value>,
        wptr: &str,
        node: &str,
    ) -> Option<Block> {
        let action = self.required_text(
            "retry.loop",
            with,
            (
                "validate",
                "the name of a validation action",
                Some("validate: validate.extraction"),
            ),
            wptr,
        )?;
        let args = match with.get("validate_args") {
            None | Some(Value::Null) => None,
            Some(a @ Value::Object(_)) => Some(a),
            Some(_) => {
                self.diags.push(Diagnostic::error(
                    format!("{wptr}/validate_args"),
                    "validate_args is a mapping of the validation action's options",
                ));
                return None;
            }
        };
        let mut check = self.action(action, args, &format!("{wptr}/validate_args"), node)?;
        // TEA: a validation action that raises is a verdict, not a failure.
        check.policy.rescue.push(Rescue {
            when: Vec::new(),
            then: transform(json!({
                "valid": false,
                "errors": [{"message": "{{ input.error.message }}", "type": "validation_error"}],
            })),
        });
        Some(check)
    }

    /// `retry_delay` (seconds): TEA waits that long after a correction, before it
    /// validates again; so does Weft, with a `time.sleep` block.
    fn retry_delay(&mut self, delay: Option<&Value>, wptr: &str) -> Option<Option<Block>> {
        let seconds = match delay {
            None | Some(Value::Null) => return Some(None),
            Some(d) => d.as_f64().filter(|s| (0.0..=3600.0).contains(s)),
        };
        let Some(seconds) = seconds else {
            self.diags.push(
                Diagnostic::error(
                    format!("{wptr}/retry_delay"),
                    "retry_delay is a number of seconds, up to an hour",
                )
                .hint("retry_delay: 0.5"),
            );
            return None;
        };
        if seconds == 0.0 {
            return Some(None);
        }
        Some(Some(Block::new(BlockKind::Action(ActionSpec {
            uses: "time.sleep".into(),
            params: Some(ValueTemplate(
                json!({"ms": (seconds * 1000.0).round() as u64}),
            )),
        }))))
    }

    /// The correction node's name and block (the node as it runs in the graph, without
    /// its edges).
    fn correction(&mut self, name: Option<&Value>, ptr: &str) -> Option<(String, Block)> {
        let Some(name) = name.and_then(Value::as_str) else {
            self.diags.push(
                Diagnostic::error(ptr, "retry.loop needs `correct`, the name of the node that corrects a failed validation")
                    .hint("correct: fix_extraction"),
            );
            return None;
        };
        let Some(index) = self
            .nodes
            .iter()
            .position(|n| n.name.as_deref() == Some(name))
        else {
            let names: Vec<String> = self.nodes.iter().filter_map(|n| n.name.clone()).collect();
            let d = Diagnostic::error(
                ptr,
                format!("retry.loop's correction node `{name}` is not a node of this file"),
            );
            self.diags.push(d.hint_closest(
                name,
                names.iter().map(String::as_str),
                format!("its nodes: {}", names.join(", ")),
            ));
            return None;
        };
        if self.correcting.iter().any(|n| n == name) {
            self.diags.push(Diagnostic::error(
                ptr,
                format!(
                    "node `{name}` corrects through itself (retry.loop within its own correction)"
                ),
            ));
            return None;
        }
        let node = &self.nodes[index];
        self.correcting.push(name.to_owned());
        let block = self.node(node, &format!("/nodes/{index}"), name, None, false);
        self.correcting.pop();
        Some((name.to_owned(), block?))
    }
}

/// The loop and the node's result.
fn assemble(
    mut validate: Block,
    name: &str,
    correct: Block,
    pause: Option<Block>,
    max: u32,
) -> Block {
    validate.data.set.insert(
        "_retry_result".into(),
        ValueTemplate(Value::from(
            "{{ output if output is mapping else {'valid': false, 'errors': [{'message': 'the validation action gave no verdict', 'type': 'validation_error'}]} }}",
        )),
    );
    // TEA ends the loop at a correction that fails, keeping its error. The rescue is
    // on a sequence around the node's block, so the node's own state writes never
    // see the rescue's output.
    let mut correct = Block::new(BlockKind::Sequence(vec![correct]));
    correct.policy.rescue.push(Rescue {
        when: Vec::new(),
        then: setting(json!({
            "_retry_result": format!("{{{{ {{'valid': false, 'errors': state._retry_errors, 'correction_error': input.error.message}} }}}}"),
        })),
    });
    let attempt = setting(json!({"_retry_count": "{{ iteration }}"}));
    let record_errors =
        setting(json!({"_retry_errors": format!("{{{{ {VERDICT}.errors or [] }}}}")}));
    let retry = Block::new(BlockKind::Branch(BranchSpec {
        cases: vec![Case {
            name: Some("correct".into()),
            when: Expr(format!(
                "not ({VERDICT}.valid == true) and iteration < {max}"
            )),
            then: Block::new(BlockKind::Sequence(
                [record_errors, correct].into_iter().chain(pause).collect(),
            )),
        }],
        otherwise: None,
    }));
    let repeat = Block::new(BlockKind::Loop(LoopSpec {
        body: Box::new(Block::new(BlockKind::Sequence(vec![
            attempt, validate, retry,
        ]))),
        max_iterations: max + 1,
        while_: None,
        until: Some(Expr(format!(
            "{VERDICT}.valid == true or 'correction_error' in {VERDICT}"
        ))),
        fail_at_max: false,
        warn_at_max: false,
    }));
    let correction_failed = format!("'correction_error' in {VERDICT}");
    let failed = Value::from(format!("Correction node '{name}' failed: "));
    let result = transform(Value::from(format!(
        "{{{{ {{'_retry_count': state._retry_count, '_retry_errors': (state._retry_errors + [{{'message': {failed} ~ {VERDICT}.correction_error, 'type': 'correction_error'}}]), '_retry_result': {VERDICT}, '_retry_exhausted': false, 'valid': false}} if {correction_failed} else merge({{'_retry_count': state._retry_count, '_retry_errors': [] if {VERDICT}.valid == true else ({VERDICT}.errors or []), '_retry_result': {VERDICT}, '_retry_exhausted': not ({VERDICT}.valid == true)}}, {VERDICT}) }}}}"
    )));
    Block::new(BlockKind::Sequence(vec![repeat, result]))
}
