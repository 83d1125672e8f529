//! Resume: a paused run, or a running one whose process died, continues from its
//! journal.

use crate::Engine;
use crate::drive::Entry;
use crate::error::EngineError;
use crate::liveness::driver_alive;
use crate::underway::Underway;
use weft_core::ports::{RunRecord, RunStatus};

impl Engine {
    /// Continues a paused run, or a run whose process died, from its journal: on its own
    /// task, or on the workers (see [`crate::EngineBuilder::continue_on_workers`]), once
    /// this process has taken it. A refusal comes back here, the run's end through what
    /// is returned. `force` takes a running run whose process this one cannot tell is
    /// gone. Needs a Tokio runtime.
    pub async fn resume(&self, run_id: &str, force: bool) -> Result<Underway, EngineError> {
        let rec = self.accept_resume(run_id, force).await?;
        self.go_on(rec, Entry::Resumed).await
    }

    /// Checks that run `run_id` may resume and takes it for this process.
    async fn accept_resume(&self, run_id: &str, force: bool) -> Result<RunRecord, EngineError> {
        let rec = self.load(run_id).await?;
        match rec.status {
            RunStatus::Paused => {}
            RunStatus::Running => {
                if driver_alive(&rec) && !force {
                    let by = rec.owner.as_deref().unwrap_or("another process");
                    return Err(EngineError::Refused(format!(
                        "run {} is still running in {by}; resume it only if that process is gone (--force)",
                        rec.id
                    )));
                }
            }
            s => {
                return Err(EngineError::Refused(format!(
                    "run {} is {}; only paused or interrupted runs resume{}",
                    rec.id,
                    s.as_str(),
                    if s == RunStatus::Failed {
                        " (retry a failed run with `weft runs retry`)"
                    } else {
                        ""
                    }
                )));
            }
        }
        let owner_was = Some(rec.owner.clone());
        self.take(&rec, vec![rec.status], owner_was, None).await?;
        Ok(rec)
    }
}
