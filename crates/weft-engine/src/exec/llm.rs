//! The `llm` leaf: assembles the prompt, calls the model through the `Model` port, runs
//! the bounded tool loop (sub-flows serve as tools), validates structured output with a
//! bounded repair loop, keeps conversation history, and accounts usage against budgets.

use super::run_subflow;
use super::stall::{self, Progress};
use crate::run::{Cx, Exec, Outcome, Stop};
use std::sync::Arc;
use weft_core::event::EventKind;
use weft_core::ir::{LlmOutput, LlmSpec};
use weft_core::ports::{Message, ModelRequest, ToolCall, ToolChoice, ToolDef, Usage};
use weft_core::{BlockError, ErrorKind, Patch, Value};

fn config_error(msg: impl Into<String>) -> Stop {
    Stop::Failed(BlockError::new(ErrorKind::Config, msg))
}

/// Rough token count of a request, for refusing a call before it exceeds a budget.
fn estimate_tokens(req: &ModelRequest) -> u64 {
    let chars: usize = req.messages.iter().map(|m| m.content.len()).sum();
    (chars as u64).div_ceil(4) + u64::from(req.max_tokens.unwrap_or(0))
}

/// Extracts the JSON answer from a reply that may wrap it in a Markdown code fence.
fn json_text(reply: &str) -> &str {
    let t = reply.trim();
    if let Some(rest) = t.strip_prefix("```") {
        let rest = rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric());
        if let Some(end) = rest.rfind("```") {
            return rest[..end].trim();
        }
    }
    t
}

fn parse_structured(reply: &str, schema: &Value) -> Result<Value, String> {
    let value: Value =
        serde_json::from_str(json_text(reply)).map_err(|e| format!("it is not JSON ({e})"))?;
    let validator = jsonschema::validator_for(schema)
        .map_err(|e| format!("the output schema is invalid: {e}"))?;
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .take(5)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect();
    if errors.is_empty() {
        Ok(value)
    } else {
        Err(format!(
            "it does not match the schema: {}",
            errors.join("; ")
        ))
    }
}

/// The tool calls of one block invocation and what each returned to the model.
#[derive(Default)]
struct ToolTrace {
    calls: Vec<Value>,
    results: Vec<Value>,
}

impl ToolTrace {
    fn record(&mut self, call: &ToolCall, answer: &str) {
        self.calls.push(serde_json::json!({
            "id": call.id, "name": call.name, "arguments": call.arguments,
        }));
        self.results.push(serde_json::json!({
            "tool_call_id": call.id, "name": call.name, "result": answer,
        }));
    }

    /// Adds `tool_calls`, `tool_results` and `rounds` to a `message` output.
    fn write_into(self, message: &mut Value, rounds: u32) {
        if let Value::Object(m) = message {
            m.insert("tool_calls".into(), Value::Array(self.calls));
            m.insert("tool_results".into(), Value::Array(self.results));
            m.insert("rounds".into(), Value::from(rounds));
        }
    }
}

/// The required tools of `s` that no call in `calls` (`[{name, ...}]`) has called yet.
fn uncalled<'s>(s: &'s LlmSpec, calls: &[Value]) -> Vec<&'s str> {
    s.required_tools
        .iter()
        .map(String::as_str)
        .filter(|t| !calls.iter().any(|c| c["name"].as_str() == Some(*t)))
        .collect()
}

/// The choice that makes the next turn call the first required tool not called yet.
fn next_required(s: &LlmSpec, calls: &[Value]) -> Option<ToolChoice> {
    uncalled(s, calls)
        .first()
        .map(|t| ToolChoice::Tool((*t).to_owned()))
}

pub(crate) async fn run(cx: &Cx<'_>, s: &LlmSpec) -> Exec {
    let engine = &cx.run.engine;
    let id = s
        .model
        .clone()
        .or_else(|| engine.default_model.clone())
        .ok_or_else(|| config_error("the llm block names no model and no default model is set (give the block a `model`, or run with --model / WEFT_MODEL)"))?;
    let resolver = engine
        .models
        .as_ref()
        .ok_or_else(|| config_error("this engine has no model providers configured"))?;
    let (model, model_name) = resolver.resolve(&id, cx.flow.models.get(&id))?;

    let scope = cx.scope();
    let mut messages = Vec::new();
    if let Some(sys) = &s.system {
        messages.push(Message::new("system", cx.render(&sys.0, &scope)?));
    }
    let history: Vec<Message> = match s.history.as_deref().and_then(|k| cx.state.get(k)) {
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| {
            BlockError::new(
                ErrorKind::Input,
                format!("the history in state is not a list of messages: {e}"),
            )
        })?,
        None => Vec::new(),
    };
    messages.extend(history.iter().cloned());
    let new_from = messages.len();
    for m in &s.messages {
        messages.push(Message::new(&m.role, cx.render(&m.content.0, &scope)?));
    }
    if let Some(p) = &s.prompt {
        messages.push(Message::new("user", cx.render(&p.0, &scope)?));
    }
    let mut req = ModelRequest {
        model: model_name,
        messages,
        tools: s
            .tools
            .iter()
            .map(|t| ToolDef {
                name: t.name.clone(),
                description: t.description.clone(),
                parameters: t.parameters.clone(),
            })
            .collect(),
        output_schema: s.output_schema.clone(),
        temperature: s.temperature,
        max_tokens: s.max_tokens,
        reasoning_effort: s.reasoning_effort.clone(),
        search: s.search.clone(),
        tool_choice: s
            .tool_choice
            .as_deref()
            .map(|c| match c {
                "required" => ToolChoice::Required,
                name => ToolChoice::Tool(name.to_owned()),
            })
            .or_else(|| next_required(s, &[])),
        provider_tools: s.provider_tools.clone(),
    };

    let emitter = &cx.run.emitter;
    let path = cx.key.to_string();
    let mut total = Usage::default();
    let mut tool_rounds = 0u32;
    // The calls and their answers, for a `message` output (`tool_calls`, `tool_results`).
    let mut trace = ToolTrace::default();
    let mut repairs_left = s.max_repairs;
    loop {
        let warn = |e: EventKind| emitter.emit(|| e);
        cx.budgets.check(estimate_tokens(&req), &path, &warn)?;
        let progress = Progress::new();
        let on_delta = |text: &str| {
            progress.tick();
            emitter.emit(|| EventKind::LlmDelta {
                path: path.clone(),
                text: text.to_owned(),
            })
        };
        let resp = stall::model_call(&cx.stall, &progress, model.complete(&req, &on_delta)).await?;
        cx.budgets.charge(&resp.usage, &path, &warn);
        total.add(&resp.usage);
        cx.run.usage.lock().expect("usage lock").add(&resp.usage);
        emitter.emit(|| EventKind::LlmCall {
            path: path.clone(),
            model: id.clone(),
            usage: resp.usage,
        });

        if !resp.tool_calls.is_empty() && !s.tools.is_empty() && !req.tools.is_empty() {
            tool_rounds += 1;
            let mut assistant = Message::new("assistant", resp.content.clone());
            assistant.tool_calls = resp.tool_calls.clone();
            req.messages.push(assistant);
            for (i, call) in resp.tool_calls.iter().enumerate() {
                emitter.emit(|| EventKind::ToolCalled {
                    path: path.clone(),
                    tool: call.name.clone(),
                    arguments: call.arguments.clone(),
                });
                let content = match s.tools.iter().find(|t| t.name == call.name) {
                    None => format!("error: there is no tool named `{}`", call.name),
                    Some(tool) => {
                        let seg = format!("tool{tool_rounds}.{i}.{}", tool.name);
                        let work = run_subflow(
                            cx,
                            &tool.flow,
                            Arc::new(call.arguments.clone()),
                            false,
                            &seg,
                        );
                        match stall::tool(&cx.stall, &tool.name, work).await? {
                            Ok(out) => match &*out.output {
                                Value::String(s) => s.clone(),
                                v => v.to_string(),
                            },
                            Err(Stop::Failed(e)) => format!("error: {}", e.message),
                            Err(suspended) => return Err(suspended),
                        }
                    }
                };
                trace.record(call, &content);
                let mut answer = Message::new("tool", content);
                answer.tool_call_id = Some(call.id.clone());
                req.messages.push(answer);
            }
            // A forced call is one turn's; then the next required tool, or the model
            // decides.
            req.tool_choice = next_required(s, &trace.calls);
            if tool_rounds >= s.max_tool_rounds {
                // The rounds are spent: the model is asked once more, offered no tool,
                // so its next turn is the answer.
                req.tools.clear();
                req.tool_choice = None;
            }
            continue;
        }

        let missing = uncalled(s, &trace.calls);
        if !missing.is_empty() && !req.tools.is_empty() && tool_rounds < s.max_tool_rounds {
            // A provider that ignores the forced choice answered anyway: the turn counts
            // as a round, and the model is told what it must do first.
            tool_rounds += 1;
            req.messages
                .push(Message::new("assistant", resp.content.clone()));
            req.messages.push(Message::new(
                "user",
                format!("Before you answer, call the tool `{}`.", missing[0]),
            ));
            continue;
        }
        if !missing.is_empty() {
            return Err(Stop::Failed(
                BlockError::new(
                    ErrorKind::Assertion,
                    format!(
                        "the model answered without calling the required tool{} {}",
                        if missing.len() == 1 { "" } else { "s" },
                        missing
                            .iter()
                            .map(|t| format!("`{t}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
                .with_detail(serde_json::json!({"required_tools": missing, "reply": resp.content})),
            ));
        }
        let output = match &s.output_schema {
            None => Value::String(resp.content.clone()),
            Some(schema) => match parse_structured(&resp.content, schema) {
                Ok(v) => v,
                Err(why) if repairs_left > 0 => {
                    repairs_left -= 1;
                    req.messages
                        .push(Message::new("assistant", resp.content.clone()));
                    req.messages.push(Message::new(
                        "user",
                        format!(
                            "Your previous answer was not valid: {why}. Answer again with only a JSON value that matches this JSON Schema:\n{schema}"
                        ),
                    ));
                    continue;
                }
                Err(why) => {
                    return Err(Stop::Failed(
                        BlockError::new(
                            ErrorKind::MalformedResponse,
                            format!("the model's structured answer is invalid after {} repair attempts: {why}", s.max_repairs),
                        )
                        .with_detail(serde_json::json!({"reply": resp.content})),
                    ));
                }
            },
        };

        let mut patch = Patch::default();
        if let Some(key) = &s.history {
            let mut kept = history;
            kept.extend(
                req.messages[new_from..]
                    .iter()
                    .filter(|m| m.role != "system")
                    .cloned(),
            );
            kept.push(Message::new("assistant", resp.content.clone()));
            patch.set(
                vec![key.clone()],
                serde_json::to_value(kept).unwrap_or(Value::Null),
            );
        }
        let output = match s.output {
            LlmOutput::Text => output,
            LlmOutput::Message => {
                let mut message = serde_json::json!({
                    "content": output,
                    "usage": {
                        "prompt_tokens": total.input_tokens,
                        "completion_tokens": total.output_tokens,
                        "total_tokens": total.total_tokens(),
                        "cost_usd": total.cost_usd,
                    },
                    "model": id,
                });
                if !s.tools.is_empty() {
                    trace.write_into(&mut message, tool_rounds);
                }
                message
            }
        };
        return Ok(Outcome {
            patch,
            ..Outcome::of(Arc::new(output))
        });
    }
}
