//! The trigger port: what starts runs without a caller waiting for them. Schedules and
//! their firings, webhooks, and the timers of runs that wait for a time.
//!
//! Every start is exactly once where many processes share a store: a firing is one row
//! keyed by its schedule and fire time, written in the same transaction as the run it
//! starts, so of two processes that fire one schedule at one instant one writes both
//! and the other nothing.

use crate::ports::store::{RunRecord, StoreError};
use crate::value::Value;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// What a firing does while the run of the schedule's previous firing has not ended.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Overlap {
    /// Starts nothing; the firing is recorded as skipped.
    #[default]
    Skip,
    /// Waits, recorded as queued, and starts once every earlier run has ended.
    Queue,
    /// Cancels the previous run, then starts.
    CancelPrevious,
}

/// What a schedule starts for the firings it missed (its processes were down, or
/// it was behind by more than one firing).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum CatchUp {
    /// Nothing: the missed firings are recorded as one missed firing.
    None,
    /// One run, for the latest missed firing.
    #[default]
    Last,
    /// One run for each missed firing.
    All,
}

/// A flow started on a cron schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// Its id, unique in the store.
    pub id: String,
    /// The stored flow's name.
    pub flow: String,
    /// The flow's version; its latest when the firing happens when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u32>,
    /// The cron expression: five fields, or six with seconds first.
    pub cron: String,
    /// The IANA time zone the expression is read in.
    pub tz: String,
    /// The input of every run it starts.
    pub input: Value,
    /// What a firing does while the previous run goes on.
    #[serde(default)]
    pub overlap: Overlap,
    /// What it starts for missed firings.
    #[serde(default)]
    pub catch_up: CatchUp,
    /// Each firing starts up to this many milliseconds after its time (the same delay
    /// in every process, derived from the schedule and the time).
    #[serde(default)]
    pub jitter_ms: u64,
    /// Paused schedules do not fire.
    #[serde(default)]
    pub paused: bool,
    /// Creation time, Unix milliseconds.
    pub created_ms: i64,
    /// Last change, Unix milliseconds.
    pub updated_ms: i64,
    /// Fire times at or before this are never due: its creation, or when it was last
    /// resumed (the firings it slept through while paused are not missed ones).
    pub since_ms: i64,
}

/// What became of one fire time of a schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FiringOutcome {
    /// It started its run.
    Started,
    /// It waits for the previous run to end (overlap `queue`).
    Queued,
    /// It started nothing: the previous run had not ended (overlap `skip`).
    Skipped,
    /// It started nothing: it was missed and the catch-up policy starts none.
    Missed,
    /// Its run could not be made (the flow is gone or no longer valid): see its error.
    Failed,
    /// A person started it out of schedule (`trigger-now`); its time is when they did,
    /// not a fire time, so it moves no fire time of the schedule.
    Triggered,
}

impl FiringOutcome {
    /// The lowercase name.
    pub fn as_str(&self) -> &'static str {
        match self {
            FiringOutcome::Started => "started",
            FiringOutcome::Queued => "queued",
            FiringOutcome::Skipped => "skipped",
            FiringOutcome::Missed => "missed",
            FiringOutcome::Failed => "failed",
            FiringOutcome::Triggered => "triggered",
        }
    }

    /// Parses a lowercase name.
    pub fn parse(s: &str) -> Option<FiringOutcome> {
        Some(match s {
            "started" => FiringOutcome::Started,
            "queued" => FiringOutcome::Queued,
            "skipped" => FiringOutcome::Skipped,
            "missed" => FiringOutcome::Missed,
            "failed" => FiringOutcome::Failed,
            "triggered" => FiringOutcome::Triggered,
            _ => return None,
        })
    }
}

/// One fire time of a schedule, recorded once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Firing {
    /// The schedule.
    pub schedule_id: String,
    /// The fire time, Unix milliseconds (before jitter).
    pub fire_ms: i64,
    /// What became of it.
    pub outcome: FiringOutcome,
    /// The run it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// How many earlier missed fire times it stands for (catch-up `last` or `none`).
    #[serde(default)]
    pub missed: u32,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When it was recorded, Unix milliseconds.
    pub at_ms: i64,
}

/// How a webhook's caller proves it may start runs.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum HookAuth {
    /// An HMAC-SHA256 signature of the timestamp and the body, keyed by the secret.
    #[default]
    Hmac,
    /// The secret itself as a bearer token.
    Bearer,
}

/// A flow started by `POST /v1/hooks/{name}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hook {
    /// Its name, unique in the store: the last segment of its URL.
    pub name: String,
    /// The stored flow's name.
    pub flow: String,
    /// The flow's version; its latest when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u32>,
    /// The shared secret (the HMAC key, or the bearer token).
    pub secret: String,
    /// How requests are authenticated.
    #[serde(default)]
    pub auth: HookAuth,
    /// A field of the JSON body (dotted path) whose value deduplicates deliveries,
    /// beside the `Idempotency-Key` header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedupe_field: Option<String>,
    /// Creation time, Unix milliseconds.
    pub created_ms: i64,
}

/// A paused run whose timer is due: its id and the time it waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueTimer {
    /// The run.
    pub run_id: String,
    /// When it wakes, Unix milliseconds.
    pub wake_ms: i64,
}

/// Durable schedules, firings, webhooks and timers, beside a [`crate::ports::Store`]'s
/// runs (the same database: a firing and its run are written together).
#[async_trait]
pub trait TriggerStore: Send + Sync {
    /// Stores schedule `s`: a new one (`create`, [`StoreError::Conflict`] if its id
    /// exists) or a replacement.
    async fn put_schedule(&self, s: &Schedule, create: bool) -> Result<(), StoreError>;
    /// The schedule `id`.
    async fn schedule(&self, id: &str) -> Result<Option<Schedule>, StoreError>;
    /// Every schedule, by id.
    async fn schedules(&self) -> Result<Vec<Schedule>, StoreError>;
    /// Removes schedule `id` and its firings; whether it existed.
    async fn delete_schedule(&self, id: &str) -> Result<bool, StoreError>;
    /// Records `firing` and creates `run` (its run, when it starts one) atomically;
    /// `false`, with nothing written, when that fire time of the schedule is recorded
    /// already.
    async fn record_firing(
        &self,
        firing: &Firing,
        run: Option<&RunRecord>,
    ) -> Result<bool, StoreError>;
    /// Starts the queued firing at `fire_ms` of schedule `schedule_id` with `run`: the
    /// firing becomes `started` with its run, atomically; `false`, with nothing written,
    /// when it is not queued any more.
    async fn start_queued_firing(
        &self,
        schedule_id: &str,
        fire_ms: i64,
        run: &RunRecord,
    ) -> Result<bool, StoreError>;
    /// The firings of schedule `schedule_id`, latest fire time first, at most `limit`.
    async fn firings(&self, schedule_id: &str, limit: usize) -> Result<Vec<Firing>, StoreError>;
    /// Stores webhook `h`: a new one (`create`) or a replacement.
    async fn put_hook(&self, h: &Hook, create: bool) -> Result<(), StoreError>;
    /// The webhook called `name`.
    async fn hook(&self, name: &str) -> Result<Option<Hook>, StoreError>;
    /// Every webhook, by name.
    async fn hooks(&self) -> Result<Vec<Hook>, StoreError>;
    /// Removes webhook `name`; whether it existed.
    async fn delete_hook(&self, name: &str) -> Result<bool, StoreError>;
    /// Paused runs whose timer is due at or before `until_ms` ([`RunRecord::wake_ms`]),
    /// earliest first, at most `limit`.
    async fn due_timers(&self, until_ms: i64, limit: usize) -> Result<Vec<DueTimer>, StoreError>;
}
