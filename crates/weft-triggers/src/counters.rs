//! What the triggers of this process did, for `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counts since this process started.
#[derive(Debug, Default)]
pub struct Counters {
    /// Firings that started a run (on time or caught up).
    pub started: AtomicU64,
    /// Fire times missed (recorded as missed or passed over by a catch-up).
    pub missed: AtomicU64,
    /// Firings skipped because the previous run had not ended.
    pub skipped: AtomicU64,
    /// Firings queued behind the previous run.
    pub queued: AtomicU64,
    /// Firings whose run could not be made.
    pub failed: AtomicU64,
    /// Webhook deliveries refused (bad or missing signature or token).
    pub hook_rejected: AtomicU64,
    /// Webhook deliveries that started a run.
    pub hook_started: AtomicU64,
    /// Runs woken because their wait came due.
    pub timers_fired: AtomicU64,
}

impl Counters {
    /// Adds `n` to `counter`.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// The counts by name, as `/metrics` shows them.
    pub fn snapshot(&self) -> Vec<(&'static str, &'static str, u64)> {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        vec![
            (
                "schedule_firings_started",
                "Schedule firings that started a run",
                get(&self.started),
            ),
            (
                "schedule_firings_missed",
                "Schedule fire times missed",
                get(&self.missed),
            ),
            (
                "schedule_firings_skipped",
                "Schedule firings skipped: the previous run had not ended",
                get(&self.skipped),
            ),
            (
                "schedule_firings_queued",
                "Schedule firings queued behind the previous run",
                get(&self.queued),
            ),
            (
                "schedule_firings_failed",
                "Schedule firings whose run could not be made",
                get(&self.failed),
            ),
            (
                "webhook_rejections",
                "Webhook deliveries refused for their signature or token",
                get(&self.hook_rejected),
            ),
            (
                "webhook_runs_started",
                "Webhook deliveries that started a run",
                get(&self.hook_started),
            ),
            (
                "timers_fired",
                "Runs woken because their wait came due",
                get(&self.timers_fired),
            ),
        ]
    }
}
