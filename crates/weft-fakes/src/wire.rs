//! Each provider's response shapes, as their API references document them.

use crate::{Received, Reply};
use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;
use serde_json::{Value, json};
use std::time::Duration;

/// A provider's wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// OpenAI Chat Completions (`POST /v1/chat/completions`, SSE when `stream`).
    OpenAi,
    /// Anthropic Messages (`POST /v1/messages`, SSE with named events when `stream`).
    Anthropic,
    /// Gemini (`:generateContent`, and `:streamGenerateContent?alt=sse`).
    Gemini,
    /// Ollama (`POST /api/chat`, NDJSON unless `stream: false`).
    Ollama,
}

fn streaming(wire: Wire, r: &Received) -> bool {
    match wire {
        Wire::OpenAi | Wire::Anthropic => r.body["stream"] == json!(true),
        Wire::Gemini => r.path.contains(":streamGenerateContent"),
        Wire::Ollama => r.body["stream"] != json!(false),
    }
}

fn model(r: &Received) -> String {
    match r.body["model"].as_str() {
        Some(m) => m.to_owned(),
        // Gemini names it in the path: /v1beta/models/<model>:generateContent
        None => r
            .path
            .rsplit('/')
            .next()
            .and_then(|s| s.split(':').next())
            .unwrap_or("model")
            .to_owned(),
    }
}

/// About four characters a token, for usage figures.
fn prompt_tokens(r: &Received) -> u64 {
    let prompt = r
        .body
        .get("messages")
        .or_else(|| r.body.get("contents"))
        .or_else(|| r.body.get("input"))
        .or_else(|| r.body.get("requests"))
        .map(Value::to_string)
        .unwrap_or_default();
    (prompt.len() as u64).div_ceil(4).max(1)
}

fn words(text: &str) -> Vec<String> {
    text.split_inclusive(' ').map(str::to_owned).collect()
}

fn json_response(status: u16, body: Value, retry_after: Option<u32>) -> Response {
    let mut b = Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("content-type", "application/json");
    if let Some(s) = retry_after {
        b = b.header("retry-after", s.to_string());
    }
    b.body(Body::from(body.to_string())).expect("response")
}

/// A streamed body: `frames` in order, each but the first after `gap`, then (when
/// `drop`) a broken connection.
fn stream_response(content_type: &str, frames: Vec<String>, drop: bool, gap: Duration) -> Response {
    let mut items: Vec<Result<Bytes, std::io::Error>> =
        frames.into_iter().map(|f| Ok(Bytes::from(f))).collect();
    if drop {
        items.push(Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "dropped by the test",
        )));
    }
    let paced =
        futures::stream::iter(items.into_iter().enumerate()).then(move |(i, item)| async move {
            if i > 0 && !gap.is_zero() {
                tokio::time::sleep(gap).await;
            }
            item
        });
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", content_type)
        .body(Body::from_stream(paced))
        .expect("response")
}

fn sse(data: &Value) -> String {
    format!("data: {data}\n\n")
}

fn sse_event(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

/// The response to `r`.
pub(crate) async fn respond(wire: Wire, r: &Received, reply: Reply) -> Response {
    if let Reply::Error {
        status,
        message,
        retry_after,
    } = &reply
    {
        return json_response(*status, error_body(wire, *status, message), *retry_after);
    }
    if let Reply::Embeddings(vectors) = &reply {
        return json_response(200, embeddings(wire, r, vectors), None);
    }
    let stream = streaming(wire, r);
    let mut gap = Duration::ZERO;
    let (text, calls, drop) = match reply {
        Reply::Text(t) => (t, Vec::new(), None),
        Reply::ToolCalls(c) => (String::new(), c, None),
        Reply::DropAfter { text, chunks } => (text, Vec::new(), Some(chunks)),
        Reply::Slow { text, gap: g } => {
            gap = g;
            (text, Vec::new(), None)
        }
        Reply::Error { .. } | Reply::Embeddings(_) => unreachable!("answered above"),
    };
    let usage = (prompt_tokens(r), words(&text).len().max(1) as u64);
    if !stream {
        tokio::time::sleep(gap).await;
        return json_response(200, whole(wire, r, &text, &calls, usage), None);
    }
    let mut pieces = words(&text);
    if let Some(n) = drop {
        pieces.truncate(n);
    }
    let frames = frames(wire, r, &pieces, &calls, usage, drop.is_some());
    let content_type = match wire {
        Wire::Ollama => "application/x-ndjson",
        _ => "text/event-stream",
    };
    stream_response(content_type, frames, drop.is_some(), gap)
}

/// An embedding answer in `wire`'s format (Anthropic has none: it gets OpenAI's).
fn embeddings(wire: Wire, r: &Received, vectors: &[Vec<f32>]) -> Value {
    let tokens = prompt_tokens(r);
    match wire {
        Wire::Ollama => json!({
            "model": model(r), "embeddings": vectors, "prompt_eval_count": tokens
        }),
        Wire::Gemini => json!({
            "embeddings": vectors.iter().map(|v| json!({"values": v})).collect::<Vec<_>>()
        }),
        Wire::OpenAi | Wire::Anthropic => json!({
            "object": "list",
            "model": model(r),
            "data": vectors.iter().enumerate().map(|(i, v)| json!({
                "object": "embedding", "index": i, "embedding": v
            })).collect::<Vec<_>>(),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }),
    }
}

fn error_body(wire: Wire, status: u16, message: &str) -> Value {
    match wire {
        Wire::OpenAi => json!({"error": {"message": message, "type": "error", "code": status}}),
        Wire::Anthropic => {
            let kind = match status {
                401 => "authentication_error",
                404 => "not_found_error",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                400 => "invalid_request_error",
                _ => "api_error",
            };
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
        Wire::Gemini => {
            let s = match status {
                429 => "RESOURCE_EXHAUSTED",
                401 | 403 => "PERMISSION_DENIED",
                404 => "NOT_FOUND",
                400 => "INVALID_ARGUMENT",
                _ => "INTERNAL",
            };
            json!({"error": {"code": status, "message": message, "status": s}})
        }
        Wire::Ollama => json!({"error": message}),
    }
}

/// A non-streamed answer.
fn whole(
    wire: Wire,
    r: &Received,
    text: &str,
    calls: &[(String, Value)],
    usage: (u64, u64),
) -> Value {
    let model = model(r);
    let (input, output) = usage;
    match wire {
        Wire::OpenAi => {
            let tool_calls: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(i, (name, args))| {
                    json!({"id": format!("call_{i}"), "type": "function",
                           "function": {"name": name, "arguments": args.to_string()}})
                })
                .collect();
            let mut message = json!({"role": "assistant", "content": if calls.is_empty() { json!(text) } else { Value::Null }});
            if !tool_calls.is_empty() {
                message["tool_calls"] = json!(tool_calls);
            }
            json!({
                "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model,
                "choices": [{"index": 0, "message": message,
                             "finish_reason": if calls.is_empty() { "stop" } else { "tool_calls" }}],
                "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output}
            })
        }
        Wire::Anthropic => {
            let mut content: Vec<Value> = Vec::new();
            if calls.is_empty() {
                content.push(json!({"type": "text", "text": text}));
            }
            for (i, (name, args)) in calls.iter().enumerate() {
                content.push(json!({"type": "tool_use", "id": format!("toolu_{i}"), "name": name, "input": args}));
            }
            json!({
                "id": "msg_fake", "type": "message", "role": "assistant", "model": model,
                "content": content,
                "stop_reason": if calls.is_empty() { "end_turn" } else { "tool_use" },
                "stop_sequence": null,
                "usage": {"input_tokens": input, "output_tokens": output}
            })
        }
        Wire::Gemini => json!({
            "candidates": [{"content": {"role": "model", "parts": gemini_parts(text, calls)},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": input, "candidatesTokenCount": output,
                              "totalTokenCount": input + output},
            "modelVersion": model
        }),
        Wire::Ollama => {
            let mut message = json!({"role": "assistant", "content": text});
            if !calls.is_empty() {
                message["tool_calls"] = ollama_calls(calls);
            }
            json!({
                "model": model, "created_at": "2026-01-01T00:00:00Z", "message": message,
                "done": true, "done_reason": "stop",
                "prompt_eval_count": input, "eval_count": output
            })
        }
    }
}

fn gemini_parts(text: &str, calls: &[(String, Value)]) -> Vec<Value> {
    if calls.is_empty() {
        vec![json!({"text": text})]
    } else {
        calls
            .iter()
            .map(|(name, args)| json!({"functionCall": {"name": name, "args": args}}))
            .collect()
    }
}

fn ollama_calls(calls: &[(String, Value)]) -> Value {
    json!(
        calls
            .iter()
            .map(|(name, args)| json!({"function": {"name": name, "arguments": args}}))
            .collect::<Vec<_>>()
    )
}

/// A streamed answer, frame by frame; `cut` leaves out the frames that end it.
fn frames(
    wire: Wire,
    r: &Received,
    pieces: &[String],
    calls: &[(String, Value)],
    usage: (u64, u64),
    cut: bool,
) -> Vec<String> {
    let model = model(r);
    let (input, output) = usage;
    let mut out = Vec::new();
    match wire {
        Wire::OpenAi => {
            let chunk = |delta: Value, finish: Value| {
                sse(
                    &json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
                            "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
                )
            };
            out.push(chunk(
                json!({"role": "assistant", "content": ""}),
                Value::Null,
            ));
            for p in pieces {
                out.push(chunk(json!({"content": p}), Value::Null));
            }
            for (i, (name, args)) in calls.iter().enumerate() {
                out.push(chunk(
                    json!({"tool_calls": [{"index": i, "id": format!("call_{i}"), "type": "function",
                                           "function": {"name": name, "arguments": ""}}]}),
                    Value::Null,
                ));
                // Arguments arrive in fragments, as they do from the real service.
                let text = args.to_string();
                let (a, b) = text.split_at(text.len() / 2);
                for fragment in [a, b] {
                    out.push(chunk(
                        json!({"tool_calls": [{"index": i, "function": {"arguments": fragment}}]}),
                        Value::Null,
                    ));
                }
            }
            if !cut {
                let finish = if calls.is_empty() {
                    "stop"
                } else {
                    "tool_calls"
                };
                out.push(chunk(json!({}), json!(finish)));
                out.push(sse(
                    &json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
                                     "model": model, "choices": [],
                                     "usage": {"prompt_tokens": input, "completion_tokens": output,
                                               "total_tokens": input + output}}),
                ));
                out.push("data: [DONE]\n\n".to_owned());
            }
        }
        Wire::Anthropic => {
            out.push(sse_event("message_start", &json!({"type": "message_start", "message": {
                "id": "msg_fake", "type": "message", "role": "assistant", "content": [], "model": model,
                "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": input, "output_tokens": 1}}})));
            let mut index = 0;
            if calls.is_empty() {
                out.push(sse_event(
                    "content_block_start",
                    &json!({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "text", "text": ""}}),
                ));
                for p in pieces {
                    out.push(sse_event(
                        "content_block_delta",
                        &json!({"type": "content_block_delta", "index": 0,
                        "delta": {"type": "text_delta", "text": p}}),
                    ));
                }
                if !cut {
                    out.push(sse_event(
                        "content_block_stop",
                        &json!({"type": "content_block_stop", "index": 0}),
                    ));
                }
                index = 1;
            }
            for (i, (name, args)) in calls.iter().enumerate() {
                let at = index + i;
                out.push(sse_event("content_block_start", &json!({"type": "content_block_start", "index": at,
                    "content_block": {"type": "tool_use", "id": format!("toolu_{i}"), "name": name, "input": {}}})));
                let text = args.to_string();
                let (a, b) = text.split_at(text.len() / 2);
                for fragment in [a, b] {
                    out.push(sse_event(
                        "content_block_delta",
                        &json!({"type": "content_block_delta", "index": at,
                        "delta": {"type": "input_json_delta", "partial_json": fragment}}),
                    ));
                }
                out.push(sse_event(
                    "content_block_stop",
                    &json!({"type": "content_block_stop", "index": at}),
                ));
            }
            if !cut {
                out.push(sse_event("message_delta", &json!({"type": "message_delta",
                    "delta": {"stop_reason": if calls.is_empty() { "end_turn" } else { "tool_use" }, "stop_sequence": null},
                    "usage": {"output_tokens": output}})));
                out.push(sse_event("message_stop", &json!({"type": "message_stop"})));
            }
        }
        Wire::Gemini => {
            for p in pieces {
                out.push(sse(&json!({"candidates": [{"content": {"role": "model", "parts": [{"text": p}]}, "index": 0}],
                                     "modelVersion": model})));
            }
            if !cut {
                out.push(sse(&json!({
                    "candidates": [{"content": {"role": "model", "parts": if calls.is_empty() { json!([{"text": ""}]) } else { json!(gemini_parts("", calls)) }},
                                    "finishReason": "STOP", "index": 0}],
                    "usageMetadata": {"promptTokenCount": input, "candidatesTokenCount": output,
                                      "totalTokenCount": input + output},
                    "modelVersion": model})));
            }
        }
        Wire::Ollama => {
            let line = |v: Value| format!("{v}\n");
            for p in pieces {
                out.push(line(json!({"model": model, "created_at": "2026-01-01T00:00:00Z",
                                     "message": {"role": "assistant", "content": p}, "done": false})));
            }
            if !calls.is_empty() {
                out.push(line(json!({"model": model, "created_at": "2026-01-01T00:00:00Z",
                                     "message": {"role": "assistant", "content": "", "tool_calls": ollama_calls(calls)},
                                     "done": false})));
            }
            if !cut {
                out.push(line(json!({"model": model, "created_at": "2026-01-01T00:00:00Z",
                                     "message": {"role": "assistant", "content": ""}, "done": true,
                                     "done_reason": "stop", "prompt_eval_count": input, "eval_count": output})));
            }
        }
    }
    out
}
