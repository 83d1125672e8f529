//! `/v1/hooks`: webhooks that start runs of stored flows. Managing them takes the
//! server's token; a delivery (`POST /v1/hooks/{name}`) takes the hook's own signature
//! or bearer secret instead, since the services that call it hold no Weft token.

use crate::App;
use crate::problem::{Params, Problem};
use crate::runs::{Wait, accepted, bad_body, idempotency};
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use serde_json::{Value, json};
use weft_core::event::now_ms;
use weft_core::ports::{Hook, StoreError};
use weft_triggers::Counters;
use weft_triggers::hooks::{self, SIGNATURE_HEADER};
use weft_triggers::launch::LaunchError;
use weft_triggers::manage::{self, ManageError, NewHook};

pub(crate) async fn create(
    State(app): State<App>,
    body: Result<Json<NewHook>, JsonRejection>,
) -> Result<(StatusCode, Json<Value>), Problem> {
    let Json(new) = body.map_err(bad_body)?;
    let hook = manage::add_hook(&app.launcher, new, now_ms() as i64).await?;
    let mut shown = manage::describe_hook(&hook);
    // The one time the secret is shown: the caller configures the sender with it.
    shown["secret"] = json!(hook.secret);
    Ok((StatusCode::CREATED, Json(shown)))
}

pub(crate) async fn list(State(app): State<App>) -> Result<Json<Value>, Problem> {
    let hooks = app.triggers()?.hooks().await.map_err(store)?;
    let shown: Vec<Value> = hooks.iter().map(manage::describe_hook).collect();
    Ok(Json(json!({ "hooks": shown })))
}

pub(crate) async fn delete(
    State(app): State<App>,
    Path(name): Path<String>,
) -> Result<StatusCode, Problem> {
    manage::delete_hook(&app.launcher, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}

fn store(e: StoreError) -> Problem {
    ManageError::Store(e).into()
}

/// `POST /v1/hooks/{name}`: checks the delivery's signature or token and starts a run
/// of the hook's flow with the body as input (JSON, else the text as a string).
pub(crate) async fn deliver(
    State(app): State<App>,
    Path(name): Path<String>,
    Params(wait): Params<Wait>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), Problem> {
    let hook = app
        .triggers()?
        .hook(&name)
        .await
        .map_err(store)?
        .ok_or_else(|| Problem::from(ManageError::NoHook(name.clone())))?;
    let verified = verify(&app, &hook, &headers, &body)?;
    let input = input_of(&headers, &body)?;
    let key = idempotency::key(&headers)?;
    let dedupe = hook
        .dedupe_field
        .as_deref()
        .and_then(|field| hooks::dedupe_value(&input, field));
    let run_id = hooks::delivery_run_id(&hook.name, key.as_deref(), dedupe.as_deref(), &verified);
    let mut run = app
        .launcher
        .new_run(&hook.flow, hook.version, input)
        .await
        .map_err(|e| match e {
            LaunchError::Flow(m) => {
                Problem::new(StatusCode::UNPROCESSABLE_ENTITY, "flow unavailable").detail(m)
            }
            LaunchError::Store(m) => {
                Problem::new(StatusCode::SERVICE_UNAVAILABLE, "store unavailable").detail(m)
            }
        })?;
    if let Some(id) = run_id {
        run.id = id;
    }
    let runs = app.engine.store();
    match runs.create_run(&run).await {
        Ok(()) => {}
        // The same delivery again: the run the first one started.
        Err(StoreError::Conflict(_)) => {
            let first = runs.get_run(&run.id).await.map_err(store)?;
            let status = first.map_or("queued", |r| r.status.as_str());
            return Ok((
                StatusCode::OK,
                Json(json!({"run_id": run.id, "status": status, "duplicate": true})),
            ));
        }
        Err(e) => return Err(store(e)),
    }
    Counters::add(&app.counters.hook_started, 1);
    let id = run.id.clone();
    app.launcher.start(id.clone());
    let Some(wait) = wait.duration() else {
        return Ok(accepted(id, "queued"));
    };
    match tokio::time::timeout(wait, app.engine.follow_elsewhere(id.clone())).await {
        Ok(Ok(Ok(result))) => Ok((StatusCode::OK, Json(result.to_json()))),
        Ok(Ok(Err(e))) => Err(e.into()),
        _ => Ok(accepted(id, "queued")),
    }
}

/// The hook's proof from the headers; a refusal is counted and answered `401`.
fn verify(
    app: &App,
    hook: &Hook,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<hooks::Verified, Problem> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let bearer = text(header::AUTHORIZATION.as_str()).and_then(|v| v.strip_prefix("Bearer "));
    let now_s = (now_ms() / 1000) as i64;
    hooks::verify(hook, text(SIGNATURE_HEADER), bearer, body, now_s).map_err(|e| {
        Counters::add(&app.counters.hook_rejected, 1);
        eprintln!("weft: webhook {}: refused: {e}", hook.name);
        Problem::new(StatusCode::UNAUTHORIZED, "unauthorized").detail(e.to_string())
    })
}

/// A JSON body as its value; any other (form, text) as its text.
fn input_of(headers: &HeaderMap, body: &[u8]) -> Result<Value, Problem> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| {
            let t = t.split(';').next().unwrap_or("").trim();
            t == "application/json" || t.ends_with("+json")
        });
    if json {
        serde_json::from_slice(body).map_err(|e| {
            Problem::new(StatusCode::BAD_REQUEST, "invalid request")
                .detail(format!("the body is not JSON: {e}"))
        })
    } else {
        Ok(Value::String(String::from_utf8_lossy(body).into_owned()))
    }
}
