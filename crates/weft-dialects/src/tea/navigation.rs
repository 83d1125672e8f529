//! Where each node goes next: its `goto`, else its legacy `edges`, else the next node in
//! the list (`specs/tea-notes.md`, "Navigation"). Parallel edges fork; their `fan_in`
//! node joins the branches.

use super::doc::{EdgeDoc, Node, TeaDoc};
use super::{Compiler, strip_braces};
use indexmap::{IndexMap, IndexSet};
use serde_json::Value;
use weft_core::Diagnostic;
use weft_core::ir::{Block, END, Edge, Expr};

const START: &str = "__start__";
const FINISH: &str = "__end__";

/// Nodes marked `fan_in: true`.
pub(super) fn fan_in_nodes(tea: &TeaDoc) -> IndexSet<String> {
    tea.nodes
        .iter()
        .filter(|n| n.fan_in == Some(Value::Bool(true)))
        .filter_map(|n| n.name.clone())
        .collect()
}

/// The nodes a `dynamic_parallel` names as its `fan_in`, with the state key its
/// results are written under: TEA's code nodes get those results as `parallel_results`
/// (its engine passes them to any node whose state holds them).
pub(super) fn dynamic_fan_ins(tea: &TeaDoc) -> IndexMap<String, String> {
    tea.nodes
        .iter()
        .filter(|n| n.kind.as_deref() == Some("dynamic_parallel"))
        .filter_map(|n| {
            let target = n.fan_in.as_ref()?.as_str()?.to_owned();
            let key = match &n.output {
                Some(Value::String(k)) => k.clone(),
                _ => "parallel_results".to_owned(),
            };
            Some((target, key))
        })
        .collect()
}

impl Compiler<'_> {
    /// The entry node and the edges of the graph.
    pub(super) fn navigation(
        &mut self,
        tea: &TeaDoc,
        nodes: &IndexMap<String, Block>,
    ) -> Option<(String, Vec<Edge>)> {
        let names: IndexSet<&str> = nodes.keys().map(String::as_str).collect();
        let mut legacy: IndexMap<&str, Vec<(usize, &EdgeDoc)>> = IndexMap::new();
        let mut entry = None;
        // A node that a parallel edge starts goes on to that edge's fan-in node.
        let mut branch_fan_in: IndexMap<&str, &str> = IndexMap::new();
        for (i, e) in tea.edges.iter().enumerate() {
            let ptr = format!("/edges/{i}");
            if e.from == START {
                if e.condition.is_some() || e.when.is_some() || e.kind.is_some() {
                    self.diags.push(Diagnostic::error(&ptr, "an edge from `__start__` names the first node; it takes no condition or type"));
                }
                match &entry {
                    None => entry = self.target(&e.to, &format!("{ptr}/to"), &names),
                    // TEA takes the first edge whose condition holds, so a later edge
                    // from `__start__` is never taken: read as TEA reads it, and say so.
                    Some(first) => self.diags.push(
                        Diagnostic::warning(
                            &ptr,
                            format!(
                                "a second edge from `__start__`: the flow starts at `{first}`, as in TEA, and never takes this one to `{}`",
                                e.to
                            ),
                        )
                        .hint("remove it; to start several nodes at once, fan out from the first with `type: parallel` edges"),
                    ),
                }
                continue;
            }
            if !names.contains(e.from.as_str()) {
                self.unknown_node(&e.from, &format!("{ptr}/from"), &names);
                continue;
            }
            if e.kind.as_deref() == Some("parallel")
                && let Some(f) = &e.fan_in
            {
                branch_fan_in.insert(e.to.as_str(), f.as_str());
            }
            legacy.entry(e.from.as_str()).or_default().push((i, e));
        }
        // Without a named node, the errors that left none are already reported.
        let entry = entry.or_else(|| names.first().map(|n| (*n).to_owned()))?;
        let joins = fan_in_nodes(tea);
        let mut edges = Vec::new();
        for (i, n) in tea.nodes.iter().enumerate() {
            let Some(name) = n.name.as_deref().filter(|n| names.contains(n)) else {
                continue;
            };
            let ptr = format!("/nodes/{i}");
            let next = names
                .get_index_of(name)
                .and_then(|p| names.get_index(p + 1))
                .map_or(END, |x| x);
            self.check_fan_in_key(n, &ptr, &names);
            if let Some(goto) = &n.goto {
                self.goto(name, goto, &format!("{ptr}/goto"), next, &names, &mut edges);
            } else if let Some(out) = legacy.get(name) {
                for (j, e) in out {
                    if let Some(edge) = self.legacy_edge(e, &format!("/edges/{j}"), &names, &joins)
                    {
                        edges.push(edge);
                    }
                }
            } else if let Some(Value::String(f)) = &n.fan_in {
                // An unknown name was reported with the key, whatever routes the node.
                if let Some(to) = known_target(f, &names) {
                    edges.push(plain(name, to));
                }
            } else if let Some(f) = branch_fan_in.get(name) {
                edges.push(plain(name, (*f).to_owned()));
            } else {
                edges.push(plain(name, next.to_owned()));
            }
        }
        Some((entry, edges))
    }

    /// `fan_in: true` marks a join node; `fan_in: NODE` belongs to dynamic_parallel and
    /// names a node, even when a `goto` or legacy edges route the node instead.
    fn check_fan_in_key(&mut self, n: &Node, ptr: &str, names: &IndexSet<&str>) {
        let dp = n.kind.as_deref() == Some("dynamic_parallel");
        match &n.fan_in {
            None => {}
            Some(Value::Bool(_)) if !dp => {}
            Some(Value::String(f)) if dp && known_target(f, names).is_none() => {
                self.unknown_node(f, &format!("{ptr}/fan_in"), names);
            }
            Some(Value::String(_)) if dp => {}
            Some(_) if dp => self.diags.push(
                Diagnostic::error(format!("{ptr}/fan_in"), "on a dynamic_parallel node, `fan_in` names the node that runs after every branch")
                    .hint("fan_in: aggregate"),
            ),
            Some(_) => self.diags.push(
                Diagnostic::error(format!("{ptr}/fan_in"), "`fan_in` marks a join node: `fan_in: true`")
                    .hint("only a dynamic_parallel node names its fan-in node"),
            ),
        }
    }

    fn goto(
        &mut self,
        from: &str,
        goto: &Value,
        ptr: &str,
        next: &str,
        names: &IndexSet<&str>,
        edges: &mut Vec<Edge>,
    ) {
        match goto {
            Value::String(to) => {
                if let Some(to) = self.target(to, ptr, names) {
                    edges.push(plain(from, to));
                }
            }
            Value::Array(rules) => {
                for (i, r) in rules.iter().enumerate() {
                    let rptr = format!("{ptr}/{i}");
                    let Some(rule) = r.as_object() else {
                        self.diags.push(Diagnostic::error(
                            &rptr,
                            "a goto rule is {if: CONDITION, to: NODE}",
                        ));
                        continue;
                    };
                    for key in rule.keys() {
                        if key != "if" && key != "to" {
                            let d = Diagnostic::error(
                                weft_core::validate::child_pointer(&rptr, key),
                                format!("unknown key `{key}` in a goto rule"),
                            );
                            self.diags.push(d.hint_closest(
                                key,
                                ["if", "to"],
                                "a goto rule is {if: CONDITION, to: NODE}",
                            ));
                        }
                    }
                    let Some(to) = rule.get("to").and_then(Value::as_str) else {
                        self.diags.push(Diagnostic::error(
                            &rptr,
                            "a goto rule needs `to`, a node name or `__end__`",
                        ));
                        continue;
                    };
                    let when = match rule.get("if") {
                        None => None,
                        Some(Value::String(c)) => Some(Expr(strip_braces(c).to_owned())),
                        Some(Value::Bool(true)) => None,
                        Some(_) => {
                            self.diags.push(Diagnostic::error(
                                format!("{rptr}/if"),
                                "`if` is a condition, e.g. \"state.score > 0.8\"",
                            ));
                            continue;
                        }
                    };
                    if let Some(to) = self.target(to, &format!("{rptr}/to"), names) {
                        edges.push(Edge {
                            when,
                            origin: self.loc(&format!("{rptr}/if")).or(self.loc(&rptr)),
                            ..plain(from, to)
                        });
                    }
                }
                // No rule matched: on to the next node, as without a goto.
                edges.push(plain(from, next.to_owned()));
            }
            _ => self.diags.push(
                Diagnostic::error(ptr, "`goto` is a node name or a list of {if, to} rules")
                    .hint("goto: [{if: \"state.ok\", to: publish}, {to: revise}]"),
            ),
        }
    }

    fn legacy_edge(
        &mut self,
        e: &EdgeDoc,
        ptr: &str,
        names: &IndexSet<&str>,
        joins: &IndexSet<String>,
    ) -> Option<Edge> {
        let to = self.target(&e.to, &format!("{ptr}/to"), names)?;
        let condition = e.condition.as_ref().map(|c| {
            if c.kind.as_deref().is_some_and(|k| k != "expression") {
                self.diags.push(Diagnostic::error(
                    format!("{ptr}/condition/type"),
                    "a condition's type is `expression`",
                ));
            }
            strip_braces(&c.value).to_owned()
        });
        let when = match (condition, &e.when) {
            (Some(c), None | Some(Value::Bool(true))) => Some(c),
            (Some(c), Some(Value::Bool(false))) => Some(format!("not ({c})")),
            (None, Some(Value::String(w))) => Some(bare_when(w)),
            (None, None) => None,
            (None, Some(Value::Bool(b))) => (!b).then(|| "false".to_owned()),
            (Some(_), Some(_)) | (None, Some(_)) => {
                self.diags.push(
                    Diagnostic::error(
                        format!("{ptr}/when"),
                        "`when` is true or false beside a `condition`, or an expression alone",
                    )
                    .hint("when: \"!has_error\""),
                );
                None
            }
        };
        let parallel = match e.kind.as_deref() {
            None => false,
            Some("parallel") => true,
            Some(other) => {
                self.diags.push(
                    Diagnostic::error(
                        format!("{ptr}/type"),
                        format!("unknown edge type `{other}`"),
                    )
                    .hint("the edge type is `parallel`"),
                );
                false
            }
        };
        if let Some(f) = &e.fan_in {
            if !parallel {
                self.diags.push(Diagnostic::error(
                    format!("{ptr}/fan_in"),
                    "`fan_in` belongs to `type: parallel` edges",
                ));
            } else if !joins.contains(f) {
                self.diags.push(
                    Diagnostic::error(
                        format!("{ptr}/fan_in"),
                        format!("the fan-in node `{f}` is not marked `fan_in: true`"),
                    )
                    .hint(format!("add `fan_in: true` to node `{f}`")),
                );
            }
        }
        let origin = ["/when", "/condition/value", ""]
            .iter()
            .find_map(|at| self.loc(&format!("{ptr}{at}")));
        Some(Edge {
            when: when.map(Expr),
            parallel,
            origin,
            ..plain(&e.from, to)
        })
    }

    /// A node name (or `__end__`) as a graph target.
    fn target(&mut self, to: &str, ptr: &str, names: &IndexSet<&str>) -> Option<String> {
        let known = known_target(to, names);
        if known.is_none() {
            self.unknown_node(to, ptr, names);
        }
        known
    }

    fn unknown_node(&mut self, name: &str, ptr: &str, names: &IndexSet<&str>) {
        let d = Diagnostic::error(ptr, format!("unknown node `{name}`"));
        let candidates = names.iter().copied().chain([FINISH]);
        self.diags.push(d.hint_closest(
            name,
            candidates,
            format!(
                "nodes: {}",
                names.iter().copied().collect::<Vec<_>>().join(", ")
            ),
        ));
    }
}

/// The node `to` names (`__end__` ends the run), if there is one.
fn known_target(to: &str, names: &IndexSet<&str>) -> Option<String> {
    if to == FINISH {
        Some(END.to_owned())
    } else {
        names.contains(to).then(|| to.to_owned())
    }
}

fn plain(from: &str, to: String) -> Edge {
    Edge {
        from: from.to_owned(),
        to,
        when: None,
        exit: None,
        parallel: false,
        origin: None,
    }
}

/// A bare `when:` on a legacy edge: `name` and `!name` test a state key; anything else
/// is an expression.
fn bare_when(w: &str) -> String {
    let w = strip_braces(w);
    let ident = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_');
    match w.strip_prefix('!') {
        Some(name) if ident(name.trim()) => format!("not state.get('{}')", name.trim()),
        _ if ident(w) => format!("state.get('{w}')"),
        _ => w.to_owned(),
    }
}
