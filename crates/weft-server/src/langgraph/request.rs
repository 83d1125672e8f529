//! The body of a run request (`POST /threads/{id}/runs`, `/runs/wait`, `/runs/stream`
//! and the same without a thread), and which of LangGraph's fields Weft refuses.

use super::LgError;
use serde::Deserialize;
use serde_json::Value;

/// The body of `POST /threads/{id}/runs`, `/runs/wait` and `/runs/stream`.
#[derive(Deserialize, Default)]
pub(crate) struct RunCreate {
    pub(crate) assistant_id: String,
    pub(crate) input: Option<Value>,
    pub(crate) command: Option<Command>,
    pub(crate) stream_mode: Option<Value>,
    pub(crate) multitask_strategy: Option<String>,
    pub(crate) if_not_exists: Option<String>,
    interrupt_before: Option<Value>,
    interrupt_after: Option<Value>,
    checkpoint: Option<Value>,
    checkpoint_id: Option<String>,
    after_seconds: Option<f64>,
    webhook: Option<String>,
    /// A run without a thread: `delete` (the default) drops its thread once it ends or
    /// pauses, `keep` keeps it.
    on_completion: Option<String>,
}

impl RunCreate {
    /// Whether a run without a thread keeps the thread made for it; `422` for a value
    /// that is neither `keep` nor `delete`.
    pub(crate) fn keeps_its_thread(&self) -> Result<bool, LgError> {
        match self.on_completion.as_deref() {
            None | Some("delete") => Ok(false),
            Some("keep") => Ok(true),
            Some(other) => Err(LgError::invalid(format!(
                "`on_completion` is `delete` or `keep`, not `{other}`"
            ))),
        }
    }
}

/// `command`: only `resume` has a Weft meaning (the answer to an approval).
#[derive(Deserialize, Default)]
pub(crate) struct Command {
    pub(crate) resume: Option<Value>,
    update: Option<Value>,
    goto: Option<Value>,
}

impl RunCreate {
    /// The checkpoint the run is to start from (`checkpoint.checkpoint_id`, or the
    /// older `checkpoint_id`), when one is named.
    pub(crate) fn checkpoint_id(&self) -> Option<&str> {
        self.checkpoint
            .as_ref()
            .and_then(|c| c.get("checkpoint_id"))
            .and_then(Value::as_str)
            .or(self.checkpoint_id.as_deref())
    }

    /// Refuses the fields Weft has no meaning for, rather than ignoring them.
    pub(crate) fn refuse_unsupported(&self) -> Result<(), LgError> {
        let refused = [
            (
                "interrupt_before",
                self.interrupt_before.is_some(),
                "Weft pauses at approval steps the flow declares",
            ),
            (
                "interrupt_after",
                self.interrupt_after.is_some(),
                "Weft pauses at approval steps the flow declares",
            ),
            (
                "after_seconds",
                self.after_seconds.is_some(),
                "use a schedule (POST /v1/schedules) or a `wait` step",
            ),
            (
                "webhook",
                self.webhook.is_some(),
                "not supported on this door",
            ),
        ];
        if let Some((field, _, why)) = refused.iter().find(|(_, given, _)| *given) {
            return Err(LgError::invalid(format!(
                "`{field}` is not supported by Weft: {why}"
            )));
        }
        if let Some(c) = &self.command
            && (c.update.is_some() || c.goto.is_some())
        {
            return Err(LgError::invalid(
                "`command.update` and `command.goto` are not supported by Weft: a command resumes an approval (`command: {resume: ...}`)",
            ));
        }
        if self.input.is_some() && self.command.is_some() {
            return Err(LgError::invalid("give `input` or `command`, not both"));
        }
        Ok(())
    }
}
