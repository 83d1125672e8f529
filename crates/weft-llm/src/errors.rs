//! Provider failures as typed block errors that `retry`, `rescue` and error routes can
//! match on: `auth`, `rate_limit` (with the provider's `retry_after_ms`),
//! `context_overflow`, `malformed_response`, `config` (an unknown model), and `model` for
//! the rest. Whether Weft itself should try the call again travels in the error's
//! `retryable` detail.

use http::HeaderMap;
use serde_json::{Value, json};
use std::time::Duration;
use weft_core::{BlockError, ErrorKind};

use crate::providers::Provider;

/// The longest stretch of a provider's error body quoted in a message.
const BODY_QUOTE: usize = 300;

/// What went wrong with a call, before it becomes a [`BlockError`].
#[derive(Debug)]
pub(crate) struct CallError {
    pub kind: ErrorKind,
    pub message: String,
    /// Worth sending again (throttling, a 5xx, a dropped connection).
    pub retryable: bool,
    /// How long the provider asked us to wait.
    pub retry_after: Option<Duration>,
}

impl CallError {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> CallError {
        CallError {
            kind,
            message: message.into(),
            retryable: false,
            retry_after: None,
        }
    }

    fn retryable(mut self) -> CallError {
        self.retryable = true;
        self
    }

    /// The block error, with `retry_after_ms` for the engine's retry policy.
    pub(crate) fn into_block_error(self, attempts: u32) -> BlockError {
        let mut detail = serde_json::Map::new();
        if let Some(after) = self.retry_after {
            detail.insert(
                "retry_after_ms".into(),
                json!(u64::try_from(after.as_millis()).unwrap_or(u64::MAX)),
            );
        }
        if attempts > 1 {
            detail.insert("attempts".into(), json!(attempts));
        }
        let message = if attempts > 1 {
            format!("{} (after {attempts} attempts)", self.message)
        } else {
            self.message
        };
        let e = BlockError::new(self.kind, message);
        if detail.is_empty() {
            e
        } else {
            e.with_detail(Value::Object(detail))
        }
    }
}

fn quote(body: &str) -> String {
    // Providers put the useful sentence in `error.message` (or `error` itself).
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let text = parsed
        .as_ref()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.pointer("/error"))
                .or_else(|| v.pointer("/message"))
        })
        .and_then(|m| m.as_str().map(str::to_owned))
        .unwrap_or_else(|| body.trim().to_owned());
    let mut cut: String = text.chars().take(BODY_QUOTE).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

/// `Retry-After` (seconds or an HTTP date) or `retry-after-ms`.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok()) {
        return (ms.is_finite() && ms >= 0.0).then(|| Duration::from_secs_f64(ms / 1000.0));
    }
    let value = get("retry-after")?.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(
        when.duration_since(std::time::SystemTime::now())
            .unwrap_or_default(),
    )
}

fn is_context_overflow(body: &str) -> bool {
    let b = body.to_ascii_lowercase();
    [
        "context_length_exceeded",
        "maximum context length",
        "context window",
        "prompt is too long",
        "too many tokens",
        "input is too long",
        "exceeds the maximum number of tokens",
    ]
    .iter()
    .any(|p| b.contains(p))
}

/// An HTTP error status from `provider` for `model`.
pub(crate) fn from_status(
    provider: Provider,
    model: &str,
    status: u16,
    body: &str,
    headers: Option<&HeaderMap>,
) -> CallError {
    let said = quote(body);
    let name = provider.name();
    match status {
        401 | 403 => {
            let hint = provider
                .key_variable()
                .map(|v| format!("; check {v}"))
                .unwrap_or_default();
            CallError::new(
                ErrorKind::Auth,
                format!("{name} rejected the credentials (HTTP {status}): {said}{hint}"),
            )
        }
        429 => {
            let mut e = CallError::new(
                ErrorKind::RateLimit,
                format!("{name} is throttling requests to `{model}` (HTTP 429): {said}"),
            )
            .retryable();
            e.retry_after = headers.and_then(retry_after);
            e
        }
        404 => CallError::new(
            ErrorKind::Config,
            format!("{name} has no model `{model}` (HTTP 404): {said}"),
        ),
        400 | 413 | 422 if is_context_overflow(body) => CallError::new(
            ErrorKind::ContextOverflow,
            format!("the prompt does not fit `{model}`'s context window: {said}"),
        ),
        400 | 422 if body.to_ascii_lowercase().contains("model") && said.contains("not") => {
            CallError::new(
                ErrorKind::Config,
                format!("{name} refused the model `{model}` (HTTP {status}): {said}"),
            )
        }
        408 | 409 | 500..=599 => {
            let mut e = CallError::new(
                ErrorKind::Model,
                format!("{name} failed (HTTP {status}): {said}"),
            )
            .retryable();
            e.retry_after = headers.and_then(retry_after);
            e
        }
        _ => CallError::new(
            ErrorKind::Model,
            format!("{name} refused the request (HTTP {status}): {said}"),
        ),
    }
}

/// A genai error as a call error.
pub(crate) fn from_genai(provider: Provider, model: &str, e: genai::Error) -> CallError {
    use genai::Error as G;
    // A streamed call that fails with an HTTP status reports it inside a stream error.
    if let G::WebStream { error, .. } = &e
        && let Some(G::HttpError {
            status,
            body,
            headers,
            ..
        }) = error.downcast_ref::<G>()
    {
        return from_status(provider, model, status.as_u16(), body, Some(headers));
    }
    if let Some(status) = e.status() {
        let (body, headers) = match &e {
            G::HttpError { body, headers, .. } => (body.clone(), Some(headers.as_ref().clone())),
            G::WebModelCall { webc_error, .. } | G::WebAdapterCall { webc_error, .. } => {
                match webc_error {
                    genai::webc::Error::ResponseFailedStatus { body, headers, .. } => {
                        (body.clone(), Some(headers.as_ref().clone()))
                    }
                    other => (other.to_string(), None),
                }
            }
            other => (other.to_string(), None),
        };
        return from_status(provider, model, status.as_u16(), &body, headers.as_ref());
    }
    let name = provider.name();
    match e {
        G::RequiresApiKey { .. } | G::NoAuthData { .. } | G::NoAuthResolver { .. } => {
            CallError::new(
                ErrorKind::Auth,
                format!(
                    "{name} needs an API key{}",
                    provider
                        .key_variable()
                        .map(|v| format!(": set {v}"))
                        .unwrap_or_default()
                ),
            )
        }
        G::StreamParse { serde_error, .. } => CallError::new(
            ErrorKind::MalformedResponse,
            format!("{name} sent a stream event that is not valid JSON: {serde_error}"),
        )
        .retryable(),
        G::ChatResponseGeneration { cause, .. } => CallError::new(
            ErrorKind::MalformedResponse,
            format!("{name}'s answer has an unexpected shape: {cause}"),
        ),
        G::InvalidJsonResponseElement { info } => CallError::new(
            ErrorKind::MalformedResponse,
            format!("{name}'s answer has an unexpected shape: {info}"),
        ),
        G::NoChatResponse { .. } => CallError::new(
            ErrorKind::MalformedResponse,
            format!("{name} returned no answer"),
        ),
        G::ChatResponse { body, .. } => {
            let text = body.to_string();
            if is_context_overflow(&text) {
                CallError::new(
                    ErrorKind::ContextOverflow,
                    format!(
                        "the prompt does not fit `{model}`'s context window: {}",
                        quote(&text)
                    ),
                )
            } else {
                CallError::new(
                    ErrorKind::Model,
                    format!("{name} reported an error in its stream: {}", quote(&text)),
                )
                .retryable()
            }
        }
        G::WebStream { cause, .. } => CallError::new(
            ErrorKind::Model,
            format!("the stream from {name} broke off: {cause}"),
        )
        .retryable(),
        G::WebModelCall { webc_error, .. } | G::WebAdapterCall { webc_error, .. } => {
            match webc_error {
                genai::webc::Error::ResponseFailedNotJson { body, .. }
                | genai::webc::Error::ResponseFailedInvalidJson { body, .. } => CallError::new(
                    ErrorKind::MalformedResponse,
                    format!(
                        "{name} answered with something that is not JSON: {}",
                        quote(&body)
                    ),
                ),
                other => CallError::new(
                    ErrorKind::Model,
                    format!("cannot reach {name}: {}", chain(&other)),
                )
                .retryable(),
            }
        }
        other => CallError::new(ErrorKind::Model, format!("{name}: {other}")),
    }
}

/// An error and its causes on one line (reqwest's top-level message alone says little).
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_become_typed_errors() {
        let e = from_status(
            Provider::OpenAi,
            "gpt-x",
            401,
            r#"{"error":{"message":"Incorrect API key provided"}}"#,
            None,
        );
        assert_eq!(e.kind, ErrorKind::Auth);
        assert!(e.message.contains("Incorrect API key") && e.message.contains("OPENAI_API_KEY"));
        let mut h = HeaderMap::new();
        h.insert("retry-after", "2".parse().unwrap());
        let e = from_status(Provider::Anthropic, "m", 429, "{}", Some(&h));
        assert_eq!(
            (e.kind, e.retryable, e.retry_after),
            (ErrorKind::RateLimit, true, Some(Duration::from_secs(2)))
        );
        let e = from_status(
            Provider::OpenAi,
            "m",
            400,
            r#"{"error":{"code":"context_length_exceeded","message":"This model's maximum context length is 8192 tokens"}}"#,
            None,
        );
        assert_eq!(e.kind, ErrorKind::ContextOverflow);
        let e = from_status(
            Provider::OpenAi,
            "nope",
            404,
            r#"{"error":{"message":"The model `nope` does not exist"}}"#,
            None,
        );
        assert_eq!(e.kind, ErrorKind::Config);
        let e = from_status(Provider::Gemini, "m", 503, "overloaded", None);
        assert!(e.retryable && e.kind == ErrorKind::Model);
    }

    #[test]
    fn retry_after_reads_seconds_milliseconds_and_dates() {
        let mut h = HeaderMap::new();
        h.insert("retry-after-ms", "250".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
        let mut h = HeaderMap::new();
        let later = std::time::SystemTime::now() + Duration::from_secs(30);
        h.insert(
            "retry-after",
            httpdate::fmt_http_date(later).parse().unwrap(),
        );
        let got = retry_after(&h).unwrap();
        assert!(
            got > Duration::from_secs(27) && got <= Duration::from_secs(30),
            "{got:?}"
        );
    }
}
