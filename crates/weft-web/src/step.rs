//! A run's steps: the timeline, and the panel that shows one step in full.

use crate::format;
use crate::layout::badge;
use maud::{Markup, html};
use weft_engine::inspect::{RunDetail, StepDetail, StepStatus};

/// The address of run `run_id`'s page with step `path` selected.
pub(crate) fn href(run_id: &str, path: &str) -> String {
    format!("/runs/{run_id}?step={}", query_escape(path))
}

/// `s` escaped for a URL query value.
fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The step a page shows when none is chosen: the one that failed, else the one
/// waiting, else the last that started.
pub(crate) fn default_selection(run: &RunDetail) -> Option<&StepDetail> {
    let leaves = || {
        run.steps
            .iter()
            .filter(|s| s.input.is_some() || s.error.is_some())
    };
    leaves()
        .rfind(|s| s.status == StepStatus::Failed)
        .or_else(|| leaves().find(|s| s.status == StepStatus::Waiting))
        .or_else(|| leaves().next_back())
}

/// A step's status as the page shows it: a step still "running" when its run paused
/// or ended is suspended or stopped, not running.
fn shown_status(run: &RunDetail, s: &StepDetail) -> &'static str {
    match (s.status, run.status) {
        (StepStatus::Running, "paused") => "paused",
        (StepStatus::Running, "failed" | "cancelled") => "stopped",
        (status, _) => status_name(status),
    }
}

fn status_name(s: StepStatus) -> &'static str {
    match s {
        StepStatus::Running => "running",
        StepStatus::Retrying => "retrying",
        StepStatus::Waiting => "waiting",
        StepStatus::Completed => "completed",
        StepStatus::Failed => "failed",
        StepStatus::Rescued => "rescued",
    }
}

/// Every step in the order it started, as bars on the run's time axis.
pub(crate) fn timeline(run: &RunDetail, selected: Option<&str>, now_ms: u64) -> Markup {
    let start = run.created_ms.max(0) as u64;
    let end = run
        .steps
        .iter()
        .map(|s| s.ended_ms.unwrap_or(now_ms))
        .max()
        .unwrap_or(start)
        .max(start + 1);
    let span = (end - start) as f64;
    html! {
        @if run.steps.is_empty() {
            p.muted { "No step has started yet." }
        } @else {
            ol.timeline {
                @for s in &run.steps {
                    @let depth = s.path.matches('/').count();
                    @let from = (s.started_ms.saturating_sub(start)) as f64 / span * 100.0;
                    @let to = (s.ended_ms.unwrap_or(now_ms).saturating_sub(start)) as f64 / span * 100.0;
                    @let is_selected = Some(s.path.as_str()) == selected;
                    @let status = shown_status(run, s);
                    li class={ "step status-" (status) @if is_selected { " selected" } } {
                        a href=(href(&run.run_id, &s.path)) style={ "padding-left:" (depth.saturating_sub(1) as f64 * 0.8) "em" }
                            aria-current=[is_selected.then_some("true")] {
                            span.name { (s.path.rsplit('/').next().unwrap_or(&s.path)) }
                            span.kind { (s.kind) }
                            (badge(status))
                            span.took { (s.elapsed_us.map(format::micros).unwrap_or_default()) }
                            @if s.replayed { span.tag { "replayed" } }
                        }
                        span.bar aria-hidden="true" {
                            span style={ "left:" (format!("{from:.2}")) "%;width:" (format!("{:.2}", (to - from).max(0.4))) "%" } {}
                        }
                    }
                }
            }
        }
    }
}

/// One step in full: what went in and came out, its error, model, tokens, cost and
/// latency, and the text its model streams while it runs.
pub(crate) fn panel(run: &RunDetail, s: Option<&StepDetail>) -> Markup {
    let Some(s) = s else {
        return html! { p.muted { "Choose a step on the graph or the timeline to see it here." } };
    };
    html! {
        h3 { code { (s.path) } }
        dl.facts {
            dt { "Kind" } dd { (s.kind) }
            dt { "Status" } dd { (badge(shown_status(run, s))) }
            dt { "Started" } dd { (crate::layout::time(s.started_ms as i64)) }
            dt { "Latency" } dd { (s.elapsed_us.map(format::micros).unwrap_or_else(|| "–".into())) }
            dt { "Attempts" } dd { (s.attempts) }
            @if s.replayed {
                dt { "Replayed" } dd { "its result came from the journal: it did not run again" }
            }
            @if let Some(model) = &s.model { dt { "Model" } dd { code { (model) } } }
            @if let Some(u) = &s.usage {
                dt { "Tokens" } dd { (format::tokens(u)) }
                dt { "Cost" } dd { (format::cost(u)) }
            }
            @if let Some(exit) = &s.exit { dt { "Exit" } dd { code { (exit) } } }
        }
        @if let Some(e) = &s.error {
            section.error-box {
                h4 { "Error: " code { (e.kind.to_string()) } }
                p { (e.message) }
                @if let Some(d) = &e.detail { pre { (format::json(d)) } }
            }
        }
        @if s.status == StepStatus::Running && s.kind == "llm" {
            h4 { "Streaming" }
            pre.stream data-stream=(s.path) aria-live="polite" {}
        }
        @for call in &s.tool_calls {
            h4 { "Tool call " code { (call.tool) } }
            pre { (format::json(&call.arguments)) }
        }
        @if let Some(input) = &s.input { h4 { "Input" } pre { (format::shared_json(input)) } }
        @if let Some(output) = &s.output { h4 { "Output" } pre { (format::shared_json(output)) } }
        @if s.input.is_none() && s.output.is_none() && s.error.is_none() {
            p.muted { "A " (s.kind) " block runs the blocks inside it; choose one of them to see its input and output." }
        }
        p.muted.small { "Run " code { (run.run_id) } }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn step_paths_are_escaped_for_the_query() {
        assert_eq!(
            super::href("r1", "root/items/[2]/check #1"),
            "/runs/r1?step=root/items/%5B2%5D/check%20%231"
        );
    }
}
