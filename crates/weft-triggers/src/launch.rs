//! Starting a run of a stored, named flow on behalf of a trigger: the flow's version is
//! loaded and checked as it is now, and the run is made `queued`, for the trigger to
//! store together with its own record, then started here or left to the workers.

use std::sync::Arc;
use weft_core::ports::{RunRecord, Store};
use weft_engine::Engine;
use weft_service::{FlowError, How, Service};

/// Makes and starts the runs of triggers, through the service every front end uses (its
/// run limit included).
#[derive(Clone)]
pub struct Launcher {
    service: Service,
}

/// Why a trigger's run could not be made.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The flow or version is not stored, or no longer loads and validates: the
    /// trigger records the failure and goes on.
    #[error("{0}")]
    Flow(String),
    /// The store failed: the trigger tries again later.
    #[error("{0}")]
    Store(String),
}

impl Launcher {
    /// A launcher whose runs start through `service`: on tasks of this process within
    /// its run limit, or left to the workers when they drive its engine's runs.
    pub fn new(service: Service) -> Launcher {
        Launcher { service }
    }

    /// The engine that drives (or queues) the runs.
    pub fn engine(&self) -> &Engine {
        self.service.engine()
    }

    /// The store the engine keeps runs in.
    pub fn store(&self) -> &Arc<dyn Store> {
        self.service.store()
    }

    /// A new `queued` run of version `version` (latest when `None`) of the stored flow
    /// `name`, with `input`: not stored yet.
    pub async fn new_run(
        &self,
        name: &str,
        version: Option<u32>,
        input: serde_json::Value,
    ) -> Result<RunRecord, LaunchError> {
        let saved = self
            .service
            .saved(name, version)
            .await
            .map_err(|e| flow_error(name, e))?;
        self.service
            .new_record(&saved.checked, input, How::default())
            .await
            .map_err(|e| LaunchError::Store(e.to_string()))
    }

    /// Starts stored queued run `run_id` (when a slot frees; a worker takes it when
    /// workers drive the runs).
    pub fn start(&self, run_id: String) {
        drop(self.service.start_queued(run_id));
    }
}

/// `e` as a trigger reports it about flow `name`.
fn flow_error(name: &str, e: FlowError) -> LaunchError {
    match e {
        FlowError::Store(e) => LaunchError::Store(e.to_string()),
        FlowError::NoSuchName { .. } => LaunchError::Flow(format!(
            "{e}; save one with `weft schedules add FILE` or the save_flow tool"
        )),
        FlowError::Invalid(diagnostics) => {
            let shown: Vec<String> = diagnostics.iter().map(|d| d.render(name)).collect();
            LaunchError::Flow(format!(
                "flow `{name}` is not valid now: {}",
                shown.join("; ")
            ))
        }
        e => LaunchError::Flow(e.to_string()),
    }
}
