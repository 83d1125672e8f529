//! The OpenTelemetry GenAI semantic conventions as Weft uses them: attribute names and
//! how Weft's providers and usage map onto them.

use opentelemetry::trace::SpanKind;
use opentelemetry::{Array, KeyValue, StringValue, Value};
use weft_core::usage::Usage;

/// `gen_ai.operation.name`: `invoke_workflow`, `chat`, `execute_tool`.
pub(crate) const OPERATION: &str = "gen_ai.operation.name";
/// `gen_ai.tool.name`.
pub(crate) const TOOL_NAME: &str = "gen_ai.tool.name";
/// `gen_ai.tool.call.arguments` (content: only when captured).
pub(crate) const TOOL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
/// `gen_ai.input.messages` (content: only when captured).
pub(crate) const INPUT_MESSAGES: &str = "gen_ai.input.messages";
/// `gen_ai.output.messages` (content: only when captured).
pub(crate) const OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
/// `error.type`: Weft's error kind (`timeout`, `rate_limit`, ...).
pub(crate) const ERROR_TYPE: &str = "error.type";
/// A step whose result came from the journal instead of running again.
pub(crate) const REPLAYED: &str = "weft.replayed";

/// `gen_ai.provider.name` for a Weft provider name: the conventions' well-known
/// values where there is one (`gcp.gemini`), Weft's name otherwise.
pub(crate) fn provider_name(provider: &str) -> &str {
    match provider {
        "gemini" | "google" => "gcp.gemini",
        "" => "unknown",
        other => other,
    }
}

/// A call to a provider over the network is a CLIENT span; the local model and
/// scripted ones run here.
pub(crate) fn chat_kind(provider: &str) -> SpanKind {
    match provider {
        "local" | "scripted" => SpanKind::Internal,
        _ => SpanKind::Client,
    }
}

/// The attributes every model call's span (`chat`, `embeddings`) has.
pub(crate) fn call_attributes(
    operation: &str,
    provider: &str,
    request_model: &str,
    response_model: Option<&str>,
    usage: &Usage,
) -> Vec<KeyValue> {
    let mut a = vec![
        KeyValue::new(OPERATION, operation.to_owned()),
        KeyValue::new("gen_ai.provider.name", provider_name(provider).to_owned()),
        KeyValue::new("gen_ai.request.model", request_model.to_owned()),
    ];
    if let Some(m) = response_model {
        a.push(KeyValue::new("gen_ai.response.model", m.to_owned()));
    }
    a.extend(usage_attributes(usage));
    a
}

/// Tokens (`gen_ai.usage.*`) and cost (`weft.usage.cost_usd`).
pub(crate) fn usage_attributes(usage: &Usage) -> Vec<KeyValue> {
    vec![
        KeyValue::new("gen_ai.usage.input_tokens", usage.input_tokens as i64),
        KeyValue::new("gen_ai.usage.output_tokens", usage.output_tokens as i64),
        KeyValue::new("weft.usage.cost_usd", usage.cost_usd),
    ]
}

/// `gen_ai.response.finish_reasons`: a list, of the one reason a call gives.
pub(crate) fn finish_reasons(reason: &str) -> KeyValue {
    KeyValue::new(
        "gen_ai.response.finish_reasons",
        Value::Array(Array::String(vec![StringValue::from(reason.to_owned())])),
    )
}
