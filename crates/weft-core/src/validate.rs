//! Static validation of a flow: references, bounds, duplicate ids, sub-flow cycles.
//!
//! Every diagnostic carries a document pointer (`/root/sequence/2/llm`) in the native
//! format's shape; loaders map pointers to file positions, and blocks compiled from other
//! dialects carry their own `origin`. Expression syntax is checked by the engine when it
//! prepares a flow, through [`expression_sites`].

use crate::error::Diagnostic;
use crate::ir::*;
use crate::value::Value;
use std::collections::{HashMap, HashSet};

/// Joins a pointer and a key, escaping as JSON Pointer does.
pub fn child_pointer(base: &str, key: &str) -> String {
    // One allocation: a document's loading makes a pointer for every value it holds, and
    // nearly no key needs escaping.
    let mut pointer = String::with_capacity(base.len() + 1 + key.len());
    pointer.push_str(base);
    pointer.push('/');
    if key.contains(['~', '/']) {
        pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
    } else {
        pointer.push_str(key);
    }
    pointer
}

/// Calls `f` for every block of `flow` and its sub-flows, with the block's pointer.
pub fn walk_blocks<'a>(flow: &'a Flow, f: &mut dyn FnMut(&str, &'a Block)) {
    walk_flow(flow, "", f);
}

/// Syntax errors in the code blocks of `flow` (and its sub-flows) that `runner` can find
/// without running them (Lua's, for instance), each at its block's `code/source`.
pub fn check_code(flow: &Flow, runner: &dyn crate::ports::CodeRunner) -> Vec<Diagnostic> {
    let mut diags = Vec::new();
    walk_blocks(flow, &mut |ptr, b| {
        if let crate::ir::BlockKind::Code(spec) = &b.kind
            && let Err(e) = runner.check(&spec.language, &spec.source)
        {
            diags.push(
                Diagnostic::error(
                    child_pointer(&child_pointer(ptr, "code"), "source"),
                    format!("the {} code does not compile: {}", spec.language, e.message),
                )
                .hint("fix the code's syntax; `weft run` would fail at this block"),
            );
        }
    });
    diags
}

/// Where the block or graph edge that holds IR `pointer` was written: the origin of
/// the innermost one on the pointer's path that has one. Dialects whose files do not
/// mirror the IR locate diagnostics this way.
pub fn origin_at(flow: &Flow, pointer: &str) -> Option<crate::Loc> {
    let on_path = |ptr: &str| {
        pointer == ptr
            || (pointer.starts_with(ptr) && pointer.as_bytes().get(ptr.len()) == Some(&b'/'))
    };
    let mut best: Option<(usize, crate::Loc)> = None;
    let mut consider = |ptr: &str, origin: Option<crate::Loc>| {
        if on_path(ptr)
            && let Some(loc) = origin
            && best.is_none_or(|(len, _)| ptr.len() > len)
        {
            best = Some((ptr.len(), loc));
        }
    };
    walk_blocks(flow, &mut |ptr, b| {
        consider(ptr, b.origin);
        if let BlockKind::Graph(g) = &b.kind {
            for (i, e) in g.edges.iter().enumerate() {
                consider(&format!("{ptr}/graph/edges/{i}"), e.origin);
            }
        }
    });
    best.map(|(_, loc)| loc)
}

fn walk_flow<'a>(flow: &'a Flow, base: &str, f: &mut dyn FnMut(&str, &'a Block)) {
    walk_block(&flow.root, &child_pointer(base, "root"), f);
    for (name, sub) in &flow.flows {
        walk_flow(sub, &child_pointer(&child_pointer(base, "flows"), name), f);
    }
}

fn walk_block<'a>(b: &'a Block, ptr: &str, f: &mut dyn FnMut(&str, &'a Block)) {
    f(ptr, b);
    for (seg, child) in child_pointers(b) {
        walk_block(child, &format!("{ptr}{seg}"), f);
    }
}

/// Direct children of `b` with the pointer suffix that reaches each from `b`.
fn child_pointers(b: &Block) -> Vec<(String, &Block)> {
    let mut out = Vec::new();
    let esc = |k: &str| k.replace('~', "~0").replace('/', "~1");
    match &b.kind {
        BlockKind::Sequence(steps) => {
            for (i, s) in steps.iter().enumerate() {
                out.push((format!("/sequence/{i}"), s));
            }
        }
        BlockKind::Parallel(p) => {
            for (n, s) in &p.branches {
                out.push((format!("/parallel/branches/{}", esc(n)), s));
            }
        }
        BlockKind::Map(m) => out.push(("/map/body".into(), &*m.body)),
        BlockKind::Loop(l) => out.push(("/loop/body".into(), &*l.body)),
        BlockKind::Branch(br) => {
            for (i, c) in br.cases.iter().enumerate() {
                out.push((format!("/branch/cases/{i}/then"), &c.then));
            }
            if let Some(o) = &br.otherwise {
                out.push(("/branch/otherwise".into(), &**o));
            }
        }
        BlockKind::Graph(g) => {
            for (n, s) in &g.nodes {
                out.push((format!("/graph/nodes/{}", esc(n)), s));
            }
        }
        _ => {}
    }
    for (i, r) in b.policy.rescue.iter().enumerate() {
        out.push((format!("/rescue/{i}/then"), &r.then));
    }
    out
}

/// How a string in the IR is evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SiteKind {
    /// Renders to text.
    Template,
    /// Evaluates to a value.
    Expr,
}

/// One template or expression in a flow, with its pointer.
#[derive(Debug, Clone)]
pub struct ExprSite<'a> {
    /// Where it is.
    pub pointer: String,
    /// Its source.
    pub source: &'a str,
    /// How it is evaluated.
    pub kind: SiteKind,
}

/// Every template and expression in `flow` (and its sub-flows).
pub fn expression_sites(flow: &Flow) -> Vec<ExprSite<'_>> {
    let mut out = Vec::new();
    walk_blocks(flow, &mut |ptr, b| block_sites(ptr, b, &mut out));
    out
}

/// Every template and expression in `block` and the blocks inside it (not the sub-flows
/// it calls), with pointers from the block.
pub fn block_expression_sites(block: &Block) -> Vec<ExprSite<'_>> {
    let mut out = Vec::new();
    walk_block(block, "", &mut |ptr, b| block_sites(ptr, b, &mut out));
    out
}

fn push_value_sites<'a>(ptr: String, v: &'a Value, out: &mut Vec<ExprSite<'a>>) {
    match v {
        Value::String(s) => out.push(ExprSite {
            pointer: ptr,
            source: s,
            kind: SiteKind::Template,
        }),
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                push_value_sites(format!("{ptr}/{i}"), x, out);
            }
        }
        Value::Object(m) => {
            for (k, x) in m {
                push_value_sites(child_pointer(&ptr, k), x, out);
            }
        }
        _ => {}
    }
}

fn block_sites<'a>(ptr: &str, b: &'a Block, out: &mut Vec<ExprSite<'a>>) {
    let tmpl = |p: String, t: &'a Template| ExprSite {
        pointer: p,
        source: &t.0,
        kind: SiteKind::Template,
    };
    let expr = |p: String, e: &'a Expr| ExprSite {
        pointer: p,
        source: &e.0,
        kind: SiteKind::Expr,
    };
    if let Some(i) = &b.data.input {
        push_value_sites(format!("{ptr}/input"), &i.0, out);
    }
    for (k, v) in &b.data.set {
        push_value_sites(child_pointer(&format!("{ptr}/set"), k), &v.0, out);
    }
    for (k, v) in &b.data.bind {
        push_value_sites(child_pointer(&format!("{ptr}/bind"), k), &v.0, out);
    }
    if let Some(e) = &b.data.emit {
        push_value_sites(format!("{ptr}/emit"), &e.0, out);
    }
    if let Some(e) = &b.data.announce {
        push_value_sites(format!("{ptr}/announce"), &e.0, out);
    }
    for (i, a) in b.policy.assert.iter().enumerate() {
        out.push(expr(format!("{ptr}/assert/{i}/that"), &a.that));
    }
    match &b.kind {
        BlockKind::Llm(l) => {
            // A model id with a template in it is chosen when the block runs.
            if let Some(m) = l.model.as_ref().filter(|m| m.contains("{{")) {
                out.push(ExprSite {
                    pointer: format!("{ptr}/llm/model"),
                    source: m,
                    kind: SiteKind::Template,
                });
            }
            if let Some(s) = &l.system {
                out.push(tmpl(format!("{ptr}/llm/system"), s));
            }
            if let Some(s) = &l.prompt {
                out.push(tmpl(format!("{ptr}/llm/prompt"), s));
            }
            for (i, m) in l.messages.iter().enumerate() {
                out.push(tmpl(format!("{ptr}/llm/messages/{i}/content"), &m.content));
            }
        }
        BlockKind::Embed(e) => {
            if let Some(m) = e.model.as_ref().filter(|m| m.contains("{{")) {
                out.push(ExprSite {
                    pointer: format!("{ptr}/embed/model"),
                    source: m,
                    kind: SiteKind::Template,
                });
            }
            push_value_sites(format!("{ptr}/embed/input"), &e.input.0, out);
        }
        BlockKind::Code(c) => {
            if let Some(a) = &c.args {
                push_value_sites(format!("{ptr}/code/args"), &a.0, out);
            }
        }
        BlockKind::Action(a) => {
            if let Some(p) = &a.params {
                push_value_sites(format!("{ptr}/action/with"), &p.0, out);
            }
        }
        BlockKind::Approval(a) => {
            if let Some(p) = &a.prompt {
                out.push(tmpl(format!("{ptr}/approval/prompt"), p));
            }
        }
        BlockKind::Wait(w) => {
            if let Some(d) = &w.duration {
                out.push(tmpl(format!("{ptr}/wait/for"), d));
            }
            if let Some(u) = &w.until {
                out.push(tmpl(format!("{ptr}/wait/until"), u));
            }
            if let Some(p) = w.or_approval.as_ref().and_then(|a| a.prompt.as_ref()) {
                out.push(tmpl(format!("{ptr}/wait/or_approval/prompt"), p));
            }
        }
        BlockKind::Transform(t) => {
            push_value_sites(format!("{ptr}/transform/output"), &t.output.0, out);
            if let Some(e) = &t.exit {
                out.push(tmpl(format!("{ptr}/transform/exit"), e));
            }
        }
        BlockKind::Map(m) => {
            push_value_sites(format!("{ptr}/map/items"), &m.items.0, out);
            if let Some(i) = &m.item_input {
                push_value_sites(format!("{ptr}/map/item_input"), &i.0, out);
            }
        }
        BlockKind::Loop(l) => {
            if let Some(w) = &l.while_ {
                out.push(expr(format!("{ptr}/loop/while"), w));
            }
            if let Some(u) = &l.until {
                out.push(expr(format!("{ptr}/loop/until"), u));
            }
        }
        BlockKind::Branch(br) => {
            for (i, c) in br.cases.iter().enumerate() {
                out.push(expr(format!("{ptr}/branch/cases/{i}/when"), &c.when));
            }
        }
        BlockKind::Graph(g) => {
            for (i, e) in g.edges.iter().enumerate() {
                if let Some(w) = &e.when {
                    out.push(expr(format!("{ptr}/graph/edges/{i}/when"), w));
                }
            }
        }
        BlockKind::Handler(_)
        | BlockKind::Passthrough
        | BlockKind::Sequence(_)
        | BlockKind::Parallel(_)
        | BlockKind::SubFlow(_) => {}
    }
}

/// Checks `flow` and returns every problem found (errors and warnings).
pub fn validate(flow: &Flow) -> Vec<Diagnostic> {
    let mut diags = Vec::new();
    check_flow(flow, "", &[], &mut diags);
    check_subflow_cycles(flow, &mut diags);
    diags
}

/// Checks `flow` at `base`; `inherited` names the sub-flows of the flows around it, which
/// its blocks may call too (a sub-flow calls its siblings).
fn check_flow<'a>(flow: &'a Flow, base: &str, inherited: &[&'a str], diags: &mut Vec<Diagnostic>) {
    if flow.name.trim().is_empty() {
        diags.push(
            Diagnostic::error(child_pointer(base, "name"), "the flow's name is empty")
                .hint("give the flow a short name, e.g. `name: summarize-articles`"),
        );
    }
    if flow.limits.max_graph_steps == 0 {
        diags.push(Diagnostic::error(
            format!("{base}/limits/max_graph_steps"),
            "max_graph_steps must be at least 1",
        ));
    }
    if let Some(b) = &flow.budget {
        check_budget(b, &child_pointer(base, "budget"), diags);
    }
    if let Some(state) = flow
        .state
        .as_ref()
        .filter(|s| !s.is_object() && !s.is_null())
    {
        diags.push(
            Diagnostic::error(
                child_pointer(base, "state"),
                format!(
                    "the run state is an object of keys, not {}",
                    crate::value::kind_of(state)
                ),
            )
            .hint("state: {count: 0, items: []}"),
        );
    }
    let mut ids: HashMap<&'a str, String> = HashMap::new();
    let mut subflows: Vec<&str> = flow.flows.keys().map(String::as_str).collect();
    subflows.extend(inherited.iter().filter(|n| !flow.flows.contains_key(**n)));
    let root_ptr = child_pointer(base, "root");
    let mut visit = |ptr: &str, b: &'a Block| {
        if let Some(id) = &b.id {
            if id.trim().is_empty() {
                diags.push(Diagnostic::error(
                    format!("{ptr}/id"),
                    "a block id is empty",
                ));
            } else {
                // A block from a file is named by its line there, not by where the
                // file's compiler put it in the IR.
                let here = match b.origin {
                    Some(loc) => format!("line {}:{}", loc.line, loc.col),
                    None => ptr.to_owned(),
                };
                if let Some(first) = ids.insert(id, here) {
                    diags.push(
                        Diagnostic::error(format!("{ptr}/id"), format!("duplicate block id `{id}`"))
                            .hint(format!("ids key the journal and must be unique in a flow; `{id}` is also used at {first}")),
                    );
                    ids.insert(id, first);
                }
            }
        }
        check_block(b, ptr, &subflows, diags);
    };
    walk_block(&flow.root, &root_ptr, &mut visit);
    for (name, sub) in &flow.flows {
        check_flow(
            sub,
            &child_pointer(&child_pointer(base, "flows"), name),
            &subflows,
            diags,
        );
    }
}

fn check_budget(b: &Budget, ptr: &str, diags: &mut Vec<Diagnostic>) {
    if b.warn_at.is_some_and(|w| !(w > 0.0 && w <= 1.0)) {
        diags.push(
            Diagnostic::error(
                format!("{ptr}/warn_at"),
                "warn_at is a fraction above 0 and at most 1",
            )
            .hint("warn_at: 0.8 warns at 80% of each limit"),
        );
    }
    if b.tokens == Some(0)
        || b.wall_ms == Some(0)
        || b.cost_usd.is_some_and(|c| c <= 0.0 || !c.is_finite())
    {
        diags.push(
            Diagnostic::error(ptr, "a budget limit must be positive")
                .hint("remove the limit to leave it unbounded"),
        );
    }
}

fn unknown_ref(ptr: String, what: &str, name: &str, known: &[&str]) -> Diagnostic {
    let otherwise = if known.is_empty() {
        format!("no {what} is defined")
    } else {
        format!("defined: {}", known.join(", "))
    };
    Diagnostic::error(ptr, format!("unknown {what} `{name}`")).hint_closest(
        name,
        known.iter().copied(),
        otherwise,
    )
}

fn check_concurrency(mc: Option<u32>, ptr: String, diags: &mut Vec<Diagnostic>) {
    if mc == Some(0) {
        diags.push(
            Diagnostic::error(ptr, "max_concurrency must be at least 1")
                .hint("omit it to run every branch at once"),
        );
    }
}

fn check_block(b: &Block, ptr: &str, subflows: &[&str], diags: &mut Vec<Diagnostic>) {
    if let Some(r) = &b.policy.retry {
        if r.attempts == 0 {
            diags.push(
                Diagnostic::error(
                    format!("{ptr}/retry/attempts"),
                    "retry attempts must be at least 1",
                )
                .hint("attempts counts the first try too: `attempts: 3` tries up to three times"),
            );
        }
        if !r.multiplier.is_finite() || r.multiplier < 1.0 {
            diags.push(Diagnostic::error(
                format!("{ptr}/retry/multiplier"),
                "the backoff multiplier must be a number of at least 1",
            ));
        }
    }
    if b.policy.on_unknown_outcome.is_some()
        && !matches!(
            b.kind,
            BlockKind::Llm(_) | BlockKind::Embed(_) | BlockKind::Handler(_) | BlockKind::Action(_)
        )
    {
        diags.push(
            Diagnostic::error(
                format!("{ptr}/on_unknown_outcome"),
                "on_unknown_outcome applies to a step that reaches outside the run: an llm, embed, handler or action block",
            )
            .hint("put it on the block that calls the service; other blocks are run again safely"),
        );
    }
    if b.policy.timeout_ms == Some(0) {
        diags.push(Diagnostic::error(
            format!("{ptr}/timeout_ms"),
            "timeout_ms must be at least 1",
        ));
    }
    if let Some(bu) = &b.policy.budget {
        check_budget(bu, &format!("{ptr}/budget"), diags);
    }
    if let Some(st) = &b.policy.stall {
        for (name, ms) in [
            ("first_token_ms", st.first_token_ms),
            ("token_gap_ms", st.token_gap_ms),
            ("tool_ms", st.tool_ms),
        ] {
            if ms == Some(0) {
                diags.push(
                    Diagnostic::error(
                        format!("{ptr}/stall/{name}"),
                        format!("{name} must be at least 1"),
                    )
                    .hint("omit it to leave that phase unwatched"),
                );
            }
        }
    }
    for key in b.data.set.keys() {
        if crate::value::split_path(key).is_empty() {
            diags.push(
                Diagnostic::error(format!("{ptr}/set"), format!("`{key}` is not a state path"))
                    .hint("write a dotted path such as `results.draft`"),
            );
        }
    }
    match &b.kind {
        BlockKind::Llm(l) => {
            if l.prompt.is_none() && l.messages.is_empty() {
                diags.push(
                    Diagnostic::error(
                        format!("{ptr}/llm"),
                        "an llm block needs a `prompt` or `messages`",
                    )
                    .hint("add `prompt: \"{{ input }}\"` to send the block's input"),
                );
            }
            for (i, m) in l.messages.iter().enumerate() {
                if !["system", "user", "assistant", "tool"].contains(&m.role.as_str()) {
                    diags.push(
                        Diagnostic::error(
                            format!("{ptr}/llm/messages/{i}/role"),
                            format!("unknown message role `{}`", m.role),
                        )
                        .hint("use system, user, assistant or tool"),
                    );
                }
            }
            for (i, t) in l.tools.iter().enumerate() {
                if !subflows.contains(&t.flow.as_str()) {
                    diags.push(unknown_ref(
                        format!("{ptr}/llm/tools/{i}/flow"),
                        "sub-flow",
                        &t.flow,
                        subflows,
                    ));
                }
                let safe = crate::ir::provider_tool_name(&t.name);
                if safe != t.name {
                    // A warning: the scripted and local models take any name.
                    diags.push(
                        Diagnostic::warning(
                            format!("{ptr}/llm/tools/{i}/name"),
                            format!(
                                "the tool name `{}` is not one OpenAI, Anthropic or Gemini accept (letters, digits, `_` and `-`, at most {} characters): they refuse the call",
                                t.name,
                                crate::ir::MAX_TOOL_NAME
                            ),
                        )
                        .hint(format!("name it `{safe}`")),
                    );
                }
            }
            if l.max_tool_rounds == 0 {
                diags.push(Diagnostic::error(
                    format!("{ptr}/llm/max_tool_rounds"),
                    "max_tool_rounds must be at least 1",
                ));
            }
            if let Some(choice) = &l.tool_choice
                && choice != "required"
                && !l.tools.iter().any(|t| &t.name == choice)
            {
                let d = Diagnostic::error(
                    format!("{ptr}/llm/tool_choice"),
                    format!(
                        "tool_choice `{choice}` is neither `required` nor a tool of this block"
                    ),
                );
                diags.push(d.hint_closest(
                    choice,
                    l.tools.iter().map(|t| t.name.as_str()).chain(["required"]),
                    "tool_choice: required, or the name of one of the block's tools",
                ));
            }
            for (i, t) in l.provider_tools.iter().enumerate() {
                if !t.is_object() {
                    diags.push(
                        Diagnostic::error(
                            format!("{ptr}/llm/provider_tools/{i}"),
                            "a provider tool is an object in the provider's own tool format",
                        )
                        .hint("for example {type: code_execution_20250522, name: code_execution} for Anthropic"),
                    );
                }
            }
            for (i, name) in l.required_tools.iter().enumerate() {
                if !l.tools.iter().any(|t| &t.name == name) {
                    let d = Diagnostic::error(
                        format!("{ptr}/llm/required_tools/{i}"),
                        format!("the required tool `{name}` is not a tool of this block"),
                    );
                    diags.push(d.hint_closest(
                        name,
                        l.tools.iter().map(|t| t.name.as_str()),
                        "list it under the block's `tools` too",
                    ));
                }
            }
            if l.required_tools.len() > l.max_tool_rounds as usize {
                diags.push(
                    Diagnostic::error(
                        format!("{ptr}/llm/required_tools"),
                        format!(
                            "{} required tools cannot all be called in max_tool_rounds ({})",
                            l.required_tools.len(),
                            l.max_tool_rounds
                        ),
                    )
                    .hint("each required tool takes a turn of its own: raise max_tool_rounds"),
                );
            }
            if let Some(s) = &l.output_schema
                && !s.is_object()
                && !s.is_boolean()
            {
                diags.push(Diagnostic::error(
                    format!("{ptr}/llm/output_schema"),
                    "output_schema must be a JSON Schema object",
                ));
            }
        }
        BlockKind::Embed(e) => {
            let texts = match &e.input.0 {
                Value::String(_) => true,
                Value::Array(items) => !items.is_empty() && items.iter().all(Value::is_string),
                _ => false,
            };
            if !texts {
                diags.push(
                    Diagnostic::error(
                        format!("{ptr}/embed/input"),
                        "an embed block's `input` is a text or a non-empty list of texts",
                    )
                    .hint("input: \"{{ state.question }}\" (a template may also render to a list of texts)"),
                );
            }
            if e.dimensions == Some(0) {
                diags.push(Diagnostic::error(
                    format!("{ptr}/embed/dimensions"),
                    "dimensions must be at least 1",
                ));
            }
        }
        BlockKind::Code(c) => {
            if c.language.trim().is_empty() {
                diags.push(
                    Diagnostic::error(
                        format!("{ptr}/code/language"),
                        "the code block's language is empty",
                    )
                    .hint("python, lua or prolog"),
                );
            }
            if c.limits.time_ms == 0
                || c.limits.memory_bytes == 0
                || c.limits.output_bytes == 0
                || c.limits.max_depth == 0
            {
                diags.push(Diagnostic::error(
                    format!("{ptr}/code/limits"),
                    "code limits must be positive",
                ));
            }
        }
        BlockKind::Handler(h) => {
            if h.name.trim().is_empty() {
                diags.push(Diagnostic::error(
                    format!("{ptr}/handler/name"),
                    "the handler's name is empty",
                ));
            }
        }
        BlockKind::Action(a) => {
            if a.uses.trim().is_empty() {
                diags.push(Diagnostic::error(
                    format!("{ptr}/action/uses"),
                    "the action's name is empty",
                ));
            }
        }
        BlockKind::Approval(a) => {
            if a.options.is_empty() {
                diags.push(
                    Diagnostic::error(
                        format!("{ptr}/approval/options"),
                        "an approval needs at least one option",
                    )
                    .hint("the default is [approve, reject]"),
                );
            }
        }
        BlockKind::Wait(w) => check_wait(w, ptr, diags),
        BlockKind::Passthrough | BlockKind::Transform(_) => {}
        BlockKind::Sequence(steps) => {
            if steps.is_empty() {
                diags.push(Diagnostic::warning(
                    format!("{ptr}/sequence"),
                    "empty sequence: it passes its input through",
                ));
            }
        }
        BlockKind::Parallel(p) => {
            if p.branches.is_empty() {
                diags.push(Diagnostic::error(
                    format!("{ptr}/parallel/branches"),
                    "a parallel block needs at least one branch",
                ));
            }
            check_concurrency(
                p.max_concurrency,
                format!("{ptr}/parallel/max_concurrency"),
                diags,
            );
        }
        BlockKind::Map(m) => {
            check_concurrency(
                m.max_concurrency,
                format!("{ptr}/map/max_concurrency"),
                diags,
            );
            if m.item_var == m.index_var {
                diags.push(Diagnostic::error(
                    format!("{ptr}/map/index_var"),
                    "item_var and index_var must differ",
                ));
            }
            if !m.items.0.is_string() && !m.items.0.is_array() {
                diags.push(
                    Diagnostic::error(
                        format!("{ptr}/map/items"),
                        "map items must be a list, or a template that yields one",
                    )
                    .hint("e.g. `items: \"{{ input.urls }}\"`"),
                );
            }
        }
        BlockKind::Loop(l) => {
            if l.max_iterations == 0 {
                diags.push(
                    Diagnostic::error(
                        format!("{ptr}/loop/max_iterations"),
                        "max_iterations must be at least 1",
                    )
                    .hint("loops are always bounded; pick the most rounds you can afford"),
                );
            }
        }
        BlockKind::Branch(br) => {
            if br.cases.is_empty() {
                diags.push(Diagnostic::error(
                    format!("{ptr}/branch/cases"),
                    "a branch needs at least one case",
                ));
            }
        }
        BlockKind::Graph(g) => check_graph(g, ptr, diags),
        BlockKind::SubFlow(s) => {
            if !subflows.contains(&s.flow.as_str()) {
                diags.push(unknown_ref(
                    format!("{ptr}/subflow/flow"),
                    "sub-flow",
                    &s.flow,
                    subflows,
                ));
            }
        }
    }
}

/// A `wait` names exactly one of `for` and `until`, each a duration or a time when it
/// is not a template, and an `or_approval` with options.
fn check_wait(w: &WaitSpec, ptr: &str, diags: &mut Vec<Diagnostic>) {
    fn literal(t: &Template) -> Option<&str> {
        (!t.0.contains("{{") && !t.0.contains("{%")).then_some(t.0.as_str())
    }
    match (&w.duration, &w.until) {
        (Some(_), Some(_)) | (None, None) => diags.push(
            Diagnostic::error(
                format!("{ptr}/wait"),
                "a wait names exactly one of `for` (a duration) and `until` (a time)",
            )
            .hint("wait: {for: 2h} or wait: {until: \"2026-12-01T09:00:00+01:00\"}"),
        ),
        (Some(d), None) => {
            if let Some(Err(e)) = literal(d).map(parse_wait_for) {
                diags.push(Diagnostic::error(format!("{ptr}/wait/for"), e));
            }
        }
        (None, Some(u)) => {
            if let Some(Err(e)) = literal(u).map(parse_wait_until) {
                diags.push(Diagnostic::error(format!("{ptr}/wait/until"), e));
            }
        }
    }
    if w.or_approval.as_ref().is_some_and(|a| a.options.is_empty()) {
        diags.push(
            Diagnostic::error(
                format!("{ptr}/wait/or_approval/options"),
                "an approval needs at least one option",
            )
            .hint("the default is [approve, reject]"),
        );
    }
}

fn check_graph(g: &GraphSpec, ptr: &str, diags: &mut Vec<Diagnostic>) {
    let names: Vec<&str> = g.nodes.keys().map(String::as_str).collect();
    if names.is_empty() {
        diags.push(Diagnostic::error(
            format!("{ptr}/graph/nodes"),
            "a graph needs at least one node",
        ));
        return;
    }
    if names.contains(&END) {
        diags.push(Diagnostic::error(
            child_pointer(&format!("{ptr}/graph/nodes"), END),
            "`end` is reserved for the graph's end and cannot name a node",
        ));
    }
    if !g.nodes.contains_key(&g.entry) {
        diags.push(unknown_ref(
            format!("{ptr}/graph/entry"),
            "node",
            &g.entry,
            &names,
        ));
    }
    if g.max_steps == Some(0) {
        diags.push(Diagnostic::error(
            format!("{ptr}/graph/max_steps"),
            "max_steps must be at least 1",
        ));
    }
    for (i, e) in g.edges.iter().enumerate() {
        if !g.nodes.contains_key(&e.from) {
            diags.push(unknown_ref(
                format!("{ptr}/graph/edges/{i}/from"),
                "node",
                &e.from,
                &names,
            ));
        }
        if e.to != END && !g.nodes.contains_key(&e.to) {
            let mut known = names.clone();
            known.push(END);
            diags.push(unknown_ref(
                format!("{ptr}/graph/edges/{i}/to"),
                "node",
                &e.to,
                &known,
            ));
        }
    }
    for (i, j) in g.joins.iter().enumerate() {
        if !g.nodes.contains_key(j) {
            diags.push(unknown_ref(
                format!("{ptr}/graph/joins/{i}"),
                "node",
                j,
                &names,
            ));
        }
    }
    for (from, to) in &g.on_error {
        if !g.nodes.contains_key(from) {
            diags.push(unknown_ref(
                child_pointer(&format!("{ptr}/graph/on_error"), from),
                "node",
                from,
                &names,
            ));
        }
        if !g.nodes.contains_key(to) {
            diags.push(unknown_ref(
                child_pointer(&format!("{ptr}/graph/on_error"), from),
                "node",
                to,
                &names,
            ));
        }
    }
    // Nodes no path reaches are almost always a wiring mistake.
    let mut successors: HashMap<&str, Vec<&str>> = HashMap::new();
    for e in &g.edges {
        successors.entry(&e.from).or_default().push(&e.to);
    }
    let mut reached: HashSet<&str> = HashSet::new();
    let mut stack = vec![g.entry.as_str()];
    while let Some(n) = stack.pop() {
        if !reached.insert(n) {
            continue;
        }
        stack.extend(successors.get(n).into_iter().flatten());
        if let Some(t) = g.on_error.get(n) {
            stack.push(t);
        }
    }
    for n in &names {
        if !reached.contains(n) {
            diags.push(
                Diagnostic::warning(
                    child_pointer(&format!("{ptr}/graph/nodes"), n),
                    format!("node `{n}` is unreachable from `{}`", g.entry),
                )
                .hint("add an edge to it or remove it"),
            );
        }
    }
}

/// Sub-flows that call each other in a cycle would recurse until the depth limit.
fn check_subflow_cycles(flow: &Flow, diags: &mut Vec<Diagnostic>) {
    let mut calls: HashMap<&str, Vec<&str>> = HashMap::new();
    for (name, sub) in &flow.flows {
        let mut targets = Vec::new();
        collect_calls(&sub.root, &mut targets);
        calls.insert(name, targets);
    }
    let mut state: HashMap<&str, u8> = HashMap::new();
    fn dfs<'a>(
        n: &'a str,
        calls: &HashMap<&'a str, Vec<&'a str>>,
        state: &mut HashMap<&'a str, u8>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<&'a str>> {
        match state.get(n) {
            Some(1) => {
                let start = path.iter().position(|p| *p == n).unwrap_or(0);
                let mut cycle = path[start..].to_vec();
                cycle.push(n);
                return Some(cycle);
            }
            Some(_) => return None,
            None => {}
        }
        state.insert(n, 1);
        path.push(n);
        for t in calls.get(n).into_iter().flatten() {
            if let Some(c) = dfs(t, calls, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(n, 2);
        None
    }
    let mut names: Vec<&str> = calls.keys().copied().collect();
    names.sort_unstable();
    for n in names {
        if let Some(cycle) = dfs(n, &calls, &mut state, &mut Vec::new()) {
            diags.push(
                Diagnostic::error(
                    child_pointer("/flows", cycle[0]),
                    format!(
                        "sub-flows call each other in a cycle: {}",
                        cycle.join(" -> ")
                    ),
                )
                .hint("a sub-flow may not call itself, directly or through others"),
            );
            break;
        }
    }
}

fn collect_calls<'a>(b: &'a Block, out: &mut Vec<&'a str>) {
    match &b.kind {
        BlockKind::SubFlow(s) => out.push(&s.flow),
        BlockKind::Llm(l) => out.extend(l.tools.iter().map(|t| t.flow.as_str())),
        _ => {}
    }
    for (_, c) in child_pointers(b) {
        collect_calls(c, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn flow(root: serde_json::Value) -> Flow {
        serde_json::from_value(json!({"name": "t", "root": root})).unwrap()
    }

    #[test]
    fn a_child_pointer_escapes_as_json_pointer_does() {
        assert_eq!(child_pointer("/root", "sequence"), "/root/sequence");
        assert_eq!(child_pointer("", "a/b~c"), "/a~1b~0c");
        assert_eq!(child_pointer("/x", "~1"), "/x/~01");
    }

    #[test]
    fn on_unknown_outcome_belongs_to_steps_that_reach_outside_the_run() {
        let d = validate(&flow(json!({"sequence": [
            {"id": "t", "transform": {"output": 1}, "on_unknown_outcome": "fail"},
            {"id": "a", "action": {"uses": "http.post"}, "on_unknown_outcome": "fail"},
        ]})));
        let found: Vec<&str> = d.iter().map(|d| d.pointer.as_str()).collect();
        assert_eq!(found, ["/root/sequence/0/on_unknown_outcome"]);
    }

    #[test]
    fn a_tool_name_providers_refuse_is_warned_of_with_the_name_they_take() {
        let f: Flow = serde_json::from_value(json!({
            "name": "t",
            "root": {"llm": {"prompt": "p", "tools": [
                {"name": "web.search/v2", "flow": "search"},
                {"name": "fine_name-2", "flow": "search"}
            ]}},
            "flows": {"search": {"name": "search", "root": {"passthrough": {}}}}
        }))
        .unwrap();
        let d = validate(&f);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].severity, crate::error::Severity::Warning);
        assert_eq!(d[0].pointer, "/root/llm/tools/0/name");
        assert_eq!(d[0].hint.as_deref(), Some("name it `web_search_v2`"));
    }

    #[test]
    fn duplicate_ids_are_reported_at_the_second_use() {
        let f = flow(json!({"sequence": [
            {"id": "a", "passthrough": {}},
            {"id": "a", "passthrough": {}}
        ]}));
        let d = validate(&f);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].pointer, "/root/sequence/1/id");
        assert!(d[0].hint.as_ref().unwrap().contains("/root/sequence/0"));
    }

    #[test]
    fn unknown_graph_targets_get_suggestions() {
        let f = flow(json!({"graph": {
            "entry": "start",
            "nodes": {"start": {"passthrough": {}}, "review": {"passthrough": {}}},
            "edges": [{"from": "start", "to": "reveiw"}]
        }}));
        let d = validate(&f);
        let e = d
            .iter()
            .find(|d| d.pointer == "/root/graph/edges/0/to")
            .unwrap();
        assert_eq!(e.hint.as_deref(), Some("did you mean `review`?"));
    }

    #[test]
    fn loops_must_be_bounded() {
        let f = flow(json!({"loop": {"body": {"passthrough": {}}, "max_iterations": 0}}));
        assert!(
            validate(&f)
                .iter()
                .any(|d| d.pointer == "/root/loop/max_iterations")
        );
        let missing: Result<Flow, _> = serde_json::from_value(
            json!({"name": "t", "root": {"loop": {"body": {"passthrough": {}}}}}),
        );
        assert!(missing.unwrap_err().to_string().contains("max_iterations"));
    }

    #[test]
    fn the_run_state_is_an_object() {
        let mut f = flow(json!({"passthrough": {}}));
        f.state = Some(json!([1]));
        let d = validate(&f);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].pointer, "/state");
        assert!(d[0].message.contains("not a list"), "{}", d[0].message);
        f.state = Some(json!({"items": [1]}));
        assert!(validate(&f).is_empty());
    }

    #[test]
    fn map_items_must_be_able_to_be_a_list() {
        let f = flow(json!({"map": {"items": 3, "body": {"passthrough": {}}}}));
        assert!(validate(&f).iter().any(|d| d.pointer == "/root/map/items"));
        let f = flow(json!({"map": {"items": "{{ input }}", "body": {"passthrough": {}}}}));
        assert!(validate(&f).is_empty());
    }

    #[test]
    fn an_embed_input_is_a_text_or_texts() {
        for bad in [json!(3), json!([]), json!(["a", 2]), json!({"text": "a"})] {
            let f = flow(json!({"embed": {"input": bad}}));
            assert!(
                validate(&f)
                    .iter()
                    .any(|d| d.pointer == "/root/embed/input"),
                "{bad}"
            );
        }
        for good in [json!("{{ input }}"), json!(["a", "{{ input.b }}"])] {
            assert!(validate(&flow(json!({"embed": {"input": good}}))).is_empty());
        }
        let f = flow(json!({"embed": {"input": "{{ input }}", "dimensions": 0}}));
        let d = validate(&f);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].pointer, "/root/embed/dimensions");
    }

    #[test]
    fn subflow_cycles_are_rejected() {
        let f: Flow = serde_json::from_value(json!({
            "name": "t",
            "root": {"subflow": {"flow": "a"}},
            "flows": {
                "a": {"name": "a", "root": {"subflow": {"flow": "b"}}},
                "b": {"name": "b", "root": {"subflow": {"flow": "a"}}}
            }
        }))
        .unwrap();
        let d = validate(&f);
        assert!(d.iter().any(|d| d.message.contains("a -> b -> a")), "{d:?}");
    }

    #[test]
    fn blocks_need_exactly_one_kind() {
        let two: Result<Flow, _> = serde_json::from_value(
            json!({"name": "t", "root": {"passthrough": {}, "sequence": []}}),
        );
        assert!(
            two.unwrap_err()
                .to_string()
                .contains("passthrough and sequence")
        );
        let none: Result<Flow, _> =
            serde_json::from_value(json!({"name": "t", "root": {"id": "x"}}));
        assert!(none.unwrap_err().to_string().contains("exactly one kind"));
        let typo: Result<Flow, _> =
            serde_json::from_value(json!({"name": "t", "root": {"pasthrough": {}}}));
        assert!(
            typo.unwrap_err()
                .to_string()
                .contains("unknown field `pasthrough`")
        );
    }

    #[test]
    fn expression_sites_cover_templates_in_values() {
        let f = flow(json!({"transform": {"output": {"a": ["{{ input.x }}"]}}}));
        let sites = expression_sites(&f);
        assert_eq!(sites.len(), 1);
        assert_eq!(sites[0].pointer, "/root/transform/output/a/0");
    }
}
