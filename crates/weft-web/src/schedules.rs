//! `/schedules`: every schedule with its cron expression and zone, its policies, its
//! next five fire times, and its latest firings, each linked to the run it started.

use crate::layout::{self, PageError, Section, badge};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use weft_core::event::now_ms;
use weft_core::ports::{Firing, Schedule};
use weft_engine::Engine;
use weft_triggers::CronTimes;
use weft_triggers::manage::SHOWN_NEXT;

/// Past firings shown per schedule.
const SHOWN_FIRINGS: usize = 10;

pub(crate) async fn page(State(engine): State<Engine>) -> Result<Response, PageError> {
    let store = engine.store();
    let mut shown = Vec::new();
    if let Some(t) = store.triggers() {
        for s in t.schedules().await? {
            let firings = t.firings(&s.id, SHOWN_FIRINGS).await?;
            shown.push(schedule(&s, &firings));
        }
    }
    Ok(layout::page(
        "Schedules",
        Section::Schedules,
        html! {
            h1 { "Schedules" }
            @if shown.is_empty() {
                p.empty {
                    "No schedules yet. Add one with "
                    code { "weft schedules add FLOW --cron \"0 9 * * MON-FRI\"" }
                    ", POST /v1/schedules, or the schedule_flow tool."
                }
            }
            @for s in &shown { (s) }
        },
    )
    .into_response())
}

fn schedule(s: &Schedule, firings: &[Firing]) -> Markup {
    let cron = CronTimes::parse(&s.cron, &s.tz);
    let next: Vec<i64> = match &cron {
        Ok(c) if !s.paused => c.upcoming(now_ms() as i64, SHOWN_NEXT),
        _ => Vec::new(),
    };
    // A time in the schedule's zone as people read it; the page's script adds the
    // viewer's own time when their zone differs, and how far off it is.
    let when = |ms: i64| {
        let shown = match &cron {
            Ok(c) => c.show_for_people(ms),
            Err(_) => ms.to_string(),
        };
        html! { time datetime=(crate::format::iso(ms)) data-zone=(s.tz) { (shown) } }
    };
    html! {
        section.schedule id=(format!("schedule-{}", s.id)) {
            h2 { (s.id) " " @if s.paused { (badge("paused")) } }
            p {
                "Runs " a href="/flows" { (s.flow) }
                @if let Some(v) = s.version { " version " (v) }
                " on " code { (s.cron) } " (" (s.tz) "); overlap " (policy(&s.overlap))
                ", catch-up " (policy(&s.catch_up)) "."
            }
            @if let Err(e) = &cron { p.error { (e) } }
            @if !next.is_empty() {
                h3 { "Next fire times" }
                ol.next { @for t in &next { li { (when(*t)) } } }
            }
            h3 { "Latest firings" }
            @if firings.is_empty() { p.empty { "None yet." } }
            @else {
                table.firings {
                    thead { tr {
                        th scope="col" { "Fire time" } th scope="col" { "Outcome" } th scope="col" { "Run" }
                    } }
                    tbody {
                        @for f in firings {
                            tr {
                                td { (when(f.fire_ms)) }
                                td {
                                    (badge(f.outcome.as_str()))
                                    @if f.missed > 0 { " for " (f.missed + 1) " fire times" }
                                    @if let Some(e) = &f.error { " " span.error { (e) } }
                                }
                                td { @if let Some(id) = &f.run_id { a href=(format!("/runs/{id}")) { code { (id) } } } }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A policy as its file spelling (`cancel-previous`).
fn policy(p: &impl serde::Serialize) -> String {
    serde_json::to_value(p)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}
