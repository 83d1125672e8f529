//! `weft run`, `weft runs …` and `weft approve` with `--server URL`: the same commands,
//! the same output and exit codes, on the runs of a `weft serve`.

use crate::cli::{OutputArgs, RunsCommand};
use crate::commands::{Failure, RunLine, normalize_answer, report};
use crate::event_file::EventFile;
use crate::progress::Progress;
use crate::remote::{Remote, RemoteError};
use crate::settings::Settings;
use serde_json::Value;
use std::path::Path;
use weft_core::event::Event;
use weft_core::ports::EventSink;
use weft_dialects::EventView;
use weft_engine::RunResult;

/// Where a followed run's events go: the progress display and the `--events` file.
struct Watch {
    progress: Option<Progress>,
    file: Option<EventFile>,
}

impl Watch {
    fn new(out: &OutputArgs) -> Result<Watch, Failure> {
        let file = match &out.events {
            Some(path) => {
                let f = std::fs::File::create(path).map_err(|e| {
                    Failure::invalid(format!("error: cannot write {}: {e}", path.display()))
                })?;
                // The server's stream names events as the engine does.
                Some(EventFile::new(Box::new(f), EventView::default()))
            }
            None => None,
        };
        Ok(Watch {
            progress: (!out.quiet).then(Progress::new),
            file,
        })
    }

    /// Ends the progress display and reports `result` as a local run would.
    fn report(&self, result: &RunResult, out: &OutputArgs) -> u8 {
        if let Some(p) = &self.progress {
            p.finish();
        }
        report(result, out.json, None)
    }
}

impl EventSink for Watch {
    fn emit(&self, event: &Event) {
        if let Some(p) = &self.progress {
            p.emit(event);
        }
        if let Some(f) = &self.file {
            f.emit(event);
        }
    }
}

fn failed(e: RemoteError) -> Failure {
    Failure::invalid(e.0)
}

/// `weft run --server URL FLOW`: the flow's text runs on the server; progress and the
/// result show here.
pub(crate) async fn run(
    server: &str,
    flow: &Path,
    input: Option<Value>,
    dialect: Option<String>,
    out: &OutputArgs,
    settings: &Settings,
) -> Result<u8, Failure> {
    let remote = Remote::new(server, settings.token.clone());
    let watch = Watch::new(out)?;
    let result = remote
        .run(flow, input, dialect.as_deref(), Some(&watch))
        .await
        .map_err(failed)?;
    Ok(watch.report(&result, out))
}

/// `weft approve --server URL ID`.
pub(crate) async fn approve(
    server: &str,
    id: &str,
    step: Option<String>,
    mut answer: Value,
    out: &OutputArgs,
    settings: &Settings,
) -> Result<u8, Failure> {
    if let Some(step) = step {
        answer["step"] = Value::String(step);
    }
    continue_run(server, id, "approve", answer, out, settings).await
}

async fn continue_run(
    server: &str,
    id: &str,
    action: &str,
    body: Value,
    out: &OutputArgs,
    settings: &Settings,
) -> Result<u8, Failure> {
    let remote = Remote::new(server, settings.token.clone());
    let watch = Watch::new(out)?;
    let result = remote
        .continue_run(id, action, body, Some(&watch))
        .await
        .map_err(failed)?;
    Ok(watch.report(&result, out))
}

/// A flag that only means something for the runs of this machine's database.
fn local_only(flag: &str, why: &str) -> Failure {
    Failure::invalid(format!(
        "error: {flag} cannot be used with --server\n  hint: {why}"
    ))
}

/// `weft runs … --server URL`.
pub(crate) async fn runs(
    command: RunsCommand,
    server: &str,
    settings: &Settings,
) -> Result<u8, Failure> {
    let remote = Remote::new(server, settings.token.clone());
    match command {
        RunsCommand::List { limit, json } => {
            let listed = remote
                .get(&format!("/v1/runs?limit={}", limit.clamp(1, 1000)))
                .await
                .map_err(failed)?;
            for r in listed["runs"].as_array().into_iter().flatten() {
                let text = |k: &str| r[k].as_str().unwrap_or_default();
                RunLine {
                    id: text("run_id"),
                    flow: text("flow"),
                    status: text("status"),
                    created_ms: r["created_ms"].as_i64().unwrap_or(0),
                    updated_ms: r["updated_ms"].as_i64().unwrap_or(0),
                }
                .print(json);
            }
            Ok(crate::exit::OK)
        }
        RunsCommand::Show { id } => {
            let shown = remote
                .get(&format!("/v1/runs/{id}"))
                .await
                .map_err(failed)?;
            println!(
                "{}",
                serde_json::to_string_pretty(&shown).unwrap_or_default()
            );
            Ok(crate::exit::OK)
        }
        RunsCommand::Resume {
            id,
            input,
            force,
            out,
        } => {
            if force {
                return Err(local_only(
                    "--force",
                    "the server resumes a run only when the process that ran it is gone",
                ));
            }
            match input {
                Some(text) => {
                    continue_run(
                        server,
                        &id,
                        "approve",
                        normalize_answer(&text),
                        &out,
                        settings,
                    )
                    .await
                }
                None => continue_run(server, &id, "resume", Value::Null, &out, settings).await,
            }
        }
        RunsCommand::Retry {
            id,
            allow_changed,
            out,
        } => {
            if allow_changed {
                return Err(local_only(
                    "--allow-changed",
                    "the server retries a run with the flow it was started with",
                ));
            }
            continue_run(server, &id, "retry", Value::Null, &out, settings).await
        }
        RunsCommand::Cancel { id } => {
            let r = remote
                .post(&format!("/v1/runs/{id}/cancel"), Value::Null)
                .await
                .map_err(failed)?;
            eprintln!("run {} cancelled", r["run_id"].as_str().unwrap_or(&id));
            Ok(crate::exit::OK)
        }
    }
}
