//! The file shape Weft reads for the `graph` dialect: the JSON its visual editor saves,
//! `{nodes: [{id, type, x, y, data}], connections: [{source, target, sourceHandle?,
//! targetHandle?}]}`. One `data` type per node type, so a key of another type is
//! reported as unknown, with the keys this type has.

use serde::Deserialize;
use serde_json::Value;

/// The whole file. `edges` is read as `connections`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct GraphDoc {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    pub nodes: Vec<Value>,
    #[serde(default, alias = "edges")]
    pub connections: Vec<Value>,
}

/// `{id, type, x, y, data}`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NodeDoc {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    // The editor's canvas position: read (so its type is checked), not used.
    #[serde(default, rename = "x")]
    pub _x: Option<f64>,
    #[serde(default, rename = "y")]
    pub _y: Option<f64>,
    #[serde(default)]
    pub data: Option<Value>,
}

/// `{source, target, sourceHandle?, targetHandle?}`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Connection {
    #[serde(default, rename = "id")]
    pub _id: Option<String>,
    pub source: String,
    pub target: String,
    #[serde(default, rename = "sourceHandle")]
    pub source_handle: Option<String>,
    #[serde(default, rename = "targetHandle")]
    pub target_handle: Option<String>,
}

/// `start`: the run's first output.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct StartData {
    // The editor's "settings open or closed" flag: read, not used.
    #[serde(default, rename = "collapsed")]
    pub _collapsed: Option<bool>,
    #[serde(default, rename = "label")]
    pub _label: Option<String>,
    #[serde(default, rename = "initialInput")]
    pub initial_input: Option<String>,
}

/// `agent`: one model call.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AgentData {
    /// The name AgentFlow's editor gives an agent (its chat label and subagent name).
    #[serde(default, rename = "agentName")]
    pub agent_name: Option<String>,
    // The editor's "settings open or closed" flag: read, not used.
    #[serde(default, rename = "collapsed")]
    pub _collapsed: Option<bool>,
    #[serde(default)]
    pub label: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default, rename = "systemPrompt")]
    pub system_prompt: Option<String>,
    #[serde(default, rename = "userPrompt")]
    pub user_prompt: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default, rename = "reasoningEffort")]
    pub reasoning_effort: Option<String>,
    #[serde(default)]
    pub tools: AgentTools,
}

/// `agent.data.tools`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AgentTools {
    #[serde(default)]
    pub web_search: bool,
    #[serde(default)]
    pub subagents: bool,
}

/// `if`: conditions on the previous output. `condition` is the legacy single form.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct IfData {
    // The editor's "settings open or closed" flag: read, not used.
    #[serde(default, rename = "collapsed")]
    pub _collapsed: Option<bool>,
    #[serde(default, rename = "label")]
    pub _label: Option<String>,
    #[serde(default)]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default)]
    pub condition: Option<LegacyCondition>,
}

/// The legacy single `condition`: a condition, or a bare text that the output must
/// contain (older editor files wrote the keyword alone).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub(super) enum LegacyCondition {
    Text(String),
    Full(Condition),
}

impl LegacyCondition {
    /// As a condition: a text is `{operator: contains, value: text}`.
    pub fn normalized(self) -> Condition {
        match self {
            LegacyCondition::Text(t) => Condition {
                operator: "contains".into(),
                value: Value::from(t),
            },
            LegacyCondition::Full(c) => c,
        }
    }
}

/// `{operator: equal | contains, value}`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Condition {
    pub operator: String,
    pub value: Value,
}

/// `approval` (legacy `input`): a pause for a person's decision.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ApprovalData {
    // The editor's "settings open or closed" flag: read, not used.
    #[serde(default, rename = "collapsed")]
    pub _collapsed: Option<bool>,
    #[serde(default)]
    pub label: Option<String>,
    #[serde(default)]
    pub prompt: Option<String>,
}

/// `end`: completes the run.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct EndData {
    // The editor's "settings open or closed" flag: read, not used.
    #[serde(default, rename = "collapsed")]
    pub _collapsed: Option<bool>,
    #[serde(default, rename = "label")]
    pub _label: Option<String>,
}
