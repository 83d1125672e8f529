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

/// The JSON value of a model's reply, and whether it had to be repaired to read as
/// JSON. A reply that is not JSON as written (a trailing comma, single quotes, prose
/// around it) is repaired locally, which saves asking the model again; one cut off at
/// its token limit is not, since completing it would invent what was never said.
fn answer_json(reply: &str, cut_off: bool) -> Result<(Value, bool), String> {
    let text = json_text(reply);
    match serde_json::from_str(text) {
        Ok(v) => Ok((v, false)),
        Err(e) if cut_off => Err(format!(
            "it is not JSON ({e}): the answer was cut off at its token limit"
        )),
        Err(e) => llm_json::loads(text, &llm_json::RepairOptions::default())
            .map(|v| (v, true))
            .map_err(|_| format!("it is not JSON ({e})")),
    }
}

/// The reply's JSON checked against `schema`, and whether it was repaired locally.
fn parse_structured(reply: &str, schema: &Value, cut_off: bool) -> Result<(Value, bool), String> {
    let (value, repaired) = answer_json(reply, cut_off)?;
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
        Ok((value, repaired))
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
    let (model, id, model_name) = resolve_model(cx, s.model.as_deref())?;
    let (messages, prompt) = build_messages(cx, s)?;
    let mut call = Call {
        req: request(s, model_name, messages),
        id,
        path: cx.key.clone(),
        total: Usage::default(),
        tool_rounds: 0,
        trace: ToolTrace::default(),
        repairs_left: s.max_repairs,
        repaired_locally: false,
    };
    loop {
        let resp = call.send(cx, model.as_ref()).await?;
        if !resp.tool_calls.is_empty() && !s.tools.is_empty() && !call.req.tools.is_empty() {
            call.run_tools(cx, s, &resp).await?;
            continue;
        }
        if call.insist_on_required_tools(s, &resp)? {
            continue;
        }
        let Some(output) = call.structured_output(s, &resp)? else {
            continue;
        };
        if call.repaired_locally {
            cx.run.emitter.emit(|| EventKind::Warning {
                path: cx.key.clone(),
                code: "structured_answer_repaired".into(),
                message: "the model's answer was not valid JSON as written; it was repaired locally (a trailing comma, quotes or prose around it) and then matched the output schema".into(),
            });
        }
        return Ok(call.finish(s, prompt, &resp.content, output));
    }
}

/// The model a block calls: its own `model` (a template, such as `{{ input.model }}`,
/// chosen now), else the engine's default, else its fallback (with a warning); and the
/// name the provider knows it by.
pub(super) fn resolve_model(
    cx: &Cx<'_>,
    model: Option<&str>,
) -> Result<(Arc<dyn weft_core::ports::Model>, String, String), Stop> {
    let engine = &cx.run.engine;
    let id = match (model, &engine.default_model, &engine.fallback_model) {
        (Some(id), _, _) if id.contains("{{") => {
            let chosen = cx.render(id, &cx.scope())?.trim().to_owned();
            if chosen.is_empty() {
                return Err(config_error(format!(
                    "the block's model `{id}` chose no model (it rendered empty)"
                )));
            }
            chosen
        }
        (Some(id), _, _) => id.to_owned(),
        (None, Some(id), _) => id.clone(),
        (None, None, Some((id, advice))) => {
            warn_fallback(cx, id, advice);
            id.clone()
        }
        (None, None, None) => {
            return Err(config_error(
                "the block names no model and no default model is set (give the block a `model`, or run with --model / WEFT_MODEL)",
            ));
        }
    };
    let resolver = engine
        .models
        .as_ref()
        .ok_or_else(|| config_error("this engine has no model providers configured"))?;
    let (model, name) = resolver.resolve(&id, cx.flow.models.get(&id))?;
    Ok((model, id, name))
}

/// `text` cut to at most `max` characters (on a character boundary), marked when cut.
pub(super) fn truncated(mut text: String, max: usize) -> String {
    if let Some((at, _)) = text.char_indices().nth(max) {
        text.truncate(at);
        text.push('…');
    }
    text
}

/// Warns, once a run, that a block named no model and got the fallback.
fn warn_fallback(cx: &Cx<'_>, id: &str, advice: &str) {
    use std::sync::atomic::Ordering;
    if cx.run.fallback_warned.swap(true, Ordering::Relaxed) {
        return;
    }
    let message = if advice.is_empty() {
        format!("no model: using {id}")
    } else {
        format!("no model: using {id}; {advice}")
    };
    cx.run.emitter.emit(|| EventKind::Warning {
        path: cx.key.clone(),
        code: "no_model".to_owned(),
        message,
    });
}

/// What of the opening conversation the history keeps.
struct Prompt {
    /// The history read from the state.
    history: Vec<Message>,
    /// Where the block's own messages start in `messages`.
    new_from: usize,
}

/// The conversation a block opens with (system prompt, history, the block's messages
/// and prompt, rendered), and what of it the history keeps.
fn build_messages(cx: &Cx<'_>, s: &LlmSpec) -> Result<(Vec<Message>, Prompt), Stop> {
    let scope = cx.scope();
    let mut messages = Vec::new();
    if let Some(sys) = &s.system {
        messages.push(Message::new("system", cx.render(&sys.0, &scope)?));
    }
    let history: Vec<Message> = match s.history.as_deref().and_then(|k| cx.state.get(k)) {
        Some(v) => serde_json::from_value(v.to_value()).map_err(|e| {
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
    Ok((messages, Prompt { history, new_from }))
}

/// The first request of a block: its conversation, tools and sampling settings.
fn request(s: &LlmSpec, model: String, messages: Vec<Message>) -> ModelRequest {
    ModelRequest {
        model,
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
    }
}

/// One block's conversation with its model, turn by turn.
struct Call {
    /// The next request.
    req: ModelRequest,
    /// The model's id, as events and outputs name it.
    id: String,
    /// The block's step key.
    path: std::sync::Arc<str>,
    /// Usage over every turn.
    total: Usage,
    /// Tool rounds so far.
    tool_rounds: u32,
    /// The calls and their answers, for a `message` output (`tool_calls`, ...).
    trace: ToolTrace,
    /// Structured-output repairs still allowed.
    repairs_left: u32,
    /// Whether the accepted structured answer was repaired locally to read as JSON.
    repaired_locally: bool,
}

impl Call {
    /// Sends the request within the block's budgets and stall limits, streaming deltas
    /// as events, and accounts the answer's usage.
    async fn send(
        &mut self,
        cx: &Cx<'_>,
        model: &dyn weft_core::ports::Model,
    ) -> Result<weft_core::ports::ModelResponse, Stop> {
        let emitter = &cx.run.emitter;
        let path = &self.path;
        let warn = |e: EventKind| emitter.emit(|| e);
        cx.budgets.check(estimate_tokens(&self.req), path, &warn)?;
        let progress = Progress::new();
        let on_delta = |text: &str| {
            progress.tick();
            emitter.emit(|| EventKind::LlmDelta {
                path: path.clone(),
                text: text.to_owned(),
            })
        };
        let started = std::time::Instant::now();
        let result =
            stall::model_call(&cx.stall, &progress, model.complete(&self.req, &on_delta)).await;
        emitter.emit(|| self.call_event(cx, model, started, &result));
        let resp = result?;
        cx.budgets.charge(&resp.usage, path, &warn);
        self.total.add(&resp.usage);
        cx.run.usage.lock().expect("usage lock").add(&resp.usage);
        Ok(resp)
    }

    /// The `llm_call` event of one call, answered or failed.
    fn call_event(
        &self,
        cx: &Cx<'_>,
        model: &dyn weft_core::ports::Model,
        started: std::time::Instant,
        result: &Result<weft_core::ports::ModelResponse, BlockError>,
    ) -> EventKind {
        let ok = result.as_ref().ok();
        let captured = cx.run.engine.capture_model_content;
        EventKind::LlmCall {
            path: self.path.clone(),
            model: self.id.clone(),
            usage: ok.map(|r| r.usage).unwrap_or_default(),
            call: Box::new(weft_core::event::CallDetail {
                operation: None,
                provider: model.provider().to_owned(),
                request_model: self.req.model.clone(),
                response_model: ok.and_then(|r| r.model.clone()),
                finish_reason: ok.and_then(|r| r.finish_reason.clone()),
                elapsed_us: started.elapsed().as_micros() as u64,
                error: result.as_ref().err().map(|e| e.kind.to_string()),
                prompt: captured.map(|max| {
                    truncated(
                        serde_json::to_string(&self.req.messages).unwrap_or_default(),
                        max,
                    )
                }),
                answer: captured
                    .zip(ok)
                    .map(|(max, r)| truncated(r.content.clone(), max)),
            }),
        }
    }

    /// Runs the tools the model called, each a sub-flow, and puts their answers in the
    /// conversation; then forces the next required tool, or offers none once the rounds
    /// are spent.
    async fn run_tools(
        &mut self,
        cx: &Cx<'_>,
        s: &LlmSpec,
        resp: &weft_core::ports::ModelResponse,
    ) -> Result<(), Stop> {
        self.tool_rounds += 1;
        let mut assistant = Message::new("assistant", resp.content.clone());
        assistant.tool_calls = resp.tool_calls.clone();
        self.req.messages.push(assistant);
        for (i, call) in resp.tool_calls.iter().enumerate() {
            let tool = s.tools.iter().find(|t| t.name == call.name);
            let seg = tool.map(|t| format!("tool{}.{i}.{}", self.tool_rounds, t.name));
            cx.run.emitter.emit(|| EventKind::ToolCalled {
                path: self.path.clone(),
                tool: call.name.clone(),
                arguments: call.arguments.clone(),
                step: seg.as_ref().map(|seg| format!("{}/{seg}", self.path)),
            });
            let content = match tool.zip(seg) {
                None => format!("error: there is no tool named `{}`", call.name),
                Some((tool, seg)) => {
                    let work =
                        run_subflow(cx, &tool.flow, call.arguments.clone().into(), false, &seg);
                    match stall::tool(&cx.stall, &tool.name, work).await? {
                        Ok(out) => match &*out.output.json() {
                            Value::String(s) => s.clone(),
                            v => v.to_string(),
                        },
                        Err(Stop::Failed(e)) => format!("error: {}", e.message),
                        Err(suspended) => return Err(suspended),
                    }
                }
            };
            self.trace.record(call, &content);
            let mut answer = Message::new("tool", content);
            answer.tool_call_id = Some(call.id.clone());
            self.req.messages.push(answer);
        }
        // A forced call is one turn's; then the next required tool, or the model decides.
        self.req.tool_choice = next_required(s, &self.trace.calls);
        if self.tool_rounds >= s.max_tool_rounds {
            // The rounds are spent: the model is asked once more, offered no tool, so its
            // next turn is the answer.
            self.req.tools.clear();
            self.req.tool_choice = None;
        }
        Ok(())
    }

    /// When the model answered before calling every required tool: with rounds left, it
    /// is told to call the next one (true: ask again); without, the block fails.
    fn insist_on_required_tools(
        &mut self,
        s: &LlmSpec,
        resp: &weft_core::ports::ModelResponse,
    ) -> Result<bool, Stop> {
        let missing = uncalled(s, &self.trace.calls);
        if missing.is_empty() {
            return Ok(false);
        }
        if !self.req.tools.is_empty() && self.tool_rounds < s.max_tool_rounds {
            // A provider that ignores the forced choice answered anyway: the turn counts
            // as a round, and the model is told what it must do first.
            self.tool_rounds += 1;
            self.req
                .messages
                .push(Message::new("assistant", resp.content.clone()));
            self.req.messages.push(Message::new(
                "user",
                format!("Before you answer, call the tool `{}`.", missing[0]),
            ));
            return Ok(true);
        }
        let plural = if missing.len() == 1 { "" } else { "s" };
        let names: Vec<String> = missing.iter().map(|t| format!("`{t}`")).collect();
        Err(Stop::Failed(
            BlockError::new(
                ErrorKind::Assertion,
                format!(
                    "the model answered without calling the required tool{plural} {}",
                    names.join(", ")
                ),
            )
            .with_detail(serde_json::json!({"required_tools": missing, "reply": resp.content})),
        ))
    }

    /// The answer as the block's output: its text, or its JSON checked against the
    /// output schema. An invalid answer is sent back for repair while repairs are left
    /// (none: ask again), then fails the block.
    fn structured_output(
        &mut self,
        s: &LlmSpec,
        resp: &weft_core::ports::ModelResponse,
    ) -> Result<Option<Value>, Stop> {
        let Some(schema) = &s.output_schema else {
            return Ok(Some(Value::String(resp.content.clone())));
        };
        let cut_off = resp.finish_reason.as_deref() == Some("length");
        match parse_structured(&resp.content, schema, cut_off) {
            Ok((v, repaired)) => {
                self.repaired_locally |= repaired;
                Ok(Some(v))
            }
            Err(why) if self.repairs_left > 0 => {
                self.repairs_left -= 1;
                self.req
                    .messages
                    .push(Message::new("assistant", resp.content.clone()));
                self.req.messages.push(Message::new(
                    "user",
                    format!(
                        "Your previous answer was not valid: {why}. Answer again with only a JSON value that matches this JSON Schema:\n{schema}"
                    ),
                ));
                Ok(None)
            }
            Err(why) => Err(Stop::Failed(
                BlockError::new(
                    ErrorKind::MalformedResponse,
                    format!(
                        "the model's structured answer is invalid after {} repair attempts: {why}",
                        s.max_repairs
                    ),
                )
                .with_detail(serde_json::json!({"reply": resp.content})),
            )),
        }
    }

    /// The block's outcome: the output in the shape it asks for (the answer, or a
    /// `message` with usage, model and tool trace) and the history written back.
    fn finish(self, s: &LlmSpec, prompt: Prompt, reply: &str, output: Value) -> Outcome {
        let mut patch = Patch::default();
        if let Some(key) = &s.history {
            let mut kept = prompt.history;
            kept.extend(
                self.req.messages[prompt.new_from..]
                    .iter()
                    .filter(|m| m.role != "system")
                    .cloned(),
            );
            kept.push(Message::new("assistant", reply));
            patch.set(
                vec![key.clone()],
                serde_json::to_value(kept).unwrap_or(Value::Null),
            );
        }
        let output = match s.output {
            LlmOutput::Text => output,
            LlmOutput::Message => {
                let total = self.total;
                let mut message = serde_json::json!({
                    "content": output,
                    "usage": {
                        "prompt_tokens": total.input_tokens,
                        "completion_tokens": total.output_tokens,
                        "total_tokens": total.total_tokens(),
                        "cost_usd": total.cost_usd,
                    },
                    "model": self.id,
                });
                if !s.tools.is_empty() {
                    self.trace.write_into(&mut message, self.tool_rounds);
                }
                message
            }
        };
        Outcome {
            patch,
            ..Outcome::of(Arc::new(output))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use weft_core::ports::ModelResponse;

    fn call(s: &LlmSpec) -> Call {
        Call {
            req: request(s, "m".into(), vec![Message::new("user", "hi")]),
            id: "scripted/m".into(),
            path: "root/ask".into(),
            total: Usage::default(),
            tool_rounds: 0,
            trace: ToolTrace::default(),
            repairs_left: s.max_repairs,
            repaired_locally: false,
        }
    }

    fn answer(text: &str) -> ModelResponse {
        ModelResponse {
            content: text.into(),
            ..ModelResponse::default()
        }
    }

    #[test]
    fn the_first_request_forces_the_first_required_tool() {
        let s = LlmSpec {
            required_tools: vec!["search".into(), "cite".into()],
            ..LlmSpec::default()
        };
        let req = request(&s, "m".into(), Vec::new());
        assert_eq!(req.tool_choice, Some(ToolChoice::Tool("search".into())));
        let s = LlmSpec {
            tool_choice: Some("required".into()),
            ..LlmSpec::default()
        };
        assert_eq!(
            request(&s, "m".into(), Vec::new()).tool_choice,
            Some(ToolChoice::Required)
        );
    }

    #[test]
    fn an_invalid_structured_answer_is_sent_back_until_repairs_run_out() {
        let s = LlmSpec {
            output_schema: Some(json!({"type": "object", "required": ["n"]})),
            max_repairs: 1,
            ..LlmSpec::default()
        };
        let mut c = call(&s);
        assert_eq!(c.structured_output(&s, &answer("nope")).unwrap(), None);
        assert_eq!(c.req.messages.len(), 3, "the answer and the repair request");
        assert!(c.req.messages[2].content.contains("not valid"));
        let Err(Stop::Failed(e)) = c.structured_output(&s, &answer("{}")) else {
            panic!("a failure after the last repair")
        };
        assert_eq!(e.kind, ErrorKind::MalformedResponse);
        assert_eq!(
            c.structured_output(&s, &answer("```json\n{\"n\": 1}\n```"))
                .unwrap(),
            Some(json!({"n": 1}))
        );
    }

    #[test]
    fn a_reply_that_is_almost_json_is_repaired_locally_unless_it_was_cut_off() {
        let s = LlmSpec {
            output_schema: Some(json!({
                "type": "object",
                "properties": {"decision": {"enum": ["continue", "complete"]}},
                "required": ["decision"],
            })),
            max_repairs: 1,
            ..LlmSpec::default()
        };
        let mut c = call(&s);
        for reply in [
            r#"{"decision": "complete",}"#,
            "Here it is: {'decision': 'complete'}",
        ] {
            assert_eq!(
                c.structured_output(&s, &answer(reply)).unwrap(),
                Some(json!({"decision": "complete"})),
                "{reply}"
            );
        }
        assert!(c.repaired_locally);
        assert_eq!(c.req.messages.len(), 1, "the model was not asked again");
        // Cut off at the token limit: completing it would invent the rest.
        let cut = ModelResponse {
            finish_reason: Some("length".into()),
            ..answer(r#"{"decision": "comp"#)
        };
        assert_eq!(c.structured_output(&s, &cut).unwrap(), None);
        assert!(c.req.messages[2].content.contains("token limit"));
        // Repaired but off-schema still goes back to the model.
        let mut c = call(&s);
        assert_eq!(
            c.structured_output(&s, &answer(r#"{"action": "replan",}"#))
                .unwrap(),
            None
        );
    }

    #[test]
    fn a_missing_required_tool_is_asked_for_then_fails_the_block() {
        let s = LlmSpec {
            required_tools: vec!["search".into()],
            max_tool_rounds: 1,
            tools: vec![
                serde_json::from_value(
                    json!({"name": "search", "description": "d", "parameters": {}, "flow": "f"}),
                )
                .unwrap(),
            ],
            ..LlmSpec::default()
        };
        let mut c = call(&s);
        assert!(c.insist_on_required_tools(&s, &answer("done")).unwrap());
        assert!(c.req.messages.last().unwrap().content.contains("`search`"));
        let Err(Stop::Failed(e)) = c.insist_on_required_tools(&s, &answer("done")) else {
            panic!("the rounds are spent")
        };
        assert_eq!(e.kind, ErrorKind::Assertion);
    }

    #[test]
    fn a_message_output_carries_usage_model_and_history() {
        let s = LlmSpec {
            output: LlmOutput::Message,
            history: Some("chat".into()),
            ..LlmSpec::default()
        };
        let mut c = call(&s);
        c.total = Usage {
            input_tokens: 3,
            output_tokens: 4,
            cost_usd: 0.5,
        };
        let prompt = Prompt {
            history: Vec::new(),
            new_from: 0,
        };
        let out = c.finish(&s, prompt, "hello", Value::from("hello"));
        let output = out.output.to_value();
        assert_eq!(output["usage"]["total_tokens"], 7);
        assert_eq!(output["model"], "scripted/m");
        let history = serde_json::to_value(&out.patch).unwrap().to_string();
        assert!(
            history.contains("hello") && history.contains("hi"),
            "{history}"
        );
    }
}
