//! The bearer token, when the server has one.

use crate::problem::Problem;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// Lets a request through when the server has no token or the request carries it as
/// `Authorization: Bearer <token>`; compared in constant time.
pub(crate) async fn require_token(
    State(token): State<Arc<Option<String>>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(expected) = token.as_deref() else {
        return next.run(request).await;
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
}
