//! `--max-runs`: new runs beyond the limit are stored as `queued` and start, oldest
//! first, as running ones end (or pause). Continuations (approve, resume, retry) are
//! not held back. On a store shared with workers, every new run is queued for them.

use std::sync::Arc;
use tokio::sync::Semaphore;
use weft_engine::{Engine, EngineError, Prepared, RunOptions, Underway};

/// A run on its way, and whether it had to queue.
pub struct Started {
    /// Whether it waits, `queued`, for a slot of the run limit or for a worker.
    pub queued: bool,
    /// The run.
    pub underway: Underway,
}

/// Starts new runs within a limit, or at once without one, or leaves them to workers.
#[derive(Clone)]
pub(crate) struct Slots {
    limit: Option<Arc<Semaphore>>,
}

impl Slots {
    pub(crate) fn new(max_runs: Option<usize>) -> Slots {
        Slots {
            limit: max_runs.map(|n| Arc::new(Semaphore::new(n.max(1)))),
        }
    }

    /// Stores a new run and starts it now if a slot is free, else when one frees; or,
    /// when workers drive the engine's runs, queues it for them.
    pub(crate) async fn start(
        &self,
        engine: &Engine,
        prepared: Arc<Prepared>,
        input: Option<serde_json::Value>,
        opts: RunOptions,
    ) -> Result<Started, EngineError> {
        let limit = match &self.limit {
            Some(limit) if !engine.continues_on_workers() => limit,
            _ => {
                let underway = engine.start(prepared, input, opts).await?;
                return Ok(Started {
                    queued: !underway.is_here(),
                    underway,
                });
            }
        };
        if let Ok(permit) = limit.clone().try_acquire_owned() {
            let underway = engine.start(prepared, input, opts).await?;
            return Ok(Started {
                queued: false,
                underway: underway.holding(permit),
            });
        }
        let run_id = engine.enqueue(&prepared, input, opts).await?;
        let underway = self.start_when_free(engine, run_id);
        Ok(Started {
            queued: true,
            underway,
        })
    }

    /// Waits for a slot, then takes queued run `run_id` and drives it in that slot.
    pub(crate) fn start_when_free(&self, engine: &Engine, run_id: String) -> Underway {
        let (engine, limit) = (engine.clone(), self.limit.clone());
        let id = run_id.clone();
        let end = tokio::spawn(async move {
            let permit = match limit {
                Some(l) => Some(
                    l.acquire_owned()
                        .await
                        .map_err(|_| EngineError::Refused("the server is shutting down".into()))?,
                ),
                None => None,
            };
            engine.start_queued(&id).await?.holding(permit).end().await
        });
        Underway::here(run_id, end)
    }
}
