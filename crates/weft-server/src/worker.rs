//! The worker loop (`weft worker`, `weft serve --role worker|all`): takes runs that wait
//! for a worker from a store many processes share, up to a number at once, and drives
//! them with this process's engine.
//!
//! It claims when it has room, as many runs as it has room for; it waits for a
//! notification that work is ready, for one of its runs to end, or for a jittered poll
//! (the fallback when notifications are lost, and how lapsed leases are noticed).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use weft_core::ports::WorkQueue;
use weft_engine::Engine;

/// How a worker takes work.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Runs driven at once.
    pub concurrency: usize,
    /// The mean time between polls when nothing wakes the worker (each poll waits
    /// between half and one and a half of it, so that workers started together spread).
    pub poll: Duration,
    /// Also fire schedules and wake runs whose wait came due (`weft worker`; a server
    /// that is a worker too does this once for both).
    pub triggers: bool,
    /// The settings stored with the runs its schedules start.
    pub run_settings: Option<serde_json::Value>,
}

impl Default for WorkerConfig {
    fn default() -> WorkerConfig {
        WorkerConfig {
            concurrency: 16,
            poll: Duration::from_secs(1),
            triggers: true,
            run_settings: None,
        }
    }
}

/// Drives the runs of `queue` with `engine` until `shutdown` completes. Runs it drives
/// then are left: their leases lapse and other workers take them over.
pub async fn work(
    engine: Engine,
    queue: Arc<dyn WorkQueue>,
    config: WorkerConfig,
    shutdown: impl Future<Output = ()>,
) {
    let concurrency = config.concurrency.max(1);
    let mut driving: JoinSet<()> = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    // Dropped when this returns: the trigger loops stop with the worker.
    let (_stop, stopped) = tokio::sync::watch::channel(());
    if config.triggers {
        // The runs its schedules store `queued` are claimed like any other.
        let service = weft_service::Service::new(engine.clone(), config.run_settings.clone());
        let launcher = weft_triggers::Launcher::new(service.leaving_queued_runs());
        crate::serve_triggers(launcher, Arc::default(), stopped);
    }
    loop {
        let room = concurrency.saturating_sub(driving.len());
        let claimed = claim(&engine, &*queue, room, &mut driving).await;
        // A full claim may have left more behind: claim again once there is room.
        if claimed > 0 && claimed == room && driving.len() < concurrency {
            continue;
        }
        let poll = jittered(config.poll);
        tokio::select! {
            () = &mut shutdown => return,
            () = queue.wait_for_work(poll), if driving.len() < concurrency => {}
            Some(_) = driving.join_next(), if !driving.is_empty() => {}
            () = tokio::time::sleep(poll), if driving.len() >= concurrency => {}
        }
    }
}

/// Claims up to `room` runs and starts driving each; how many were claimed.
async fn claim(
    engine: &Engine,
    queue: &dyn WorkQueue,
    room: usize,
    driving: &mut JoinSet<()>,
) -> usize {
    if room == 0 {
        return 0;
    }
    let claimed = match queue.claim_ready(engine.owner_name(), room).await {
        Ok(claimed) => claimed,
        Err(e) => {
            eprintln!("weft worker: cannot claim runs: {e}");
            return 0;
        }
    };
    let count = claimed.len();
    for rec in claimed {
        let id = rec.id.clone();
        match engine.continue_claimed(rec).await {
            Ok(underway) => {
                driving.spawn(async move {
                    if let Err(e) = underway.end().await {
                        eprintln!("weft worker: run {id}: {e}");
                    }
                });
            }
            Err(e) => eprintln!("weft worker: run {id} cannot start: {e}"),
        }
    }
    count
}

/// `mean` times a random factor between 0.5 and 1.5.
fn jittered(mean: Duration) -> Duration {
    mean.mul_f64(rand::random_range(0.5..1.5))
}
