//! A run's flow drawn with each block in the state its steps are in, and the edges the
//! run went along.

use std::collections::HashMap;
use weft_core::diagram::{Decor, Diagram, Edge, Node, NodeDecor, Shape, step_pattern};
use weft_engine::inspect::{RunDetail, StepDetail, StepStatus};

/// Where a drawn block stands in a run: the state of its steps taken together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeState {
    /// No step of it started yet (or ever, once the run ended).
    NotReached,
    Running,
    Waiting,
    Failed,
    /// It failed and a rescue took over.
    Rescued,
    Done,
    /// Done, and on the latest resume its result came from the journal.
    Replayed,
}

impl NodeState {
    pub(crate) fn class(self) -> &'static str {
        match self {
            NodeState::NotReached => "state-not-reached",
            NodeState::Running => "state-running",
            NodeState::Waiting => "state-waiting",
            NodeState::Failed => "state-failed",
            NodeState::Rescued => "state-rescued",
            NodeState::Done => "state-done",
            NodeState::Replayed => "state-replayed",
        }
    }

    pub(crate) fn label(self, run_ended: bool) -> &'static str {
        match self {
            NodeState::NotReached if run_ended => "not reached",
            NodeState::NotReached => "queued",
            NodeState::Running => "running",
            NodeState::Waiting => "waiting",
            NodeState::Failed => "failed",
            NodeState::Rescued => "rescued",
            NodeState::Done => "done",
            NodeState::Replayed => "replayed from the journal",
        }
    }

    /// The state of a block whose steps are `steps` (the most telling one wins: a
    /// running or waiting step before a failed one, a failed one before done ones).
    fn of(steps: &[&StepDetail]) -> NodeState {
        let any = |f: &dyn Fn(StepStatus) -> bool| steps.iter().any(|s| f(s.status));
        if steps.is_empty() {
            NodeState::NotReached
        } else if any(&|s| matches!(s, StepStatus::Running | StepStatus::Retrying)) {
            NodeState::Running
        } else if any(&|s| s == StepStatus::Waiting) {
            NodeState::Waiting
        } else if any(&|s| s == StepStatus::Failed) {
            NodeState::Failed
        } else if any(&|s| s == StepStatus::Rescued) {
            NodeState::Rescued
        } else if steps.iter().all(|s| s.replayed) {
            NodeState::Replayed
        } else {
            NodeState::Done
        }
    }
}

/// Each drawn block's steps, by the block's path pattern.
pub(crate) struct StepsByNode<'a> {
    by_pattern: HashMap<String, Vec<&'a StepDetail>>,
}

impl<'a> StepsByNode<'a> {
    pub(crate) fn new(run: &'a RunDetail) -> Self {
        let mut by_pattern: HashMap<String, Vec<&StepDetail>> = HashMap::new();
        for s in &run.steps {
            by_pattern.entry(step_pattern(&s.path)).or_default().push(s);
        }
        StepsByNode { by_pattern }
    }

    fn steps(&self, n: &Node) -> &[&'a StepDetail] {
        n.path
            .as_deref()
            .and_then(|p| self.by_pattern.get(p))
            .map_or(&[], Vec::as_slice)
    }

    /// The block's state; a start is done once the run started, an end once it completed.
    pub(crate) fn state(&self, n: &Node, run: &RunDetail) -> NodeState {
        if n.shape == Shape::Terminal && n.path.is_none() {
            let reached = if n.label == "end" {
                run.status == "completed"
            } else {
                !run.steps.is_empty()
            };
            return if reached {
                NodeState::Done
            } else {
                NodeState::NotReached
            };
        }
        NodeState::of(self.steps(n))
    }
}

/// The flow of `run` as SVG: each node in its state, linked to its latest step (which
/// `?step=` selects), the edges between reached nodes marked taken.
pub(crate) fn svg(diagram: &Diagram, run: &RunDetail, selected: Option<&str>) -> String {
    let steps = StepsByNode::new(run);
    let ended = matches!(run.status, "completed" | "failed" | "cancelled");
    let states: HashMap<&str, NodeState> = diagram
        .nodes
        .iter()
        .map(|n| (n.id.as_str(), steps.state(n, run)))
        .collect();
    let node = |n: &Node| {
        let state = states[n.id.as_str()];
        let latest = steps.steps(n).last();
        let mut class = state.class().to_owned();
        if latest.is_some_and(|s| Some(s.path.as_str()) == selected) {
            class.push_str(" selected");
        }
        let count = steps.steps(n).len();
        let repeats = if count > 1 {
            format!(", {count} steps")
        } else {
            String::new()
        };
        NodeDecor {
            class,
            href: latest.map(|s| crate::step::href(&run.run_id, &s.path)),
            title: Some(format!(
                "{}: {}{repeats}",
                n.label.replace('\n', " "),
                state.label(ended)
            )),
        }
    };
    let reached = |id: &str| states.get(id).is_some_and(|s| *s != NodeState::NotReached);
    let edge = |e: &Edge| {
        if reached(&e.from) && reached(&e.to) {
            "taken".to_owned()
        } else {
            String::new()
        }
    };
    diagram.svg_decorated(&Decor {
        node: &node,
        edge: &edge,
    })
}
