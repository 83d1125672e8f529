//! What a caller says about a run it starts, or about the flow a retried run moves to.

use crate::Prepared;
use std::sync::Arc;
use weft_core::Value;

/// How a run is started.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The file the flow came from.
    pub source: Option<String>,
    /// Content hash of that file.
    pub source_hash: Option<String>,
    /// The dialect the file was written in.
    pub dialect: Option<String>,
    /// Use this run id instead of a new one.
    pub run_id: Option<String>,
    /// The session, user and project the run belongs to (handlers read and change their
    /// state in the store).
    pub scopes: weft_core::ports::Scopes,
    /// How the flow's dialect presents the run (stored with it, opaque to the engine).
    pub view: Option<Value>,
    /// The front end's settings the run's effects depend on (stored with it, opaque to
    /// the engine; see [`weft_core::ports::RunRecord::settings`]).
    pub settings: Option<Value>,
    /// The flow's text, stored (once per id) and linked to the run, so that clients can
    /// read and draw the run's flow and start new runs of it by id.
    pub flow_source: Option<weft_core::ports::FlowSource>,
}

/// A changed version of a run's flow to retry the run with: the run keeps the journaled
/// steps whose keys still exist and records the new version.
#[derive(Clone)]
pub struct Revision {
    /// The new flow.
    pub flow: Arc<Prepared>,
    /// Content hash of the file it came from.
    pub source_hash: Option<String>,
    /// How its dialect presents the run (see [`RunOptions::view`]).
    pub view: Option<Value>,
}
