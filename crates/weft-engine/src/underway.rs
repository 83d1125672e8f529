//! Where a started or continued run goes on: on a task of this process, or on a worker
//! of a store that many processes share, for an engine built with
//! [`EngineBuilder::continue_on_workers`](crate::EngineBuilder::continue_on_workers).
//!
//! Handing a run over keeps the guarantees of taking it: the answer, resume or retry is
//! accepted (and journaled) under this process's claim, exactly as when this process
//! drives the run; then the run is written `queued`, owned by nobody, which releases the
//! claim and wakes the workers. A process that dies between the two holds a lease that
//! lapses, and a worker takes the run over from its journal, answer included.

use crate::Engine;
use crate::error::EngineError;
use crate::events::{Emitter, now_ms};
use crate::run_result::{RunHandle, RunResult};
use std::sync::Arc;
use std::time::Duration;
use weft_core::event::EventKind;
use weft_core::ports::{RunRecord, RunStatus};

/// A run on its way after a start, an answer, a resume or a retry.
pub struct Underway {
    run_id: String,
    on: On,
}

enum On {
    /// A task of this process drives it.
    Here(RunHandle),
    /// A worker that shares the store drives it; this engine reads where it stands.
    Workers(Engine),
}

impl Underway {
    /// Run `run_id`, driven by this process on the task behind `handle`.
    pub fn here(run_id: String, handle: RunHandle) -> Underway {
        Underway {
            run_id,
            on: On::Here(handle),
        }
    }

    pub(crate) fn on_workers(run_id: String, engine: Engine) -> Underway {
        Underway {
            run_id,
            on: On::Workers(engine),
        }
    }

    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Whether this process drives the run (else a worker does, and it waits `queued`
    /// until one takes it).
    pub fn is_here(&self) -> bool {
        matches!(self.on, On::Here(_))
    }

    /// This run, holding `guard` (a server's run slot) until its drive in this process
    /// ends or pauses; a run a worker drives holds nothing here, and drops it at once.
    pub fn holding<G: Send + 'static>(self, guard: G) -> Underway {
        match self.on {
            On::Here(handle) => Underway::here(
                self.run_id,
                tokio::spawn(async move {
                    let _guard = guard;
                    joined(handle.await)
                }),
            ),
            on => Underway {
                run_id: self.run_id,
                on,
            },
        }
    }

    /// The run's result if it ends or pauses within `wait`, else `None` (it goes on
    /// either way). A run a worker drives is followed through the store meanwhile.
    pub async fn within(self, wait: Duration) -> Option<Result<RunResult, EngineError>> {
        match self.on {
            // Timing out drops the handle, which leaves the drive going.
            On::Here(handle) => tokio::time::timeout(wait, handle).await.ok().map(joined),
            On::Workers(engine) => {
                let follower = engine.follow_elsewhere(self.run_id);
                let stop = follower.abort_handle();
                let outcome = tokio::time::timeout(wait, follower).await;
                // A follower polls the store: one nobody waits for must not go on.
                stop.abort();
                outcome.ok().map(joined)
            }
        }
    }

    /// Stops this process's drive of the run where it is, writing nothing, as if the
    /// process had died: the run stays held by this process until it is resumed (or its
    /// lease lapses). A run a worker drives goes on, and so does one [`Underway::holding`]
    /// a guard (only the wait for it stops).
    pub async fn abort(self) {
        if let On::Here(handle) = self.on {
            handle.abort();
            let _ = handle.await;
        }
    }

    /// Waits until the run ends or pauses.
    pub async fn end(self) -> Result<RunResult, EngineError> {
        let handle = match self.on {
            On::Here(handle) => handle,
            On::Workers(engine) => engine.follow_elsewhere(self.run_id),
        };
        joined(handle.await)
    }
}

impl std::fmt::Debug for Underway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let on = if self.is_here() { "here" } else { "workers" };
        f.debug_struct("Underway")
            .field("run_id", &self.run_id)
            .field("on", &on)
            .finish()
    }
}

fn joined(
    joined: Result<Result<RunResult, EngineError>, tokio::task::JoinError>,
) -> Result<RunResult, EngineError> {
    joined.unwrap_or_else(|e| Err(EngineError::Refused(format!("the run's task stopped: {e}"))))
}

impl Engine {
    /// Whether the runs this engine submits or continues are driven by the workers that
    /// share its store (see [`crate::EngineBuilder::continue_on_workers`]).
    pub fn continues_on_workers(&self) -> bool {
        self.inner.on_workers
    }

    /// Gives run `rec`, which this process has taken and accepted an answer, resume or
    /// retry for, to the workers: announces `announce` (an approval's answer) in the
    /// run's log first, then writes the run `queued` for any worker to take.
    pub(crate) async fn hand_over(
        &self,
        mut rec: RunRecord,
        announce: Option<EventKind>,
    ) -> Result<Underway, EngineError> {
        let store = &self.inner.store;
        let handed = async {
            if let Some(kind) = announce {
                let first_seq = store.next_event_seq(&rec.id).await?;
                let emitter = Emitter::new(
                    Arc::from(rec.id.as_str()),
                    self.inner.run_sinks(),
                    first_seq,
                );
                emitter.emit(|| kind);
                self.inner.flush_events().await;
            }
            rec.status = RunStatus::Queued;
            rec.owner = None;
            rec.waiting = None;
            rec.updated_ms = now_ms() as i64;
            store.update_run(&rec).await
        };
        if let Err(e) = handed.await {
            // Held and not handed over: let the lease lapse, so a worker takes the run
            // over from its journal rather than nobody driving it.
            store.let_go(&rec.id);
            return Err(e.into());
        }
        Ok(Underway::on_workers(rec.id, self.clone()))
    }
}
