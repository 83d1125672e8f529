//! `/runs/{id}`: one run, at an address that can be linked from a chat or a ticket —
//! its flow's graph in the run's colours, the timeline of its steps, the selected step,
//! the approvals it waits for and those answered, its output or error, and what a retry
//! would run again. `?part=live` is the part the script swaps in as events arrive.

use crate::layout::{self, PageError, Section, badge};
use crate::{format, graph, step};
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use maud::{Markup, PreEscaped, html};
use serde::Deserialize;
use weft_core::diagram::Diagram;
use weft_engine::Engine;
use weft_engine::inspect::{self, Effect, Fate, RetryPlan, RunDetail};

#[derive(Deserialize)]
pub(crate) struct RunQuery {
    /// The selected step's path.
    step: Option<String>,
    /// `live`: only the part that changes as the run goes.
    part: Option<String>,
}

pub(crate) async fn page(
    State(engine): State<Engine>,
    Path(id): Path<String>,
    Query(q): Query<RunQuery>,
) -> Result<Response, PageError> {
    let run = inspect::run_detail(engine.store().as_ref(), &id)
        .await?
        .ok_or_else(|| PageError::NotFound(format!("No run `{id}`.")))?;
    let diagram = engine
        .flow_of_run(&run.run_id, &run.flow_hash)
        .await
        .ok()
        .map(|p| Diagram::of(p.flow()));
    // The plan is made from what the page read already: no second read of the log.
    let plan = match (&diagram, run.status) {
        (Some(d), "failed" | "cancelled") => Some(inspect::retry_plan_of(&run, d)),
        _ => None,
    };
    let live = live(&run, diagram.as_ref(), plan.as_ref(), q.step.as_deref());
    if q.part.as_deref() == Some("live") {
        return Ok(layout::partial(live));
    }
    let title = format!("{} · {}", run.flow, run.status);
    Ok(layout::page(
        &title,
        Section::Runs,
        html! {
            div #live data-run=(run.run_id) data-after=[run.last_event] data-status=(run.status) {
                (live)
            }
        },
    )
    .into_response())
}

/// Everything of the run page that changes as the run goes.
fn live(
    run: &RunDetail,
    diagram: Option<&Diagram>,
    plan: Option<&RetryPlan>,
    selected: Option<&str>,
) -> Markup {
    let chosen = match selected {
        Some(path) => run.steps.iter().find(|s| s.path == path),
        None => step::default_selection(run),
    };
    let selected = chosen.map(|s| s.path.as_str());
    let now = format::now_ms();
    html! {
        (header(run, now))
        (outcome(run))
        (warnings(run))
        (approvals(run))
        div.run-body {
            section.graph aria-label="The flow's graph" {
                h2 { "Graph" }
                @match diagram {
                    Some(d) => div.drawing { (PreEscaped(graph::svg(d, run, selected))) },
                    None => p.muted { "The run's flow is not in the store." },
                }
                (legend())
            }
            section.steps aria-label="Steps" {
                h2 { "Timeline" }
                (step::timeline(run, selected, now))
            }
            section.panel #step-panel aria-label="The selected step" aria-live="polite" {
                h2 { "Step" }
                (step::panel(run, chosen))
            }
        }
        @if let Some(plan) = plan { (retry_dialog(plan)) }
        (answered(run))
    }
}

fn header(run: &RunDetail, now: u64) -> Markup {
    let ended = matches!(run.status, "completed" | "failed" | "cancelled");
    let took = if ended { run.updated_ms } else { now as i64 } - run.created_ms;
    html! {
        // The script compares the two: a record older than the journal is read again.
        div.run-head data-announced=[run.announced] {
            h1 {
                (run.flow) " " (badge(run.status))
            }
            dl.facts.inline {
                dt { "Run" } dd { code { (run.run_id) } }
                @if let Some(d) = &run.dialect { dt { "Dialect" } dd { (d) } }
                dt { "Started" } dd { (layout::time(run.created_ms)) }
                dt { "Duration" }
                @if ended { dd { (format::millis(took)) } }
                @else { dd data-since=(run.created_ms) { (format::millis(took)) } }
                dt { "Tokens" } dd { (format::tokens(&run.usage)) }
                dt { "Cost" } dd { (format::cost(&run.usage)) }
                @if run.retries > 0 { dt { "Retries" } dd { (run.retries) } }
            }
            div.actions {
                @if matches!(run.status, "queued" | "running" | "paused") {
                    button type="button" data-action="cancel" data-run=(run.run_id) { "Cancel" }
                }
                @if matches!(run.status, "failed" | "cancelled") {
                    button type="button" data-open="retry-dialog" { "Retry from the failed step…" }
                }
                @if let Some(flow) = &run.flow_id {
                    a.button href={ "/new?flow=" (flow) } { "Run this flow again" }
                }
            }
            p.action-error role="alert" hidden {}
        }
    }
}

fn outcome(run: &RunDetail) -> Markup {
    html! {
        @if let Some(out) = &run.output {
            section.outcome.ok aria-label="Output" {
                h2 { "Output" }
                pre #run-output { (format::shared_json(out)) }
            }
        }
        @if let Some(err) = &run.error {
            section.outcome.failed aria-label="Error" {
                h2 { "Error" }
                @let message = err.get("message").and_then(|m| m.as_str()).unwrap_or("");
                @let kind = err.get("kind").and_then(|m| m.as_str()).unwrap_or("error");
                @let path = err.get("path").and_then(|m| m.as_str()).unwrap_or("");
                p #run-error { code { (kind) } " " (message) }
                @if !path.is_empty() {
                    p { "at " a href=(step::href(&run.run_id, path)) { code { (path) } } }
                }
            }
        }
    }
}

/// What the run warned of, each with a link to the step that raised it.
fn warnings(run: &RunDetail) -> Markup {
    html! {
        @if !run.warnings.is_empty() {
            section.outcome.warned aria-label="Warnings" {
                h2 { "Warnings" }
                ul {
                    @for w in &run.warnings {
                        li.warning {
                            a href=(step::href(&run.run_id, &w.path)) { code { (w.path) } }
                            ": " (w.message)
                        }
                    }
                }
            }
        }
    }
}

/// The approvals the run waits for, each with its question and a form to answer it.
fn approvals(run: &RunDetail) -> Markup {
    let waiting = run.waiting.as_array().map(Vec::as_slice).unwrap_or(&[]);
    html! {
        @for w in waiting {
            (crate::approvals::form(&run.run_id, w))
        }
    }
}

/// Who answered which approval, when, and what they said.
fn answered(run: &RunDetail) -> Markup {
    html! {
        @if !run.answered.is_empty() {
            section.answered aria-label="Answered approvals" {
                h2 { "Answered approvals" }
                ul {
                    @for a in &run.answered {
                        li {
                            code { (a.key) } ": " (badge(&a.decision))
                            " by " strong { (a.by.as_deref().unwrap_or("someone unnamed")) }
                            @if let Some(id) = &a.by_id { " " span.muted { "(" (id) ")" } }
                            @if let Some(said) = &a.by_note { " " span.muted { "as \u{201c}" (said) "\u{201d}" } }
                            " at " (layout::time(a.at_ms as i64))
                            @if !a.note.is_empty() { blockquote { (a.note) } }
                        }
                    }
                }
            }
        }
    }
}

/// What a retry does, step by step, shown before it is confirmed.
fn retry_dialog(plan: &RetryPlan) -> Markup {
    let again: Vec<_> = plan
        .steps
        .iter()
        .filter(|s| s.fate == Fate::RunsAgain)
        .collect();
    let reused = plan.steps.iter().filter(|s| s.fate == Fate::Reused).count();
    let costly =
        |e: Option<Effect>| matches!(e, Some(Effect::Model | Effect::Action | Effect::Handler));
    html! {
        dialog #retry-dialog aria-labelledby="retry-title" {
            h2 #retry-title { "Retry from the failed step" }
            p { (reused) " journaled step(s) keep their result and do not run again." }
            @if again.is_empty() {
                p { "No finished step runs again." }
            } @else {
                p { "These steps run again:" }
                table.plan {
                    thead { tr { th { "Step" } th { "Kind" } th { "Reaches" } } }
                    tbody {
                        @for s in &again {
                            tr class=[costly(s.effect).then_some("costly")] {
                                td { code { (s.path) } @if s.failed { " " (badge("failed")) } }
                                td { (s.kind) }
                                td { (effect_text(s.effect, s.model.as_deref())) }
                            }
                        }
                    }
                }
            }
            @if !plan.not_reached.is_empty() {
                p { "Then, if the run gets there, the blocks it never reached:" }
                ul.plain {
                    @for s in &plan.not_reached {
                        li { code { (s.path) } " (" (s.kind) ") " (effect_text(s.effect, None)) }
                    }
                }
            }
            form method="dialog" {
                button type="button" data-action="retry" data-run=(plan.run_id) { "Retry" }
                " "
                button value="cancel" { "Not now" }
            }
        }
    }
}

fn effect_text(effect: Option<Effect>, model: Option<&str>) -> String {
    match effect {
        Some(Effect::Model) => match model {
            Some(m) => format!("calls the model {m} again"),
            None => "calls a model".to_owned(),
        },
        Some(Effect::Action) => "runs an external action".to_owned(),
        Some(Effect::Handler) => "calls a host function".to_owned(),
        Some(Effect::Code) => "runs sandboxed code".to_owned(),
        Some(Effect::Approval) => "asks for approval again".to_owned(),
        None => "nothing outside the run".to_owned(),
    }
}

fn legend() -> Markup {
    let states = [
        ("state-not-reached", "queued / not reached"),
        ("state-running", "running"),
        ("state-waiting", "waiting"),
        ("state-done", "done"),
        ("state-replayed", "replayed from the journal"),
        ("state-failed", "failed"),
        ("state-rescued", "rescued"),
    ];
    html! {
        ul.legend aria-label="Colours" {
            @for (class, label) in states {
                li { span class={ "swatch " (class) } {} (label) }
            }
        }
    }
}
