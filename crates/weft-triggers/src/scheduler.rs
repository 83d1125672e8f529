//! The schedule loop every `weft serve` runs: each pass reads the schedules, records
//! each due fire time once (the store refuses a second record of one, so processes
//! sharing the store may all run this loop), starts the runs, and sleeps until the next
//! fire time comes due or a second passes (to see schedules other processes changed).
//!
//! The overlap policy looks at the run of the schedule's latest started firing: a run
//! that has not ended (queued, running or paused) overlaps. Firings recorded in one
//! pass (a catch-up of several) do not overlap each other.

use crate::counters::Counters;
use crate::cron::CronTimes;
use crate::launch::{LaunchError, Launcher};
use crate::plan::{Action, Due, next_due, plan};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use weft_core::event::now_ms;
use weft_core::ports::{Firing, FiringOutcome, Overlap, Schedule, StoreError, TriggerStore};

/// The longest a pass waits for the next one.
const POLL_MS: i64 = 1_000;
/// How many recent firings a pass reads for a schedule.
const RECENT: usize = 200;

/// Fires the schedules of `launcher`'s store until `shutdown` completes.
pub async fn run_schedules(
    launcher: Launcher,
    counters: Arc<Counters>,
    shutdown: impl Future<Output = ()>,
) {
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let now = now_ms() as i64;
        let next = match pass(&launcher, &counters, now).await {
            Ok(next) => next,
            Err(e) => {
                eprintln!("weft: schedules: {e}");
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

/// One pass over every schedule at `now`; when the next firing comes due.
pub async fn pass(
    launcher: &Launcher,
    counters: &Counters,
    now: i64,
) -> Result<Option<i64>, StoreError> {
    let store = launcher.store().clone();
    let Some(triggers) = store.triggers() else {
        return Ok(None);
    };
    let mut next: Option<i64> = None;
    for s in triggers.schedules().await? {
        if s.paused {
            continue;
        }
        let Ok(cron) = CronTimes::parse(&s.cron, &s.tz) else {
            continue;
        };
        let firing = Firer {
            launcher,
            counters,
            triggers,
            schedule: &s,
            now,
        };
        match firing.fire(&cron).await {
            Ok(last) => {
                if let Some(t) = next_due(&cron, &s, last) {
                    next = Some(next.map_or(t, |n| n.min(t)));
                }
            }
            Err(e) => eprintln!("weft: schedule {}: {e}", s.id),
        }
    }
    Ok(next)
}

/// One schedule's part of a pass.
struct Firer<'a> {
    launcher: &'a Launcher,
    counters: &'a Counters,
    triggers: &'a dyn TriggerStore,
    schedule: &'a Schedule,
    now: i64,
}

/// What a pass knows of a schedule's earlier firings.
struct Recent {
    /// The run of the latest started firing.
    previous_run: Option<String>,
    /// Queued firings, oldest first.
    queued: Vec<i64>,
    /// A firing of this pass started a run.
    started_here: bool,
}

impl Firer<'_> {
    /// Records and starts what is due; the latest fire time recorded after it.
    async fn fire(&self, cron: &CronTimes) -> Result<i64, StoreError> {
        let s = self.schedule;
        let firings = self.triggers.firings(&s.id, RECENT).await?;
        let mut last = firings
            .iter()
            .find(|f| f.outcome != FiringOutcome::Triggered)
            .map_or(s.since_ms, |f| f.fire_ms.max(s.since_ms));
        let mut recent = Recent {
            previous_run: firings.iter().find_map(|f| f.run_id.clone()),
            queued: firings
                .iter()
                .rev()
                .filter(|f| f.outcome == FiringOutcome::Queued)
                .map(|f| f.fire_ms)
                .collect(),
            started_here: false,
        };
        self.start_first_queued(&mut recent).await?;
        for due in plan(cron, s, last, self.now) {
            self.record(due, &mut recent).await?;
            last = due.fire_ms;
        }
        Ok(last)
    }

    /// Whether run `id` has not ended.
    async fn goes_on(&self, id: &str) -> Result<bool, StoreError> {
        let run = self.launcher.store().get_run(id).await?;
        Ok(run.is_some_and(|r| !r.status.has_ended()))
    }

    /// Starts the oldest queued firing once the previous run has ended.
    async fn start_first_queued(&self, recent: &mut Recent) -> Result<(), StoreError> {
        let Some(&fire_ms) = recent.queued.first() else {
            return Ok(());
        };
        if let Some(prev) = &recent.previous_run
            && self.goes_on(prev).await?
        {
            return Ok(());
        }
        let s = self.schedule;
        let run = match self
            .launcher
            .new_run(&s.flow, s.version, s.input.clone())
            .await
        {
            Ok(run) => run,
            // It stays queued: the flow may be saved again, the store may come back.
            Err(e) => {
                eprintln!("weft: schedule {}: {e}", s.id);
                return Ok(());
            }
        };
        recent.queued.remove(0);
        if self
            .triggers
            .start_queued_firing(&s.id, fire_ms, &run)
            .await?
        {
            Counters::add(&self.counters.started, 1);
            recent.previous_run = Some(run.id.clone());
            recent.started_here = true;
            self.launcher.start(run.id);
        }
        Ok(())
    }

    async fn record(&self, due: Due, recent: &mut Recent) -> Result<(), StoreError> {
        Counters::add(&self.counters.missed, u64::from(due.missed));
        if due.action == Action::RecordMissed {
            Counters::add(&self.counters.missed, 1);
            self.write(due, FiringOutcome::Missed, None, None).await?;
            return Ok(());
        }
        let overlaps = !recent.started_here
            && match &recent.previous_run {
                Some(prev) => self.goes_on(prev).await?,
                None => false,
            };
        let s = self.schedule;
        let must_queue = s.overlap == Overlap::Queue && (overlaps || !recent.queued.is_empty());
        if must_queue {
            if self.write(due, FiringOutcome::Queued, None, None).await? {
                Counters::add(&self.counters.queued, 1);
                recent.queued.push(due.fire_ms);
            }
            return Ok(());
        }
        if overlaps {
            match s.overlap {
                Overlap::Skip => {
                    if self.write(due, FiringOutcome::Skipped, None, None).await? {
                        Counters::add(&self.counters.skipped, 1);
                    }
                    return Ok(());
                }
                Overlap::CancelPrevious => self.cancel_previous(recent).await,
                Overlap::Queue => unreachable!("queued above"),
            }
        }
        let run = match self
            .launcher
            .new_run(&s.flow, s.version, s.input.clone())
            .await
        {
            Ok(run) => run,
            Err(e) => return self.failed(due.fire_ms, due.missed, e).await,
        };
        let id = run.id.clone();
        if self
            .write(due, FiringOutcome::Started, Some(&run), None)
            .await?
        {
            Counters::add(&self.counters.started, 1);
            recent.previous_run = Some(id.clone());
            recent.started_here = true;
            self.launcher.start(id);
        }
        Ok(())
    }

    async fn cancel_previous(&self, recent: &Recent) {
        if let Some(prev) = &recent.previous_run
            && let Err(e) = self.launcher.engine().cancel(prev).await
        {
            eprintln!(
                "weft: schedule {}: cannot cancel run {prev}: {e}",
                self.schedule.id
            );
        }
    }

    /// A firing whose run could not be made: recorded failed when the flow is at fault,
    /// tried again on the next pass when the store is.
    async fn failed(&self, fire_ms: i64, missed: u32, e: LaunchError) -> Result<(), StoreError> {
        match e {
            LaunchError::Store(message) => Err(StoreError::backend("starting a run", message)),
            LaunchError::Flow(message) => {
                eprintln!("weft: schedule {}: {message}", self.schedule.id);
                let due = Due {
                    fire_ms,
                    missed,
                    action: Action::OnTime,
                };
                if self
                    .write(due, FiringOutcome::Failed, None, Some(message))
                    .await?
                {
                    Counters::add(&self.counters.failed, 1);
                }
                Ok(())
            }
        }
    }

    /// Records one firing (with its run); whether this process recorded it.
    async fn write(
        &self,
        due: Due,
        outcome: FiringOutcome,
        run: Option<&weft_core::ports::RunRecord>,
        error: Option<String>,
    ) -> Result<bool, StoreError> {
        let firing = Firing {
            schedule_id: self.schedule.id.clone(),
            fire_ms: due.fire_ms,
            outcome,
            run_id: run.map(|r| r.id.clone()),
            missed: due.missed,
            at_ms: self.now,
            error,
        };
        self.triggers.record_firing(&firing, run).await
    }
}
