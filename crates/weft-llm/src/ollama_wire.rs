//! Ollama's own chat API (`/api/chat`) for a chat without tools: messages, temperature,
//! a token bound, and structured output, which Ollama enforces when it is given the JSON
//! Schema as `format` (genai 0.7 sends only `"json"`, so a schema was checked only after
//! the fact). Streamed answers are newline-delimited JSON. Requests with tools or a
//! reasoning setting still go through `genai`.

use serde::{Deserialize, Serialize};
use weft_core::ErrorKind;
use weft_core::ports::{DeltaSink, ModelRequest, ModelResponse};

use crate::errors::CallError;
use crate::providers::Provider;
use crate::remote::RemoteSettings;
use crate::wire::{Lines, TextMessage, broken, post, text_messages};

/// Whether this path sends `request` itself.
pub(crate) fn handles(request: &ModelRequest) -> bool {
    crate::wire::is_plain_chat(request)
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<TextMessage<'a>>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    format: Option<&'a serde_json::Value>,
    #[serde(skip_serializing_if = "Options::is_empty")]
    options: Options,
}

#[derive(Serialize)]
struct Options {
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    num_predict: Option<u32>,
}

impl Options {
    fn is_empty(&self) -> bool {
        self.temperature.is_none() && self.num_predict.is_none()
    }
}

/// A whole answer, or one line of a streamed one.
#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    message: Option<Said>,
    #[serde(default)]
    done: bool,
    #[serde(default)]
    done_reason: Option<String>,
    #[serde(default)]
    prompt_eval_count: Option<i64>,
    #[serde(default)]
    eval_count: Option<i64>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct Said {
    #[serde(default)]
    content: String,
}

impl Chunk {
    fn tokens(&self) -> (u64, u64) {
        let count = |n: Option<i64>| n.unwrap_or(0).max(0) as u64;
        (count(self.prompt_eval_count), count(self.eval_count))
    }
}

/// Sends `request` and reads the answer, streamed (each text delta to `on_delta`) or whole.
pub(crate) async fn call(
    http: &reqwest::Client,
    settings: &RemoteSettings,
    request: &ModelRequest,
    on_delta: DeltaSink<'_>,
) -> Result<(ModelResponse, (u64, u64)), CallError> {
    let body = Body {
        model: &request.model,
        messages: text_messages(request),
        stream: settings.stream,
        format: request.output_schema.as_ref(),
        options: Options {
            temperature: request.temperature,
            num_predict: request.max_tokens,
        },
    };
    let body = serde_json::to_vec(&body)
        .map_err(|e| CallError::new(ErrorKind::Input, format!("cannot encode the request: {e}")))?;
    let response = post(
        http,
        format!("{}api/chat", settings.endpoint),
        body,
        None,
        Provider::Ollama,
        &request.model,
    )
    .await?;
    read_answer(Lines::new(response), settings.stream, on_delta).await
}

/// Reads Ollama's answer: one JSON object, or (streamed) one per line until `done`.
async fn read_answer(
    mut lines: Lines,
    stream: bool,
    on_delta: DeltaSink<'_>,
) -> Result<(ModelResponse, (u64, u64)), CallError> {
    let mut text = String::new();
    while let Some(line) = lines
        .next()
        .await
        .map_err(|e| broken("the stream from ollama broke off", &e))?
    {
        if line.is_empty() {
            continue;
        }
        let chunk: Chunk = serde_json::from_slice(&line).map_err(|e| {
            let mut e = CallError::new(
                ErrorKind::MalformedResponse,
                format!("ollama sent something that is not its chat JSON: {e}"),
            );
            e.retryable = stream;
            e
        })?;
        if let Some(error) = chunk.error {
            let mut e = CallError::new(ErrorKind::Model, format!("ollama reported: {error}"));
            e.retryable = true;
            return Err(e);
        }
        if let Some(said) = &chunk.message
            && !said.content.is_empty()
        {
            if stream {
                on_delta(&said.content);
            }
            text.push_str(&said.content);
        }
        if chunk.done {
            let tokens = chunk.tokens();
            return Ok((
                ModelResponse {
                    content: text,
                    tool_calls: Vec::new(),
                    usage: Default::default(),
                    model: chunk.model.filter(|_| !stream),
                    finish_reason: chunk.done_reason,
                },
                tokens,
            ));
        }
    }
    let mut e = CallError::new(
        ErrorKind::Model,
        "the stream from ollama ended before the answer did",
    );
    e.retryable = true;
    Err(e)
}
