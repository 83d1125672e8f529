//! The `souls` dialect: spec `001`'s YAML workflows of blocks run by souls (configured
//! model personas), in the file shape `docs/dialects/souls.md` shows.
//!
//! The workflow is a core-IR graph (first matching edge) whose nodes are the blocks that
//! transitions reach; a loop's inner blocks run inside the loop. Every block writes its
//! output to `state.results[<id>]` (a dispatch also `results["<id>.<exit>"]`), so the
//! run state is the one that tool keeps: `results`, `shared_memory`, `metadata`.
//!
//! Where each kind of block is compiled:
//!
//! | Block | File |
//! | --- | --- |
//! | `linear`, `synthesize` | [`blocks`] |
//! | `gate`, `code`, `dispatch`, `loop` | [`kinds`] |
//! | `workflow` (a child workflow file) | [`child`] |
//! | a block's shared fields (`inputs`, `outputs`, `retry_config`, `routes`, ...) | [`common`] |
//! | conditions (`output_conditions`, `routes`, `exit_conditions`) | [`conditions`] |
//! | reads of a result no path can have written (the dataflow check) | [`order`] |
//! | `assertions` (and the LLM judge) | [`assertions`], [`checks`], [`custom_checks`] |
//! | souls' tools (`http`, `file_io`, `delegate`, Python, requests) | [`tools`], [`listed_tools`] |
//! | providers | [`providers`] |
//! | a project's `custom/` files | [`project`] |
//! | `eval:` | [`eval`] |

mod assertions;
mod blocks;
mod checks;
mod child;
mod common;
mod conditions;
mod custom_checks;
mod doc;
mod eval;
mod kinds;
mod listed_tools;
mod order;
mod project;
mod prompt;
mod providers;
mod schema;
mod tools;

use crate::diagnostics::{Compiled, Diagnostics, read_document};
use crate::dialect::{CompileContext, Confidence, Dialect};
use crate::source_map::SourceMap;
use doc::{Config, Soul, SoulsDoc, Transition};
use indexmap::IndexMap;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use weft_core::Diagnostic;
use weft_core::ir::{
    Block, BlockKind, END, Edge, Flow, GraphSpec, Routing, ToolSpec, TransformSpec, ValueTemplate,
};

/// Spec 001's workflows of blocks run by souls.
pub(crate) struct Souls;

impl Dialect for Souls {
    fn name(&self) -> &'static str {
        "souls"
    }

    fn summary(&self) -> &'static str {
        "spec 001's YAML workflows: blocks run by souls (model personas), joined by transitions"
    }

    fn detect(&self, doc: &Value) -> Confidence {
        let (blocks, workflow) = (doc.get("blocks"), doc.get("workflow"));
        if doc.get("weft").is_some() {
            Confidence::No
        } else if blocks.is_some_and(Value::is_object) && workflow.is_some_and(Value::is_object) {
            Confidence::Certain
        } else if blocks.is_some() && workflow.is_some() {
            Confidence::Likely
        } else {
            Confidence::No
        }
    }

    fn compile(&self, doc: Value, cx: &CompileContext<'_>) -> Compiled {
        compile(doc, cx)
    }

    fn schema(&self) -> Value {
        schema::json_schema()
    }

    fn reference(&self) -> &'static str {
        include_str!("../../../../docs/dialects/souls.md")
    }
}

/// Compiles a parsed souls document (souls not defined inline are read from `souls/`
/// beside the file, in the context's `base_dir`), `cx.depth` levels below the file
/// `weft run` was given (above 0, a child run by a `workflow` block).
pub(super) fn compile(doc: Value, cx: &CompileContext<'_>) -> Compiled {
    let file: SoulsDoc = read_document(doc, cx.map)?;
    let (map, base_dir, depth) = (cx.map, cx.base_dir, cx.depth);
    let mut c = Compiler {
        map,
        base_dir,
        diags: Diagnostics::new(),
        config: file.config.clone(),
        inline_souls: file.souls.clone(),
        souls: HashMap::new(),
        ids: file.blocks.keys().cloned().collect(),
        dispatch_keys: Vec::new(),
        result_reads: Vec::new(),
        raw_blocks: file.blocks.clone(),
        depth,
        flows: IndexMap::new(),
        tool_specs: IndexMap::new(),
        listed_tools_form: false,
        delegate_declared: false,
        interfaces: HashMap::new(),
        models: IndexMap::new(),
    };
    c.tools(file.tools.as_ref());
    let flow = c.flow(&file);
    if let Some(eval) = &file.eval {
        c.eval_section(eval);
    }
    c.diags.finish(flow, map)
}

/// A soul with the file's `config` defaults applied.
#[derive(Debug, Clone)]
struct ResolvedSoul {
    system_prompt: Option<String>,
    model: Option<String>,
    temperature: Option<f64>,
    max_tokens: Option<u32>,
    /// The tools it may call, and those it must call before answering.
    tools: Vec<ToolSpec>,
    required_tools: Vec<String>,
    max_tool_iterations: Option<u32>,
    /// Whether it may call `delegate` (made per block, from the block's exits).
    delegate: bool,
}

pub(super) struct Compiler<'a> {
    map: &'a SourceMap,
    base_dir: Option<&'a Path>,
    diags: Diagnostics,
    config: Config,
    inline_souls: IndexMap<String, Value>,
    /// Souls resolved so far (`None`: it failed, already reported).
    souls: HashMap<String, Option<ResolvedSoul>>,
    /// Every block id.
    ids: Vec<String>,
    /// `"<dispatch>.<exit>"` result keys.
    dispatch_keys: Vec<String>,
    /// Every read of a block's result, checked against the workflow's order once it
    /// is known.
    result_reads: Vec<order::ResultRead>,
    raw_blocks: IndexMap<String, Value>,
    /// How many `workflow` blocks lead to this file.
    depth: u32,
    /// Child workflows and tools, by flow name.
    flows: IndexMap<String, Flow>,
    /// The workflow's tools, by id.
    tool_specs: IndexMap<String, ToolSpec>,
    /// Whether `tools:` is runsight's list of ids (not Weft's map of definitions).
    listed_tools_form: bool,
    /// Whether that list declares `delegate`.
    delegate_declared: bool,
    /// The interfaces of the child workflows that have one, by flow name.
    interfaces: HashMap<String, doc::Interface>,
    /// Model aliases for the providers the project configures (`custom/providers/`).
    models: IndexMap<String, weft_core::ir::ModelDef>,
}

impl Compiler<'_> {
    fn is_block(&self, id: &str) -> bool {
        self.raw_blocks.contains_key(id)
    }

    /// An error unless `id` names a block; `what` says what refers to it.
    fn block_ref(&mut self, id: &str, ptr: &str, what: &str) -> bool {
        if self.is_block(id) {
            return true;
        }
        let d = Diagnostic::error(ptr, format!("{what} `{id}` is not a block"));
        let known: Vec<String> = self.ids.clone();
        self.diags.push(d.hint_closest(
            id,
            known.iter().map(String::as_str),
            format!("the blocks: {}", known.join(", ")),
        ));
        false
    }

    fn flow(&mut self, file: &SoulsDoc) -> Option<Flow> {
        for id in &self.ids.clone() {
            if id.is_empty()
                || !id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
            {
                self.diags.push(
                    Diagnostic::error(format!("/blocks/{id}"), format!("the block id `{id}` is not a name"))
                        .hint("block ids are letters, digits, `_` and `-` (`.` separates a dispatch block from its exits)"),
                );
            }
        }
        // Loops run their inner blocks themselves.
        let mut inner: HashSet<String> = HashSet::new();
        for (id, raw) in &self.raw_blocks {
            if raw.get("type").and_then(Value::as_str) == Some("loop")
                && let Some(refs) = raw.get("inner_block_refs").and_then(Value::as_array)
            {
                inner.extend(refs.iter().filter_map(Value::as_str).map(str::to_owned));
            }
            if raw.get("type").and_then(Value::as_str) == Some("dispatch")
                && let Some(exits) = raw.get("exits").and_then(Value::as_array)
            {
                for e in exits
                    .iter()
                    .filter_map(|e| e.get("id"))
                    .filter_map(Value::as_str)
                {
                    self.dispatch_keys.push(format!("{id}.{e}"));
                }
            }
        }
        let mut edges = self.edges(file);
        let routed_ids = reached(&file.workflow.entry, &edges);
        // Routes out of a block that runs only inside its loop (a gate's `pass`/`fail`
        // there) are the loop's business: the loop decides by the exit.
        edges.retain(|e| !inner.contains(&e.from) || routed_ids.contains(e.from.as_str()));
        let mut nodes = IndexMap::new();
        for (id, raw) in self.raw_blocks.clone() {
            let routed = routed_ids.contains(id.as_str());
            if inner.contains(&id) && !routed {
                continue;
            }
            if let Some(b) = self.block(&id, &raw, &format!("/blocks/{id}")) {
                nodes.insert(id, b);
            }
        }
        if !self.is_block(&file.workflow.entry) {
            self.block_ref(&file.workflow.entry.clone(), "/workflow/entry", "the entry");
            return None;
        }
        let on_error: IndexMap<String, String> = self
            .raw_blocks
            .iter()
            .filter_map(|(id, raw)| {
                raw.get("error_route")
                    .and_then(Value::as_str)
                    .map(|to| (id.clone(), to.to_owned()))
            })
            .collect();
        if !self.diags.has_errors() {
            self.check_result_reads(&edges, &on_error);
        }
        let graph = GraphSpec {
            entry: file.workflow.entry.clone(),
            nodes,
            edges,
            routing: Routing::First,
            joins: Vec::new(),
            on_error,
            max_steps: None,
            isolate: false,
            // runsight fails a block whose exit no transition handles.
            fail_unrouted: true,
        };
        // The task (or, for a child workflow, its parent's `workflow` block) may bring
        // `metadata` and `shared_memory` of its own.
        let source = if self.depth == 0 { "initial" } else { "input" };
        let mut start = Block::new(BlockKind::Transform(TransformSpec {
            output: ValueTemplate(Value::from("{{ input }}")),
            exit: None,
        }));
        for key in ["metadata", "shared_memory"] {
            start.data.set.insert(
                key.into(),
                ValueTemplate(Value::from(format!(
                    "{{{{ {source}.{key} if {source} is mapping and {source}.{key} is mapping else {{}} }}}}"
                ))),
            );
        }
        if let Some(interface) = &file.interface {
            self.interface_inputs(&mut start, interface, source);
        }
        start.policy.assert.push(weft_core::ir::Assertion {
            warn: false,
            that: weft_core::ir::Expr("initial is string or (initial is mapping and initial.instruction is string)".into()),
            message: Some("a souls workflow runs a task: give it as text (--input '\"Write a haiku\"') or as {instruction, context?}".into()),
        });
        let mut steps = vec![
            start.with_id("task"),
            Block::new(BlockKind::Graph(graph)).with_id("workflow"),
        ];
        if self.depth > 0 {
            // A child hands its parent its last output, its results and its state (an
            // interface's outputs are paths into it).
            steps.push(Block::new(BlockKind::Transform(TransformSpec {
                output: ValueTemplate(json!({
                    "output": "{{ input }}",
                    "results": "{{ state.results }}",
                    "state": "{{ state }}",
                })),
                exit: None,
            })));
        }
        let root = Block::new(BlockKind::Sequence(steps));
        let name = file
            .workflow
            .name
            .clone()
            .unwrap_or_else(|| "souls".to_owned());
        let mut flow = Flow::new(name, root);
        flow.state = Some(json!({"results": {}, "shared_memory": {}, "metadata": {}}));
        flow.flows = std::mem::take(&mut self.flows);
        flow.models = std::mem::take(&mut self.models);
        if let Some(l) = &file.limits {
            flow.budget = self.budget(&l.caps(), "/limits");
            match l.warn_at_pct {
                Some(p) if !(p > 0.0 && p <= 1.0) => self.diags.push(
                    Diagnostic::error(
                        "/limits/warn_at_pct",
                        "warn_at_pct is a fraction above 0 and at most 1",
                    )
                    .hint("warn_at_pct: 0.8 warns at 80% of each cap"),
                ),
                Some(p) => {
                    if let Some(b) = &mut flow.budget {
                        b.warn_at = Some(p);
                    }
                }
                None => {}
            }
        }
        Some(flow)
    }

    /// Errors for the reads of results that cannot have been written yet (see
    /// [`order`]).
    fn check_result_reads(&mut self, edges: &[Edge], on_error: &IndexMap<String, String>) {
        let loops: Vec<(String, Vec<String>)> = self
            .raw_blocks
            .iter()
            .filter(|(_, raw)| raw.get("type").and_then(Value::as_str) == Some("loop"))
            .map(|(id, raw)| {
                let inner = raw.get("inner_block_refs").and_then(Value::as_array);
                let refs = inner.into_iter().flatten().filter_map(Value::as_str);
                (id.clone(), refs.map(str::to_owned).collect())
            })
            .collect();
        let routes: Vec<(String, String)> = on_error
            .iter()
            .map(|(a, b)| (a.clone(), b.clone()))
            .collect();
        let order = order::Order::new(edges, &routes, &loops);
        let reads = std::mem::take(&mut self.result_reads);
        for d in order.check(&reads, |k| self.is_block(k)) {
            self.diags.push(d);
        }
    }

    /// `transitions`, `conditional_transitions` and gate shorthands as graph edges:
    /// for each block, the edges taken on an exit first, then the unconditional one.
    fn edges(&mut self, file: &SoulsDoc) -> Vec<Edge> {
        let mut on_exit = Vec::new();
        let mut plain = Vec::new();
        let mut has_plain: HashSet<String> = HashSet::new();
        let target = |to: &Option<String>| to.clone().unwrap_or_else(|| END.to_owned());
        for (i, Transition { from, to }) in file.workflow.transitions.iter().enumerate() {
            let ptr = format!("/workflow/transitions/{i}");
            self.block_ref(from, &format!("{ptr}/from"), "the transition's `from`");
            if let Some(t) = to {
                self.block_ref(t, &format!("{ptr}/to"), "the transition's `to`");
            }
            if !has_plain.insert(from.clone()) {
                self.diags.push(
                    Diagnostic::error(&ptr, format!("`{from}` has two transitions")).hint(
                        "a block goes to one next block; branch with conditional_transitions",
                    ),
                );
            }
            plain.push(edge(from, &target(to), None));
        }
        for (i, ct) in file.workflow.conditional_transitions.iter().enumerate() {
            let ptr = format!("/workflow/conditional_transitions/{i}");
            let Some(Some(from)) = ct.get("from") else {
                self.diags.push(
                    Diagnostic::error(&ptr, "a conditional transition needs `from`")
                        .hint("{from: review, approved: publish, default: revise}"),
                );
                continue;
            };
            self.block_ref(
                from,
                &format!("{ptr}/from"),
                "the conditional transition's `from`",
            );
            let declared = self.exits_of(from);
            for (handle, to) in ct.iter().filter(|(k, _)| k.as_str() != "from") {
                if let Some(t) = to {
                    self.block_ref(
                        t,
                        &weft_core::validate::child_pointer(&ptr, handle),
                        "the target",
                    );
                }
                if handle == "default" {
                    plain.push(edge(from, &target(to), None));
                    continue;
                }
                if let Some(known) = &declared
                    && !known.contains(handle)
                {
                    let d = Diagnostic::error(
                        weft_core::validate::child_pointer(&ptr, handle),
                        format!("`{from}` has no exit `{handle}`"),
                    );
                    self.diags.push(d.hint_closest(
                        handle,
                        known.iter().map(String::as_str),
                        format!("its exits: {}", known.join(", ")),
                    ));
                }
                on_exit.push(edge(from, &target(to), Some(handle)));
            }
        }
        for (id, raw) in self.raw_blocks.clone() {
            if raw.get("type").and_then(Value::as_str) != Some("gate") {
                continue;
            }
            for handle in ["pass", "fail"] {
                if let Some(to) = raw.get(handle).and_then(Value::as_str) {
                    self.block_ref(
                        to,
                        &format!("/blocks/{id}/{handle}"),
                        &format!("the gate's `{handle}`"),
                    );
                    on_exit.push(edge(&id, to, Some(handle)));
                }
            }
        }
        for (id, raw) in self.raw_blocks.clone() {
            for r in raw
                .get("routes")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let case = r
                    .get("case")
                    .or_else(|| r.get("case_id"))
                    .and_then(Value::as_str);
                if let (Some(case), Some(goto)) = (case, r.get("goto").and_then(Value::as_str)) {
                    on_exit.push(edge(&id, goto, Some(case)));
                }
            }
        }
        self.depends_edges(&mut plain);
        on_exit.extend(plain);
        on_exit
    }

    /// `depends: X` (or a list) is runsight's shorthand for the transition `X -> block`:
    /// a workflow may chain its blocks with `depends` alone. A block still goes to one
    /// next block, so a `depends` on a block that already transitions elsewhere is an
    /// error, as in runsight; one that repeats a transition adds nothing.
    fn depends_edges(&mut self, plain: &mut Vec<Edge>) {
        for (id, raw) in self.raw_blocks.clone() {
            let deps: Vec<&str> = match raw.get("depends") {
                Some(Value::String(d)) => vec![d.as_str()],
                Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            for (i, dep) in deps.into_iter().enumerate() {
                let ptr = match raw.get("depends") {
                    Some(Value::Array(_)) => format!("/blocks/{id}/depends/{i}"),
                    _ => format!("/blocks/{id}/depends"),
                };
                match plain.iter().find(|e| e.from == dep && e.when.is_none()) {
                    Some(e) if e.to == id => {}
                    Some(e) => {
                        let d = Diagnostic::error(
                            ptr,
                            format!(
                                "`{id}` depends on `{dep}`, which already goes to `{}`",
                                e.to
                            ),
                        );
                        self.diags.push(d.hint(format!(
                            "`depends: {dep}` means the transition `{dep} -> {id}`, and a block goes to one next block; drop one of the two"
                        )));
                    }
                    None => plain.push(edge(dep, &id, None)),
                }
            }
        }
    }

    /// The exits a block declares (a gate's are `pass` and `fail`; cases and exit
    /// conditions name theirs), if it declares any.
    fn exits_of(&self, id: &str) -> Option<Vec<String>> {
        let raw = self.raw_blocks.get(id)?;
        let named = |list: &str, key: &str| -> Vec<String> {
            raw.get(list)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|e| e.get(key).and_then(Value::as_str).map(str::to_owned))
                .collect()
        };
        let mut all = named("exits", "id");
        all.extend(named("output_conditions", "case_id"));
        all.extend(named("routes", "case"));
        all.extend(named("routes", "case_id"));
        all.extend(named("exit_conditions", "exit_handle"));
        let declared = (!all.is_empty()).then_some(all);
        match raw.get("type").and_then(Value::as_str) {
            Some("gate") => Some(declared.unwrap_or_else(|| vec!["pass".into(), "fail".into()])),
            _ => declared,
        }
    }

    /// The soul `id`: inline, else `souls/<id>.yaml` beside the file.
    fn soul(&mut self, id: &str, ptr: &str) -> Option<ResolvedSoul> {
        if let Some(s) = self.souls.get(id) {
            return s.clone();
        }
        let resolved = self.load_soul(id, ptr);
        self.souls.insert(id.to_owned(), resolved.clone());
        resolved
    }

    fn load_soul(&mut self, id: &str, ptr: &str) -> Option<ResolvedSoul> {
        // An inline soul's own mistakes point into `souls:`; a file soul's, at the
        // reference that loaded it.
        let mut at = ptr.to_owned();
        let soul: Soul = match self.inline_souls.get(id).cloned() {
            Some(v) => {
                at = weft_core::validate::child_pointer("/souls", id);
                self.diags.parse(&v, &at)?
            }
            None if !is_file_id(id) => {
                self.diags.push(
                    Diagnostic::error(
                        ptr,
                        format!(
                            "no soul `{id}` under `souls:`, and `{id}` cannot name a file in souls/"
                        ),
                    )
                    .hint("a soul's id is letters, digits, `_`, `-` and `.` (no `/` or `..`)"),
                );
                return None;
            }
            None => {
                let places = soul_files(self.base(), id);
                let Some((path, text)) = project::first_readable(&places) else {
                    let known: Vec<String> = self.inline_souls.keys().cloned().collect();
                    let d = Diagnostic::error(
                        ptr,
                        format!(
                            "no soul `{id}`: it is not under `souls:`, nor in {}",
                            project::looked_in(&places)
                        ),
                    );
                    self.diags.push(d.hint_closest(
                        id,
                        known.iter().map(String::as_str),
                        "define it under `souls:`, in souls/<id>.yaml beside the workflow, or in the project's custom/souls/<id>.yaml",
                    ));
                    return None;
                };
                self.read_project_file::<Soul>(
                    &path,
                    &text,
                    &format!("the soul file for `{id}`"),
                    ptr,
                )?
            }
        };
        self.resolve(soul, id, &at)
    }

    /// A soul written inline where it is used (an assertion's `judge_soul`).
    fn inline_soul(&mut self, v: &Value, ptr: &str) -> Option<ResolvedSoul> {
        let soul: Soul = self.diags.parse(v, ptr)?;
        let id = soul.id.clone().unwrap_or_else(|| "judge".to_owned());
        self.resolve(soul, &id, ptr)
    }

    /// A parsed soul with the file's `config` defaults applied.
    fn resolve(&mut self, soul: Soul, id: &str, ptr: &str) -> Option<ResolvedSoul> {
        let listed = soul.tools.as_deref().unwrap_or_default();
        let others: Vec<String> = listed
            .iter()
            .filter(|t| *t != "delegate")
            .cloned()
            .collect();
        let mut delegate = false;
        if let Some(i) = listed.iter().position(|t| t == "delegate") {
            delegate = self.delegate_declared;
            if !delegate {
                self.diags.push(
                    Diagnostic::warning(
                        format!("{ptr}/tools/{i}"),
                        "the soul's tool `delegate` is not declared under the workflow's `tools:`, so it is not offered",
                    )
                    .hint("declare it: tools: [delegate]"),
                );
            }
        }
        let tools = self.soul_tools(&others, ptr);
        let required_tools = soul.required_tool_calls.clone().unwrap_or_default();
        for (i, t) in required_tools.iter().enumerate() {
            if !soul.tools.iter().flatten().any(|listed| listed == t) {
                self.diags.push(
                    Diagnostic::error(
                        format!("{ptr}/required_tool_calls/{i}"),
                        format!("the soul `{id}` must call `{t}`, which is not one of its tools"),
                    )
                    .hint("list it under the soul's `tools` too"),
                );
            }
        }
        if soul.max_tool_iterations == Some(0) {
            self.diags.push(Diagnostic::error(
                format!("{ptr}/max_tool_iterations"),
                "max_tool_iterations must be at least 1",
            ));
        }
        if let Some(sid) = &soul.id
            && sid != id
        {
            self.diags.push(
                Diagnostic::error(ptr, format!("the soul `{id}` says its id is `{sid}`"))
                    .hint("a soul's `id` is the name it is referred to by"),
            );
        }
        let provider = soul
            .provider
            .clone()
            .or_else(|| self.config.provider.clone());
        let model = soul
            .model_name
            .clone()
            .or_else(|| self.config.model_name.clone());
        let model = match (provider, model) {
            (Some(p), Some(m)) if !m.contains('/') => Some(self.provider_model(&p, &m, ptr)),
            (_, m) => m,
        };
        Some(ResolvedSoul {
            system_prompt: soul.system_prompt,
            model,
            temperature: soul.temperature.or(self.config.temperature),
            max_tokens: soul.max_tokens.or(self.config.max_tokens),
            tools,
            required_tools,
            max_tool_iterations: soul.max_tool_iterations,
            delegate,
        })
    }
}

/// Whether `id` can name a file beside the workflow: no directories, no way out.
fn is_file_id(id: &str) -> bool {
    !id.is_empty()
        && !id.contains("..")
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// The blocks the workflow's routes reach from `entry`. A loop's inner block is a node
/// of the workflow only when reached so: otherwise it runs only inside its loop.
fn reached(entry: &str, edges: &[Edge]) -> HashSet<String> {
    // Each block's edges, found once: scanning every edge at every block made a
    // 100,000-block workflow take minutes to load.
    let mut next: HashMap<&str, Vec<&str>> = HashMap::new();
    for e in edges {
        next.entry(e.from.as_str()).or_default().push(e.to.as_str());
    }
    let mut seen: HashSet<String> = HashSet::from([entry.to_owned()]);
    let mut todo = vec![entry];
    while let Some(at) = todo.pop() {
        for &to in next.get(at).into_iter().flatten() {
            if seen.insert(to.to_owned()) {
                todo.push(to);
            }
        }
    }
    seen
}

fn edge(from: &str, to: &str, exit: Option<&str>) -> Edge {
    Edge {
        from: from.to_owned(),
        to: to.to_owned(),
        when: None,
        exit: exit.map(str::to_owned),
        parallel: false,
        origin: None,
    }
}

/// Where a soul `id` that is not inline may live: `souls/<id>.yaml` beside the workflow,
/// then the runsight project's library, `custom/souls/<id>.yaml`.
fn soul_files(base: Option<&Path>, id: &str) -> Vec<std::path::PathBuf> {
    let mut places: Vec<_> = base
        .map(|b| b.join("souls").join(format!("{id}.yaml")))
        .into_iter()
        .collect();
    places.extend(project::places(base, "souls", id));
    places
}
