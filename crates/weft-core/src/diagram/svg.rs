//! A diagram laid out in layers and drawn as SVG, with no tool outside Weft: each node
//! is a `<g>` whose `id` is `node-<id>` and whose `data-path` is its block's step-path
//! pattern, so a page can colour it as a run's events arrive.
//!
//! The layout is the classic layered one, kept small: edges that close a cycle are
//! turned around for layering, each node goes one layer below its furthest
//! predecessor, a few barycenter sweeps order each layer to cut crossings, and the
//! layers are centred.

use super::{Diagram, Shape};
use std::collections::HashMap;
use std::fmt::Write;

/// Pixels per character of a label, and the padding around it.
const CHAR_W: f64 = 7.0;
const PAD: f64 = 16.0;
const LINE_H: f64 = 16.0;
const GAP_X: f64 = 40.0;
const GAP_Y: f64 = 56.0;
const MIN_W: f64 = 60.0;
const MAX_CHARS: usize = 36;
/// Ordering sweeps: enough for flows people write, bounded for huge ones.
const SWEEPS: usize = 4;

struct Placed {
    x: f64,
    y: f64,
    w: f64,
    h: f64,
}

/// Each node's layer, with the edges that close cycles (turned around) known.
fn layers(d: &Diagram, index: &HashMap<&str, usize>) -> (Vec<usize>, Vec<bool>) {
    let n = d.nodes.len();
    let mut out: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    for (e, edge) in d.edges.iter().enumerate() {
        if let (Some(&a), Some(&b)) = (index.get(edge.from.as_str()), index.get(edge.to.as_str())) {
            out[a].push((b, e));
        }
    }
    // Depth-first from each unvisited node in drawing order: an edge to a node still
    // on the stack closes a cycle.
    let mut back = vec![false; d.edges.len()];
    let mut state = vec![0u8; n]; // 0 new, 1 on the stack, 2 done
    for root in 0..n {
        if state[root] != 0 {
            continue;
        }
        let mut stack = vec![(root, 0usize)];
        state[root] = 1;
        while let Some((v, i)) = stack.pop() {
            if let Some(&(w, e)) = out[v].get(i) {
                stack.push((v, i + 1));
                match state[w] {
                    0 => {
                        state[w] = 1;
                        stack.push((w, 0));
                    }
                    1 => back[e] = true,
                    _ => {}
                }
            } else {
                state[v] = 2;
            }
        }
    }
    // Longest path over the acyclic edges, in topological order (Kahn).
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut preds = vec![0usize; n];
    for (e, edge) in d.edges.iter().enumerate() {
        let (Some(&a), Some(&b)) = (index.get(edge.from.as_str()), index.get(edge.to.as_str()))
        else {
            continue;
        };
        let (a, b) = if back[e] { (b, a) } else { (a, b) };
        if a != b {
            succ[a].push(b);
            preds[b] += 1;
        }
    }
    let mut layer = vec![0usize; n];
    let mut ready: Vec<usize> = (0..n).filter(|&v| preds[v] == 0).collect();
    while let Some(v) = ready.pop() {
        for &w in &succ[v] {
            layer[w] = layer[w].max(layer[v] + 1);
            preds[w] -= 1;
            if preds[w] == 0 {
                ready.push(w);
            }
        }
    }
    (layer, back)
}

/// Nodes by layer, ordered to cut crossings.
fn ordered(d: &Diagram, index: &HashMap<&str, usize>, layer: &[usize]) -> Vec<Vec<usize>> {
    let depth = layer.iter().copied().max().map_or(0, |m| m + 1);
    let mut rows: Vec<Vec<usize>> = vec![Vec::new(); depth];
    for (v, &l) in layer.iter().enumerate() {
        rows[l].push(v);
    }
    // Each node's neighbours in other layers.
    let mut near: Vec<Vec<usize>> = vec![Vec::new(); layer.len()];
    for e in &d.edges {
        if let (Some(&a), Some(&b)) = (index.get(e.from.as_str()), index.get(e.to.as_str()))
            && layer[a] != layer[b]
        {
            near[a].push(b);
            near[b].push(a);
        }
    }
    for sweep in 0..SWEEPS {
        let mut pos = vec![0.0; layer.len()];
        for row in &rows {
            for (i, &v) in row.iter().enumerate() {
                pos[v] = i as f64;
            }
        }
        let down = sweep % 2 == 0;
        for l in 0..depth {
            let l = if down { l } else { depth - 1 - l };
            let mut keyed: Vec<(f64, usize)> = rows[l]
                .iter()
                .map(|&v| {
                    let key = if near[v].is_empty() {
                        pos[v]
                    } else {
                        near[v].iter().map(|&w| pos[w]).sum::<f64>() / near[v].len() as f64
                    };
                    (key, v)
                })
                .collect();
            keyed.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
            rows[l] = keyed.into_iter().map(|(_, v)| v).collect();
            for (i, &v) in rows[l].iter().enumerate() {
                pos[v] = i as f64;
            }
        }
    }
    rows
}

fn label_lines(label: &str) -> Vec<String> {
    label
        .lines()
        .map(|l| {
            if l.chars().count() > MAX_CHARS {
                format!("{}…", l.chars().take(MAX_CHARS - 1).collect::<String>())
            } else {
                l.to_owned()
            }
        })
        .collect()
}

fn size(label: &str, shape: Shape) -> (f64, f64) {
    let lines = label_lines(label);
    let chars = lines.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    let w = (chars as f64 * CHAR_W + 2.0 * PAD).max(MIN_W);
    let h = lines.len().max(1) as f64 * LINE_H + PAD;
    match shape {
        // A diamond needs room around its text.
        Shape::Decision => (w * 1.3, h * 1.5),
        _ => (w, h),
    }
}

fn place(d: &Diagram, rows: &[Vec<usize>]) -> (Vec<Placed>, f64, f64) {
    let sizes: Vec<(f64, f64)> = d.nodes.iter().map(|n| size(&n.label, n.shape)).collect();
    let widths: Vec<f64> = rows
        .iter()
        .map(|r| {
            r.iter().map(|&v| sizes[v].0).sum::<f64>() + GAP_X * r.len().saturating_sub(1) as f64
        })
        .collect();
    let total_w = widths.iter().copied().fold(0.0, f64::max) + 2.0 * GAP_X;
    let mut placed: Vec<Placed> = sizes
        .iter()
        .map(|&(w, h)| Placed {
            x: 0.0,
            y: 0.0,
            w,
            h,
        })
        .collect();
    let mut y = GAP_Y / 2.0;
    for (l, row) in rows.iter().enumerate() {
        let row_h = row.iter().map(|&v| sizes[v].1).fold(0.0, f64::max);
        let mut x = (total_w - widths[l]) / 2.0;
        for &v in row {
            placed[v].x = x + sizes[v].0 / 2.0;
            placed[v].y = y + row_h / 2.0;
            x += sizes[v].0 + GAP_X;
        }
        y += row_h + GAP_Y;
    }
    (placed, total_w, y - GAP_Y / 2.0)
}

/// XML text with `&`, `<`, `>` and quotes escaped.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// What a page adds to a drawn node: classes (its state in a run), a link and a
/// tooltip.
#[derive(Debug, Clone, Default)]
pub struct NodeDecor {
    /// Classes added to the node's `<g>`, space-separated.
    pub class: String,
    /// Where following the node leads (it is then wrapped in an SVG `<a>`, focusable and
    /// followed with the keyboard).
    pub href: Option<String>,
    /// A tooltip and accessible name (`<title>`).
    pub title: Option<String>,
}

/// How to decorate a drawing: one call per node and per edge.
pub struct Decor<'a> {
    /// A node's decoration.
    pub node: &'a dyn Fn(&super::Node) -> NodeDecor,
    /// Classes added to an edge's `<path>` (e.g. that a run took it).
    pub edge: &'a dyn Fn(&super::Edge) -> String,
}

impl Diagram {
    /// The diagram as a standalone SVG document.
    pub fn svg(&self) -> String {
        self.svg_decorated(&Decor {
            node: &|_| NodeDecor::default(),
            edge: &|_| String::new(),
        })
    }

    /// The diagram as SVG, each node and edge decorated by `decor`.
    pub fn svg_decorated(&self, decor: &Decor<'_>) -> String {
        let index: HashMap<&str, usize> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.id.as_str(), i))
            .collect();
        let (layer, back) = layers(self, &index);
        let rows = ordered(self, &index, &layer);
        let (placed, w, h) = place(self, &rows);
        let mut edges = String::new();
        let mut right = w;
        let mut loops = 0.0;
        for (e, edge) in self.edges.iter().enumerate() {
            let (Some(&a), Some(&b)) = (index.get(edge.from.as_str()), index.get(edge.to.as_str()))
            else {
                continue;
            };
            let (a, b) = (&placed[a], &placed[b]);
            let label = edge.label.as_deref();
            let class = (decor.edge)(edge);
            if back[e] || b.y <= a.y {
                // Round the right of every node between them, each cycle a lane further out.
                let lane = margin(&placed, b.y.min(a.y), a.y.max(b.y)) + loops;
                loops += 10.0;
                let label_w =
                    label.map_or(0.0, |l| l.chars().count().min(MAX_CHARS) as f64 * CHAR_W);
                right = right.max(lane + GAP_X / 2.0 + label_w);
                back_edge_svg(&mut edges, a, b, lane, label, &class);
            } else {
                edge_svg(&mut edges, a, b, label, &class);
            }
        }
        let mut out = String::new();
        let _ = write!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" class="weft-diagram" viewBox="0 0 {right:.0} {h:.0}" width="{right:.0}" height="{h:.0}" font-family="sans-serif" font-size="12"><defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z"/></marker></defs>"#
        );
        out.push_str(&edges);
        for (i, n) in self.nodes.iter().enumerate() {
            node_svg(&mut out, n, &placed[i], &(decor.node)(n));
        }
        out.push_str("</svg>\n");
        out
    }
}

/// The x right of every node whose centre lies between `top` and `bottom`.
fn margin(placed: &[Placed], top: f64, bottom: f64) -> f64 {
    placed
        .iter()
        .filter(|p| p.y >= top && p.y <= bottom)
        .map(|p| p.x + p.w / 2.0)
        .fold(0.0, f64::max)
        + GAP_X / 2.0
}

/// An edge down the drawing, from `a`'s bottom to `b`'s top.
fn edge_svg(out: &mut String, a: &Placed, b: &Placed, label: Option<&str>, class: &str) {
    let (x1, y1, x2, y2) = (a.x, a.y + a.h / 2.0, b.x, b.y - b.h / 2.0);
    let my = (y1 + y2) / 2.0;
    let class = edge_class("edge", class);
    let _ = write!(
        out,
        r##"<path class="{class}" d="M {x1:.1} {y1:.1} C {x1:.1} {my:.1} {x2:.1} {my:.1} {x2:.1} {y2:.1}" fill="none" stroke="#666" marker-end="url(#arrow)"/>"##
    );
    edge_label(out, (x1 + x2) / 2.0 + 4.0, my, label);
}

/// An edge that closes a cycle: out of `a`'s bottom, up the lane at `lane`, into `b`'s
/// top, crossing no node.
fn back_edge_svg(
    out: &mut String,
    a: &Placed,
    b: &Placed,
    lane: f64,
    label: Option<&str>,
    class: &str,
) {
    let (x1, y1) = (a.x, a.y + a.h / 2.0);
    let (x2, y2) = (b.x, b.y - b.h / 2.0);
    let (below, above) = (y1 + GAP_Y / 3.0, y2 - GAP_Y / 3.0);
    let class = edge_class("edge back", class);
    let _ = write!(
        out,
        r##"<path class="{class}" d="M {x1:.1} {y1:.1} L {x1:.1} {below:.1} L {lane:.1} {below:.1} L {lane:.1} {above:.1} L {x2:.1} {above:.1} L {x2:.1} {y2:.1}" fill="none" stroke="#666" marker-end="url(#arrow)"/>"##
    );
    edge_label(out, lane + 4.0, (below + above) / 2.0, label);
}

/// An edge's class attribute: its own classes and the decoration's, escaped.
fn edge_class(own: &str, extra: &str) -> String {
    if extra.is_empty() {
        own.to_owned()
    } else {
        esc(&format!("{own} {extra}"))
    }
}

fn edge_label(out: &mut String, x: f64, y: f64, label: Option<&str>) {
    if let Some(l) = label {
        let _ = write!(
            out,
            r##"<text class="edge-label" x="{x:.1}" y="{y:.1}" fill="#444">{}</text>"##,
            esc(&label_lines(l).join(" "))
        );
    }
}

fn node_svg(out: &mut String, n: &super::Node, p: &Placed, decor: &NodeDecor) {
    let kind = n.kind.as_deref().unwrap_or("none");
    let shape = match n.shape {
        Shape::Box => "box",
        Shape::Decision => "decision",
        Shape::Terminal => "terminal",
    };
    if let Some(href) = &decor.href {
        let _ = write!(out, r#"<a href="{}">"#, esc(href));
    }
    let _ = write!(
        out,
        r#"<g id="node-{}" class="node {shape} kind-{}"#,
        esc(&n.id),
        esc(kind)
    );
    if !decor.class.is_empty() {
        let _ = write!(out, " {}", esc(&decor.class));
    }
    out.push('"');
    if let Some(path) = &n.path {
        let _ = write!(out, r#" data-path="{}""#, esc(path));
    }
    out.push('>');
    if let Some(title) = &decor.title {
        let _ = write!(out, "<title>{}</title>", esc(title));
    }
    let (x, y, w, h) = (p.x - p.w / 2.0, p.y - p.h / 2.0, p.w, p.h);
    let _ = match n.shape {
        Shape::Box => write!(
            out,
            r##"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" rx="4" fill="#fff" stroke="#333"/>"##
        ),
        Shape::Terminal => write!(
            out,
            r##"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" rx="{:.1}" fill="#f4f4f4" stroke="#333"/>"##,
            h / 2.0
        ),
        Shape::Decision => write!(
            out,
            r##"<polygon points="{:.1},{y:.1} {:.1},{:.1} {:.1},{:.1} {x:.1},{:.1}" fill="#fff" stroke="#333"/>"##,
            p.x,
            x + w,
            p.y,
            p.x,
            y + h,
            p.y
        ),
    };
    let lines = label_lines(&n.label);
    let top = p.y - (lines.len() as f64 - 1.0) * LINE_H / 2.0 + 4.0;
    for (i, line) in lines.iter().enumerate() {
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            p.x,
            top + i as f64 * LINE_H,
            esc(line)
        );
    }
    out.push_str("</g>");
    if decor.href.is_some() {
        out.push_str("</a>");
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Diagram, Edge, Node, Shape};

    fn node(id: &str, label: &str, shape: Shape) -> Node {
        Node {
            id: id.into(),
            label: label.into(),
            shape,
            kind: Some("llm".into()),
            path: Some(format!("root/{id}")),
        }
    }

    fn edge(from: &str, to: &str) -> Edge {
        Edge {
            from: from.into(),
            to: to.into(),
            label: None,
        }
    }

    fn y_of(svg: &str, id: &str) -> f64 {
        let g = svg.split(&format!("id=\"node-{id}\"")).nth(1).unwrap();
        let y = g.split(" y=\"").nth(1).unwrap();
        y.split('"').next().unwrap().parse().unwrap()
    }

    #[test]
    fn every_node_is_drawn_with_its_id_and_path_in_layers_even_around_a_cycle() {
        let d = Diagram {
            nodes: vec![
                node("a", "start <here> & \"there\"", Shape::Terminal),
                node("b", "loop", Shape::Decision),
                node("c", "body", Shape::Box),
                node("d", "end", Shape::Terminal),
            ],
            edges: vec![
                edge("a", "b"),
                edge("b", "c"),
                edge("c", "b"),
                edge("b", "d"),
            ],
        };
        let svg = d.svg();
        for id in ["a", "b", "c", "d"] {
            assert!(svg.contains(&format!("id=\"node-{id}\"")), "{id}");
            assert!(svg.contains(&format!("data-path=\"root/{id}\"")), "{id}");
        }
        assert!(
            svg.contains("start &lt;here&gt; &amp; &quot;there&quot;"),
            "{svg}"
        );
        assert_eq!(svg.matches("<path class=\"edge").count(), 4);
        assert_eq!(
            svg.matches("class=\"edge back\"").count(),
            1,
            "c -> b closes the cycle"
        );
        // The cycle's closing edge does not push the loop below its body.
        assert!(y_of(&svg, "a") < y_of(&svg, "b"));
        assert!(y_of(&svg, "b") < y_of(&svg, "c"));
        assert!(y_of(&svg, "b") < y_of(&svg, "d"));
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn decorations_add_classes_links_and_titles_escaped() {
        let d = Diagram {
            nodes: vec![node("a", "a", Shape::Box), node("b", "b", Shape::Box)],
            edges: vec![edge("a", "b")],
        };
        let svg = d.svg_decorated(&super::Decor {
            node: &|n| super::NodeDecor {
                class: format!("state-{}", n.id),
                href: (n.id == "a").then(|| "/runs/r?step=root/a&x=\"1\"".to_owned()),
                title: Some(format!("{} <done>", n.id)),
            },
            edge: &|_| "taken".to_owned(),
        });
        assert!(svg.contains(r#"<a href="/runs/r?step=root/a&amp;x=&quot;1&quot;"><g id="node-a" class="node box kind-llm state-a""#), "{svg}");
        assert!(svg.contains("<title>a &lt;done&gt;</title>"));
        assert!(svg.contains(r#"<g id="node-b" class="node box kind-llm state-b""#));
        assert_eq!(svg.matches("</a>").count(), 1, "only a is a link");
        assert!(svg.contains(r#"<path class="edge taken""#));
        assert_eq!(d.svg().matches("state-").count(), 0);
    }

    #[test]
    fn an_empty_diagram_is_an_empty_drawing() {
        let d = Diagram {
            nodes: vec![],
            edges: vec![],
        };
        assert!(d.svg().contains("</svg>"));
    }
}
