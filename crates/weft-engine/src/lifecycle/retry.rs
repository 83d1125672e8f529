//! Retry: a failed or cancelled run runs again from the steps that failed, reusing
//! every journaled result, on its stored flow or on a changed one.

use crate::Engine;
use crate::drive::Entry;
use crate::error::EngineError;
use crate::options::Revision;
use crate::prepared::Prepared;
use crate::underway::Underway;
use std::sync::Arc;
use weft_core::ports::{EntryKind, JournalEntry, RunRecord, RunStatus};

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
        let (rec, prepared, kept) = self.accept_retry(run_id, flow).await?;
        if self.continues_on_workers() {
            return self.hand_over(rec, None).await;
        }
        let id = rec.id.clone();
        let handle =
            self.spawn(|e| async move { e.drive(rec, prepared, kept, Entry::Resumed).await });
        Ok(Underway::here(id, handle))
    }

    /// Checks that run `run_id` may be retried, takes it for this process and forgets
    /// its journaled failures: the run, its flow and the journal it continues from.
    async fn accept_retry(
        &self,
        run_id: &str,
        flow: Option<Revision>,
    ) -> Result<(RunRecord, Arc<Prepared>, Vec<JournalEntry>), EngineError> {
        let mut rec = self.load(run_id).await?;
        if !matches!(rec.status, RunStatus::Failed | RunStatus::Cancelled) {
            return Err(EngineError::Refused(format!(
                "run {} is {}; only failed or cancelled runs are retried",
                rec.id,
                rec.status.as_str()
            )));
        }
        let prepared = match flow {
            Some(Revision {
                flow: p,
                source_hash,
                view,
            }) => {
                self.inner.store.put_flow(&p.hash, &p.ir_json).await?;
                rec.flow_hash = p.hash.clone();
                rec.source_hash = source_hash;
                rec.view = view;
                p
            }
            None => self.stored_flow(&rec).await?,
        };
        self.take(&rec, vec![rec.status], None, None).await?;
        let store = &self.inner.store;
        let journal = store.journal(&rec.id).await?;
        let failed: Vec<String> = journal
            .iter()
            .filter(|e| e.kind == EntryKind::Failure)
            .map(|e| e.key.clone())
            .collect();
        store.forget(&rec.id, &failed).await?;
        // A failed step's other entries go with its failure (the mark that it had
        // started, which would otherwise fail it again as of unknown outcome).
        let kept = journal
            .into_iter()
            .filter(|e| !failed.contains(&e.key))
            .collect();
        rec.error = None;
        rec.retries += 1;
        Ok((rec, prepared, kept))
    }
}
