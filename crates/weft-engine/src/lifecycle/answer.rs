//! Answer: a person's decision on a paused run's approval is journaled as the run is
//! taken from `paused` (the first answer wins), and the run goes on.

use crate::Engine;
use crate::drive::Entry;
use crate::error::{EngineError, taken_message};
use crate::underway::Underway;
use weft_core::Value;
use weft_core::event::EventKind;
use weft_core::ports::{EntryKind, JournalEntry, RunRecord, RunStatus};

impl Engine {
    /// Answers a paused run's approval and continues the run on its own task, or hands
    /// it to the workers (see [`crate::EngineBuilder::continue_on_workers`]).
    ///
    /// `key` picks the approval when several wait; `answer` must hold a `decision` that is
    /// one of the approval's options. Errors about the answer are returned here (a run
    /// answered, resumed or retried first is [`EngineError::Taken`]); the run's end
    /// through what is returned. Needs a Tokio runtime.
    pub async fn answer(
        &self,
        run_id: &str,
        key: Option<&str>,
        answer: Value,
    ) -> Result<Underway, EngineError> {
        let (rec, answered) = self.accept_answer(run_id, key, answer).await?;
        self.go_on(rec, Entry::Answered(answered)).await
    }

    /// Checks `answer` against the run's waiting approval and journals it, taking the
    /// run for this process. Returns the run and the event that announces the answer.
    async fn accept_answer(
        &self,
        run_id: &str,
        key: Option<&str>,
        answer: Value,
    ) -> Result<(RunRecord, EventKind), EngineError> {
        let rec = self.load(run_id).await?;
        if rec.status != RunStatus::Paused {
            let answer = self.last_answer(&rec.id).await;
            if rec.status == RunStatus::Running || answer.is_some() {
                return Err(EngineError::Taken(taken_message(&rec, answer.as_deref())));
            }
            return Err(EngineError::Refused(format!(
                "run {} is {}, not paused: there is nothing to answer",
                rec.id,
                rec.status.as_str()
            )));
        }
        let (key, waited) = waited_for(&rec, key)?;
        check_decision(&rec, &key, &waited, &answer)?;
        // The first answer wins: the run leaves `paused` in the same step that journals
        // the answer, so a second answer finds it taken and the journal holds one.
        let entry = JournalEntry {
            key: key.clone(),
            kind: EntryKind::Answer,
            value: answer.clone().into(),
        };
        self.take(&rec, vec![RunStatus::Paused], None, Some(entry))
            .await?;
        Ok((rec, EventKind::ApprovalAnswered { key, answer }))
    }
}

/// The approval of paused run `rec` that `key` names (the only one when `None`), with
/// what the run recorded about it.
fn waited_for(rec: &RunRecord, key: Option<&str>) -> Result<(String, Value), EngineError> {
    let waiting: Vec<Value> = rec
        .waiting
        .as_ref()
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let keys: Vec<&str> = waiting
        .iter()
        .filter_map(|w| w.get("key")?.as_str())
        .collect();
    let key = match key {
        Some(k) if keys.contains(&k) => k,
        Some(k) => {
            return Err(EngineError::Refused(format!(
                "run {} does not wait for `{k}`; it waits for: {}",
                rec.id,
                keys.join(", ")
            )));
        }
        None if keys.len() == 1 => keys[0],
        None => {
            return Err(EngineError::Refused(format!(
                "run {} waits for {} approvals; name one: {}",
                rec.id,
                keys.len(),
                keys.join(", ")
            )));
        }
    };
    let waited = waiting
        .iter()
        .find(|w| w.get("key").and_then(Value::as_str) == Some(key))
        .cloned()
        .unwrap_or(Value::Null);
    Ok((key.to_owned(), waited))
}

/// Refuses an answer to a wait that takes none, or a decision the approval does not
/// offer.
fn check_decision(
    rec: &RunRecord,
    key: &str,
    waited: &Value,
    answer: &Value,
) -> Result<(), EngineError> {
    if waited.get("timer_only") == Some(&Value::Bool(true)) {
        let until = waited
            .get("wake_ms")
            .and_then(Value::as_i64)
            .unwrap_or_default();
        return Err(EngineError::Refused(format!(
            "`{key}` of run {} waits until {until} (Unix ms) and takes no answer; give the wait an `or_approval` to let a person continue it early",
            rec.id
        )));
    }
    let options: Vec<&str> = waited
        .get("options")
        .and_then(Value::as_array)
        .map(|o| o.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let decision = answer.get("decision").and_then(Value::as_str).unwrap_or("");
    if !options.is_empty() && !options.contains(&decision) {
        return Err(EngineError::Refused(format!(
            "`{decision}` is not a decision this approval accepts ({})",
            options.join(", ")
        )));
    }
    Ok(())
}
