//! What the engine and a model worker say to each other: one JSON object per line.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A message of the conversation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Turn {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// Its text.
    pub content: String,
}

/// One generation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    /// The conversation.
    pub messages: Vec<Turn>,
    /// Most tokens to generate.
    pub max_tokens: u32,
    /// Sampling temperature; none or 0 is greedy (deterministic).
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Seed of the sampler when not greedy.
    #[serde(default)]
    pub seed: u32,
    /// A JSON Schema the answer is constrained to (grammar-constrained sampling).
    #[serde(default)]
    pub schema: Option<Value>,
}

/// An embedding of texts, each on its own.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbedJob {
    /// The texts.
    pub embed: Vec<String>,
}

/// A line the engine writes: an embedding or a generation.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Job {
    /// Embed texts.
    Embed(EmbedJob),
    /// Generate an answer.
    Generate(Request),
}

/// The vectors of an embedding, one per text, each of unit length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Embedded {
    /// One vector per text, in order.
    pub vectors: Vec<Vec<f32>>,
    /// Tokens read.
    pub input_tokens: u64,
}

/// The end of a successful generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Done {
    /// The whole answer.
    pub content: String,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
}

/// A line the worker writes.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerLine {
    /// A piece of the answer.
    Delta(String),
    /// The answer is complete.
    Done(Done),
    /// The embedding is complete.
    Vectors(Embedded),
    /// The generation failed.
    Error(String),
}
