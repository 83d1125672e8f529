//! What keeps Weft a good citizen of a provider: a concurrency cap and a request rate
//! per provider and model, shared by every run in the process, a pause that every caller
//! honours once the provider says it is throttling, and the backoff between attempts.
//!
//! Written here rather than taken from a rate-limiting crate because the shared pause
//! (a 429 for one call slows every call to that model) is the part that matters, and
//! the crates made for rate limiting do not have it.

use rand::Rng;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::Instant;

/// Concurrency and rate limits for one provider and model.
pub struct Limiter {
    slots: Option<Semaphore>,
    /// Least time between two request starts.
    spacing: Option<Duration>,
    state: Mutex<Schedule>,
}

struct Schedule {
    /// When the next request may start under the rate limit.
    next_start: Instant,
    /// No request starts before this (the provider asked us to wait).
    paused_until: Instant,
}

impl Limiter {
    /// At most `max_concurrency` calls at once and `per_minute` starts a minute (each
    /// `None` is unlimited).
    pub fn new(max_concurrency: Option<usize>, per_minute: Option<f64>) -> Limiter {
        let now = Instant::now();
        Limiter {
            slots: max_concurrency.map(|n| Semaphore::new(n.max(1))),
            spacing: per_minute
                .filter(|r| *r > 0.0 && r.is_finite())
                .map(|r| Duration::from_secs_f64(60.0 / r)),
            state: Mutex::new(Schedule {
                next_start: now,
                paused_until: now,
            }),
        }
    }

    /// Waits for a slot and for the rate limit; the call runs while the permit lives.
    pub async fn acquire(&self) -> Option<SemaphorePermit<'_>> {
        let permit = match &self.slots {
            Some(s) => s.acquire().await.ok(),
            None => None,
        };
        let start = {
            let mut s = self.state.lock().expect("limiter lock");
            let start = Instant::now().max(s.next_start).max(s.paused_until);
            if let Some(spacing) = self.spacing {
                s.next_start = start + spacing;
            }
            start
        };
        if start > Instant::now() {
            tokio::time::sleep_until(start).await;
        }
        permit
    }

    /// Holds every new call back for `wait`.
    pub fn pause_for(&self, wait: Duration) {
        let mut s = self.state.lock().expect("limiter lock");
        s.paused_until = s.paused_until.max(Instant::now() + wait);
    }
}

/// Delays between attempts: exponential from 250 ms, capped at 20 s, with jitter; what
/// the provider asked for (`Retry-After`) when it said.
pub struct Backoff {
    attempt: u32,
}

const FIRST: Duration = Duration::from_millis(250);
const CAP: Duration = Duration::from_secs(20);
/// The longest `Retry-After` honoured as it is; a longer one is a failure to report, not
/// a reason to hold a run for minutes inside one block.
const LONGEST_ASKED: Duration = Duration::from_secs(120);

impl Backoff {
    /// Before the first retry.
    pub fn new() -> Backoff {
        Backoff { attempt: 0 }
    }

    /// The wait before the next attempt.
    pub fn next(&mut self, asked: Option<Duration>) -> Duration {
        self.attempt += 1;
        if let Some(asked) = asked {
            return asked.min(LONGEST_ASKED);
        }
        let exp = FIRST.saturating_mul(1 << self.attempt.min(16).saturating_sub(1));
        exp.min(CAP).mul_f64(rand::rng().random_range(0.5..=1.0))
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_rate_limit_spaces_request_starts() {
        let l = Limiter::new(None, Some(600.0)); // one every 100 ms
        let t0 = Instant::now();
        for _ in 0..3 {
            let _ = l.acquire().await;
        }
        assert_eq!(t0.elapsed(), Duration::from_millis(200));
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_holds_every_caller() {
        let l = Limiter::new(Some(4), None);
        l.pause_for(Duration::from_secs(2));
        let t0 = Instant::now();
        let _ = l.acquire().await;
        assert_eq!(t0.elapsed(), Duration::from_secs(2));
    }

    #[test]
    fn backoff_grows_and_honours_retry_after() {
        let mut b = Backoff::new();
        let first = b.next(None);
        assert!(first >= Duration::from_millis(125) && first <= FIRST);
        let second = b.next(None);
        assert!(second >= Duration::from_millis(250) && second <= Duration::from_millis(500));
        assert_eq!(b.next(Some(Duration::from_secs(3))), Duration::from_secs(3));
        assert_eq!(b.next(Some(Duration::from_secs(3600))), LONGEST_ASKED);
    }
}
