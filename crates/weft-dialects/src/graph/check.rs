//! The connections of an editor graph: which are execution edges and which build
//! subagent trees, each checked against spec 003's rules ("Subagent Constraints", the
//! handles of `if` and `approval`).

use super::doc::{AgentData, Connection};
use super::{Node, SUBAGENT};
use crate::diagnostics::Diagnostics;
use indexmap::IndexMap;
use std::collections::HashSet;
use weft_core::Diagnostic;

/// An execution edge, its handle read as the exit it is taken on.
pub(super) struct ExecEdge {
    pub from: String,
    pub to: String,
    pub exit: Option<String>,
}

/// The connections, sorted and checked.
pub(super) struct Checked {
    pub execution: Vec<ExecEdge>,
    /// Parent agent -> its subagents, in connection order.
    pub subagents: IndexMap<String, Vec<String>>,
    /// Nodes that are some agent's subagent (they run only as tools).
    pub subagent_targets: HashSet<String>,
}

/// Sorts and checks `connections` (each with its pointer); errors go to `diags`.
pub(super) fn connections(
    nodes: &IndexMap<String, Node>,
    connections: &[(Connection, String)],
    diags: &mut Diagnostics,
) -> Checked {
    let mut checked = Checked {
        execution: Vec::new(),
        subagents: IndexMap::new(),
        subagent_targets: HashSet::new(),
    };
    let mut subagent_edges = Vec::new();
    for (c, ptr) in connections {
        let mut ends_known = true;
        for (end, id) in [("source", &c.source), ("target", &c.target)] {
            if !nodes.contains_key(id) {
                ends_known = false;
                let d =
                    Diagnostic::error(format!("{ptr}/{end}"), format!("no node has the id `{id}`"));
                diags.push(d.hint_closest(
                    id,
                    nodes.keys().map(String::as_str),
                    "connections name nodes by their `id`",
                ));
            }
        }
        if !ends_known {
            continue;
        }
        if c.source_handle.as_deref() == Some(SUBAGENT) {
            subagent_edges.push((c, ptr));
        } else if let Some(e) = execution_edge(&nodes[&c.source], c, ptr, diags) {
            checked.execution.push(e);
        }
    }
    subagent_tree(nodes, &subagent_edges, &mut checked, diags);
    for e in &checked.execution {
        for (id, end) in [(&e.from, "source"), (&e.to, "target")] {
            if checked.subagent_targets.contains(id) {
                let ptr = connections
                    .iter()
                    .find(|(c, _)| c.source == e.from && c.target == e.to)
                    .map(|(_, p)| format!("{p}/{end}"))
                    .unwrap_or_default();
                diags.push(
                    Diagnostic::error(
                        ptr,
                        format!("`{id}` is a subagent, so it cannot be on an execution edge"),
                    )
                    .hint(
                        "spec 003: \"Subagent targets do not appear in regular execution edges\"",
                    ),
                );
            }
        }
    }
    checked
}

/// An execution edge from `source`, with its handle checked against the node's type.
fn execution_edge(
    source: &Node,
    c: &Connection,
    ptr: &str,
    diags: &mut Diagnostics,
) -> Option<ExecEdge> {
    if !matches!(c.target_handle.as_deref(), None | Some("input")) {
        diags.push(
            Diagnostic::error(
                format!("{ptr}/targetHandle"),
                format!(
                    "an execution edge enters a node at `input`, not `{}`",
                    c.target_handle.as_deref().unwrap_or("")
                ),
            )
            .hint("leave targetHandle out, or write \"input\""),
        );
        return None;
    }
    let handle = c.source_handle.as_deref();
    let hptr = format!("{ptr}/sourceHandle");
    let exit = match source.kind {
        "end" => {
            diags.push(
                Diagnostic::error(
                    ptr,
                    format!("`{}` is an end node; nothing follows it", source.id),
                )
                .hint("an end node completes the run: connect the next step to the node before it"),
            );
            return None;
        }
        "if" => {
            let count = super::condition_count(&source.data);
            match handle {
                Some("false") => Some("false".to_owned()),
                // Legacy files name the first condition's branch `true`.
                Some("true") => Some("condition-0".to_owned()),
                Some(h)
                    if h.strip_prefix("condition-")
                        .and_then(|i| i.parse::<usize>().ok())
                        .is_some_and(|i| i < count) =>
                {
                    Some(h.to_owned())
                }
                other => {
                    diags.push(
                        Diagnostic::error(
                            hptr,
                            match other {
                                Some(h) => {
                                    format!("the if node `{}` has no handle `{h}`", source.id)
                                }
                                None => format!(
                                    "an edge from the if node `{}` needs a sourceHandle",
                                    source.id
                                ),
                            },
                        )
                        .hint(format!(
                            "its handles: {}false",
                            (0..count)
                                .map(|i| format!("condition-{i}, "))
                                .collect::<String>()
                        )),
                    );
                    return None;
                }
            }
        }
        "approval" => match handle {
            Some(h @ ("approve" | "reject")) => Some(h.to_owned()),
            other => {
                let d = Diagnostic::error(
                    hptr,
                    match other {
                        Some(h) => {
                            format!("an approval's edges leave by `approve` or `reject`, not `{h}`")
                        }
                        None => format!(
                            "an edge from the approval `{}` needs a sourceHandle",
                            source.id
                        ),
                    },
                );
                diags.push(d.hint_closest(
                    other.unwrap_or(""),
                    ["approve", "reject"],
                    "sourceHandle: approve or reject",
                ));
                return None;
            }
        },
        _ => match handle {
            None | Some("output") => None,
            Some(h) => {
                diags.push(
                    Diagnostic::error(hptr, format!("a {} node's edges leave by `output`, not `{h}`", source.kind))
                        .hint("leave sourceHandle out, or write \"output\" (\"subagent\" for a subagent edge from an agent)"),
                );
                return None;
            }
        },
    };
    Some(ExecEdge {
        from: c.source.clone(),
        to: c.target.clone(),
        exit,
    })
}

/// The subagent edges, checked against spec 003's "Subagent Constraints".
fn subagent_tree(
    nodes: &IndexMap<String, Node>,
    edges: &[(&Connection, &String)],
    checked: &mut Checked,
    diags: &mut Diagnostics,
) {
    let rule = |r: &str| format!("spec 003: a subagent graph is valid only when {r}");
    for (c, ptr) in edges {
        let (source, target) = (&nodes[&c.source], &nodes[&c.target]);
        let problem = if source.kind != "agent" || target.kind != "agent" {
            Some((
                "",
                "a subagent edge joins two agent nodes",
                rule("source and target are both agent nodes"),
            ))
        } else if c.source == c.target {
            Some((
                "/target",
                "an agent cannot be its own subagent",
                rule("there is no self-reference"),
            ))
        } else if !subagents_enabled(source) {
            Some((
                "/source",
                "this agent does not have tools.subagents enabled",
                format!("set \"tools\": {{\"subagents\": true}} on `{}`", source.id),
            ))
        } else if !matches!(c.target_handle.as_deref(), None | Some("input")) {
            Some((
                "/targetHandle",
                "a subagent edge enters its target at `input`",
                rule("the target handle is input"),
            ))
        } else if checked.subagent_targets.contains(&c.target) {
            Some((
                "/target",
                "this agent already has a subagent parent",
                rule("a target has at most one subagent parent"),
            ))
        } else {
            None
        };
        match problem {
            Some((at, message, hint)) => {
                diags.push(Diagnostic::error(format!("{ptr}{at}"), message).hint(hint));
            }
            None => {
                checked.subagent_targets.insert(c.target.clone());
                checked
                    .subagents
                    .entry(c.source.clone())
                    .or_default()
                    .push(c.target.clone());
            }
        }
    }
    // With one parent each, a cycle is a walk up the parents that comes back.
    let parent: IndexMap<&str, &str> = checked
        .subagents
        .iter()
        .flat_map(|(p, cs)| cs.iter().map(move |c| (c.as_str(), p.as_str())))
        .collect();
    for start in parent.keys() {
        let mut at = *start;
        let mut steps = 0;
        while let Some(p) = parent.get(at) {
            at = p;
            steps += 1;
            if at == *start {
                let ptr = nodes.get(*start).map(|n| n.ptr.clone()).unwrap_or_default();
                diags.push(
                    Diagnostic::error(
                        ptr,
                        format!("the subagent edges from `{start}` form a cycle"),
                    )
                    .hint(rule("there are no cycles")),
                );
                return;
            }
            if steps > parent.len() {
                break;
            }
        }
    }
}

fn subagents_enabled(n: &Node) -> bool {
    serde_json::from_value::<AgentData>(n.data.clone()).is_ok_and(|d| d.tools.subagents)
}
