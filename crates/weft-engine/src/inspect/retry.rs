//! What retrying a failed run would do, before it is done: which steps keep their
//! journaled result, which run again, and which of those call a model or the outside
//! world — so a person confirming a retry knows what it will cost.

use super::{RunDetail, StepDetail, StepStatus};
use crate::{Engine, EngineError};
use serde::Serialize;
use std::collections::HashSet;
use weft_core::diagram::{Diagram, step_pattern};
use weft_core::ports::EntryKind;

/// What a retry of one run would do.
#[derive(Debug, Clone, Serialize)]
pub struct RetryPlan {
    /// The run.
    pub run_id: String,
    /// Whether the run may be retried now (it failed or was cancelled).
    pub retryable: bool,
    /// Each step the run reached, with its fate on a retry, in the order they started.
    pub steps: Vec<PlannedStep>,
    /// Blocks the run never reached, which the retry runs if it gets that far.
    pub not_reached: Vec<PlannedStep>,
}

/// One step of a retry plan.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedStep {
    /// The step's path (a block's path pattern, for blocks not reached).
    pub path: String,
    /// The block's kind.
    pub kind: String,
    /// What the retry does with it.
    pub fate: Fate,
    /// What running it reaches beyond the engine, if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effect: Option<Effect>,
    /// The model it called, when it called one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// It is the step (or one of the steps) that failed.
    pub failed: bool,
}

/// A step's fate on a retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fate {
    /// Its journaled result is reused: it does not run.
    Reused,
    /// It runs again.
    RunsAgain,
    /// It never ran; it runs if the retry reaches it.
    NotReached,
}

/// What a step reaches beyond the engine when it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// It calls a language model (tokens, cost, a different answer).
    Model,
    /// It runs a built-in action (HTTP, files, ...): the outside world sees it again.
    Action,
    /// It calls a function of the host program.
    Handler,
    /// It runs sandboxed code (no effect outside the sandbox).
    Code,
    /// It asks a person again.
    Approval,
}

impl Effect {
    fn of_kind(kind: &str) -> Option<Effect> {
        Some(match kind {
            "llm" | "embed" => Effect::Model,
            "action" => Effect::Action,
            "handler" => Effect::Handler,
            "code" => Effect::Code,
            "approval" => Effect::Approval,
            _ => return None,
        })
    }
}

/// Kinds that only hold other blocks: they run again on every resume at no cost, so a
/// plan does not list them.
const CONTAINERS: [&str; 7] = [
    "sequence", "parallel", "map", "loop", "branch", "graph", "subflow",
];

/// The retry plan of run `run_id`; `None` when there is no such run.
pub async fn retry_plan(engine: &Engine, run_id: &str) -> Result<Option<RetryPlan>, EngineError> {
    let Some(detail) = super::run_detail(engine.store().as_ref(), run_id).await? else {
        return Ok(None);
    };
    let flow = engine
        .flow_of_run(&detail.run_id, &detail.flow_hash)
        .await?;
    Ok(Some(plan(&detail, &Diagram::of(flow.flow()))))
}

/// The retry plan of a run read already (`detail`, with its journal), whose flow is
/// drawn as `diagram`.
pub fn plan(detail: &RunDetail, diagram: &Diagram) -> RetryPlan {
    let journaled: HashSet<&str> = detail
        .journal
        .iter()
        .filter(|e| {
            e["kind"] == EntryKind::Result.as_str() || e["kind"] == EntryKind::Answer.as_str()
        })
        .filter_map(|e| e["key"].as_str())
        .collect();
    let steps = detail
        .steps
        .iter()
        .filter(|s| !CONTAINERS.contains(&s.kind.as_str()))
        .map(|s| planned(s, &journaled))
        .collect();
    let reached: HashSet<String> = detail.steps.iter().map(|s| step_pattern(&s.path)).collect();
    let mut listed = HashSet::new();
    let not_reached = diagram
        .nodes
        .iter()
        .filter_map(|n| Some((n.path.as_deref()?, n.kind.as_deref()?)))
        .filter(|(path, kind)| !reached.contains(*path) && !CONTAINERS.contains(kind))
        .filter(|(path, _)| listed.insert(*path))
        .map(|(path, kind)| PlannedStep {
            path: path.to_owned(),
            kind: kind.to_owned(),
            fate: Fate::NotReached,
            effect: Effect::of_kind(kind),
            model: None,
            failed: false,
        })
        .collect();
    RetryPlan {
        run_id: detail.run_id.clone(),
        retryable: matches!(detail.status, "failed" | "cancelled"),
        steps,
        not_reached,
    }
}

fn planned(s: &StepDetail, journaled: &HashSet<&str>) -> PlannedStep {
    let effect = Effect::of_kind(&s.kind);
    // Pure steps are never journaled: they always run again, at no cost.
    let reused = effect.is_some() && journaled.contains(s.path.as_str());
    PlannedStep {
        path: s.path.clone(),
        kind: s.kind.clone(),
        fate: if reused {
            Fate::Reused
        } else {
            Fate::RunsAgain
        },
        effect,
        model: s.model.clone(),
        failed: matches!(s.status, StepStatus::Failed),
    }
}
