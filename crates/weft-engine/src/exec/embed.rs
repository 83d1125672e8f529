//! The `embed` leaf: renders the texts, calls the model's embedding endpoint through the
//! `Model` port within the block's budgets, and outputs the vectors with their size,
//! model and usage. A call is reported as an `llm_call` event, like a chat, so traces and
//! costs see it.

use super::llm::{resolve_model, truncated};
use crate::run::{Cx, Exec, Outcome};
use std::sync::Arc;
use weft_core::event::{CallDetail, EventKind};
use weft_core::ir::EmbedSpec;
use weft_core::ports::{EmbedRequest, EmbedResponse, Model};
use weft_core::{BlockError, ErrorKind, Value};

pub(crate) async fn run(cx: &Cx<'_>, s: &EmbedSpec) -> Exec {
    let (model, id, model_name) = resolve_model(cx, s.model.as_deref())?;
    let (inputs, single) = texts(cx.value(&s.input.0, &cx.scope())?)?;
    let request = EmbedRequest {
        model: model_name,
        inputs,
        dimensions: s.dimensions,
    };
    let path = cx.key.to_string();
    let emitter = &cx.run.emitter;
    let warn = |e: EventKind| emitter.emit(|| e);
    // About four characters a token, as for a chat's prompt.
    let expected = request.inputs.iter().map(|t| t.len() as u64 / 4 + 1).sum();
    cx.budgets.check(expected, &path, &warn)?;
    let started = std::time::Instant::now();
    let result = model.embed(&request).await;
    emitter.emit(|| call_event(cx, model.as_ref(), &id, &request, started, &result));
    let response = result?;
    check_count(&request, &response)?;
    cx.budgets.charge(&response.usage, &path, &warn);
    cx.run
        .usage
        .lock()
        .expect("usage lock")
        .add(&response.usage);
    Ok(Outcome::of(Arc::new(output(response, id, single))))
}

/// The texts `input` rendered to, and whether it was one text (not a list).
fn texts(input: Value) -> Result<(Vec<String>, bool), BlockError> {
    let not_text = |what: &Value| {
        BlockError::new(
            ErrorKind::Input,
            format!(
                "an embed block's input must be a text or a list of texts, not {}",
                super::kind_of(what)
            ),
        )
    };
    match input {
        Value::String(text) => Ok((vec![text], true)),
        Value::Array(items) if !items.is_empty() => {
            let texts = items
                .into_iter()
                .map(|v| match v {
                    Value::String(text) => Ok(text),
                    other => Err(not_text(&other)),
                })
                .collect::<Result<_, _>>()?;
            Ok((texts, false))
        }
        Value::Array(_) => Err(BlockError::new(
            ErrorKind::Input,
            "an embed block's input rendered to an empty list: there is nothing to embed",
        )),
        other => Err(not_text(&other)),
    }
}

/// A provider that answers with fewer or more vectors than texts broke its contract;
/// the vectors could not be matched to the texts.
fn check_count(request: &EmbedRequest, response: &EmbedResponse) -> Result<(), BlockError> {
    if response.vectors.len() == request.inputs.len() {
        return Ok(());
    }
    Err(BlockError::new(
        ErrorKind::Model,
        format!(
            "the model returned {} vectors for {} texts",
            response.vectors.len(),
            request.inputs.len()
        ),
    ))
}

/// `{embedding | embeddings, dimensions, model, usage}`.
fn output(response: EmbedResponse, id: String, single: bool) -> Value {
    let dimensions = response.vectors.first().map_or(0, Vec::len);
    let usage = serde_json::json!({
        "prompt_tokens": response.usage.input_tokens,
        "total_tokens": response.usage.total_tokens(),
        "cost_usd": response.usage.cost_usd,
    });
    let mut vectors = response.vectors;
    let (key, vectors) = if single {
        ("embedding", serde_json::json!(vectors.swap_remove(0)))
    } else {
        ("embeddings", serde_json::json!(vectors))
    };
    serde_json::json!({
        key: vectors,
        "dimensions": dimensions,
        "model": id,
        "usage": usage,
    })
}

/// The `llm_call` event of one embedding call, answered or failed.
fn call_event(
    cx: &Cx<'_>,
    model: &dyn Model,
    id: &str,
    request: &EmbedRequest,
    started: std::time::Instant,
    result: &Result<EmbedResponse, BlockError>,
) -> EventKind {
    let ok = result.as_ref().ok();
    EventKind::LlmCall {
        path: cx.key.clone(),
        model: id.to_owned(),
        usage: ok.map(|r| r.usage).unwrap_or_default(),
        call: Box::new(CallDetail {
            operation: Some("embeddings".to_owned()),
            provider: model.provider().to_owned(),
            request_model: request.model.clone(),
            response_model: ok.and_then(|r| r.model.clone()),
            finish_reason: None,
            elapsed_us: started.elapsed().as_micros() as u64,
            error: result.as_ref().err().map(|e| e.kind.to_string()),
            prompt: cx.run.engine.capture_model_content.map(|max| {
                truncated(
                    serde_json::to_string(&request.inputs).unwrap_or_default(),
                    max,
                )
            }),
            answer: None,
        }),
    }
}
