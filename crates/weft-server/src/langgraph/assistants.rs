//! Assistants: the store's named flows, each under its name (LangGraph's clients pass a
//! graph's name where they take an assistant id).

use super::{LgError, time};
use crate::App;
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use serde::Deserialize;
use serde_json::{Value, json};
use weft_core::ports::FlowVersion;

/// The flow an assistant id names: the latest version of the stored flow of that name.
pub(crate) async fn flow_of(app: &App, id: &str) -> Result<FlowVersion, LgError> {
    app.engine
        .store()
        .flow_version(id, None)
        .await?
        .ok_or_else(|| LgError::not_found("Assistant", id))
}

/// An assistant as LangGraph's clients read one.
fn assistant(v: &FlowVersion) -> Value {
    json!({
        "assistant_id": v.name,
        "graph_id": v.name,
        "name": v.name,
        "description": null,
        "config": {},
        "context": {},
        "metadata": {"flow_id": v.flow_id},
        "version": v.version,
        "created_at": time(v.created_ms),
        "updated_at": time(v.created_ms),
    })
}

/// `POST /assistants/search`.
#[derive(Deserialize, Default)]
pub(crate) struct Search {
    graph_id: Option<String>,
    name: Option<String>,
    #[serde(default = "fifty")]
    limit: usize,
    #[serde(default)]
    offset: usize,
}

pub(crate) fn fifty() -> usize {
    50
}

pub(crate) async fn search(
    State(app): State<App>,
    body: Result<Json<Search>, JsonRejection>,
) -> Result<Json<Vec<Value>>, LgError> {
    let Json(q) = body?;
    let mut flows = app.engine.store().named_flows().await?;
    flows.sort_by(|a, b| b.created_ms.cmp(&a.created_ms).then(a.name.cmp(&b.name)));
    let wanted = |v: &FlowVersion| {
        q.graph_id.as_ref().is_none_or(|g| *g == v.name)
            && q.name.as_ref().is_none_or(|n| v.name.contains(n.as_str()))
    };
    Ok(Json(
        flows
            .iter()
            .filter(|v| wanted(v))
            .skip(q.offset)
            .take(q.limit)
            .map(assistant)
            .collect(),
    ))
}

/// `GET /assistants/{id}`.
pub(crate) async fn show(
    State(app): State<App>,
    Path(id): Path<String>,
) -> Result<Json<Value>, LgError> {
    Ok(Json(assistant(&flow_of(&app, &id).await?)))
}

/// `GET /assistants/{id}/graph`: the flow drawn as nodes and edges, as `weft graph` and
/// `/v1/flows/{id}` draw it.
pub(crate) async fn graph(
    State(app): State<App>,
    Path(id): Path<String>,
) -> Result<Json<Value>, LgError> {
    let v = flow_of(&app, &id).await?;
    let checked = crate::flows::stored(&app, &v.flow_id).await?;
    Ok(Json(json!(checked.diagram())))
}

/// `GET /assistants/{id}/schemas`: Weft flows declare no JSON Schema for their input,
/// state or output, so each is `null` (LangGraph's clients then show a free-form input);
/// the flow must still load.
pub(crate) async fn schemas(
    State(app): State<App>,
    Path(id): Path<String>,
) -> Result<Json<Value>, LgError> {
    let v = flow_of(&app, &id).await?;
    crate::flows::stored(&app, &v.flow_id).await?;
    Ok(Json(json!({
        "graph_id": v.name,
        "input_schema": null,
        "output_schema": null,
        "state_schema": null,
        "config_schema": null,
        "context_schema": null,
    })))
}
