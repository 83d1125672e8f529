//! Wake: a run whose `wait` came due goes on. The timer's answer is journaled as the run is
//! taken from `paused` (the first process to wake it, or a person answering its
//! `or_approval`, wins), and the run goes on here or on the workers.

use crate::Engine;
use crate::drive::Entry;
use crate::error::EngineError;
use crate::underway::Underway;
use weft_core::event::{EventKind, now_ms};
use weft_core::ir::WAIT_ELAPSED;
use weft_core::ports::{EntryKind, JournalEntry, RunStatus};
use weft_core::value::Value;

impl Engine {
    /// Continues paused run `run_id` if a timer it waits for is due: journals each due
    /// wait's answer (`elapsed`) and drives the run on its own task, or hands it to the
    /// workers (see [`crate::EngineBuilder::continue_on_workers`]). `None` when nothing
    /// is due or another process woke or answered it first. Needs a Tokio runtime.
    pub async fn wake(&self, run_id: &str) -> Result<Option<Underway>, EngineError> {
        let rec = self.load(run_id).await?;
        if rec.status != RunStatus::Paused {
            return Ok(None);
        }
        let now = now_ms() as i64;
        let due: Vec<String> = rec
            .waiting
            .as_ref()
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|w| {
                w.get("wake_ms")
                    .and_then(Value::as_i64)
                    .is_some_and(|t| t <= now)
            })
            .filter_map(|w| Some(w.get("key")?.as_str()?.to_owned()))
            .collect();
        let Some((first, rest)) = due.split_first() else {
            return Ok(None);
        };
        let elapsed = |key: &str| JournalEntry {
            key: key.to_owned(),
            kind: EntryKind::Answer,
            value: serde_json::json!({ "decision": WAIT_ELAPSED }).into(),
        };
        match self
            .take(&rec, vec![RunStatus::Paused], None, Some(elapsed(first)))
            .await
        {
            Ok(()) => {}
            Err(EngineError::Taken(_)) => return Ok(None),
            Err(e) => return Err(e),
        }
        let store = self.store();
        for key in rest {
            if let Err(e) = store.append(&rec.id, elapsed(key)).await {
                store.let_go(&rec.id);
                return Err(e.into());
            }
        }
        let fired = EventKind::TimerFired {
            key: first.to_string(),
        };
        self.go_on(rec, Entry::Answered(fired)).await.map(Some)
    }
}
