//! TEA's `code.execute`: Python run as a script, with no access to the run's state, whose
//! `result` variable is its value and whose `print` output is captured. TEA runs it in
//! RestrictedPython; Weft in its own Python sandbox (a process with limits). The result
//! is TEA's `{success, stdout, stderr, return_value, error, execution_time_ms}`, and a
//! failure of the code (an exception, the time limit) is a result with `success: false`,
//! as in TEA, not a failed node.

use super::{Compiler, transform};
use serde_json::{Value, json};
use weft_core::Diagnostic;
use weft_core::ir::{Block, BlockKind, CodeLimits, CodeSpec, Rescue, ValueTemplate};

/// TEA's names of the action.
pub(super) const CODE_EXECUTE: &[&str] = &["code.execute", "actions.code_execute"];

/// The options it reads.
/// (TEA takes `language` and runs Python whatever it says; Weft accepts only `python`.)
const OPTIONS: &[&str] = &["code", "language", "timeout", "max_output_bytes"];

/// TEA's defaults: 30 seconds, 64 KiB of output.
const DEFAULT_TIMEOUT_S: f64 = 30.0;
const DEFAULT_OUTPUT_BYTES: u64 = 65_536;

impl Compiler<'_> {
    /// The block of `uses: code.execute` with `with`, at node pointer `ptr`.
    pub(super) fn code_execute(
        &mut self,
        uses: &str,
        with: Option<&Value>,
        ptr: &str,
        node: &str,
    ) -> Option<Block> {
        let wptr = format!("{ptr}/with");
        let with = self.with_options(
            uses,
            with,
            &wptr,
            ("its `code`", "with: {code: \"result = 1 + 2\"}"),
            OPTIONS,
        )?;
        let code = self.required_text(
            uses,
            with,
            (
                "code",
                "Python source",
                Some("code: \"result = sum([1, 2, 3])\""),
            ),
            &wptr,
        )?;
        if let Some(language) = with
            .get("language")
            .filter(|l| l.as_str() != Some("python"))
        {
            self.diags.push(
                Diagnostic::error(
                    format!("{wptr}/language"),
                    format!("{uses} runs Python, not {language}"),
                )
                .hint("a `run:` node with `language: lua` or `prolog` runs the others"),
            );
            return None;
        }
        let hint = "compute the value in the code from constants, or use a `run:` node, which reads the state";
        if let Some(refusal) = self.templated_code(uses, code, "code", hint, (ptr, node)) {
            return Some(refusal);
        }
        let timeout_ms = self
            .timeout_seconds(with.get("timeout"), &wptr)
            .unwrap_or((DEFAULT_TIMEOUT_S * 1000.0) as u64);
        let max_output = match with.get("max_output_bytes") {
            None => DEFAULT_OUTPUT_BYTES,
            Some(n) => match n.as_u64().filter(|n| *n > 0) {
                Some(n) => n,
                None => {
                    self.diags.push(Diagnostic::error(
                        format!("{wptr}/max_output_bytes"),
                        "max_output_bytes is a whole number above 0",
                    ));
                    return None;
                }
            },
        };
        if returns_at_top_level(code) {
            // TEA compiles the code as a module, where `return` is a syntax error, which
            // it reports as a result; in Weft's script it would end the script early.
            return Some(failure(json!("SyntaxError: 'return' outside function")));
        }
        let (source, first_line) = script(code, max_output);
        let origin = self.code_origin(&wptr, first_line);
        let mut run = Block::new(BlockKind::Code(CodeSpec {
            language: "python".into(),
            source,
            origin,
            entry: None,
            // No arguments: TEA's code.execute sees neither the state nor an input.
            args: Some(ValueTemplate(json!({}))),
            imports: None,
            builtins: None,
            limits: CodeLimits {
                time_ms: timeout_ms,
                ..CodeLimits::default()
            },
        }));
        run.policy.rescue.push(Rescue {
            when: Vec::new(),
            then: failure(json!("{{ input.error.message }}")),
        });
        Some(run)
    }
}

/// TEA's result of code that failed with `error` (a template of the rescue's input).
fn failure(error: Value) -> Block {
    transform(json!({
        "success": false,
        "stdout": "",
        "stderr": "",
        "return_value": null,
        "error": error,
        "execution_time_ms": 0.0,
    }))
}

/// Whether a line of `code` returns at the top level (not inside a function).
fn returns_at_top_level(code: &str) -> bool {
    code.lines().any(|line| {
        line.strip_prefix("return")
            .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '(', '\t', ';']))
    })
}

/// The user's `code` between a prelude that captures `print` and sets `result` to None,
/// and an ending that returns TEA's result; and the line of the script on which the code
/// starts.
fn script(code: &str, max_output: u64) -> (String, u32) {
    const PRELUDE: &str = r#"import time as __weft_time
__weft_started = __weft_time.monotonic()
__weft_printed = []
def print(*values, sep=" ", end="\n", file=None, flush=False):
    __weft_printed.append(sep.join([str(v) for v in values]) + end)
result = None
"#;
    let ending = format!(
        r#"
__weft_stdout = "".join(__weft_printed)
if len(__weft_stdout) > {max_output}:
    __weft_stdout = __weft_stdout[:{max_output}] + "\n... [output truncated]"
return {{"success": True, "stdout": __weft_stdout, "stderr": "", "return_value": result, "error": None, "execution_time_ms": (__weft_time.monotonic() - __weft_started) * 1000}}
"#
    );
    let first_line = PRELUDE.lines().count() as u32 + 1;
    let mut source = String::from(PRELUDE);
    source.push_str(code);
    if !code.ends_with('\n') {
        source.push('\n');
    }
    source.push_str(&ending);
    (source, first_line)
}
