//! Why the engine could not start or continue a run.

use std::time::Duration;
use weft_core::Diagnostic;
use weft_core::ports::{RunRecord, RunStatus, StoreError};

/// Why the engine could not drive a run.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No run has that id.
    #[error("no run with id `{0}`")]
    NotFound(String),
    /// The run is not in a state that allows the request.
    #[error("{0}")]
    Refused(String),
    /// Another process answered, resumed or retried the run first.
    #[error("{0}")]
    Taken(String),
    /// The flow is invalid.
    #[error("the flow is invalid: {}", .0.iter().map(|d| d.message.as_str()).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<Diagnostic>),
}

/// What another process did to run `now` first, for the process that lost the race;
/// `answer` is the decision journaled last, if any.
pub(crate) fn taken_message(now: &RunRecord, answer: Option<&str>) -> String {
    let by = now
        .owner
        .as_deref()
        .map(|o| format!(" by {o}"))
        .unwrap_or_default();
    let at = humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + Duration::from_millis(u64::try_from(now.updated_ms).unwrap_or(0)),
    );
    match answer {
        Some(decision) if now.status != RunStatus::Paused => format!(
            "run {} was already answered: {decision}{by} at {at}; it is {} now, not paused",
            now.id,
            now.status.as_str()
        ),
        _ => format!(
            "run {} was taken first{by} at {at}: it is {} now",
            now.id,
            now.status.as_str()
        ),
    }
}
