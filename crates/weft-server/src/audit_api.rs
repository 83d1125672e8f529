//! `GET /v1/audit`: the tenant's audit log, newest first, a page at a time.

use crate::App;
use crate::auth::Principal;
use crate::problem::{Params, Problem};
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{Value, json};
use weft_core::ports::AuditQuery;
use weft_engine::EngineError;

/// The most entries one page holds.
const MAX_PAGE: usize = 1000;

/// `?limit=&before=`.
#[derive(Deserialize)]
pub(crate) struct Page {
    limit: Option<String>,
    before: Option<String>,
}

pub(crate) async fn list(
    State(app): State<App>,
    Extension(principal): Extension<Principal>,
    Params(page): Params<Page>,
) -> Result<Json<Value>, Problem> {
    let number = |what: &str, text: &Option<String>| -> Result<Option<i64>, Problem> {
        text.as_deref()
            .map(|t| {
                t.parse::<i64>().map_err(|_| {
                    Problem::new(StatusCode::BAD_REQUEST, "invalid request")
                        .detail(format!("`{what}` is a whole number, not `{t}`"))
                })
            })
            .transpose()
    };
    let limit = number("limit", &page.limit)?.map_or(50, |n| n.clamp(1, MAX_PAGE as i64) as usize);
    let query = AuditQuery {
        limit,
        before: number("before", &page.before)?,
        tenant: Some(principal.tenant.clone()),
    };
    let log = app.engine.store().audit().ok_or_else(|| {
        Problem::new(StatusCode::NOT_IMPLEMENTED, "not supported")
            .detail("this server's store keeps no audit log")
    })?;
    let entries = log.audit(&query).await.map_err(EngineError::from)?;
    let next = (entries.len() == limit)
        .then(|| entries.last().map(|e| e.seq))
        .flatten();
    Ok(Json(json!({"entries": entries, "next_before": next})))
}
