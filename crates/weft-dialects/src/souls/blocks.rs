//! Each block type as core IR: `linear`, `gate`, `synthesize` and `dispatch` call their
//! souls' models, `code` runs sandboxed Python, `loop` runs its inner blocks in rounds,
//! `workflow` runs a child workflow file; the common fields become policies (timeout,
//! retry, budget), exit decisions and state writes.

use super::doc::{
    COMMON, ChildWorkflow, Code, Common, DispatchExit, Gate, Limits, Linear, Loop, RetryConfig,
    Synthesize, TYPES,
};
use super::prompt::{self, with_context};
use super::{Compiler, ResolvedSoul};
use crate::template_text::literal;
use indexmap::IndexMap;
use serde_json::{Value, json};
use weft_core::Diagnostic;
use weft_core::ir::{
    Block, BlockKind, Budget, CodeLimits, CodeSpec, Expr, LlmSpec, LoopSpec, OnError, ParallelSpec,
    Rescue, Retry, SourceLines, SubFlowSpec, Template, TransformSpec, ValueTemplate,
};

/// Common fields Weft does not implement yet: an error, never silently ignored.
const NOT_YET: &[&str] = &["stall_thresholds"];

/// Modules a code block may import unless it lists its own (spec 001).
const DEFAULT_IMPORTS: &[&str] = &[
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
const DEFAULT_CODE_TIMEOUT: u64 = 30;

impl Compiler<'_> {
    /// The block `id` (at `ptr`), with its state writes and policies.
    pub(super) fn block(&mut self, id: &str, raw: &Value, ptr: &str) -> Option<Block> {
        self.block_in(id, raw, ptr, &mut Vec::new())
    }

    /// `block`, inside the loops named in `loops` (innermost last): each loop's carried
    /// context is part of what its inner blocks' souls see.
    fn block_in(
        &mut self,
        id: &str,
        raw: &Value,
        ptr: &str,
        loops: &mut Vec<(String, Option<String>)>,
    ) -> Option<Block> {
        let Some(obj) = raw.as_object() else {
            self.error(Diagnostic::error(ptr, "a block is a mapping with a `type`"));
            return None;
        };
        let Some(kind) = obj.get("type").and_then(Value::as_str) else {
            self.error(
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
            self.error(d.hint_closest(
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
            if NOT_YET.contains(&key) {
                ok = false;
                self.error(
                    Diagnostic::error(format!("{ptr}/{key}"), format!("`{key}` is not supported by Weft yet"))
                        .hint("docs/dialects/souls.md lists what Weft runs; remove it, or route with exits and conditional_transitions"),
                );
            } else if !COMMON.contains(&key) && !own.contains(&key) {
                ok = false;
                let known: Vec<&str> = COMMON.iter().chain(own.iter()).copied().collect();
                let d = Diagnostic::error(
                    weft_core::validate::child_pointer(ptr, key),
                    format!("a {kind} block has no field `{key}`"),
                );
                self.error(d.hint_closest(
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
        let common: Common = self.parse(&Value::Object(common_fields), ptr)?;
        if !ok {
            return None;
        }
        self.check_common(&common, ptr);
        let mut block = match kind {
            "linear" => {
                let b: Linear = self.parse(raw, ptr)?;
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
                call
            }
            "gate" => self.gate(raw, ptr, loops)?,
            "code" => self.code(id, raw, ptr, &common)?,
            "synthesize" => {
                let b: Synthesize = self.parse(raw, ptr)?;
                let soul = self.soul(&b.soul_ref, &format!("{ptr}/soul_ref"))?;
                if b.input_block_ids.is_empty() {
                    self.error(Diagnostic::error(
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
            let chooses_exit = matches!(kind, "gate" | "loop" | "code")
                || common.output_conditions.is_some()
                || common.routes.is_some()
                || common.exit_conditions.is_some();
            block = self.assertions(block, list, chooses_exit, &format!("{ptr}/assertions"))?;
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
        block.origin = self.map.loc(ptr);
        Some(block.with_id(id))
    }

    /// `block` followed, when its result decides its exit (`output_conditions`, `routes`
    /// or `exit_conditions`), by that decision; the output is unchanged.
    fn decided(&mut self, block: Block, kind: &str, common: &Common, ptr: &str) -> Option<Block> {
        let mut cases = Vec::new();
        let cases_ptr;
        match (&common.output_conditions, &common.routes) {
            (Some(_), Some(_)) => {
                self.error(
                    Diagnostic::error(
                        format!("{ptr}/routes"),
                        "a block has routes or output_conditions, not both",
                    )
                    .hint("spec 001: routes is \"mutually exclusive with output_conditions\""),
                );
                return None;
            }
            (Some(oc), None) => {
                cases_ptr = format!("{ptr}/output_conditions");
                if oc.iter().filter(|c| c.default).count() > 1 {
                    self.error(Diagnostic::error(
                        &cases_ptr,
                        "output_conditions has more than one default case",
                    ));
                }
                cases.extend(
                    oc.iter()
                        .map(|c| (c.case_id.clone(), c.condition_group.clone(), c.default)),
                );
            }
            (None, Some(routes)) => {
                cases_ptr = format!("{ptr}/routes");
                let defaults = routes.iter().filter(|r| r.default).count();
                if defaults != 1 {
                    self.error(
                        Diagnostic::error(
                            &cases_ptr,
                            format!("routes have {defaults} default routes"),
                        )
                        .hint("spec 001: routes \"requires exactly one default\""),
                    );
                    return None;
                }
                for (i, r) in routes.iter().enumerate() {
                    self.block_ref(
                        &r.goto,
                        &format!("{cases_ptr}/{i}/goto"),
                        "the route's goto",
                    );
                }
                cases.extend(
                    routes
                        .iter()
                        .map(|r| (r.case.clone(), r.when.clone(), r.default)),
                );
            }
            (None, None) => cases_ptr = String::new(),
        }
        let mut seen: Vec<&str> = Vec::new();
        for (i, (id, _, _)) in cases.iter().enumerate() {
            if seen.contains(&id.as_str()) {
                self.error(Diagnostic::error(
                    format!("{cases_ptr}/{i}"),
                    format!("two cases are named `{id}`"),
                ));
            }
            seen.push(id);
        }
        let exit_conditions = common.exit_conditions.clone().unwrap_or_default();
        if cases.is_empty() && exit_conditions.is_empty() {
            return Some(block);
        }
        if !cases.is_empty() && !exit_conditions.is_empty() {
            self.error(
                Diagnostic::error(format!("{ptr}/exit_conditions"), "exit_conditions and output_conditions (or routes) would both choose this block's exit")
                    .hint("keep one of them"),
            );
            return None;
        }
        // A code block's own exit_handle stands when no exit condition matches.
        let fallback = if kind == "code" {
            "{{ input.exit_handle if input is mapping and input.exit_handle is string else '' }}"
        } else {
            ""
        };
        let at = if cases.is_empty() {
            format!("{ptr}/exit_conditions")
        } else {
            cases_ptr
        };
        let group_key = if common.routes.is_some() {
            "when"
        } else {
            "condition_group"
        };
        let exit = self.decision_template(&cases, group_key, &exit_conditions, fallback, &at)?;
        let decide = Block::new(BlockKind::Transform(TransformSpec {
            output: ValueTemplate(Value::from("{{ input }}")),
            exit: Some(Template(exit)),
        }));
        Some(Block::new(BlockKind::Sequence(vec![block, decide])))
    }

    /// `outputs: {field: type}`: a soul answers with exactly these fields (structured
    /// output, checked and repaired); any other block's output is checked to have them.
    fn typed_outputs(
        &mut self,
        block: &mut Block,
        kind: &str,
        fields: &IndexMap<String, String>,
        ptr: &str,
    ) -> Option<()> {
        const TYPES: &[(&str, &str, &str)] = &[
            ("str", "string", "is string"),
            ("string", "string", "is string"),
            ("int", "integer", "is integer"),
            ("integer", "integer", "is integer"),
            ("float", "number", "is number"),
            ("number", "number", "is number"),
            ("bool", "boolean", "is boolean"),
            ("boolean", "boolean", "is boolean"),
            ("list", "array", "is sequence and {v} is not string"),
            ("array", "array", "is sequence and {v} is not string"),
            ("dict", "object", "is mapping"),
            ("object", "object", "is mapping"),
            ("any", "", "is defined"),
        ];
        let mut properties = serde_json::Map::new();
        let mut checks = Vec::new();
        for (name, ty) in fields {
            let Some((_, schema, test)) = TYPES.iter().find(|(t, _, _)| t == ty) else {
                let d = Diagnostic::error(
                    weft_core::validate::child_pointer(ptr, name),
                    format!("unknown output type `{ty}`"),
                );
                self.error(d.hint_closest(
                    ty,
                    TYPES.iter().map(|(t, _, _)| *t),
                    "the types: str, int, float, bool, list, dict, any",
                ));
                return None;
            };
            properties.insert(
                name.clone(),
                if schema.is_empty() {
                    json!({})
                } else {
                    json!({"type": schema})
                },
            );
            let v = format!("output[{}]", Value::from(name.as_str()));
            checks.push(format!(
                "({v} is defined and {v} {})",
                test.replace("{v}", &v)
            ));
        }
        match (&mut block.kind, kind) {
            (BlockKind::Llm(l), "linear" | "synthesize") => {
                l.output_schema = Some(json!({
                    "type": "object",
                    "properties": properties,
                    "required": fields.keys().collect::<Vec<_>>(),
                    "additionalProperties": false,
                }));
            }
            (_, "gate" | "dispatch") => {
                self.error(
                    Diagnostic::error(
                        ptr,
                        format!("a {kind} block's output has a fixed shape; it takes no `outputs`"),
                    )
                    .hint("declare outputs on linear, synthesize, code, loop or workflow blocks"),
                );
                return None;
            }
            _ => block.policy.assert.push(weft_core::ir::Assertion {
                that: Expr(format!("output is mapping and {}", checks.join(" and "))),
                message: Some(format!(
                    "the output does not have the declared fields: {}",
                    fields
                        .iter()
                        .map(|(k, t)| format!("{k}: {t}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            }),
        }
        Some(())
    }

    /// Checks the common fields that refer to other blocks, and their bounds.
    fn check_common(&mut self, common: &Common, ptr: &str) {
        if let Some(t) = common.timeout_seconds
            && !(1..=3600).contains(&t)
        {
            self.error(
                Diagnostic::error(
                    format!("{ptr}/timeout_seconds"),
                    format!("timeout_seconds is {t}; it must be 1-3600"),
                )
                .hint("spec 001: timeout_seconds, 1-3600, default 300 (30 for code)"),
            );
        }
        if let Some(d) = &common.depends {
            for (i, dep) in d.ids().into_iter().enumerate() {
                if dep.trim().is_empty() {
                    self.error(Diagnostic::error(
                        format!("{ptr}/depends"),
                        "depends names a blank block",
                    ));
                } else {
                    self.block_ref(dep, &format!("{ptr}/depends/{i}"), "the dependency");
                }
            }
        }
        if let Some(r) = &common.error_route {
            if r.trim().is_empty() {
                self.error(Diagnostic::error(
                    format!("{ptr}/error_route"),
                    "error_route is blank",
                ));
            } else {
                self.block_ref(r, &format!("{ptr}/error_route"), "the error route");
            }
        }
        if let Some(exits) = &common.exits {
            let mut seen = Vec::new();
            for (i, e) in exits.iter().enumerate() {
                if seen.contains(&e.id) {
                    self.error(Diagnostic::error(
                        format!("{ptr}/exits/{i}/id"),
                        format!("two exits are named `{}`", e.id),
                    ));
                }
                seen.push(e.id.clone());
            }
        }
    }

    /// `limits` as the block's budget, checked before each model call inside it.
    pub(super) fn budget(&mut self, l: &Limits, ptr: &str) -> Option<Budget> {
        let mut ok = true;
        if let Some(s) = l.max_duration_seconds
            && !(1..=86_400).contains(&s)
        {
            ok = false;
            self.error(Diagnostic::error(
                format!("{ptr}/max_duration_seconds"),
                format!("max_duration_seconds is {s}; it must be 1-86400"),
            ));
        }
        if let Some(c) = l.cost_cap_usd
            && !(c >= 0.0 && c.is_finite())
        {
            ok = false;
            self.error(Diagnostic::error(
                format!("{ptr}/cost_cap_usd"),
                "cost_cap_usd is a number of dollars, 0 or more",
            ));
        }
        if l.token_cap == Some(0) {
            ok = false;
            self.error(Diagnostic::error(
                format!("{ptr}/token_cap"),
                "token_cap must be at least 1",
            ));
        }
        match l.on_exceed.as_deref() {
            None | Some("fail") => {}
            Some("warn") => {
                ok = false;
                self.error(
                    Diagnostic::error(
                        format!("{ptr}/on_exceed"),
                        "on_exceed: warn is not supported by Weft yet",
                    )
                    .hint("Weft stops the block before a call that would exceed the budget (on_exceed: fail)"),
                );
            }
            Some(other) => {
                ok = false;
                let d = Diagnostic::error(
                    format!("{ptr}/on_exceed"),
                    format!("unknown on_exceed `{other}`"),
                );
                self.error(d.hint_closest(other, ["fail", "warn"], "on_exceed: fail or warn"));
            }
        }
        ok.then(|| Budget {
            tokens: l.token_cap,
            cost_usd: l.cost_cap_usd,
            wall_ms: l.max_duration_seconds.map(|s| s * 1000),
        })
    }

    /// `retry_config` as a retry policy.
    fn retry(&mut self, r: &RetryConfig, ptr: &str) -> Option<Retry> {
        if !(1..=20).contains(&r.max_attempts) {
            self.error(Diagnostic::error(
                format!("{ptr}/max_attempts"),
                format!("max_attempts is {}; it must be 1-20", r.max_attempts),
            ));
            return None;
        }
        if r.non_retryable_errors.is_some() {
            self.error(
                Diagnostic::error(
                    format!("{ptr}/non_retryable_errors"),
                    "non_retryable_errors is not supported by Weft yet",
                )
                .hint("Weft retries transient errors only: rate limits, timeouts, 5xx, dropped connections"),
            );
            return None;
        }
        if let Some(b) = r.backoff_base_seconds
            && !(0.1..=60.0).contains(&b)
        {
            self.error(Diagnostic::error(
                format!("{ptr}/backoff_base_seconds"),
                format!("backoff_base_seconds is {b}; it must be 0.1-60"),
            ));
            return None;
        }
        let multiplier = match r.backoff.as_deref() {
            None | Some("fixed") => 1.0,
            Some("exponential") => 2.0,
            Some(other) => {
                let d = Diagnostic::error(
                    format!("{ptr}/backoff"),
                    format!("unknown backoff `{other}`"),
                );
                self.error(d.hint_closest(
                    other,
                    ["fixed", "exponential"],
                    "backoff: fixed or exponential",
                ));
                return None;
            }
        };
        Some(Retry {
            attempts: r.max_attempts,
            backoff_ms: (r.backoff_base_seconds.unwrap_or(1.0) * 1000.0) as u64,
            multiplier,
            max_backoff_ms: 60_000,
            jitter: true,
            on: Vec::new(),
        })
    }

    /// An error unless `key` is a result some block writes: a block id, or a dispatch
    /// block's `<id>.<exit>`.
    fn result_ref(&mut self, key: &str, ptr: &str) -> bool {
        if self.dispatch_keys.iter().any(|k| k == key) {
            return true;
        }
        self.block_ref(key, ptr, "the block")
    }

    /// `inputs: {name: {from}}` as context lines `name: value`.
    fn input_parts(&mut self, common: &Common, ptr: &str) -> Vec<String> {
        let Some(inputs) = &common.inputs else {
            return Vec::new();
        };
        let mut parts = Vec::new();
        for (name, r) in inputs {
            let rptr = format!(
                "{}/from",
                weft_core::validate::child_pointer(&format!("{ptr}/inputs"), name)
            );
            let value = if self.dispatch_keys.contains(&r.from) || self.is_block(&r.from) {
                prompt::result_text(&r.from)
            } else if let Some((block, field)) = r.from.split_once('.') {
                if !self.result_ref(block, &rptr) {
                    continue;
                }
                prompt::result_field(block, field)
            } else {
                self.block_ref(&r.from, &rptr, "the input");
                continue;
            };
            parts.push(format!("{}: {value}", literal(name)));
        }
        parts
    }

    /// `gate`: the soul judges `results[eval_key]`; its first line, PASS or `FAIL:
    /// reason`, picks the `pass` or `fail` exit.
    fn gate(
        &mut self,
        raw: &Value,
        ptr: &str,
        loops: &[(String, Option<String>)],
    ) -> Option<Block> {
        let g: Gate = self.parse(raw, ptr)?;
        if g.pass_to.is_some() != g.fail_to.is_some() {
            self.error(
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

    /// `code`: `def main(data)` gets `{results, metadata, shared_memory}`; a dict result
    /// with `exit_handle` picks that exit.
    fn code(&mut self, id: &str, raw: &Value, ptr: &str, common: &Common) -> Option<Block> {
        let c: Code = self.parse(raw, ptr)?;
        if !c
            .code
            .lines()
            .any(|l| l.trim_start().starts_with("def main("))
        {
            self.error(
                Diagnostic::error(
                    format!("{ptr}/code"),
                    format!("code block `{id}` defines no `main` function"),
                )
                .hint("def main(data):\n    return {\"count\": len(data[\"results\"])}"),
            );
            return None;
        }
        let seconds = common.timeout_seconds.unwrap_or(DEFAULT_CODE_TIMEOUT);
        let spec = CodeSpec {
            language: "python".into(),
            source: c.code.clone(),
            origin: self
                .map
                .text_line(&format!("{ptr}/code"))
                .map(|file_line| SourceLines {
                    source_line: 1,
                    file_line,
                }),
            entry: Some("main".into()),
            args: Some(ValueTemplate(json!({"data": {
                "results": "{{ state.results }}",
                "metadata": "{{ state.metadata }}",
                "shared_memory": "{{ state.shared_memory }}",
            }}))),
            imports: Some(
                c.allowed_imports
                    .unwrap_or_else(|| DEFAULT_IMPORTS.iter().map(|m| (*m).to_owned()).collect()),
            ),
            builtins: None,
            limits: CodeLimits {
                time_ms: seconds.clamp(1, 3600) * 1000,
                ..CodeLimits::default()
            },
        };
        let exit = Block::new(BlockKind::Transform(TransformSpec {
            output: ValueTemplate(Value::from("{{ input }}")),
            exit: Some(Template(
                "{{ input.exit_handle if input is mapping and input.exit_handle is string else '' }}".into(),
            )),
        }));
        Some(Block::new(BlockKind::Sequence(vec![
            Block::new(BlockKind::Code(spec)),
            exit,
        ])))
    }

    /// `workflow`: a child workflow file run as a sub-flow. `inputs` (interface name ->
    /// parent state path) become the child's `shared_memory`; `outputs` (parent state
    /// path -> interface name, a child block's id) copy the child's results back; the
    /// output is the child's last output.
    fn workflow(&mut self, raw: &Value, ptr: &str) -> Option<Block> {
        let w: ChildWorkflow = self.parse(raw, ptr)?;
        let max_depth = w.max_depth.unwrap_or(DEFAULT_MAX_DEPTH);
        if max_depth == 0 {
            self.error(Diagnostic::error(
                format!("{ptr}/max_depth"),
                "max_depth must be at least 1",
            ));
            return None;
        }
        let catch = match w.on_error.as_deref() {
            None | Some("raise") => false,
            Some("catch") => true,
            Some(other) => {
                let d = Diagnostic::error(
                    format!("{ptr}/on_error"),
                    format!("unknown on_error `{other}`"),
                );
                self.error(d.hint_closest(other, ["raise", "catch"], "on_error: raise or catch"));
                return None;
            }
        };
        let mut shared = serde_json::Map::new();
        for (name, path) in w.inputs.iter().flatten() {
            let iptr = weft_core::validate::child_pointer(&format!("{ptr}/inputs"), name);
            if name.contains('.') {
                self.error(
                    Diagnostic::error(&iptr, format!("the interface name `{name}` contains a dot"))
                        .hint(
                            "spec 001: inputs map interface names (no dots) to parent state paths",
                        ),
                );
            }
            if !state_path(path) {
                self.error(
                    Diagnostic::error(&iptr, format!("`{path}` is not a path into the run state"))
                        .hint("a path starts with results, shared_memory or metadata: results.research"),
                );
            }
            shared.insert(
                name.clone(),
                Value::from(format!(
                    "{{{{ at_path(state, {}) }}}}",
                    Value::from(path.as_str())
                )),
            );
        }
        let mut writes = IndexMap::new();
        for (path, name) in w.outputs.iter().flatten() {
            let optr = weft_core::validate::child_pointer(&format!("{ptr}/outputs"), path);
            if name.contains('.') {
                self.error(
                    Diagnostic::error(&optr, format!("the interface name `{name}` contains a dot"))
                        .hint(
                            "spec 001: outputs map parent state paths to interface names (no dots)",
                        ),
                );
            }
            if !state_path(path) {
                self.error(
                    Diagnostic::error(&optr, format!("`{path}` is not a path into the run state"))
                        .hint("a path starts with results, shared_memory or metadata: results.summary"),
                );
            }
            writes.insert(
                path.clone(),
                ValueTemplate(Value::from(format!(
                    "{{{{ output.results[{}] }}}}",
                    Value::from(name.as_str())
                ))),
            );
        }
        let flow =
            self.child_workflow(&w.workflow_ref, max_depth, &format!("{ptr}/workflow_ref"))?;
        let mut call = Block::new(BlockKind::SubFlow(SubFlowSpec {
            flow,
            share_state: false,
        }));
        call.data.input = Some(ValueTemplate(json!({
            "shared_memory": Value::Object(shared),
            "metadata": "{{ state.metadata }}",
        })));
        call.data.set = writes;
        if catch {
            // The parent goes on; the block's output says what went wrong.
            call.policy.rescue.push(Rescue {
                when: Vec::new(),
                then: Block::new(BlockKind::Transform(TransformSpec {
                    output: ValueTemplate(
                        json!({"output": {"error": "{{ error.message }}"}, "results": {}}),
                    ),
                    exit: None,
                })),
            });
        }
        let unwrap = Block::new(BlockKind::Transform(TransformSpec {
            output: ValueTemplate(Value::from("{{ input.output }}")),
            exit: None,
        }));
        Some(Block::new(BlockKind::Sequence(vec![call, unwrap])))
    }

    /// `dispatch`: one soul per exit, all at once; results per exit and combined.
    fn dispatch(&mut self, id: &str, raw: &Value, ptr: &str) -> Option<Block> {
        let Some(exits) = raw.get("exits") else {
            self.error(Diagnostic::error(ptr, "a dispatch block needs `exits`, one per branch").hint("exits: [{id: summary, label: Summary, soul_ref: writer, task: Summarize the input.}]"));
            return None;
        };
        let exits: Vec<DispatchExit> = self.parse(exits, &format!("{ptr}/exits"))?;
        if exits.is_empty() {
            self.error(Diagnostic::error(
                format!("{ptr}/exits"),
                "a dispatch block needs at least one exit",
            ));
            return None;
        }
        let mut branches = IndexMap::new();
        for (i, e) in exits.iter().enumerate() {
            let eptr = format!("{ptr}/exits/{i}");
            if branches.contains_key(&e.id) {
                self.error(Diagnostic::error(
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
    fn run_loop(
        &mut self,
        id: &str,
        raw: &Value,
        ptr: &str,
        loops: &mut Vec<(String, Option<String>)>,
    ) -> Option<Block> {
        let l: Loop = self.parse(raw, ptr)?;
        if !(1..=50).contains(&l.max_rounds) {
            self.error(
                Diagnostic::error(
                    format!("{ptr}/max_rounds"),
                    format!("max_rounds is {}; it must be 1-50", l.max_rounds),
                )
                .hint("spec 001: max_rounds, 1-50, default 5"),
            );
            return None;
        }
        if l.inner_block_refs.is_empty() {
            self.error(Diagnostic::error(
                format!("{ptr}/inner_block_refs"),
                "inner_block_refs must name at least one block",
            ));
            return None;
        }
        if loops.iter().any(|(outer, _)| outer == id) || l.inner_block_refs.iter().any(|r| r == id)
        {
            self.error(
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
                    self.error(d.hint_closest(&c.mode, ["last", "all"], "mode: last or all"));
                }
                if let Some(src) = &c.source_blocks {
                    for (i, s) in src.iter().enumerate() {
                        if !l.inner_block_refs.contains(s) {
                            self.error(
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
                    self.error(Diagnostic::error(
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
        if let Some(x) = &l.break_on_exit {
            stops.push(format!("exit == {}", Value::from(x.as_str())));
        }
        if let Some(x) = &l.retry_on_exit {
            stops.push(format!("exit != {}", Value::from(x.as_str())));
        }
        if let Some(c) = &l.break_condition {
            stops.push(self.break_expr(c, &format!("{ptr}/break_condition"))?);
        }
        Some(Block::new(BlockKind::Loop(LoopSpec {
            body: Box::new(Block::new(BlockKind::Sequence(steps))),
            max_iterations: l.max_rounds,
            while_: None,
            until: (!stops.is_empty()).then(|| Expr(stops.join(" or "))),
            fail_at_max: false,
        })))
    }
}

/// Child workflows nest at most this deep unless a block says otherwise (spec 001).
const DEFAULT_MAX_DEPTH: u32 = 10;

/// Whether `path` is a dotted path into one of the run state's three parts.
fn state_path(path: &str) -> bool {
    let mut parts = path.split('.');
    matches!(parts.next(), Some("results" | "shared_memory" | "metadata"))
        && parts.all(|p| !p.is_empty())
}

/// A model call by `soul` with the user message `prompt` (a template).
fn llm(soul: &ResolvedSoul, prompt: String) -> Block {
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
        ..LlmSpec::default()
    }))
}

/// The context carried into the blocks of the enclosing loops.
fn carried(loops: &[(String, Option<String>)]) -> Vec<String> {
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
