//! The `tea` dialect's dataflow pass: a template or condition that reads `state.x` when
//! no node writes `x` and neither `initial_state` nor `state_schema` declares it. TEA
//! renders a missing key as nothing and a condition on it as false, so such a read
//! (most often a misspelt key) fails silently at run time. The run's input can still
//! supply any key (`--input`), so this is a warning, not an error.
//!
//! It needs to know every key any node can write: a `set`, a literal object merged into
//! the state, a Python function whose every `return` is a literal dict. One node whose
//! writes cannot be read that way (a non-literal `return`, Lua, an action that merges an
//! arbitrary result) makes any key possible, and then nothing is reported.

use crate::python_body::function_return_keys;
use std::collections::{HashMap, HashSet};
use weft_core::ir::{Block, BlockKind, Flow};
use weft_core::validate::{ExprSite, SiteKind, expression_sites, origin_at, walk_blocks};
use weft_core::{Diagnostic, Loc};

/// Attribute names that are the state mapping's methods, not keys (`state.get(...)`).
const METHODS: &[&str] = &[
    "get",
    "items",
    "keys",
    "values",
    "update",
    "pop",
    "copy",
    "setdefault",
];

/// The block that merges the run's input and `initial_state` into the state.
const START: &str = "__start__";

/// The warnings for `flow`'s reads of state keys that nothing provides; `declared` are
/// the keys of `initial_state` and `state_schema`, `node_at` the document pointer of
/// the node written at each location.
pub(super) fn check(
    flow: &Flow,
    declared: &HashSet<String>,
    node_at: &HashMap<Loc, String>,
) -> Vec<Diagnostic> {
    let Some(written) = written_keys(flow) else {
        return Vec::new();
    };
    let known: HashSet<&str> = written.iter().chain(declared).map(String::as_str).collect();
    let mut reported = HashSet::new();
    let mut out = Vec::new();
    for site in expression_sites(flow) {
        for key in state_reads(&site) {
            if known.contains(key.as_str()) || guarded(site.source, &key) {
                continue;
            }
            let loc = site_origin(flow, &site.pointer);
            if !reported.insert((key.clone(), loc)) {
                continue;
            }
            let pointer = loc
                .and_then(|l| node_at.get(&l))
                .cloned()
                .unwrap_or_default();
            let mut d = Diagnostic::warning(
                pointer,
                format!(
                    "`state.{key}` is read here, but no node writes `{key}` and neither initial_state nor state_schema declares it: it renders as nothing unless the run's input supplies it"
                ),
            )
            .hint_closest(
                &key,
                known.iter().copied(),
                format!("declare it: initial_state: {{{key}: ...}}, or write it from a node"),
            );
            d.loc = loc;
            out.push(d);
        }
    }
    out
}

/// Where the template or condition at IR `pointer` was written: its block's origin, or
/// for a graph edge's condition, the node the edge leaves.
fn site_origin(flow: &Flow, pointer: &str) -> Option<Loc> {
    if let Some((graph_at, rest)) = pointer.split_once("/graph/edges/")
        && let Some(index) = rest.split('/').next().and_then(|i| i.parse::<usize>().ok())
    {
        let mut from = None;
        walk_blocks(flow, &mut |ptr, b| {
            if ptr == graph_at
                && let BlockKind::Graph(g) = &b.kind
            {
                from = g
                    .edges
                    .get(index)
                    .and_then(|e| g.nodes.get(&e.from)?.origin);
            }
        });
        if from.is_some() {
            return from;
        }
    }
    origin_at(flow, pointer)
}

/// The state keys a template or condition reads by name (`state.x`, not
/// `state.get('x')` or `state['x']`).
fn state_reads(site: &ExprSite<'_>) -> Vec<String> {
    let as_expr = matches!(site.kind, SiteKind::Expr);
    let Some(paths) = weft_expr::reads(site.source, as_expr) else {
        return Vec::new();
    };
    let mut keys: Vec<String> = paths
        .iter()
        .filter_map(|p| p.strip_prefix("state."))
        .map(|rest| rest.split('.').next().unwrap_or(rest).to_owned())
        .filter(|k| !METHODS.contains(&k.as_str()))
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// Whether `source` itself allows for key `key` being absent.
fn guarded(source: &str, key: &str) -> bool {
    let read = format!("state.{key}");
    [
        "is defined",
        "is not defined",
        "is none",
        "is not none",
        "|default",
        "| default",
        "|d(",
        "| d(",
    ]
    .iter()
    .any(|guard| {
        source.contains(&format!("{read} {guard}")) || source.contains(&format!("{read}{guard}"))
    })
}

/// Every state key a node of `flow` can write, or `None` when one can write keys that
/// cannot be known before the run.
fn written_keys(flow: &Flow) -> Option<HashSet<String>> {
    let mut keys = HashSet::new();
    let mut unknown = false;
    walk_blocks(flow, &mut |_, b| {
        for path in b.data.set.keys() {
            keys.insert(path.split('.').next().unwrap_or(path).to_owned());
        }
        if b.data.merge_output && b.id.as_deref() != Some(START) {
            match merged_keys(b) {
                Some(merged) => keys.extend(merged),
                None => unknown = true,
            }
        }
    });
    (!unknown).then_some(keys)
}

/// The keys of what block `b` merges into the state, when they are literal.
fn merged_keys(b: &Block) -> Option<Vec<String>> {
    match &b.kind {
        BlockKind::Transform(t) => t.output.0.as_object().map(|o| o.keys().cloned().collect()),
        BlockKind::Code(c) if c.language == "python" => {
            let entry = c.entry.as_deref()?;
            let returns = function_return_keys(&c.source, entry)?;
            Some(returns.into_iter().flatten().collect())
        }
        _ => None,
    }
}
