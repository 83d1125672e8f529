//! MCP resources: what a client can read without a tool call. Each dialect's reference
//! (`weft://dialects/{name}/reference`, Markdown) and JSON Schema
//! (`weft://dialects/{name}/schema`), each saved flow (`weft://flows/{name}`, its latest
//! version; `weft://flows/{name}/versions/{n}`), and each run (`weft://runs/{id}`, what
//! `get_run` answers).

use crate::WeftMcp;
use crate::failure::Failure;
use rmcp::ErrorData;
use rmcp::model::{ReadResourceResult, Resource, ResourceContents, ResourceTemplate};
use serde_json::Value;
use weft_core::ports::RunQuery;

const SCHEME: &str = "weft://";
/// How many of the newest runs the resource list names (each can be read by id).
const LISTED_RUNS: usize = 20;

/// The resources there are now: every dialect's reference and schema, every saved flow,
/// the newest runs.
pub(crate) async fn list(mcp: &WeftMcp) -> Result<Vec<Resource>, ErrorData> {
    let mut out = Vec::new();
    for d in weft_dialects::registry::dialects() {
        let name = d.name();
        out.push(
            Resource::new(
                format!("{SCHEME}dialects/{name}/reference"),
                format!("{name} reference"),
            )
            .with_description(d.summary())
            .with_mime_type("text/markdown"),
        );
        out.push(
            Resource::new(
                format!("{SCHEME}dialects/{name}/schema"),
                format!("{name} JSON Schema"),
            )
            .with_mime_type("application/json"),
        );
    }
    let store = mcp.engine.store();
    for v in store.named_flows().await.map_err(internal)? {
        out.push(
            Resource::new(
                format!("{SCHEME}flows/{}", v.name),
                format!("flow {}", v.name),
            )
            .with_description(format!("version {}", v.version))
            .with_mime_type("text/plain"),
        );
    }
    let runs = store
        .list_runs(&RunQuery::newest(LISTED_RUNS))
        .await
        .map_err(internal)?;
    for r in runs {
        out.push(
            Resource::new(
                format!("{SCHEME}runs/{}", r.id),
                format!("run {} ({})", r.id, r.flow_name),
            )
            .with_description(r.status.as_str())
            .with_mime_type("application/json"),
        );
    }
    Ok(out)
}

/// The URI templates of the resources that come and go.
pub(crate) fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(
            format!("{SCHEME}flows/{{name}}"),
            "saved flow (latest version)",
        )
        .with_mime_type("text/plain"),
        ResourceTemplate::new(
            format!("{SCHEME}flows/{{name}}/versions/{{version}}"),
            "saved flow, one version",
        )
        .with_mime_type("text/plain"),
        ResourceTemplate::new(
            format!("{SCHEME}runs/{{run_id}}"),
            "run (as get_run answers it)",
        )
        .with_mime_type("application/json"),
    ]
}

/// The resource at `uri`.
pub(crate) async fn read(mcp: &WeftMcp, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let path = uri.strip_prefix(SCHEME).ok_or_else(|| not_found(uri))?;
    let parts: Vec<&str> = path.split('/').collect();
    let (text, mime) = match parts.as_slice() {
        ["dialects", name, "reference"] => {
            (dialect(uri, name)?.reference().to_owned(), "text/markdown")
        }
        ["dialects", name, "schema"] => (pretty(&dialect(uri, name)?.schema()), "application/json"),
        ["flows", name] => (flow_text(mcp, uri, name, None).await?, "text/plain"),
        ["flows", name, "versions", n] => {
            let n: u32 = n.parse().map_err(|_| not_found(uri))?;
            (flow_text(mcp, uri, name, Some(n)).await?, "text/plain")
        }
        ["runs", id] => {
            let args = crate::args::GetRun {
                run_id: (*id).to_owned(),
                after_event: None,
            };
            let run = crate::runs::get(mcp, args)
                .await
                .map_err(|_| not_found(uri))?;
            (pretty(&run), "application/json")
        }
        _ => return Err(not_found(uri)),
    };
    Ok(ReadResourceResult::new(vec![
        ResourceContents::text(text, uri).with_mime_type(mime),
    ]))
}

fn dialect(uri: &str, name: &str) -> Result<&'static dyn weft_dialects::Dialect, ErrorData> {
    weft_dialects::registry::dialect(name).map_err(|_| not_found(uri))
}

async fn flow_text(
    mcp: &WeftMcp,
    uri: &str,
    name: &str,
    version: Option<u32>,
) -> Result<String, ErrorData> {
    let (_, source) = crate::flows::saved(mcp, name, version)
        .await
        .map_err(|_: Failure| not_found(uri))?;
    Ok(source.text)
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

fn not_found(uri: &str) -> ErrorData {
    ErrorData::resource_not_found(
        format!(
            "no resource {}: resources/list and resources/templates/list name them",
            crate::failure::quoted(uri)
        ),
        // The URI asked for, as SEP-2164 asks (a client matches the error to its read).
        (uri.len() <= 2048).then(|| serde_json::json!({ "uri": uri })),
    )
}

fn internal(e: weft_core::ports::StoreError) -> ErrorData {
    ErrorData::internal_error(format!("the run database failed: {e}"), None)
}
