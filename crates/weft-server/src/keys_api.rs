//! `/v1/keys`: an admin makes, lists and revokes its tenant's API keys.

use crate::App;
use crate::auth::Principal;
use crate::keys::{self, KeyError, NewKey};
use crate::problem::Problem;
use crate::runs::bad_body;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{Value, json};
use weft_engine::EngineError;

/// `POST /v1/keys`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewKeyBody {
    /// What to call the key.
    name: String,
    /// Its scopes: `flows:read`, `flows:write`, `runs:read`, `runs:write`,
    /// `approvals:write`, `schedules:write`, `hooks:write`, `audit:read`, `admin`.
    scopes: Vec<String>,
    /// How long it lasts (`30d`, `12h`), when not until revoked.
    expires: Option<String>,
}

pub(crate) async fn create(
    State(app): State<App>,
    Extension(principal): Extension<Principal>,
    body: Result<Json<NewKeyBody>, JsonRejection>,
) -> Result<(StatusCode, Json<Value>), Problem> {
    let Json(body) = body.map_err(bad_body)?;
    let expires_in = body
        .expires
        .as_deref()
        .map(humantime::parse_duration)
        .transpose()
        .map_err(|e| invalid(format!("`expires` is a duration such as 30d or 12h: {e}")))?;
    let new = NewKey {
        name: body.name,
        tenant: principal.tenant.clone(),
        scopes: keys::parse_scopes(&body.scopes).map_err(key_problem)?,
        expires_in,
    };
    let (key, secret) = keys::create(app.engine.store().as_ref(), new)
        .await
        .map_err(key_problem)?;
    app.keys.forget();
    let mut shown = keys::describe(&key);
    shown["secret"] = json!(secret);
    Ok((StatusCode::CREATED, Json(shown)))
}

pub(crate) async fn list(
    State(app): State<App>,
    Extension(principal): Extension<Principal>,
) -> Result<Json<Value>, Problem> {
    let keys = store_keys(&app)?.keys().await.map_err(EngineError::from)?;
    let shown: Vec<Value> = keys
        .iter()
        .filter(|k| k.tenant == principal.tenant)
        .map(keys::describe)
        .collect();
    Ok(Json(json!({"keys": shown})))
}

pub(crate) async fn revoke(
    State(app): State<App>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<Value>, Problem> {
    let store = store_keys(&app)?;
    let theirs = store
        .keys()
        .await
        .map_err(EngineError::from)?
        .into_iter()
        .any(|k| k.id == id && k.tenant == principal.tenant);
    // Another tenant's key is as absent as one that never was.
    if !theirs
        || !store
            .revoke_key(&id, keys::now_ms())
            .await
            .map_err(EngineError::from)?
    {
        return Err(Problem::new(StatusCode::NOT_FOUND, "no such key")
            .detail(format!("no key with id `{id}`; GET /v1/keys lists them")));
    }
    app.keys.forget();
    Ok(Json(json!({"id": id, "revoked": true})))
}

fn store_keys(app: &App) -> Result<&dyn weft_core::ports::KeyStore, Problem> {
    app.engine.store().keys().ok_or_else(|| {
        Problem::new(StatusCode::NOT_IMPLEMENTED, "not supported")
            .detail("this server's store keeps no API keys")
    })
}

fn invalid(detail: String) -> Problem {
    Problem::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid key").detail(detail)
}

fn key_problem(e: KeyError) -> Problem {
    match e {
        KeyError::Invalid(m) => invalid(m),
        KeyError::Store(e) => EngineError::from(e).into(),
    }
}
