//! The work port: how workers that share a store find the runs to drive.

use crate::ports::store::{RunRecord, StoreError};
use async_trait::async_trait;
use std::time::Duration;

/// Runs waiting for a worker, in a store that many processes share. A run waits when
/// it is `queued` (new, or made ready again), or `running` with a lease that lapsed
/// (its process died, hung or lost the database).
#[async_trait]
pub trait WorkQueue: Send + Sync {
    /// Takes up to `limit` waiting runs for `owner`, the longest-waiting first: each is
    /// `running`, owned by `owner` under a new lease (which fences off any process that
    /// held it before), and is returned as it was before the claim, so its status says
    /// whether it starts (`queued`) or continues (`running`).
    async fn claim_ready(&self, owner: &str, limit: usize) -> Result<Vec<RunRecord>, StoreError>;

    /// Returns when another process may have made a run ready, or after `timeout`.
    async fn wait_for_work(&self, timeout: Duration);
}
