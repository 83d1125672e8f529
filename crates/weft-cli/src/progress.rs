//! Progress on stderr: a spinner naming the current step on a terminal, plain lines
//! otherwise (so logs and CI output stay readable).

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;
use weft_core::event::{Event, EventKind};
use weft_core::ports::EventSink;

const WORK: &[&str] = &[
    "llm", "embed", "code", "handler", "action", "approval", "subflow",
];

pub struct Progress {
    spinner: Option<ProgressBar>,
    /// The run was told up front that blocks name no model: the engine's own warning
    /// of it, when the first such block runs, is not repeated.
    no_model_told: std::sync::atomic::AtomicBool,
}

impl Progress {
    pub fn new() -> Progress {
        let spinner = std::io::stderr().is_terminal().then(|| {
            let pb = ProgressBar::new_spinner();
            pb.set_style(
                ProgressStyle::with_template("{spinner} {elapsed} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            pb.enable_steady_tick(Duration::from_millis(100));
            pb
        });
        Progress {
            spinner,
            no_model_told: Default::default(),
        }
    }

    /// Leaves out the engine's `no_model` warning: the command gave it up front.
    pub fn no_model_told(&self) {
        self.no_model_told
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn finish(&self) {
        if let Some(s) = &self.spinner {
            s.finish_and_clear();
        }
    }

    fn line(&self, text: String) {
        match &self.spinner {
            Some(s) => s.println(text),
            None => eprintln!("{text}"),
        }
    }
}

impl EventSink for Progress {
    fn emit(&self, event: &Event) {
        match &event.kind {
            EventKind::RunStarted { flow, .. } => {
                self.line(format!("weft: run {} of `{flow}` started", event.run_id))
            }
            EventKind::RunResumed { journaled, .. } => self.line(format!(
                "weft: run {} resumed ({journaled} journaled steps)",
                event.run_id
            )),
            EventKind::StepStarted { path, kind, .. } if WORK.contains(&&**kind) => {
                if let Some(s) = &self.spinner {
                    s.set_message(format!("{kind} {path}"));
                }
            }
            EventKind::StepCompleted {
                path,
                kind,
                elapsed_us,
                replayed,
                ..
            } if WORK.contains(&&**kind) => {
                let how = if *replayed {
                    "replayed".to_owned()
                } else {
                    format!("{:.1} ms", *elapsed_us as f64 / 1000.0)
                };
                self.line(format!("  ✓ {path} ({kind}, {how})"));
            }
            EventKind::StepRetrying {
                path,
                attempt,
                delay_ms,
                error,
            } => self.line(format!(
                "  ↻ {path} attempt {attempt} failed ({}); retrying in {delay_ms} ms",
                error.message
            )),
            EventKind::StepFailed { path, error } if *error.path == **path => {
                self.line(format!("  ✗ {path}: {}", error.message))
            }
            EventKind::BudgetWarning {
                path,
                owner,
                budget,
                used,
                limit,
                exceeded,
            } => {
                let owner = if owner.is_empty() { "the run" } else { owner };
                let state = if *exceeded { "over" } else { "near" };
                self.line(format!(
                    "  ! {path}: {owner}'s {budget} budget is {state} its limit ({used} of {limit})"
                ))
            }
            EventKind::Warning { code, .. }
                if code == "no_model"
                    && self
                        .no_model_told
                        .load(std::sync::atomic::Ordering::Relaxed) => {}
            EventKind::Warning { path, message, .. } => self.line(format!("  ! {path}: {message}")),
            EventKind::ApprovalRequested { key, prompt, .. } => {
                self.line(format!("  ⏸ {key} waits for approval: {prompt}"))
            }
            EventKind::RunPaused { .. } => self.line(format!("weft: run {} paused", event.run_id)),
            EventKind::RunCompleted { .. } => {
                self.line(format!("weft: run {} completed", event.run_id))
            }
            EventKind::RunFailed { .. } => self.line(format!("weft: run {} failed", event.run_id)),
            EventKind::RunCancelled => self.line(format!("weft: run {} cancelled", event.run_id)),
            _ => {}
        }
    }
}
