//! Managing schedules and webhooks, the same from every door (the CLI, the HTTP API,
//! the MCP tools, the page): what a request may name, how it is checked, and how a
//! schedule is shown (with its next fire times and its recent firings).

use crate::cron::CronTimes;
use crate::launch::{LaunchError, Launcher};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use weft_core::ports::{
    CatchUp, Firing, FiringOutcome, Hook, HookAuth, Overlap, Schedule, StoreError, TriggerStore,
};

/// How many next fire times a schedule is shown with.
pub const SHOWN_NEXT: usize = 5;

/// A new schedule, as a request names it.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewSchedule {
    /// Its id (default: the flow's name, then a number if taken).
    pub id: Option<String>,
    /// The stored flow's name (`weft schedules add FILE` stores one).
    pub flow: String,
    /// The flow's version (default: its latest when each firing happens).
    pub version: Option<u32>,
    /// The cron expression: five fields (`0 9 * * MON-FRI`) or six with seconds first.
    pub cron: String,
    /// The IANA time zone it is read in (default `UTC`).
    pub tz: Option<String>,
    /// The input of every run (default `{}`).
    pub input: Option<Value>,
    /// `skip` (default), `queue` or `cancel-previous`: what a firing does while the
    /// previous run goes on.
    pub overlap: Option<Overlap>,
    /// `last` (default), `none` or `all`: what it starts for firings it missed.
    pub catch_up: Option<CatchUp>,
    /// Start each firing up to this long after its time (`30s`), the same delay in
    /// every process.
    pub jitter: Option<String>,
}

/// Why a request to manage a trigger is refused.
#[derive(Debug, thiserror::Error)]
pub enum ManageError {
    /// The request names something invalid: answered `400` with the reason.
    #[error("{0}")]
    Invalid(String),
    /// No such schedule: `404`.
    #[error("no schedule called {}", crate::quoted(.0))]
    NoSchedule(String),
    /// No such webhook: `404`.
    #[error("no webhook called {}", crate::quoted(.0))]
    NoHook(String),
    /// The id or name is taken: `409`.
    #[error("{0}")]
    Taken(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn triggers(launcher: &Launcher) -> Result<&dyn TriggerStore, ManageError> {
    launcher
        .store()
        .triggers()
        .ok_or_else(|| ManageError::Invalid("this store keeps no schedules or webhooks".into()))
}

/// Checks `new` and stores it as a schedule beginning at `now_ms`.
pub async fn add_schedule(
    launcher: &Launcher,
    new: NewSchedule,
    now_ms: i64,
) -> Result<Schedule, ManageError> {
    let tz = new.tz.unwrap_or_else(|| "UTC".into());
    let cron = CronTimes::parse(&new.cron, &tz).map_err(ManageError::Invalid)?;
    if cron.next_after(now_ms).is_none() {
        return Err(ManageError::Invalid(format!(
            "{} never fires after now (a date that does not exist, or a year gone by)",
            crate::quoted(&new.cron)
        )));
    }
    let jitter_ms = match &new.jitter {
        Some(text) => humantime::parse_duration(text)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .map_err(|e| {
                ManageError::Invalid(format!(
                    "`{text}` is not a duration ({e}); write like `30s`"
                ))
            })?,
        None => 0,
    };
    check_name("flow", &new.flow)?;
    let t = triggers(launcher)?;
    let id = match new.id {
        Some(id) => {
            check_name("schedule id", &id)?;
            id
        }
        None => free_id(t, &new.flow).await?,
    };
    let s = Schedule {
        id,
        flow: new.flow,
        version: new.version,
        cron: new.cron,
        tz,
        input: new.input.unwrap_or_else(|| json!({})),
        overlap: new.overlap.unwrap_or_default(),
        catch_up: new.catch_up.unwrap_or_default(),
        jitter_ms,
        paused: false,
        created_ms: now_ms,
        updated_ms: now_ms,
        since_ms: now_ms,
    };
    t.put_schedule(&s, true).await.map_err(|e| match e {
        StoreError::Conflict(_) => ManageError::Taken(format!(
            "a schedule called {} exists already",
            crate::quoted(&s.id)
        )),
        e => e.into(),
    })?;
    Ok(s)
}

/// Ids and names appear in URLs and commands: letters, digits, `-`, `_`, `.`.
fn check_name(what: &str, name: &str) -> Result<(), ManageError> {
    let ok = !name.is_empty()
        && name.len() <= 100
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(ManageError::Invalid(format!(
            "{} is not a {what}: use 1 to 100 letters, digits, `-`, `_` or `.`",
            crate::quoted(name)
        )))
    }
}

/// `base`, or `base-2`, `base-3`, ... whichever is free.
async fn free_id(t: &dyn TriggerStore, base: &str) -> Result<String, ManageError> {
    for n in 1.. {
        let id = if n == 1 {
            base.to_owned()
        } else {
            format!("{base}-{n}")
        };
        if t.schedule(&id).await?.is_none() {
            return Ok(id);
        }
    }
    unreachable!("some id is free")
}

/// The schedule `id`.
pub async fn schedule(launcher: &Launcher, id: &str) -> Result<Schedule, ManageError> {
    triggers(launcher)?
        .schedule(id)
        .await?
        .ok_or_else(|| ManageError::NoSchedule(id.to_owned()))
}

/// Pauses (`paused`) or resumes schedule `id` at `now_ms`. A resumed schedule fires
/// from now on: what it slept through while paused is not missed.
pub async fn set_paused(
    launcher: &Launcher,
    id: &str,
    paused: bool,
    now_ms: i64,
) -> Result<Schedule, ManageError> {
    let mut s = schedule(launcher, id).await?;
    if s.paused != paused {
        s.paused = paused;
        s.updated_ms = now_ms;
        if !paused {
            s.since_ms = now_ms;
        }
        triggers(launcher)?.put_schedule(&s, false).await?;
    }
    Ok(s)
}

/// Deletes schedule `id` and its firings (their runs stay).
pub async fn delete_schedule(launcher: &Launcher, id: &str) -> Result<(), ManageError> {
    if triggers(launcher)?.delete_schedule(id).await? {
        Ok(())
    } else {
        Err(ManageError::NoSchedule(id.to_owned()))
    }
}

/// Starts schedule `id`'s flow now, out of schedule: recorded as a `triggered` firing.
pub async fn trigger_now(
    launcher: &Launcher,
    id: &str,
    now_ms: i64,
) -> Result<Firing, ManageError> {
    let s = schedule(launcher, id).await?;
    let run = launcher
        .new_run(&s.flow, s.version, s.input.clone())
        .await
        .map_err(|e| match e {
            LaunchError::Flow(m) => ManageError::Invalid(m),
            LaunchError::Store(m) => ManageError::Store(StoreError::backend("starting a run", m)),
        })?;
    let mut at = now_ms;
    loop {
        let firing = Firing {
            schedule_id: s.id.clone(),
            fire_ms: at,
            outcome: FiringOutcome::Triggered,
            run_id: Some(run.id.clone()),
            missed: 0,
            at_ms: now_ms,
            error: None,
        };
        // Two triggers in one millisecond: the second takes the next one.
        if triggers(launcher)?
            .record_firing(&firing, Some(&run))
            .await?
        {
            launcher.start(run.id.clone());
            return Ok(firing);
        }
        at += 1;
    }
}

/// Schedule `s` as the doors show it: its fields, whether its expression still reads,
/// its next fire times (Unix ms and in its zone) and `firings`, latest first.
pub fn describe(s: &Schedule, firings: &[Firing], now_ms: i64) -> Value {
    let mut shown = serde_json::to_value(s).unwrap_or(Value::Null);
    let next: Vec<Value> = match CronTimes::parse(&s.cron, &s.tz) {
        Ok(cron) if !s.paused => cron
            .upcoming(now_ms, SHOWN_NEXT)
            .into_iter()
            .map(|t| json!({"fire_ms": t, "at": cron.show(t)}))
            .collect(),
        Ok(_) => Vec::new(),
        Err(e) => {
            shown["problem"] = json!(e);
            Vec::new()
        }
    };
    shown["next"] = Value::Array(next);
    shown["firings"] = serde_json::to_value(firings).unwrap_or(Value::Null);
    shown
}

/// A new webhook, as a request names it.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewHook {
    /// Its name: `POST /v1/hooks/{name}` starts its runs.
    pub name: String,
    /// The stored flow's name.
    pub flow: String,
    /// The flow's version (default: its latest at each delivery).
    pub version: Option<u32>,
    /// `hmac` (default: a `Weft-Signature` header) or `bearer`.
    pub auth: Option<HookAuth>,
    /// The shared secret (default: a new random one, shown once).
    pub secret: Option<String>,
    /// A dotted field of the JSON body whose value tells deliveries apart (`id`,
    /// `delivery.id`): a second delivery with the same value names the first's run.
    pub dedupe_field: Option<String>,
}

/// Checks `new` and stores it; the hook, with its secret.
pub async fn add_hook(launcher: &Launcher, new: NewHook, now_ms: i64) -> Result<Hook, ManageError> {
    check_name("webhook name", &new.name)?;
    check_name("flow", &new.flow)?;
    let secret = match new.secret {
        Some(s) if s.len() >= 16 => s,
        Some(_) => {
            return Err(ManageError::Invalid(
                "a webhook secret has at least 16 characters (leave it out for a random one)"
                    .into(),
            ));
        }
        None => hex::encode(rand::random::<[u8; 32]>()),
    };
    let hook = Hook {
        name: new.name,
        flow: new.flow,
        version: new.version,
        secret,
        auth: new.auth.unwrap_or_default(),
        dedupe_field: new.dedupe_field,
        created_ms: now_ms,
    };
    triggers(launcher)?
        .put_hook(&hook, true)
        .await
        .map_err(|e| match e {
            StoreError::Conflict(_) => {
                ManageError::Taken(format!("a webhook called `{}` exists already", hook.name))
            }
            e => e.into(),
        })?;
    Ok(hook)
}

/// Webhook `h` as the doors list it: everything but its secret.
pub fn describe_hook(h: &Hook) -> Value {
    let mut shown = serde_json::to_value(h).unwrap_or(Value::Null);
    if let Some(m) = shown.as_object_mut() {
        m.remove("secret");
        m.insert("url".into(), json!(format!("/v1/hooks/{}", h.name)));
    }
    shown
}

/// Deletes webhook `name`.
pub async fn delete_hook(launcher: &Launcher, name: &str) -> Result<(), ManageError> {
    if triggers(launcher)?.delete_hook(name).await? {
        Ok(())
    } else {
        Err(ManageError::NoHook(name.to_owned()))
    }
}

/// Whether `auth` names a known way (for doors that take it as text).
pub fn parse_auth(text: &str) -> Result<HookAuth, ManageError> {
    match text {
        "hmac" => Ok(HookAuth::Hmac),
        "bearer" => Ok(HookAuth::Bearer),
        other => Err(ManageError::Invalid(format!(
            "{} is not a webhook auth: use `hmac` or `bearer`",
            crate::quoted(other)
        ))),
    }
}
