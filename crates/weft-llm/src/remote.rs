//! Cloud and server models (OpenAI and compatible servers, Anthropic, Gemini, Ollama)
//! through `genai`, which speaks each provider's wire format for chats and embeddings,
//! except a chat without tools to OpenAI or Ollama, which [`crate::openai_wire`] and
//! [`crate::ollama_wire`] send themselves. This module adds what a production caller
//! needs around it: a per-call timeout, retries with backoff that honour `Retry-After`,
//! the shared concurrency and rate limits, typed errors, usage and cost.

use async_trait::async_trait;
use futures::StreamExt;
use genai::chat::{
    ChatMessage, ChatOptions, ChatRequest, ChatResponseFormat, ChatStreamEvent, ContentPart,
    JsonSpec, MessageContent, ReasoningEffort, Tool, ToolResponse, WebSearchConfig,
};
use genai::embed::EmbedOptions;
use genai::resolver::{AuthData, Endpoint};
use genai::{ModelIden, ServiceTarget};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use weft_core::ports::{
    DeltaSink, EmbedRequest, EmbedResponse, Message, Model, ModelRequest, ModelResponse, ToolCall,
    Usage,
};
use weft_core::{BlockError, ErrorKind};

use crate::errors::{CallError, from_genai};
use crate::limits::{Backoff, Limiter};
use crate::prices::Price;
use crate::providers::Provider;

/// How a remote model is reached and how patient Weft is with it.
#[derive(Clone)]
pub struct RemoteSettings {
    /// Which wire format.
    pub provider: Provider,
    /// The endpoint, ending in `/`.
    pub endpoint: String,
    /// The API key, if the provider needs one.
    pub api_key: Option<String>,
    /// Longest a single call (one attempt) may take.
    pub timeout: Duration,
    /// Attempts after the first on throttling, 5xx and dropped connections.
    pub max_retries: u32,
    /// Stream the answer (token deltas become events) or wait for it whole.
    pub stream: bool,
    /// Price per million tokens, when known.
    pub price: Option<Price>,
}

/// A model on a remote server.
pub struct Remote {
    client: genai::Client,
    http: reqwest::Client,
    settings: RemoteSettings,
    limiter: Arc<Limiter>,
}

impl Remote {
    /// A model reached with `settings`, sharing `client`'s and `http`'s connections and
    /// `limiter`.
    pub fn new(
        client: genai::Client,
        http: reqwest::Client,
        settings: RemoteSettings,
        limiter: Arc<Limiter>,
    ) -> Remote {
        Remote {
            client,
            http,
            settings,
            limiter,
        }
    }

    fn target(&self, model: &str) -> ServiceTarget {
        ServiceTarget {
            endpoint: Endpoint::from_owned(self.settings.endpoint.clone()),
            auth: match &self.settings.api_key {
                Some(key) => AuthData::from_single(key.clone()),
                // Ollama needs none; genai still wants a value.
                None => AuthData::from_single(String::new()),
            },
            model: ModelIden::new(self.settings.provider.adapter(), model.to_owned()),
        }
    }

    async fn attempt(
        &self,
        request: &ModelRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<ModelResponse, CallError> {
        let provider = self.settings.provider;
        let own_client = match provider {
            Provider::OpenAi if crate::openai_wire::handles(request) => {
                Some(crate::openai_wire::call(&self.http, &self.settings, request, on_delta).await)
            }
            Provider::Ollama if crate::ollama_wire::handles(request) => {
                Some(crate::ollama_wire::call(&self.http, &self.settings, request, on_delta).await)
            }
            _ => None,
        };
        if let Some(answer) = own_client {
            let (mut response, (input, output)) = answer?;
            response.usage = self.priced(input, output);
            return Ok(response);
        }
        let (chat, options) = to_chat(provider, request)?;
        let target = self.target(&request.model);
        let fail = |e| from_genai(provider, &request.model, e);
        if !self.settings.stream {
            let res = self
                .client
                .exec_chat(target, chat, Some(&options))
                .await
                .map_err(fail)?;
            let tool_calls = res
                .content
                .tool_calls()
                .into_iter()
                .map(from_tool_call)
                .collect();
            return Ok(ModelResponse {
                content: res.content.joined_texts().unwrap_or_default(),
                tool_calls,
                usage: self.usage(&res.usage),
                model: Some(res.provider_model_iden.model_name.to_string()),
                finish_reason: res.stop_reason.map(|r| r.raw().to_owned()),
            });
        }
        let mut stream = self
            .client
            .exec_chat_stream(target, chat, Some(&options))
            .await
            .map_err(fail)?
            .stream;
        let mut text = String::new();
        let mut response = None;
        while let Some(event) = stream.next().await {
            match event.map_err(fail)? {
                ChatStreamEvent::Chunk(chunk) => {
                    on_delta(&chunk.content);
                    text.push_str(&chunk.content);
                }
                ChatStreamEvent::End(end) => {
                    let usage = end
                        .captured_usage
                        .as_ref()
                        .map(|u| self.usage(u))
                        .unwrap_or_default();
                    let content = end.captured_content.unwrap_or_default();
                    let tool_calls = content
                        .tool_calls()
                        .into_iter()
                        .map(from_tool_call)
                        .collect();
                    let captured = content.joined_texts().unwrap_or_default();
                    response = Some(ModelResponse {
                        content: if captured.is_empty() {
                            text.clone()
                        } else {
                            captured
                        },
                        tool_calls,
                        usage,
                        model: None,
                        finish_reason: end.captured_stop_reason.map(|r| r.raw().to_owned()),
                    });
                }
                _ => {}
            }
        }
        response.ok_or_else(|| {
            let mut e = CallError::new(
                ErrorKind::Model,
                format!(
                    "the stream from {} ended before the answer did",
                    provider.name()
                ),
            );
            e.retryable = true;
            e
        })
    }

    fn usage(&self, u: &genai::chat::Usage) -> Usage {
        let input = u.prompt_tokens.unwrap_or(0).max(0) as u64;
        let output = u.completion_tokens.unwrap_or(0).max(0) as u64;
        self.priced(input, output)
    }

    fn priced(&self, input: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cost_usd: self.settings.price.map_or(0.0, |p| p.cost(input, output)),
        }
    }
}

#[async_trait]
impl Model for Remote {
    fn provider(&self) -> &str {
        self.settings.provider.name()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<ModelResponse, BlockError> {
        self.patiently(|| self.attempt(request, on_delta)).await
    }

    async fn embed(&self, request: &EmbedRequest) -> Result<EmbedResponse, BlockError> {
        // Known before any attempt: no permit, timeout or retry is spent on it.
        if self.settings.provider == Provider::Anthropic {
            return Err(BlockError::new(
                ErrorKind::Config,
                format!(
                    "Anthropic offers no embedding models, so `anthropic/{}` cannot embed text: name one of another provider (openai/text-embedding-3-small, ollama/nomic-embed-text, gemini/text-embedding-004) or local/<model>",
                    request.model
                ),
            ));
        }
        self.patiently(|| self.embed_once(request)).await
    }
}

impl Remote {
    /// Runs `attempt` within the call's timeout and the shared limits, again after a
    /// backoff while it fails in a way worth retrying, up to `max_retries` times.
    async fn patiently<T, F>(&self, attempt: impl Fn() -> F) -> Result<T, BlockError>
    where
        F: std::future::Future<Output = Result<T, CallError>>,
    {
        let mut backoff = Backoff::new();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let result = {
                let _permit = self.limiter.acquire().await;
                match tokio::time::timeout(self.settings.timeout, attempt()).await {
                    Ok(r) => r,
                    Err(_) => Err(CallError::new(
                        ErrorKind::Timeout,
                        format!(
                            "{} did not answer within {} ms",
                            self.settings.provider.name(),
                            self.settings.timeout.as_millis()
                        ),
                    )),
                }
            };
            match result {
                Ok(r) => return Ok(r),
                Err(e) if e.retryable && attempts <= self.settings.max_retries => {
                    let wait = backoff.next(e.retry_after);
                    if e.kind == ErrorKind::RateLimit {
                        // Everyone calling this model waits, not just this call.
                        self.limiter.pause_for(wait);
                    }
                    tokio::time::sleep(wait).await;
                }
                Err(e) => return Err(e.into_block_error(attempts)),
            }
        }
    }

    /// One embedding request, through genai (which speaks OpenAI's `/embeddings`,
    /// Ollama's `/api/embed` and Gemini's `batchEmbedContents`).
    async fn embed_once(&self, request: &EmbedRequest) -> Result<EmbedResponse, CallError> {
        let provider = self.settings.provider;
        let mut options = EmbedOptions::default().with_capture_usage(true);
        if let Some(n) = request.dimensions {
            options = options.with_dimensions(n as usize);
        }
        let response = self
            .client
            .exec_embed(
                self.target(&request.model),
                genai::embed::EmbedRequest::new_batch(request.inputs.clone()),
                Some(&options),
            )
            .await
            .map_err(|e| from_genai(provider, &request.model, e))?;
        let input = response.usage.prompt_tokens.unwrap_or(0).max(0) as u64;
        let model = response.provider_model_iden.model_name.to_string();
        let mut embeddings = response.embeddings;
        embeddings.sort_by_key(|e| e.index);
        Ok(EmbedResponse {
            vectors: embeddings.into_iter().map(|e| e.vector).collect(),
            usage: self.priced(input, 0),
            model: Some(model),
        })
    }
}

fn from_tool_call(c: &genai::chat::ToolCall) -> ToolCall {
    ToolCall {
        id: c.call_id.clone(),
        name: c.fn_name.clone(),
        arguments: c.fn_arguments.clone(),
    }
}

/// Every tool of `request` in `provider`'s own wire format: the block's function tools,
/// web search when asked for (Chat Completions takes it as `web_search_options`), and the
/// provider tools as written.
fn wire_tools(provider: Provider, request: &ModelRequest) -> Result<Value, CallError> {
    let search = request
        .search
        .as_ref()
        .filter(|s| !matches!(s, Value::Bool(false) | Value::Null));
    let mut out: Vec<Value> = Vec::new();
    match provider {
        Provider::OpenAi => out.extend(request.tools.iter().map(|t| {
            serde_json::json!({"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.parameters}})
        })),
        Provider::Anthropic => {
            out.extend(request.tools.iter().map(|t| {
                serde_json::json!({"name": t.name, "description": t.description, "input_schema": t.parameters})
            }));
            if let Some(config) = search {
                let mut tool =
                    serde_json::json!({"type": "web_search_20250305", "name": "web_search"});
                if let (Value::Object(t), Value::Object(c)) = (&mut tool, config) {
                    for (k, key) in [
                        ("maxUses", "max_uses"),
                        ("allowedDomains", "allowed_domains"),
                        ("blockedDomains", "blocked_domains"),
                    ] {
                        if let Some(v) = c.get(k).or_else(|| c.get(key)) {
                            t.insert(key.into(), v.clone());
                        }
                    }
                }
                out.push(tool);
            }
        }
        Provider::Gemini => {
            if !request.tools.is_empty() {
                let decls: Vec<Value> = request
                    .tools
                    .iter()
                    .map(|t| serde_json::json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
                    .collect();
                out.push(serde_json::json!({"functionDeclarations": decls}));
            }
            if search.is_some() {
                out.push(serde_json::json!({"googleSearch": {}}));
            }
        }
        Provider::Ollama => {
            return Err(CallError::new(
                ErrorKind::Config,
                "Ollama runs no provider tools; remove provider_tools or use another provider",
            ));
        }
    }
    out.extend(request.provider_tools.iter().cloned());
    Ok(Value::Array(out))
}

/// The engine's request in genai's terms.
fn to_chat(
    provider: Provider,
    request: &ModelRequest,
) -> Result<(ChatRequest, ChatOptions), CallError> {
    let mut messages = Vec::with_capacity(request.messages.len());
    for (i, m) in request.messages.iter().enumerate() {
        messages.push(to_message(m, &request.messages[..i])?);
    }
    let mut chat = ChatRequest::new(messages);
    let mut tools: Vec<Tool> = request
        .tools
        .iter()
        .map(|t| {
            Tool::new(t.name.clone())
                .with_description(t.description.clone())
                .with_schema(t.parameters.clone())
        })
        .collect();
    let mut web_search_options = None;
    match &request.search {
        None | Some(Value::Bool(false)) | Some(Value::Null) => {}
        // Chat Completions has no web-search tool: search models take `web_search_options`
        // (genai would send its built-in tool as a malformed function).
        Some(config) if provider == Provider::OpenAi => {
            web_search_options = Some(match config {
                Value::Object(o) => Value::Object(o.clone()),
                _ => Value::Object(Default::default()),
            });
        }
        Some(Value::Object(config)) => {
            // Unknown fields are ignored, as spec 002 says of provider tools.
            let config: WebSearchConfig =
                serde_json::from_value(Value::Object(config.clone())).unwrap_or_default();
            tools.push(Tool::new_web_search().with_config(config));
        }
        Some(_) => tools.push(Tool::new_web_search()),
    }
    let mut extra = serde_json::Map::new();
    if let Some(o) = web_search_options {
        extra.insert("web_search_options".into(), o);
    }
    if request.provider_tools.is_empty() {
        if !tools.is_empty() {
            chat = chat.with_tools(tools);
        }
    } else {
        // genai 0.7 has no pass-through for a provider's own tools, so the whole tools
        // array is written here in the provider's format and genai is given none.
        extra.insert("tools".into(), wire_tools(provider, request)?);
    }
    let mut options = ChatOptions::default()
        .with_capture_usage(true)
        .with_capture_content(true)
        .with_capture_tool_calls(true);
    match &request.tool_choice {
        None => {}
        Some(weft_core::ports::ToolChoice::Required) => {
            options = options.with_tool_choice(genai::chat::ToolChoice::Required)
        }
        Some(weft_core::ports::ToolChoice::Tool(name)) => {
            options = options.with_tool_choice(genai::chat::ToolChoice::tool(name.clone()))
        }
    }
    if !extra.is_empty() {
        options = options.with_extra_body(Value::Object(extra));
    }
    if let Some(t) = request.temperature {
        options = options.with_temperature(t);
    }
    if let Some(n) = request.max_tokens {
        options = options.with_max_tokens(n);
    }
    if let Some(effort) = &request.reasoning_effort {
        let parsed =
            ReasoningEffort::from_keyword(&effort.to_ascii_lowercase()).ok_or_else(|| {
                CallError::new(
                    ErrorKind::Config,
                    format!("unknown reasoning effort `{effort}` (use none, low, medium, high)"),
                )
            })?;
        options = options.with_reasoning_effort(parsed);
    }
    if let Some(schema) = &request.output_schema {
        // genai 0.7 passes a schema to OpenAI, Anthropic and Gemini, but only JSON mode
        // (`format: "json"`) to Ollama (a chat without tools goes through
        // `ollama_wire`, which sends the schema); the engine validates the answer
        // against the schema either way and asks again when it does not match.
        let format = match provider {
            Provider::Ollama => ChatResponseFormat::JsonMode,
            _ => ChatResponseFormat::JsonSpec(JsonSpec::new("answer", schema.clone())),
        };
        options = options.with_response_format(format);
    }
    Ok((chat, options))
}

fn to_message(m: &Message, earlier: &[Message]) -> Result<ChatMessage, CallError> {
    Ok(match m.role.as_str() {
        "system" => ChatMessage::system(m.content.clone()),
        "user" => ChatMessage::user(m.content.clone()),
        "assistant" if m.tool_calls.is_empty() => ChatMessage::assistant(m.content.clone()),
        "assistant" => {
            let mut parts = Vec::new();
            if !m.content.is_empty() {
                parts.push(ContentPart::Text(m.content.clone()));
            }
            parts.extend(m.tool_calls.iter().map(|c| {
                ContentPart::ToolCall(genai::chat::ToolCall {
                    call_id: c.id.clone(),
                    fn_name: c.name.clone(),
                    fn_arguments: c.arguments.clone(),
                    thought_signatures: None,
                })
            }));
            ChatMessage::assistant(MessageContent::from_parts(parts))
        }
        "tool" => {
            let id = m.tool_call_id.clone().unwrap_or_default();
            let mut response = ToolResponse::new(id.clone(), m.content.clone());
            // Gemini answers a function by name; find the call this answers.
            response.fn_name = earlier
                .iter()
                .rev()
                .flat_map(|e| e.tool_calls.iter())
                .find(|c| c.id == id)
                .map(|c| c.name.clone());
            ChatMessage::from(response)
        }
        other => {
            return Err(CallError::new(
                ErrorKind::Input,
                format!("a message has the role `{other}` (use system, user, assistant or tool)"),
            ));
        }
    })
}
