//! `/login`: the form a person gives a server's token in once, for a server started
//! with a token; the server turns it into a session cookie.

use crate::layout::{self, Section};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::html;

/// The sign-in page, with `error` when the last try failed (then `401`).
pub fn login(error: Option<&str>) -> Response {
    let body = html! {
        h1 { "Sign in" }
        p { "This server needs its token (the one in its " code { "--token-file" } " or " code { "$WEFT_TOKEN" } ")." }
        form.login method="post" action="/login" {
            label for="token" { "Token" }
            input #token type="password" name="token" autocomplete="current-password" required autofocus;
            @if let Some(e) = error { p.action-error role="alert" { (e) } }
            div.actions { button type="submit" { "Sign in" } }
        }
    };
    let status = if error.is_some() {
        StatusCode::UNAUTHORIZED
    } else {
        StatusCode::OK
    };
    (status, layout::page("Sign in", Section::Runs, body)).into_response()
}
