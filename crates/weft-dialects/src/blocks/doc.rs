//! The file shape Weft reads for the `blocks` dialect, one type per node kind so that a
//! key that belongs to another kind is reported as unknown, with the keys this kind has.

use serde::Deserialize;
use serde_json::Value;

/// The whole file: `{name, description?, root}`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct BlocksDoc {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    pub root: Value,
}

/// `{type: "h" | "v", children}`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Container {
    #[serde(rename = "type")]
    pub _kind: String,
    pub children: Vec<Value>,
}

/// `{type: "loop", arrayField, children}`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct LoopNode {
    #[serde(rename = "type")]
    pub _kind: String,
    #[serde(rename = "arrayField")]
    pub array_field: String,
    pub children: Vec<Value>,
}

/// `{step_id, type: "llm", prompt, model?, input_schema?, output_schema?}`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct LlmBlock {
    pub step_id: String,
    #[serde(rename = "type")]
    pub _kind: String,
    #[serde(default)]
    pub description: Option<String>,
    pub prompt: String,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub input_schema: Option<Value>,
    #[serde(default)]
    pub output_schema: Option<Value>,
}

/// `{step_id, type: "code", code, input_schema?, output_schema?}`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CodeBlock {
    pub step_id: String,
    #[serde(rename = "type")]
    pub _kind: String,
    #[serde(default)]
    pub description: Option<String>,
    pub code: String,
    #[serde(default)]
    pub input_schema: Option<Value>,
    #[serde(default)]
    pub output_schema: Option<Value>,
}

/// `{step_id, type: "passthrough", input_schema?, output_schema?}`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct PassthroughBlock {
    pub step_id: String,
    #[serde(rename = "type")]
    pub _kind: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub input_schema: Option<Value>,
    #[serde(default)]
    pub output_schema: Option<Value>,
}

/// One entry of a SchemaNode's `fields`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Field {
    pub name: String,
    #[serde(rename = "type", default)]
    pub ty: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
}

/// A SchemaNode: `{fields: [...]}`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SchemaNode {
    pub fields: Vec<Field>,
}
