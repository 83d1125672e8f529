//! Conditions on a block's result (spec 001's `ConditionDef`, `ConditionGroupDef`,
//! `output_conditions` cases, `routes` and `exit_conditions`) as template expressions.
//!
//! A result that is JSON text is read as its value; `eval_key` is a dotted path into a
//! mapping result (a result that is not a mapping is compared as a whole); string
//! operators compare Python-style `str()` texts, numeric ones numbers (text that reads
//! as a number counts), so the same file decides the same way here as in the tool it
//! was written for.

use super::Compiler;
use serde::Deserialize;
use serde_json::Value;
use weft_core::Diagnostic;

/// String, numeric and key-presence operators.
pub(super) const OPERATORS: &[&str] = &[
    "equals",
    "not_equals",
    "contains",
    "not_contains",
    "starts_with",
    "ends_with",
    "is_empty",
    "not_empty",
    "regex",
    "eq",
    "neq",
    "gt",
    "lt",
    "gte",
    "lte",
    "exists",
    "not_exists",
];

/// `{eval_key, operator, value?}`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ConditionDef {
    pub eval_key: String,
    pub operator: String,
    #[serde(default)]
    pub value: Value,
}

/// `{combinator: and | or, conditions}`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ConditionGroupDef {
    #[serde(default = "and")]
    pub combinator: String,
    pub conditions: Vec<ConditionDef>,
}

fn and() -> String {
    "and".into()
}

/// One case of `output_conditions`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CaseDef {
    pub case_id: String,
    #[serde(default)]
    pub condition_group: Option<ConditionGroupDef>,
    #[serde(default)]
    pub default: bool,
}

/// One of `routes`: a case and where it goes.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RouteDef {
    #[serde(alias = "case_id")]
    pub case: String,
    #[serde(default)]
    pub when: Option<ConditionGroupDef>,
    pub goto: String,
    #[serde(default)]
    pub default: bool,
}

/// One of `exit_conditions`: output text to exit handle.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ExitCondition {
    #[serde(default)]
    pub contains: Option<String>,
    #[serde(default)]
    pub regex: Option<String>,
    pub exit_handle: String,
}

/// What Python's `str()` makes of a JSON value, as a template string literal.
fn py_str_literal(v: &Value) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Null => "None".into(),
        other => other.to_string(),
    };
    Value::String(text).to_string()
}

/// A JSON value as a template literal.
fn literal(v: &Value) -> String {
    match v {
        Value::Null => "none".into(),
        other => other.to_string(),
    }
}

impl Compiler<'_> {
    /// `c` as a boolean expression over the (JSON-read) result `data`.
    pub(super) fn condition_expr(
        &mut self,
        c: &ConditionDef,
        data: &str,
        ptr: &str,
    ) -> Option<String> {
        let key = Value::from(c.eval_key.as_str());
        let actual = format!("(at_path({data}, {key}) if {data} is mapping else {data})");
        let s = py_str_literal(&c.value);
        let n = literal(&c.value);
        let numeric = |op: &str| {
            format!(
                "(to_number({actual}) is not none and to_number({n}) is not none and to_number({actual}) {op} to_number({n}))"
            )
        };
        Some(match c.operator.as_str() {
            "equals" => format!("({actual} is not none and str({actual}) == {s})"),
            "not_equals" => format!("({actual} is none or str({actual}) != {s})"),
            "contains" => format!("({actual} is not none and {s} in str({actual}))"),
            "not_contains" => format!("({actual} is none or {s} not in str({actual}))"),
            "starts_with" => format!("({actual} is not none and str({actual}).startswith({s}))"),
            "ends_with" => format!("({actual} is not none and str({actual}).endswith({s}))"),
            "is_empty" => format!("({actual} is none or str({actual}) == '')"),
            "not_empty" => format!("({actual} is not none and str({actual}) != '')"),
            "regex" => format!("({actual} is not none and search({s}, str({actual})))"),
            "eq" => numeric("=="),
            "neq" => numeric("!="),
            "gt" => numeric(">"),
            "lt" => numeric("<"),
            "gte" => numeric(">="),
            "lte" => numeric("<="),
            "exists" => format!("({data} is mapping and has_path({data}, {key}))"),
            "not_exists" => format!("(not ({data} is mapping and has_path({data}, {key})))"),
            other => {
                let d = Diagnostic::error(
                    format!("{ptr}/operator"),
                    format!("unknown operator `{other}`"),
                );
                self.diags.push(d.hint_closest(
                    other,
                    OPERATORS.iter().copied(),
                    format!("the operators: {}", OPERATORS.join(", ")),
                ));
                return None;
            }
        })
    }

    /// A group as one expression: `and` (all hold; true when empty) or `or` (one holds).
    pub(super) fn group_expr(
        &mut self,
        g: &ConditionGroupDef,
        data: &str,
        ptr: &str,
    ) -> Option<String> {
        let joiner = match g.combinator.as_str() {
            "and" => " and ",
            "or" => " or ",
            other => {
                let d = Diagnostic::error(
                    format!("{ptr}/combinator"),
                    format!("unknown combinator `{other}`"),
                );
                self.diags
                    .push(d.hint_closest(other, ["and", "or"], "combinator: and or or"));
                return None;
            }
        };
        let parts: Option<Vec<String>> = g
            .conditions
            .iter()
            .enumerate()
            .map(|(i, c)| self.condition_expr(c, data, &format!("{ptr}/conditions/{i}")))
            .collect();
        let parts = parts?;
        Some(match (parts.is_empty(), joiner) {
            (true, " and ") => "true".into(),
            (true, _) => "false".into(),
            _ => format!("({})", parts.join(joiner)),
        })
    }

    /// A break condition (a group when it has `conditions`, else one condition) as an
    /// expression over the loop body's `output`.
    pub(super) fn break_expr(&mut self, c: &Value, ptr: &str) -> Option<String> {
        let data = "json_or_text(output)";
        if c.get("conditions").is_some() {
            let g: ConditionGroupDef = self.diags.parse(c, ptr)?;
            self.group_expr(&g, data, ptr)
        } else {
            let one: ConditionDef = self.diags.parse(c, ptr)?;
            self.condition_expr(&one, data, ptr)
        }
    }

    /// The exit template of a block whose exit its result decides: the first matching
    /// case (`output_conditions` or `routes`), else the default case (`default` when none
    /// is marked); or the first matching `exit_conditions` entry, else `fallback` (a
    /// template of the block's own exit, given its output as `input`). A case's group is
    /// under `group_key` (`condition_group`, or `when` in a route).
    pub(super) fn decision_template(
        &mut self,
        cases: &[(String, Option<ConditionGroupDef>, bool)],
        group_key: &str,
        exit_conditions: &[ExitCondition],
        fallback: &str,
        ptr: &str,
    ) -> Option<String> {
        let mut t = String::from("{%- set d = json_or_text(input) -%}");
        let mut branches = Vec::new();
        if !cases.is_empty() {
            let mut default = "default".to_owned();
            for (i, (id, group, is_default)) in cases.iter().enumerate() {
                if *is_default {
                    default = id.clone();
                    continue;
                }
                let Some(g) = group else {
                    self.diags.push(
                        Diagnostic::error(format!("{ptr}/{i}"), format!("case `{id}` has no condition"))
                            .hint("give it a condition_group (routes: `when`), or mark it `default: true`"),
                    );
                    return None;
                };
                branches.push((
                    self.group_expr(g, "d", &format!("{ptr}/{i}/{group_key}"))?,
                    id.clone(),
                ));
            }
            return Some(chain(
                t,
                &branches,
                &crate::template_text::literal(&default),
            ));
        }
        t.push_str("{%- set t = str(input) -%}");
        for (i, e) in exit_conditions.iter().enumerate() {
            let test = match (&e.contains, &e.regex) {
                (Some(c), None) => format!("{} in t", Value::from(c.as_str())),
                (None, Some(r)) => format!("search({}, t)", Value::from(r.as_str())),
                _ => {
                    self.diags.push(
                        Diagnostic::error(
                            format!("{ptr}/{i}"),
                            "an exit condition has `contains` or `regex`, one of them",
                        )
                        .hint("{contains: APPROVED, exit_handle: approved}"),
                    );
                    return None;
                }
            };
            branches.push((test, e.exit_handle.clone()));
        }
        Some(chain(t, &branches, fallback))
    }
}

/// `{% if a %}x{% elif b %}y{% else %}otherwise{% endif %}` after `head`.
fn chain(mut head: String, branches: &[(String, String)], otherwise: &str) -> String {
    for (i, (test, handle)) in branches.iter().enumerate() {
        let keyword = if i == 0 { "if" } else { "elif" };
        head.push_str(&format!(
            "{{%- {keyword} {test} -%}}{}",
            crate::template_text::literal(handle)
        ));
    }
    if branches.is_empty() {
        head.push_str(otherwise);
    } else {
        head.push_str(&format!("{{%- else -%}}{otherwise}{{%- endif -%}}"));
    }
    head
}
