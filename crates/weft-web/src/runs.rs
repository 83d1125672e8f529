//! `/`: the runs, newest first, with status, flow, dialect, start, duration, tokens and
//! cost; filtered by status, paged by cursor, refreshed by the script while it is open.

use crate::format;
use crate::layout::{self, PageError, Section, badge};
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde::Deserialize;
use weft_core::ports::{Cursor, RunQuery, RunRecord, RunStatus};
use weft_engine::Engine;

/// Runs on one page.
const PAGE: usize = 50;

#[derive(Deserialize)]
pub(crate) struct ListQuery {
    status: Option<String>,
    cursor: Option<String>,
    /// `rows`: only the table's body, for the script's refresh.
    part: Option<String>,
}

pub(crate) async fn page(
    State(engine): State<Engine>,
    Query(q): Query<ListQuery>,
) -> Result<Response, PageError> {
    let status = q.status.as_deref().filter(|s| !s.is_empty());
    let wanted = match status {
        None => None,
        Some(s) => Some(RunStatus::parse(s).ok_or_else(|| {
            PageError::BadRequest(format!(
                "There is no status `{s}`; the statuses are {}.",
                statuses().join(", ")
            ))
        })?),
    };
    let after = match q.cursor.as_deref().filter(|c| !c.is_empty()) {
        None => None,
        Some(c) => Some(Cursor::parse(c).ok_or_else(|| {
            PageError::BadRequest(format!(
                "`{c}` is not a cursor; follow the page's own \"Older runs\" link."
            ))
        })?),
    };
    let query = RunQuery {
        status: wanted,
        limit: PAGE + 1,
        after,
    };
    let mut runs = engine.store().list_runs(&query).await?;
    let more = runs.len() > PAGE;
    runs.truncate(PAGE);
    let rows = rows(&runs);
    if q.part.as_deref() == Some("rows") {
        return Ok(layout::partial(rows));
    }
    let next = more
        .then(|| runs.last())
        .flatten()
        .map(|r| Cursor::after(r.created_ms, &r.id).token());
    let refresh = format!("/?part=rows&status={}", status.unwrap_or(""));
    Ok(layout::page(
        "Runs",
        Section::Runs,
        html! {
            h1 { "Runs" }
            (filter(status))
            div.table-wrap {
                table.runs {
                    thead { tr {
                        th scope="col" { "Status" } th scope="col" { "Flow" } th scope="col" { "Dialect" }
                        th scope="col" { "Started" } th scope="col" { "Duration" }
                        th scope="col" { "Tokens" } th scope="col" { "Cost" } th scope="col" { "Run" }
                    } }
                    // Only the first page follows new runs: later pages stay as read.
                    tbody #runs data-refresh=[q.cursor.is_none().then_some(refresh)] { (rows) }
                }
            }
            @if let Some(next) = next {
                p { a href={ "/?cursor=" (next) "&status=" (status.unwrap_or("")) } { "Older runs →" } }
            }
        },
    )
    .into_response())
}

fn filter(status: Option<&str>) -> Markup {
    html! {
        nav.filter aria-label="Filter by status" {
            @if status.is_none() { a href="/" aria-current="page" { "all" } } @else { a href="/" { "all" } }
            @for s in statuses() {
                @if status == Some(s) {
                    a href={ "/?status=" (s) } aria-current="page" { (s) }
                } @else {
                    a href={ "/?status=" (s) } { (s) }
                }
            }
        }
    }
}

fn rows(runs: &[RunRecord]) -> Markup {
    let now = format::now_ms() as i64;
    html! {
        @if runs.is_empty() {
            tr { td colspan="8" .muted { "No runs yet: start one from " a href="/new" { "Start a run" } ", or with " code { "weft run --server" } "." } }
        }
        @for r in runs {
            @let ended = matches!(r.status, RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled);
            tr data-run=(r.id) {
                td { (badge(r.status.as_str())) }
                td { a href={ "/runs/" (r.id) } { (r.flow_name) } }
                td { (r.dialect.as_deref().unwrap_or("–")) }
                td { (layout::time(r.created_ms)) }
                @if ended { td { (format::millis(r.updated_ms - r.created_ms)) } }
                @else { td data-since=(r.created_ms) { (format::millis(now - r.created_ms)) } }
                td { (format::tokens(&r.usage)) }
                td { (format::cost(&r.usage)) }
                td { a href={ "/runs/" (r.id) } { code { (&r.id[..r.id.len().min(12)]) } } }
            }
        }
    }
}

/// The names of the statuses a list can be filtered by.
fn statuses() -> Vec<&'static str> {
    RunStatus::ALL.iter().map(RunStatus::as_str).collect()
}
