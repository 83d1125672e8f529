//! `/approvals`: every approval waiting across runs, oldest first, each answerable in
//! place; and the answer form the run page shares.

use crate::layout::{self, PageError, Section};
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::Value;
use weft_core::ports::{RunQuery, RunStatus};
use weft_engine::Engine;

/// How many paused runs the inbox reads.
const INBOX_RUNS: usize = 500;

#[derive(Deserialize)]
pub(crate) struct InboxQuery {
    /// `rows`: only the list, for the script's refresh.
    part: Option<String>,
}

pub(crate) async fn page(
    State(engine): State<Engine>,
    Query(q): Query<InboxQuery>,
) -> Result<Response, PageError> {
    let mut paused = engine
        .store()
        .list_runs(&RunQuery {
            status: Some(RunStatus::Paused),
            limit: INBOX_RUNS,
            after: None,
        })
        .await?;
    paused.reverse();
    let list = html! {
        @if paused.is_empty() {
            p.muted #inbox-empty { "Nothing waits for an answer." }
        }
        @for run in &paused {
            @for w in run.waiting.as_ref().and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]) {
                div.inbox-item {
                    p.context {
                        a href={ "/runs/" (run.id) } { (run.flow_name) }
                        " · waiting since " (layout::time(run.updated_ms))
                    }
                    (form(&run.id, w))
                }
            }
        }
    };
    if q.part.as_deref() == Some("rows") {
        return Ok(layout::partial(list));
    }
    Ok(layout::page(
        "Approvals",
        Section::Approvals,
        html! {
            h1 { "Approvals" }
            div #inbox data-refresh="/approvals?part=rows" { (list) }
        },
    )
    .into_response())
}

/// The question an approval `waiting` asks in run `run_id`, and a button per answer it
/// accepts, with a note and the answerer's name.
pub(crate) fn form(run_id: &str, waiting: &Value) -> Markup {
    let key = waiting.get("key").and_then(Value::as_str).unwrap_or("");
    let wake = waiting.get("wake_ms").and_then(Value::as_i64);
    if let (Some(wake), Some(true)) = (wake, waiting.get("timer_only").and_then(Value::as_bool)) {
        // A plain `wait`: nobody answers it; it goes on by itself.
        return html! {
            section.approval.timer data-run=(run_id) data-step=(key) aria-label={ "Wait " (key) } {
                h2 { "Waiting until " (layout::time(wake)) }
                p.muted.small { "at " code { (key) } "; the run goes on by itself then" }
            }
        };
    }
    let prompt = waiting.get("prompt").and_then(Value::as_str).unwrap_or("");
    let options: Vec<&str> = waiting
        .get("options")
        .and_then(Value::as_array)
        .map(|o| o.iter().filter_map(Value::as_str).collect())
        .filter(|o: &Vec<&str>| !o.is_empty())
        .unwrap_or_else(|| vec!["approve", "reject"]);
    let id = format!(
        "note-{run_id}-{}",
        key.replace(['/', '[', ']', '#', '@'], "-")
    );
    html! {
        section.approval data-run=(run_id) data-step=(key) aria-label={ "Approval " (key) } {
            h2 { "Waiting for approval" }
            p.prompt { (prompt) }
            p.muted.small {
                "at " code { (key) }
                @if let Some(wake) = wake { "; goes on by itself at " (layout::time(wake)) }
            }
            div.answer-fields {
                div {
                    label for=(id) { "Note" }
                    textarea id=(id) name="note" rows="2" placeholder="Why (kept with the answer)" {}
                }
                div {
                    label for={ (id) "-by" } { "Your name" }
                    input id={ (id) "-by" } name="by" autocomplete="name" placeholder="who answers";
                }
            }
            div.actions {
                @for option in options {
                    button type="button" data-action="answer" data-decision=(option)
                        class={ "decision-" (option) } { (option) }
                }
            }
            p.action-error role="alert" hidden {}
        }
    }
}
