//! Flow tools: validate a text, save named versions, read one, list them, and edit one
//! by JSON Patch against its document as JSON.

use crate::WeftMcp;
use crate::args::{self, EditFlow, FlowView, GetFlow, SaveFlow, ValidateFlow};
use crate::failure::Failure;
use serde_json::{Value, json};
use weft_core::Diagnostic;
use weft_core::ports::{FlowSource, FlowVersion};
use weft_service::Checked;

/// The name diagnostics give a flow's text.
const SHOWN_AS: &str = "flow";

/// Loads and validates `text`; its problems, located, when it is invalid.
pub(crate) fn check(
    mcp: &WeftMcp,
    text: &str,
    dialect: Option<&str>,
) -> Result<Checked, Vec<Diagnostic>> {
    mcp.service.check(text, dialect, Some(SHOWN_AS))
}

pub(crate) fn validate(mcp: &WeftMcp, a: ValidateFlow) -> Result<Value, Failure> {
    let text = args::source(&a.source)?;
    Ok(match check(mcp, text, a.dialect.as_deref()) {
        Ok(c) => json!({
            "valid": true,
            "dialect": c.dialect(),
            "name": c.flow().name,
            "diagnostics": c.warnings(),
            "graph": c.diagram(),
        }),
        Err(diagnostics) => json!({"valid": false, "diagnostics": diagnostics}),
    })
}

/// Stores `text` and makes it the next version of `name`: checked first unless `force`.
async fn store_version(
    mcp: &WeftMcp,
    name: &str,
    text: &str,
    dialect: Option<&str>,
    force: bool,
) -> Result<Value, Failure> {
    let (source, warnings) = match check(mcp, text, dialect) {
        Ok(c) => (c.source(), c.warnings().to_vec()),
        Err(diagnostics) if !force => return Err(Failure::invalid_flow(diagnostics)),
        Err(diagnostics) => {
            let dialect = dialect.unwrap_or("native");
            let source = FlowSource {
                id: FlowSource::id_of(dialect, text),
                name: name.to_owned(),
                dialect: dialect.to_owned(),
                text: text.to_owned(),
                created_ms: now_ms(),
            };
            (source, diagnostics)
        }
    };
    let saved = mcp
        .engine
        .save_flow(&source, name)
        .await?
        .ok_or_else(|| Failure::new("a flow is saved under a name that is not empty"))?;
    Ok(json!({
        "name": saved.name,
        "version": saved.version,
        "flow_id": saved.flow_id,
        "dialect": source.dialect,
        "diagnostics": warnings,
    }))
}

pub(crate) async fn save(mcp: &WeftMcp, a: SaveFlow) -> Result<Value, Failure> {
    let name = args::name(&a.name)?;
    let text = args::source(&a.source)?;
    store_version(mcp, name, text, a.dialect.as_deref(), a.force).await
}

/// The version `version` (latest when none) of flow `name`, and its text.
pub(crate) async fn saved(
    mcp: &WeftMcp,
    name: &str,
    version: Option<u32>,
) -> Result<(FlowVersion, FlowSource), Failure> {
    let Some(found) = find(mcp, name, version).await? else {
        let what = match version {
            Some(n) => format!(
                "no version {n} of a flow named {}",
                crate::failure::quoted(name)
            ),
            None => format!("no flow named {}", crate::failure::quoted(name)),
        };
        return Err(Failure::new(what).hint("list_flows shows the saved flows and their versions"));
    };
    Ok(found)
}

/// [`saved`], or `None` when there is no such flow or version.
async fn find(
    mcp: &WeftMcp,
    name: &str,
    version: Option<u32>,
) -> Result<Option<(FlowVersion, FlowSource)>, Failure> {
    let store = mcp.engine.store();
    let Some(v) = store.flow_version(name, version).await? else {
        return Ok(None);
    };
    let source = store.get_source(&v.flow_id).await?.ok_or_else(|| {
        Failure::new(format!(
            "the text of {} version {} is missing",
            crate::failure::quoted(name),
            v.version
        ))
    })?;
    Ok(Some((v, source)))
}

pub(crate) async fn get(mcp: &WeftMcp, a: GetFlow) -> Result<Value, Failure> {
    let (v, source) = saved(mcp, args::name(&a.name)?, a.version).await?;
    let mut shown = json!({"name": v.name, "version": v.version, "flow_id": v.flow_id, "dialect": source.dialect});
    match a.view {
        FlowView::Source => shown["source"] = Value::String(source.text),
        FlowView::Structure => {
            shown["document"] = document(&source.text)?;
            shown["graph"] = match check(mcp, &source.text, Some(&source.dialect)) {
                Ok(c) => json!(c.diagram()),
                Err(_) => Value::Null,
            };
        }
    }
    Ok(shown)
}

pub(crate) async fn list(mcp: &WeftMcp) -> Result<Value, Failure> {
    let store = mcp.engine.store();
    let mut flows = Vec::new();
    for v in store.named_flows().await? {
        let dialect = store.get_source(&v.flow_id).await?.map(|s| s.dialect);
        flows.push(json!({"name": v.name, "version": v.version, "dialect": dialect, "saved_ms": v.created_ms}));
    }
    Ok(json!({"flows": flows}))
}

pub(crate) async fn edit(mcp: &WeftMcp, a: EditFlow) -> Result<Value, Failure> {
    let name = args::name(&a.name)?;
    let (mut doc, was_json, dialect) = match find(mcp, name, None).await? {
        Some((_, source)) => {
            let json = source.text.trim_start().starts_with('{');
            (document(&source.text)?, json, Some(source.dialect))
        }
        // A new flow starts from an empty document.
        None => (json!({}), false, a.dialect.clone()),
    };
    let patch: json_patch::Patch = serde_json::from_value(Value::Array(a.patch)).map_err(|e| {
        Failure::new(format!(
            "the patch is not an RFC 6902 JSON Patch: {}",
            crate::failure::cut(e)
        ))
        .hint(
            r#"send a list of operations, e.g. [{"op": "replace", "path": "/name", "value": "triage"}]"#,
        )
    })?;
    json_patch::patch(&mut doc, &patch).map_err(|e| {
        Failure::new(format!("the patch does not apply: {}", crate::failure::cut(e)))
            .hint("paths are JSON Pointers into the document as get_flow view=structure shows it; `-` appends to a list; nothing was saved")
    })?;
    let text = if was_json {
        serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
    } else {
        serde_saphyr::to_string(&doc)
            .map_err(|e| Failure::new(format!("cannot write the flow as YAML: {e}")))?
    };
    let mut saved =
        store_version(mcp, name, args::source(&text)?, dialect.as_deref(), a.force).await?;
    saved["source"] = Value::String(text);
    Ok(saved)
}

/// A flow's text as the JSON document it is.
fn document(text: &str) -> Result<Value, Failure> {
    weft_dialects::source_map::parse(text)
        .map(|(doc, _)| doc)
        .map_err(|d| Failure::invalid_flow(vec![d]))
}

/// Now, in Unix milliseconds, as the store keeps times.
pub(crate) fn now_ms() -> i64 {
    weft_core::event::now_ms() as i64
}
