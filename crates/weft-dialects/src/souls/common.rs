//! The common fields of spec 001's block table that every type shares: their checks,
//! and how they become policies (retry, budget), exit decisions (`output_conditions`,
//! `routes`, `exit_conditions`), typed outputs and a soul's context (`inputs`).

use super::Compiler;
use super::doc::{Common, Limits, RetryConfig};
use crate::template_text::literal;
use indexmap::IndexMap;
use serde_json::{Value, json};
use weft_core::Diagnostic;
use weft_core::ir::{
    Block, BlockKind, Budget, Expr, OnExceed, Retry, Stall, Template, TransformSpec, ValueTemplate,
};

/// The error kinds a retry covers unless told otherwise (the engine's transient kinds and
/// failed assertions), by the names `non_retryable_errors` uses.
const RETRIED_BY_DEFAULT: &[&str] = &[
    "timeout",
    "model",
    "rate_limit",
    "malformed_response",
    "code",
    "handler",
    "action",
    "assertion",
];

impl Compiler<'_> {
    /// `block` followed, when its result decides its exit (`output_conditions`, `routes`
    /// or `exit_conditions`), by that decision; the output is unchanged.
    pub(super) fn decided(
        &mut self,
        block: Block,
        kind: &str,
        common: &Common,
        ptr: &str,
    ) -> Option<Block> {
        let mut cases = Vec::new();
        let cases_ptr;
        match (&common.output_conditions, &common.routes) {
            (Some(_), Some(_)) => {
                self.diags.push(
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
                    self.diags.push(Diagnostic::error(
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
                    self.diags.push(
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
        // A case names the exit it leaves by, so two output_conditions cases may share
        // a name (runsight's own files do: a condition and the default); two routes of
        // one name must go to one place.
        if let Some(routes) = &common.routes {
            let mut seen: Vec<(&str, &str)> = Vec::new();
            for (i, r) in routes.iter().enumerate() {
                if seen
                    .iter()
                    .any(|(case, goto)| *case == r.case && *goto != r.goto)
                {
                    self.diags.push(Diagnostic::error(
                        format!("{cases_ptr}/{i}"),
                        format!("two routes named `{}` go to different blocks", r.case),
                    ));
                }
                seen.push((&r.case, &r.goto));
            }
        }
        let exit_conditions = common.exit_conditions.clone().unwrap_or_default();
        if cases.is_empty() && exit_conditions.is_empty() {
            return Some(block);
        }
        if !cases.is_empty() && !exit_conditions.is_empty() {
            self.diags.push(
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
    pub(super) fn typed_outputs(
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
                self.diags.push(d.hint_closest(
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
                self.diags.push(
                    Diagnostic::error(
                        ptr,
                        format!("a {kind} block's output has a fixed shape; it takes no `outputs`"),
                    )
                    .hint("declare outputs on linear, synthesize, code, loop or workflow blocks"),
                );
                return None;
            }
            _ => block.policy.assert.push(weft_core::ir::Assertion {
                warn: false,
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
    pub(super) fn check_common(&mut self, common: &Common, ptr: &str) {
        if let Some(t) = common.timeout_seconds
            && !(1..=3600).contains(&t)
        {
            self.diags.push(
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
                    self.diags.push(Diagnostic::error(
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
                self.diags.push(Diagnostic::error(
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
                    self.diags.push(Diagnostic::error(
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
            self.diags.push(Diagnostic::error(
                format!("{ptr}/max_duration_seconds"),
                format!("max_duration_seconds is {s}; it must be 1-86400"),
            ));
        }
        if let Some(c) = l.cost_cap_usd
            && !(c >= 0.0 && c.is_finite())
        {
            ok = false;
            self.diags.push(Diagnostic::error(
                format!("{ptr}/cost_cap_usd"),
                "cost_cap_usd is a number of dollars, 0 or more",
            ));
        }
        if l.token_cap == Some(0) {
            ok = false;
            self.diags.push(Diagnostic::error(
                format!("{ptr}/token_cap"),
                "token_cap must be at least 1",
            ));
        }
        let on_exceed = match l.on_exceed.as_deref() {
            None | Some("fail") => OnExceed::Fail,
            Some("warn") => OnExceed::Warn,
            Some(other) => {
                ok = false;
                let d = Diagnostic::error(
                    format!("{ptr}/on_exceed"),
                    format!("unknown on_exceed `{other}`"),
                );
                self.diags
                    .push(d.hint_closest(other, ["fail", "warn"], "on_exceed: fail or warn"));
                OnExceed::Fail
            }
        };
        ok.then(|| Budget {
            tokens: l.token_cap,
            cost_usd: l.cost_cap_usd,
            wall_ms: l.max_duration_seconds.map(|s| s * 1000),
            on_exceed,
            warn_at: None,
        })
    }

    /// `stall_thresholds` (phase -> seconds) as a stall policy. The phases are Weft's:
    /// `first_token`, `token_gap` and `tool_call` (`docs/dialects/souls.md`).
    pub(super) fn stall(&mut self, t: &IndexMap<String, u64>, ptr: &str) -> Option<Stall> {
        const PHASES: &[&str] = &["first_token", "token_gap", "tool_call"];
        let mut stall = Stall::default();
        let mut ok = true;
        for (phase, &seconds) in t {
            let at = weft_core::validate::child_pointer(ptr, phase);
            if !(1..=3600).contains(&seconds) {
                ok = false;
                self.diags.push(Diagnostic::error(
                    &at,
                    format!("the `{phase}` threshold is {seconds} s; it must be 1-3600"),
                ));
            }
            let ms = Some(seconds * 1000);
            match phase.as_str() {
                "first_token" => stall.first_token_ms = ms,
                "token_gap" => stall.token_gap_ms = ms,
                "tool_call" => stall.tool_ms = ms,
                _ => {
                    ok = false;
                    let d = Diagnostic::error(&at, format!("unknown stall phase `{phase}`"));
                    self.diags.push(d.hint_closest(
                        phase,
                        PHASES.iter().copied(),
                        format!("the phases: {}", PHASES.join(", ")),
                    ));
                }
            }
        }
        ok.then_some(stall)
    }

    /// `retry_config` as a retry policy.
    pub(super) fn retry(&mut self, r: &RetryConfig, ptr: &str) -> Option<Retry> {
        if !(1..=20).contains(&r.max_attempts) {
            self.diags.push(Diagnostic::error(
                format!("{ptr}/max_attempts"),
                format!("max_attempts is {}; it must be 1-20", r.max_attempts),
            ));
            return None;
        }
        // Weft's error kinds name what is not retried; the rest of the kinds a retry
        // covers by default stay retried.
        let mut on = Vec::new();
        if let Some(names) = &r.non_retryable_errors {
            let mut ok = true;
            for (i, name) in names.iter().enumerate() {
                if !RETRIED_BY_DEFAULT.contains(&name.as_str()) {
                    ok = false;
                    let d = Diagnostic::error(
                        format!("{ptr}/non_retryable_errors/{i}"),
                        format!("`{name}` is not an error kind Weft retries"),
                    );
                    self.diags.push(d.hint_closest(
                        name,
                        RETRIED_BY_DEFAULT.iter().copied(),
                        format!(
                            "the kinds retried by default: {}",
                            RETRIED_BY_DEFAULT.join(", ")
                        ),
                    ));
                }
            }
            if !ok {
                return None;
            }
            on = RETRIED_BY_DEFAULT
                .iter()
                .filter(|k| !names.iter().any(|n| n == *k))
                .map(|k| weft_core::ErrorKind::parse(k))
                .collect();
            if on.is_empty() {
                // Nothing is left to retry.
                return None;
            }
        }
        if let Some(b) = r.backoff_base_seconds
            && !(0.1..=60.0).contains(&b)
        {
            self.diags.push(Diagnostic::error(
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
                self.diags.push(d.hint_closest(
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
            on,
        })
    }

    /// An error unless `key` is a result some block writes: a block id, or a dispatch
    /// block's `<id>.<exit>`.
    pub(super) fn result_ref(&mut self, key: &str, ptr: &str) -> bool {
        let known =
            self.dispatch_keys.iter().any(|k| k == key) || self.block_ref(key, ptr, "the block");
        if known {
            self.read_result(key, ptr);
        }
        known
    }

    /// Remembers that the block at `ptr` reads result `key`.
    fn read_result(&mut self, key: &str, ptr: &str) {
        self.result_reads.push(super::order::ResultRead {
            key: key.to_owned(),
            pointer: ptr.to_owned(),
        });
    }

    /// `inputs: {name: {from}}` as context lines `name: value`.
    pub(super) fn input_parts(&mut self, common: &Common, ptr: &str) -> Vec<String> {
        self.declared_inputs(common, ptr)
            .into_iter()
            .map(|(name, value)| format!("{}: {{{{ text({value}) }}}}", literal(&name)))
            .collect()
    }

    /// Each declared input (`inputs: {name: {from}}`) with the expression of its value,
    /// as runsight hands it to a block.
    pub(super) fn declared_inputs(&mut self, common: &Common, ptr: &str) -> Vec<(String, String)> {
        let Some(inputs) = &common.inputs else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (name, r) in inputs {
            let rptr = format!(
                "{}/from",
                weft_core::validate::child_pointer(&format!("{ptr}/inputs"), name)
            );
            if let Some(value) = self.input_value(&r.from, &rptr) {
                out.push((name.clone(), value));
            }
        }
        out
    }

    /// The expression of an input's `from`: a block's result (`block`, `block.field`,
    /// `results.block[.field]`), a path into `shared_memory.` or `metadata.`, or the
    /// run's task (`workflow`, `workflow.field`). A field of a result that is JSON text
    /// is read from its value; a block that has not run, or a missing path, reads none.
    fn input_value(&mut self, from: &str, ptr: &str) -> Option<String> {
        let path_in = |base: &str, rest: &str| {
            format!("at_path(json_or_text({base}), {})", Value::from(rest))
        };
        let (root, rest) = match from.split_once('.') {
            Some((root, rest)) => (root, Some(rest)),
            None => (from, None),
        };
        match (root, rest) {
            ("shared_memory" | "metadata", Some(rest)) => {
                Some(path_in(&format!("state.{root}"), rest))
            }
            ("workflow", None) => Some("initial".into()),
            ("workflow", Some(rest)) => Some(path_in("initial", rest)),
            ("results", Some(rest)) => self.result_value(rest, ptr),
            ("shared_memory" | "metadata" | "results", None) => {
                self.diags.push(
                    Diagnostic::error(ptr, format!("`{from}` names no value inside `{root}`"))
                        .hint(format!("from: {root}.<key>")),
                );
                None
            }
            _ => self.result_value(from, ptr),
        }
    }

    /// A read of `field` (a path) of block `key`'s result, against the `outputs` the
    /// block declares: a model's answer has exactly those fields (an error), another
    /// block's has at least those (a warning: it may have more).
    fn check_output_field(&mut self, key: &str, field: &str, ptr: &str) {
        let Some(raw) = self.raw_blocks.get(key) else {
            return;
        };
        let Some(outputs) = raw.get("outputs").and_then(Value::as_object) else {
            return;
        };
        let first = field.split('.').next().unwrap_or(field);
        if outputs.contains_key(first) {
            return;
        }
        let kind = raw.get("type").and_then(Value::as_str).unwrap_or("");
        let exact = matches!(kind, "linear" | "synthesize");
        let declared: Vec<&str> = outputs.keys().map(String::as_str).collect();
        let message = format!(
            "this reads `{first}` of block `{key}`'s result, but its `outputs` declare {}{}",
            declared
                .iter()
                .map(|d| format!("`{d}`"))
                .collect::<Vec<_>>()
                .join(", "),
            if exact {
                ": its soul answers with exactly those fields, so the read is always empty"
            } else {
                " (a code, loop or workflow block may return more, so this may still work)"
            }
        );
        let d = if exact {
            Diagnostic::error(ptr, message)
        } else {
            Diagnostic::warning(ptr, message)
        };
        self.diags.push(d.hint_closest(
            first,
            declared.iter().copied(),
            format!("declare `{first}` under the block's `outputs`, or read one it declares"),
        ));
    }

    /// A block's result (`block`, or a dispatch's `block.exit`) as runsight keeps it
    /// (text: a mapping or list as its JSON), or a field of it (read from its value).
    fn result_value(&mut self, reference: &str, ptr: &str) -> Option<String> {
        let raw = |key: &str| format!("state.results[{}]", Value::from(key));
        let whole = |key: &str| {
            let r = raw(key);
            format!("(none if {r} is none else text({r}))")
        };
        if self.dispatch_keys.iter().any(|k| k == reference) || self.is_block(reference) {
            self.read_result(reference, ptr);
            return Some(whole(reference));
        }
        // The longest known result key that prefixes the reference (block ids may
        // name a dispatch's exits with a dot).
        let split = reference
            .match_indices('.')
            .map(|(i, _)| (&reference[..i], &reference[i + 1..]))
            .rev()
            .find(|(key, _)| self.dispatch_keys.iter().any(|k| k == key) || self.is_block(key));
        if let Some((key, field)) = split {
            self.read_result(key, ptr);
            if !matches!(field, "output" | "result") {
                self.check_output_field(key, field, ptr);
            }
        }
        match split {
            Some((key, "output" | "result")) => Some(whole(key)),
            Some((key, field)) => Some(format!(
                "at_path(json_or_text({}), {})",
                raw(key),
                Value::from(field)
            )),
            None => {
                let block = reference.split('.').next().unwrap_or(reference);
                self.block_ref(block, ptr, "the input");
                None
            }
        }
    }
}
