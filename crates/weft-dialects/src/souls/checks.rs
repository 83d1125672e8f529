//! The deterministic assertion types of the tool this dialect comes from, each as an
//! expression over the block's output: string checks (`equals`, `contains`,
//! `icontains`, `contains-all`, `contains-any`, `starts-with`, `regex`, `word-count`),
//! structure (`is-json`, `contains-json`, optionally against a JSON Schema), closeness
//! to a reference (`levenshtein`, `bleu`, `rouge-n`, with a `threshold`) and what the
//! block spent (`cost` in USD, `latency` in ms). A `transform: json_path:$.a.b` checks
//! that field of a JSON output instead.

use super::Compiler;
use super::assertions::{AssertionDef, CheckConfig};
use serde_json::Value;
use weft_core::Diagnostic;

/// The check types, without their `not-` forms (`llm_judge` is built in `assertions.rs`).
pub(super) const TYPES: &[&str] = &[
    "equals",
    "contains",
    "icontains",
    "contains-all",
    "contains-any",
    "starts-with",
    "regex",
    "word-count",
    "is-json",
    "contains-json",
    "levenshtein",
    "bleu",
    "rouge-n",
    "cost",
    "latency",
    "llm_judge",
    "custom:<id>",
];

/// The types whose `threshold` means something, with its default.
const THRESHOLDS: &[(&str, f64)] = &[
    ("levenshtein", 5.0),
    ("bleu", 0.5),
    ("rouge-n", 0.75),
    ("cost", 0.0),
    ("latency", 0.0),
];

/// A string as an expression literal.
fn lit(v: &Value) -> String {
    match v {
        Value::String(s) => Value::from(s.as_str()).to_string(),
        other => Value::from(other.to_string()).to_string(),
    }
}

impl Compiler<'_> {
    /// The expression that holds when the output passes check `kind` (the type without
    /// `not-`) of `a`.
    pub(super) fn check(&mut self, kind: &str, a: &AssertionDef, ptr: &str) -> Option<String> {
        let t = &self.subject(a, ptr)?;
        let value = &a.value;
        let threshold = THRESHOLDS
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, d)| a.threshold.unwrap_or(*d));
        if a.threshold.is_some() && threshold.is_none() {
            self.diags.push(
                Diagnostic::error(
                    format!("{ptr}/threshold"),
                    format!("a `{kind}` check takes no threshold"),
                )
                .hint("threshold bounds levenshtein, bleu, rouge-n, cost, latency and llm_judge"),
            );
            return None;
        }
        let bound = threshold.unwrap_or_default();
        let config: CheckConfig = match &a.config {
            Some(c) => self.diags.parse(c, &format!("{ptr}/config"))?,
            None => CheckConfig::default(),
        };
        if let Some(mode) = config.mode.as_deref()
            && !(kind == "equals" && mode == "json")
        {
            self.diags.push(
                Diagnostic::error(
                    format!("{ptr}/config/mode"),
                    format!("a `{kind}` check has no mode `{mode}`"),
                )
                .hint("config: {mode: json} makes `equals` compare parsed JSON"),
            );
            return None;
        }
        Some(match kind {
            "equals" => format!("(json_or_text({t}) == json_or_text({}))", lit(value)),
            "contains" => format!("({} in {t})", lit(value)),
            "icontains" => format!("(({} | lower) in ({t} | lower))", lit(value)),
            "starts-with" => format!("({t}.startswith({}))", lit(value)),
            "regex" => format!("search({}, {t})", lit(value)),
            "contains-all" | "contains-any" => self.contains_list(kind, value, t, ptr)?,
            "word-count" => self.word_count(value, t, ptr)?,
            "is-json" | "contains-json" => {
                let found = if kind == "is-json" {
                    format!("(fromjson({t}) if is_json({t}) else none)")
                } else {
                    format!("find_json({t})")
                };
                let present = if kind == "is-json" {
                    format!("is_json({t})")
                } else {
                    format!("find_json({t}) is not none")
                };
                match value {
                    Value::Null => format!("({present})"),
                    Value::Object(_) => {
                        if let Err(e) = jsonschema::validator_for(value) {
                            self.diags.push(Diagnostic::error(
                                format!("{ptr}/value"),
                                format!("the value is not a valid JSON Schema: {e}"),
                            ));
                            return None;
                        }
                        format!(
                            "({present} and fits_schema({found}, fromjson({})))",
                            lit(&Value::from(value.to_string()))
                        )
                    }
                    _ => {
                        self.diags.push(Diagnostic::error(
                            format!("{ptr}/value"),
                            format!("a `{kind}` check's value is a JSON Schema, or nothing"),
                        ));
                        return None;
                    }
                }
            }
            "levenshtein" => format!("(levenshtein({t}, {}) <= {bound})", lit(value)),
            "bleu" => format!("(bleu({t}, {}) >= {bound})", lit(value)),
            "rouge-n" => format!("(rouge1({t}, {}) >= {bound})", lit(value)),
            // The block's own budget frame counts its usage (`assertions.rs` adds one).
            "cost" => format!("(usage is not defined or usage.cost_usd <= {bound})"),
            "latency" => format!("(elapsed_ms <= {bound})"),
            other => {
                let d = Diagnostic::error(
                    format!("{ptr}/type"),
                    format!("unknown assertion type `{other}`"),
                );
                self.diags.push(d.hint_closest(
                    other,
                    TYPES.iter().copied(),
                    format!(
                        "the types: {} (any but llm_judge also as not-<type>)",
                        TYPES.join(", ")
                    ),
                ));
                return None;
            }
        })
    }

    /// What a check reads: the output's text, or with `transform: json_path:$.a.b` the
    /// text of that field of the JSON output.
    fn subject(&mut self, a: &AssertionDef, ptr: &str) -> Option<String> {
        const OUTPUT: &str = "text(output)";
        let Some(transform) = &a.transform else {
            return Some(OUTPUT.to_owned());
        };
        let path = transform
            .strip_prefix("json_path:")
            .map(str::trim)
            .and_then(|p| p.strip_prefix("$."))
            .filter(|p| {
                p.split('.')
                    .all(|k| !k.is_empty() && !k.contains(['[', ']', '*', '$']))
            });
        let Some(path) = path else {
            self.diags.push(
                Diagnostic::error(
                    format!("{ptr}/transform"),
                    format!("Weft reads `json_path:$.a.b` transforms, not `{transform}`"),
                )
                .hint("a dotted path of keys: transform: \"json_path:$.data.status\""),
            );
            return None;
        };
        Some(format!(
            "text(at_path(json_or_text({OUTPUT}), {}))",
            Value::from(path)
        ))
    }

    fn contains_list(&mut self, kind: &str, value: &Value, t: &str, ptr: &str) -> Option<String> {
        let Some(list) = value
            .as_array()
            .map(|a| a.iter().map(lit).collect::<Vec<_>>())
        else {
            self.diags.push(Diagnostic::error(
                format!("{ptr}/value"),
                format!("a `{kind}` check's value is a list of texts"),
            ));
            return None;
        };
        let all = kind == "contains-all";
        if list.is_empty() {
            return Some(if all { "true" } else { "false" }.into());
        }
        let joiner = if all { " and " } else { " or " };
        Some(format!(
            "({})",
            list.iter()
                .map(|i| format!("{i} in {t}"))
                .collect::<Vec<_>>()
                .join(joiner)
        ))
    }

    fn word_count(&mut self, value: &Value, t: &str, ptr: &str) -> Option<String> {
        let words = format!("({t}.split() | length)");
        match value {
            Value::Number(n) if n.is_u64() => Some(format!("({words} == {n})")),
            Value::Object(o) => {
                let bound = |k: &str| o.get(k).and_then(Value::as_u64);
                let mut parts = Vec::new();
                if let Some(min) = bound("min") {
                    parts.push(format!("{words} >= {min}"));
                }
                if let Some(max) = bound("max") {
                    parts.push(format!("{words} <= {max}"));
                }
                if parts.is_empty() || o.keys().any(|k| k != "min" && k != "max") {
                    self.diags.push(Diagnostic::error(
                        format!("{ptr}/value"),
                        "a word-count range is {min, max}",
                    ));
                    return None;
                }
                Some(format!("({})", parts.join(" and ")))
            }
            _ => {
                self.diags.push(Diagnostic::error(
                    format!("{ptr}/value"),
                    "a word-count is a whole number or {min, max}",
                ));
                None
            }
        }
    }
}
