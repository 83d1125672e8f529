//! The transitions of a run's life, one file each (after restate's
//! `state_machine/lifecycle/`): [`start`](start.rs), [`resume`](resume.rs),
//! [`answer`](answer.rs), [`retry`](retry.rs), [`cancel`](cancel.rs), [`wake`](wake.rs),
//! and the run a worker [claimed](claimed.rs).
//!
//! Each transition first checks the run may take it and takes the run for this process
//! in one store step ([`Engine::take`]: the first taker wins, and an answer is journaled
//! in that same step); a refusal comes back to the caller at once. The run then goes on
//! as an [`Underway`]: on a task of this process, or on the workers that share the
//! store (see [`crate::EngineBuilder::continue_on_workers`]), decided here once for
//! every transition ([`Engine::go_on`]).

mod answer;
mod cancel;
mod claimed;
mod resume;
mod retry;
mod start;
mod wake;

use crate::Engine;
use crate::drive::Entry;
use crate::error::{EngineError, taken_message};
use crate::events::now_ms;
use crate::run_result::{RunHandle, RunResult};
use crate::underway::Underway;
use weft_core::ports::{Claim, Claimed, EntryKind, JournalEntry, RunRecord, RunStatus};

impl Engine {
    /// Run `run_id` as stored.
    pub(crate) async fn load(&self, run_id: &str) -> Result<RunRecord, EngineError> {
        self.inner
            .store
            .get_run(run_id)
            .await?
            .ok_or_else(|| EngineError::NotFound(run_id.to_owned()))
    }

    /// Takes `rec` for this process if it is still in one of the statuses `from` (and
    /// has the owner `owner_was`, when given), appending `entry` in the same step.
    pub(crate) async fn take(
        &self,
        rec: &RunRecord,
        from: Vec<RunStatus>,
        owner_was: Option<Option<String>>,
        entry: Option<JournalEntry>,
    ) -> Result<(), EngineError> {
        let claim = Claim {
            run_id: rec.id.clone(),
            from,
            owner_was,
            owner: self.inner.owner.clone(),
            now_ms: now_ms() as i64,
            entry,
        };
        match self.inner.store.claim_run(claim).await? {
            Claimed::Taken => Ok(()),
            Claimed::Lost(now) => {
                let answer = self.last_answer(&now.id).await;
                Err(EngineError::Taken(taken_message(&now, answer.as_deref())))
            }
        }
    }

    /// The decision of the last answer journaled for run `id`, if any.
    pub(crate) async fn last_answer(&self, id: &str) -> Option<String> {
        let journal = self.inner.store.journal(id).await.unwrap_or_default();
        journal
            .iter()
            .rev()
            .find(|e| e.kind == EntryKind::Answer)
            .and_then(|e| {
                e.value
                    .get("decision")?
                    .as_json()?
                    .as_str()
                    .map(str::to_owned)
            })
    }

    /// Continues run `rec`, which this process has taken, from its journal: on its own
    /// task, or handed to the workers (announcing `entry`'s answer first) when they
    /// drive this engine's runs.
    pub(crate) async fn go_on(
        &self,
        rec: RunRecord,
        entry: Entry,
    ) -> Result<Underway, EngineError> {
        if self.continues_on_workers() {
            let announce = match entry {
                Entry::Answered(answered) => Some(answered),
                Entry::New | Entry::Resumed => None,
            };
            return self.hand_over(rec, announce).await;
        }
        let id = rec.id.clone();
        let handle = self.spawn(|e| async move { e.continue_run(rec, entry).await });
        Ok(Underway::here(id, handle))
    }

    /// Runs `drive` with a clone of this engine on its own task.
    pub(crate) fn spawn<F>(&self, drive: impl FnOnce(Engine) -> F) -> RunHandle
    where
        F: std::future::Future<Output = Result<RunResult, EngineError>> + Send + 'static,
    {
        tokio::spawn(drive(self.clone()))
    }
}
