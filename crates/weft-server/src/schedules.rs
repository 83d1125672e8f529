//! `/v1/schedules`: cron schedules of stored flows, with their next fire times and the
//! runs their firings started (see `weft_triggers`).

use crate::App;
use crate::problem::Problem;
use crate::runs::bad_body;
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::{Value, json};
use weft_core::event::now_ms;
use weft_triggers::manage::{self, ManageError, NewSchedule};

/// How many recent firings a listed schedule shows, and a shown one.
const LISTED_FIRINGS: usize = 5;
const SHOWN_FIRINGS: usize = 50;

impl From<ManageError> for Problem {
    fn from(e: ManageError) -> Problem {
        let (status, title) = match &e {
            ManageError::Invalid(_) => (StatusCode::BAD_REQUEST, "invalid request"),
            ManageError::NoSchedule(_) => (StatusCode::NOT_FOUND, "no such schedule"),
            ManageError::NoHook(_) => (StatusCode::NOT_FOUND, "no such webhook"),
            ManageError::Taken(_) => (StatusCode::CONFLICT, "taken"),
            ManageError::Store(_) => (StatusCode::SERVICE_UNAVAILABLE, "store unavailable"),
        };
        Problem::new(status, title).detail(e.to_string())
    }
}

fn now() -> i64 {
    now_ms() as i64
}

/// Schedule `id` with its next fire times and its `limit` latest firings.
async fn shown(app: &App, id: &str, limit: usize) -> Result<Value, Problem> {
    let s = manage::schedule(&app.launcher, id).await?;
    let firings = app.triggers()?.firings(&s.id, limit).await.map_err(store)?;
    Ok(manage::describe(&s, &firings, now()))
}

fn store(e: weft_core::ports::StoreError) -> Problem {
    ManageError::Store(e).into()
}

pub(crate) async fn create(
    State(app): State<App>,
    body: Result<Json<NewSchedule>, JsonRejection>,
) -> Result<(StatusCode, Json<Value>), Problem> {
    let Json(new) = body.map_err(bad_body)?;
    let s = manage::add_schedule(&app.launcher, new, now()).await?;
    Ok((StatusCode::CREATED, Json(manage::describe(&s, &[], now()))))
}

pub(crate) async fn list(State(app): State<App>) -> Result<Json<Value>, Problem> {
    let t = app.triggers()?;
    let mut listed = Vec::new();
    for s in t.schedules().await.map_err(store)? {
        let firings = t.firings(&s.id, LISTED_FIRINGS).await.map_err(store)?;
        listed.push(manage::describe(&s, &firings, now()));
    }
    Ok(Json(json!({ "schedules": listed })))
}

pub(crate) async fn show(
    State(app): State<App>,
    Path(id): Path<String>,
) -> Result<Json<Value>, Problem> {
    Ok(Json(shown(&app, &id, SHOWN_FIRINGS).await?))
}

pub(crate) async fn delete(
    State(app): State<App>,
    Path(id): Path<String>,
) -> Result<StatusCode, Problem> {
    manage::delete_schedule(&app.launcher, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(crate) async fn pause(
    State(app): State<App>,
    Path(id): Path<String>,
) -> Result<Json<Value>, Problem> {
    manage::set_paused(&app.launcher, &id, true, now()).await?;
    Ok(Json(shown(&app, &id, LISTED_FIRINGS).await?))
}

pub(crate) async fn resume(
    State(app): State<App>,
    Path(id): Path<String>,
) -> Result<Json<Value>, Problem> {
    manage::set_paused(&app.launcher, &id, false, now()).await?;
    Ok(Json(shown(&app, &id, LISTED_FIRINGS).await?))
}

pub(crate) async fn trigger(
    State(app): State<App>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Value>), Problem> {
    let firing = manage::trigger_now(&app.launcher, &id, now()).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"run_id": firing.run_id, "firing": firing})),
    ))
}
