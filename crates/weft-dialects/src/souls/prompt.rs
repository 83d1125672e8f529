//! What a soul is asked: the run's task (the run input: a text, or `{instruction,
//! context?}`) or a block's own instruction, with a context assembled from the block's
//! `inputs` and earlier results, as `INSTRUCTION\n\nContext:\nCONTEXT`.

use serde_json::Value;

/// The task's instruction, as a template.
pub(super) const TASK: &str =
    "{{ text(initial.instruction) if initial is mapping else text(initial) }}";

/// The task's context (empty when it has none), as a template.
pub(super) const TASK_CONTEXT: &str =
    "{{ text(initial.context) if initial is mapping and initial.context is defined else '' }}";

/// What a gate's soul is asked about the content it evaluates.
pub(super) const GATE: &str = "Review the content below against your standards. On the first line of your answer write PASS if it meets them, or FAIL: followed by the reason if it does not.";

/// What a synthesize block's soul is asked.
pub(super) const SYNTHESIZE: &str = "Combine the outputs below into one coherent result: keep what they agree on, resolve where they differ, and leave nothing important out.";

/// A template that reads `results[key]` as text.
pub(super) fn result_text(key: &str) -> String {
    format!("{{{{ text(state.results[{}]) }}}}", Value::from(key))
}

/// `instruction` (a template) followed, when the context renders non-empty, by the
/// context parts (templates) under `Context:`.
pub(super) fn with_context(instruction: &str, parts: &[String]) -> String {
    if parts.is_empty() {
        return instruction.to_owned();
    }
    format!(
        "{instruction}{{% set c %}}{}{{% endset %}}{{% if c | trim %}}\n\nContext:\n{{{{ c | trim }}}}{{% endif %}}",
        parts.join("\n\n")
    )
}
