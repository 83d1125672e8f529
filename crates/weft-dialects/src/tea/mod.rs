//! The `tea` dialect: The Edge Agent's YAML (spec `004` and `specs/tea-notes.md`).
//!
//! A file becomes one graph: each node is a block whose returned dict merges into the
//! state, and navigation (`goto`, legacy `edges`, implicit chaining) becomes the graph's
//! edges. The run starts with its input as the state and ends with the final state as
//! its output. Choices the spec leaves open are written in `docs/dialects/tea.md`.
//!
//! Where each kind of node is compiled:
//!
//! | Node | File |
//! | --- | --- |
//! | `run:` / `script:` (Python, Lua, Prolog) | this file (`run_block`), [`code`] |
//! | `steps:` | this file (`steps`) |
//! | `subgraph:` | this file (`subgraph`, read through `CompileContext::include_flow`) |
//! | `type: while_loop` | this file (`while_loop`) |
//! | `type: dynamic_parallel` | [`dynamic_parallel`] |
//! | `uses:` a built-in action (`http.*`, `json.parse`, `file.*`, ...) | [`actions`] |
//! | `uses: llm.call` and TEA's other model actions | [`llm`] |
//! | `uses: llm.embed` / `embedding.*` | [`embed`] |
//! | `uses: reflection.loop` | [`reflection`] |
//! | `uses: reason.cot` | [`reasoning`] |
//! | `uses: reason.self_correct` | [`self_correct`] |
//! | `uses: reason.react` | [`react`] |
//! | `uses: retry.loop` | [`retry`] |
//! | `uses: validate.extraction` | [`extraction`] |
//! | `uses: agent.dispatch` / `.parallel` | [`agents`] |
//! | `uses: agent.sequential` | [`agent_chain`] |
//! | `uses: agent.coordinate` | [`coordinate`] |
//! | `uses: plan.*` | [`planning`] |
//! | `uses: code.execute` / `actions.code_execute` | [`code_execute`] |
//! | `uses: lua.eval` / `prolog.query` | [`browser`] |
//! | `uses:` a TEA service Weft does not offer | [`foreign`] |
//! | `interrupt_before` / `interrupt_after` (approvals) | [`interrupts`] |
//! | navigation (`goto`, `edges`, fan-in) | [`navigation`] |

mod actions;
mod agent_chain;
mod agents;
mod aliases;
mod browser;
mod code;
mod code_execute;
mod coordinate;
mod dataflow;
mod doc;
mod dynamic_parallel;
mod embed;
mod end_node;
mod events;
mod extraction;
mod foreign;
mod ignored;
mod interrupts;
mod llm;
mod navigation;
mod planning;
mod react;
mod reasoning;
mod reflection;
mod result_fields;
mod retry;
mod runtime;
mod self_correct;
mod state_reads;

use crate::diagnostics::{Compiled, Diagnostics, read_document};
use crate::dialect::{CompileContext, Confidence, Dialect};
use crate::source_map::SourceMap;
use crate::view::EventView;
use doc::{Node, TeaDoc};
use indexmap::IndexMap;
use serde_json::{Value, json};
use weft_core::ir::{
    Block, BlockKind, CodeLimits, CodeSpec, Expr, Flow, GraphSpec, LoopSpec, ModelDef, SubFlowSpec,
    TransformSpec, ValueTemplate,
};
use weft_core::{Diagnostic, Loc};

/// How deeply `subgraph:` files may include each other.
const MAX_SUBGRAPH_DEPTH: u32 = 8;

/// The Edge Agent's YAML.
pub(crate) struct Tea;

impl Dialect for Tea {
    fn name(&self) -> &'static str {
        "tea"
    }

    fn summary(&self) -> &'static str {
        "The Edge Agent's YAML (spec 004): a state graph of Python, Lua and Prolog nodes, actions, loops and fan-outs"
    }

    fn detect(&self, doc: &Value) -> Confidence {
        match doc.get("nodes") {
            None => Confidence::No,
            Some(Value::Array(nodes))
                if !nodes.is_empty() && nodes.iter().all(|n| n.get("name").is_some()) =>
            {
                Confidence::Likely
            }
            Some(_) => Confidence::Weak,
        }
    }

    fn compile(&self, doc: Value, cx: &CompileContext<'_>) -> Compiled {
        compile(doc, cx)
    }

    fn schema(&self) -> Value {
        let mut b = crate::schema::SchemaBuilder::default();
        b.def::<TeaDoc>("TeaDoc");
        b.finish("TeaDoc", "The Edge Agent YAML (Weft's tea dialect)")
    }

    fn reference(&self) -> &'static str {
        include_str!("../../../../docs/dialects/tea.md")
    }

    fn event_view(&self, doc: &Value) -> EventView {
        events::view(doc)
    }
}

/// Compiles a parsed `tea` document into a flow plus its warnings.
fn compile(doc: Value, cx: &CompileContext<'_>) -> Compiled {
    let mut doc = aliases::normalize(doc);
    let renamed_end = end_node::rename(&mut doc);
    let set_aside = ignored::set_aside(&mut doc);
    let tea: TeaDoc = read_document(doc, cx.map)?;
    let mut c = Compiler {
        map: cx.map,
        cx,
        diags: Diagnostics::new(),
        models: IndexMap::new(),
        flows: IndexMap::new(),
        variables: tea.variables.clone(),
        agents: settings_map(&tea, "/agents"),
        llm_settings: settings_map(&tea, "/llm"),
        nodes: &tea.nodes,
        correcting: Vec::new(),
        extraction: extraction::Defaults::of(&tea),
    };
    if let Some(warning) = renamed_end {
        c.diags.push(warning);
    }
    for (ptr, key) in set_aside {
        c.diags.push(
            Diagnostic::warning(
                &ptr,
                format!("`{key}` is not a key of a node; TEA ignores it, and so does Weft"),
            )
            .hint(format!("a node's keys: {}", ignored::NODE_KEYS.join(", "))),
        );
    }
    let flow = c.flow(&tea);
    if let Some(flow) = &flow
        && !c.diags.has_errors()
    {
        for d in dataflow::check(flow, declared_keys(&tea), &node_locations(&tea, cx.map)) {
            c.diags.push(d);
        }
    }
    c.diags.finish(flow, cx.map)
}

/// The state keys the file declares: `initial_state`'s and `state_schema`'s.
fn declared_keys(tea: &TeaDoc) -> std::collections::HashSet<String> {
    let initial = tea.initial_state.as_ref().and_then(Value::as_object);
    tea.state_schema
        .keys()
        .chain(initial.into_iter().flat_map(|o| o.keys()))
        .cloned()
        .collect()
}

/// The document pointer of each top-level node, by where it is written.
fn node_locations(tea: &TeaDoc, map: &SourceMap) -> std::collections::HashMap<Loc, String> {
    (0..tea.nodes.len())
        .filter_map(|i| {
            let ptr = format!("/nodes/{i}");
            map.loc(&ptr).map(|loc| (loc, ptr))
        })
        .collect()
}

/// What compiling one file accumulates.
pub(crate) struct Compiler<'a> {
    map: &'a SourceMap,
    /// Where the document is compiled: the directory its subgraphs are read from, and
    /// how deeply it is nested.
    cx: &'a CompileContext<'a>,
    diags: Diagnostics,
    models: IndexMap<String, ModelDef>,
    flows: IndexMap<String, Flow>,
    variables: IndexMap<String, Value>,
    /// `settings.agents`: the agents `agent.dispatch` names.
    agents: IndexMap<String, Value>,
    /// `settings.llm`, whose constant options agents inherit.
    llm_settings: IndexMap<String, Value>,
    /// The file's nodes, for actions that run another node (`retry.loop`'s `correct`).
    nodes: &'a [Node],
    /// The nodes being compiled as a correction, innermost last (a node that corrects
    /// itself through another is refused rather than compiled forever).
    correcting: Vec<String>,
    /// The file's extraction-validation sections, `validate.extraction`'s defaults.
    extraction: extraction::Defaults,
}

/// The mapping at `pointer` under `settings`, with values written `${VARIABLE}` left
/// out (TEA reads them from its environment; Weft's defaults apply instead).
fn settings_map(tea: &TeaDoc, pointer: &str) -> IndexMap<String, Value> {
    tea.settings
        .as_ref()
        .and_then(|s| s.pointer(pointer))
        .and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .filter(|(_, v)| !v.as_str().is_some_and(|s| s.contains("${")))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

impl Compiler<'_> {
    fn loc(&self, ptr: &str) -> Option<Loc> {
        self.map.loc(ptr)
    }

    /// A string's value when it is a constant or `{{ variables.NAME }}`.
    fn constant(&self, s: &str) -> Option<String> {
        match self.constant_value(s)? {
            Value::String(v) => Some(v),
            _ => None,
        }
    }

    /// A string's value when it is a constant (the string) or `{{ variables.NAME }}`
    /// (the variable's value, of any type).
    fn constant_value(&self, s: &str) -> Option<Value> {
        if !holds_template(s) {
            return Some(Value::from(s));
        }
        let inner = s.trim().strip_prefix("{{")?.strip_suffix("}}")?.trim();
        let name = inner.strip_prefix("variables.")?;
        self.variables.get(name).cloned()
    }

    /// A count option given as a number, a numeric string or `{{ variables.NAME }}`
    /// holding one (TEA renders it before the action runs; Weft needs it when the file
    /// loads, to bound the loop): from 0 to `max`, `default` when absent.
    pub(super) fn constant_count(
        &mut self,
        v: Option<&Value>,
        ptr: &str,
        default: u32,
        max: u64,
    ) -> Option<u32> {
        let Some(v) = v else {
            return Some(default);
        };
        let resolved = match v {
            Value::String(s) => self.constant_value(s),
            other => Some(other.clone()),
        };
        let n = resolved.and_then(|r| match r {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        });
        match n.filter(|n| *n <= max) {
            Some(n) => Some(n as u32),
            None => {
                self.diags.push(
                    Diagnostic::error(
                        ptr,
                        format!("{} is a whole number from 0 to {max}, written as one or as `{{{{ variables.NAME }}}}` holding one, not {v}", ptr.rsplit('/').next().unwrap_or(ptr)),
                    )
                    .hint("Weft needs the count when the file loads, to bound the loop"),
                );
                None
            }
        }
    }

    fn flow(&mut self, tea: &TeaDoc) -> Option<Flow> {
        self.check_state_schema(&tea.state_schema);
        if tea.nodes.is_empty() {
            self.diags.push(
                Diagnostic::error("/nodes", "a tea flow needs at least one node")
                    .hint("nodes: [{name: start, run: \"return {}\"}]"),
            );
            return None;
        }
        let graph = self.graph(tea)?;
        // The input, over the file's initial_state, is the initial state; the final
        // state is the output.
        let mut start = match self.initial_state(tea.initial_state.as_ref()) {
            Some(initial) => transform(Value::from(format!(
                "{{{{ merge({}, input if input is mapping else {{}}) }}}}",
                constant_expression(&initial)
            ))),
            None => Block::new(BlockKind::Passthrough),
        }
        .with_id("__start__");
        start.data.merge_output = true;
        self.runtime_sections(tea);
        let finish = transform(Value::from("{{ state }}")).with_id("__end__");
        let mut root = Block::new(BlockKind::Sequence(vec![start, graph, finish]));
        root.data
            .bind
            .insert("variables".into(), ValueTemplate(Value::from("{{ vars }}")));
        if let Some(data) = &tea.data {
            root.data.bind.insert(
                "data".into(),
                ValueTemplate(Value::from(format!(
                    "{{{{ {} }}}}",
                    constant_expression(data)
                ))),
            );
        }
        let mut flow = Flow::new(tea.name.clone().unwrap_or_else(|| "tea".into()), root);
        flow.description = tea.description.clone();
        flow.vars = tea.variables.clone();
        flow.models = std::mem::take(&mut self.models);
        flow.flows = std::mem::take(&mut self.flows);
        Some(flow)
    }

    /// `initial_state`, a mapping.
    fn initial_state(&mut self, initial: Option<&Value>) -> Option<Value> {
        match initial {
            None | Some(Value::Null) => None,
            Some(v @ Value::Object(_)) => Some(v.clone()),
            Some(_) => {
                self.diags.push(
                    Diagnostic::error("/initial_state", "initial_state is a mapping of state keys")
                        .hint("initial_state: {count: 0}"),
                );
                None
            }
        }
    }

    fn check_state_schema(&mut self, schema: &IndexMap<String, Value>) {
        const TYPES: &[&str] = &[
            "str", "string", "int", "integer", "float", "number", "bool", "boolean", "list",
            "array", "dict", "object", "any",
        ];
        for (key, ty) in schema {
            let ptr = weft_core::validate::child_pointer("/state_schema", key);
            // A type is a name (`list`, `dict[str, int]`) or, as some files write it, a
            // JSON-Schema-like object (`{type: array, description: ...}`).
            let written = match ty {
                Value::Object(o) if !o.contains_key("type") && o.contains_key("properties") => {
                    Some("object")
                }
                Value::Object(o) => o.get("type").and_then(Value::as_str),
                other => other.as_str(),
            };
            let name = written.map(|t| t.split('[').next().unwrap_or(t).trim());
            if !name.is_some_and(|t| TYPES.contains(&t.to_lowercase().as_str())) {
                let d = Diagnostic::error(&ptr, format!("`{key}` has an unknown type {ty}"));
                self.diags.push(d.hint_closest(
                    name.unwrap_or_default(),
                    TYPES.iter().copied(),
                    format!("types: {}", TYPES.join(", ")),
                ));
            }
        }
    }

    /// The node's block (without navigation). `parallel_results`, for a fan-in node,
    /// is where its `parallel_results` are read from; `in_loop` rejects nested
    /// `while_loop`s.
    fn node(
        &mut self,
        n: &Node,
        ptr: &str,
        name: &str,
        parallel_results: Option<ValueTemplate>,
        in_loop: bool,
    ) -> Option<Block> {
        let fan_in = parallel_results.is_some();
        let methods: Vec<&str> = [
            (n.run.is_some(), "run"),
            (n.script.is_some(), "script"),
            (n.uses.is_some(), "uses"),
            (
                n.steps.is_some() && n.kind.as_deref() != Some("dynamic_parallel"),
                "steps",
            ),
            (n.kind.is_some(), "type"),
        ]
        .into_iter()
        .filter_map(|(on, m)| on.then_some(m))
        .collect();
        if methods.len() > 1 {
            self.diags.push(
                Diagnostic::error(ptr, format!("node `{name}` has {} execution methods; give it one", methods.join(" and ")))
                    .hint("a node runs code (run/script), an action (uses), steps, or is a while_loop or dynamic_parallel"),
            );
            return None;
        }
        self.check_misplaced(n, ptr);
        if n.streams.is_some() {
            let message = format!(
                "node `{name}` has `streams:`, TEA's pipes between nodes' stdin and stdout; Weft's sandboxed code has no stdin or stdout, so it does not run stream nodes"
            );
            self.diags.push(
                Diagnostic::warning(format!("{ptr}/streams"), format!("{message}: a run that reaches it fails there"))
                    .hint("pass the data through the state instead: return it from one node and read it in the next"),
            );
            return Some(actions::refusal(message));
        }
        let mut block = match (methods.first().copied(), n.kind.as_deref()) {
            (None, _) => Block::new(BlockKind::Passthrough),
            (Some("run" | "script"), _) => self.run_block(n, ptr, name, fan_in)?,
            (Some("uses"), _) => {
                let uses = n.uses.as_deref().unwrap_or_default();
                self.action_into_state(uses, n.with.as_ref(), n.output.as_ref(), ptr, name)?
            }
            (Some("steps"), _) => self.steps(
                n.steps.as_deref().unwrap_or_default(),
                &format!("{ptr}/steps"),
                in_loop,
            )?,
            (_, Some("while_loop")) => self.while_loop(n, ptr, name, in_loop)?,
            (_, Some("dynamic_parallel")) => self.dynamic_parallel(n, ptr, name, in_loop)?,
            (_, Some(other)) => {
                let d = Diagnostic::error(
                    format!("{ptr}/type"),
                    format!("unknown node type `{other}`"),
                );
                self.diags.push(d.hint_closest(
                    other,
                    ["while_loop", "dynamic_parallel"],
                    "node types: while_loop, dynamic_parallel",
                ));
                return None;
            }
            _ => unreachable!("methods are the listed ones"),
        };
        if let Some(from) = parallel_results {
            block.data.bind.insert("parallel_results".into(), from);
        }
        block.description = n.description.clone();
        block.origin = self.loc(ptr);
        Some(block)
    }

    /// Keys that belong to another kind of node are errors, not silently unused.
    fn check_misplaced(&mut self, n: &Node, ptr: &str) {
        let kind = n.kind.as_deref();
        let mut wrong = |present: bool, key: &str, belongs: &str| {
            if present {
                self.diags.push(
                    Diagnostic::error(
                        format!("{ptr}/{key}"),
                        format!("`{key}` belongs to {belongs}"),
                    )
                    .hint("remove it, or give the node the kind it belongs to"),
                );
            }
        };
        let is_loop = kind == Some("while_loop");
        let is_dp = kind == Some("dynamic_parallel");
        wrong(
            !is_loop && n.max_iterations.is_some(),
            "max_iterations",
            "`type: while_loop` nodes",
        );
        wrong(
            !is_loop && n.body.is_some(),
            "body",
            "`type: while_loop` nodes",
        );
        for (present, key) in [
            (n.items.is_some(), "items"),
            (n.item_var.is_some(), "item_var"),
            (n.index_var.is_some(), "index_var"),
            (n.max_concurrency.is_some(), "max_concurrency"),
            (n.fail_fast.is_some(), "fail_fast"),
            (n.action.is_some(), "action"),
            (n.subgraph.is_some(), "subgraph"),
            (n.input.is_some(), "input"),
        ] {
            wrong(!is_dp && present, key, "`type: dynamic_parallel` nodes");
        }
        wrong(
            n.with.is_some() && n.uses.is_none(),
            "with",
            "nodes with `uses:`",
        );
        wrong(
            n.language.is_some() && n.run.is_none() && n.script.is_none(),
            "language",
            "nodes with `run:` or `script:`",
        );
        // TEA reads these only where they belong and ignores them elsewhere; its own
        // examples have them there, so they are warned of, not refused.
        for (present, key, belongs) in [
            (
                !is_loop && n.condition.is_some(),
                "condition",
                "`type: while_loop` nodes",
            ),
            (
                n.prompt.is_some(),
                "prompt",
                "the `with:` of a model action",
            ),
        ] {
            if present {
                self.diags.push(
                    Diagnostic::warning(
                        format!("{ptr}/{key}"),
                        format!("`{key}` belongs to {belongs}; here it changes nothing, as in TEA"),
                    )
                    .hint("remove it, or move it where it belongs"),
                );
            }
        }
        if n.output.is_some() && n.uses.is_none() && !is_dp {
            // TEA reads `output` on action nodes only and ignores it elsewhere; its own
            // examples put it on code nodes.
            self.diags.push(
                Diagnostic::warning(
                    format!("{ptr}/output"),
                    "`output` is read on nodes with `uses:` or `type: dynamic_parallel`; here it changes nothing, as in TEA",
                )
                .hint("a code node's returned dict merges into the state; remove `output`"),
            );
        }
    }

    /// `run:`/`script:` code, or `run: {type: expression, value, output_key}`.
    fn run_block(&mut self, n: &Node, ptr: &str, name: &str, fan_in: bool) -> Option<Block> {
        let (source, sptr) = match (&n.run, &n.script) {
            (Some(Value::String(s)), _) => (s.clone(), format!("{ptr}/run")),
            (Some(Value::Object(o)), _) => return self.expression(o, &format!("{ptr}/run")),
            (Some(_), _) => {
                self.diags.push(
                    Diagnostic::error(
                        format!("{ptr}/run"),
                        "`run` is code (a string) or {type: expression, value, output_key}",
                    )
                    .hint("run: |\n  return {\"done\": True}"),
                );
                return None;
            }
            (None, Some(s)) => (s.clone(), format!("{ptr}/script")),
            (None, None) => unreachable!("called for run or script"),
        };
        let language = match code::language_of(&source, n.language.as_deref()) {
            Ok(l) => l,
            Err(m) => {
                self.diags
                    .push(Diagnostic::error(format!("{ptr}/language"), m));
                return None;
            }
        };
        if source.trim().is_empty() {
            self.diags.push(Diagnostic::error(
                &sptr,
                format!("node `{name}` has empty code"),
            ));
            return None;
        }
        let text_line = self.map.text_line(&sptr);
        let spec = code::code_spec(language, &source, fan_in, text_line);
        let mut b = Block::new(BlockKind::Code(spec));
        b.data.merge_output = true;
        Some(b)
    }

    fn expression(&mut self, o: &serde_json::Map<String, Value>, ptr: &str) -> Option<Block> {
        for key in o.keys() {
            if !["type", "value", "output_key"].contains(&key.as_str()) {
                self.diags.push(
                    Diagnostic::error(
                        weft_core::validate::child_pointer(ptr, key),
                        format!("unknown key `{key}` in an expression"),
                    )
                    .hint("an expression is {type: expression, value: EXPR, output_key: KEY}"),
                );
            }
        }
        if o.get("type").and_then(Value::as_str) != Some("expression") {
            self.diags.push(
                Diagnostic::error(format!("{ptr}/type"), "an object `run` needs `type: expression`")
                    .hint("run: {type: expression, value: \"len(state.items) > 0\", output_key: has_items}"),
            );
            return None;
        }
        let Some(value) = o.get("value").and_then(Value::as_str) else {
            self.diags.push(Diagnostic::error(
                format!("{ptr}/value"),
                "an expression needs `value`, an expression string",
            ));
            return None;
        };
        let key = o
            .get("output_key")
            .and_then(Value::as_str)
            .unwrap_or("result");
        let mut b = transform(json!({ key: format!("{{{{ {} }}}}", strip_braces(value)) }));
        b.data.merge_output = true;
        Some(b)
    }

    /// `steps:` run in order, each seeing the state merged so far.
    fn steps(&mut self, steps: &[Node], ptr: &str, in_loop: bool) -> Option<Block> {
        if steps.is_empty() {
            self.diags.push(Diagnostic::error(ptr, "`steps` is empty"));
            return None;
        }
        let blocks = self.in_order(
            steps,
            ptr,
            "a step cannot navigate (`goto`, `fan_in`); steps run in order",
            in_loop,
            |i| format!("step{i}"),
        )?;
        Some(sequence_of(blocks))
    }

    /// Nodes that run one after another (`steps`, a loop `body`): one that navigates gets
    /// `no_navigation` as its error, and an unnamed one is called `default_name(index)`.
    /// None if any does not compile.
    fn in_order(
        &mut self,
        nodes: &[Node],
        ptr: &str,
        no_navigation: &str,
        in_loop: bool,
        default_name: impl Fn(usize) -> String,
    ) -> Option<Vec<Block>> {
        let mut blocks = Vec::new();
        for (i, n) in nodes.iter().enumerate() {
            let nptr = format!("{ptr}/{i}");
            if n.goto.is_some() || n.fan_in.is_some() {
                self.diags.push(Diagnostic::error(&nptr, no_navigation));
            }
            let name = n.name.clone().unwrap_or_else(|| default_name(i));
            blocks.extend(self.node(n, &nptr, &name, None, in_loop));
        }
        (blocks.len() == nodes.len()).then_some(blocks)
    }

    /// An action whose result goes to state key `output`, or merges into the state.
    fn action_into_state(
        &mut self,
        uses: &str,
        with: Option<&Value>,
        output: Option<&Value>,
        ptr: &str,
        node: &str,
    ) -> Option<Block> {
        let mut b = self.action(uses, with, ptr, node)?;
        match self.action_output(output, ptr)? {
            Some(keys) => {
                for (key, template) in keys {
                    b.data.set.insert(key, ValueTemplate(template));
                }
            }
            None => b.data.merge_output = true,
        }
        Some(b)
    }

    /// An action's `output:` as the state keys it writes and their templates, with the
    /// action's result as `output` in them: a key (`output: answer`) is the result
    /// itself; a mapping's templates read the result as TEA's `result`. `Some(None)`
    /// without `output` (the result merges); None when `output` is neither.
    fn action_output(
        &mut self,
        output: Option<&Value>,
        ptr: &str,
    ) -> Option<Option<serde_json::Map<String, Value>>> {
        match output {
            None => Some(None),
            Some(Value::String(key)) => Some(Some(
                [(key.clone(), Value::from("{{ output }}"))]
                    .into_iter()
                    .collect(),
            )),
            Some(Value::Object(map)) => Some(Some(
                map.iter()
                    .map(|(key, template)| (key.clone(), result_as_output(template)))
                    .collect(),
            )),
            Some(_) => {
                self.diags.push(
                    Diagnostic::error(
                        format!("{ptr}/output"),
                        "output is a state key, or a mapping of state keys to templates",
                    )
                    .hint("output: answer   or   output: {title: \"{{ result.content }}\"}"),
                );
                None
            }
        }
    }

    fn while_loop(&mut self, n: &Node, ptr: &str, name: &str, in_loop: bool) -> Option<Block> {
        if in_loop {
            self.diags.push(
                Diagnostic::error(ptr, format!("`{name}` is a while_loop inside a while_loop; nested while-loops are not supported"))
                    .hint("spec 004: \"Nested while-loops are NOT supported\"; move the inner loop into its own node"),
            );
            return None;
        }
        let max = match n.max_iterations {
            None => {
                self.diags.push(
                    Diagnostic::error(ptr, format!("while_loop `{name}` needs `max_iterations`"))
                        .hint("max_iterations is required, from 1 to 1000"),
                );
                return None;
            }
            Some(m) if !(1..=1000).contains(&m) => {
                self.diags.push(
                    Diagnostic::error(
                        format!("{ptr}/max_iterations"),
                        format!("max_iterations is {m}, outside 1-1000"),
                    )
                    .hint("spec 004: \"Range must be 1-1000\""),
                );
                return None;
            }
            Some(m) => m as u32,
        };
        let Some(condition) = &n.condition else {
            self.diags.push(
                Diagnostic::error(ptr, format!("while_loop `{name}` needs a `condition`"))
                    .hint("condition: \"state.count < 5\" (checked before each iteration)"),
            );
            return None;
        };
        let body = match &n.body {
            Some(b) if !b.is_empty() => b,
            _ => {
                self.diags.push(Diagnostic::error(
                    ptr,
                    format!("while_loop `{name}` needs a `body`, a list of nodes"),
                ));
                return None;
            }
        };
        let blocks = self.in_order(
            body,
            &format!("{ptr}/body"),
            "a loop body node cannot navigate (`goto`, `fan_in`); the body runs in order",
            true,
            |i| format!("{name}.{i}"),
        )?;
        Some(Block::new(BlockKind::Loop(LoopSpec {
            body: Box::new(sequence_of(blocks)),
            max_iterations: max,
            while_: Some(Expr(strip_braces(condition).to_owned())),
            until: None,
            fail_at_max: false,
            warn_at_max: false,
        })))
    }

    /// Subgraph mode: the file is loaded now (any dialect) and becomes a sub-flow.
    fn subgraph(&mut self, n: &Node, ptr: &str, name: &str) -> Option<Block> {
        let file = n.subgraph.as_deref().expect("subgraph mode");
        let sptr = format!("{ptr}/subgraph");
        if file.contains("://") {
            self.diags.push(
                Diagnostic::error(
                    &sptr,
                    format!("`{file}` is remote; Weft loads subgraphs from local files only"),
                )
                .hint("download the file next to the flow and name it by a relative path"),
            );
            return None;
        }
        if self.cx.depth >= MAX_SUBGRAPH_DEPTH {
            self.diags.push(Diagnostic::error(&sptr, format!("subgraphs nest deeper than {MAX_SUBGRAPH_DEPTH} files; is one including itself?")));
            return None;
        }
        let Some(base_dir) = self.cx.base_dir else {
            self.diags.push(
                Diagnostic::error(&sptr, format!("cannot load subgraph `{file}`: {}", crate::dialect::NO_DIRECTORY))
                    .hint("run the flow from its file, or store it with `weft serve --flow FILE` from the directory that holds its subgraphs"),
            );
            return None;
        };
        let path = base_dir.join(file);
        let loaded = self.cx.include_flow(&path, &Tea);
        let flow = match loaded {
            Ok(f) => f,
            Err(m) => {
                self.diags.push(Diagnostic::error(
                    &sptr,
                    format!("subgraph `{file}` does not load:\n{m}"),
                ));
                return None;
            }
        };
        let flow_name = format!("{name}.subgraph");
        self.flows.insert(flow_name.clone(), flow);
        let mut b = Block::new(BlockKind::SubFlow(SubFlowSpec {
            flow: flow_name,
            share_state: false,
        }));
        b.data.input = Some(ValueTemplate(
            n.input
                .clone()
                .unwrap_or_else(|| Value::from("{{ state }}")),
        ));
        b.data.merge_output = true;
        Some(b)
    }

    fn graph(&mut self, tea: &TeaDoc) -> Option<Block> {
        let mut nodes = IndexMap::new();
        let joins = navigation::fan_in_nodes(tea);
        let collecting = navigation::dynamic_fan_ins(tea);
        let interrupts = self.interrupts(tea);
        for (i, n) in tea.nodes.iter().enumerate() {
            let ptr = format!("/nodes/{i}");
            let Some(name) = self.node_name(n, &ptr, &nodes) else {
                continue;
            };
            // Parallel edges' branches meet in the fan-in node's input; a
            // dynamic_parallel's results are in the state.
            let parallel_results = match collecting.get(&name) {
                _ if joins.contains(&name) => {
                    Some("{{ input | map(attribute='state') | list }}".to_owned())
                }
                Some(key) => Some(format!("{{{{ state[{}] }}}}", Value::from(key.as_str()))),
                None => None,
            };
            let parallel_results = parallel_results.map(|t| ValueTemplate(Value::from(t)));
            if let Some(b) = self.node(n, &ptr, &name, parallel_results, false) {
                nodes.insert(name.clone(), interrupts.around(&name, b).with_id(name));
            } else {
                nodes.insert(name, Block::new(BlockKind::Passthrough));
            }
        }
        let (entry, edges) = self.navigation(tea, &nodes)?;
        Some(Block::new(BlockKind::Graph(GraphSpec {
            entry,
            nodes,
            edges,
            routing: Default::default(),
            joins: joins.into_iter().collect(),
            on_error: IndexMap::new(),
            max_steps: None,
            isolate: true,
            fail_unrouted: false,
        })))
    }

    fn node_name(&mut self, n: &Node, ptr: &str, seen: &IndexMap<String, Block>) -> Option<String> {
        let Some(name) = n.name.clone() else {
            self.diags.push(
                Diagnostic::error(ptr, "a node needs a `name`").hint("nodes: [{name: fetch, ...}]"),
            );
            return None;
        };
        let nptr = format!("{ptr}/name");
        if name.is_empty() || name.contains('/') || name.contains('@') || name.contains('#') {
            self.diags.push(
                Diagnostic::error(nptr, format!("`{name}` cannot name a node"))
                    .hint("use letters, digits, `_`, `-` and `.`"),
            );
            return None;
        }
        if ["__start__", "__end__", weft_core::ir::END].contains(&name.as_str()) {
            self.diags.push(
                Diagnostic::error(nptr, format!("`{name}` is reserved and cannot name a node"))
                    .hint("`__start__` and `__end__` name the graph's ends (and Weft reserves `end` inside loops and steps); rename the node"),
            );
            return None;
        }
        if seen.contains_key(&name) {
            self.diags.push(
                Diagnostic::error(nptr, format!("two nodes are named `{name}`"))
                    .hint("node names are unique"),
            );
            return None;
        }
        Some(name)
    }
}

/// A transform whose output is `output` (templates).
pub(super) fn transform(output: Value) -> Block {
    Block::new(BlockKind::Transform(TransformSpec {
        output: ValueTemplate(output),
        exit: None,
    }))
}

/// A passthrough that sets state keys from templates (`keys`, a mapping).
pub(super) fn setting(keys: Value) -> Block {
    let mut b = Block::new(BlockKind::Passthrough);
    if let Value::Object(keys) = keys {
        for (k, v) in keys {
            b.data.set.insert(k, ValueTemplate(v));
        }
    }
    b
}

/// `text` as a template (a name's value in `data.bind`, say).
pub(super) fn template(text: &str) -> ValueTemplate {
    ValueTemplate(Value::from(text))
}

/// Python an action brings along: `library` (functions), then `call` (an expression of
/// them, whose value is the block's output), with `args` as names.
pub(super) fn python_call(library: &str, call: &str, args: Value) -> Block {
    Block::new(BlockKind::Code(CodeSpec {
        language: "python".into(),
        source: format!("{library}\n{call}\n"),
        origin: None,
        entry: None,
        args: Some(ValueTemplate(args)),
        imports: None,
        builtins: None,
        limits: CodeLimits::default(),
    }))
}

/// `blocks` in order; one block is itself, not a sequence of one (which would be two
/// more events each time it runs).
fn sequence_of(mut blocks: Vec<Block>) -> Block {
    match blocks.len() {
        1 => blocks.pop().expect("one block"),
        _ => Block::new(BlockKind::Sequence(blocks)),
    }
}

/// Whether `s` holds a template (`{{ ... }}` or `{% ... %}`).
fn holds_template(s: &str) -> bool {
    s.contains("{{") || s.contains("{%")
}

/// An expression whose value is `v` as written: read from JSON text, so the templates
/// its strings may hold stay text. No brace appears in the expression (they are written
/// `\x7b` and `\x7d` in its string), so it can stand alone between `{{ }}`.
fn constant_expression(v: &Value) -> String {
    let literal = Value::from(v.to_string()).to_string();
    format!(
        "fromjson({})",
        literal.replace('{', "\\x7b").replace('}', "\\x7d")
    )
}

/// `{{ expr }}` -> `expr`, for fields that hold a bare expression.
fn strip_braces(s: &str) -> &str {
    let t = s.trim();
    match t.strip_prefix("{{").and_then(|r| r.strip_suffix("}}")) {
        Some(inner) if !inner.contains("{{") => inner.trim(),
        _ => t,
    }
}

/// A template of an `output:` mapping with TEA's `result` (the action's result) read as
/// Weft's `output`, in every string of the value.
fn result_as_output(template: &Value) -> Value {
    match template {
        Value::String(s) => Value::from(rename_result(s)),
        Value::Array(a) => Value::Array(a.iter().map(result_as_output).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), result_as_output(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `result` as a whole word (not `.result`, `results` or `my_result`) renamed `output`.
fn rename_result(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < s.len() {
        let rest = &s[i..];
        let before = if i == 0 { None } else { Some(bytes[i - 1]) };
        let after = bytes.get(i + "result".len()).copied();
        let word = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_');
        if rest.starts_with("result") && !word(before) && before != Some(b'.') && !word(after) {
            out.push_str("output");
            i += "result".len();
        } else {
            let c = rest.chars().next().expect("not at the end");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}
