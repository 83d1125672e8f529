//! Storing a flow's text: the one way every door (the HTTP API, MCP, the command line)
//! stores a flow, so that a flow with a name is the next version of that name whichever
//! door it came through, and LangGraph's clients, schedules and hooks find it by name.

use crate::{Engine, EngineError};
use weft_core::ports::{FlowSource, FlowVersion};

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
}
