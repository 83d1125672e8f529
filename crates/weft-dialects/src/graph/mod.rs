//! The `graph` dialect: the visual-editor graphs of spec `003`, in the JSON shape its
//! editor saves (`docs/dialects/graph.md`).
//!
//! Every node becomes one block of a core-IR graph whose routing takes every matching
//! edge at once (the editor's engine runs outgoing branches with `Promise.all`). A node
//! reads the previous output from `state.previous_output`, writes its own under its id
//! and there (the keys AgentFlow's engine keeps), and emits its log entries as `message`
//! events ([`events`] turns the engine's events into
//! the spec's log types). `if` and `approval` choose their outgoing edges by exit handle.

mod check;
mod doc;
mod events;

use crate::diagnostics::{Compiled, Diagnostics, read_document};
use crate::dialect::{CompileContext, Confidence, Dialect};
use crate::schema::SchemaBuilder;
use crate::source_map::SourceMap;
use crate::view::EventView;
use doc::{
    AgentData, ApprovalData, Condition, Connection, EndData, GraphDoc, IfData, NodeDoc, StartData,
};
use indexmap::IndexMap;
use serde_json::{Value, json};
use weft_core::Diagnostic;
use weft_core::ir::{
    ApprovalSpec, Block, BlockKind, Edge, Flow, GraphSpec, LlmSpec, Routing, Template, ToolSpec,
    TransformSpec, ValueTemplate,
};

/// Node types, as `type` spells them (`input` is the legacy name of `approval`).
pub(crate) const TYPES: &[&str] = &["start", "agent", "if", "approval", "end"];

/// The handle of a subagent edge.
const SUBAGENT: &str = "subagent";

/// Spec 003's visual-editor graphs.
pub(crate) struct Graph;

impl Dialect for Graph {
    fn name(&self) -> &'static str {
        "graph"
    }

    fn summary(&self) -> &'static str {
        "spec 003's visual-editor JSON: start, agent, if, approval and end nodes joined by connections"
    }

    /// Certain: nodes with `id` and `type` and no `name` (a tea node has a `name`), or a
    /// `connections` list. Likely: `nodes` and `edges` with a node carrying `data`.
    fn detect(&self, doc: &Value) -> Confidence {
        let Some(nodes) = doc.get("nodes").and_then(Value::as_array) else {
            return Confidence::No;
        };
        if doc.get("weft").is_some() {
            return Confidence::No;
        }
        let editor_nodes = !nodes.is_empty()
            && nodes.iter().all(|n| {
                n.get("id").is_some() && n.get("type").is_some() && n.get("name").is_none()
            });
        if doc.get("connections").is_some_and(Value::is_array) || editor_nodes {
            Confidence::Certain
        } else if doc.get("edges").is_some() && nodes.iter().any(|n| n.get("data").is_some()) {
            Confidence::Likely
        } else {
            Confidence::No
        }
    }

    fn compile(&self, doc: Value, cx: &CompileContext<'_>) -> Compiled {
        compile(doc, cx.map)
    }

    fn schema(&self) -> Value {
        let mut b = SchemaBuilder::default();
        b.def::<GraphDoc>("GraphDoc");
        b.def::<NodeDoc>("NodeDoc");
        let kinds: Vec<(&str, Value)> = [
            ("start", b.def::<StartData>("StartData")),
            ("agent", b.def::<AgentData>("AgentData")),
            ("if", b.def::<IfData>("IfData")),
            ("approval", b.def::<ApprovalData>("ApprovalData")),
            ("input", b.def::<ApprovalData>("ApprovalData")),
            ("end", b.def::<EndData>("EndData")),
        ]
        .into_iter()
        .map(|(kind, data)| {
            (kind, serde_json::json!({"allOf": [crate::schema::reference("NodeDoc"), {"properties": {"data": data}}]}))
        })
        .collect();
        let node = b.tagged("Node", "type", &kinds);
        b.property(
            "GraphDoc",
            "nodes",
            serde_json::json!({"type": "array", "items": node}),
        );
        b.finish(
            "GraphDoc",
            "A visual-editor graph (Weft's graph dialect, spec 003)",
        )
    }

    fn reference(&self) -> &'static str {
        include_str!("../../../../docs/dialects/graph.md")
    }

    fn event_view(&self, doc: &Value) -> EventView {
        events::view(doc)
    }
}

/// The name a node has in the core-IR graph: its id, except that `end` (the IR's name
/// for the graph's end) becomes `end~`.
pub(crate) fn ir_name(id: &str) -> String {
    if id == weft_core::ir::END {
        format!("{id}~")
    } else {
        id.to_owned()
    }
}

/// A parsed node, with where it is.
struct Node {
    id: String,
    kind: &'static str,
    data: Value,
    ptr: String,
}

/// Compiles a parsed `graph` document into a flow plus its warnings.
fn compile(doc: Value, map: &SourceMap) -> Compiled {
    let connections_key = if doc.get("connections").is_some() {
        "connections"
    } else {
        "edges"
    };
    let file: GraphDoc = read_document(doc, map)?;
    let mut c = Compiler {
        map,
        diags: Diagnostics::new(),
        flows: IndexMap::new(),
    };
    let flow = c.flow(file, connections_key);
    c.diags.finish(flow, map)
}

struct Compiler<'a> {
    map: &'a SourceMap,
    diags: Diagnostics,
    /// The sub-flows serving top-level agents' subagent tools.
    flows: IndexMap<String, Flow>,
}

impl Compiler<'_> {
    fn flow(&mut self, file: GraphDoc, connections_key: &str) -> Option<Flow> {
        let nodes = self.nodes(&file.nodes);
        let connections: Vec<(Connection, String)> = file
            .connections
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let ptr = format!("/{connections_key}/{i}");
                self.diags.parse::<Connection>(c, &ptr).map(|c| (c, ptr))
            })
            .collect();
        let checked = check::connections(&nodes, &connections, &mut self.diags);
        if self.diags.has_errors() {
            // Building agents walks the subagent tree, which must be known to be sound.
            return None;
        }
        let starts: Vec<&Node> = nodes.values().filter(|n| n.kind == "start").collect();
        let start = match starts.as_slice() {
            [one] => *one,
            [] => {
                self.diags.push(
                    Diagnostic::error("/nodes", "the graph has no start node")
                        .hint("add {\"id\": \"start\", \"type\": \"start\", \"data\": {\"initialInput\": \"...\"}}"),
                );
                return None;
            }
            [_, second, ..] => {
                self.diags.push(
                    Diagnostic::error(&second.ptr, "the graph has more than one start node").hint(
                        "spec 003: a start node \"must exist exactly once for a runnable graph\"",
                    ),
                );
                return None;
            }
        };
        let initial = self
            .diags
            .parse::<StartData>(&start.data, &format!("{}/data", start.ptr))
            .and_then(|d| d.initial_input)
            .unwrap_or_default();

        let mut graph_nodes = IndexMap::new();
        for n in nodes.values() {
            if checked.subagent_targets.contains(&n.id) {
                continue;
            }
            if let Some(block) = self.node(n, &nodes, &checked.subagents) {
                graph_nodes.insert(ir_name(&n.id), block);
            }
        }
        let edges = checked
            .execution
            .iter()
            .map(|e| Edge {
                from: ir_name(&e.from),
                to: ir_name(&e.to),
                when: None,
                exit: e.exit.clone(),
                parallel: false,
                origin: None,
            })
            .collect();
        let graph = GraphSpec {
            entry: ir_name(&start.id),
            nodes: graph_nodes,
            edges,
            routing: Routing::All,
            joins: Vec::new(),
            on_error: IndexMap::new(),
            max_steps: None,
            isolate: false,
            fail_unrouted: false,
        };
        let mut flow = Flow::new(
            file.name.unwrap_or_else(|| "graph".to_owned()),
            Block::new(BlockKind::Graph(graph)),
        );
        flow.description = file.description;
        flow.input = Some(Value::String(initial));
        flow.flows = std::mem::take(&mut self.flows);
        Some(flow)
    }

    /// Every node by id, its type checked (legacy `input` read as `approval`).
    fn nodes(&mut self, raw: &[Value]) -> IndexMap<String, Node> {
        let mut nodes = IndexMap::new();
        for (i, v) in raw.iter().enumerate() {
            let ptr = format!("/nodes/{i}");
            let Some(n) = self.diags.parse::<NodeDoc>(v, &ptr) else {
                continue;
            };
            let kind = match n.kind.as_str() {
                "input" => "approval",
                k => match TYPES.iter().find(|t| **t == k) {
                    Some(t) => t,
                    None => {
                        let d = Diagnostic::error(
                            format!("{ptr}/type"),
                            format!("unknown node type `{k}`"),
                        );
                        self.diags.push(d.hint_closest(
                            k,
                            TYPES.iter().copied(),
                            format!("the node types are {}", TYPES.join(", ")),
                        ));
                        continue;
                    }
                },
            };
            if n.id.is_empty()
                || !n
                    .id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':'))
            {
                self.diags.push(
                    Diagnostic::error(format!("{ptr}/id"), format!("the node id `{}` is not a name", n.id))
                        .hint("ids are letters, digits, `-`, `_` and `:` (they key the run state and the journal)"),
                );
                continue;
            }
            if nodes.contains_key(&n.id) {
                self.diags.push(Diagnostic::error(
                    format!("{ptr}/id"),
                    format!("two nodes have the id `{}`", n.id),
                ));
                continue;
            }
            nodes.insert(
                n.id.clone(),
                Node {
                    id: n.id,
                    kind,
                    data: n.data.unwrap_or_else(|| json!({})),
                    ptr,
                },
            );
        }
        nodes
    }

    /// The block for one node of the execution graph.
    fn node(
        &mut self,
        n: &Node,
        nodes: &IndexMap<String, Node>,
        subagents: &IndexMap<String, Vec<String>>,
    ) -> Option<Block> {
        let dptr = format!("{}/data", n.ptr);
        let id = n.id.as_str();
        let mut block = match n.kind {
            "start" => {
                self.diags.parse::<StartData>(&n.data, &dptr)?;
                let mut b = passthrough("{{ input }}");
                record(&mut b, id);
                b
            }
            "agent" => {
                let (mut b, flows) = self.agent(n, nodes, subagents, PREVIOUS_IN_STATE)?;
                self.flows.extend(flows);
                b.data.announce = Some(start_entries(n, &b));
                record(&mut b, id);
                b.data.emit = Some(log("llm_response", id, "{{ text(output) }}"));
                b
            }
            "if" => {
                let data = self.diags.parse::<IfData>(&n.data, &dptr)?;
                let conditions = self.conditions(data, &dptr)?;
                let mut b = Block::new(BlockKind::Transform(TransformSpec {
                    output: ValueTemplate(Value::from("{{ state.previous_output }}")),
                    exit: Some(Template(exit_template(&conditions))),
                }));
                b.data.emit = Some(condition_checks(id, &conditions));
                b
            }
            "approval" => {
                let data = self.diags.parse::<ApprovalData>(&n.data, &dptr)?;
                let prompt = data
                    .prompt
                    .or(data.label)
                    .unwrap_or_else(|| format!("Approve `{id}`?"));
                let mut b = Block::new(BlockKind::Approval(ApprovalSpec {
                    prompt: Some(Template(crate::template_text::literal(&prompt))),
                    options: vec!["approve".into(), "reject".into()],
                }));
                // The answer as AgentFlow's engine keeps it: `{decision, note}`.
                b.data.set.insert(
                    format!("{id}_approval"),
                    ValueTemplate(json!({
                        "decision": "{{ 'reject' if output.decision == 'reject' else 'approve' }}",
                        "note": "{{ output.note if output.note is string else '' }}",
                    })),
                );
                b.data.emit = Some(log("input_received", id, ANSWER_LOG));
                b
            }
            _ => {
                self.diags.parse::<EndData>(&n.data, &dptr)?;
                passthrough("{{ state.previous_output }}")
            }
        };
        block.id = Some(ir_name(id));
        block.origin = self.map.loc(&n.ptr);
        Some(block)
    }

    /// An `agent` node's model call, reading the previous output from `previous`; its
    /// subagents become tools, each a sub-flow, returned beside the block (they belong
    /// in the `flows` of the flow the block runs in).
    fn agent(
        &mut self,
        n: &Node,
        nodes: &IndexMap<String, Node>,
        subagents: &IndexMap<String, Vec<String>>,
        previous: &str,
    ) -> Option<(Block, IndexMap<String, Flow>)> {
        let dptr = format!("{}/data", n.ptr);
        let data = self.diags.parse::<AgentData>(&n.data, &dptr)?;
        let previous_text = format!("{{{{ text({previous}) }}}}");
        for (key, text) in [
            ("userPrompt", &data.user_prompt),
            ("systemPrompt", &data.system_prompt),
        ] {
            for d in placeholders(text.as_deref().unwrap_or(""), &format!("{dptr}/{key}")) {
                self.diags.push(d);
            }
        }
        let prompt = match data.user_prompt.as_deref().map(str::trim) {
            None | Some("") => previous_text.clone(),
            Some(p) => previous_output(p, &previous_text),
        };
        let mut spec = LlmSpec {
            model: data.model.filter(|m| !m.is_empty()),
            system: data
                .system_prompt
                .filter(|s| !s.trim().is_empty())
                .map(|s| Template(previous_output(&s, &previous_text))),
            prompt: Some(Template(prompt)),
            reasoning_effort: data.reasoning_effort.filter(|r| !r.is_empty()),
            search: data.tools.web_search.then_some(Value::Bool(true)),
            ..LlmSpec::default()
        };
        let mut flows = IndexMap::new();
        for child_id in subagents.get(&n.id).into_iter().flatten() {
            let child = &nodes[child_id];
            let child_data = self
                .diags
                .parse::<AgentData>(&child.data, &format!("{}/data", child.ptr))?;
            let (mut child_block, child_flows) =
                self.agent(child, nodes, subagents, "input.input")?;
            child_block.id = Some(ir_name(child_id));
            child_block.origin = self.map.loc(&child.ptr);
            let mut sub = Flow::new(format!("subagent {child_id}"), child_block);
            sub.flows = child_flows;
            let flow_name = format!("{SUBAGENT}.{child_id}");
            let mut tool_name = tool_name(&child_data, child_id);
            if spec.tools.iter().any(|t| t.name == tool_name) {
                tool_name = format!("{tool_name}_{child_id}");
            }
            let description = child_data
                .description
                .or(child_data.label)
                .unwrap_or_else(|| format!("Delegate a task to the agent `{tool_name}`."));
            spec.tools.push(ToolSpec {
                name: tool_name,
                description,
                parameters: json!({
                    "type": "object",
                    "properties": {"input": {"type": "string", "description": "The task, in full: the subagent sees nothing else."}},
                    "required": ["input"],
                }),
                flow: flow_name.clone(),
            });
            flows.insert(flow_name, sub);
        }
        Some((Block::new(BlockKind::Llm(spec)), flows))
    }

    /// `data.conditions` (or the legacy `data.condition`), each operator checked.
    fn conditions(&mut self, data: IfData, dptr: &str) -> Option<Vec<Condition>> {
        let (conditions, key) = match (data.conditions, data.condition) {
            (Some(c), _) => (c, "conditions"),
            (None, Some(c)) => (vec![c.normalized()], "condition"),
            (None, None) => {
                self.diags.push(
                    Diagnostic::error(dptr, "an if node needs `conditions`")
                        .hint("\"conditions\": [{\"operator\": \"contains\", \"value\": \"yes\"}]"),
                );
                return None;
            }
        };
        let mut ok = true;
        for (i, c) in conditions.iter().enumerate() {
            if !matches!(c.operator.as_str(), "equal" | "contains") {
                ok = false;
                let ptr = if key == "conditions" {
                    format!("{dptr}/conditions/{i}/operator")
                } else {
                    format!("{dptr}/condition/operator")
                };
                let d = Diagnostic::error(ptr, format!("unknown operator `{}`", c.operator));
                self.diags.push(d.hint_closest(
                    &c.operator,
                    ["equal", "contains"],
                    "the operators are equal and contains",
                ));
            }
        }
        ok.then_some(conditions)
    }
}

/// How many conditions an `if` node's data holds (the legacy `condition` is one).
fn condition_count(data: &Value) -> usize {
    match (data.get("conditions"), data.get("condition")) {
        (Some(c), _) => c.as_array().map_or(0, Vec::len),
        (None, Some(_)) => 1,
        (None, None) => 0,
    }
}

/// Where a top-level node finds the previous output.
const PREVIOUS_IN_STATE: &str = "state.previous_output";

/// A block whose output is `template`.
fn passthrough(template: &str) -> Block {
    Block::new(BlockKind::Transform(TransformSpec {
        output: ValueTemplate(Value::from(template)),
        exit: None,
    }))
}

/// The node's output goes to `state[id]` and `state.previous_output`.
fn record(b: &mut Block, id: &str) {
    for key in [id, "previous_output"] {
        b.data
            .set
            .insert(key.to_owned(), ValueTemplate(Value::from("{{ output }}")));
    }
}

/// What AgentFlow's engine logs as an agent starts, before its model call: `step_start`
/// as `<agentName> agent node`, then `start_prompt` with the user message the call
/// sends (the agent's own prompt template, rendered as the block starts).
fn start_entries(n: &Node, agent: &Block) -> ValueTemplate {
    let name = agent_name(&n.data);
    let prompt = match &agent.kind {
        BlockKind::Llm(l) => l.prompt.as_ref().map(|t| t.0.clone()),
        _ => None,
    };
    ValueTemplate(json!([
        log(
            "step_start",
            &n.id,
            &crate::template_text::literal(&format!("{name} agent node"))
        )
        .0,
        log("start_prompt", &n.id, &prompt.unwrap_or_default()).0,
    ]))
}

/// The name an agent shows under: its `agentName`, or `Agent`, as AgentFlow's engine
/// names it.
pub(crate) fn agent_name(data: &Value) -> &str {
    data["agentName"]
        .as_str()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .unwrap_or("Agent")
}

/// What `input_received` says of an answer, as AgentFlow's engine words it (its editor
/// reads the decision and the feedback back from this text).
const ANSWER_LOG: &str = "User {{ 'rejected' if output.decision == 'reject' else 'approved' }} this step.\
{% if output.note is string and output.note | trim %} Feedback: {{ output.note | trim }}{% endif %}";

/// An `if` node's `logic_check` entries: one per condition evaluated, in order, up to
/// the first that matched (all of them when none did), worded as AgentFlow's engine
/// words them: `Condition 2 (contains "ok") evaluated as true`.
fn condition_checks(id: &str, conditions: &[Condition]) -> ValueTemplate {
    let checks = conditions
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let value = match &c.value {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            let said = crate::template_text::literal(&format!(
                "Condition {} ({} \"{value}\") evaluated as ",
                i + 1,
                c.operator
            ));
            json!({
                "type": format!("{{{{ 'logic_check' if exit == 'false' or (exit[10:] | int) >= {i} else none }}}}"),
                "nodeId": crate::template_text::literal(id),
                "content": format!("{said}{{{{ 'true' if exit == 'condition-{i}' else 'false' }}}}"),
            })
        })
        .collect();
    ValueTemplate(Value::Array(checks))
}

/// A log entry `{type, nodeId, content}` for a node's `emit`.
fn log(kind: &str, id: &str, content: &str) -> ValueTemplate {
    ValueTemplate(json!({
        "type": kind,
        "nodeId": crate::template_text::literal(id),
        "content": content,
    }))
}

/// A warning for each `{{name}}` in prompt `text` (at `ptr`) other than
/// `{{PREVIOUS_OUTPUT}}`: spec 003 replaces only that one, so the rest stays in the
/// prompt as written, which an author who wrote `{{previous_output}}` or `{{topic}}`
/// did not mean.
fn placeholders(text: &str, ptr: &str) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            break;
        };
        let inner = after[..close].trim();
        let is_name = inner
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && inner
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.'));
        if is_name && inner != "PREVIOUS_OUTPUT" {
            out.push(
                Diagnostic::warning(
                    ptr,
                    format!("`{{{{{inner}}}}}` stays in the prompt as written: only `{{{{PREVIOUS_OUTPUT}}}}` is replaced (with the previous node's output)"),
                )
                .hint_closest(
                    &inner.to_uppercase(),
                    ["PREVIOUS_OUTPUT"],
                    "write the text itself, or `{{PREVIOUS_OUTPUT}}` for what the node before produced",
                ),
            );
        }
        rest = &after[close + 2..];
    }
    out
}

/// `text` with each `{{PREVIOUS_OUTPUT}}` replaced by `previous` (a template) and
/// everything else literal.
fn previous_output(text: &str, previous: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        match after.find("}}") {
            Some(close) if after[..close].trim() == "PREVIOUS_OUTPUT" => {
                out.push_str(&crate::template_text::literal(&rest[..open]));
                out.push_str(previous);
                rest = &after[close + 2..];
            }
            _ => {
                out.push_str(&crate::template_text::literal(&rest[..open + 2]));
                rest = after;
            }
        }
    }
    out.push_str(&crate::template_text::literal(rest));
    out
}

/// The exit handle of an `if` node: the first condition that matches the lowercased,
/// stringified previous output (`condition-<i>`), else `false`. A condition's value is
/// trimmed and lowercased, and one that is then empty never matches, as AgentFlow's
/// engine has it (a blank condition the editor left would otherwise match everything).
fn exit_template(conditions: &[Condition]) -> String {
    let mut t = String::from("{%- set p = text(state.previous_output) | lower -%}");
    for (i, c) in conditions.iter().enumerate() {
        let value = match &c.value {
            Value::String(s) => s.trim().to_lowercase(),
            Value::Null => String::new(),
            other => other.to_string().to_lowercase(),
        };
        let literal = Value::String(value.clone()).to_string();
        let test = match c.operator.as_str() {
            _ if value.is_empty() => "false".to_owned(),
            "equal" => format!("p == {literal}"),
            _ => format!("{literal} in p"),
        };
        let keyword = if i == 0 { "if" } else { "elif" };
        t.push_str(&format!("{{%- {keyword} {test} -%}}condition-{i}"));
    }
    if conditions.is_empty() {
        t.push_str("false");
    } else {
        t.push_str("{%- else -%}false{%- endif -%}");
    }
    t
}

/// A subagent's tool name: its `agentName`, `name`, `label` or id, as a tool name providers accept.
fn tool_name(data: &AgentData, id: &str) -> String {
    let raw = data
        .agent_name
        .as_deref()
        .or(data.name.as_deref())
        .or(data.label.as_deref())
        .filter(|s| !s.trim().is_empty())
        .unwrap_or(id);
    let mut name = weft_core::ir::provider_tool_name(raw);
    if name.is_empty() {
        name = "subagent".into();
    }
    name
}
