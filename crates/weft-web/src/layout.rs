//! The frame every page shares (head, navigation, main), status badges, and the HTML
//! error page.

use crate::{assets, format};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};

/// Which navigation entry a page belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Section {
    Runs,
    Approvals,
    Flows,
    Schedules,
    Start,
}

/// A whole page: `title` in the tab, `body` in `<main>`.
pub(crate) fn page(title: &str, section: Section, body: Markup) -> Markup {
    let nav = [
        (Section::Runs, "/", "Runs"),
        (Section::Approvals, "/approvals", "Approvals"),
        (Section::Flows, "/flows", "Flows"),
        (Section::Schedules, "/schedules", "Schedules"),
        (Section::Start, "/new", "Start a run"),
    ];
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Weft" }
                link rel="stylesheet" href=(assets::url("weft.css"));
                script src=(assets::url("weft.js")) defer {}
            }
            body {
                header.top {
                    a.brand href="/" { "Weft" }
                    nav aria-label="Sections" {
                        @for (s, href, label) in nav {
                            @if s == section {
                                a href=(href) aria-current="page" { (label) }
                            } @else {
                                a href=(href) { (label) }
                            }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

/// A run's or step's status as a coloured badge.
pub(crate) fn badge(status: &str) -> Markup {
    html! { span class={ "badge status-" (status) } { (status) } }
}

/// A time as `<time>`: UTC in the markup, local once the script has run.
pub(crate) fn time(ms: i64) -> Markup {
    let iso = format::iso(ms);
    html! { time datetime=(iso) { (iso) } }
}

/// An error page with `status`.
pub(crate) fn error(status: StatusCode, title: &str, detail: &str) -> Response {
    let body = html! {
        h1 { (title) }
        p { (detail) }
        p { a href="/" { "Back to the runs" } }
    };
    (status, page(title, Section::Runs, body)).into_response()
}

/// The page for a path the page does not have.
pub fn not_found() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "Not found",
        "There is no page at this address.",
    )
}

/// Why a page could not be shown.
pub(crate) enum PageError {
    /// The address asks for something that cannot be (an unknown status, a bad cursor).
    BadRequest(String),
    /// No run, flow or file by that name.
    NotFound(String),
    /// The store failed.
    Store(String),
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        match self {
            PageError::BadRequest(why) => error(StatusCode::BAD_REQUEST, "Bad address", &why),
            PageError::NotFound(what) => error(StatusCode::NOT_FOUND, "Not found", &what),
            PageError::Store(why) => {
                error(StatusCode::INTERNAL_SERVER_ERROR, "The store failed", &why)
            }
        }
    }
}

impl From<weft_core::ports::StoreError> for PageError {
    fn from(e: weft_core::ports::StoreError) -> Self {
        PageError::Store(e.to_string())
    }
}

impl From<weft_engine::EngineError> for PageError {
    fn from(e: weft_engine::EngineError) -> Self {
        match e {
            weft_engine::EngineError::NotFound(id) => {
                PageError::NotFound(format!("No run `{id}`."))
            }
            other => PageError::Store(other.to_string()),
        }
    }
}

/// A page's answer: a whole page, or only the part the script swaps in (`?part=`).
pub(crate) fn partial(markup: Markup) -> Response {
    ([(axum::http::header::CACHE_CONTROL, "no-store")], markup).into_response()
}
