//! A run a worker claimed from a shared store: a queued one starts, a running one
//! whose process died or lost it continues from its journal; and a run another process
//! drives, followed until it ends.

use crate::Engine;
use crate::drive::Entry;
use crate::error::EngineError;
use crate::events::now_ms;
use crate::run_result::{RunHandle, RunResult};
use crate::underway::Underway;
use std::time::Duration;
use weft_core::ports::{RunRecord, RunStatus};
use weft_core::{BlockError, ErrorKind, Value};

impl Engine {
    /// Drives, on its own task, a run a worker of this process has claimed from a shared
    /// store ([`weft_core::ports::WorkQueue::claim_ready`]); `rec` is the run as it was
    /// before the claim. A run whose stored flow is missing or invalid fails, so that it
    /// does not stay claimed; one the store could not read right now is let go, for a
    /// worker to take again.
    pub async fn continue_claimed(&self, mut rec: RunRecord) -> Result<Underway, EngineError> {
        let store = &self.inner.store;
        let loaded = match self.stored_flow(&rec).await {
            // A queued run with an empty journal may still have been run before (a
            // retry that forgot every failure, a resume before any step): its log says
            // which, read at the same time.
            Ok(prepared) => tokio::try_join!(store.journal(&rec.id), store.next_event_seq(&rec.id))
                .map(|(j, seq)| (prepared, j, seq))
                .map_err(EngineError::from),
            Err(e) => Err(e),
        };
        let (prepared, journal, next_seq) = match loaded {
            Ok(loaded) => loaded,
            // A passing store fault: another worker (or this one) takes the run again.
            Err(e @ EngineError::Store(_)) => {
                store.let_go(&rec.id);
                return Err(e);
            }
            Err(e) => return Err(self.fail_unloadable(rec, e).await),
        };
        let new = rec.status == RunStatus::Queued && journal.is_empty() && next_seq == 0;
        let entry = if new { Entry::New } else { Entry::Resumed };
        rec.status = RunStatus::Running;
        rec.owner = Some(self.inner.owner.clone());
        let id = rec.id.clone();
        let handle = self.spawn(|e| async move { e.drive(rec, prepared, journal, entry).await });
        Ok(Underway::here(id, handle))
    }

    /// Fails claimed run `rec`, whose flow cannot be loaded (`why`), and returns the
    /// error to report.
    async fn fail_unloadable(&self, mut rec: RunRecord, why: EngineError) -> EngineError {
        rec.status = RunStatus::Failed;
        rec.owner = None;
        rec.updated_ms = now_ms() as i64;
        let error = BlockError::new(ErrorKind::Store, why.to_string());
        rec.error = Some(serde_json::to_value(&error).unwrap_or(Value::Null));
        if let Err(failed) = self.inner.store.update_run(&rec).await {
            self.inner.store.let_go(&rec.id);
            return failed.into();
        }
        why
    }

    /// Follows run `run_id`, which another process drives (a worker of a shared store),
    /// on its own task, until it ends or pauses, reading its record every 50 ms.
    pub fn follow_elsewhere(&self, run_id: String) -> RunHandle {
        let store = self.inner.store.clone();
        tokio::spawn(async move {
            loop {
                match store.get_run(&run_id).await? {
                    None => return Err(EngineError::NotFound(run_id)),
                    Some(r) if matches!(r.status, RunStatus::Queued | RunStatus::Running) => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    Some(r) => return Ok(RunResult::of_record(r)),
                }
            }
        })
    }
}
