//! Cancel: a run that has not ended is marked cancelled; the process driving it
//! notices and stops.

use crate::Engine;
use crate::error::EngineError;
use crate::events::now_ms;
use weft_core::ports::{RunRecord, RunStatus};

impl Engine {
    /// Marks a run cancelled. A process executing it notices within a second and stops.
    pub async fn cancel(&self, run_id: &str) -> Result<RunRecord, EngineError> {
        let mut rec = self.load(run_id).await?;
        if !matches!(
            rec.status,
            RunStatus::Queued | RunStatus::Running | RunStatus::Paused
        ) {
            return Err(EngineError::Refused(format!(
                "run {} is already {}",
                rec.id,
                rec.status.as_str()
            )));
        }
        rec.status = RunStatus::Cancelled;
        rec.waiting = None;
        rec.updated_ms = now_ms() as i64;
        self.inner.store.update_run(&rec).await?;
        Ok(rec)
    }
}
