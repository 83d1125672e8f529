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

/// Whether a command's `goto` names nowhere: LangGraph's `RemoteGraph` sends a whole
/// `Command`, whose unset `goto` is an empty list.
fn no_goto(goto: &Value) -> bool {
    match goto {
        Value::Array(a) => a.is_empty(),
        Value::String(s) => s.is_empty(),
        _ => false,
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
            && (c.update.is_some() || c.goto.as_ref().is_some_and(|g| !no_goto(g)))
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(body: Value) -> RunCreate {
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn a_whole_command_as_remote_graph_sends_it_resumes() {
        let sent = json!({"assistant_id": "a", "command": {"graph": null, "update": null, "resume": "approve", "goto": []}});
        assert!(request(sent).refuse_unsupported().is_ok());
        for set in [
            json!({"goto": "node"}),
            json!({"goto": ["node"]}),
            json!({"update": {"k": 1}}),
        ] {
            let mut command = json!({"resume": "approve"});
            command
                .as_object_mut()
                .unwrap()
                .extend(set.as_object().unwrap().clone());
            let r = request(json!({"assistant_id": "a", "command": command}));
            assert!(r.refuse_unsupported().is_err(), "{set}");
        }
    }

    #[test]
    fn a_run_names_its_checkpoint_either_way() {
        let new = request(json!({"assistant_id": "a", "checkpoint": {"checkpoint_id": "c1"}}));
        assert_eq!(new.checkpoint_id(), Some("c1"));
        let old = request(json!({"assistant_id": "a", "checkpoint_id": "c2"}));
        assert_eq!(old.checkpoint_id(), Some("c2"));
    }
}
