//! TEA's `reason.cot`: chain-of-thought, a model call that must answer
//! `{thinking, answer}` (a JSON Schema the answer is checked and repaired against),
//! guided by a thinking format (`step_by_step`, `pros_cons`, `tree`,
//! `first_principles`; it may be a template, chosen when the node runs) and worked
//! examples. The result is TEA's: `thinking`, `answer`, `model`, `thinking_format`,
//! `reasoning_thinking`, `reasoning_answer` and a `reasoning_trace`.

use super::{Compiler, transform};
use serde_json::{Map, Value, json};
use weft_core::Diagnostic;
use weft_core::ir::{Block, BlockKind};

/// How each thinking format asks the model to reason (Weft's wording).
const FORMATS: &[(&str, &str)] = &[
    (
        "step_by_step",
        "Reason step by step: name the parts of the problem, work through each in turn, showing each step, then give the answer.",
    ),
    (
        "pros_cons",
        "Weigh the arguments: list those for and those against, compare their weight, then give a balanced answer.",
    ),
    (
        "tree",
        "Reason as a tree: set out the main lines of analysis, follow each, then combine what they found into the answer.",
    ),
    (
        "first_principles",
        "Reason from first principles: state the basic facts you rely on, build up from them questioning each assumption, then derive the answer.",
    ),
];

/// The options `reason.cot` reads.
const OPTIONS: &[&str] = &[
    "problem",
    "model",
    "provider",
    "api_base",
    "thinking_format",
    "few_shot_examples",
    "temperature",
    "max_tokens",
];

impl Compiler<'_> {
    /// The block of `uses: reason.cot` with `with`, at node pointer `ptr`.
    pub(super) fn reason_cot(
        &mut self,
        with: Option<&Value>,
        ptr: &str,
        node: &str,
    ) -> Option<Block> {
        let wptr = format!("{ptr}/with");
        let with = self.with_options(
            "reason.cot",
            with,
            &wptr,
            ("its `problem`", "with: {problem: \"{{ state.question }}\"}"),
            OPTIONS,
        )?;
        let problem = self.required_text(
            "reason.cot",
            with,
            ("problem", "a string (a template)", None),
            &wptr,
        )?;
        let format = with
            .get("thinking_format")
            .and_then(Value::as_str)
            .unwrap_or("step_by_step");
        let examples = self.worked_examples(with.get("few_shot_examples"), &wptr)?;
        let mut call = Map::new();
        call.insert(
            "system".into(),
            Value::from(system_prompt(format, &examples)),
        );
        call.insert("prompt".into(), Value::from(format!("Problem: {problem}")));
        for key in ["model", "provider", "api_base", "temperature", "max_tokens"] {
            if let Some(v) = with.get(key) {
                call.insert(key.into(), v.clone());
            }
        }
        call.insert(
            "response_format".into(),
            json!({"type": "json_schema", "json_schema": {"name": "reasoning", "schema": {
                "type": "object",
                "properties": {"thinking": {"type": "string"}, "answer": {}},
                "required": ["thinking", "answer"]
            }}}),
        );
        let model_call = self.llm_call("reason.cot", Some(&Value::Object(call)), ptr, node)?;
        let result = transform(json!({
            "thinking": "{{ input.content.thinking }}",
            "answer": "{{ input.content.answer }}",
            "model": "{{ input.model }}",
            "thinking_format": format,
            "reasoning_thinking": "{{ input.content.thinking }}",
            "reasoning_answer": "{{ input.content.answer }}",
            "reasoning_trace": [{
                "step": "cot_response",
                "thinking": "{{ input.content.thinking }}",
                "answer": "{{ input.content.answer }}",
                "usage": "{{ input.usage }}",
            }],
        }));
        Some(Block::new(BlockKind::Sequence(vec![model_call, result])))
    }

    /// `few_shot_examples`: a list of `{problem, thinking, answer}`, as prompt text.
    fn worked_examples(&mut self, v: Option<&Value>, wptr: &str) -> Option<String> {
        let Some(v) = v else {
            return Some(String::new());
        };
        let Some(list) = v.as_array() else {
            self.diags.push(
                Diagnostic::error(format!("{wptr}/few_shot_examples"), "few_shot_examples is a list of {problem, thinking, answer}")
                    .hint("few_shot_examples: [{problem: \"2 + 2?\", thinking: \"Add them.\", answer: \"4\"}]"),
            );
            return None;
        };
        let text = |e: &Value, k: &str| match e.get(k) {
            Some(Value::String(s)) => s.trim().to_owned(),
            Some(other) => other.to_string(),
            None => String::new(),
        };
        let mut out = String::from("\n\nWorked examples:");
        for (i, e) in list.iter().enumerate() {
            out.push_str(&format!(
                "\n\nExample {}:\nProblem: {}\nThinking: {}\nAnswer: {}",
                i + 1,
                text(e, "problem"),
                text(e, "thinking"),
                text(e, "answer")
            ));
        }
        Some(out)
    }
}

/// The system prompt: the task, the thinking format (chosen when the node runs when
/// `format` is a template) and the examples, which are text, never templates.
fn system_prompt(format: &str, examples: &str) -> String {
    let instruction = if format.contains("{{") {
        let table: Map<String, Value> = FORMATS
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
            .collect();
        let chosen = format
            .trim()
            .trim_start_matches("{{")
            .trim_end_matches("}}")
            .trim();
        format!(
            "{{{{ {table}.get({chosen}) or {default} }}}}",
            table = Value::Object(table),
            default = Value::from(FORMATS[0].1)
        )
    } else {
        FORMATS
            .iter()
            .find(|(k, _)| *k == format)
            .map_or(FORMATS[0].1, |(_, v)| v)
            .to_owned()
    };
    format!(
        "Think the problem through before you answer. Reply with JSON only: \"thinking\", your reasoning as text, and \"answer\", the final answer (text, a number or structured data).\n\n{instruction}{}",
        crate::template_text::literal(examples)
    )
}
