//! `/flows`: the stored flows; `/new`: start a run of one (or of a flow pasted in, its
//! errors shown at their line), with its input as JSON.

use crate::layout::{self, PageError, Section};
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use maud::{Markup, PreEscaped, html};
use serde::Deserialize;
use weft_core::diagram::Diagram;
use weft_core::ports::FlowSource;
use weft_engine::Engine;

/// Stored flows offered in the list and the picker.
const FLOWS: usize = 200;

pub(crate) async fn list(State(engine): State<Engine>) -> Result<Response, PageError> {
    let flows = engine.store().list_sources(FLOWS, None).await?;
    Ok(layout::page(
        "Flows",
        Section::Flows,
        html! {
            h1 { "Flows" }
            p.muted { "Every flow a run was started from, or stored with " code { "POST /v1/flows" } ", by the hash of its text." }
            div.table-wrap {
                table.runs {
                    thead { tr { th scope="col" { "Name" } th scope="col" { "Dialect" } th scope="col" { "Stored" } th scope="col" { "Id" } } }
                    tbody {
                        @if flows.is_empty() {
                            tr { td colspan="4" .muted { "No flow is stored yet: paste one on " a href="/new" { "Start a run" } "." } }
                        }
                        @for f in &flows {
                            tr {
                                td { a href={ "/new?flow=" (f.id) } { (f.name) } }
                                td { (f.dialect) }
                                td { (layout::time(f.created_ms)) }
                                td { code { (&f.id[..f.id.len().min(12)]) } }
                            }
                        }
                    }
                }
            }
        },
    )
    .into_response())
}

#[derive(Deserialize)]
pub(crate) struct StartQuery {
    /// The stored flow to start.
    flow: Option<String>,
}

pub(crate) async fn start(
    State(engine): State<Engine>,
    Query(q): Query<StartQuery>,
) -> Result<Response, PageError> {
    let flows = engine.store().list_sources(FLOWS, None).await?;
    let chosen = match q.flow.as_deref().filter(|f| !f.is_empty()) {
        Some(id) => Some(
            engine
                .store()
                .get_source(id)
                .await?
                .ok_or_else(|| PageError::NotFound(format!("No stored flow `{id}`.")))?,
        ),
        None => None,
    };
    Ok(layout::page(
        "Start a run",
        Section::Start,
        html! {
            h1 { "Start a run" }
            form.pick method="get" action="/new" {
                label for="flow" { "A stored flow" }
                select #flow name="flow" data-navigate {
                    option value="" { "— choose —" }
                    @for f in &flows {
                        option value=(f.id) selected[chosen.as_ref().is_some_and(|c| c.id == f.id)] {
                            (f.name) " · " (f.dialect) " · " (crate::format::iso(f.created_ms))
                        }
                    }
                }
                noscript { button { "Show" } }
            }
            @if let Some(source) = &chosen { (chosen_flow(source)) }
            (paste_form())
        },
    )
    .into_response())
}

/// A stored flow ready to start: its drawing and its input.
fn chosen_flow(source: &FlowSource) -> Markup {
    let loaded = weft_dialects::load_str(&source.text, &source.name, None, Some(&source.dialect));
    let (drawing, input) = match &loaded {
        Ok(l) => (
            Some(Diagram::of(&l.flow).svg()),
            l.flow
                .input
                .clone()
                .unwrap_or(serde_json::Value::Object(Default::default())),
        ),
        Err(_) => (None, serde_json::json!({})),
    };
    html! {
        section.start aria-label="Start this flow" {
            h2 { (source.name) " " span.muted { "(" (source.dialect) ")" } }
            @if let Some(svg) = drawing {
                div.drawing { (PreEscaped(svg)) }
            } @else {
                p.error-box { "This stored flow no longer loads; paste it below to see why." }
            }
            label for="input" { "Input (JSON)" }
            textarea #input name="input" rows="8" spellcheck="false" {
                (serde_json::to_string_pretty(&input).unwrap_or_default())
            }
            div.actions {
                button type="button" data-action="start" data-flow=(source.id) { "Start" }
            }
            p.action-error role="alert" hidden {}
            details {
                summary { "The flow's text" }
                pre { (source.text) }
            }
        }
    }
}

/// A flow pasted in: checked and stored by the API, its errors listed at their line.
fn paste_form() -> Markup {
    html! {
        section.paste aria-label="Paste a flow" {
            h2 { "Or paste a flow" }
            label for="source" { "The flow's text (YAML or JSON, any dialect)" }
            textarea #source name="source" rows="14" spellcheck="false" {}
            label for="dialect" { "Dialect" }
            select #dialect name="dialect" {
                option value="" { "detect" }
                @for name in weft_dialects::registry::names() { option value=(name) { (name) } }
            }
            div.actions {
                button type="button" data-action="check" { "Check and store" }
            }
            div #diagnostics aria-live="polite" {}
        }
    }
}
