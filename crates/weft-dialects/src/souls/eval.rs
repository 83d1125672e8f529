//! runsight's `eval:` section: test cases of the workflow, each with fixture outputs of
//! blocks and the assertions expected of them. Weft checks the section as runsight
//! does (a threshold from 0 to 1, at least one case, unique case ids, blocks that
//! exist, assertions of known types) so a mistake is found when the file loads; `weft
//! run` does not run the cases, and says so with a warning.

use super::Compiler;
use super::assertions::AssertionDef;
use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::Value;
use weft_core::Diagnostic;
use weft_core::validate::child_pointer;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EvalSection {
    #[serde(default)]
    threshold: Option<f64>,
    cases: Vec<EvalCase>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EvalCase {
    id: String,
    #[serde(default, rename = "description")]
    _description: Option<String>,
    #[serde(default, rename = "inputs")]
    _inputs: Option<IndexMap<String, Value>>,
    #[serde(default)]
    fixtures: Option<IndexMap<String, Value>>,
    #[serde(default)]
    expected: Option<IndexMap<String, Vec<AssertionDef>>>,
}

impl Compiler<'_> {
    /// Checks the `eval:` section at `/eval`.
    pub(super) fn eval_section(&mut self, raw: &Value) {
        let Some(section) = self.diags.parse::<EvalSection>(raw, "/eval") else {
            return;
        };
        if section.threshold.is_some_and(|t| !(0.0..=1.0).contains(&t)) {
            self.diags.push(Diagnostic::error(
                "/eval/threshold",
                "an eval's threshold is a score from 0 to 1",
            ));
        }
        if section.cases.is_empty() {
            self.diags.push(
                Diagnostic::error("/eval/cases", "an eval needs at least one case")
                    .hint("cases: [{id: basic, fixtures: {draft: \"...\"}, expected: {draft: [{type: contains, value: \"...\"}]}}]"),
            );
        }
        let mut seen: Vec<&str> = Vec::new();
        for (i, case) in section.cases.iter().enumerate() {
            let ptr = format!("/eval/cases/{i}");
            if seen.contains(&case.id.as_str()) {
                self.diags.push(Diagnostic::error(
                    format!("{ptr}/id"),
                    format!("two eval cases are named `{}`", case.id),
                ));
            }
            seen.push(&case.id);
            for block in case.fixtures.iter().flat_map(IndexMap::keys) {
                self.block_ref(
                    block,
                    &child_pointer(&format!("{ptr}/fixtures"), block),
                    "the fixture's block",
                );
            }
            for (block, checks) in case.expected.iter().flatten() {
                let bptr = child_pointer(&format!("{ptr}/expected"), block);
                self.block_ref(block, &bptr, "the expected block");
                for (j, a) in checks.iter().enumerate() {
                    let aptr = format!("{bptr}/{j}");
                    if a.weight.is_some_and(|w| !(w >= 0.0 && w.is_finite())) {
                        self.diags.push(Diagnostic::error(
                            format!("{aptr}/weight"),
                            "a weight is a number, 0 or more",
                        ));
                    }
                    let kind = a.kind.strip_prefix("not-").unwrap_or(&a.kind);
                    if let Some(id) = kind.strip_prefix("custom:") {
                        self.custom_check(id, a, &aptr, 0);
                    } else if kind != "llm_judge" {
                        self.check(kind, a, &aptr);
                    }
                }
            }
        }
        if !self.diags.has_errors() {
            self.diags.push(
                Diagnostic::warning(
                    "/eval",
                    format!(
                        "the eval section's {} case(s) are checked, not run: `weft run` runs the workflow",
                        section.cases.len()
                    ),
                )
                .hint("Weft has no eval runner yet; the blocks' own `assertions` are checked on every run"),
            );
        }
    }
}
