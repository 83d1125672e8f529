//! Run tools: start a run of a saved flow or a text, read it (with its failing step and
//! its events), list, cancel, retry, and answer an approval when the server allows it.

use crate::WeftMcp;
use crate::args::{self, AnswerApproval, GetRun, ListRuns, RetryRun, RunFlow, RunId};
use crate::failure::Failure;
use crate::progress::Progress;
use serde_json::{Value, json};
use std::time::Duration;
use weft_core::ports::{RunQuery, RunRecord, RunStatus};
use weft_engine::Underway;
use weft_engine::inspect::{StepDetail, StepStatus};

/// Events one `get_run` returns at most; `next_after` pages on.
const EVENTS_PER_CALL: usize = 200;

pub(crate) async fn run(
    mcp: &WeftMcp,
    a: RunFlow,
    progress: Option<Progress>,
) -> Result<Value, Failure> {
    let (text, dialect) = match (&a.name, &a.source) {
        (Some(name), None) => {
            let (_, source) = crate::flows::saved(mcp, args::name(name)?, a.version).await?;
            (source.text, Some(source.dialect))
        }
        (None, Some(text)) => (args::source(text)?.to_owned(), a.dialect.clone()),
        _ => {
            return Err(Failure::new(
                "give either `name` (a saved flow) or `source` (a flow's text)",
            )
            .hint("save_flow or edit_flow saves a flow under a name"));
        }
    };
    let checked =
        crate::flows::check(mcp, &text, dialect.as_deref()).map_err(Failure::invalid_flow)?;
    let total = crate::progress::fixed_steps(checked.flow());
    let run = mcp
        .service
        .start(&checked, a.input, weft_service::How::default())
        .await?
        .underway;
    let wait = args::wait(a.wait_seconds);
    answer_when_done(mcp, run, wait, progress.map(|p| (p, total))).await
}

/// `{run_id, status}` now, or the run's result if it ends or pauses within `wait`;
/// meanwhile each step it completes is reported to `progress` (with the flow's step
/// count, when fixed).
async fn answer_when_done(
    mcp: &WeftMcp,
    run: Underway,
    wait: Option<Duration>,
    progress: Option<(Progress, Option<usize>)>,
) -> Result<Value, Failure> {
    let run_id = run.run_id().to_owned();
    if let Some(wait) = wait {
        let ended = match progress {
            Some((p, total)) => {
                let store = mcp.engine.store().clone();
                let mut steps = crate::progress::Follower::new(store, run_id.clone(), p, total);
                let ended = tokio::select! {
                    ended = run.within(wait) => ended,
                    () = steps.follow() => None,
                };
                // The steps between the last look and the end.
                steps.pump().await;
                ended
            }
            None => run.within(wait).await,
        };
        if let Some(result) = ended {
            return Ok(result?.to_json());
        }
    }
    let status = match mcp.engine.store().get_run(&run_id).await? {
        Some(r) => r.status.as_str(),
        None => "running",
    };
    Ok(json!({
        "run_id": run_id,
        "status": status,
        "hint": "get_run {run_id} shows where it stands and its events",
    }))
}

pub(crate) async fn get(mcp: &WeftMcp, a: GetRun) -> Result<Value, Failure> {
    let store = mcp.engine.store();
    let detail = weft_engine::inspect::run_detail(store.as_ref(), &a.run_id)
        .await?
        .ok_or_else(|| Failure::from(weft_engine::EngineError::NotFound(a.run_id.clone())))?;
    let events = store
        .events(&detail.run_id, a.after_event, EVENTS_PER_CALL)
        .await?;
    let next_after = events.last().map(|e| e.seq).or(a.after_event);
    let steps: Vec<Value> = detail
        .steps
        .iter()
        .map(|s| json!({"path": s.path, "kind": s.kind, "status": s.status, "elapsed_us": s.elapsed_us, "attempts": s.attempts}))
        .collect();
    let mut shown = json!({
        "run_id": detail.run_id,
        "flow": detail.flow,
        "status": detail.status,
        "input": detail.input,
        "output": detail.output,
        "error": detail.error,
        "waiting": detail.waiting,
        "usage": detail.usage,
        "steps": steps,
        "events": events,
        "next_after": next_after,
    });
    if let Some(step) = failing_step(&detail.steps) {
        shown["failure"] = json!({
            "path": step.path,
            "kind": step.kind,
            "input": step.input,
            "error": step.error,
            "hint": "fix the block at `path` (get_flow view=structure shows the document), then retry_run or run_flow again",
        });
    }
    Ok(shown)
}

/// The innermost step that failed: the one whose error the run's is.
fn failing_step(steps: &[StepDetail]) -> Option<&StepDetail> {
    steps
        .iter()
        .filter(|s| s.status == StepStatus::Failed)
        .max_by_key(|s| s.path.matches('/').count())
}

pub(crate) async fn list(mcp: &WeftMcp, a: ListRuns) -> Result<Value, Failure> {
    let status = match a.status.as_deref() {
        None => None,
        Some(s) => Some(RunStatus::parse(s).ok_or_else(|| {
            Failure::new(format!("{} is not a status", crate::failure::quoted(s)))
                .hint("queued, running, paused, completed, failed or cancelled")
        })?),
    };
    let query = RunQuery {
        status,
        limit: a.limit.unwrap_or(20).clamp(1, 200),
        after: None,
    };
    let runs = mcp.engine.store().list_runs(&query).await?;
    Ok(json!({"runs": runs.iter().map(summary).collect::<Vec<_>>()}))
}

fn summary(r: &RunRecord) -> Value {
    json!({"run_id": r.id, "flow": r.flow_name, "status": r.status.as_str(), "created_ms": r.created_ms, "updated_ms": r.updated_ms})
}

pub(crate) async fn cancel(mcp: &WeftMcp, a: RunId) -> Result<Value, Failure> {
    let r = mcp.engine.cancel(&a.run_id).await?;
    Ok(summary(&r))
}

pub(crate) async fn retry(
    mcp: &WeftMcp,
    a: RetryRun,
    progress: Option<Progress>,
) -> Result<Value, Failure> {
    let run = mcp.engine.retry(&a.run_id, None).await?;
    let wait = args::wait(a.wait_seconds);
    answer_when_done(mcp, run, wait, progress.map(|p| (p, None))).await
}

pub(crate) async fn answer(
    mcp: &WeftMcp,
    a: AnswerApproval,
    progress: Option<Progress>,
) -> Result<Value, Failure> {
    if !mcp.options.allow_approvals {
        return Err(Failure::new(
            "models may not answer approvals on this server: a person answers them",
        )
        .hint(format!(
            "ask a person to approve on the web page, with `POST /v1/runs/{}/approve`, or with `weft approve {}`; `weft mcp --allow-mcp-approvals` lets models answer",
            a.run_id, a.run_id
        )));
    }
    let answer = json!({"decision": a.decision, "note": a.note});
    let run = mcp
        .engine
        .answer(&a.run_id, a.step.as_deref(), answer)
        .await?;
    let wait = args::wait(a.wait_seconds);
    answer_when_done(mcp, run, wait, progress.map(|p| (p, None))).await
}
