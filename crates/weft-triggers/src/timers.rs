//! The timer loop every `weft serve` and `weft worker` runs: wakes the paused runs
//! whose `wait` came due ([`weft_engine::Engine::wake`]: the first process to take a
//! run wins), and sleeps until the next one or a second (timers other processes set).

use crate::counters::Counters;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use weft_core::event::now_ms;
use weft_core::ports::StoreError;
use weft_engine::Engine;

/// The longest the loop sleeps.
const POLL_MS: i64 = 1_000;
/// Runs woken per store query.
const BATCH: usize = 100;

/// Wakes `engine`'s due runs until `shutdown` completes.
pub async fn serve_timers(
    engine: Engine,
    counters: Arc<Counters>,
    shutdown: impl Future<Output = ()>,
) {
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let next = match wake_due(&engine, &counters).await {
            Ok(next) => next,
            Err(e) => {
                eprintln!("weft: timers: {e}");
                None
            }
        };
        let wait = next.map_or(POLL_MS, |t| (t - now_ms() as i64).clamp(0, POLL_MS));
        tokio::select! {
            () = &mut shutdown => return,
            () = tokio::time::sleep(Duration::from_millis(wait as u64)) => {}
        }
    }
}

/// Wakes every run due now; when the next one within a second is due. One query a
/// round reads both: the timers due by a second from now, earliest first.
pub async fn wake_due(engine: &Engine, counters: &Counters) -> Result<Option<i64>, StoreError> {
    let store = engine.store().clone();
    let Some(triggers) = store.triggers() else {
        return Ok(None);
    };
    loop {
        let now = now_ms() as i64;
        let timers = triggers.due_timers(now + POLL_MS, BATCH).await?;
        let due_now = timers.iter().take_while(|t| t.wake_ms <= now).count();
        let mut woken = 0;
        for timer in &timers[..due_now] {
            match engine.wake(&timer.run_id).await {
                Ok(Some(_underway)) => {
                    woken += 1;
                    Counters::add(&counters.timers_fired, 1);
                }
                Ok(None) => {}
                Err(e) => eprintln!("weft: timers: run {}: {e}", timer.run_id),
            }
        }
        if woken == 0 && due_now > 0 {
            // Due, yet none would wake (another process is at them, or a record the
            // engine cannot read): look again after a poll, not at once.
            return Ok(None);
        }
        if let Some(next) = timers.get(due_now) {
            return Ok(Some(next.wake_ms));
        }
        if timers.len() < BATCH {
            return Ok(None);
        }
        // A full batch, all due now: more may wait behind it.
    }
}
