//! The schedule tools: a model schedules a saved flow on a cron expression, lists the
//! schedules with their next fire times and firings, and pauses, resumes, deletes or
//! triggers one. A `weft serve` or `weft worker` on the same database fires them.

use crate::WeftMcp;
use crate::failure::Failure;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use weft_core::event::now_ms;
use weft_triggers::Launcher;
use weft_triggers::manage::{self, ManageError, NewSchedule};

/// `list_schedules`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListSchedules {
    /// One schedule's id, for it with its last 20 firings; leave out for all.
    pub(crate) id: Option<String>,
}

/// What `change_schedule` does.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Change {
    /// Stop it firing.
    Pause,
    /// Fire it again, from now on.
    Resume,
    /// Delete it (its runs stay).
    Delete,
    /// Start its flow now, out of schedule.
    Trigger,
}

/// `change_schedule`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChangeSchedule {
    /// The schedule's id.
    pub(crate) id: String,
    /// What to do.
    pub(crate) action: Change,
}

impl From<ManageError> for Failure {
    fn from(e: ManageError) -> Failure {
        let hint = match &e {
            ManageError::NoSchedule(_) => Some("list_schedules shows the schedules there are"),
            ManageError::Invalid(_) => Some("the tool's input schema names each field"),
            _ => None,
        };
        let failure = Failure::new(e.to_string());
        match hint {
            Some(h) => failure.hint(h),
            None => failure,
        }
    }
}

/// The launcher of this server's service: a triggered run starts here (within its run
/// limit), or waits for the workers when they drive the engine's runs.
fn launcher(mcp: &WeftMcp) -> Launcher {
    Launcher::new(mcp.service.clone())
}

fn now() -> i64 {
    now_ms() as i64
}

pub(crate) async fn add(mcp: &WeftMcp, new: NewSchedule) -> Result<Value, Failure> {
    let l = launcher(mcp);
    if mcp
        .engine
        .store()
        .flow_version(&new.flow, new.version)
        .await?
        .is_none()
    {
        return Err(Failure::new(format!(
            "no saved flow {}",
            crate::failure::quoted(&new.flow)
        ))
        .hint("save it first with save_flow; list_flows shows the saved ones"));
    }
    let s = manage::add_schedule(&l, new, now()).await?;
    Ok(manage::describe(&s, &[], now()))
}

pub(crate) async fn list(mcp: &WeftMcp, a: ListSchedules) -> Result<Value, Failure> {
    let l = launcher(mcp);
    let store = mcp.engine.store();
    let t = store
        .triggers()
        .ok_or_else(|| Failure::new("this database keeps no schedules"))?;
    if let Some(id) = a.id {
        let s = manage::schedule(&l, &id).await?;
        let firings = t.firings(&s.id, 20).await?;
        return Ok(manage::describe(&s, &firings, now()));
    }
    let mut shown = Vec::new();
    for s in t.schedules().await? {
        let firings = t.firings(&s.id, 3).await?;
        shown.push(manage::describe(&s, &firings, now()));
    }
    Ok(json!({ "schedules": shown }))
}

pub(crate) async fn change(mcp: &WeftMcp, a: ChangeSchedule) -> Result<Value, Failure> {
    let l = launcher(mcp);
    match a.action {
        Change::Pause | Change::Resume => {
            let paused = matches!(a.action, Change::Pause);
            let s = manage::set_paused(&l, &a.id, paused, now()).await?;
            Ok(manage::describe(&s, &[], now()))
        }
        Change::Delete => {
            manage::delete_schedule(&l, &a.id).await?;
            Ok(json!({"deleted": a.id}))
        }
        Change::Trigger => {
            let firing = manage::trigger_now(&l, &a.id, now()).await?;
            Ok(json!({"run_id": firing.run_id, "firing": firing}))
        }
    }
}
