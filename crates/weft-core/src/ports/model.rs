//! The model port: a chat endpoint that streams text and calls tools, and the resolver
//! that turns a model id into one.

use crate::error::BlockError;
use crate::ir::ModelDef;
pub use crate::usage::Usage;
use crate::value::Value;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// One chat message sent to or received from a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The text.
    pub content: String,
    /// Tool calls the assistant made in this message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a `tool` message: the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    /// A plain message.
    pub fn new(role: &str, content: impl Into<String>) -> Message {
        Message {
            role: role.to_owned(),
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    /// Name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Provider-assigned id, echoed in the answer.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments.
    pub arguments: Value,
}

/// A request to a model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The provider's model name (without the provider prefix).
    pub model: String,
    /// The conversation.
    pub messages: Vec<Message>,
    /// Tools offered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolDef>,
    /// JSON Schema the answer must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Upper bound of completion tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Reasoning effort hint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// Provider-native web search settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<Value>,
    /// Whether this turn must call a tool; without one the model decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Tools the provider runs itself, in its own tool format, sent as they are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provider_tools: Vec<Value>,
}

/// A turn that must call a tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// Any of the offered tools.
    Required,
    /// This tool.
    Tool(String),
}

/// A model's answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelResponse {
    /// The answer's text.
    pub content: String,
    /// Tool calls, if the model asked for any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// What it cost.
    #[serde(default)]
    pub usage: Usage,
    /// The model that answered, as the provider names it (it may differ from the one
    /// asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Why the model stopped, as the provider says (`stop`, `length`, `tool_calls`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
}

impl ModelResponse {
    /// An answer of `model` that ended on its own: `finish_reason` is `tool_calls` when
    /// it called tools, else `stop`.
    pub fn finished(
        content: String,
        tool_calls: Vec<ToolCall>,
        usage: Usage,
        model: String,
    ) -> ModelResponse {
        let finish_reason = if tool_calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        };
        ModelResponse {
            content,
            tool_calls,
            usage,
            model: Some(model),
            finish_reason: Some(finish_reason.to_owned()),
        }
    }
}

/// A request for embeddings: one vector per input text.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EmbedRequest {
    /// The provider's model name (without the provider prefix).
    pub model: String,
    /// The texts, each embedded on its own.
    pub inputs: Vec<String>,
    /// Vectors of this many dimensions, for models that can shorten theirs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<u32>,
}

/// A model's embeddings, in the order of the request's inputs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EmbedResponse {
    /// One vector per input.
    pub vectors: Vec<Vec<f32>>,
    /// What it cost (embedding models count input tokens only).
    #[serde(default)]
    pub usage: Usage,
    /// The model that answered, as the provider names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// Receives streamed text as the model produces it.
pub type DeltaSink<'a> = &'a (dyn Fn(&str) + Send + Sync);

/// A model endpoint.
#[async_trait]
pub trait Model: Send + Sync {
    /// Sends `request` and returns the answer, streaming text deltas to `on_delta`.
    async fn complete(
        &self,
        request: &ModelRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<ModelResponse, BlockError>;

    /// Embeds `request`'s texts. A provider without embedding models keeps this
    /// default, which fails with a configuration error naming it.
    async fn embed(&self, request: &EmbedRequest) -> Result<EmbedResponse, BlockError> {
        let who = match self.provider() {
            "" => "this model's provider".to_owned(),
            name => format!("`{name}`"),
        };
        Err(BlockError::new(
            crate::error::ErrorKind::Config,
            format!(
                "{who} offers no embedding models, so `{}` cannot embed text: name an embedding model of a provider that has them (openai/text-embedding-3-small, ollama/nomic-embed-text, gemini/text-embedding-004, local/<model>)",
                request.model
            ),
        ))
    }

    /// Who serves the model (`openai`, `anthropic`, `local`, ...), for traces.
    fn provider(&self) -> &str {
        ""
    }
}

/// Turns a model id (`provider/model` or a flow alias) into a [`Model`].
pub trait ModelResolver: Send + Sync {
    /// Resolves `id`; `alias` is the flow's definition when `id` names one.
    /// Returns the model and the provider's model name to put in the request.
    fn resolve(
        &self,
        id: &str,
        alias: Option<&ModelDef>,
    ) -> Result<(Arc<dyn Model>, String), BlockError>;

    /// What can be told wrong with the models `flow` names before it runs (a provider
    /// this resolver cannot reach), located in the flow. None by default.
    fn check(&self, _flow: &crate::ir::Flow) -> Vec<crate::error::Diagnostic> {
        Vec::new()
    }
}
