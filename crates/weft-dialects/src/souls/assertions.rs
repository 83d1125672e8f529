//! A block's `assertions`: checks of its output that fail the block (so `retry_config`
//! retries it) when they do not hold. The deterministic checks of the tool this dialect
//! comes from (`checks.rs`, each negated by a `not-` prefix) become expressions on the
//! output; an `llm_judge` asks a judge soul for a verdict.

use super::Compiler;
use super::blocks::ExitAfterChecks;
use super::prompt::with_context;
use crate::template_text::literal;
use serde::Deserialize;
use serde_json::{Value, json};
use weft_core::Diagnostic;
use weft_core::ir::{
    Assertion, Block, BlockKind, Expr, LlmSpec, OnError, ParallelSpec, Template, TransformSpec,
    ValueTemplate,
};

/// One entry of `assertions` (and of an eval case's `expected`).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AssertionDef {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub value: Value,
    /// The bound of a scored check (`levenshtein`, `bleu`, `rouge-n`, `cost`,
    /// `latency`), or the score an `llm_judge` must reach.
    #[serde(default)]
    pub threshold: Option<f64>,
    /// `{judge_soul}` for an `llm_judge`, `{mode: json}` for `equals`; anything for a
    /// project's `custom:` check, which receives it.
    #[serde(default)]
    pub config: Option<Value>,
    /// The check's weight in an eval's score (default 1).
    #[serde(default)]
    pub weight: Option<f64>,
    /// A name for the check's score; read, not used by a run.
    #[serde(default, rename = "metric")]
    pub _metric: Option<String>,
    /// `json_path:$.a.b`: check that field of the JSON output instead.
    #[serde(default)]
    pub transform: Option<String>,
}

/// A built-in check's `config`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CheckConfig {
    #[serde(default)]
    pub judge_soul: Option<Value>,
    #[serde(default)]
    pub mode: Option<String>,
}

/// A check that runs beside the block's output once the block ran (a judge soul, a
/// project's Python assertion): its branch, and what must hold of its result.
pub(super) struct SideCheck {
    pub name: String,
    pub block: Block,
    /// An expression over `output.<name>`.
    pub holds: String,
    pub message: String,
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
        exit: ExitAfterChecks,
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
            let custom = kind.strip_prefix("custom:");
            if kind == "llm_judge" || custom.is_some() {
                if negated {
                    self.diags.push(Diagnostic::error(
                        format!("{aptr}/type"),
                        format!("a `{kind}` check cannot be negated"),
                    ));
                    continue;
                }
                if matches!(exit, ExitAfterChecks::Lost) {
                    self.diags.push(
                        Diagnostic::error(format!("{aptr}/type"), format!("a `{kind}` check on a block that chooses an exit is not supported by Weft yet"))
                            .hint("check the block's output in a linear or synthesize block after it"),
                    );
                    continue;
                }
                let n = judges.len();
                let side = match custom {
                    Some(id) => self.custom_check(id, a, &aptr, n)?,
                    None => self.judge(a, &aptr, n)?,
                };
                judges.push(side);
                continue;
            }
            let Some(test) = self.check(kind, a, &aptr) else {
                continue;
            };
            if kind == "cost" && block.policy.budget.is_none() {
                // A frame with no limits: it counts the block's model usage for the check.
                block.policy.budget = Some(weft_core::ir::Budget {
                    tokens: None,
                    cost_usd: None,
                    wall_ms: None,
                    on_exceed: weft_core::ir::OnExceed::Fail,
                    warn_at: None,
                });
            }
            let shown = if a.value.is_null() {
                String::new()
            } else {
                format!(" {}", a.value)
            };
            let (that, said) = if negated {
                (
                    format!("not {test}"),
                    format!("the output must not pass `{kind}`{shown}"),
                )
            } else {
                (test, format!("the output fails `{kind}`{shown}"))
            };
            block.policy.assert.push(Assertion {
                warn: true,
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
        for side in judges {
            checks.push(Assertion {
                warn: true,
                that: Expr(side.holds),
                message: Some(side.message),
            });
            branches.insert(side.name, side.block);
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
            exit: match exit {
                ExitAfterChecks::FromOutput(t) => {
                    Some(Template(format!("{{%- set input = input.output -%}}{t}")))
                }
                _ => None,
            },
        }));
        Some(Block::new(BlockKind::Sequence(vec![block, judged, unwrap])))
    }

    /// An `llm_judge`: the judge soul (a soul id or an inline soul; without one, the
    /// run's default model) rates the output against the rubric in `value`; it is the
    /// `n`-th check that runs beside the block's output.
    fn judge(&mut self, a: &AssertionDef, ptr: &str, n: usize) -> Option<SideCheck> {
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
        let config: CheckConfig = match &a.config {
            Some(c) => self.diags.parse(c, &format!("{ptr}/config"))?,
            None => CheckConfig::default(),
        };
        let soul = match config.judge_soul.as_ref() {
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
        let name = format!("judge{n}");
        let floor = a.threshold.map_or(String::new(), |t| {
            format!(" and output.{name}.score >= {t}")
        });
        Some(SideCheck {
            holds: format!("output.{name}.pass{floor}"),
            message: format!("the LLM judge {} did not pass the output", n + 1),
            name,
            block: Block::new(BlockKind::Llm(spec)),
        })
    }
}
