//! The shape of a `tea` file as The Edge Agent writes it. Every key is listed, so a
//! misspelt one is an error with a did-you-mean hint. Fields whose shape varies (`run`,
//! `goto`, `fan_in`, `with`) stay JSON values and are read by the compiler, which can say
//! precisely what is wrong with them.

use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::Value;

/// A whole file.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct TeaDoc {
    pub name: Option<String>,
    pub description: Option<String>,
    /// Some files carry a version string; it changes nothing.
    #[allow(dead_code)]
    pub version: Option<Value>,
    #[serde(default)]
    pub state_schema: IndexMap<String, Value>,
    #[serde(default)]
    pub variables: IndexMap<String, Value>,
    pub nodes: Vec<Node>,
    #[serde(default)]
    pub edges: Vec<EdgeDoc>,
    /// The state a run starts from; the run's input is merged over it.
    #[serde(default)]
    pub initial_state: Option<Value>,
    /// TEA's runtime settings (`llm` defaults, tracing, memory backends, ...): read,
    /// and said which Weft uses (`docs/dialects/tea.md`).
    #[serde(default)]
    pub settings: Option<Value>,
    /// TEA's compilation options (`raise_exceptions`, `interrupt_before`, ...).
    #[serde(default)]
    pub config: Option<Value>,
    /// Inputs of TEA's extraction-validation actions, which Weft does not have.
    #[serde(default)]
    pub extraction_schema: Option<Value>,
    #[serde(default)]
    pub validation_constraints: Option<Value>,
    #[serde(default)]
    pub semantic_probes: Option<Value>,
    #[serde(default)]
    pub validation_logging: Option<Value>,
    /// Nodes the run stops before / after for a person, as in `config` (TEA reads
    /// them there; its own files also write them at the top).
    #[serde(default)]
    pub interrupt_before: Option<Value>,
    #[serde(default)]
    pub interrupt_after: Option<Value>,
    /// TEA's checkpoint settings (Weft journals every step).
    #[serde(default)]
    pub checkpoint: Option<Value>,
    /// Constants for templates (`data.NAME`), like `variables`.
    #[serde(default)]
    pub data: Option<Value>,
}

/// A node, a step of `steps`, or a node of a `while_loop` body.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Node {
    pub name: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub description: Option<String>,
    pub run: Option<Value>,
    pub script: Option<String>,
    pub language: Option<String>,
    pub uses: Option<String>,
    #[serde(rename = "with")]
    pub with: Option<Value>,
    /// A state key for the action's result, or `{key: template}` over `result`.
    pub output: Option<Value>,
    pub steps: Option<Vec<Node>>,
    pub goto: Option<Value>,
    pub fan_in: Option<Value>,
    // while_loop
    pub condition: Option<String>,
    pub max_iterations: Option<i64>,
    pub body: Option<Vec<Node>>,
    // dynamic_parallel
    pub items: Option<Value>,
    pub item_var: Option<String>,
    pub index_var: Option<String>,
    pub max_concurrency: Option<i64>,
    pub fail_fast: Option<bool>,
    pub action: Option<ActionDoc>,
    pub subgraph: Option<String>,
    pub input: Option<Value>,
    /// `before` or `after`: the run stops there for a person (an approval in Weft).
    pub interrupt: Option<Value>,
    pub interrupt_before: Option<bool>,
    pub interrupt_after: Option<bool>,
    /// TEA's pipes between nodes' stdin and stdout, which Weft's code does not have.
    pub streams: Option<Value>,
    /// Read by no node kind (TEA ignores it); warned of.
    pub prompt: Option<Value>,
}

/// The action of a `dynamic_parallel` node in action mode.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ActionDoc {
    pub uses: String,
    #[serde(rename = "with")]
    pub with: Option<Value>,
    /// A state key, or a mapping of keys to templates that read the result as `result`.
    pub output: Option<Value>,
}

/// One entry of the legacy `edges` section.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct EdgeDoc {
    pub from: String,
    pub to: String,
    pub condition: Option<ConditionDoc>,
    pub when: Option<Value>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub fan_in: Option<String>,
    /// How TEA runs a parallel branch (`thread`, `process`, `remote`); Weft runs every
    /// branch in its own sandboxes, so it is read and not used.
    pub parallel_strategy: Option<String>,
}

/// `condition: {type: expression, value: EXPR}` on a legacy edge.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ConditionDoc {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub value: String,
}
