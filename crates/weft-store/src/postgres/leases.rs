//! The leases this process holds on the runs it drives, and their renewal.
//!
//! A run's row carries a fencing number, `lease_epoch`, which every claim raises, and
//! `lease_expires_ms`, in the database's clock. The process that claimed a run remembers
//! the epoch it got; each of its writes of the run checks, in the writing transaction,
//! that the row still has that epoch, so once another process has claimed the run
//! nothing more of this one is committed (as Temporal's shard owner asserts its range
//! on every write). A task renews every held lease a few times per lease period; a run
//! whose renewal finds another epoch is lost, and so is every run whose lease has gone
//! unrenewed for a whole period by this process's own clock (it was stopped, or could
//! not reach the database), so the engine stops driving it before it acts again.

use super::pg_err;
use deadpool_postgres::Pool;
use std::collections::HashMap;
use std::sync::{Mutex, Weak};
use std::time::{Duration, Instant};
use weft_core::ports::StoreError;

/// The database's clock in Unix milliseconds, so that every process agrees on when a
/// lease ends whatever its own clock says.
pub(super) const NOW_MS: &str = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

/// A lease this process holds.
struct Held {
    epoch: i64,
    /// When the last renewal that succeeded was sent (or the claim made).
    renewed: Instant,
    /// Another process holds the run now.
    lost: bool,
}

/// The leases of one store, and how long each lasts unrenewed.
pub(super) struct Leases {
    held: Mutex<HashMap<String, Held>>,
    duration: Duration,
}

impl Leases {
    pub(super) fn new(duration: Duration) -> Leases {
        Leases {
            held: Mutex::default(),
            duration,
        }
    }

    /// How long a lease lasts unrenewed, in milliseconds.
    pub(super) fn duration_ms(&self) -> i64 {
        i64::try_from(self.duration.as_millis()).unwrap_or(i64::MAX)
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, Held>> {
        // A panic while holding this lock leaves plain data: keep using it.
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that this process claimed `run_id` with fencing number `epoch` at `since`.
    pub(super) fn hold(&self, run_id: &str, epoch: i64, since: Instant) {
        self.held().insert(
            run_id.to_owned(),
            Held {
                epoch,
                renewed: since,
                lost: false,
            },
        );
    }

    /// The fencing number this process's writes of `run_id` carry: `None` when it holds
    /// no lease on the run (a run it only reads, or cancels from outside).
    pub(super) fn epoch_of(&self, run_id: &str) -> Option<i64> {
        self.held().get(run_id).map(|h| h.epoch)
    }

    /// Forgets the lease on `run_id`: the run paused or ended.
    pub(super) fn release(&self, run_id: &str) {
        self.held().remove(run_id);
    }

    /// Records that another process holds `run_id` now. Its epoch stays, so every later
    /// write of it by this process is refused too.
    pub(super) fn mark_lost(&self, run_id: &str) {
        if let Some(h) = self.held().get_mut(run_id) {
            h.lost = true;
        }
    }

    /// Whether this process must stop driving `run_id`.
    pub(super) fn lost(&self, run_id: &str) -> bool {
        self.held()
            .get(run_id)
            .is_some_and(|h| h.lost || h.renewed.elapsed() >= self.duration)
    }

    /// The leases to renew: run ids and their epochs.
    fn to_renew(&self) -> (Vec<String>, Vec<i64>) {
        self.held()
            .iter()
            .filter(|(_, h)| !h.lost)
            .map(|(id, h)| (id.clone(), h.epoch))
            .unzip()
    }

    /// Records a renewal sent at `sent`: the runs in `kept` are held until a period after
    /// it; the others of `asked` are lost.
    fn renewed(&self, asked: &[String], kept: &[String], sent: Instant) {
        let mut held = self.held();
        for id in asked {
            if let Some(h) = held.get_mut(id) {
                if kept.contains(id) {
                    h.renewed = h.renewed.max(sent);
                } else {
                    h.lost = true;
                }
            }
        }
    }
}

/// Renews the leases of `leases` a few times per lease period until the store is
/// dropped.
pub(super) async fn renew(pool: Pool, leases: Weak<Leases>) {
    loop {
        let Some(period) = leases.upgrade().map(|l| l.duration / 3) else {
            return;
        };
        tokio::time::sleep(period.max(Duration::from_millis(50))).await;
        let Some(current) = leases.upgrade() else {
            return;
        };
        let (ids, epochs) = current.to_renew();
        if ids.is_empty() {
            continue;
        }
        let sent = Instant::now();
        // A renewal that fails (the database is unreachable) changes nothing: the leases
        // run out by this process's clock, and the runs stop here.
        if let Ok(kept) = renew_once(&pool, &ids, &epochs, current.duration_ms()).await {
            current.renewed(&ids, &kept, sent);
        }
    }
}

async fn renew_once(
    pool: &Pool,
    ids: &[String],
    epochs: &[i64],
    duration_ms: i64,
) -> Result<Vec<String>, StoreError> {
    let client = pool
        .get()
        .await
        .map_err(|e| StoreError::backend("renewing leases", e))?;
    let statement = client
        .prepare_cached(&format!(
            "UPDATE weft.runs r SET lease_expires_ms = {NOW_MS} + $3
             FROM unnest($1::text[], $2::bigint[]) AS t (id, epoch)
             WHERE r.id = t.id AND r.lease_epoch = t.epoch
             RETURNING r.id"
        ))
        .await
        .map_err(|e| pg_err("renewing leases", e))?;
    let rows = client
        .query(&statement, &[&ids, &epochs, &duration_ms])
        .await
        .map_err(|e| pg_err("renewing leases", e))?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}
