//! Who may call: with a token, whoever carries it; without one, only requests that name
//! this machine as their `Host`, so that a web page elsewhere cannot reach a loopback
//! server by pointing its own name at 127.0.0.1 (DNS rebinding).

use crate::problem::Problem;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// Lets a request through when it carries the server's token as `Authorization:
/// Bearer <token>` (compared in constant time), or, when the server has no token, when
/// its `Host` is a loopback name.
pub(crate) async fn require_token(
    State(token): State<Arc<Option<String>>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(expected) = token.as_deref() else {
        let host = request
            .headers()
            .get(axum::http::header::HOST)
            .and_then(|v| v.to_str().ok());
        if host.is_none_or(is_loopback_host) {
            return next.run(request).await;
        }
        return Problem::new(StatusCode::FORBIDDEN, "forbidden host")
            .detail("without a token this server answers only requests to localhost, 127.0.0.1 or [::1]; start it with --token-file to be reached by another name")
            .into_response();
    };
    let given = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer)
        .unwrap_or("");
    if bool::from(given.as_bytes().ct_eq(expected.as_bytes())) {
        next.run(request).await
    } else {
        Problem::new(StatusCode::UNAUTHORIZED, "unauthorized")
            .detail("this server needs `Authorization: Bearer <token>`")
            .into_response()
    }
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
