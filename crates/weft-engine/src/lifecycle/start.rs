//! Start: a new run of a prepared flow is stored, then driven here or left to the
//! workers; or stored `queued` for a server's run limit or a trigger to start later.

use crate::Engine;
use crate::drive::Entry;
use crate::error::EngineError;
use crate::events::now_ms;
use crate::options::RunOptions;
use crate::prepared::Prepared;
use crate::underway::Underway;
use std::sync::Arc;
use weft_core::Value;
use weft_core::ports::{RunRecord, RunStatus};

impl Engine {
    /// Starts a new run of `prepared` with `input` (default: the flow's own `input`).
    /// The run is stored before this returns (its id is known, and it survives a crash,
    /// to be resumed); then a task of this process drives it, or, for an engine whose
    /// runs the workers drive ([`crate::EngineBuilder::continue_on_workers`]), it is
    /// stored `queued` for them. Needs a Tokio runtime.
    pub async fn start(
        &self,
        prepared: Arc<Prepared>,
        input: Option<Value>,
        opts: RunOptions,
    ) -> Result<Underway, EngineError> {
        let on_workers = self.continues_on_workers();
        let rec = self.create(&prepared, input, opts, on_workers).await?;
        if on_workers {
            return Ok(Underway::on_workers(rec.id, self.clone()));
        }
        let id = rec.id.clone();
        let handle =
            self.spawn(|e| async move { e.drive(rec, prepared, Vec::new(), Entry::New).await });
        Ok(Underway::here(id, handle))
    }

    /// Stores a new run of `prepared` as `queued`, owned by no process: it waits for
    /// [`Engine::start_queued`] (a server's run limit), and survives a restart meanwhile.
    pub async fn enqueue(
        &self,
        prepared: &Prepared,
        input: Option<Value>,
        opts: RunOptions,
    ) -> Result<String, EngineError> {
        Ok(self.create(prepared, input, opts, true).await?.id)
    }

    /// Takes a queued run for this process (the first taker wins) and drives it on its
    /// own task from its start. Needs a Tokio runtime.
    pub async fn start_queued(&self, run_id: &str) -> Result<Underway, EngineError> {
        let rec = self.load(run_id).await?;
        if rec.status != RunStatus::Queued {
            return Err(EngineError::Refused(format!(
                "run {} is {}, not queued",
                rec.id,
                rec.status.as_str()
            )));
        }
        self.take(&rec, vec![RunStatus::Queued], None, None).await?;
        let prepared = self.stored_flow(&rec).await?;
        let id = rec.id.clone();
        let handle =
            self.spawn(|e| async move { e.drive(rec, prepared, Vec::new(), Entry::New).await });
        Ok(Underway::here(id, handle))
    }

    /// Stores the flow and a new run of it: `running` and owned by this process, or
    /// `queued` and owned by none.
    async fn create(
        &self,
        prepared: &Prepared,
        input: Option<Value>,
        opts: RunOptions,
        queued: bool,
    ) -> Result<RunRecord, EngineError> {
        let mut rec = self.new_record(prepared, input, opts).await?;
        if !queued {
            rec.status = RunStatus::Running;
            rec.owner = Some(self.inner.owner.clone());
        }
        self.inner.store.create_run(&rec).await?;
        Ok(rec)
    }

    /// Stores the flow (and its text) and returns a new `queued` run of it, owned by no
    /// process, which is not stored yet: for a caller that stores it together with
    /// something else (a schedule's firing), then starts it with
    /// [`Engine::start_queued`] or leaves it to the workers.
    pub async fn new_record(
        &self,
        prepared: &Prepared,
        input: Option<Value>,
        opts: RunOptions,
    ) -> Result<RunRecord, EngineError> {
        let store = &self.inner.store;
        if !self.inner.has_stored(&prepared.hash) {
            store.put_flow(&prepared.hash, &prepared.ir_json).await?;
            self.inner.remember_stored(&prepared.hash);
        }
        if let Some(source) = &opts.flow_source
            && !self.inner.has_stored(&source.id)
        {
            store.put_source(source).await?;
            self.inner.remember_stored(&source.id);
        }
        let input = input
            .or_else(|| prepared.flow.input.clone())
            .unwrap_or_else(|| Value::Object(Default::default()));
        let mut rec = RunRecord::new(
            opts.run_id.unwrap_or_else(new_run_id),
            prepared.hash.clone(),
            prepared.flow.name.clone(),
            input,
            now_ms() as i64,
        );
        rec.source = opts.source;
        rec.source_hash = opts.source_hash;
        rec.dialect = opts.dialect;
        rec.scopes = opts.scopes;
        rec.view = opts.view;
        rec.settings = opts.settings;
        rec.flow_id = opts.flow_source.map(|s| s.id);
        rec.status = RunStatus::Queued;
        Ok(rec)
    }
}

fn new_run_id() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}
