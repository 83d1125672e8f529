//! The hot path to OpenAI's Chat Completions wire format (OpenAI, and the many servers
//! that speak it): a plain chat — messages, temperature, a token bound — sent with
//! reqwest and read into typed structs, streamed frame by frame. `genai` builds and walks
//! `serde_json::Value` trees for every request and every stream frame; measured on a
//! loopback server that was most of a call's CPU (docs/performance.md). Requests that use
//! anything more (tools, structured output, web search, reasoning effort) still go
//! through `genai`, which knows each of those features' wire details.

use serde::{Deserialize, Serialize};
use weft_core::ErrorKind;
use weft_core::ports::{DeltaSink, ModelRequest, ModelResponse};

use crate::errors::CallError;
use crate::providers::Provider;
use crate::remote::RemoteSettings;
use crate::wire::{Lines, TextMessage, broken, post, text_messages};

/// Whether `request` is a plain chat this path sends itself. A model name ending in a
/// reasoning effort (`o3-mini-high`) is genai's convention for setting one, so it goes
/// through genai, which reads it.
pub(crate) fn handles(request: &ModelRequest) -> bool {
    crate::wire::is_plain_chat(request)
        && request.output_schema.is_none()
        && genai::chat::ReasoningEffort::from_model_name(&request.model)
            .0
            .is_none()
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<TextMessage<'a>>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Deserialize)]
struct Completion {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    message: Option<Said>,
    #[serde(default)]
    delta: Option<Said>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Said {
    #[serde(default)]
    content: Option<String>,
}

#[derive(Deserialize, Clone, Copy)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<i64>,
    #[serde(default)]
    completion_tokens: Option<i64>,
}

/// A frame of a stream: a chunk, or the error a server reports inside the stream.
#[derive(Deserialize)]
struct Frame {
    #[serde(flatten)]
    chunk: Completion,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

/// OpenAI's newer models take `max_completion_tokens` (as genai decides it).
fn completion_tokens_key(model: &str) -> bool {
    ["gpt-5", "gpt-6", "o1", "o3", "o4"]
        .iter()
        .any(|p| model.starts_with(p))
}

/// Sends `request` and reads the answer, streamed (each text delta to `on_delta`) or whole.
pub(crate) async fn call(
    http: &reqwest::Client,
    settings: &RemoteSettings,
    request: &ModelRequest,
    on_delta: DeltaSink<'_>,
) -> Result<(ModelResponse, (u64, u64)), CallError> {
    let stream = settings.stream;
    let newer = completion_tokens_key(&request.model);
    let body = Body {
        model: &request.model,
        messages: text_messages(request),
        stream,
        stream_options: stream.then_some(StreamOptions {
            include_usage: true,
        }),
        temperature: request.temperature,
        max_tokens: request.max_tokens.filter(|_| !newer),
        max_completion_tokens: request.max_tokens.filter(|_| newer),
    };
    let body = serde_json::to_vec(&body)
        .map_err(|e| CallError::new(ErrorKind::Input, format!("cannot encode the request: {e}")))?;
    let response = post(
        http,
        format!("{}chat/completions", settings.endpoint),
        body,
        settings.api_key.as_deref(),
        Provider::OpenAi,
        &request.model,
    )
    .await?;
    if stream {
        read_stream(response, on_delta).await
    } else {
        let bytes = response
            .bytes()
            .await
            .map_err(|e| broken("the answer from openai broke off", &e))?;
        let completion: Completion = serde_json::from_slice(&bytes)
            .map_err(|e| malformed(format!("its answer is not a chat completion: {e}")))?;
        let choice = completion.choices.into_iter().next();
        let (content, finish_reason) = match choice {
            Some(c) => (
                c.message.and_then(|m| m.content).unwrap_or_default(),
                c.finish_reason,
            ),
            None => return Err(malformed("it returned no answer".into())),
        };
        Ok((
            ModelResponse {
                content,
                tool_calls: Vec::new(),
                usage: Default::default(),
                model: completion.model,
                finish_reason,
            },
            tokens(completion.usage),
        ))
    }
}

/// Reads server-sent events (`data: {...}` lines, `data: [DONE]` last) into the answer.
async fn read_stream(
    response: reqwest::Response,
    on_delta: DeltaSink<'_>,
) -> Result<(ModelResponse, (u64, u64)), CallError> {
    let mut lines = Lines::new(response);
    let mut text = String::new();
    let mut usage = None;
    let mut finish_reason = None;
    let mut done = false;
    while let Some(line) = lines
        .next()
        .await
        .map_err(|e| broken("the stream from openai broke off", &e))?
    {
        let Some(data) = line.strip_prefix(b"data:") else {
            continue;
        };
        let data = data.trim_ascii();
        if data == b"[DONE]" {
            done = true;
            break;
        }
        let frame: Frame = serde_json::from_slice(data).map_err(|e| {
            let mut e = malformed(format!(
                "it sent a stream event that is not valid JSON: {e}"
            ));
            e.retryable = true;
            e
        })?;
        if let Some(error) = frame.error {
            let mut e = CallError::new(
                ErrorKind::Model,
                format!("openai reported an error in its stream: {error}"),
            );
            e.retryable = true;
            return Err(e);
        }
        usage = frame.chunk.usage.or(usage);
        for choice in frame.chunk.choices {
            if let Some(delta) = choice.delta.and_then(|d| d.content)
                && !delta.is_empty()
            {
                on_delta(&delta);
                text.push_str(&delta);
            }
            finish_reason = choice.finish_reason.or(finish_reason);
        }
    }
    if !done && finish_reason.is_none() {
        let mut e = CallError::new(
            ErrorKind::Model,
            "the stream from openai ended before the answer did",
        );
        e.retryable = true;
        return Err(e);
    }
    Ok((
        ModelResponse {
            content: text,
            tool_calls: Vec::new(),
            usage: Default::default(),
            model: None,
            finish_reason,
        },
        tokens(usage),
    ))
}

fn tokens(u: Option<WireUsage>) -> (u64, u64) {
    u.map_or((0, 0), |u| {
        (
            u.prompt_tokens.unwrap_or(0).max(0) as u64,
            u.completion_tokens.unwrap_or(0).max(0) as u64,
        )
    })
}

fn malformed(why: String) -> CallError {
    CallError::new(ErrorKind::MalformedResponse, format!("openai: {why}"))
}
