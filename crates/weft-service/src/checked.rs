//! A flow whose text loads and validates, ready to run.

use std::sync::Arc;
use weft_core::diagram::Diagram;
use weft_core::ports::FlowSource;
use weft_core::{Diagnostic, Flow};
use weft_dialects::Loaded;
use weft_engine::Prepared;

/// A flow's text that loads and validates: what it was loaded as, and prepared to run.
pub struct Checked {
    loaded: Loaded,
    prepared: Arc<Prepared>,
}

impl Checked {
    pub(crate) fn new(loaded: Loaded, prepared: Arc<Prepared>) -> Checked {
        Checked { loaded, prepared }
    }

    /// The flow as loaded from its text: its dialect, source map and event view.
    pub fn loaded(&self) -> &Loaded {
        &self.loaded
    }

    /// The flow prepared to run.
    pub fn prepared(&self) -> &Arc<Prepared> {
        &self.prepared
    }

    /// The compiled flow.
    pub fn flow(&self) -> &Flow {
        self.prepared.flow()
    }

    /// The dialect the text is written in.
    pub fn dialect(&self) -> &'static str {
        self.loaded.dialect
    }

    /// What loading found that does not stop the flow.
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.loaded.warnings
    }

    /// The flow's text as a store keeps it (named as the flow names itself).
    pub fn source(&self) -> FlowSource {
        self.loaded.flow_source()
    }

    /// This flow as the new version a failed run is retried with.
    pub fn revision(&self) -> weft_engine::Revision {
        weft_engine::Revision {
            flow: self.prepared.clone(),
            source_hash: Some(self.loaded.source_hash.clone()),
            view: self.loaded.events.to_stored(),
        }
    }

    /// The flow drawn as nodes and edges.
    pub fn diagram(&self) -> Diagram {
        Diagram::of(self.prepared.flow())
    }
}
