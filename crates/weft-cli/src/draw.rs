//! Draws a flow's IR as a diagram: Mermaid for Markdown, DOT for Graphviz.

use weft_core::Flow;
use weft_core::ir::{Block, BlockKind, END};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Box,
    Decision,
    Terminal,
}

struct Node {
    id: String,
    label: String,
    shape: Shape,
}

struct Edge {
    from: String,
    to: String,
    label: Option<String>,
}

/// Nodes and edges of a flow, ready to print.
pub struct Diagram {
    nodes: Vec<Node>,
    edges: Vec<Edge>,
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
        let (entries, exits) = d.block(&flow.root);
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
        });
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

    fn leaf(&mut self, b: &Block, detail: String) -> (Vec<String>, Vec<String>) {
        let name = b.id.clone().unwrap_or_else(|| b.kind_name().to_owned());
        let label = if detail.is_empty() {
            name
        } else {
            format!("{name}\n{detail}")
        };
        let id = self.node(label, Shape::Box);
        (vec![id.clone()], vec![id])
    }

    /// Draws `b`; returns the nodes that enter it and the nodes that leave it.
    fn block(&mut self, b: &Block) -> (Vec<String>, Vec<String>) {
        match &b.kind {
            BlockKind::Llm(l) => self.leaf(b, format!("llm {}", l.model.as_deref().unwrap_or(""))),
            BlockKind::Code(c) => self.leaf(b, format!("code ({})", c.language)),
            BlockKind::Handler(h) => self.leaf(b, format!("handler {}", h.name)),
            BlockKind::Action(a) => self.leaf(b, format!("action {}", a.uses)),
            BlockKind::Approval(_) => self.leaf(b, "approval".into()),
            BlockKind::Passthrough => self.leaf(b, String::new()),
            BlockKind::Transform(_) => self.leaf(b, "transform".into()),
            BlockKind::SubFlow(s) => self.leaf(b, format!("subflow {}", s.flow)),
            BlockKind::Sequence(steps) if steps.is_empty() => self.leaf(b, String::new()),
            BlockKind::Sequence(steps) => {
                let mut entries = Vec::new();
                let mut exits: Vec<String> = Vec::new();
                for (i, s) in steps.iter().enumerate() {
                    let (en, ex) = self.block(s);
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
                let fork = self.node(
                    format!("{}\nparallel", b.id.as_deref().unwrap_or("fork")),
                    Shape::Decision,
                );
                let join = self.node("join".into(), Shape::Decision);
                for (name, child) in &p.branches {
                    let (en, ex) = self.block(child);
                    self.connect(std::slice::from_ref(&fork), &en, Some(name.clone()));
                    self.connect(&ex, std::slice::from_ref(&join), None);
                }
                (vec![fork], vec![join])
            }
            BlockKind::Map(m) => {
                let head = self.node(
                    format!(
                        "{}\nmap over {}",
                        b.id.as_deref().unwrap_or("map"),
                        short(&m.items.0.to_string())
                    ),
                    Shape::Decision,
                );
                let collect = self.node("collect".into(), Shape::Decision);
                let (en, ex) = self.block(&m.body);
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
                let head = self.node(
                    format!(
                        "{}\nloop ≤{} {cond}",
                        b.id.as_deref().unwrap_or("loop"),
                        l.max_iterations
                    ),
                    Shape::Decision,
                );
                let (en, ex) = self.block(&l.body);
                self.connect(std::slice::from_ref(&head), &en, None);
                self.connect(&ex, std::slice::from_ref(&head), Some("repeat".into()));
                (vec![head.clone()], vec![head])
            }
            BlockKind::Branch(br) => {
                let head = self.node(
                    b.id.clone().unwrap_or_else(|| "branch".into()),
                    Shape::Decision,
                );
                let mut exits = Vec::new();
                for c in &br.cases {
                    let (en, ex) = self.block(&c.then);
                    self.connect(std::slice::from_ref(&head), &en, Some(short(&c.when.0)));
                    exits.extend(ex);
                }
                match &br.otherwise {
                    Some(o) => {
                        let (en, ex) = self.block(o);
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
                    spans.insert(name.as_str(), self.block(node));
                }
                let done = self.node(
                    format!("{} end", b.id.as_deref().unwrap_or("graph")),
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
