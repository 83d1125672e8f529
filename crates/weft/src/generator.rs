//! [`generator`]: a model call. The engine assembles the prompt from four slots (system
//! prompt, context entries, conversation history, user message), runs the tool loop
//! (tools are blocks), streams, and repairs structured output against its schema.

use crate::block::{Block, Kind};
use crate::func;
use crate::handler::schema_of;
use crate::parts::Parts;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use weft_core::ir::{self, BlockKind, LlmSpec, MessageSpec, Template, ToolSpec, ValueTemplate};

/// Who a generator speaks as, which decides where its output goes (spec 002,
/// "Generator identity").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentType {
    /// User-facing: its answers are emitted as `message` events and enter its
    /// conversation history.
    Primary,
    /// A worker the user may watch: emitted, but kept out of the history.
    Sub,
    /// A background observer: emitted with `agent_type: trace`, for tooling only.
    Trace,
}

impl AgentType {
    fn as_str(&self) -> &'static str {
        match self {
            AgentType::Primary => "primary",
            AgentType::Sub => "sub",
            AgentType::Trace => "trace",
        }
    }
}

/// Starts a generator named `name`.
///
/// ```
/// use weft::prelude::*;
/// let agent = generator("agent")
///     .model("openai/gpt-4o-mini")
///     .prompt("You are a helpful assistant.")
///     .user("{{ input.message }}")
///     .agent_type(AgentType::Primary);
/// let block: Block = agent.into();
/// assert_eq!(block.kind(), Kind::Generator);
/// ```
pub fn generator(name: impl Into<String>) -> Generator {
    Generator {
        name: name.into(),
        spec: LlmSpec::default(),
        parts: Parts::default(),
        agent_type: None,
        agent_name: None,
        history: false,
        description: String::new(),
    }
}

/// A generator being configured; it becomes a [`Block`] with `.into()` or wherever a
/// block is expected.
#[derive(Clone)]
pub struct Generator {
    name: String,
    spec: LlmSpec,
    parts: Parts,
    agent_type: Option<AgentType>,
    agent_name: Option<String>,
    history: bool,
    description: String,
}

impl Generator {
    /// The model: `provider/model` (`openai/gpt-4o-mini`, `local/smollm2`, ...).
    pub fn model(mut self, id: impl Into<String>) -> Self {
        self.spec.model = Some(id.into());
        self
    }

    /// The system prompt (a template over `input` and `state`).
    pub fn prompt(mut self, system: impl Into<String>) -> Self {
        self.spec.system = Some(Template(system.into()));
        self
    }

    /// A context entry: a system message after the prompt (a template).
    pub fn context(mut self, entry: impl Into<String>) -> Self {
        self.spec.messages.push(MessageSpec {
            role: "system".into(),
            content: Template(entry.into()),
        });
        self
    }

    /// Keeps the conversation in the run state and sends it again on the next call.
    pub fn history(mut self, on: bool) -> Self {
        self.history = on;
        self
    }

    /// The user message (a template, e.g. `{{ input.message }}`).
    pub fn user(mut self, template: impl Into<String>) -> Self {
        self.spec.prompt = Some(Template(template.into()));
        self
    }

    /// The user message, computed from the input by `f`.
    pub fn user_from<T: DeserializeOwned>(
        mut self,
        f: impl Fn(T) -> String + Send + Sync + 'static,
    ) -> Self {
        let name = self
            .parts
            .function(format!("{}.user", self.name), func::unary(f));
        self.spec.prompt = Some(Template(format!(
            "{{{{ {} }}}}",
            func::call(&name, &["input"])
        )));
        self
    }

    /// Blocks the model may call. Each runs as a sub-flow with the model's arguments as
    /// its input (an input that is not an object is passed as the argument `input`).
    pub fn tools(mut self, tools: impl IntoIterator<Item = impl Into<Block>>) -> Self {
        for t in tools {
            let t: Block = t.into();
            let flow_name = format!("tool.{}", t.name);
            // One block given twice (two capability sets sharing a tool) is one tool; a
            // different block under the same name is refused when the flow builds.
            if self.spec.tools.iter().any(|s| s.flow == flow_name) {
                self.parts.merge(&t.parts);
                continue;
            }
            let (parameters, root) = match &t.input_schema {
                Some(s) if s.get("type") == Some(&Value::from("object")) => {
                    (s.clone(), t.ir.clone())
                }
                other => {
                    let inner = other.clone().unwrap_or(json!({}));
                    let mut root = crate::block::wrap(t.ir.clone(), |b| vec![b]);
                    root.data.input = Some(ValueTemplate(Value::from("{{ input.input }}")));
                    (
                        json!({"type": "object", "properties": {"input": inner}, "required": ["input"]}),
                        root,
                    )
                }
            };
            let mut flow = ir::Flow::new(flow_name.clone(), root);
            flow.flows = t.parts.flows.clone();
            self.parts.merge(&t.parts);
            self.parts.flows.insert(flow_name.clone(), flow);
            let alias = self.tool_alias(&t.name);
            self.spec.tools.push(ToolSpec {
                name: alias,
                description: t.description.clone(),
                parameters,
                flow: flow_name,
            });
        }
        self
    }

    /// The name the model sees for the tool block `name`: the block's name made one that
    /// every provider accepts (`web.search/v2` becomes `web_search_v2`), numbered when
    /// another tool of this generator already has it. The block keeps its own name in
    /// the run's steps; a call of the alias runs it.
    fn tool_alias(&self, name: &str) -> String {
        let base = match ir::provider_tool_name(name) {
            b if b.is_empty() => "tool".to_owned(),
            b => b,
        };
        let taken = |n: &str| self.spec.tools.iter().any(|t| t.name == n);
        let mut alias = base.clone();
        let mut k = 2;
        while taken(&alias) {
            let suffix = format!("_{k}");
            let keep = ir::MAX_TOOL_NAME
                .saturating_sub(suffix.len())
                .min(base.len());
            alias = format!("{}{suffix}", &base[..keep]);
            k += 1;
        }
        alias
    }

    /// Tools the model must call before its answer counts, in order.
    pub fn required_tools(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        // Named as the blocks are; the model calls them by their provider-safe aliases.
        self.spec.required_tools = names
            .into_iter()
            .map(|n| ir::provider_tool_name(&n.into()))
            .collect();
        self
    }

    /// Upper bound of tool rounds (default 8).
    pub fn max_tool_rounds(mut self, rounds: u32) -> Self {
        self.spec.max_tool_rounds = rounds;
        self
    }

    /// Who the generator speaks as; unset, it emits nothing of its own.
    pub fn agent_type(mut self, t: AgentType) -> Self {
        self.agent_type = Some(t);
        self
    }

    /// A stable label for its identity (default: the block's name).
    pub fn agent_name(mut self, name: impl Into<String>) -> Self {
        self.agent_name = Some(name.into());
        self
    }

    /// Provider-native web search: `json!(true)` or a config object (`maxUses`,
    /// `allowedDomains`, `blockedDomains`, `userLocation`, `searchDepth`).
    pub fn search(mut self, search: Value) -> Self {
        self.spec.search = Some(search);
        self
    }

    /// Tools the provider runs itself (spec 002's `providerTools`), each an object in
    /// the provider's own tool format, sent beside the block tools as written:
    /// `json!({"type": "code_execution_20250522", "name": "code_execution"})` for
    /// Anthropic. They bypass the block lifecycle: no schema check, no journaled tool
    /// step. Ollama and the local model refuse them.
    pub fn provider_tools(mut self, tools: impl IntoIterator<Item = Value>) -> Self {
        self.spec.provider_tools.extend(tools);
        self
    }

    /// The answer must be a `T` (its JSON Schema is sent to the model, and an invalid
    /// answer is repaired up to `max_repairs` times); the output is that JSON.
    pub fn output<T: JsonSchema>(mut self) -> Self {
        self.spec.output_schema = Some(schema_of::<T>());
        self
    }

    /// The answer must match this JSON Schema.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.spec.output_schema = Some(schema);
        self
    }

    /// How many times an invalid structured answer is sent back (default 2).
    pub fn max_repairs(mut self, n: u32) -> Self {
        self.spec.max_repairs = n;
        self
    }

    /// Sampling temperature.
    pub fn temperature(mut self, t: f64) -> Self {
        self.spec.temperature = Some(t);
        self
    }

    /// Upper bound of completion tokens.
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.spec.max_tokens = Some(n);
        self
    }

    /// What the generator does (a model reads it when the generator is a tool).
    pub fn description(mut self, d: impl Into<String>) -> Self {
        self.description = d.into();
        self
    }

    /// The generator as a block.
    pub fn build(self) -> Block {
        let agent = self.agent_name.clone().unwrap_or_else(|| self.name.clone());
        let mut spec = self.spec;
        if self.history {
            spec.history = Some(format!("{agent}_history"));
        }
        let mut ir = ir::Block::new(BlockKind::Llm(spec)).with_name(self.name.clone());
        if let Some(t) = self.agent_type {
            ir.data.emit = Some(ValueTemplate(json!({
                "agent_type": t.as_str(),
                "agent_name": agent,
                "content": "{{ output }}",
            })));
        }
        let mut block = Block::new(self.name, Kind::Generator, ir, self.parts);
        block.description = self.description;
        block.input_schema = None;
        block
    }
}

impl From<Generator> for Block {
    fn from(g: Generator) -> Block {
        g.build()
    }
}

impl From<&Generator> for Block {
    fn from(g: &Generator) -> Block {
        g.clone().build()
    }
}
