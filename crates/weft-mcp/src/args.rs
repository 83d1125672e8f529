//! Each tool's arguments: what the model sends, with the JSON Schema it is shown, and
//! the limits every argument is checked against before anything runs.

use crate::failure::Failure;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// The largest flow text a tool accepts.
pub(crate) const MAX_SOURCE: usize = 1 << 20;
/// The longest a tool waits for a run, in seconds.
pub(crate) const MAX_WAIT_S: f64 = 300.0;

/// Reads a tool's arguments, or says what is wrong with them.
pub(crate) fn read<T: for<'de> Deserialize<'de>>(
    tool: &str,
    arguments: serde_json::Map<String, Value>,
) -> Result<T, Failure> {
    serde_json::from_value(Value::Object(arguments)).map_err(|e| {
        // serde quotes the offending value, which may be megabytes long.
        let why = crate::failure::cut(e);
        Failure::new(format!("invalid arguments for {tool}: {why}"))
            .hint("the tool's input schema (tools/list) names each argument and its type")
    })
}

/// A flow's text, checked for size.
pub(crate) fn source(text: &str) -> Result<&str, Failure> {
    if text.len() > MAX_SOURCE {
        return Err(Failure::new(format!(
            "the flow text is {} bytes; the limit is {MAX_SOURCE}",
            text.len()
        ))
        .hint("split the flow into sub-flows, or move long prompts and code into files"));
    }
    Ok(text)
}

/// A flow name: 1 to 100 letters, digits, `.`, `_` or `-`.
pub(crate) fn name(name: &str) -> Result<&str, Failure> {
    let ok = !name.is_empty()
        && name.len() <= 100
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(name)
    } else {
        Err(Failure::new(format!(
            "{} is not a flow name",
            crate::failure::quoted(name)
        ))
        .hint("use 1 to 100 letters, digits, `.`, `_` or `-`, e.g. `support-triage`"))
    }
}

/// `wait_seconds`, bounded.
pub(crate) fn wait(seconds: Option<f64>) -> Option<std::time::Duration> {
    seconds
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(|s| std::time::Duration::from_secs_f64(s.min(MAX_WAIT_S)))
}

/// `describe_format`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DescribeFormat {
    /// The dialect to describe; leave out for the list of dialects.
    pub(crate) dialect: Option<String>,
}

/// `validate_flow`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ValidateFlow {
    /// The flow's text: YAML or JSON, any dialect.
    pub(crate) source: String,
    /// The dialect, when detection should not decide.
    pub(crate) dialect: Option<String>,
}

/// `save_flow`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SaveFlow {
    /// The flow's name (letters, digits, `.`, `_`, `-`); saving again makes a new version.
    pub(crate) name: String,
    /// The flow's text: YAML or JSON, any dialect.
    pub(crate) source: String,
    /// The dialect, when detection should not decide.
    pub(crate) dialect: Option<String>,
    /// Save even if the flow is invalid.
    #[serde(default)]
    pub(crate) force: bool,
}

/// How `get_flow` shows a flow.
#[derive(Deserialize, JsonSchema, Default, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum FlowView {
    /// The text as saved.
    #[default]
    Source,
    /// The document as JSON (what `edit_flow` patches: its JSON Pointers) and its graph.
    Structure,
}

/// `get_flow`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetFlow {
    /// The flow's name.
    pub(crate) name: String,
    /// Which version (default: the latest).
    pub(crate) version: Option<u32>,
    /// `source` (the text) or `structure` (the JSON document and its graph).
    #[serde(default)]
    pub(crate) view: FlowView,
}

/// `list_flows`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListFlows {}

/// `edit_flow`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EditFlow {
    /// The flow's name; a new name starts from an empty document.
    pub(crate) name: String,
    /// An RFC 6902 JSON Patch: `[{"op": "add", "path": "/root/sequence/-", "value": {...}}]`.
    /// Paths point into the document as JSON (see get_flow view=structure).
    pub(crate) patch: Vec<Value>,
    /// The dialect of a new flow, when detection should not decide.
    pub(crate) dialect: Option<String>,
    /// Save even if the patched flow is invalid.
    #[serde(default)]
    pub(crate) force: bool,
}

/// `run_flow`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunFlow {
    /// A saved flow's name; or give `source`.
    pub(crate) name: Option<String>,
    /// Which version of the named flow (default: the latest).
    pub(crate) version: Option<u32>,
    /// A flow's text to run without saving it; or give `name`.
    pub(crate) source: Option<String>,
    /// The dialect of `source`, when detection should not decide.
    pub(crate) dialect: Option<String>,
    /// The run's input (default: the flow's own).
    pub(crate) input: Option<Value>,
    /// Wait up to this many seconds (at most 300) for the run to end or pause.
    pub(crate) wait_seconds: Option<f64>,
}

/// `get_run`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetRun {
    /// The run's id (a unique prefix of 4 or more characters will do).
    pub(crate) run_id: String,
    /// Only events after this sequence number (from a previous get_run's `next_after`).
    pub(crate) after_event: Option<u64>,
}

/// `list_runs`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListRuns {
    /// Only runs in this status: queued, running, paused, completed, failed, cancelled.
    pub(crate) status: Option<String>,
    /// At most this many, newest first (default 20, at most 200).
    pub(crate) limit: Option<usize>,
}

/// `cancel_run`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunId {
    /// The run's id.
    pub(crate) run_id: String,
}

/// `retry_run`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RetryRun {
    /// The run's id.
    pub(crate) run_id: String,
    /// Wait up to this many seconds (at most 300) for the run to end or pause.
    pub(crate) wait_seconds: Option<f64>,
}

/// `answer_approval`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AnswerApproval {
    /// The paused run's id.
    pub(crate) run_id: String,
    /// `approve`, `reject`, or another of the approval's options.
    pub(crate) decision: String,
    /// A note for the record.
    #[serde(default)]
    pub(crate) note: String,
    /// Which approval (its key), when the run waits for several.
    pub(crate) step: Option<String>,
    /// Wait up to this many seconds (at most 300) for the run to end or pause again.
    pub(crate) wait_seconds: Option<f64>,
}

/// `test_flow`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TestFlow {
    /// The flow's text: YAML or JSON, any dialect.
    pub(crate) source: String,
    /// The dialect, when detection should not decide.
    pub(crate) dialect: Option<String>,
    /// The run's input (default: the flow's own).
    pub(crate) input: Option<Value>,
    /// What each model call answers, by the `llm` block's id: a string, or JSON for a
    /// block with an output schema. Blocks not named here ask the offline local model.
    #[serde(default)]
    pub(crate) answers: serde_json::Map<String, Value>,
    /// Wait up to this many seconds (default 60, at most 300).
    pub(crate) wait_seconds: Option<f64>,
}
