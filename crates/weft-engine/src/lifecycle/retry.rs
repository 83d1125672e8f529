//! Retry: a failed or cancelled run runs again from the steps that failed, reusing
//! every journaled result, on its stored flow or on a changed one.

use crate::Engine;
use crate::drive::Entry;
use crate::error::EngineError;
use crate::options::Revision;
use crate::underway::Underway;
use weft_core::ports::{EntryKind, RunRecord, RunStatus};

impl Engine {
    /// Runs a failed run again from the steps that failed, reusing every journaled
    /// result, on its own task or on the workers (see
    /// [`crate::EngineBuilder::continue_on_workers`]) once this process has taken it. With
    /// `flow`, runs that flow instead of the stored one (the caller decides whether a
    /// changed flow is acceptable). Needs a Tokio runtime.
    pub async fn retry(
        &self,
        run_id: &str,
        flow: Option<Revision>,
    ) -> Result<Underway, EngineError> {
        let rec = self.accept_retry(run_id, flow).await?;
        self.go_on(rec, Entry::Resumed).await
    }

    /// Checks that run `run_id` may be retried (its flow loads: the stored one, or
    /// `flow`, stored now), takes it for this process and forgets its journaled failures
    /// (with the other entries of the steps that failed: the mark that one had started
    /// would fail it again as of unknown outcome).
    async fn accept_retry(
        &self,
        run_id: &str,
        flow: Option<Revision>,
    ) -> Result<RunRecord, EngineError> {
        let mut rec = self.load(run_id).await?;
        if !matches!(rec.status, RunStatus::Failed | RunStatus::Cancelled) {
            return Err(EngineError::Refused(format!(
                "run {} is {}; only failed or cancelled runs are retried",
                rec.id,
                rec.status.as_str()
            )));
        }
        match flow {
            Some(Revision {
                flow: p,
                source_hash,
                view,
            }) => {
                self.inner.store.put_flow(&p.hash, &p.ir_json).await?;
                rec.flow_hash = p.hash.clone();
                rec.source_hash = source_hash;
                rec.view = view;
            }
            None => drop(self.stored_flow(&rec).await?),
        }
        self.take(&rec, vec![rec.status], None, None).await?;
        let store = &self.inner.store;
        let failed: Vec<String> = store
            .journal(&rec.id)
            .await?
            .into_iter()
            .filter(|e| e.kind == EntryKind::Failure)
            .map(|e| e.key)
            .collect();
        store.forget(&rec.id, &failed).await?;
        rec.error = None;
        rec.retries += 1;
        Ok(rec)
    }
}
