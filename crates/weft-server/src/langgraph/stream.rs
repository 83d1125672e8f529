//! A run's events as a LangGraph stream: `metadata` first, then the parts of each event
//! in the modes asked for ([`super::parts`]), read from the run's stored event log (so
//! a client rejoins from any point), ending when the run ends or pauses.
//!
//! Each stored part's SSE id is `<seq>-<n>`: the `n`th stored part made of the event
//! `seq`, so a client that rejoins with `Last-Event-ID` gets exactly the parts after
//! it. Token deltas are live only and carry no id.

use super::modes::{EventId, Modes};
use super::parts::{Part, Streamed, Translation};
use super::{interrupts_of, values_of};
use crate::App;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use serde_json::{Value, json};
use std::convert::Infallible;
use std::time::Duration;
use weft_core::event::{EventKind, SharedEvent};
use weft_core::ports::{RunRecord, RunStatus};

/// A run's events as the engine delivers them to a follower.
pub(crate) type Events =
    tokio::sync::mpsc::Receiver<Result<std::sync::Arc<SharedEvent>, weft_engine::EngineError>>;

/// A comment this often keeps proxies from closing a quiet stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Whether a run's drive stops at event `kind`: it ended, or it paused (a LangGraph
/// run is over at an interrupt; answering it goes on in a new stream).
pub(crate) fn stops_here(kind: &EventKind) -> bool {
    kind.is_final() || matches!(kind, EventKind::RunPaused { .. })
}

/// Reads `events` until the run ends or pauses (or they end).
pub(crate) async fn until_it_stops(events: &mut Events) -> Result<(), weft_engine::EngineError> {
    while let Some(next) = events.recv().await {
        if stops_here(&next?.kind) {
            break;
        }
    }
    Ok(())
}

/// How a stream begins.
pub(crate) struct Opening {
    /// Sent first (a new stream's, a rejoin from the start's): `metadata`.
    pub(crate) metadata: bool,
    /// The values to send before any event (a resumed run's, at its pause).
    pub(crate) values: Option<Value>,
    /// Skip the parts up to this one (a rejoin after `Last-Event-ID`).
    pub(crate) after: Option<EventId>,
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
pub(crate) fn error_of(error: Option<&Value>) -> Value {
    let field = |k: &str| error.and_then(|e| e.get(k)).cloned().unwrap_or(Value::Null);
    json!({"error": field("kind"), "message": field("message")})
}

/// The run's record once it shows its end or pause (the record is written just after
/// its last event: wait for it a little).
pub(crate) async fn settled(app: &App, run_id: &str) -> Option<RunRecord> {
    let mut pause = Duration::from_millis(1);
    let until = tokio::time::Instant::now() + Duration::from_secs(2);
    loop {
        let run = app.engine.store().get_run(run_id).await.ok()??;
        if !matches!(run.status, RunStatus::Running | RunStatus::Queued) {
            return Some(run);
        }
        if tokio::time::Instant::now() >= until {
            return None;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// The stream of `who`'s run from `rx`, in `modes`, begun as `opening` says.
pub(crate) fn sse(
    app: &App,
    who: Streamed,
    rx: Events,
    modes: Modes,
    opening: Opening,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>> + use<>> {
    let mut first = Vec::new();
    if opening.metadata {
        let data = json!({"run_id": who.run_id, "attempt": 1});
        first.push(SseEvent::default().event("metadata").data(data.to_string()));
    }
    if let Some(values) = opening
        .values
        .filter(|_| modes.has(super::modes::Mode::Values))
    {
        first.push(SseEvent::default().event("values").data(values.to_string()));
    }
    let translation = Translation::new(who, modes, opening.after.is_none());
    let state = Some((rx, translation, app.clone(), opening.after));
    let events = futures::stream::unfold(state, |state| async move {
        let (mut rx, mut translation, app, after) = state?;
        loop {
            let e = match rx.recv().await? {
                Ok(e) => e,
                Err(e) => {
                    let data = json!({"error": "Error", "message": e.to_string()});
                    let error = SseEvent::default().event("error").data(data.to_string());
                    return Some((vec![error], None));
                }
            };
            let last = stops_here(&e.kind);
            let parts = translation.parts(&app, &e).await;
            let batch = numbered(&e, parts, after);
            if last {
                return Some((batch, None));
            }
            if !batch.is_empty() {
                return Some((batch, Some((rx, translation, app, after))));
            }
        }
    })
    .flat_map(futures::stream::iter);
    let all = futures::stream::iter(first)
        .chain(events)
        .map(Ok::<_, Infallible>);
    Sse::new(all).keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
}

/// `parts` of event `e` as SSE events, each stored part with its id, less those up to
/// `after` (which a rejoining client has had).
fn numbered(e: &SharedEvent, parts: Vec<Part>, after: Option<EventId>) -> Vec<SseEvent> {
    let mut n = 0;
    let mut out = Vec::with_capacity(parts.len());
    for part in parts {
        let sse = SseEvent::default()
            .event(part.name)
            .data(part.data.to_string());
        if part.live {
            out.push(sse);
            continue;
        }
        let id = EventId {
            seq: e.seq,
            part: n,
        };
        n += 1;
        if after.is_none_or(|a| (id.seq, id.part) > (a.seq, a.part)) {
            out.push(sse.id(format!("{}-{}", id.seq, id.part)));
        }
    }
    out
}
