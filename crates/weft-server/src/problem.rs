//! Every error the API returns: a JSON problem object (RFC 9457) with, for an invalid
//! flow, its diagnostics located at line and column.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use weft_core::Diagnostic;
use weft_engine::EngineError;

/// An API error.
#[derive(Debug, Serialize)]
pub struct Problem {
    /// A URI naming the kind of problem (`about:blank` for plain HTTP statuses).
    #[serde(rename = "type")]
    pub kind: String,
    /// A short summary.
    pub title: String,
    /// The HTTP status.
    pub status: u16,
    /// What went wrong this time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The problems of an invalid flow, each with its pointer, line:col and hint.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub diagnostics: Vec<Diagnostic>,
}

impl Problem {
    /// A problem with `status` and `title`.
    pub fn new(status: StatusCode, title: &str) -> Problem {
        Problem {
            kind: format!("https://weft.invalid/problems/{}", title.replace(' ', "-")),
            title: title.to_owned(),
            status: status.as_u16(),
            detail: None,
            diagnostics: Vec::new(),
        }
    }

    /// With `detail`.
    pub fn detail(mut self, detail: impl Into<String>) -> Problem {
        self.detail = Some(detail.into());
        self
    }

    /// An invalid flow, with its diagnostics.
    pub fn invalid_flow(diagnostics: Vec<Diagnostic>) -> Problem {
        let detail = diagnostics
            .iter()
            .map(|d| d.message.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        Problem {
            diagnostics,
            ..Problem::new(StatusCode::BAD_REQUEST, "invalid flow").detail(detail)
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, Json(self)).into_response();
        response.headers_mut().insert(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/problem+json"),
        );
        response
    }
}

impl From<EngineError> for Problem {
    fn from(e: EngineError) -> Problem {
        let (status, title) = match &e {
            EngineError::NotFound(_) => (StatusCode::NOT_FOUND, "no such run"),
            EngineError::Taken(_) => (StatusCode::CONFLICT, "already answered"),
            EngineError::Refused(_) => (StatusCode::CONFLICT, "not allowed now"),
            EngineError::Invalid(d) => return Problem::invalid_flow(d.clone()),
            EngineError::Store(_) => (StatusCode::SERVICE_UNAVAILABLE, "store unavailable"),
        };
        Problem::new(status, title).detail(e.to_string())
    }
}

/// Routes that do not exist.
pub(crate) async fn not_found() -> Problem {
    Problem::new(StatusCode::NOT_FOUND, "not found").detail("no such route; see docs/server.md")
}

/// The query string of a request, as `T`; one that does not parse is a `400` problem
/// saying which parameter is wrong, like every other error of the API (axum's own
/// `Query` answers in plain text).
pub(crate) struct Params<T>(pub(crate) T);

impl<T, S> axum::extract::FromRequestParts<S> for Params<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = Problem;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Params<T>, Problem> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(t)) => Ok(Params(t)),
            Err(rejection) => Err(Problem::new(StatusCode::BAD_REQUEST, "invalid query")
                .detail(rejection.body_text())),
        }
    }
}
