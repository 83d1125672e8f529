//! A block's `assertions`: checks of its output that fail the block (so `retry_config`
//! retries it) when they do not hold. The string checks of the tool this dialect comes
//! from (`equals`, `contains`, `icontains`, `contains-all`, `contains-any`,
//! `starts-with`, `regex`, `word-count`, each negated by a `not-` prefix) become
//! expressions on the output's text; an `llm_judge` asks a judge soul for a verdict.

use super::Compiler;
use super::prompt::with_context;
use crate::template_text::literal;
use serde::Deserialize;
use serde_json::{Value, json};
use weft_core::Diagnostic;
use weft_core::ir::{
    Assertion, Block, BlockKind, Expr, LlmSpec, OnError, ParallelSpec, Template, TransformSpec,
    ValueTemplate,
};

/// The check types, without their `not-` forms.
const TYPES: &[&str] = &[
    "equals",
    "contains",
    "icontains",
    "contains-all",
    "contains-any",
    "starts-with",
    "regex",
    "word-count",
    "llm_judge",
];

/// One entry of `assertions`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct AssertionDef {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    value: Value,
    /// For `llm_judge`: the judge's score must reach it.
    #[serde(default)]
    threshold: Option<f64>,
    /// For `llm_judge`: `{judge_soul: <soul id or soul>}`.
    #[serde(default)]
    config: Option<JudgeConfig>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct JudgeConfig {
    #[serde(default)]
    judge_soul: Option<Value>,
}

/// What a judge soul is asked, before the rubric.
const JUDGE: &str = "Judge the output below against this rubric. Answer with JSON only: {\"pass\": true or false, \"score\": a number from 0 to 1, \"reason\": one sentence}.\n\nRubric: ";

/// The verdict a judge must give.
fn verdict_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "pass": {"type": "boolean"},
            "score": {"type": "number", "minimum": 0, "maximum": 1},
            "reason": {"type": "string"},
        },
        "required": ["pass", "score", "reason"],
        "additionalProperties": false,
    })
}

impl Compiler<'_> {
    /// Adds the block's string checks to its policy, and wraps it with its judges; the
    /// block's output (and, without judges, its exit) is unchanged.
    pub(super) fn assertions(
        &mut self,
        mut block: Block,
        raw: &Value,
        chooses_exit: bool,
        ptr: &str,
    ) -> Option<Block> {
        let defs: Vec<AssertionDef> = self.diags.parse(raw, ptr)?;
        let mut judges = Vec::new();
        for (i, a) in defs.iter().enumerate() {
            let aptr = format!("{ptr}/{i}");
            let (negated, kind) = match a.kind.strip_prefix("not-") {
                Some(k) => (true, k),
                None => (false, a.kind.as_str()),
            };
            if kind == "llm_judge" {
                if negated {
                    self.diags.push(Diagnostic::error(
                        format!("{aptr}/type"),
                        "an llm_judge cannot be negated",
                    ));
                    continue;
                }
                if chooses_exit {
                    self.diags.push(
                        Diagnostic::error(format!("{aptr}/type"), "an llm_judge on a block that chooses an exit is not supported by Weft yet")
                            .hint("judge the block's output in a linear or synthesize block after it"),
                    );
                    continue;
                }
                judges.push(self.judge(a, &aptr)?);
                continue;
            }
            let Some(test) = self.check(kind, &a.value, &aptr) else {
                continue;
            };
            if a.threshold.is_some() || a.config.is_some() {
                self.diags.push(Diagnostic::error(
                    &aptr,
                    format!("a `{kind}` check takes only `type` and `value`"),
                ));
            }
            let (that, said) = if negated {
                (
                    format!("not {test}"),
                    format!("the output must not pass `{kind}` {}", a.value),
                )
            } else {
                (test, format!("the output fails `{kind}` {}", a.value))
            };
            block.policy.assert.push(Assertion {
                that: Expr(that),
                message: Some(said),
            });
        }
        if judges.is_empty() {
            return Some(block);
        }
        // The judges see the output; the block's output passes on unchanged.
        let mut branches = indexmap::IndexMap::new();
        branches.insert(
            "output".to_owned(),
            Block::new(BlockKind::Transform(TransformSpec {
                output: ValueTemplate(Value::from("{{ input }}")),
                exit: None,
            })),
        );
        let mut checks = Vec::new();
        for (i, (judge, threshold)) in judges.into_iter().enumerate() {
            let name = format!("judge{i}");
            let floor = threshold.map_or(String::new(), |t| {
                format!(" and output.{name}.score >= {t}")
            });
            checks.push(Assertion {
                that: Expr(format!("output.{name}.pass{floor}")),
                message: Some(format!("the LLM judge {} did not pass the output", i + 1)),
            });
            branches.insert(name, judge);
        }
        let mut judged = Block::new(BlockKind::Parallel(ParallelSpec {
            branches,
            max_concurrency: None,
            fail_fast: true,
            on_error: OnError::default(),
            isolate: false,
            race: false,
        }));
        judged.policy.assert = checks;
        let unwrap = Block::new(BlockKind::Transform(TransformSpec {
            output: ValueTemplate(Value::from("{{ input.output }}")),
            exit: None,
        }));
        Some(Block::new(BlockKind::Sequence(vec![block, judged, unwrap])))
    }

    /// A string check as an expression over the output's text.
    fn check(&mut self, kind: &str, value: &Value, ptr: &str) -> Option<String> {
        const T: &str = "text(output)";
        let s = |v: &Value| match v {
            Value::String(s) => Value::from(s.as_str()).to_string(),
            other => Value::from(other.to_string()).to_string(),
        };
        let items =
            |v: &Value| -> Option<Vec<String>> { v.as_array().map(|a| a.iter().map(s).collect()) };
        Some(match kind {
            "equals" => format!("(json_or_text({T}) == json_or_text({}))", s(value)),
            "contains" => format!("({} in {T})", s(value)),
            "icontains" => format!("(({} | lower) in ({T} | lower))", s(value)),
            "starts-with" => format!("({T}.startswith({}))", s(value)),
            "regex" => format!("search({}, {T})", s(value)),
            "contains-all" | "contains-any" => {
                let Some(list) = items(value) else {
                    self.diags.push(Diagnostic::error(
                        format!("{ptr}/value"),
                        format!("a `{kind}` check's value is a list of texts"),
                    ));
                    return None;
                };
                if list.is_empty() {
                    return Some(if kind == "contains-all" {
                        "true".into()
                    } else {
                        "false".into()
                    });
                }
                let joiner = if kind == "contains-all" {
                    " and "
                } else {
                    " or "
                };
                format!(
                    "({})",
                    list.iter()
                        .map(|i| format!("{i} in {T}"))
                        .collect::<Vec<_>>()
                        .join(joiner)
                )
            }
            "word-count" => {
                let words = format!("({T}.split() | length)");
                match value {
                    Value::Number(n) if n.is_u64() => format!("({words} == {n})"),
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
                        format!("({})", parts.join(" and "))
                    }
                    _ => {
                        self.diags.push(Diagnostic::error(
                            format!("{ptr}/value"),
                            "a word-count is a whole number or {min, max}",
                        ));
                        return None;
                    }
                }
            }
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

    /// An `llm_judge`: the judge soul (a soul id or an inline soul; without one, the
    /// run's default model) rates the output against the rubric in `value`.
    fn judge(&mut self, a: &AssertionDef, ptr: &str) -> Option<(Block, Option<f64>)> {
        let Some(rubric) = a.value.as_str().filter(|r| !r.trim().is_empty()) else {
            self.diags.push(
                Diagnostic::error(
                    format!("{ptr}/value"),
                    "an llm_judge's value is its rubric, a text",
                )
                .hint("value: The answer cites at least one source."),
            );
            return None;
        };
        if let Some(t) = a.threshold
            && !(0.0..=1.0).contains(&t)
        {
            self.diags.push(Diagnostic::error(
                format!("{ptr}/threshold"),
                "an llm_judge's threshold is a score from 0 to 1",
            ));
            return None;
        }
        let soul = match a.config.as_ref().and_then(|c| c.judge_soul.as_ref()) {
            None => None,
            Some(Value::String(id)) => Some(self.soul(id, &format!("{ptr}/config/judge_soul"))?),
            Some(inline @ Value::Object(_)) => {
                Some(self.inline_soul(inline, &format!("{ptr}/config/judge_soul"))?)
            }
            Some(_) => {
                self.diags.push(Diagnostic::error(
                    format!("{ptr}/config/judge_soul"),
                    "judge_soul is a soul id or a soul",
                ));
                return None;
            }
        };
        let prompt = with_context(
            &literal(&format!("{JUDGE}{rubric}")),
            &["{{ text(input) }}".to_owned()],
        );
        let spec = LlmSpec {
            model: soul.as_ref().and_then(|s| s.model.clone()),
            system: soul
                .as_ref()
                .and_then(|s| s.system_prompt.as_deref())
                .map(|s| Template(literal(s))),
            prompt: Some(Template(prompt)),
            output_schema: Some(verdict_schema()),
            temperature: soul.as_ref().and_then(|s| s.temperature),
            max_tokens: soul.as_ref().and_then(|s| s.max_tokens),
            ..LlmSpec::default()
        };
        Some((Block::new(BlockKind::Llm(spec)), a.threshold))
    }
}
