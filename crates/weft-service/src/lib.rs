//! # weft-service
//!
//! The one way every front end (the HTTP API and the doors it speaks for other
//! systems, MCP, triggers, the command line, the library) checks a flow and starts runs
//! of it:
//!
//! - [`Service::check`] loads a flow's text in any dialect and prepares it with the
//!   engine (its models, secrets and expressions), every diagnostic located in the
//!   text: a [`Checked`] flow. [`Service::stored`] and [`Service::saved`] do the same
//!   for a flow the store keeps, by id or by name and version.
//! - [`Service::start`] starts a run of a checked flow: the engine's
//!   [`weft_engine::RunOptions`] are built here only ([`How`] is what a front end may
//!   say about a run), and a run goes on within the server's run limit, or on the
//!   workers when they drive the engine's runs (decided by the engine).
//!
//! A new field of a run is added to [`How`] and to [`How::options`], and to the front
//! end that sets it.
//!
//! It must not depend on a door (HTTP, MCP, the command line) or on any store, model or
//! sandbox adapter: each front end renders the [`FlowError`]s and diagnostics in its own
//! shape.

mod checked;
mod how;
mod saved;
mod slots;

pub use checked::Checked;
pub use how::How;
pub use saved::{FlowError, Saved};
pub use slots::Started;

use std::sync::Arc;
use weft_core::Diagnostic;
use weft_core::ports::{RunRecord, Store};
use weft_dialects::Loaded;
use weft_engine::{Engine, EngineError, Prepared};

/// Checks flows and starts runs of them, over one engine. Cheap to clone.
#[derive(Clone)]
pub struct Service {
    engine: Engine,
    /// Settings stored with each run this front end starts (see `RunRecord::settings`).
    run_settings: Option<serde_json::Value>,
    slots: slots::Slots,
    /// Whether queued runs are left to the workers' claims (see
    /// [`Service::leaving_queued_runs`]).
    queued_left: bool,
}

impl Service {
    /// A service over `engine` that stores `run_settings` with each run it starts, with
    /// no run limit.
    pub fn new(engine: Engine, run_settings: Option<serde_json::Value>) -> Service {
        Service {
            engine,
            run_settings,
            slots: slots::Slots::new(None),
            queued_left: false,
        }
    }

    /// Leaves the runs stored `queued` for [`Service::start_queued`] to the claims of the
    /// workers that share the store, though this service's engine drives runs: for a
    /// worker's own trigger loop, whose runs its claim loop takes like any other.
    pub fn leaving_queued_runs(mut self) -> Service {
        self.queued_left = true;
        self
    }

    /// At most `max_runs` new runs driven at once by this process (`--max-runs`): the
    /// others are stored `queued` and start, oldest first, as running ones end or pause.
    /// Continuations (answer, resume, retry) are not held back, and runs the workers
    /// drive are theirs to limit.
    pub fn with_run_limit(mut self, max_runs: Option<usize>) -> Service {
        self.slots = slots::Slots::new(max_runs);
        self
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The store the engine keeps runs in.
    pub fn store(&self) -> &Arc<dyn Store> {
        self.engine.store()
    }

    /// The settings stored with each run this front end starts.
    pub fn run_settings(&self) -> Option<&serde_json::Value> {
        self.run_settings.as_ref()
    }

    /// Loads `text` (in `dialect`, or the one detection finds) and prepares it; its
    /// problems, located in the text, when it does not load or validate. `shown_as`
    /// names the text in diagnostics (default `flow`). A flow sent as text reads no file
    /// beside it.
    pub fn check(
        &self,
        text: &str,
        dialect: Option<&str>,
        shown_as: Option<&str>,
    ) -> Result<Checked, Vec<Diagnostic>> {
        let loaded = weft_dialects::load_str(text, shown_as.unwrap_or("flow"), None, dialect)
            .map_err(|e| e.diagnostics)?;
        self.prepare(loaded)
    }

    /// Prepares a flow loaded already (from a file, whose directory it may read): what
    /// only the engine knows (its models and secrets) is checked too.
    pub fn prepare(&self, loaded: Loaded) -> Result<Checked, Vec<Diagnostic>> {
        match self.engine.prepare(loaded.flow.clone()) {
            Ok(prepared) => Ok(Checked::new(loaded, prepared)),
            Err(diagnostics) => Err(loaded.locate_all(diagnostics)),
        }
    }

    /// Starts a run of `checked` with `input` (default: the flow's own): driven here
    /// at once or when a slot of the run limit frees, or left to the workers.
    pub async fn start(
        &self,
        checked: &Checked,
        input: Option<serde_json::Value>,
        how: How,
    ) -> Result<Started, EngineError> {
        let opts = how.options(Some(checked), self.run_settings.as_ref());
        self.start_prepared(checked.prepared().clone(), input, opts)
            .await
    }

    /// Starts a run of a flow that has no text (built in a program): as
    /// [`Service::start`].
    pub async fn start_built(
        &self,
        prepared: Arc<Prepared>,
        input: Option<serde_json::Value>,
        how: How,
    ) -> Result<Started, EngineError> {
        let opts = how.options(None, self.run_settings.as_ref());
        self.start_prepared(prepared, input, opts).await
    }

    async fn start_prepared(
        &self,
        prepared: Arc<Prepared>,
        input: Option<serde_json::Value>,
        opts: weft_engine::RunOptions,
    ) -> Result<Started, EngineError> {
        // The engine gives a run without input the flow's own (Engine::new_record).
        self.slots.start(&self.engine, prepared, input, opts).await
    }

    /// A new `queued` run of `checked`, not stored yet: for a trigger that stores it
    /// with its own record, then calls [`Service::start_queued`].
    pub async fn new_record(
        &self,
        checked: &Checked,
        input: serde_json::Value,
        how: How,
    ) -> Result<RunRecord, EngineError> {
        let opts = how.options(Some(checked), self.run_settings.as_ref());
        self.engine
            .new_record(checked.prepared(), Some(input), opts)
            .await
    }

    /// Starts stored `queued` run `run_id` when a slot of the run limit frees; nothing
    /// when the workers drive the engine's runs (a worker claims it).
    pub fn start_queued(&self, run_id: String) -> Option<weft_engine::Underway> {
        if self.queued_left || self.engine.continues_on_workers() {
            return None;
        }
        Some(self.slots.start_when_free(&self.engine, run_id))
    }

    /// Starts the runs a previous process left `queued` (listed newest first, as the
    /// store lists them), oldest first, within the run limit.
    pub fn restart_queued(&self, queued: Vec<RunRecord>) {
        for r in queued.into_iter().rev() {
            drop(self.start_queued(r.id));
        }
    }
}
