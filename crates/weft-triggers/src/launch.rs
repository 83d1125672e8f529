//! Starting a run of a stored, named flow on behalf of a trigger: the flow's version is
//! loaded and checked as it is now, and the run is made `queued`, for the trigger to
//! store together with its own record, then started here or left to the workers.

use std::sync::Arc;
use weft_core::ports::{RunRecord, Store};
use weft_engine::{Engine, RunOptions};

/// Starts runs a trigger has stored `queued`: drives them in this process (within the
/// server's limits) or leaves them to the workers of a shared store.
pub type StartQueued = Arc<dyn Fn(&Engine, String) + Send + Sync>;

/// Makes and starts the runs of triggers.
#[derive(Clone)]
pub struct Launcher {
    /// The engine that drives (or queues) the runs.
    pub engine: Engine,
    /// The settings stored with every run (see `RunRecord::settings`).
    pub run_settings: Option<serde_json::Value>,
    /// How a stored queued run gets going.
    pub start: StartQueued,
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
    /// A launcher whose runs start on their own tasks in this process, or are left to
    /// the workers when they drive `engine`'s runs
    /// ([`Engine::continues_on_workers`]); with no run limit of a server's.
    pub fn here_or_on_workers(engine: Engine, run_settings: Option<serde_json::Value>) -> Launcher {
        let start: StartQueued = if engine.continues_on_workers() {
            Arc::new(|_: &Engine, _: String| {})
        } else {
            Arc::new(|engine: &Engine, id: String| {
                let engine = engine.clone();
                tokio::spawn(async move { engine.start_queued(&id).await.map(drop) });
            })
        };
        Launcher {
            engine,
            run_settings,
            start,
        }
    }

    /// The store the engine keeps runs in.
    pub fn store(&self) -> &Arc<dyn Store> {
        self.engine.store()
    }

    /// A new `queued` run of version `version` (latest when `None`) of the stored flow
    /// `name`, with `input`: not stored yet.
    pub async fn new_run(
        &self,
        name: &str,
        version: Option<u32>,
        input: serde_json::Value,
    ) -> Result<RunRecord, LaunchError> {
        let store = self.store();
        let store_err = |e: weft_core::ports::StoreError| LaunchError::Store(e.to_string());
        let found = store
            .flow_version(name, version)
            .await
            .map_err(store_err)?
            .ok_or_else(|| {
                let which = version.map_or("any version".to_owned(), |v| format!("version {v}"));
                LaunchError::Flow(format!(
                    "no stored flow `{name}` ({which}); save one with `weft schedules add FILE` or the save_flow tool"
                ))
            })?;
        let source = store
            .get_source(&found.flow_id)
            .await
            .map_err(store_err)?
            .ok_or_else(|| {
                LaunchError::Flow(format!(
                    "the text of flow `{name}` version {} is missing",
                    found.version
                ))
            })?;
        let loaded =
            weft_dialects::load_str(&source.text, &source.name, None, Some(&source.dialect))
                .map_err(|e| LaunchError::Flow(format!("flow `{name}` does not load now: {e}")))?;
        let prepared = self.engine.prepare(loaded.flow.clone()).map_err(|d| {
            let shown: Vec<String> = loaded
                .locate_all(d)
                .iter()
                .map(|d| d.render(name))
                .collect();
            LaunchError::Flow(format!(
                "flow `{name}` is not valid now: {}",
                shown.join("; ")
            ))
        })?;
        let opts = RunOptions {
            source_hash: Some(loaded.source_hash.clone()),
            dialect: Some(loaded.dialect.to_owned()),
            view: loaded.events.to_stored(),
            settings: self.run_settings.clone(),
            flow_source: Some(source),
            ..RunOptions::default()
        };
        self.engine
            .new_record(&prepared, Some(input), opts)
            .await
            .map_err(|e| LaunchError::Store(e.to_string()))
    }

    /// Starts stored queued run `run_id`.
    pub fn start(&self, run_id: String) {
        (self.start)(&self.engine, run_id)
    }
}
