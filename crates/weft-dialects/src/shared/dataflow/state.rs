//! Reads of run-state keys that nothing provides, over the core IR: a template or
//! condition that reads `state.x` when no block writes `x` and the flow declares no
//! such key. Templates render a missing key as nothing and a condition on it as false,
//! so such a read (most often a misspelt key) fails silently at run time; a warning,
//! since what reads it may not run, or may run only when something else provided it.
//!
//! It needs to know every key any block can write: a `set`, a literal object merged into
//! the state, a Python function whose every `return` is a literal dict. One block whose
//! writes cannot be read that way (a non-literal `return`, Lua, a host handler, which
//! may patch the state) makes any key possible, and then nothing is reported.

use crate::python_body::function_return_keys;
use std::collections::HashSet;
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

/// What a flow declares about its state, besides what its blocks write.
pub(crate) struct Declared<'a> {
    /// The keys it declares.
    pub keys: HashSet<String>,
    /// What the dialect calls a block ("node").
    pub block: &'a str,
    /// How the message says where keys are declared: "neither initial_state nor
    /// state_schema declares it".
    pub where_declared: &'a str,
    /// What else may provide a key, for the message: " unless the run's input supplies
    /// it", or nothing.
    pub unless: &'a str,
    /// The hint for key `key` when no declared or written key is close to it: how to
    /// declare it in this dialect.
    pub declare_hint: fn(key: &str) -> String,
    /// A block whose merged output is the declarations themselves (and the run's
    /// input), not a writer to learn keys from.
    pub start: Option<&'a str>,
}

/// A warning for each of `flow`'s reads of a state key that nothing provides, at the IR
/// pointer of the template or condition, with the location of the block it belongs to
/// (for a graph edge's condition, the node the edge leaves).
pub(crate) fn unprovided_reads(flow: &Flow, declared: &Declared<'_>) -> Vec<Diagnostic> {
    let Some(written) = written_keys(flow, declared.start) else {
        return Vec::new();
    };
    let known: HashSet<&str> = written
        .iter()
        .chain(&declared.keys)
        .map(String::as_str)
        .collect();
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
            let mut d = Diagnostic::warning(
                &site.pointer,
                format!(
                    "`state.{key}` is read here, but no {} writes `{key}` and {}: it renders as nothing{}",
                    declared.block, declared.where_declared, declared.unless
                ),
            )
            .hint_closest(
                &key,
                known.iter().copied(),
                (declared.declare_hint)(&key),
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
fn written_keys(flow: &Flow, start: Option<&str>) -> Option<HashSet<String>> {
    let mut keys = HashSet::new();
    let mut unknown = false;
    walk_blocks(flow, &mut |_, b| {
        for path in b.data.set.keys() {
            keys.insert(path.split('.').next().unwrap_or(path).to_owned());
        }
        if matches!(b.kind, BlockKind::Handler(_)) {
            unknown = true;
        }
        if b.data.merge_output && (start.is_none() || b.id.as_deref() != start) {
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
        BlockKind::Code(c) if c.language == "prolog" => prolog_return_keys(&c.source),
        BlockKind::Code(c) if c.language == "python" => {
            let entry = c.entry.as_deref()?;
            let returns = function_return_keys(&c.source, entry)?;
            Some(returns.into_iter().flatten().collect())
        }
        _ => None,
    }
}

/// The keys of a Prolog program's `return(Key, Value)` calls (the block's output is the
/// object of the returned pairs), when every key is an atom written in the source;
/// `None` when one is not (a variable, a helper that passes its key on).
fn prolog_return_keys(source: &str) -> Option<Vec<String>> {
    let code = without_prolog_comments(source);
    let mut keys = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("return(") {
        let before = rest[..at].chars().next_back();
        let after = &rest[at + "return(".len()..];
        rest = after;
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let arg = after.trim_start();
        let (key, tail) = match arg.strip_prefix('\'') {
            Some(quoted) => {
                let end = quoted.find('\'')?;
                (&quoted[..end], &quoted[end + 1..])
            }
            None => {
                let end = arg
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(arg.len());
                let atom = &arg[..end];
                if !atom.starts_with(|c: char| c.is_ascii_lowercase()) {
                    return None;
                }
                (atom, &arg[end..])
            }
        };
        if !tail.trim_start().starts_with(',') {
            return None;
        }
        if !keys.iter().any(|k| k == key) {
            keys.push(key.to_owned());
        }
    }
    Some(keys)
}

/// `source` without its `% ...` and `/* ... */` comments (quoted text kept as it is).
fn without_prolog_comments(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut chars = source.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                out.push(c);
            }
            (Some(_), c) => out.push(c),
            (None, '\'' | '"' | '`') => {
                quote = Some(c);
                out.push(c);
            }
            (None, '%') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            (None, '/') if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            (None, c) => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::prolog_return_keys;

    #[test]
    fn prolog_returns_with_atom_keys_are_known_and_any_other_key_is_not() {
        assert_eq!(
            prolog_return_keys(
                "% return(Comment, 1).\nstate(x, X), Y is X + 1, return(y, Y), return('the total', Y)."
            ),
            Some(vec!["y".to_owned(), "the total".to_owned()])
        );
        assert_eq!(
            prolog_return_keys("state(x, X), noreturn(a, X)."),
            Some(vec![])
        );
        assert_eq!(prolog_return_keys("emit(K, V) :- return(K, V)."), None);
        assert_eq!(
            prolog_return_keys("/* return(x, 1) */ return( Key , 1)."),
            None
        );
    }
}
