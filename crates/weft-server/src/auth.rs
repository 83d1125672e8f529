//! Who may call: with a token, whoever carries it (as a bearer token, or, for the page
//! in a browser, as the session cookie `/login` sets); without one, only requests that
//! name this machine as their `Host`, so that a web page elsewhere cannot reach a
//! loopback server by pointing its own name at 127.0.0.1 (DNS rebinding).
//!
//! The cookie holds a hash of the token, never the token, and is `HttpOnly` and
//! `SameSite=Strict`: no other site's page can send it, so the API's JSON routes need
//! no CSRF token.

use crate::problem::Problem;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// The session cookie's name.
const COOKIE: &str = "weft_session";

/// What a server with a token accepts: the token, and the session cookie derived from it.
pub(crate) struct Credentials {
    token: String,
    session: String,
}

impl Credentials {
    pub(crate) fn new(token: Option<&str>) -> Option<Arc<Credentials>> {
        token.map(|t| {
            Arc::new(Credentials {
                token: t.to_owned(),
                session: session_of(t),
            })
        })
    }

    fn accepts(&self, headers: &HeaderMap) -> bool {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer);
        if let Some(given) = bearer {
            return same(given, &self.token);
        }
        // LangGraph's clients send their key as `x-api-key`.
        if let Some(given) = headers.get("x-api-key").and_then(|v| v.to_str().ok()) {
            return same(given, &self.token);
        }
        cookie(headers, COOKIE).is_some_and(|given| same(given, &self.session))
    }
}

/// The session value for `token`: a hash, so the browser never holds the token itself.
fn session_of(token: &str) -> String {
    hex::encode(Sha256::digest(format!("weft-session\0{token}")))
}

fn same(given: &str, expected: &str) -> bool {
    bool::from(given.as_bytes().ct_eq(expected.as_bytes()))
}

/// The value of cookie `name` in the request's `Cookie` headers.
fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
}

/// Lets a request through when it carries the server's token as `Authorization:
/// Bearer <token>` or its session cookie (compared in constant time), or, when the
/// server has no token, when its `Host` is a loopback name. A browser asking for a page
/// without them is sent to `/login`.
pub(crate) async fn require_token(
    State(credentials): State<Option<Arc<Credentials>>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(credentials) = credentials else {
        let host = request
            .headers()
            .get(header::HOST)
            .and_then(|v| v.to_str().ok());
        if host.is_none_or(is_loopback_host) {
            return next.run(request).await;
        }
        return Problem::new(StatusCode::FORBIDDEN, "forbidden host")
            .detail("without a token this server answers only requests to localhost, 127.0.0.1 or [::1]; start it with --token-file to be reached by another name")
            .into_response();
    };
    if credentials.accepts(request.headers()) {
        return next.run(request).await;
    }
    if wants_page(&request) {
        return Redirect::to("/login").into_response();
    }
    Problem::new(StatusCode::UNAUTHORIZED, "unauthorized")
        .detail("this server needs `Authorization: Bearer <token>` (or `x-api-key: <token>`; in a browser, signing in at /login)")
        .into_response()
}

/// Whether a request is a browser's for one of the page's addresses.
fn wants_page(request: &Request) -> bool {
    request.method() == axum::http::Method::GET
        && weft_web::is_page_path(request.uri().path())
        && request
            .headers()
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.contains("text/html"))
}

/// `POST /login`'s form.
#[derive(serde::Deserialize)]
pub(crate) struct Login {
    token: String,
}

/// `GET /login`: the sign-in form (a server without a token needs none: on to the runs).
pub(crate) async fn login_form(State(credentials): State<Option<Arc<Credentials>>>) -> Response {
    match credentials {
        Some(_) => weft_web::login(None),
        None => Redirect::to("/").into_response(),
    }
}

/// `POST /login`: the token, given once, becomes the session cookie.
pub(crate) async fn login(
    State(credentials): State<Option<Arc<Credentials>>>,
    headers: HeaderMap,
    axum::Form(form): axum::Form<Login>,
) -> Response {
    let Some(credentials) = credentials else {
        return Redirect::to("/").into_response();
    };
    if !same(form.token.trim(), &credentials.token) {
        return weft_web::login(Some("That is not this server's token."));
    }
    let https = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|p| p.eq_ignore_ascii_case("https"));
    let cookie = format!(
        "{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict{}",
        credentials.session,
        if https { "; Secure" } else { "" }
    );
    ([(header::SET_COOKIE, cookie)], Redirect::to("/")).into_response()
}

/// Whether a `Host` value (with or without its port) names this machine.
fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The credentials of an `Authorization` value with the `Bearer` scheme (whose name
/// ignores case, RFC 9110).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

#[cfg(test)]
mod tests {
    use axum::http::{HeaderMap, HeaderValue, header};

    #[test]
    fn the_session_cookie_is_a_hash_of_the_token_and_is_found_among_others() {
        let creds = super::Credentials::new(Some("s3cret")).unwrap();
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("a=1; weft_session={}; b=2", creds.session)).unwrap(),
        );
        assert!(creds.accepts(&h));
        assert_ne!(creds.session, "s3cret");
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("weft_session=s3cret"),
        );
        assert!(!creds.accepts(&h), "the token itself is not a session");
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer s3cret"),
        );
        assert!(creds.accepts(&h));
    }

    #[test]
    fn the_scheme_ignores_case() {
        assert_eq!(super::bearer("Bearer abc"), Some("abc"));
        assert_eq!(super::bearer("bearer abc"), Some("abc"));
        assert_eq!(super::bearer("Basic abc"), None);
        assert_eq!(super::bearer("Bearer"), None);
    }

    #[test]
    fn loopback_hosts_are_this_machine_s_names_only() {
        for ok in [
            "localhost",
            "LOCALHOST:8080",
            "127.0.0.1:8080",
            "127.3.4.5",
            "[::1]:80",
            "[::1]",
        ] {
            assert!(super::is_loopback_host(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "10.0.0.1:80",
            "[::2]:80",
            "",
        ] {
            assert!(!super::is_loopback_host(bad), "{bad}");
        }
    }
}
