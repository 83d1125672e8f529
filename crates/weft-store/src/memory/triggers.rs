//! The memory store's schedules, firings, webhooks and timers.

use super::{MemoryStore, poisoned};
use async_trait::async_trait;
use std::collections::BTreeMap;
use weft_core::ports::{
    DueTimer, Firing, FiringOutcome, Hook, RunRecord, RunStatus, Schedule, StoreError, TriggerStore,
};

/// What the memory store keeps for triggers.
#[derive(Default)]
pub(super) struct Triggers {
    schedules: BTreeMap<String, Schedule>,
    /// Each schedule's firings by fire time.
    firings: BTreeMap<String, BTreeMap<i64, Firing>>,
    hooks: BTreeMap<String, Hook>,
}

fn exists(what: &str, id: &str) -> StoreError {
    StoreError::Conflict(format!("a {what} called `{id}` exists already"))
}

impl MemoryStore {
    /// Inserts `run`, which must be new, into `runs` (already locked).
    pub(super) fn insert_new_run(
        runs: &mut std::collections::HashMap<String, RunRecord>,
        run: &RunRecord,
    ) -> Result<(), StoreError> {
        if runs.contains_key(&run.id) {
            return Err(StoreError::Conflict(format!(
                "a run with id {} exists already",
                run.id
            )));
        }
        runs.insert(run.id.clone(), run.clone());
        Ok(())
    }
}

#[async_trait]
impl TriggerStore for MemoryStore {
    async fn put_schedule(&self, s: &Schedule, create: bool) -> Result<(), StoreError> {
        let mut t = self.triggers.lock().map_err(|_| poisoned())?;
        if create && t.schedules.contains_key(&s.id) {
            return Err(exists("schedule", &s.id));
        }
        t.schedules.insert(s.id.clone(), s.clone());
        Ok(())
    }

    async fn schedule(&self, id: &str) -> Result<Option<Schedule>, StoreError> {
        let t = self.triggers.lock().map_err(|_| poisoned())?;
        Ok(t.schedules.get(id).cloned())
    }

    async fn schedules(&self) -> Result<Vec<Schedule>, StoreError> {
        let t = self.triggers.lock().map_err(|_| poisoned())?;
        Ok(t.schedules.values().cloned().collect())
    }

    async fn delete_schedule(&self, id: &str) -> Result<bool, StoreError> {
        let mut t = self.triggers.lock().map_err(|_| poisoned())?;
        t.firings.remove(id);
        Ok(t.schedules.remove(id).is_some())
    }

    async fn record_firing(
        &self,
        firing: &Firing,
        run: Option<&RunRecord>,
    ) -> Result<bool, StoreError> {
        // Locked in the order claim_run never reverses: triggers, then runs.
        let mut t = self.triggers.lock().map_err(|_| poisoned())?;
        let of_schedule = t.firings.entry(firing.schedule_id.clone()).or_default();
        if of_schedule.contains_key(&firing.fire_ms) {
            return Ok(false);
        }
        if let Some(run) = run {
            let mut runs = self.runs.lock().map_err(|_| poisoned())?;
            Self::insert_new_run(&mut runs, run)?;
        }
        of_schedule.insert(firing.fire_ms, firing.clone());
        Ok(true)
    }

    async fn start_queued_firing(
        &self,
        schedule_id: &str,
        fire_ms: i64,
        run: &RunRecord,
    ) -> Result<bool, StoreError> {
        let mut t = self.triggers.lock().map_err(|_| poisoned())?;
        let Some(f) = t
            .firings
            .get_mut(schedule_id)
            .and_then(|f| f.get_mut(&fire_ms))
            .filter(|f| f.outcome == FiringOutcome::Queued)
        else {
            return Ok(false);
        };
        let mut runs = self.runs.lock().map_err(|_| poisoned())?;
        Self::insert_new_run(&mut runs, run)?;
        f.outcome = FiringOutcome::Started;
        f.run_id = Some(run.id.clone());
        Ok(true)
    }

    async fn firings(&self, schedule_id: &str, limit: usize) -> Result<Vec<Firing>, StoreError> {
        let t = self.triggers.lock().map_err(|_| poisoned())?;
        Ok(t.firings
            .get(schedule_id)
            .map(|f| f.values().rev().take(limit).cloned().collect())
            .unwrap_or_default())
    }

    async fn put_hook(&self, h: &Hook, create: bool) -> Result<(), StoreError> {
        let mut t = self.triggers.lock().map_err(|_| poisoned())?;
        if create && t.hooks.contains_key(&h.name) {
            return Err(exists("webhook", &h.name));
        }
        t.hooks.insert(h.name.clone(), h.clone());
        Ok(())
    }

    async fn hook(&self, name: &str) -> Result<Option<Hook>, StoreError> {
        let t = self.triggers.lock().map_err(|_| poisoned())?;
        Ok(t.hooks.get(name).cloned())
    }

    async fn hooks(&self) -> Result<Vec<Hook>, StoreError> {
        let t = self.triggers.lock().map_err(|_| poisoned())?;
        Ok(t.hooks.values().cloned().collect())
    }

    async fn delete_hook(&self, name: &str) -> Result<bool, StoreError> {
        let mut t = self.triggers.lock().map_err(|_| poisoned())?;
        Ok(t.hooks.remove(name).is_some())
    }

    async fn due_timers(&self, until_ms: i64, limit: usize) -> Result<Vec<DueTimer>, StoreError> {
        let runs = self.runs.lock().map_err(|_| poisoned())?;
        let mut due: Vec<DueTimer> = runs
            .values()
            .filter(|r| r.status == RunStatus::Paused)
            .filter_map(|r| {
                let wake_ms = r.wake_ms.filter(|w| *w <= until_ms)?;
                Some(DueTimer {
                    run_id: r.id.clone(),
                    wake_ms,
                })
            })
            .collect();
        due.sort_by(|a, b| (a.wake_ms, &a.run_id).cmp(&(b.wake_ms, &b.run_id)));
        due.truncate(limit);
        Ok(due)
    }
}
