//! A flow's IR as a diagram to draw: nodes and edges as data, Mermaid for Markdown, DOT
//! for Graphviz, and SVG laid out here (for a page that colours nodes as a run goes).
//!
//! Each node drawn for a block carries the block's step path as the engine names its
//! steps, with `[*]` for any map item and `#*` for any loop iteration, so that a run's
//! step events can be shown on the drawing (see [`step_pattern`]). Every block but a
//! sequence (drawn as its steps in a chain) has a node; a graph's is its end.

mod svg;

pub use svg::{Decor, NodeDecor};

use crate::Flow;
use crate::ir::{Block, BlockKind, END};
use serde::Serialize;

/// How a node is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// A step.
    Box,
    /// Where the flow forks, joins, repeats or chooses.
    Decision,
    /// Where the flow (or a graph) starts or ends.
    Terminal,
}

/// One node of the drawing.
#[derive(Debug, Clone, Serialize)]
pub struct Node {
    /// Unique within the diagram (`n0`, `n1`, ...).
    pub id: String,
    /// What to write in it (may hold line breaks).
    pub label: String,
    /// How to draw it.
    pub shape: Shape,
    /// The kind of the block it stands for (none for starts, ends and joins).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The step path of the block it stands for, with `[*]` and `#*` for repetitions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// One edge of the drawing.
#[derive(Debug, Clone, Serialize)]
pub struct Edge {
    /// The node it leaves.
    pub from: String,
    /// The node it enters.
    pub to: String,
    /// What to write on it: a branch's condition, a branch name, `repeat`, ...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// Nodes and edges of a flow.
#[derive(Debug, Clone, Serialize)]
pub struct Diagram {
    /// The nodes, in drawing order.
    pub nodes: Vec<Node>,
    /// The edges.
    pub edges: Vec<Edge>,
}

/// The path pattern of a run's step: its path with every map item index as `[*]`,
/// every loop iteration as `#*` and a graph node's repeat visits (`@n`) dropped, which
/// is how [`Node::path`] names the block it ran.
pub fn step_pattern(path: &str) -> String {
    path.split('/')
        .map(|seg| {
            let numbered = |prefix: &str, suffix: &str| {
                seg.strip_prefix(prefix)
                    .and_then(|r| r.strip_suffix(suffix))
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            };
            if numbered("[", "]") {
                "[*]"
            } else if numbered("#", "") {
                "#*"
            } else {
                match seg.rsplit_once('@') {
                    Some((node, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
                        node
                    }
                    _ => seg,
                }
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The name a block's steps run under, when its place gives it one (a graph node's or
/// a parallel branch's name), rather than an index or a repetition.
fn step_name(path: &str) -> Option<&str> {
    let (_, seg) = path.rsplit_once('/')?;
    let numbered = seg.bytes().all(|b| b.is_ascii_digit());
    (!seg.is_empty() && !numbered && !seg.starts_with(['[', '#'])).then_some(seg)
}

fn child(path: &str, seg: &str) -> String {
    format!("{path}/{seg}")
}

fn short(s: &str) -> String {
    let one = s.replace('\n', " ");
    if one.chars().count() > 40 {
        format!("{}…", one.chars().take(40).collect::<String>())
    } else {
        one
    }
}

impl Diagram {
    /// The diagram of `flow`.
    pub fn of(flow: &Flow) -> Diagram {
        let mut d = Diagram {
            nodes: Vec::new(),
            edges: Vec::new(),
        };
        let start = d.node(format!("start: {}", flow.name), Shape::Terminal);
        let root = flow.root.label().unwrap_or("root");
        let (entries, exits) = d.block(&flow.root, root);
        let end = d.node("end".into(), Shape::Terminal);
        d.connect(&[start], &entries, None);
        d.connect(&exits, &[end], None);
        d
    }

    fn node(&mut self, label: String, shape: Shape) -> String {
        let id = format!("n{}", self.nodes.len());
        self.nodes.push(Node {
            id: id.clone(),
            label,
            shape,
            kind: None,
            path: None,
        });
        id
    }

    /// A node standing for block `b` at `path`.
    fn block_node(&mut self, b: &Block, path: &str, label: String, shape: Shape) -> String {
        let id = self.node(label, shape);
        if let Some(n) = self.nodes.last_mut() {
            n.kind = Some(b.kind_name().to_owned());
            n.path = Some(path.to_owned());
        }
        id
    }

    fn connect(&mut self, from: &[String], to: &[String], label: Option<String>) {
        for f in from {
            for t in to {
                self.edges.push(Edge {
                    from: f.clone(),
                    to: t.clone(),
                    label: label.clone(),
                });
            }
        }
    }

    fn leaf(&mut self, b: &Block, path: &str, detail: String) -> (Vec<String>, Vec<String>) {
        let name = b
            .label()
            .map(str::to_owned)
            .or_else(|| step_name(path).map(str::to_owned))
            .unwrap_or_else(|| b.kind_name().to_owned());
        let label = if detail.is_empty() {
            name
        } else {
            format!("{name}\n{detail}")
        };
        let id = self.block_node(b, path, label, Shape::Box);
        (vec![id.clone()], vec![id])
    }

    /// Draws `b`, whose steps run at `path`; returns the nodes that enter it and the
    /// nodes that leave it.
    fn block(&mut self, b: &Block, path: &str) -> (Vec<String>, Vec<String>) {
        match &b.kind {
            BlockKind::Llm(l) => {
                self.leaf(b, path, format!("llm {}", l.model.as_deref().unwrap_or("")))
            }
            BlockKind::Embed(e) => self.leaf(
                b,
                path,
                format!("embed {}", e.model.as_deref().unwrap_or("")),
            ),
            BlockKind::Code(c) => self.leaf(b, path, format!("code ({})", c.language)),
            BlockKind::Handler(h) => self.leaf(b, path, format!("handler {}", h.name)),
            BlockKind::Action(a) => self.leaf(b, path, format!("action {}", a.uses)),
            BlockKind::Approval(_) => self.leaf(b, path, "approval".into()),
            BlockKind::Wait(_) => self.leaf(b, path, "wait".into()),
            BlockKind::Passthrough => self.leaf(b, path, String::new()),
            BlockKind::Transform(_) => self.leaf(b, path, "transform".into()),
            BlockKind::SubFlow(s) => self.leaf(b, path, format!("subflow {}", s.flow)),
            BlockKind::Sequence(steps) if steps.is_empty() => self.leaf(b, path, String::new()),
            BlockKind::Sequence(steps) => {
                let mut entries = Vec::new();
                let mut exits: Vec<String> = Vec::new();
                for (i, s) in steps.iter().enumerate() {
                    let seg = crate::ir::step_segment(steps, i);
                    let (en, ex) = self.block(s, &child(path, &seg));
                    if i == 0 {
                        entries = en;
                    } else {
                        self.connect(&exits, &en, None);
                    }
                    exits = ex;
                }
                (entries, exits)
            }
            BlockKind::Parallel(p) => {
                let fork = self.block_node(
                    b,
                    path,
                    format!("{}\nparallel", b.label().unwrap_or("fork")),
                    Shape::Decision,
                );
                let join = self.node("join".into(), Shape::Decision);
                for (name, branch) in &p.branches {
                    let (en, ex) = self.block(branch, &child(path, name));
                    self.connect(std::slice::from_ref(&fork), &en, Some(name.clone()));
                    self.connect(&ex, std::slice::from_ref(&join), None);
                }
                (vec![fork], vec![join])
            }
            BlockKind::Map(m) => {
                let head = self.block_node(
                    b,
                    path,
                    format!(
                        "{}\nmap over {}",
                        b.label().unwrap_or("map"),
                        short(&m.items.0.to_string())
                    ),
                    Shape::Decision,
                );
                let collect = self.node("collect".into(), Shape::Decision);
                let (en, ex) = self.block(&m.body, &child(path, "[*]"));
                self.connect(std::slice::from_ref(&head), &en, Some("each item".into()));
                self.connect(&ex, std::slice::from_ref(&collect), None);
                (vec![head], vec![collect])
            }
            BlockKind::Loop(l) => {
                let cond = l
                    .while_
                    .as_ref()
                    .map(|w| format!("while {}", short(&w.0)))
                    .or_else(|| l.until.as_ref().map(|u| format!("until {}", short(&u.0))))
                    .unwrap_or_default();
                let head = self.block_node(
                    b,
                    path,
                    format!(
                        "{}\nloop ≤{} {cond}",
                        b.label().unwrap_or("loop"),
                        l.max_iterations
                    ),
                    Shape::Decision,
                );
                let (en, ex) = self.block(&l.body, &child(path, "#*"));
                self.connect(std::slice::from_ref(&head), &en, None);
                self.connect(&ex, std::slice::from_ref(&head), Some("repeat".into()));
                (vec![head.clone()], vec![head])
            }
            BlockKind::Branch(br) => {
                let head = self.block_node(
                    b,
                    path,
                    b.label().unwrap_or("branch").to_owned(),
                    Shape::Decision,
                );
                let mut exits = Vec::new();
                for (i, c) in br.cases.iter().enumerate() {
                    let case = c.name.clone().unwrap_or_else(|| format!("case{i}"));
                    let (en, ex) = self.block(&c.then, &child(path, &case));
                    self.connect(std::slice::from_ref(&head), &en, Some(short(&c.when.0)));
                    exits.extend(ex);
                }
                match &br.otherwise {
                    Some(o) => {
                        let (en, ex) = self.block(o, &child(path, "otherwise"));
                        self.connect(std::slice::from_ref(&head), &en, Some("otherwise".into()));
                        exits.extend(ex);
                    }
                    None => exits.push(head.clone()),
                }
                (vec![head], exits)
            }
            BlockKind::Graph(g) => {
                let mut spans = std::collections::HashMap::new();
                for (name, node) in &g.nodes {
                    spans.insert(name.as_str(), self.block(node, &child(path, name)));
                }
                // The graph's step ends where the graph does.
                let done = self.block_node(
                    b,
                    path,
                    format!("{} end", b.label().unwrap_or("graph")),
                    Shape::Terminal,
                );
                for e in &g.edges {
                    let Some((_, from)) = spans.get(e.from.as_str()) else {
                        continue;
                    };
                    let from = from.clone();
                    let to = if e.to == END {
                        vec![done.clone()]
                    } else {
                        match spans.get(e.to.as_str()) {
                            Some((en, _)) => en.clone(),
                            None => continue,
                        }
                    };
                    let label = match (&e.exit, &e.when) {
                        (Some(x), _) => Some(x.clone()),
                        (None, Some(w)) => Some(short(&w.0)),
                        _ => None,
                    };
                    self.connect(&from, &to, label);
                }
                for (name, target) in &g.on_error {
                    if let (Some((_, from)), Some((to, _))) =
                        (spans.get(name.as_str()), spans.get(target.as_str()))
                    {
                        let (from, to) = (from.clone(), to.clone());
                        self.connect(&from, &to, Some("on error".into()));
                    }
                }
                // Nodes without outgoing edges end the graph.
                for name in g.nodes.keys() {
                    if !g.edges.iter().any(|e| e.from == *name) {
                        let ex = spans[name.as_str()].1.clone();
                        self.connect(&ex, std::slice::from_ref(&done), None);
                    }
                }
                let entry = spans
                    .get(g.entry.as_str())
                    .map(|(en, _)| en.clone())
                    .unwrap_or_default();
                (entry, vec![done])
            }
        }
    }

    /// Mermaid `flowchart` text.
    pub fn mermaid(&self) -> String {
        let esc = |s: &str| s.replace('"', "#quot;").replace('\n', "<br/>");
        let mut out = String::from("flowchart TD\n");
        for n in &self.nodes {
            let label = esc(&n.label);
            out.push_str(&match n.shape {
                Shape::Box => format!("  {}[\"{label}\"]\n", n.id),
                Shape::Decision => format!("  {}{{\"{label}\"}}\n", n.id),
                Shape::Terminal => format!("  {}([\"{label}\"])\n", n.id),
            });
        }
        for e in &self.edges {
            match &e.label {
                Some(l) => out.push_str(&format!("  {} -->|\"{}\"| {}\n", e.from, esc(l), e.to)),
                None => out.push_str(&format!("  {} --> {}\n", e.from, e.to)),
            }
        }
        out
    }

    /// Graphviz DOT text.
    pub fn dot(&self) -> String {
        let esc = |s: &str| {
            s.replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n")
        };
        let mut out =
            String::from("digraph weft {\n  rankdir=TB;\n  node [fontname=\"Helvetica\"];\n");
        for n in &self.nodes {
            let shape = match n.shape {
                Shape::Box => "box",
                Shape::Decision => "diamond",
                Shape::Terminal => "oval",
            };
            out.push_str(&format!(
                "  {} [label=\"{}\", shape={shape}];\n",
                n.id,
                esc(&n.label)
            ));
        }
        for e in &self.edges {
            match &e.label {
                Some(l) => out.push_str(&format!(
                    "  {} -> {} [label=\"{}\"];\n",
                    e.from,
                    e.to,
                    esc(l)
                )),
                None => out.push_str(&format!("  {} -> {};\n", e.from, e.to)),
            }
        }
        out.push_str("}\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::step_pattern;

    #[test]
    fn a_block_without_an_id_is_named_by_its_place_when_that_is_a_name() {
        use super::step_name;
        assert_eq!(step_name("root/machine/classify"), Some("classify"));
        assert_eq!(step_name("root/both/left"), Some("left"));
        assert_eq!(step_name("root/3"), None);
        assert_eq!(step_name("root/each/[*]"), None);
        assert_eq!(step_name("root/again/#*"), None);
        assert_eq!(step_name("root"), None);
    }

    #[test]
    fn a_step_pattern_generalizes_repetitions_only() {
        for (path, pattern) in [
            ("root/each/[12]/double", "root/each/[*]/double"),
            ("root/again/#0/tick", "root/again/#*/tick"),
            ("root/machine/count@3", "root/machine/count"),
            ("root/#hash/[x]/a@b", "root/#hash/[x]/a@b"),
            ("root", "root"),
        ] {
            assert_eq!(step_pattern(path), pattern, "{path}");
        }
    }
}
