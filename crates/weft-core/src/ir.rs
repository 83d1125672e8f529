//! The core IR: every dialect compiles to these blocks, and the engine executes them.
//!
//! A [`Flow`] has a root [`Block`]. A block is one [`BlockKind`] (a leaf that does work,
//! or a composite that arranges other blocks) plus a [`Policy`] (retry, timeout, rescue,
//! budget, assertions) and a [`DataFlow`] (how its input is shaped and how its output is
//! written into the run state).
//!
//! Strings in the IR come in three flavours, all Jinja2 (see `weft-expr`):
//! [`Template`] renders to text, [`Expr`] evaluates a condition or value, and
//! [`ValueTemplate`] is a JSON value whose strings are templates (a string that is exactly
//! one `{{ expression }}` keeps the expression's type, so `"{{ state.urls }}"` is a list).

use crate::error::{ErrorKind, Loc};
use crate::value::Value;
use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod block_doc;

/// The native format's current version, written as `weft: 1` at the top of a file.
pub const FORMAT_VERSION: u32 = 1;

/// A whole workflow: its root block plus what the blocks share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Flow {
    /// Format version of the native file (`1`).
    #[serde(default = "format_version")]
    pub weft: u32,
    /// The flow's name.
    pub name: String,
    /// What the flow does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The input used when a run is started without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// Constants available to every template as `vars`.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub vars: IndexMap<String, Value>,
    /// Model aliases usable as a block's `model` (e.g. a scripted model for tests).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub models: IndexMap<String, ModelDef>,
    /// Named sub-flows, callable from `subflow` blocks and as LLM tools.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub flows: IndexMap<String, Flow>,
    /// A budget for the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    /// Engine limits for this flow.
    #[serde(default, skip_serializing_if = "Limits::is_default")]
    pub limits: Limits,
    /// Initial run state (merged under the input-derived state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Value>,
    /// The block the run executes.
    pub root: Block,
}

fn format_version() -> u32 {
    FORMAT_VERSION
}

impl Flow {
    /// A flow named `name` that runs `root`, with every other field at its default.
    pub fn new(name: impl Into<String>, root: Block) -> Flow {
        Flow {
            weft: FORMAT_VERSION,
            name: name.into(),
            description: None,
            input: None,
            vars: IndexMap::new(),
            models: IndexMap::new(),
            flows: IndexMap::new(),
            budget: None,
            limits: Limits::default(),
            state: None,
            root,
        }
    }
}

/// Engine limits that keep every run bounded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Executions of nodes that already ran, per graph, before it fails: bounds cycles,
    /// never an acyclic graph however long.
    #[serde(default = "default_graph_steps")]
    pub max_graph_steps: u32,
    /// How deeply sub-flows may nest.
    #[serde(default = "default_subflow_depth")]
    pub max_subflow_depth: u32,
}

fn default_graph_steps() -> u32 {
    1000
}
fn default_subflow_depth() -> u32 {
    10
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_graph_steps: default_graph_steps(),
            max_subflow_depth: default_subflow_depth(),
        }
    }
}

impl Limits {
    fn is_default(&self) -> bool {
        *self == Limits::default()
    }
}

/// A model alias: a provider plus provider-specific options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelDef {
    /// The provider (`scripted`, `openai`, `anthropic`, `local`, ...).
    pub provider: String,
    /// The provider's model name, when it has several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Provider-specific options (for `scripted`: `rules`).
    #[serde(flatten)]
    pub options: IndexMap<String, Value>,
}

/// A Jinja2 template that renders to text.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct Template(pub String);

/// A Jinja2 expression (a condition such as `state.count < 5`, or a value).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct Expr(pub String);

/// A JSON value whose strings are templates; `"{{ expr }}"` alone keeps the value's type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct ValueTemplate(pub Value);

/// One step of a flow. Serialized as an object with exactly one kind key
/// (`llm`, `sequence`, ...) beside the optional common keys.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// A name unique in the flow; it keys the journal, so give effectful blocks one.
    pub id: Option<String>,
    /// A display name that need not be unique (the library's block names): one block
    /// may stand at many places of a flow. In a sequence it keys the step like an id,
    /// numbered `name@n` from its second use among the steps.
    pub name: Option<String>,
    /// What the block is for.
    pub description: Option<String>,
    /// What the block does.
    pub kind: BlockKind,
    /// Retry, timeout, rescue, budget and assertions.
    pub policy: Policy,
    /// Input shaping and state writes.
    pub data: DataFlow,
    /// Where the block was defined, when it came from a file.
    pub origin: Option<Loc>,
}

impl Block {
    /// Calls `f` on this block and then on every block inside it, to change in place.
    pub fn visit_mut(&mut self, f: &mut dyn FnMut(&mut Block)) {
        f(self);
        for child in self.children_mut() {
            child.visit_mut(f);
        }
    }

    /// The blocks this one runs directly (its children and its rescue blocks), to
    /// change in place.
    pub fn children_mut(&mut self) -> Vec<&mut Block> {
        let mut out: Vec<&mut Block> = match &mut self.kind {
            BlockKind::Sequence(steps) => steps.iter_mut().collect(),
            BlockKind::Parallel(p) => p.branches.values_mut().collect(),
            BlockKind::Map(m) => vec![&mut *m.body],
            BlockKind::Loop(l) => vec![&mut *l.body],
            BlockKind::Branch(br) => {
                let mut v: Vec<&mut Block> = br.cases.iter_mut().map(|c| &mut c.then).collect();
                v.extend(br.otherwise.as_deref_mut());
                v
            }
            BlockKind::Graph(g) => g.nodes.values_mut().collect(),
            _ => Vec::new(),
        };
        out.extend(self.policy.rescue.iter_mut().map(|r| &mut r.then));
        out
    }

    /// A block of `kind` with default policy and data flow.
    pub fn new(kind: BlockKind) -> Block {
        Block {
            id: None,
            name: None,
            description: None,
            kind,
            policy: Policy::default(),
            data: DataFlow::default(),
            origin: None,
        }
    }

    /// The same block with id `id`.
    pub fn with_id(mut self, id: impl Into<String>) -> Block {
        self.id = Some(id.into());
        self
    }

    /// The kind's name as written in files.
    pub fn kind_name(&self) -> &'static str {
        self.kind.name()
    }

    /// The same block with the display name `name`.
    pub fn with_name(mut self, name: impl Into<String>) -> Block {
        self.name = Some(name.into());
        self
    }

    /// What the block is called: its id, else its display name.
    pub fn label(&self) -> Option<&str> {
        self.id.as_deref().or(self.name.as_deref())
    }
}

/// The path segment of step `index` of a sequence: its id; else its name, numbered
/// `@n` when `n` earlier steps carry the same name or id (so one block may be a step
/// twice); else its position. The engine keys the journal with it; drawings and tools that name steps
/// must use it too.
pub fn step_segment(steps: &[Block], index: usize) -> String {
    // Ids are unique in a flow (validation says so): no need to count, which keeps a
    // long sequence of ids linear.
    if let Some(id) = &steps[index].id {
        return id.clone();
    }
    let Some(label) = steps[index].name.as_deref() else {
        return index.to_string();
    };
    let repeats = steps[..index]
        .iter()
        .filter(|s| s.label() == Some(label))
        .count();
    if repeats == 0 {
        label.to_owned()
    } else {
        format!("{label}@{repeats}")
    }
}

/// What a block does.
#[derive(Debug, Clone, PartialEq)]
pub enum BlockKind {
    /// Call a language model.
    Llm(LlmSpec),
    /// Turn text into vectors with an embedding model.
    Embed(EmbedSpec),
    /// Run sandboxed code.
    Code(CodeSpec),
    /// Call a native function the host program registered.
    Handler(HandlerSpec),
    /// Call a built-in action (`http.get`, ...).
    Action(ActionSpec),
    /// Suspend until a person or program answers.
    Approval(ApprovalSpec),
    /// Suspend until a time (durably: no process holds the run meanwhile), or until a
    /// person continues it, when it also asks for an approval.
    Wait(WaitSpec),
    /// Return the input unchanged.
    Passthrough,
    /// Compute the output from templates over the input and state.
    Transform(TransformSpec),
    /// Run children in order, each getting the previous one's output.
    Sequence(Vec<Block>),
    /// Run named children concurrently on the same input.
    Parallel(ParallelSpec),
    /// Run a body for each item of a list, concurrently.
    Map(MapSpec),
    /// Run a body repeatedly, bounded by `max_iterations`.
    Loop(LoopSpec),
    /// Run the first case whose condition holds.
    Branch(BranchSpec),
    /// A state machine of named nodes with conditional transitions.
    Graph(GraphSpec),
    /// Run a named sub-flow.
    SubFlow(SubFlowSpec),
}

impl BlockKind {
    /// Every kind name as written in files, in documentation order.
    pub const NAMES: &'static [&'static str] = &[
        "llm",
        "embed",
        "code",
        "handler",
        "action",
        "approval",
        "wait",
        "passthrough",
        "transform",
        "sequence",
        "parallel",
        "map",
        "loop",
        "branch",
        "graph",
        "subflow",
    ];

    /// The kind's name as written in files.
    pub fn name(&self) -> &'static str {
        match self {
            BlockKind::Llm(_) => "llm",
            BlockKind::Embed(_) => "embed",
            BlockKind::Code(_) => "code",
            BlockKind::Handler(_) => "handler",
            BlockKind::Action(_) => "action",
            BlockKind::Approval(_) => "approval",
            BlockKind::Wait(_) => "wait",
            BlockKind::Passthrough => "passthrough",
            BlockKind::Transform(_) => "transform",
            BlockKind::Sequence(_) => "sequence",
            BlockKind::Parallel(_) => "parallel",
            BlockKind::Map(_) => "map",
            BlockKind::Loop(_) => "loop",
            BlockKind::Branch(_) => "branch",
            BlockKind::Graph(_) => "graph",
            BlockKind::SubFlow(_) => "subflow",
        }
    }

    /// Whether the kind named `name` (as [`BlockKind::name`] writes it) is a leaf.
    pub fn is_leaf_name(name: &str) -> bool {
        !matches!(
            name,
            "sequence" | "parallel" | "map" | "loop" | "branch" | "graph" | "subflow"
        ) && Self::NAMES.contains(&name)
    }

    /// Blocks that run no other block: the steps a person reads one by one.
    pub fn is_leaf(&self) -> bool {
        self.is_effectful() || matches!(self, BlockKind::Passthrough | BlockKind::Transform(_))
    }

    /// Leaves whose result depends on the outside world; only these are journaled.
    pub fn is_effectful(&self) -> bool {
        matches!(
            self,
            BlockKind::Llm(_)
                | BlockKind::Embed(_)
                | BlockKind::Code(_)
                | BlockKind::Handler(_)
                | BlockKind::Action(_)
                | BlockKind::Approval(_)
                | BlockKind::Wait(_)
        )
    }
}

/// Policies that apply to any block.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Policy {
    /// Retry the block when it fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Retry>,
    /// Fail the block with a `timeout` error after this many milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Recovery blocks, tried in order, for errors that survive retries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rescue: Vec<Rescue>,
    /// Token, cost and wall-time budget for this block and everything inside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    /// Conditions the output must satisfy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assert: Vec<Assertion>,
    /// Stall detection for the model calls and tools inside this block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall: Option<Stall>,
    /// What a step that reaches outside the run (`llm`, `embed`, `handler`, `action`)
    /// does when its process died or lost the run while it was under way: run again
    /// with the same idempotency key (`repeat`, the default) or fail with an
    /// `outcome_unknown` error (`fail`), for effects that must not happen twice and
    /// whose service honours no key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_unknown_outcome: Option<UnknownOutcome>,
}

/// See [`Policy::on_unknown_outcome`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum UnknownOutcome {
    /// Run the step again, with the idempotency key it had.
    #[default]
    Repeat,
    /// Fail the step with an `outcome_unknown` error (rescue and `weft runs retry`
    /// handle it; a retry policy does not).
    Fail,
}

/// How long a phase of work may go without progress before the block fails with a
/// `timeout` error (which retry policies retry by default). The thresholds hold for every
/// model call and tool inside the block; a nested block's own threshold for a phase wins.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Stall {
    /// A model call: from the request until the first streamed text (or the whole
    /// answer, from a provider that does not stream), in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_token_ms: Option<u64>,
    /// A streamed model answer: the longest silence between two pieces of text, in
    /// milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_gap_ms: Option<u64>,
    /// A tool the model called: how long it may run, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_ms: Option<u64>,
}

impl Stall {
    /// These thresholds, with `inner`'s wherever it sets one.
    pub fn within(self, inner: &Stall) -> Stall {
        Stall {
            first_token_ms: inner.first_token_ms.or(self.first_token_ms),
            token_gap_ms: inner.token_gap_ms.or(self.token_gap_ms),
            tool_ms: inner.tool_ms.or(self.tool_ms),
        }
    }
}

/// Retry with exponential backoff and jitter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Retry {
    /// Total attempts, the first included (at least 1).
    pub attempts: u32,
    /// Delay before the second attempt, in milliseconds.
    #[serde(default = "default_backoff")]
    pub backoff_ms: u64,
    /// Each further delay is the previous one times this.
    #[serde(default = "default_multiplier")]
    pub multiplier: f64,
    /// Upper bound of one delay, in milliseconds.
    #[serde(default = "default_max_backoff")]
    pub max_backoff_ms: u64,
    /// Randomize each delay between half and all of its value.
    #[serde(default = "yes")]
    pub jitter: bool,
    /// Retry only these error kinds (default: the transient ones).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on: Vec<ErrorKind>,
}

fn default_backoff() -> u64 {
    200
}
fn default_multiplier() -> f64 {
    2.0
}
fn default_max_backoff() -> u64 {
    30_000
}
fn yes() -> bool {
    true
}

/// A recovery block for errors of the listed kinds (all kinds when empty).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rescue {
    /// Error kinds this rescue handles; empty handles every kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub when: Vec<ErrorKind>,
    /// The block that runs instead; its input is `{error, input}`.
    pub then: Block,
}

/// Limits on what a block (and everything inside it) may spend.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Model tokens (prompt plus completion).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Model cost in US dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Wall time in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_ms: Option<u64>,
    /// What reaching a limit does: `fail` refuses the call (or stops the block), `warn`
    /// emits a `budget_warning` event and goes on.
    #[serde(default, skip_serializing_if = "OnExceed::is_fail")]
    pub on_exceed: OnExceed,
    /// Emit a `budget_warning` once usage reaches this fraction (0 to 1) of a limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warn_at: Option<f64>,
}

/// What reaching a budget's limit does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnExceed {
    /// Refuse the call that would exceed it; stop a block past its wall time.
    #[default]
    Fail,
    /// Emit a `budget_warning` event and go on.
    Warn,
}

impl OnExceed {
    fn is_fail(&self) -> bool {
        *self == OnExceed::Fail
    }
}

/// A condition on the block's output (`output`, `input`, `state` are in scope).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Assertion {
    /// Must be true.
    pub that: Expr,
    /// Said when it is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When false, the block goes on and the run gets a `warning` event (code
    /// `assertion_failed`) instead of the block failing: a quality check that is
    /// recorded, not enforced.
    #[serde(default, skip_serializing_if = "is_false")]
    pub warn: bool,
}

/// How a block's input is shaped and how its output reaches the run state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DataFlow {
    /// Replaces the block's input with this template's value (`input` is the original).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<ValueTemplate>,
    /// Shallow-merge an object output into the run state.
    #[serde(default, skip_serializing_if = "is_false")]
    pub merge_output: bool,
    /// State writes after the block ran: dotted state path -> template (`output` in scope).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub set: IndexMap<String, ValueTemplate>,
    /// Names bound for the templates of this block and of every block inside it,
    /// evaluated once when the block starts (after `input`).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub bind: IndexMap<String, ValueTemplate>,
    /// A `message` event emitted after the block ran (`output` and `exit` in scope),
    /// also when its result is replayed from the journal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emit: Option<ValueTemplate>,
    /// A `message` event emitted when the block starts, before it runs (`input` and
    /// `state` in scope), also when its result is then replayed: what a front end shows
    /// as the step begins (a model call's prompt, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub announce: Option<ValueTemplate>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A language-model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LlmSpec {
    /// `provider/model` or a flow model alias, or a template that renders to one when
    /// the block runs (`{{ input.model }}`); else the run's default model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<Template>,
    /// The user message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<Template>,
    /// Extra messages before the prompt (each content a template).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<MessageSpec>,
    /// Keep the conversation across invocations under this state key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<String>,
    /// Sub-flows the model may call as tools.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    /// Upper bound of model turns in the tool loop.
    #[serde(default = "default_tool_rounds")]
    pub max_tool_rounds: u32,
    /// `required` (the first turn must call one of the tools) or a tool's name (it must
    /// call that tool); without it the model decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<String>,
    /// Tools the model must call (each at least once) before its answer is accepted; the
    /// engine asks for them in order, one turn each, until every one has been called.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_tools: Vec<String>,
    /// JSON Schema the answer must match (the output is then the parsed JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Re-asks with the validation error when structured output is invalid.
    #[serde(default = "default_repairs")]
    pub max_repairs: u32,
    /// What the block outputs.
    #[serde(default, skip_serializing_if = "LlmOutput::is_default")]
    pub output: LlmOutput,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Upper bound of completion tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Reasoning effort hint (`low`, `medium`, `high`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// Provider-native web search (`true` or a config object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<Value>,
    /// Tools the provider runs itself (code execution, file search, ...), each sent
    /// as written in the provider's own tool format beside the block's tools.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provider_tools: Vec<Value>,
}

// The same bounds a file that omits them gets, so blocks built in Rust are valid.
impl Default for LlmSpec {
    fn default() -> Self {
        LlmSpec {
            model: None,
            system: None,
            prompt: None,
            messages: Vec::new(),
            history: None,
            tools: Vec::new(),
            max_tool_rounds: default_tool_rounds(),
            tool_choice: None,
            required_tools: Vec::new(),
            output_schema: None,
            max_repairs: default_repairs(),
            output: LlmOutput::default(),
            temperature: None,
            max_tokens: None,
            reasoning_effort: None,
            search: None,
            provider_tools: Vec::new(),
        }
    }
}

fn default_tool_rounds() -> u32 {
    8
}
fn default_repairs() -> u32 {
    2
}

/// What an `llm` block outputs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LlmOutput {
    /// The answer's text (or parsed JSON when `output_schema` is set).
    #[default]
    Text,
    /// `{content, usage, model}`; a block that offers tools adds `tool_calls`
    /// (`[{id, name, arguments}]`), `tool_results` (`[{tool_call_id, name, result}]`) and
    /// `rounds` (model turns that called tools).
    Message,
}

impl LlmOutput {
    fn is_default(&self) -> bool {
        *self == LlmOutput::Text
    }
}

/// One templated chat message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageSpec {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The message text.
    pub content: Template,
}

/// A sub-flow offered to the model as a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    /// The tool's name as the model sees it.
    pub name: String,
    /// What the tool does, for the model.
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the tool's arguments.
    #[serde(default = "empty_object_schema")]
    pub parameters: Value,
    /// The sub-flow (in the flow's `flows`) that serves the call.
    pub flow: String,
}

fn empty_object_schema() -> Value {
    serde_json::json!({"type": "object"})
}

/// The longest tool name every provider accepts (OpenAI's bound).
pub const MAX_TOOL_NAME: usize = 64;

/// `name` as a tool name every provider accepts: letters, digits, `_` and `-`, at most
/// [`MAX_TOOL_NAME`] characters (OpenAI, Anthropic and Gemini reject a `.` or a `/`,
/// which namespaced block names hold); every other character becomes `_`. Empty stays
/// empty, for the caller to name.
pub fn provider_tool_name(name: &str) -> String {
    name.trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_TOOL_NAME)
        .collect()
}

/// Line `source_line` of a code block's source is line `file_line` of its flow file
/// (and the lines after it follow one to one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceLines {
    /// A line of the source (1-based).
    pub source_line: u32,
    /// The flow file's line it came from (1-based).
    pub file_line: u32,
}

impl SourceLines {
    /// The file line of source line `line`, if it came from the file.
    pub fn file_line_of(&self, line: u32) -> Option<u32> {
        line.checked_sub(self.source_line)
            .map(|d| self.file_line + d)
    }
}

/// Sandboxed code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CodeSpec {
    /// `python`, `lua`, `prolog`, ...
    pub language: String,
    /// The source.
    pub source: String,
    /// Where `source` sits in the flow file, so a failure names the file's line. Loaders
    /// fill it in; it is not part of the file format.
    #[serde(skip)]
    #[schemars(skip)]
    pub origin: Option<SourceLines>,
    /// A function in `source` to call; without one the source runs as a script.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    /// Keyword arguments for `entry` (templates; `input`, `state` in scope).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<ValueTemplate>,
    /// Modules the code may import (Python); without the list, every module the
    /// sandbox has. An empty list forbids `import`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imports: Option<Vec<String>>,
    /// Builtin functions the code may call (Python); without the list, all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub builtins: Option<Vec<String>>,
    /// Execution limits.
    #[serde(default)]
    pub limits: CodeLimits,
}

/// Limits for one execution of sandboxed code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CodeLimits {
    /// Wall time in milliseconds.
    #[serde(default = "default_code_time")]
    pub time_ms: u64,
    /// Memory in bytes.
    #[serde(default = "default_code_memory")]
    pub memory_bytes: u64,
    /// Recursion depth.
    #[serde(default = "default_code_depth")]
    pub max_depth: u32,
    /// Size of the serialized result in bytes.
    #[serde(default = "default_code_output")]
    pub output_bytes: u64,
}

fn default_code_time() -> u64 {
    30_000
}
fn default_code_memory() -> u64 {
    64 << 20
}
fn default_code_depth() -> u32 {
    200
}
fn default_code_output() -> u64 {
    1 << 20
}

impl Default for CodeLimits {
    fn default() -> Self {
        CodeLimits {
            time_ms: default_code_time(),
            memory_bytes: default_code_memory(),
            max_depth: default_code_depth(),
            output_bytes: default_code_output(),
        }
    }
}

/// A native function registered by the host program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HandlerSpec {
    /// The name the host registered it under.
    pub name: String,
    /// Configuration passed to the handler.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub config: Value,
}

/// A call of an embedding model. Its output is `{embedding, dimensions, model, usage}`
/// when `input` renders to a text, `{embeddings, dimensions, model, usage}` (one vector
/// per text, in order) when it renders to a list of texts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EmbedSpec {
    /// `provider/model` or a flow model alias, or a template that renders to one when
    /// the block runs; else the run's default model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The text to embed, or a list of texts (templates).
    pub input: ValueTemplate,
    /// Ask for vectors of this many dimensions (models that can shorten theirs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<u32>,
}

/// A built-in action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionSpec {
    /// The action's name (`http.get`, `json.parse`, ...).
    pub uses: String,
    /// Parameters (templates).
    #[serde(default, rename = "with", skip_serializing_if = "Option::is_none")]
    pub params: Option<ValueTemplate>,
}

/// A point where the run waits for a person or program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalSpec {
    /// What the approver is asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<Template>,
    /// The decisions the approver may give; the chosen one is the block's exit handle.
    #[serde(default = "default_decisions")]
    pub options: Vec<String>,
}

/// A point where the run waits for a time: `for` a duration from when it is reached, or
/// `until` a moment. Its output is its input; its exit is `elapsed`, or the decision
/// of the person who continued it early (`or_approval`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitSpec {
    /// How long (a template): `30s`, `2h`, `1h 30m`, `3 days`.
    #[serde(default, rename = "for", skip_serializing_if = "Option::is_none")]
    pub duration: Option<Template>,
    /// Until when (a template): an RFC 3339 time with its offset
    /// (`2026-12-01T09:00:00+01:00`) or Unix milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Template>,
    /// Lets a person continue the run before the time, as an approval does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub or_approval: Option<ApprovalSpec>,
}

/// The exit of a `wait` whose time came.
pub const WAIT_ELAPSED: &str = "elapsed";

/// The milliseconds a `wait`'s rendered `for` stands for (`30s`, `2h 30m`, `1500ms`,
/// or a bare number of seconds), or why it stands for none.
pub fn parse_wait_for(text: &str) -> Result<u64, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<f64>() {
        if seconds.is_finite() && seconds >= 0.0 {
            return Ok((seconds * 1000.0) as u64);
        }
        return Err(format!("`{text}` is not a duration: it is negative"));
    }
    humantime::parse_duration(text)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .map_err(|e| {
            format!("`{text}` is not a duration ({e}); write it like `30s`, `2h` or `1h 30m`")
        })
}

/// The Unix milliseconds a `wait`'s rendered `until` names: an RFC 3339 time with its
/// offset (`2026-12-01T09:00:00+01:00`, `...Z`), or a whole number of Unix
/// milliseconds; or why it names none.
pub fn parse_wait_until(text: &str) -> Result<i64, String> {
    let text = text.trim();
    if let Ok(ms) = text.parse::<i64>() {
        return Ok(ms);
    }
    text.parse::<jiff::Timestamp>()
        .map(|t| t.as_millisecond())
        .map_err(|e| {
            format!("`{text}` is not a time ({e}); write it in RFC 3339 with an offset, like `2026-12-01T09:00:00+01:00`, or as Unix milliseconds")
        })
}

fn default_decisions() -> Vec<String> {
    vec!["approve".into(), "reject".into()]
}

/// Passthrough takes no options; written `passthrough: {}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PassthroughSpec {}

/// Computes an output from templates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransformSpec {
    /// The output (templates over `input`, `state`, `initial`, `vars`).
    pub output: ValueTemplate,
    /// An exit handle (a template), for routing in graphs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<Template>,
}

/// What a concurrent composite does when a child fails.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnError {
    /// The composite fails (after the others finish, unless `fail_fast`).
    #[default]
    Fail,
    /// The failure is kept in the results as `{"error": {...}}`, and the rest goes on.
    Collect,
}

impl OnError {
    fn is_default(&self) -> bool {
        *self == OnError::Fail
    }
}

/// Named children run concurrently; the output is `{name: output}` in declaration order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParallelSpec {
    /// The branches, by name.
    pub branches: IndexMap<String, Block>,
    /// At most this many branches at once (default: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
    /// Cancel the other branches at the first failure.
    #[serde(default, skip_serializing_if = "is_false")]
    pub fail_fast: bool,
    /// What a failure does.
    #[serde(default, skip_serializing_if = "OnError::is_default")]
    pub on_error: OnError,
    /// Branch state writes stay in the branch instead of merging into the run state.
    #[serde(default, skip_serializing_if = "is_false")]
    pub isolate: bool,
    /// The first branch to succeed wins: its output is the block's output, the others
    /// are cancelled, and the block fails only when every branch fails. The winner is
    /// journaled, so a resumed run takes the same branch.
    #[serde(default, skip_serializing_if = "is_false")]
    pub race: bool,
}

/// A body run for each item of a list; the output is the list of results in item order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MapSpec {
    /// The list (a template that must yield an array).
    pub items: ValueTemplate,
    /// Name of the item in templates inside the body.
    #[serde(default = "default_item_var")]
    pub item_var: String,
    /// Name of the 0-based index in templates inside the body.
    #[serde(default = "default_index_var")]
    pub index_var: String,
    /// The body's input for each item (default: the item).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_input: Option<ValueTemplate>,
    /// The block run for each item.
    pub body: Box<Block>,
    /// At most this many items at once (default: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
    /// Cancel the other items at the first failure.
    #[serde(default, skip_serializing_if = "is_false")]
    pub fail_fast: bool,
    /// What a failure does.
    #[serde(default, skip_serializing_if = "OnError::is_default")]
    pub on_error: OnError,
    /// Item state writes stay in the item instead of merging into the run state.
    #[serde(default, skip_serializing_if = "is_false")]
    pub isolate: bool,
}

fn default_item_var() -> String {
    "item".into()
}
fn default_index_var() -> String {
    "index".into()
}

/// A bounded loop. Each iteration's output is the next one's input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoopSpec {
    /// The block run each iteration.
    pub body: Box<Block>,
    /// The loop stops after this many iterations (required: loops are always bounded).
    pub max_iterations: u32,
    /// Checked before each iteration; the loop stops when it is false.
    #[serde(default, rename = "while", skip_serializing_if = "Option::is_none")]
    pub while_: Option<Expr>,
    /// Checked after each iteration (`output`, `exit` in scope); the loop stops when true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Expr>,
    /// Reaching `max_iterations` with the condition unmet fails the block (kind
    /// `loop_exhausted`) instead of ending the loop normally.
    #[serde(default, skip_serializing_if = "is_false")]
    pub fail_at_max: bool,
    /// Reaching `max_iterations` with the condition unmet ends the loop normally but
    /// emits a `warning` event saying so.
    #[serde(default, skip_serializing_if = "is_false")]
    pub warn_at_max: bool,
}

/// The first case whose condition holds runs; without one, `otherwise` (or passthrough).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BranchSpec {
    /// Cases in order.
    pub cases: Vec<Case>,
    /// Runs when no case matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otherwise: Option<Box<Block>>,
}

/// One case of a branch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// A name for events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The condition.
    pub when: Expr,
    /// What runs when it holds.
    pub then: Block,
}

/// How a graph node picks its successors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Routing {
    /// The first matching edge (or, if it is `parallel`, every matching parallel edge).
    #[default]
    First,
    /// Every matching edge, concurrently.
    All,
}

impl Routing {
    fn is_default(&self) -> bool {
        *self == Routing::First
    }
}

/// Named nodes and conditional edges: cycles, fan-out and fan-in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GraphSpec {
    /// The first node.
    pub entry: String,
    /// The nodes, by name.
    pub nodes: IndexMap<String, Block>,
    /// Transitions, tried in order per source node.
    #[serde(default)]
    pub edges: Vec<Edge>,
    /// How a node picks among matching edges.
    #[serde(default, skip_serializing_if = "Routing::is_default")]
    pub routing: Routing,
    /// Nodes that wait for every branch of the nearest fan-out and run once with their
    /// results (`[{output, state}]` as input).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub joins: Vec<String>,
    /// Error routes: node -> node that runs (with `{error, input}`) when it fails.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub on_error: IndexMap<String, String>,
    /// Executions of nodes that already ran (steps around cycles) before the graph fails
    /// (default: the flow's `max_graph_steps`). A graph without cycles never reaches it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u32>,
    /// Branch state writes stay in their branch: a join sees them in its input, and the
    /// state after it is the state at the fork.
    #[serde(default, skip_serializing_if = "is_false")]
    pub isolate: bool,
    /// A node that has edges but takes none of them fails the graph (kind `unrouted`)
    /// instead of ending its branch: an exit that no transition handles is a mistake,
    /// not the end of the work.
    #[serde(default, skip_serializing_if = "is_false")]
    pub fail_unrouted: bool,
}

/// The name edges use for the graph's end.
pub const END: &str = "end";

/// A transition between graph nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Edge {
    /// Source node.
    pub from: String,
    /// Target node, or `end`.
    pub to: String,
    /// Condition (`output`, `exit`, `state`, `input` in scope).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<Expr>,
    /// Taken only when the source's exit handle equals this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<String>,
    /// Taken together with the source's other matching parallel edges.
    #[serde(default, skip_serializing_if = "is_false")]
    pub parallel: bool,
    /// Where the edge (its condition, when it has one) was written, when it came from a
    /// file whose document the IR does not mirror; diagnostics about it are located here.
    #[serde(skip)]
    #[schemars(skip)]
    pub origin: Option<Loc>,
}

/// Runs a named sub-flow of this flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubFlowSpec {
    /// The sub-flow's name in the flow's `flows`.
    pub flow: String,
    /// Share the caller's run state instead of starting from the sub-flow's own.
    #[serde(default, skip_serializing_if = "is_false")]
    pub share_state: bool,
}

#[cfg(test)]
mod step_segment_tests {
    use super::*;

    #[test]
    fn steps_are_keyed_by_id_then_numbered_name_then_position() {
        let pass = || Block::new(BlockKind::Passthrough);
        let steps = vec![
            pass().with_name("double"),
            pass(),
            pass().with_name("double"),
            pass().with_id("check"),
            pass().with_name("check"),
            pass().with_name("double"),
        ];
        let keys: Vec<String> = (0..steps.len()).map(|i| step_segment(&steps, i)).collect();
        assert_eq!(
            keys,
            ["double", "1", "double@1", "check", "check@1", "double@2"]
        );
    }
}
