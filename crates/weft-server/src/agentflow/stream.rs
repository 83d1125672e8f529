//! `POST /api/run-stream` and `/api/resume-stream`: a run's progress as AgentFlow's
//! SSE (`data: {"type":"start","runId"}`, one `{"type":"log","entry"}` per log entry,
//! then `{"type":"done","result"}` or `{"type":"error","message"}`).
//!
//! The entries are read from the run's stored event log, followed live, so they are the
//! same entries `GET /api/run/{runId}` answers later. A client that goes away leaves the
//! run going, as AgentFlow's server does.

use super::result::{self, Replays};
use super::{ApiError, Door, ResumeLock, graph_of, resume_request};
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
    Ok(progress(
        door,
        run,
        None,
        Replays::default(),
        Some(result::normalized(graph)),
        None,
    ))
}

/// `POST /api/resume-stream`: only the entries logged from the answer on.
pub(super) async fn resume(
    State(door): State<Door>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Events, ApiError> {
    let (rec, answer, lock) = resume_request(&door, body).await?;
    let store = door.app.engine.store();
    let workflow = result::workflow(store.as_ref(), &rec).await;
    if rec.status != RunStatus::Paused {
        // Still going: where it stands, as AgentFlow's engine answers a resume then.
        let result = door.result(&rec.id, workflow).await?;
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
    result::logs(store.as_ref(), &rec, &view, None, &mut replays)
        .await
        .map_err(EngineError::from)?;
    let after = store
        .next_event_seq(&rec.id)
        .await
        .map_err(EngineError::from)?
        .checked_sub(1);
    let run = super::answer_run(&door, &rec, answer).await?;
    Ok(progress(door, run, after, replays, workflow, Some(lock)))
}

/// The SSE of run `run` from the event after `after`: its log entries as they are
/// stored, then its result once it ends or pauses.
fn progress(
    door: Door,
    run: Underway,
    after: Option<u64>,
    mut replays: Replays,
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
        let last = match follow(&door, run, after, &mut replays, &tx).await {
            Ok(last) => last,
            Err(e) => {
                let _ = tx.send(error_frame(&e.to_string())).await;
                return;
            }
        };
        let done = async {
            let rest = entries_after(&door, &run_id, last, &mut replays).await?;
            for entry in rest {
                let _ = tx
                    .send(frame(&json!({"type": "log", "entry": entry})))
                    .await;
            }
            door.result(&run_id, workflow).await
        };
        let _ = match done.await {
            Ok(result) => tx.send(frame(&json!({"type": "done", "result": result}))),
            Err(e) => tx.send(error_frame(&e.error)),
        }
        .await;
    });
    sse(tokio_stream_of(rx))
}

/// Sends run `run`'s log entries as they are stored, until it ends or pauses; answers
/// the `seq` of the last event sent.
async fn follow(
    door: &Door,
    run: Underway,
    mut last: Option<u64>,
    replays: &mut Replays,
    tx: &mpsc::Sender<SseEvent>,
) -> Result<Option<u64>, EngineError> {
    let engine = &door.app.engine;
    let run_id = run.run_id().to_owned();
    let view = match engine.store().get_run(&run_id).await? {
        Some(rec) => weft_dialects::view_of_run(&rec),
        None => return Err(EngineError::NotFound(run_id)),
    };
    let mut events = engine.follow(&run_id, last);
    let ended = run.end();
    tokio::pin!(ended);
    loop {
        tokio::select! {
            ended = &mut ended => {
                ended.map(|_: RunResult| ())?;
                return Ok(last);
            }
            next = events.recv() => match next {
                Some(Ok(e)) => {
                    if e.kind.is_live_only() {
                        continue;
                    }
                    last = Some(e.seq);
                    for entry in result::entries(&view, &e, replays) {
                        // A client that went away stops nothing: the run goes on.
                        let _ = tx.send(frame(&json!({"type": "log", "entry": entry}))).await;
                    }
                }
                Some(Err(e)) => return Err(e),
                // The follower stopped: the run's end says the rest.
                None => {
                    ended.await?;
                    return Ok(last);
                }
            },
        }
    }
}

/// The log entries of run `run_id` stored after event `last` (those the follower had
/// not delivered when the run ended).
async fn entries_after(
    door: &Door,
    run_id: &str,
    last: Option<u64>,
    replays: &mut Replays,
) -> Result<Vec<Value>, ApiError> {
    let store = door.app.engine.store();
    let rec = store
        .get_run(run_id)
        .await
        .map_err(EngineError::from)?
        .ok_or_else(|| EngineError::NotFound(run_id.to_owned()))?;
    let view = weft_dialects::view_of_run(&rec);
    Ok(result::logs(store.as_ref(), &rec, &view, last, replays)
        .await
        .map_err(EngineError::from)?)
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
