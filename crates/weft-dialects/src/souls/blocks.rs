//! A block of any type as core IR: its type and keys checked, its type built (`linear`
//! and `synthesize` here, the others in `kinds.rs` and `child.rs`), then its common
//! fields applied (`common.rs`, `assertions.rs`) and its result written to
//! `results[<id>]`.

use super::doc::{COMMON, Common, Linear, Synthesize, TYPES};
use super::prompt::{self, with_context};
use super::{Compiler, ResolvedSoul};
use crate::template_text::literal;
use serde_json::Value;
use weft_core::Diagnostic;
use weft_core::ir::{Block, BlockKind, LlmSpec, Template, ValueTemplate};

/// Modules a code block may import unless it lists its own (spec 001).
pub(super) const DEFAULT_IMPORTS: &[&str] = &[
    "json",
    "re",
    "math",
    "datetime",
    "collections",
    "itertools",
    "hashlib",
    "base64",
    "time",
    "urllib.parse",
];

/// Default `timeout_seconds`: 300, and 30 for code (spec 001).
const DEFAULT_TIMEOUT: u64 = 300;
pub(super) const DEFAULT_CODE_TIMEOUT: u64 = 30;
impl Compiler<'_> {
    /// The block `id` (at `ptr`), with its state writes and policies.
    pub(super) fn block(&mut self, id: &str, raw: &Value, ptr: &str) -> Option<Block> {
        self.block_in(id, raw, ptr, &mut Vec::new())
    }

    /// `block`, inside the loops named in `loops` (innermost last): each loop's carried
    /// context is part of what its inner blocks' souls see.
    pub(super) fn block_in(
        &mut self,
        id: &str,
        raw: &Value,
        ptr: &str,
        loops: &mut Vec<(String, Option<String>)>,
    ) -> Option<Block> {
        let Some(obj) = raw.as_object() else {
            self.diags
                .push(Diagnostic::error(ptr, "a block is a mapping with a `type`"));
            return None;
        };
        let Some(kind) = obj.get("type").and_then(Value::as_str) else {
            self.diags.push(
                Diagnostic::error(ptr, format!("block `{id}` has no `type`")).hint(format!(
                    "the types: {}",
                    TYPES.iter().map(|(t, _)| *t).collect::<Vec<_>>().join(", ")
                )),
            );
            return None;
        };
        let Some((kind, own)) = TYPES.iter().find(|(t, _)| *t == kind).copied() else {
            let d = Diagnostic::error(
                format!("{ptr}/type"),
                format!("unknown block type `{kind}`"),
            );
            self.diags.push(d.hint_closest(
                kind,
                TYPES.iter().map(|(t, _)| *t),
                format!(
                    "the types: {}",
                    TYPES.iter().map(|(t, _)| *t).collect::<Vec<_>>().join(", ")
                ),
            ));
            return None;
        };
        let mut ok = true;
        for key in obj.keys() {
            let key = key.as_str();
            if !COMMON.contains(&key) && !own.contains(&key) {
                ok = false;
                let known: Vec<&str> = COMMON.iter().chain(own.iter()).copied().collect();
                let d = Diagnostic::error(
                    weft_core::validate::child_pointer(ptr, key),
                    format!("a {kind} block has no field `{key}`"),
                );
                self.diags.push(d.hint_closest(
                    key,
                    known.iter().copied(),
                    format!("its fields: {}", known.join(", ")),
                ));
            }
        }
        let mut common_fields = obj.clone();
        if kind == "dispatch" {
            // A dispatch's `exits` are its branches, read below.
            common_fields.remove("exits");
        }
        if kind == "workflow" {
            // A workflow block's `inputs` and `outputs` map state paths, read below.
            common_fields.remove("inputs");
            common_fields.remove("outputs");
        }
        let common: Common = self.diags.parse(&Value::Object(common_fields), ptr)?;
        if !ok {
            return None;
        }
        self.check_common(&common, ptr);
        let mut block = match kind {
            "linear" => {
                let b: Linear = self.diags.parse(raw, ptr)?;
                let soul = self.soul(&b.soul_ref, &format!("{ptr}/soul_ref"))?;
                let mut parts = vec![prompt::TASK_CONTEXT.to_owned()];
                parts.extend(self.input_parts(&common, ptr));
                parts.extend(carried(loops));
                let mut call = llm(&soul, with_context(prompt::TASK, &parts));
                if common.stateful
                    && let BlockKind::Llm(l) = &mut call.kind
                {
                    l.history = Some(format!("conversation_history_{id}"));
                }
                if soul.delegate {
                    self.with_delegate(id, call, &common, ptr)?
                } else {
                    call
                }
            }
            "gate" => self.gate(raw, ptr, loops)?,
            "code" => self.code(id, raw, ptr, &common)?,
            "synthesize" => {
                let b: Synthesize = self.diags.parse(raw, ptr)?;
                let soul = self.soul(&b.soul_ref, &format!("{ptr}/soul_ref"))?;
                if b.input_block_ids.is_empty() {
                    self.diags.push(Diagnostic::error(
                        format!("{ptr}/input_block_ids"),
                        "input_block_ids must name at least one block",
                    ));
                    return None;
                }
                let mut parts = Vec::new();
                for (i, bid) in b.input_block_ids.iter().enumerate() {
                    self.result_ref(bid, &format!("{ptr}/input_block_ids/{i}"));
                    parts.push(format!("[{}]\n{}", literal(bid), prompt::result_text(bid)));
                }
                llm(&soul, with_context(&literal(prompt::SYNTHESIZE), &parts))
            }
            "dispatch" => self.dispatch(id, raw, ptr)?,
            "workflow" => self.workflow(raw, ptr)?,
            _ => self.run_loop(id, raw, ptr, loops)?,
        };
        // Before anything wraps the block: a soul's call takes the fields as its schema.
        if let Some(fields) = &common.outputs {
            self.typed_outputs(&mut block, kind, fields, &format!("{ptr}/outputs"))?;
        }
        block = self.decided(block, kind, &common, ptr)?;
        if let Some(list) = obj.get("assertions") {
            let decided = common.output_conditions.is_some()
                || common.routes.is_some()
                || common.exit_conditions.is_some();
            let exit = match kind {
                _ if decided => ExitAfterChecks::Lost,
                "gate" | "loop" => ExitAfterChecks::Lost,
                "code" => ExitAfterChecks::FromOutput(super::kinds::CODE_EXIT),
                _ => ExitAfterChecks::None,
            };
            block = self.assertions(block, list, exit, &format!("{ptr}/assertions"))?;
        }
        if kind != "dispatch" {
            // A path write, not a rewrite of `results`: a loop's inner blocks have
            // written theirs in the same step.
            block.data.set.insert(
                format!("results.{id}"),
                ValueTemplate(Value::from("{{ output }}")),
            );
        }
        let default_timeout = if kind == "code" {
            DEFAULT_CODE_TIMEOUT
        } else {
            DEFAULT_TIMEOUT
        };
        // A loop's time is its rounds' time; its inner blocks have their own timeouts.
        if kind != "loop" {
            block.policy.timeout_ms =
                Some(common.timeout_seconds.unwrap_or(default_timeout) * 1000);
        }
        if let Some(r) = &common.retry_config {
            block.policy.retry = self.retry(r, &format!("{ptr}/retry_config"));
        }
        if let Some(l) = &common.limits {
            block.policy.budget = self.budget(l, &format!("{ptr}/limits"));
        }
        if let Some(t) = &common.stall_thresholds {
            block.policy.stall = self.stall(t, &format!("{ptr}/stall_thresholds"));
        }
        block.origin = self.map.loc(ptr);
        Some(block.with_id(id))
    }
}

impl Compiler<'_> {
    /// A linear block's `call` whose soul may `delegate`: offered the tool with the
    /// block's exits as its ports, and leaving by the port it picks.
    fn with_delegate(
        &mut self,
        id: &str,
        mut call: Block,
        common: &Common,
        ptr: &str,
    ) -> Option<Block> {
        let exits: Vec<String> = common
            .exits
            .iter()
            .flatten()
            .map(|e| e.id.clone())
            .collect();
        if exits.is_empty() {
            self.diags.push(
                Diagnostic::error(
                    ptr,
                    format!("the soul of `{id}` uses the delegate tool, but `{id}` has no exits"),
                )
                .hint("exits: [{id: billing, label: Billing}, {id: technical, label: Technical}]"),
            );
            return None;
        }
        let tool = self.delegate_tool(id, &exits);
        if let BlockKind::Llm(l) = &mut call.kind {
            l.tools.push(tool);
        }
        Some(super::listed_tools::delegated(call))
    }
}

/// What a block's exit is once checks that run beside its output have wrapped it.
#[derive(Debug, Clone, Copy)]
pub(super) enum ExitAfterChecks {
    /// It has none.
    None,
    /// This template over the output chooses it again (an expression over `input`).
    FromOutput(&'static str),
    /// It cannot be chosen again (a gate's, a loop's, a decision's).
    Lost,
}

/// A model call by `soul` with the user message `prompt` (a template).
pub(super) fn llm(soul: &ResolvedSoul, prompt: String) -> Block {
    Block::new(BlockKind::Llm(LlmSpec {
        model: soul.model.clone(),
        system: soul
            .system_prompt
            .as_deref()
            .filter(|s| !s.trim().is_empty())
            .map(|s| Template(literal(s))),
        prompt: Some(Template(prompt)),
        temperature: soul.temperature,
        max_tokens: soul.max_tokens,
        tools: soul.tools.clone(),
        required_tools: soul.required_tools.clone(),
        max_tool_rounds: soul
            .max_tool_iterations
            .unwrap_or(LlmSpec::default().max_tool_rounds),
        ..LlmSpec::default()
    }))
}

/// The context carried into the blocks of the enclosing loops.
pub(super) fn carried(loops: &[(String, Option<String>)]) -> Vec<String> {
    loops
        .iter()
        .filter_map(|(_, inject)| inject.as_deref())
        .map(|k| {
            let key = Value::from(k);
            format!(
                "{{% if state.shared_memory[{key}] is defined %}}{}:\n{{{{ text(state.shared_memory[{key}]) }}}}{{% endif %}}",
                literal(k)
            )
        })
        .collect()
}
