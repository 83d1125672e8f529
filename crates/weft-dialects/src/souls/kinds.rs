//! The block types that are more than one model call: `gate`, `code`, `dispatch` and
//! `loop` (a `linear` and a `synthesize` block are built in `blocks.rs`).

use super::Compiler;
use super::blocks::{DEFAULT_CODE_TIMEOUT, DEFAULT_IMPORTS, carried, llm};
use super::doc::{Code, Common, DispatchExit, Gate, Loop};
use super::prompt::{self, with_context};
use crate::template_text::literal;
use indexmap::IndexMap;
use serde_json::{Value, json};
use weft_core::Diagnostic;
use weft_core::ir::{
    Block, BlockKind, CodeLimits, CodeSpec, Expr, LoopSpec, OnError, ParallelSpec, SourceLines,
    Template, TransformSpec, ValueTemplate,
};

/// A code block's exit: the `exit_handle` of its dict result (`input` is the result).
pub(super) const CODE_EXIT: &str =
    "{{ input.exit_handle if input is mapping and input.exit_handle is string else '' }}";

impl Compiler<'_> {
    /// `gate`: the soul judges `results[eval_key]`; its first line, PASS or `FAIL:
    /// reason`, picks the `pass` or `fail` exit.
    pub(super) fn gate(
        &mut self,
        raw: &Value,
        ptr: &str,
        loops: &[(String, Option<String>)],
    ) -> Option<Block> {
        let g: Gate = self.diags.parse(raw, ptr)?;
        if g.pass_to.is_some() != g.fail_to.is_some() {
            self.diags.push(
                Diagnostic::error(ptr, "a gate's `pass` and `fail` shorthands go together")
                    .hint("give both targets, or neither and route with conditional_transitions"),
            );
        }
        let soul = self.soul(&g.soul_ref, &format!("{ptr}/soul_ref"))?;
        self.result_ref(&g.eval_key, &format!("{ptr}/eval_key"));
        let mut parts = vec![prompt::result_text(&g.eval_key)];
        parts.extend(carried(loops));
        let call = llm(&soul, with_context(&literal(prompt::GATE), &parts));
        let line =
            "{%- set line = ((input | string).strip().split('\\n') | first | default('')) -%}";
        let passed = "line.strip().upper().startswith('PASS')";
        let pass_output = match &g.extract_field {
            None => "{{ line }}".to_owned(),
            Some(f) => format!(
                "{{%- set c = state.results[{k}] -%}}{{%- set data = fromjson(c) if c is string and c.strip().startswith('[') else c -%}}{{%- if data is iterable and data is not string and data is not mapping and data | length > 0 and data | last is mapping and (data | last)[{f}] is defined -%}}{{{{ text((data | last)[{f}]) }}}}{{%- else -%}}{{{{ line }}}}{{%- endif -%}}",
                k = Value::from(g.eval_key.as_str()),
                f = Value::from(f.as_str())
            ),
        };
        let decide = Block::new(BlockKind::Transform(TransformSpec {
            output: ValueTemplate(Value::from(format!(
                "{line}{{%- if {passed} -%}}{pass_output}{{%- elif ':' in line -%}}{{{{ line.split(':', 1)[1].strip() }}}}{{%- else -%}}{{{{ line }}}}{{%- endif -%}}"
            ))),
            exit: Some(Template(format!(
                "{line}{{%- if {passed} -%}}pass{{%- else -%}}fail{{%- endif -%}}"
            ))),
        }));
        Some(Block::new(BlockKind::Sequence(vec![call, decide])))
    }

    /// `code`: `def main(data)` gets its declared `inputs` by name when it declares any
    /// (runsight), else `{results, metadata, shared_memory}` (spec 001); a dict result
    /// with `exit_handle` picks that exit.
    pub(super) fn code(
        &mut self,
        id: &str,
        raw: &Value,
        ptr: &str,
        common: &Common,
    ) -> Option<Block> {
        let c: Code = self.diags.parse(raw, ptr)?;
        let seconds = common.timeout_seconds.unwrap_or(DEFAULT_CODE_TIMEOUT);
        // runsight hands a code block its declared inputs; spec 001, the run state.
        let data = if common.inputs.is_some() {
            let inputs: serde_json::Map<String, Value> = self
                .declared_inputs(common, ptr)
                .into_iter()
                .map(|(name, value)| (name, Value::from(format!("{{{{ {value} }}}}"))))
                .collect();
            json!({ "data": inputs })
        } else {
            json!({"data": {
                "results": "{{ state.results }}",
                "metadata": "{{ state.metadata }}",
                "shared_memory": "{{ state.shared_memory }}",
            }})
        };
        let spec = self.python_main(
            &format!("code block `{id}`"),
            &c.code,
            "data",
            data,
            c.allowed_imports,
            seconds,
            ptr,
        )?;
        let exit = Block::new(BlockKind::Transform(TransformSpec {
            output: ValueTemplate(Value::from("{{ input }}")),
            exit: Some(Template(CODE_EXIT.into())),
        }));
        Some(Block::new(BlockKind::Sequence(vec![
            Block::new(BlockKind::Code(spec)),
            exit,
        ])))
    }

    /// Spec 001's Python: `code` (at `{ptr}/code`) defining `def main(<param>)`, called
    /// with `args`, importing `allowed_imports` (default: the code block's list), for at
    /// most `seconds`. `what` names the owner in the error when `main` is missing.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn python_main(
        &mut self,
        what: &str,
        code: &str,
        param: &str,
        args: Value,
        allowed_imports: Option<Vec<String>>,
        seconds: u64,
        ptr: &str,
    ) -> Option<CodeSpec> {
        if !code
            .lines()
            .any(|l| l.trim_start().starts_with("def main("))
        {
            self.diags.push(
                Diagnostic::error(
                    format!("{ptr}/code"),
                    format!("{what} defines no `main` function"),
                )
                .hint(format!("def main({param}):\n    return {param}")),
            );
            return None;
        }
        Some(CodeSpec {
            language: "python".into(),
            source: code.to_owned(),
            origin: self
                .map
                .text_line(&format!("{ptr}/code"))
                .map(|file_line| SourceLines {
                    source_line: 1,
                    file_line,
                }),
            entry: Some("main".into()),
            args: Some(ValueTemplate(args)),
            imports: Some(
                allowed_imports
                    .unwrap_or_else(|| DEFAULT_IMPORTS.iter().map(|m| (*m).to_owned()).collect()),
            ),
            builtins: None,
            limits: CodeLimits {
                time_ms: seconds.clamp(1, 3600) * 1000,
                ..CodeLimits::default()
            },
        })
    }

    /// `dispatch`: one soul per exit, all at once; results per exit and combined.
    pub(super) fn dispatch(&mut self, id: &str, raw: &Value, ptr: &str) -> Option<Block> {
        let Some(exits) = raw.get("exits") else {
            self.diags.push(Diagnostic::error(ptr, "a dispatch block needs `exits`, one per branch").hint("exits: [{id: summary, label: Summary, soul_ref: writer, task: Summarize the input.}]"));
            return None;
        };
        let exits: Vec<DispatchExit> = self.diags.parse(exits, &format!("{ptr}/exits"))?;
        if exits.is_empty() {
            self.diags.push(Diagnostic::error(
                format!("{ptr}/exits"),
                "a dispatch block needs at least one exit",
            ));
            return None;
        }
        let mut branches = IndexMap::new();
        for (i, e) in exits.iter().enumerate() {
            let eptr = format!("{ptr}/exits/{i}");
            if branches.contains_key(&e.id) {
                self.diags.push(Diagnostic::error(
                    format!("{eptr}/id"),
                    format!("two exits are named `{}`", e.id),
                ));
                continue;
            }
            let soul = self.soul(&e.soul_ref, &format!("{eptr}/soul_ref"))?;
            // The branch's task, with the run's task as its context.
            let context = "{{ text(initial.context) if initial is mapping and initial.context is defined else (text(initial.instruction) if initial is mapping else text(initial)) }}";
            branches.insert(
                e.id.clone(),
                llm(
                    &soul,
                    with_context(&literal(&e.task), &[context.to_owned()]),
                ),
            );
        }
        let combined: Vec<Value> = exits
            .iter()
            .map(|e| json!({"exit_id": e.id, "output": format!("{{{{ input[{}] }}}}", Value::from(e.id.as_str()))}))
            .collect();
        let combine = Block::new(BlockKind::Transform(TransformSpec {
            output: ValueTemplate(Value::Array(combined)),
            exit: None,
        }));
        let mut block = Block::new(BlockKind::Sequence(vec![
            Block::new(BlockKind::Parallel(ParallelSpec {
                branches,
                max_concurrency: None,
                fail_fast: true,
                on_error: OnError::default(),
                isolate: false,
                race: false,
            })),
            combine,
        ]));
        let keys: Vec<String> = exits
            .iter()
            .enumerate()
            .map(|(i, e)| {
                format!(
                    "{}: output[{i}].output",
                    Value::from(format!("{id}.{}", e.id))
                )
            })
            .chain([format!("{}: output", Value::from(id))])
            .collect();
        block.data.set.insert(
            "results".into(),
            ValueTemplate(Value::from(format!(
                "{{{{ merge(state.results, {{{}}}) }}}}",
                keys.join(", ")
            ))),
        );
        Some(block)
    }

    /// `loop`: the inner blocks in order, each round, up to `max_rounds`; it stops early
    /// on `break_on_exit`, on `break_condition`, or when `retry_on_exit` does not match.
    pub(super) fn run_loop(
        &mut self,
        id: &str,
        raw: &Value,
        ptr: &str,
        loops: &mut Vec<(String, Option<String>)>,
    ) -> Option<Block> {
        let l: Loop = self.diags.parse(raw, ptr)?;
        if !(1..=50).contains(&l.max_rounds) {
            self.diags.push(
                Diagnostic::error(
                    format!("{ptr}/max_rounds"),
                    format!("max_rounds is {}; it must be 1-50", l.max_rounds),
                )
                .hint("spec 001: max_rounds, 1-50, default 5"),
            );
            return None;
        }
        if l.inner_block_refs.is_empty() {
            self.diags.push(Diagnostic::error(
                format!("{ptr}/inner_block_refs"),
                "inner_block_refs must name at least one block",
            ));
            return None;
        }
        if loops.iter().any(|(outer, _)| outer == id) || l.inner_block_refs.iter().any(|r| r == id)
        {
            self.diags.push(
                Diagnostic::error(
                    format!("{ptr}/inner_block_refs"),
                    format!("loop `{id}` runs itself"),
                )
                .hint("a loop's inner blocks are other blocks"),
            );
            return None;
        }
        let carry = match &l.carry_context {
            Some(c) if c.enabled => {
                if !matches!(c.mode.as_str(), "last" | "all") {
                    let d = Diagnostic::error(
                        format!("{ptr}/carry_context/mode"),
                        format!("unknown mode `{}`", c.mode),
                    );
                    self.diags
                        .push(d.hint_closest(&c.mode, ["last", "all"], "mode: last or all"));
                }
                if let Some(src) = &c.source_blocks {
                    for (i, s) in src.iter().enumerate() {
                        if !l.inner_block_refs.contains(s) {
                            self.diags.push(
                                Diagnostic::error(
                                    format!("{ptr}/carry_context/source_blocks/{i}"),
                                    format!("`{s}` is not one of this loop's inner blocks"),
                                )
                                .hint(format!(
                                    "source_blocks is a subset of inner_block_refs: {}",
                                    l.inner_block_refs.join(", ")
                                )),
                            );
                        }
                    }
                }
                if c.inject_as.is_empty()
                    || !c
                        .inject_as
                        .chars()
                        .all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
                {
                    self.diags.push(Diagnostic::error(
                        format!("{ptr}/carry_context/inject_as"),
                        "inject_as is a name (letters, digits, `_`)",
                    ));
                }
                Some(c)
            }
            _ => None,
        };
        loops.push((id.to_owned(), carry.map(|c| c.inject_as.clone())));
        let mut steps = Vec::new();
        for (i, r) in l.inner_block_refs.iter().enumerate() {
            let rptr = format!("{ptr}/inner_block_refs/{i}");
            if !self.block_ref(r, &rptr, "the inner block") {
                continue;
            }
            let inner_raw = self.raw_blocks[r].clone();
            if let Some(b) = self.block_in(r, &inner_raw, &format!("/blocks/{r}"), loops) {
                steps.push(b);
            }
        }
        loops.pop();
        if steps.len() != l.inner_block_refs.len() {
            return None;
        }
        if let Some(c) = carry {
            let sources = c
                .source_blocks
                .clone()
                .unwrap_or_else(|| l.inner_block_refs.clone());
            let last = l.inner_block_refs.last().expect("at least one inner block");
            // Written by the last inner block, so its exit still decides the loop.
            let round: Vec<String> = sources
                .iter()
                .map(|s| {
                    let value = if s == last {
                        "output".to_owned()
                    } else {
                        format!("state.results[{}]", Value::from(s.as_str()))
                    };
                    format!("{}: {value}", Value::from(s.as_str()))
                })
                .collect();
            let round = format!("{{{}}}", round.join(", "));
            let key = Value::from(c.inject_as.as_str());
            let value = if c.mode == "all" {
                format!(
                    "{{{{ (state.shared_memory[{key}] if state.shared_memory[{key}] is defined else []) + [{round}] }}}}"
                )
            } else {
                format!("{{{{ {round} }}}}")
            };
            if let Some(last_block) = steps.last_mut() {
                last_block.data.set.insert(
                    format!("shared_memory.{}", c.inject_as),
                    ValueTemplate(Value::from(value)),
                );
            }
        }
        let mut stops = Vec::new();
        // Why a round ended the loop, first match first, as runsight words it.
        let mut reasons = Vec::new();
        if let Some(x) = &l.break_on_exit {
            let x = Value::from(x.as_str());
            stops.push(format!("exit == {x}"));
            reasons.push((
                format!("exit == {x}"),
                "\"exit_handle '\" ~ exit ~ \"' matched break_on_exit\"".to_owned(),
            ));
        }
        if let Some(x) = &l.retry_on_exit {
            let x = Value::from(x.as_str());
            stops.push(format!("exit != {x}"));
            reasons.push((
                format!("exit != {x}"),
                "\"exit_handle '\" ~ (exit if exit is defined else '') ~ \"' did not match retry_on_exit\"".to_owned(),
            ));
        }
        if let Some(c) = &l.break_condition {
            let cond = self.break_expr(c, &format!("{ptr}/break_condition"))?;
            reasons.push((cond.clone(), "'condition met'".into()));
            stops.push(cond);
        }
        if let Some(last_block) = steps.last_mut() {
            last_block.data.set.insert(
                format!("shared_memory.__loop__{id}"),
                ValueTemplate(Value::from(loop_record(&reasons, l.max_rounds))),
            );
        }
        Some(Block::new(BlockKind::Loop(LoopSpec {
            body: Box::new(Block::new(BlockKind::Sequence(steps))),
            max_iterations: l.max_rounds,
            while_: None,
            until: (!stops.is_empty()).then(|| Expr(stops.join(" or "))),
            fail_at_max: false,
            warn_at_max: false,
        })))
    }
}

/// The record runsight's loop leaves in `shared_memory.__loop__<id>`, written by the last
/// inner block each round: `{rounds_completed, broke_early, break_reason}` (the reason
/// of the first stop that holds, `max_rounds reached` at the bound, else none).
fn loop_record(reasons: &[(String, String)], max_rounds: u32) -> String {
    let mut reason = format!("('max_rounds reached' if iteration + 1 >= {max_rounds} else none)");
    for (cond, why) in reasons.iter().rev() {
        reason = format!("({why} if ({cond}) else {reason})");
    }
    let broke = if reasons.is_empty() {
        "false".to_owned()
    } else {
        reasons
            .iter()
            .map(|(c, _)| format!("({c})"))
            .collect::<Vec<_>>()
            .join(" or ")
    };
    format!(
        "{{{{ {{'rounds_completed': iteration + 1, 'broke_early': ({broke}), 'break_reason': {reason}}} }}}}"
    )
}
