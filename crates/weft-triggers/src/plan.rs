//! What a schedule should do at a given moment: which of its fire times since the last
//! one recorded are due, which of them are on time, and which were missed (and what the
//! catch-up policy makes of those). Pure, over explicit times, so that tests fix the
//! clock.

use crate::cron::CronTimes;
use weft_core::ports::{CatchUp, Schedule};

/// How late a firing may be handled and still be on time, rather than missed.
pub const ON_TIME_MS: i64 = 60_000;

/// The most fire times of one schedule handled in one pass; a longer backlog is
/// handled over several passes (catch-up `all`) or skipped to its end.
pub const MOST_PER_PASS: usize = 1_000;

/// One fire time to record now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Due {
    /// The fire time, Unix milliseconds.
    pub fire_ms: i64,
    /// The earlier missed fire times it stands for.
    pub missed: u32,
    /// What to do with it.
    pub action: Action,
}

/// What a due fire time does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Start its run (subject to the overlap policy): it is on time.
    OnTime,
    /// Start its run (subject to the overlap policy): it was missed, and the catch-up
    /// policy starts it.
    CatchUp,
    /// Record it as missed, starting nothing.
    RecordMissed,
}

/// How long after `fire_ms` schedule `id`'s firing starts: the same in every process,
/// below `jitter_ms`.
pub fn jitter(id: &str, fire_ms: i64, jitter_ms: u64) -> i64 {
    if jitter_ms == 0 {
        return 0;
    }
    let hash = weft_core::hash::content_hash(format!("{id}\0{fire_ms}").as_bytes());
    let n = u64::from_str_radix(&hash[..15], 16).unwrap_or(0);
    i64::try_from(n % jitter_ms).unwrap_or(0)
}

/// When fire time `fire_ms` of `s` is due.
pub fn due_at(s: &Schedule, fire_ms: i64) -> i64 {
    fire_ms.saturating_add(jitter(&s.id, fire_ms, s.jitter_ms))
}

/// When `s`'s next firing after `last_ms` is due, if it has one.
pub fn next_due(cron: &CronTimes, s: &Schedule, last_ms: i64) -> Option<i64> {
    cron.next_after(last_ms).map(|t| due_at(s, t))
}

/// The fire times of `s` after `last_ms` (the latest recorded, or when the schedule
/// began) that are due at `now_ms`, and what each does.
pub fn plan(cron: &CronTimes, s: &Schedule, last_ms: i64, now_ms: i64) -> Vec<Due> {
    let (times, skipped) = due_times(cron, s, last_ms, now_ms);
    let Some(&latest) = times.last() else {
        return Vec::new();
    };
    let on_time = now_ms - due_at(s, latest) <= ON_TIME_MS;
    let missed = if on_time {
        &times[..times.len() - 1]
    } else {
        &times[..]
    };
    let count = |n: usize| u32::try_from(n.saturating_add(skipped)).unwrap_or(u32::MAX);
    let mut due = Vec::new();
    if let Some(&last_missed) = missed.last() {
        match s.catch_up {
            CatchUp::All => due.extend(missed.iter().map(|&t| Due {
                fire_ms: t,
                missed: 0,
                action: Action::CatchUp,
            })),
            CatchUp::Last | CatchUp::None => due.push(Due {
                fire_ms: last_missed,
                missed: count(missed.len() - 1),
                action: if s.catch_up == CatchUp::Last {
                    Action::CatchUp
                } else {
                    Action::RecordMissed
                },
            }),
        }
    }
    if on_time {
        due.push(Due {
            fire_ms: latest,
            missed: 0,
            action: Action::OnTime,
        });
    }
    due
}

/// The due fire times after `last_ms`, at most [`MOST_PER_PASS`] (then, unless every
/// missed one is to run, the latest due one last), and how many were passed over.
fn due_times(cron: &CronTimes, s: &Schedule, last_ms: i64, now_ms: i64) -> (Vec<i64>, usize) {
    let mut times = Vec::new();
    let mut after = last_ms;
    while let Some(t) = cron.next_after(after) {
        if due_at(s, t) > now_ms {
            return (times, 0);
        }
        if times.len() == MOST_PER_PASS {
            break;
        }
        times.push(t);
        after = t;
    }
    if s.catch_up == CatchUp::All || times.is_empty() {
        return (times, 0);
    }
    // A backlog longer than one pass: the rest counts as missed, and the latest due
    // fire time ends the pass, so the schedule is current after it.
    let mut latest = cron.latest_at(now_ms);
    while let Some(t) = latest.filter(|t| due_at(s, *t) > now_ms) {
        latest = cron.latest_at(t - 1);
    }
    match latest.filter(|t| Some(t) > times.last()) {
        Some(t) => {
            times.push(t);
            (times, usize::MAX / 2)
        }
        None => (times, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use weft_core::ports::Overlap;

    fn every_second(catch_up: CatchUp) -> (CronTimes, Schedule) {
        let s = Schedule {
            id: "s".into(),
            flow: "f".into(),
            version: None,
            cron: "* * * * * *".into(),
            tz: "UTC".into(),
            input: json!({}),
            overlap: Overlap::Skip,
            catch_up,
            jitter_ms: 0,
            paused: false,
            created_ms: 0,
            updated_ms: 0,
            since_ms: 0,
        };
        (CronTimes::parse(&s.cron, &s.tz).unwrap(), s)
    }

    fn actions(due: &[Due]) -> Vec<(i64, u32, Action)> {
        due.iter()
            .map(|d| (d.fire_ms, d.missed, d.action))
            .collect()
    }

    #[test]
    fn the_next_fire_time_is_on_time_and_nothing_is_due_before_it() {
        let (c, s) = every_second(CatchUp::Last);
        assert!(plan(&c, &s, 10_000, 10_999).is_empty());
        assert_eq!(
            actions(&plan(&c, &s, 10_000, 11_200)),
            [(11_000, 0, Action::OnTime)]
        );
    }

    #[test]
    fn a_server_down_for_five_seconds_catches_up_by_its_policy() {
        // Last recorded 10 s; back at 15.2 s: 11..14 were missed, 15 is on time.
        let (c, s) = every_second(CatchUp::Last);
        assert_eq!(
            actions(&plan(&c, &s, 10_000, 15_200)),
            [(14_000, 3, Action::CatchUp), (15_000, 0, Action::OnTime)]
        );
        let (c, s) = every_second(CatchUp::None);
        assert_eq!(
            actions(&plan(&c, &s, 10_000, 15_200)),
            [
                (14_000, 3, Action::RecordMissed),
                (15_000, 0, Action::OnTime)
            ]
        );
        let (c, s) = every_second(CatchUp::All);
        let all = actions(&plan(&c, &s, 10_000, 15_200));
        assert_eq!(all.len(), 5);
        assert!(all[..4].iter().all(|(_, _, a)| *a == Action::CatchUp));
    }

    #[test]
    fn a_daily_firing_handled_late_is_missed_and_caught_up() {
        let c = CronTimes::parse("0 9 * * *", "UTC").unwrap();
        let (_, mut s) = every_second(CatchUp::Last);
        s.cron = "0 9 * * *".into();
        let nine = "2026-11-27T09:00:00Z"
            .parse::<jiff::Timestamp>()
            .unwrap()
            .as_millisecond();
        assert_eq!(
            actions(&plan(&c, &s, nine - 3_600_000, nine + 30_000)),
            [(nine, 0, Action::OnTime)]
        );
        assert_eq!(
            actions(&plan(&c, &s, nine - 3_600_000, nine + 300_000)),
            [(nine, 0, Action::CatchUp)]
        );
    }

    #[test]
    fn a_long_backlog_skips_to_its_end_unless_every_firing_runs() {
        let (c, s) = every_second(CatchUp::None);
        let due = plan(&c, &s, 0, 86_400_000);
        assert_eq!(due.len(), 2, "{due:?}");
        assert_eq!(due[1].fire_ms, 86_400_000);
        assert!(due[0].missed > 80_000);
        let (c, s) = every_second(CatchUp::All);
        assert_eq!(plan(&c, &s, 0, 86_400_000).len(), MOST_PER_PASS);
    }

    #[test]
    fn jitter_is_the_same_everywhere_and_below_its_bound() {
        let a = jitter("nightly", 1_000, 30_000);
        assert_eq!(a, jitter("nightly", 1_000, 30_000));
        assert!((0..30_000).contains(&a));
        assert_ne!(
            (0..20)
                .map(|i| jitter("nightly", i * 1000, 30_000))
                .collect::<std::collections::HashSet<_>>()
                .len(),
            1
        );
        let (c, mut s) = every_second(CatchUp::Last);
        s.jitter_ms = 900;
        let j = jitter("s", 11_000, 900);
        assert!(plan(&c, &s, 10_000, 11_000 + j - 1).is_empty());
        assert_eq!(plan(&c, &s, 10_000, 11_000 + j).len(), 1);
    }
}
