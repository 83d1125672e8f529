//! The file shape Weft reads for the `souls` dialect (`docs/dialects/souls.md`): a
//! workflow of blocks, each run by a soul (a configured model persona), joined by
//! transitions. Each block type's own keys are listed beside the common ones, so a key
//! that belongs to neither is reported with the closest known one.

use super::conditions::{CaseDef, ExitCondition, RouteDef};
use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::Value;

/// The whole file.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SoulsDoc {
    #[serde(default, rename = "version")]
    pub _version: Option<Value>,
    #[serde(default, rename = "id")]
    pub _id: Option<String>,
    #[serde(default, rename = "kind")]
    pub _kind: Option<String>,
    #[serde(default)]
    pub config: Config,
    #[serde(default)]
    pub tools: Option<Value>,
    #[serde(default)]
    pub souls: IndexMap<String, Value>,
    pub blocks: IndexMap<String, Value>,
    pub workflow: WorkflowDoc,
    /// The whole run's budget.
    #[serde(default)]
    pub limits: Option<WorkflowLimits>,
    /// Whether the tool lists the workflow as enabled; it does not change a run.
    #[serde(default, rename = "enabled")]
    pub _enabled: Option<bool>,
    /// What a parent's `workflow` block passes in and reads back, for a child.
    #[serde(default)]
    pub interface: Option<Interface>,
    /// Test cases of the workflow (runsight's eval harness); checked, run by `weft eval`.
    #[serde(default)]
    pub eval: Option<Value>,
}

/// A child workflow's `interface`.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Interface {
    #[serde(default)]
    pub inputs: Vec<InterfaceInput>,
    #[serde(default)]
    pub outputs: Vec<InterfaceOutput>,
}

/// One input of an interface: where the child keeps the value its parent passes.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct InterfaceInput {
    pub name: String,
    /// A path into the child's state: `shared_memory.topic`.
    pub target: String,
    #[serde(default, rename = "type")]
    pub _type: Option<String>,
    #[serde(default)]
    pub required: Option<bool>,
    #[serde(default)]
    pub default: Option<Value>,
    #[serde(default, rename = "description")]
    pub _description: Option<String>,
}

/// One output of an interface: the child's state path its parent reads.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct InterfaceOutput {
    pub name: String,
    /// A path into the child's state: `results.summarize`.
    pub source: String,
    #[serde(default, rename = "type")]
    pub _type: Option<String>,
    #[serde(default, rename = "description")]
    pub _description: Option<String>,
}

/// Top-level `limits`: a block's `limits`, for the whole run, and when to warn.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct WorkflowLimits {
    #[serde(default)]
    pub max_duration_seconds: Option<u64>,
    #[serde(default)]
    pub cost_cap_usd: Option<f64>,
    #[serde(default)]
    pub token_cap: Option<u64>,
    #[serde(default)]
    pub on_exceed: Option<String>,
    #[serde(default)]
    pub warn_at_pct: Option<f64>,
}

impl WorkflowLimits {
    /// The caps, as a block's limits.
    pub fn caps(&self) -> Limits {
        Limits {
            max_duration_seconds: self.max_duration_seconds,
            cost_cap_usd: self.cost_cap_usd,
            token_cap: self.token_cap,
            on_exceed: self.on_exceed.clone(),
        }
    }
}

/// Defaults for every soul.
#[derive(Debug, Default, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Config {
    #[serde(default)]
    pub model_name: Option<String>,
    #[serde(default)]
    pub provider: Option<String>,
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub max_tokens: Option<u32>,
}

/// A soul: who answers a block's model call.
#[derive(Debug, Default, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Soul {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default, rename = "kind")]
    pub _kind: Option<String>,
    #[serde(default, rename = "name")]
    pub _name: Option<String>,
    #[serde(default, rename = "role")]
    pub _role: Option<String>,
    #[serde(default)]
    pub system_prompt: Option<String>,
    #[serde(default)]
    pub provider: Option<String>,
    #[serde(default)]
    pub model_name: Option<String>,
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// Ids of the workflow's `tools:` this soul may call.
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    #[serde(default)]
    pub max_tool_iterations: Option<u32>,
    /// Tools it must call before its answer counts.
    #[serde(default)]
    pub required_tool_calls: Option<Vec<String>>,
    /// Editor decorations: read, not used.
    #[serde(default, rename = "avatar_color")]
    pub _avatar_color: Option<String>,
    #[serde(default, rename = "modified_at")]
    pub _modified_at: Option<String>,
}

/// `workflow:`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct WorkflowDoc {
    #[serde(default, rename = "id")]
    pub _id: Option<String>,
    #[serde(default, rename = "kind")]
    pub _kind: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    pub entry: String,
    #[serde(default)]
    pub transitions: Vec<Transition>,
    /// `{from, <exit>: target, default?: target}` each.
    #[serde(default)]
    pub conditional_transitions: Vec<IndexMap<String, Option<String>>>,
}

/// `{from, to}`; `to: null` ends the run.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Transition {
    pub from: String,
    pub to: Option<String>,
}

/// Fields every block type has (spec 001, "Common fields").
pub(super) const COMMON: &[&str] = &[
    "type",
    "stateful",
    "depends",
    "error_route",
    "inputs",
    "outputs",
    "output_conditions",
    "routes",
    "exits",
    "exit_conditions",
    "assertions",
    "retry_config",
    "timeout_seconds",
    "stall_thresholds",
    "limits",
];

/// Block types and their own fields.
pub(super) const TYPES: &[(&str, &[&str])] = &[
    ("linear", &["soul_ref"]),
    (
        "gate",
        &["soul_ref", "eval_key", "extract_field", "pass", "fail"],
    ),
    ("code", &["code", "allowed_imports"]),
    (
        "loop",
        &[
            "inner_block_refs",
            "max_rounds",
            "break_condition",
            "carry_context",
            "break_on_exit",
            "retry_on_exit",
        ],
    ),
    ("workflow", &["workflow_ref", "max_depth", "on_error"]),
    ("synthesize", &["soul_ref", "input_block_ids"]),
    ("dispatch", &[]),
];

/// The common fields Weft reads.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub(super) struct Common {
    #[serde(default)]
    pub stateful: bool,
    #[serde(default)]
    pub depends: Option<Depends>,
    #[serde(default)]
    pub error_route: Option<String>,
    #[serde(default)]
    pub inputs: Option<IndexMap<String, InputRef>>,
    #[serde(default)]
    pub exits: Option<Vec<ExitDef>>,
    #[serde(default)]
    pub retry_config: Option<RetryConfig>,
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    #[serde(default)]
    pub limits: Option<Limits>,
    #[serde(default)]
    pub output_conditions: Option<Vec<CaseDef>>,
    #[serde(default)]
    pub routes: Option<Vec<RouteDef>>,
    #[serde(default)]
    pub exit_conditions: Option<Vec<ExitCondition>>,
    /// Output field name -> type (`str`, `int`, `float`, `bool`, `list`, `dict`, `any`).
    #[serde(default)]
    pub outputs: Option<IndexMap<String, String>>,
    /// Phase -> seconds without progress before the block stalls.
    #[serde(default)]
    pub stall_thresholds: Option<IndexMap<String, u64>>,
}

/// `depends`: one block id or several.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub(super) enum Depends {
    One(String),
    Many(Vec<String>),
}

impl Depends {
    pub fn ids(&self) -> Vec<&str> {
        match self {
            Depends::One(s) => vec![s.as_str()],
            Depends::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

/// `{from: "block"}` or `{from: "block.field"}`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct InputRef {
    pub from: String,
}

/// A named exit port.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ExitDef {
    pub id: String,
    #[serde(default, rename = "label")]
    pub _label: Option<String>,
}

/// `retry_config`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RetryConfig {
    #[serde(default = "default_attempts")]
    pub max_attempts: u32,
    #[serde(default)]
    pub backoff: Option<String>,
    #[serde(default)]
    pub backoff_base_seconds: Option<f64>,
    #[serde(default)]
    pub non_retryable_errors: Option<Vec<String>>,
}

/// `limits`: the block's budget.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Limits {
    #[serde(default)]
    pub max_duration_seconds: Option<u64>,
    #[serde(default)]
    pub cost_cap_usd: Option<f64>,
    #[serde(default)]
    pub token_cap: Option<u64>,
    #[serde(default)]
    pub on_exceed: Option<String>,
}

fn default_attempts() -> u32 {
    3
}

/// `linear`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(super) struct Linear {
    pub soul_ref: String,
}

/// `gate`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(super) struct Gate {
    pub soul_ref: String,
    pub eval_key: String,
    #[serde(default)]
    pub extract_field: Option<String>,
    #[serde(default, rename = "pass")]
    pub pass_to: Option<String>,
    #[serde(default, rename = "fail")]
    pub fail_to: Option<String>,
}

/// `code`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(super) struct Code {
    pub code: String,
    #[serde(default)]
    pub allowed_imports: Option<Vec<String>>,
}

/// `workflow`: a child workflow file.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(super) struct ChildWorkflow {
    pub workflow_ref: String,
    /// Interface name -> parent state path.
    #[serde(default)]
    pub inputs: Option<IndexMap<String, String>>,
    /// Parent state path -> interface name.
    #[serde(default)]
    pub outputs: Option<IndexMap<String, String>>,
    #[serde(default)]
    pub max_depth: Option<u32>,
    #[serde(default)]
    pub on_error: Option<String>,
}

/// `synthesize`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(super) struct Synthesize {
    pub soul_ref: String,
    pub input_block_ids: Vec<String>,
}

/// One branch of `dispatch`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct DispatchExit {
    pub id: String,
    #[serde(rename = "label")]
    pub _label: String,
    pub soul_ref: String,
    pub task: String,
}

/// `loop`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(super) struct Loop {
    pub inner_block_refs: Vec<String>,
    #[serde(default = "default_rounds")]
    pub max_rounds: u32,
    #[serde(default)]
    /// A `ConditionDef` or a `ConditionGroupDef` (read by the compiler, which can tell
    /// which one was meant and say precisely what is wrong with it).
    pub break_condition: Option<Value>,
    #[serde(default)]
    pub carry_context: Option<CarryContext>,
    #[serde(default)]
    pub break_on_exit: Option<String>,
    #[serde(default)]
    pub retry_on_exit: Option<String>,
}

fn default_rounds() -> u32 {
    5
}

/// `carry_context`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CarryContext {
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default = "last")]
    pub mode: String,
    #[serde(default)]
    pub source_blocks: Option<Vec<String>>,
    #[serde(default = "inject_as")]
    pub inject_as: String,
}

fn yes() -> bool {
    true
}

fn last() -> String {
    "last".into()
}

fn inject_as() -> String {
    "previous_round_context".into()
}
