//! A run's events as LangGraph's stream modes send them: `metadata` first, then per
//! mode what Weft's events carry, read from the run's stored event log (so a client
//! rejoins from any point), ending when the run ends or pauses.
//!
//! Each part's SSE id is `<seq>-<n>`: the `n`th part made of the stored event `seq`,
//! so a client that rejoins with `Last-Event-ID` gets exactly the parts after it.
//! Token deltas are live only and carry no id.

use super::{LgError, interrupts_of, time, values_of};
use crate::App;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::convert::Infallible;
use std::time::Duration;
use weft_core::event::{EventKind, SharedEvent};
use weft_core::ports::{RunRecord, RunStatus};

/// A run's events as the engine delivers them to a follower.
pub(crate) type Events =
    tokio::sync::mpsc::Receiver<Result<std::sync::Arc<SharedEvent>, weft_engine::EngineError>>;

/// A comment this often keeps proxies from closing a quiet stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// One stream mode Weft sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Values,
    Updates,
    MessagesTuple,
    Custom,
    Events,
    Debug,
}

impl Mode {
    const ALL: [(&'static str, Mode); 6] = [
        ("values", Mode::Values),
        ("updates", Mode::Updates),
        ("messages-tuple", Mode::MessagesTuple),
        ("custom", Mode::Custom),
        ("events", Mode::Events),
        ("debug", Mode::Debug),
    ];

    fn name(self) -> &'static str {
        Mode::ALL
            .iter()
            .find(|(_, m)| *m == self)
            .map_or("values", |(n, _)| n)
    }
}

/// The modes a stream sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Modes(Vec<Mode>);

impl Default for Modes {
    fn default() -> Modes {
        Modes(vec![Mode::Values])
    }
}

impl Modes {
    /// `stream_mode` as given: one name or a list of them (default `values`).
    pub(crate) fn parse(given: Option<&Value>) -> Result<Modes, LgError> {
        let names: Vec<&str> = match given {
            None | Some(Value::Null) => return Ok(Modes::default()),
            Some(Value::String(s)) => vec![s.as_str()],
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
            Some(other) => {
                return Err(LgError::invalid(format!(
                    "`stream_mode` is a mode or a list of modes, not {other}"
                )));
            }
        };
        let mut modes = Vec::new();
        for name in names {
            let mode = Mode::ALL
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, m)| *m)
                .ok_or_else(|| unsupported_mode(name))?;
            if !modes.contains(&mode) {
                modes.push(mode);
            }
        }
        Ok(if modes.is_empty() {
            Modes::default()
        } else {
            Modes(modes)
        })
    }

    pub(crate) fn to_json(&self) -> Value {
        Value::from(self.0.iter().map(|m| m.name()).collect::<Vec<_>>())
    }

    fn has(&self, mode: Mode) -> bool {
        self.0.contains(&mode)
    }
}

fn unsupported_mode(name: &str) -> LgError {
    let why = match name {
        "messages" => "use `messages-tuple` (the same messages, as [message, metadata] pairs)",
        "tasks" | "checkpoints" => {
            "Weft's runs keep a journal, not LangGraph checkpoints; use `debug`"
        }
        _ => "the modes are values, updates, messages-tuple, custom, events and debug",
    };
    LgError::invalid(format!(
        "stream mode `{name}` is not supported by Weft: {why}"
    ))
}

/// An SSE id this stream sent: part `part` of stored event `seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EventId {
    pub(crate) seq: u64,
    pub(crate) part: usize,
}

impl EventId {
    pub(crate) fn parse(s: &str) -> Option<EventId> {
        let (seq, part) = s.trim().split_once('-')?;
        Some(EventId {
            seq: seq.parse().ok()?,
            part: part.parse().ok()?,
        })
    }
}

/// The values a run ended or paused with: a paused run's interrupts under
/// `__interrupt__`, a failed run's error under `__error__`.
pub(crate) fn final_values(run: &RunRecord) -> Value {
    let mut values = values_of(run);
    if let Some(m) = values.as_object_mut() {
        match run.status {
            RunStatus::Paused => {
                m.insert("__interrupt__".into(), Value::Array(interrupts_of(run)));
            }
            RunStatus::Failed => {
                m.insert("__error__".into(), error_of(run.error.as_ref()));
            }
            _ => {}
        }
    }
    values
}

/// `{error, message}` of a Weft error.
fn error_of(error: Option<&Value>) -> Value {
    let field = |k: &str| error.and_then(|e| e.get(k)).cloned().unwrap_or(Value::Null);
    json!({"error": field("kind"), "message": field("message")})
}

/// What one stream has sent so far that later parts depend on.
struct Sent {
    run_id: String,
    modes: Modes,
    /// LLM steps whose text went out as deltas (their whole message is not sent again).
    streamed: HashSet<String>,
    /// Skip parts up to this one (a rejoin).
    resume_from: Option<EventId>,
}

/// The stream of run `run_id`'s `events` in `modes`, less the parts up to
/// `resume_from`; `metadata` first when `first`.
pub(crate) fn sse(
    app: &App,
    run_id: String,
    rx: Events,
    resume_from: Option<EventId>,
    modes: Modes,
    first: bool,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>> + use<>> {
    let opening = first.then(|| {
        SseEvent::default()
            .event("metadata")
            .data(json!({"run_id": run_id, "attempt": 1}).to_string())
    });
    let sent = Sent {
        run_id,
        modes,
        streamed: HashSet::new(),
        resume_from,
    };
    let app = app.clone();
    let events = futures::stream::unfold(Some((rx, sent, app)), |state| async move {
        let (mut rx, mut sent, app) = state?;
        loop {
            let e = match rx.recv().await? {
                Ok(e) => e,
                Err(e) => {
                    let error = SseEvent::default()
                        .event("error")
                        .data(json!({"error": "Error", "message": e.to_string()}).to_string());
                    return Some((vec![error], None));
                }
            };
            let last = e.kind.is_final() || matches!(e.kind, EventKind::RunPaused { .. });
            let parts = sent.parts(&app, &e).await;
            let batch = sent.numbered(&e, parts);
            if last {
                return Some((batch, None));
            }
            if !batch.is_empty() {
                return Some((batch, Some((rx, sent, app))));
            }
        }
    })
    .flat_map(|batch| futures::stream::iter(batch.into_iter().map(Ok::<_, Infallible>)));
    let all = futures::stream::iter(opening.map(Ok::<_, Infallible>)).chain(events);
    Sse::new(all).keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
}

impl Sent {
    /// `parts` of event `e` as SSE events with their ids, less those a rejoining client
    /// has had.
    fn numbered(&self, e: &SharedEvent, parts: Vec<(&'static str, Value)>) -> Vec<SseEvent> {
        let live = e.kind.is_live_only();
        parts
            .into_iter()
            .enumerate()
            .filter(|(n, _)| {
                live || self
                    .resume_from
                    .is_none_or(|from| e.seq > from.seq || (e.seq == from.seq && *n > from.part))
            })
            .map(|(n, (name, data))| {
                let sse = SseEvent::default().event(name).data(data.to_string());
                if live {
                    sse
                } else {
                    sse.id(format!("{}-{n}", e.seq))
                }
            })
            .collect()
    }

    /// What event `e` sends in this stream's modes, in order.
    async fn parts(&mut self, app: &App, e: &SharedEvent) -> Vec<(&'static str, Value)> {
        let mut parts = Vec::new();
        match &e.kind {
            EventKind::RunStarted { input, .. } => {
                if self.modes.has(Mode::Values) {
                    parts.push(("values", input.clone()));
                }
                self.debug(&mut parts, e, "checkpoint", json!({"values": input}));
            }
            EventKind::StepStarted { path, input, .. } => {
                let Some(node) = node_name(path) else {
                    return parts;
                };
                let input = input.as_deref().cloned().unwrap_or(Value::Null);
                self.debug(
                    &mut parts,
                    e,
                    "task",
                    json!({"id": path, "name": node, "input": input, "triggers": []}),
                );
                if self.modes.has(Mode::Events) {
                    parts.push((
                        "events",
                        self.chain_event("on_chain_start", path, node, json!({"input": input})),
                    ));
                }
            }
            EventKind::StepCompleted {
                path,
                kind,
                output: Some(output),
                ..
            } => {
                self.step_completed(&mut parts, e, path, kind, output);
            }
            EventKind::LlmDelta { path, text } => {
                self.streamed.insert(path.clone());
                if self.modes.has(Mode::MessagesTuple) {
                    parts.push((
                        "messages",
                        json!([
                            message("AIMessageChunk", path, text),
                            self.message_metadata(path)
                        ]),
                    ));
                }
                if self.modes.has(Mode::Events) {
                    let chunk = message("AIMessageChunk", path, text);
                    parts.push((
                        "events",
                        self.chain_event(
                            "on_chat_model_stream",
                            path,
                            node_name(path).unwrap_or("model"),
                            json!({"chunk": chunk}),
                        ),
                    ));
                }
            }
            EventKind::Message { message, .. } if self.modes.has(Mode::Custom) => {
                parts.push(("custom", message.clone()));
            }
            EventKind::RunCompleted { .. }
            | EventKind::RunPaused { .. }
            | EventKind::RunCancelled
            | EventKind::RunFailed { .. } => {
                self.ending(&mut parts, app).await;
            }
            _ => {}
        }
        parts
    }

    fn step_completed(
        &mut self,
        parts: &mut Vec<(&'static str, Value)>,
        e: &SharedEvent,
        path: &str,
        kind: &str,
        output: &Value,
    ) {
        let Some(node) = node_name(path) else { return };
        if self.modes.has(Mode::Updates) {
            parts.push(("updates", json!({ node: output })));
        }
        if kind == "llm" && self.modes.has(Mode::MessagesTuple) && !self.streamed.contains(path) {
            let text = match output {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            parts.push((
                "messages",
                json!([message("ai", path, &text), self.message_metadata(path)]),
            ));
        }
        self.debug(
            parts,
            e,
            "task_result",
            json!({"id": path, "name": node, "result": output, "error": null, "interrupts": []}),
        );
        if self.modes.has(Mode::Events) {
            parts.push((
                "events",
                self.chain_event("on_chain_end", path, node, json!({"output": output})),
            ));
        }
    }

    /// The parts a run's end or pause sends: its values (with its interrupts), its
    /// interrupts as an update, or its error.
    async fn ending(&self, parts: &mut Vec<(&'static str, Value)>, app: &App) {
        let Some(run) = settled(app, &self.run_id).await else {
            return;
        };
        if run.status == RunStatus::Failed {
            parts.push(("error", error_of(run.error.as_ref())));
            return;
        }
        if self.modes.has(Mode::Values) {
            parts.push(("values", final_values(&run)));
        }
        if run.status == RunStatus::Paused && self.modes.has(Mode::Updates) {
            parts.push(("updates", json!({"__interrupt__": interrupts_of(&run)})));
        }
    }

    fn debug(
        &self,
        parts: &mut Vec<(&'static str, Value)>,
        e: &SharedEvent,
        kind: &str,
        payload: Value,
    ) {
        if self.modes.has(Mode::Debug) {
            let at = i64::try_from(e.at_ms).unwrap_or_default();
            parts.push((
                "debug",
                json!({"type": kind, "timestamp": time(at), "step": e.seq, "payload": payload}),
            ));
        }
    }

    fn message_metadata(&self, path: &str) -> Value {
        json!({"langgraph_node": node_name(path), "langgraph_path": path, "run_id": self.run_id})
    }

    /// One of LangChain's `astream_events` (v2) records.
    fn chain_event(&self, event: &str, path: &str, name: &str, data: Value) -> Value {
        json!({
            "event": event,
            "name": name,
            "run_id": format!("{}:{path}", self.run_id),
            "tags": [],
            "metadata": {"langgraph_node": name, "langgraph_path": path},
            "data": data,
            "parent_ids": [self.run_id],
        })
    }
}

/// A LangChain message dict of `kind` (`ai`, `AIMessageChunk`) with `text`, its id
/// naming the step that made it.
fn message(kind: &str, path: &str, text: &str) -> Value {
    json!({
        "type": kind,
        "content": text,
        "id": format!("run-{path}"),
        "name": null,
        "additional_kwargs": {},
        "response_metadata": {},
        "tool_calls": [],
        "invalid_tool_calls": [],
        "usage_metadata": null,
    })
}

/// The node a step path names: its last part, unless that is one of a dialect's
/// own steps (`__start__`) or a branch's index.
fn node_name(path: &str) -> Option<&str> {
    let last = path.rsplit('/').next()?;
    let own = last.starts_with("__") || last.parse::<u64>().is_ok() || path == "root";
    (!own && !last.is_empty()).then_some(last)
}

/// The run's record once it shows its end or pause (the record is written just after
/// its last event: wait for it a little).
pub(crate) async fn settled(app: &App, run_id: &str) -> Option<RunRecord> {
    for _ in 0..100 {
        let run = app.engine.store().get_run(run_id).await.ok()??;
        if !matches!(run.status, RunStatus::Running | RunStatus::Queued) {
            return Some(run);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}
