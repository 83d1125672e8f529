//! `POST /api/run-stream` and `/api/resume-stream`: a run's progress as AgentFlow's
//! SSE (`data: {"type":"start","runId"}`, one `{"type":"log","entry"}` per log entry,
//! then `{"type":"done","result"}` or `{"type":"error","message"}`).
//!
//! The entries are read from the run's stored event log, followed live, so they are the
//! same entries `GET /api/run/{runId}` answers later. A client that goes away leaves the
//! run going, as AgentFlow's server does.

use super::result::{self, Replays};
use super::{ApiError, Door, ResumeLock, graph_of, resume_request};
use crate::auth::Principal;
use axum::Extension;
use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures::Stream;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::time::Duration;
use tokio::sync::mpsc;
use weft_core::ports::RunStatus;
use weft_dialects::EventView;
use weft_engine::{EngineError, RunResult, Underway};

/// How many events may wait for a slow client before the run's follower waits too.
const BUFFERED: usize = 256;

type Events = Sse<
    axum::response::sse::KeepAliveStream<
        futures::stream::BoxStream<'static, Result<SseEvent, Infallible>>,
    >,
>;

/// `POST /api/run-stream`.
pub(super) async fn run(
    State(door): State<Door>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Events, ApiError> {
    let graph = graph_of(body)?;
    let run = super::start(&door.app, &graph).await?;
    let so_far = Logged {
        after: None,
        entries: Vec::new(),
        replays: Replays::default(),
    };
    Ok(progress(
        door,
        run,
        so_far,
        Some(result::normalized(graph)),
        None,
    ))
}

/// `POST /api/resume-stream`: only the entries logged from the answer on.
pub(super) async fn resume(
    State(door): State<Door>,
    Extension(principal): Extension<Principal>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Events, ApiError> {
    let (rec, answer, lock) = resume_request(&door, body).await?;
    let store = door.app.engine.store();
    let workflow = result::workflow(store.as_ref(), &rec).await;
    if rec.status != RunStatus::Paused {
        // Still going: where it stands, as AgentFlow's engine answers a resume then.
        let result = door.result_of(&rec, workflow).await?;
        let frames = vec![
            frame(&json!({"type": "start", "runId": rec.id})),
            frame(&json!({"type": "done", "result": result})),
        ];
        return Ok(sse(futures::stream::iter(frames)));
    }
    // What it logged so far (read before the answer): the drive that takes the answer
    // replays those steps, and the stream sends only what comes after.
    let mut replays = Replays::default();
    let view = weft_dialects::view_of_run(&rec);
    let entries = result::logs(store.as_ref(), &rec, &view, None, &mut replays)
        .await
        .map_err(EngineError::from)?;
    let after = store
        .next_event_seq(&rec.id)
        .await
        .map_err(EngineError::from)?
        .checked_sub(1);
    let so_far = Logged {
        after,
        entries,
        replays,
    };
    let run = super::answer_run(&door, &rec, answer, &principal).await?;
    Ok(progress(door, run, so_far, workflow, Some(lock)))
}

/// What a stream starts from: the run's entries so far (the result carries them all),
/// the `seq` of the last event they come from, and what they let later drives leave out.
struct Logged {
    after: Option<u64>,
    entries: Vec<Value>,
    replays: Replays,
}

/// The SSE of run `run` after what `so_far` holds: its log entries as they are stored,
/// then its result once it ends or pauses.
fn progress(
    door: Door,
    run: Underway,
    mut so_far: Logged,
    workflow: Option<Value>,
    lock: Option<ResumeLock>,
) -> Events {
    let (tx, rx) = mpsc::channel(BUFFERED);
    tokio::spawn(async move {
        let _lock = lock;
        let run_id = run.run_id().to_owned();
        let _ = tx
            .send(frame(&json!({"type": "start", "runId": run_id})))
            .await;
        let done = async {
            // The record holds the view its entries are named by; it exists once the
            // run was started or answered.
            let view = weft_dialects::view_of_run(&door.record(&run_id).await?);
            follow(&door, run, &view, &mut so_far, &tx).await?;
            // The ended run's record, and the entries the follower had not delivered.
            let rec = door.record(&run_id).await?;
            let store = door.app.engine.store();
            let rest = result::logs(
                store.as_ref(),
                &rec,
                &view,
                so_far.after,
                &mut so_far.replays,
            )
            .await
            .map_err(EngineError::from)?;
            for entry in &rest {
                let _ = tx.send(log_frame(entry)).await;
            }
            so_far.entries.extend(rest);
            Ok::<_, ApiError>(result::shaped(&rec, &view, so_far.entries, workflow))
        };
        let _ = match done.await {
            Ok(result) => tx.send(frame(&json!({"type": "done", "result": result}))),
            Err(e) => tx.send(error_frame(&e.message())),
        }
        .await;
    });
    sse(tokio_stream_of(rx))
}

/// Sends run `run`'s log entries as they are stored, keeping them in `so_far`, until it
/// ends or pauses.
async fn follow(
    door: &Door,
    run: Underway,
    view: &EventView,
    so_far: &mut Logged,
    tx: &mpsc::Sender<SseEvent>,
) -> Result<(), EngineError> {
    let mut events = door.app.engine.follow(run.run_id(), so_far.after);
    let ended = run.end();
    tokio::pin!(ended);
    loop {
        tokio::select! {
            ended = &mut ended => return ended.map(|_: RunResult| ()),
            next = events.recv() => match next {
                Some(Ok(e)) => {
                    if e.kind.is_live_only() {
                        continue;
                    }
                    so_far.after = Some(e.seq);
                    for entry in result::entries(view, &e, &mut so_far.replays) {
                        // A client that went away stops nothing: the run goes on.
                        let _ = tx.send(log_frame(&entry)).await;
                        so_far.entries.push(entry);
                    }
                }
                Some(Err(e)) => return Err(e),
                // The follower stopped: the run's end says the rest.
                None => return ended.await.map(|_| ()),
            },
        }
    }
}

fn log_frame(entry: &Value) -> SseEvent {
    frame(&json!({"type": "log", "entry": entry}))
}

/// One SSE frame: `data: <json>` and nothing else, as AgentFlow's server writes them
/// (its client reads only `data:` lines).
fn frame(data: &Value) -> SseEvent {
    SseEvent::default().data(data.to_string())
}

fn error_frame(message: &str) -> SseEvent {
    frame(&json!({"type": "error", "message": message}))
}

fn tokio_stream_of(mut rx: mpsc::Receiver<SseEvent>) -> impl Stream<Item = SseEvent> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

fn sse(frames: impl Stream<Item = SseEvent> + Send + 'static) -> Events {
    use futures::StreamExt;
    Sse::new(frames.map(Ok::<_, Infallible>).boxed())
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}
