//! What Weft's own model clients ([`crate::openai_wire`], [`crate::ollama_wire`]) share:
//! sending a JSON body and turning a failed status into a typed error, and reading a
//! streamed answer a line at a time (server-sent events and newline-delimited JSON both
//! come in lines).

use futures::StreamExt;
use futures::stream::BoxStream;
use weft_core::ErrorKind;

use crate::errors::{CallError, chain, from_status};
use crate::providers::Provider;

/// A message of a plain chat, as both wire formats write it.
#[derive(serde::Serialize)]
pub(crate) struct TextMessage<'a> {
    role: &'a str,
    content: &'a str,
}

/// `request`'s messages as the wire writes them.
pub(crate) fn text_messages(request: &weft_core::ports::ModelRequest) -> Vec<TextMessage<'_>> {
    request
        .messages
        .iter()
        .map(|m| TextMessage {
            role: &m.role,
            content: &m.content,
        })
        .collect()
}

/// Whether `request` is a chat with nothing but messages and sampling settings (and
/// perhaps an answer schema): no tools of any kind, tool results, reasoning or search.
pub(crate) fn is_plain_chat(request: &weft_core::ports::ModelRequest) -> bool {
    request.tools.is_empty()
        && request.provider_tools.is_empty()
        && request.reasoning_effort.is_none()
        && request.tool_choice.is_none()
        && request
            .search
            .as_ref()
            .is_none_or(|s| matches!(s, serde_json::Value::Bool(false) | serde_json::Value::Null))
        && request.messages.iter().all(|m| {
            m.tool_calls.is_empty() && matches!(m.role.as_str(), "system" | "user" | "assistant")
        })
}

/// POSTs `body` (JSON) to `url`, with `key` as a bearer token; a status other than
/// success becomes `provider`'s typed error for `model`.
pub(crate) async fn post(
    http: &reqwest::Client,
    url: String,
    body: Vec<u8>,
    key: Option<&str>,
    provider: Provider,
    model: &str,
) -> Result<reqwest::Response, CallError> {
    let mut request = http
        .post(url)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request
        .send()
        .await
        .map_err(|e| broken(&format!("cannot reach {}", provider.name()), &e))?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let headers = response.headers().clone();
    let text = response.text().await.unwrap_or_default();
    Err(from_status(
        provider,
        model,
        status.as_u16(),
        &text,
        Some(&headers),
    ))
}

/// A transport failure (`what` happened), worth another attempt.
pub(crate) fn broken(what: &str, e: &reqwest::Error) -> CallError {
    let mut err = CallError::new(ErrorKind::Model, format!("{what}: {}", chain(e)));
    err.retryable = true;
    err
}

/// Splits a response body into lines without waiting for the whole of it.
pub(crate) struct Lines {
    body: BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    pending: Vec<u8>,
}

impl Lines {
    /// The lines of `response`'s body.
    pub(crate) fn new(response: reqwest::Response) -> Lines {
        Lines {
            body: response.bytes_stream().boxed(),
            pending: Vec::new(),
        }
    }

    /// The next line, trimmed, or `None` at the end of the body (a last line without a
    /// newline is still a line).
    pub(crate) async fn next(&mut self) -> reqwest::Result<Option<Vec<u8>>> {
        loop {
            if let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                return Ok(Some(line.trim_ascii().to_vec()));
            }
            match self.body.next().await {
                Some(piece) => self.pending.extend_from_slice(&piece?),
                None if self.pending.is_empty() => return Ok(None),
                None => {
                    let line = std::mem::take(&mut self.pending);
                    return Ok(Some(line.trim_ascii().to_vec()));
                }
            }
        }
    }
}
