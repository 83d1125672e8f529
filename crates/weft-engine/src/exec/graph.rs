//! Graphs: named nodes with conditional edges, cycles (bounded by a step limit), fan-out
//! to concurrent branches and fan-in at join nodes.
//!
//! A token walks the graph. When a node routes to several targets, the token forks into
//! branches under a new frame; a branch either reaches a join node (it waits there) or
//! ends. When every branch of a frame has settled, the join node runs once with the
//! arrivals `[{output, state}]` in branch order, and the branches' state writes merge in
//! branch order. A join node joins the nearest fan-out only.
//!
//! Step keys name the branch lineage and the visit count of the node within it, so a
//! replayed run reaches the same keys in the same order whatever the scheduling was.

use super::exec;
use crate::run::{Cx, Exec, Outcome, Stop, Suspension};
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use weft_core::event::EventKind;
use weft_core::ir::{END, Edge, GraphSpec, Routing};
use weft_core::value::{Shared, SharedMap};
use weft_core::{BlockError, ErrorKind, Patch, State, Value};

struct Token<'g> {
    node: &'g str,
    input: Shared,
    state: State,
    /// State writes since this token's frame forked (or since the graph began).
    patch: Patch,
    lineage: String,
    frame: Option<usize>,
    branch: usize,
}

struct Arrival {
    output: Shared,
    state: State,
    patch: Patch,
}

struct Frame<'g> {
    parent: Option<usize>,
    parent_branch: usize,
    lineage: String,
    base_state: State,
    base_patch: Patch,
    open: usize,
    arrived: Vec<Option<Arrival>>,
    ended: Vec<Option<(Shared, Patch)>>,
    join: Option<&'g str>,
}

struct Walk<'g> {
    cx: &'g Cx<'g>,
    g: &'g GraphSpec,
    edges: HashMap<&'g str, Vec<&'g Edge>>,
    frames: Vec<Frame<'g>>,
    visits: HashMap<(String, &'g str), u32>,
    /// Nodes executed so far, by name: running one again is a step around a cycle.
    executed: HashSet<&'g str>,
    /// Executions of nodes that had run before, bounded by `max_steps`.
    repeats: u32,
    max_steps: u32,
    tasks: FuturesUnordered<BoxFuture<'g, (Token<'g>, Exec)>>,
    result: Option<Outcome>,
    suspension: Suspension,
}

pub(crate) async fn run<'g>(cx: &'g Cx<'g>, g: &'g GraphSpec) -> Exec {
    let mut edges: HashMap<&str, Vec<&Edge>> = HashMap::new();
    for e in &g.edges {
        edges.entry(e.from.as_str()).or_default().push(e);
    }
    let mut walk = Walk {
        cx,
        g,
        edges,
        frames: Vec::new(),
        visits: HashMap::new(),
        executed: HashSet::new(),
        repeats: 0,
        max_steps: g.max_steps.unwrap_or(cx.flow.limits.max_graph_steps),
        tasks: FuturesUnordered::new(),
        result: None,
        suspension: Suspension::default(),
    };
    let entry = g
        .nodes
        .get_key_value(&g.entry)
        .map(|(k, _)| k.as_str())
        .ok_or_else(|| {
            BlockError::new(
                ErrorKind::Config,
                format!("unknown entry node `{}`", g.entry),
            )
        })?;
    walk.launch(Token {
        node: entry,
        input: cx.input.clone(),
        state: cx.state.clone(),
        patch: Patch::default(),
        lineage: String::new(),
        frame: None,
        branch: 0,
    })?;
    while let Some((token, result)) = walk.tasks.next().await {
        match result {
            Ok(out) => walk.advance(token, out)?,
            Err(Stop::Failed(e)) => walk.fail(token, e)?,
            Err(Stop::Suspended(s)) => {
                // An isolated branch's writes stay in the branch.
                let s = if walk.g.isolate && token.frame.is_some() {
                    s.without_writes()
                } else {
                    s.after(token.patch)
                };
                walk.suspension.merge(s);
            }
        }
    }
    if !walk.suspension.pending.is_empty() {
        let done = walk.written_so_far();
        return Err(Stop::Suspended(
            std::mem::take(&mut walk.suspension).after(done),
        ));
    }
    walk.result.ok_or_else(|| {
        Stop::Failed(BlockError::new(
            ErrorKind::Limit,
            "the graph ended with branches still waiting at a join node",
        ))
    })
}

impl<'g> Walk<'g> {
    /// The writes of every branch that finished or waits at a join, after the writes
    /// each open frame made before it forked (patches are plain writes, so one that
    /// appears twice does no harm).
    fn written_so_far(&self) -> Patch {
        let mut patch = Patch::default();
        for frame in &self.frames {
            patch.extend(frame.base_patch.clone());
            if self.g.isolate {
                continue;
            }
            for a in frame.arrived.iter().flatten() {
                patch.extend(a.patch.clone());
            }
            for (_, p) in frame.ended.iter().flatten() {
                patch.extend(p.clone());
            }
        }
        if let Some(out) = &self.result {
            patch.extend(out.patch.clone());
        }
        patch
    }

    fn node_name(&self, name: &str) -> Result<&'g str, Stop> {
        self.g
            .nodes
            .get_key_value(name)
            .map(|(k, _)| k.as_str())
            .ok_or_else(|| {
                Stop::Failed(BlockError::new(
                    ErrorKind::Config,
                    format!("unknown node `{name}`"),
                ))
            })
    }

    fn launch(&mut self, token: Token<'g>) -> Result<(), Stop> {
        if self.cx.run.cancel.is_cancelled() {
            return Err(Stop::Failed(BlockError::new(
                ErrorKind::Cancelled,
                "the run was cancelled",
            )));
        }
        // Only repeats count: a graph without cycles never reaches the limit, however
        // many nodes it has.
        if !self.executed.insert(token.node) {
            self.repeats += 1;
            if self.repeats > self.max_steps {
                return Err(Stop::Failed(
                    BlockError::new(
                        ErrorKind::Limit,
                        format!(
                            "the graph ran its nodes again more than {} times (at `{}`); it probably loops forever",
                            self.max_steps, token.node
                        ),
                    )
                    .with_detail(serde_json::json!({"hint": "raise the graph's max_steps (or the flow's limits.max_graph_steps) if the loop is meant to run longer"})),
                ));
            }
        }
        let visit = self
            .visits
            .entry((token.lineage.clone(), token.node))
            .or_insert(0);
        let mut seg = String::new();
        if !token.lineage.is_empty() {
            seg.push_str(&token.lineage);
            seg.push('/');
        }
        seg.push_str(token.node);
        if *visit > 0 {
            seg.push('@');
            seg.push_str(&visit.to_string());
        }
        *visit += 1;
        let block = &self.g.nodes[token.node];
        let ncx = self
            .cx
            .child(&seg, token.input.clone(), token.state.clone());
        self.tasks.push(Box::pin(async move {
            let r = exec(ncx, block).await;
            (token, r)
        }));
        Ok(())
    }

    fn fail(&mut self, token: Token<'g>, e: BlockError) -> Result<(), Stop> {
        let Some(target) = self.g.on_error.get(token.node) else {
            return Err(Stop::Failed(e));
        };
        let target = self.node_name(target)?;
        self.route_event(token.node, target);
        let input = serde_json::json!({"error": e, "input": token.input});
        self.launch(Token {
            node: target,
            input: Shared::new(input),
            ..token
        })
    }

    fn route_event(&self, from: &str, to: &str) {
        self.cx.run.emitter.emit(|| EventKind::RouteTaken {
            path: self.cx.key.clone(),
            from: Some(from.to_owned()),
            to: to.to_owned(),
        });
    }

    fn targets(&self, token: &Token<'g>, out: &Outcome) -> Result<Vec<&'g str>, Stop> {
        let Some(edges) = self.edges.get(token.node) else {
            return Ok(Vec::new());
        };
        let mut scope = self.cx.scope();
        scope.bind("input", token.input.clone());
        scope.bind_map("state", token.state.shared().clone());
        scope.bind("output", out.output.clone());
        scope.bind(
            "exit",
            Arc::new(
                out.exit
                    .as_deref()
                    .map_or(Value::Null, |x| Value::String(x.to_owned())),
            ),
        );
        let mut matched: Vec<&'g Edge> = Vec::new();
        for e in edges {
            if let Some(want) = &e.exit
                && out.exit.as_deref() != Some(want.as_str())
            {
                continue;
            }
            if let Some(w) = &e.when
                && !self.cx.truthy(&w.0, &scope)?
            {
                continue;
            }
            matched.push(e);
            if self.g.routing == Routing::First && !e.parallel {
                break;
            }
        }
        if matched.is_empty() && self.g.fail_unrouted {
            return Err(Stop::Failed(unrouted(token.node, out, edges)));
        }
        let chosen: Vec<&'g Edge> = match (self.g.routing, matched.first()) {
            (_, None) => Vec::new(),
            (Routing::All, _) => matched,
            (Routing::First, Some(first)) if first.parallel => {
                matched.into_iter().filter(|e| e.parallel).collect()
            }
            (Routing::First, Some(first)) => vec![*first],
        };
        for e in &chosen {
            self.route_event(token.node, &e.to);
        }
        Ok(chosen.into_iter().map(|e| e.to.as_str()).collect())
    }

    fn advance(&mut self, mut token: Token<'g>, out: Outcome) -> Result<(), Stop> {
        token.state.apply(&out.patch);
        let targets = self.targets(&token, &out)?;
        token.patch.extend_compacting(out.patch);
        let live: Vec<&'g str> = targets.into_iter().filter(|t| *t != END).collect();
        match live.len() {
            0 => self.end(token, out.output, out.exit),
            1 => {
                let node = self.node_name(live[0])?;
                self.arrive(Token {
                    node,
                    input: out.output,
                    ..token
                })
            }
            k => {
                let f = self.frames.len();
                self.frames.push(Frame {
                    parent: token.frame,
                    parent_branch: token.branch,
                    lineage: token.lineage.clone(),
                    base_state: token.state.clone(),
                    base_patch: token.patch,
                    open: k,
                    arrived: (0..k).map(|_| None).collect(),
                    ended: (0..k).map(|_| None).collect(),
                    join: None,
                });
                for (i, t) in live.into_iter().enumerate() {
                    let lineage = if token.lineage.is_empty() {
                        format!("b{i}")
                    } else {
                        format!("{}.{i}", token.lineage)
                    };
                    let node = self.node_name(t)?;
                    self.arrive(Token {
                        node,
                        input: out.output.clone(),
                        state: token.state.clone(),
                        patch: Patch::default(),
                        lineage,
                        frame: Some(f),
                        branch: i,
                    })?;
                }
                Ok(())
            }
        }
    }

    fn arrive(&mut self, token: Token<'g>) -> Result<(), Stop> {
        let is_join = self.g.joins.iter().any(|j| j == token.node);
        let Some(f) = token.frame.filter(|_| is_join) else {
            return self.launch(token);
        };
        let frame = &mut self.frames[f];
        match frame.join {
            Some(j) if j != token.node => {
                return Err(Stop::Failed(BlockError::new(
                    ErrorKind::Config,
                    format!(
                        "branches of one fan-out reached two join nodes, `{j}` and `{}`; a join joins the nearest fan-out",
                        token.node
                    ),
                )));
            }
            _ => frame.join = Some(token.node),
        }
        frame.arrived[token.branch] = Some(Arrival {
            output: token.input,
            state: token.state,
            patch: token.patch,
        });
        frame.open -= 1;
        self.settle(f)
    }

    fn end(
        &mut self,
        token: Token<'g>,
        output: Shared,
        exit: Option<Arc<str>>,
    ) -> Result<(), Stop> {
        match token.frame {
            None => {
                self.result = Some(Outcome {
                    exit,
                    patch: token.patch,
                    ..Outcome::of(output)
                });
                Ok(())
            }
            Some(f) => {
                let frame = &mut self.frames[f];
                frame.ended[token.branch] = Some((output, token.patch));
                frame.open -= 1;
                self.settle(f)
            }
        }
    }

    /// Once every branch of frame `f` has arrived or ended, runs its join or ends it.
    fn settle(&mut self, f: usize) -> Result<(), Stop> {
        if self.frames[f].open > 0 {
            return Ok(());
        }
        let isolate = self.g.isolate;
        let frame = &mut self.frames[f];
        let mut merged = Patch::default();
        let mut arrivals = Vec::new();
        let mut last_output = None;
        for i in 0..frame.arrived.len() {
            if let Some(a) = frame.arrived[i].take() {
                if !isolate {
                    merged.extend(a.patch);
                }
                // The join's input points at each branch's output and state.
                let arrival: SharedMap = [
                    ("output".to_owned(), a.output.clone()),
                    ("state".to_owned(), a.state.to_shared()),
                ]
                .into_iter()
                .collect();
                arrivals.push(Shared::from(arrival));
                last_output = Some(a.output);
            } else if let Some((output, patch)) = frame.ended[i].take() {
                if !isolate {
                    merged.extend(patch);
                }
                last_output = Some(output);
            }
        }
        let mut state = frame.base_state.clone();
        state.apply(&merged);
        let mut patch = std::mem::take(&mut frame.base_patch);
        patch.extend(merged);
        let token = Token {
            node: "",
            input: Shared::null(),
            state,
            patch,
            lineage: frame.lineage.clone(),
            frame: frame.parent,
            branch: frame.parent_branch,
        };
        match frame.join {
            Some(join) => self.launch(Token {
                node: join,
                input: Shared::from(arrivals),
                ..token
            }),
            None => {
                let output = last_output.unwrap_or_default();
                self.end(token, output, None)
            }
        }
    }
}

/// Why `node`, which has `edges`, took none of them.
fn unrouted(node: &str, out: &Outcome, edges: &[&Edge]) -> BlockError {
    let ways: Vec<String> = edges
        .iter()
        .map(|e| {
            let how = match (&e.exit, &e.when) {
                (Some(x), _) => format!("on `{x}`"),
                (None, Some(w)) => format!("when {}", w.0),
                (None, None) => "always".to_owned(),
            };
            format!("{how} to `{}`", e.to)
        })
        .collect();
    let exit = match out.exit.as_deref() {
        Some(x) => format!("took exit `{x}`"),
        None => "took no exit".to_owned(),
    };
    BlockError::new(
        ErrorKind::Unrouted,
        format!(
            "`{node}` {exit}, and none of its transitions matches ({})",
            ways.join("; ")
        ),
    )
    .with_detail(serde_json::json!({"node": node, "exit": out.exit.as_deref()}))
}
