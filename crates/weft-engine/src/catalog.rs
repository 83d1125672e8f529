//! Flows in the store: storing a flow's text, the one way every door (the HTTP API,
//! MCP, the command line) stores a flow, so that a flow with a name is the next version
//! of that name whichever door it came through, and LangGraph's clients, schedules and
//! hooks find it by name; and reading back the flow a run was started with.

use crate::{Engine, EngineError, Prepared};
use std::sync::Arc;
use weft_core::Flow;
use weft_core::ports::{FlowSource, FlowVersion, RunRecord};

impl Engine {
    /// Stores `source` (by its content id; storing it again changes nothing) and, when
    /// `name` is not empty, saves it as the next version of the flow called `name`
    /// (unless it is that name's latest version already). The version, when one was
    /// saved.
    pub async fn save_flow(
        &self,
        source: &FlowSource,
        name: &str,
    ) -> Result<Option<FlowVersion>, EngineError> {
        let store = self.store();
        store.put_source(source).await?;
        if name.is_empty() {
            return Ok(None);
        }
        let now = weft_core::event::now_ms() as i64;
        Ok(Some(store.save_version(name, &source.id, now).await?))
    }

    /// Loads the flow a run was started with.
    pub async fn stored_flow(&self, rec: &RunRecord) -> Result<Arc<Prepared>, EngineError> {
        self.flow_of_run(&rec.id, &rec.flow_hash).await
    }

    /// Loads the flow stored under `flow_hash`, which run `run_id` was started with (for
    /// a caller that holds the run's detail rather than its record).
    pub async fn flow_of_run(
        &self,
        run_id: &str,
        flow_hash: &str,
    ) -> Result<Arc<Prepared>, EngineError> {
        if let Some(prepared) = self.inner.prepared_flow(flow_hash) {
            return Ok(prepared);
        }
        let json = self.inner.store.get_flow(flow_hash).await?.ok_or_else(|| {
            EngineError::Refused(format!(
                "the flow of run {run_id} is missing from the store"
            ))
        })?;
        let flow: Flow = serde_json::from_str(&json).map_err(|e| {
            EngineError::Refused(format!(
                "the stored flow of run {run_id} is unreadable: {e}"
            ))
        })?;
        let prepared = self.prepare(flow).map_err(EngineError::Invalid)?;
        // Only a flow whose hash is its stored text's: a stored flow is never changed.
        if prepared.hash == flow_hash {
            self.inner.remember_prepared(flow_hash, &prepared);
        }
        Ok(prepared)
    }
}
