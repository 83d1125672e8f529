//! `/v1/flows`: check and store a flow's text in any dialect, list stored flows, read
//! one with its drawing. A flow's id is the content hash of its dialect and text, so
//! posting the same flow twice names the same flow; a flow with a name is also the next
//! version of that name (as `weft serve --flow` and MCP's `save_flow` make it), which
//! LangGraph's clients see as an assistant and schedules and hooks name.

use crate::App;
use crate::listing::{Listed, Paging};
use crate::problem::Params;
use crate::problem::Problem;
use crate::runs::bad_body;
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use weft_core::ports::Cursor;
use weft_engine::EngineError;
use weft_service::{Checked, FlowError};

/// `POST /v1/flows`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewFlow {
    /// The flow's text (YAML or JSON, any dialect).
    source: String,
    /// The dialect, when detection should not decide.
    dialect: Option<String>,
    /// The name the flow is saved under, as the next version of that name (default: the
    /// name the flow gives itself); also the text's name in diagnostics.
    name: Option<String>,
}

/// The stored flow `id`, checked again (a newer Weft may read it differently).
pub(crate) async fn stored(app: &App, id: &str) -> Result<Checked, Problem> {
    app.service.stored(id).await.map_err(|e| match e {
        FlowError::NoSuchId(id) => no_such_flow(&id),
        FlowError::Invalid(diagnostics) => Problem::invalid_flow(diagnostics),
        FlowError::Store(e) => EngineError::from(e).into(),
        other => Problem::new(StatusCode::NOT_FOUND, "no such flow").detail(other.to_string()),
    })
}

fn no_such_flow(id: &str) -> Problem {
    Problem::new(StatusCode::NOT_FOUND, "no such flow")
        .detail(format!("no flow with id `{id}`; POST /v1/flows stores one"))
}

pub(crate) async fn create(
    State(app): State<App>,
    body: Result<Json<NewFlow>, JsonRejection>,
) -> Result<(StatusCode, Json<Value>), Problem> {
    let Json(new) = body.map_err(bad_body)?;
    let checked = app
        .service
        .check(&new.source, new.dialect.as_deref(), new.name.as_deref())
        .map_err(Problem::invalid_flow)?;
    let mut source = checked.source();
    let known = app
        .engine
        .store()
        .get_source(&source.id)
        .await
        .map_err(EngineError::from)?
        .is_some();
    if let Some(name) = &new.name {
        source.name = name.clone();
    }
    let saved = app.engine.save_flow(&source, &source.name).await?;
    let status = if known {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((
        status,
        Json(json!({
            "flow_id": source.id,
            "name": source.name,
            "version": saved.map(|v| v.version),
            "dialect": source.dialect,
            "diagnostics": checked.warnings(),
            "graph": checked.diagram(),
        })),
    ))
}

pub(crate) async fn list(
    State(app): State<App>,
    Params(paging): Params<Paging>,
) -> Result<Json<Value>, Problem> {
    let (limit, after) = paging.resolve()?;
    let flows = app
        .engine
        .store()
        .list_sources(limit, after.as_ref())
        .await
        .map_err(EngineError::from)?;
    let listed = Listed::new(&flows, limit, |f| Cursor::after(f.created_ms, &f.id));
    let flows: Vec<Value> = flows
        .iter()
        .map(|f| json!({"flow_id": f.id, "name": f.name, "dialect": f.dialect, "created_ms": f.created_ms}))
        .collect();
    Ok(Json(listed.with("flows", flows)))
}

pub(crate) async fn show(
    State(app): State<App>,
    Path(id): Path<String>,
) -> Result<Json<Value>, Problem> {
    let source = app
        .engine
        .store()
        .get_source(&id)
        .await
        .map_err(EngineError::from)?
        .ok_or_else(|| no_such_flow(&id))?;
    let mut shown = json!({
        "flow_id": source.id,
        "name": source.name,
        "dialect": source.dialect,
        "created_ms": source.created_ms,
        "source": source.text,
    });
    // A flow stored by an older Weft that this one reads differently is still shown,
    // with why it no longer loads instead of its drawing.
    match app.service.check_source(&source) {
        Ok(checked) => {
            shown["graph"] = json!(checked.diagram());
            shown["diagnostics"] = json!(checked.warnings());
        }
        Err(diagnostics) => {
            shown["graph"] = Value::Null;
            shown["diagnostics"] = json!(diagnostics);
        }
    }
    Ok(Json(shown))
}
