//! Stall detection: a model call is watched for its first piece of text and for silences
//! between pieces, and a tool the model called is bounded in time, against the thresholds
//! of the enclosing blocks' `stall` policies. A stall fails the block with a `timeout`
//! error naming the phase, so retry policies and error routes treat it like a timeout.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use weft_core::ir::Stall;
use weft_core::{BlockError, ErrorKind};

/// The progress of one model call: when its latest piece of text arrived.
pub(crate) struct Progress {
    start: Instant,
    /// Milliseconds from `start` to the latest piece of text, plus one; 0 until the first.
    latest: AtomicU64,
    first: Notify,
}

impl Progress {
    /// A call starting now.
    pub(crate) fn new() -> Progress {
        Progress {
            start: Instant::now(),
            latest: AtomicU64::new(0),
            first: Notify::new(),
        }
    }

    /// Notes that a piece of text arrived.
    pub(crate) fn tick(&self) {
        let ms = self.start.elapsed().as_millis() as u64 + 1;
        if self.latest.swap(ms, Ordering::Relaxed) == 0 {
            self.first.notify_one();
        }
    }

    /// When the latest piece of text arrived, if one has.
    fn latest(&self) -> Option<Instant> {
        match self.latest.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(self.start + Duration::from_millis(ms - 1)),
        }
    }

    /// The deadline that applies now: `(when, phase, threshold_ms)`.
    fn deadline(&self, stall: &Stall) -> Option<(Instant, &'static str, u64)> {
        let (from, phase, ms) = match self.latest() {
            None => (self.start, "first_token", stall.first_token_ms?),
            Some(at) => (at, "token_gap", stall.token_gap_ms?),
        };
        Some((from + Duration::from_millis(ms), phase, ms))
    }
}

fn stalled(phase: &str, ms: u64) -> BlockError {
    let what = match phase {
        "first_token" => format!("no text came within {ms} ms of the request"),
        _ => format!("its answer went silent for {ms} ms"),
    };
    BlockError::new(
        ErrorKind::Timeout,
        format!("the model call stalled: {what} (stall threshold `{phase}`)"),
    )
    .with_detail(serde_json::json!({"stall": phase, "threshold_ms": ms}))
}

/// Runs the model call `call`, whose streamed text ticks `progress`, under `stall`'s
/// model thresholds.
pub(crate) async fn model_call<T>(
    stall: &Stall,
    progress: &Progress,
    call: impl Future<Output = Result<T, BlockError>>,
) -> Result<T, BlockError> {
    if stall.first_token_ms.is_none() && stall.token_gap_ms.is_none() {
        return call.await;
    }
    tokio::pin!(call);
    loop {
        match progress.deadline(stall) {
            Some((when, phase, ms)) => {
                if when <= Instant::now() {
                    return Err(stalled(phase, ms));
                }
                tokio::select! {
                    r = &mut call => return r,
                    // Text may have come meanwhile: the loop recomputes the deadline.
                    _ = tokio::time::sleep_until(when.into()) => {}
                }
            }
            // Only silences are watched, and none can start before the first text.
            None if progress.latest().is_none() => {
                tokio::select! {
                    r = &mut call => return r,
                    _ = progress.first.notified() => {}
                }
            }
            None => return call.await,
        }
    }
}

/// Runs the tool `name`'s work under `stall`'s tool threshold.
pub(crate) async fn tool<T>(
    stall: &Stall,
    name: &str,
    work: impl Future<Output = T>,
) -> Result<T, BlockError> {
    let Some(ms) = stall.tool_ms else {
        return Ok(work.await);
    };
    tokio::time::timeout(Duration::from_millis(ms), work)
        .await
        .map_err(|_| {
            BlockError::new(
                ErrorKind::Timeout,
                format!(
                    "the tool `{name}` stalled: it ran longer than {ms} ms (stall threshold `tool`)"
                ),
            )
            .with_detail(serde_json::json!({"stall": "tool", "tool": name, "threshold_ms": ms}))
        })
}
