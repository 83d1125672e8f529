//! `GET /v1/runs/{id}/events`: a run's events as Server-Sent Events, read from its
//! stored log from any point (`Last-Event-ID` or `?after=N`) and then followed live.

use crate::App;
use crate::problem::Params;
use crate::problem::Problem;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use serde::Deserialize;
use std::convert::Infallible;
use std::time::Duration;
use weft_core::event::SharedEvent;
use weft_dialects::EventView;
use weft_engine::EngineError;

/// A comment line this often keeps proxies from closing a quiet stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

#[derive(Deserialize)]
pub(crate) struct EventsQuery {
    /// Start after this `seq` (`Last-Event-ID` wins when both are given).
    after: Option<u64>,
    /// `dialect`: the names and shapes the flow's dialect documents, instead of Weft's.
    view: Option<String>,
}

pub(crate) async fn stream(
    State(app): State<App>,
    Path(id): Path<String>,
    Params(q): Params<EventsQuery>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, Problem> {
    let run = app
        .engine
        .store()
        .get_run(&id)
        .await
        .map_err(EngineError::from)?
        .ok_or_else(|| EngineError::NotFound(id.clone()))?;
    let last_event_id = match headers.get("last-event-id") {
        None => None,
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    Problem::new(StatusCode::BAD_REQUEST, "invalid request")
                        .detail("Last-Event-ID is the `seq` of an event: a whole number")
                })?,
        ),
    };
    let view = match q.view.as_deref() {
        None | Some("weft") => None,
        Some("dialect") => Some(weft_dialects::view_of_run(&run)),
        Some(other) => {
            return Err(
                Problem::new(StatusCode::BAD_REQUEST, "invalid request").detail(format!(
                    "`view={other}`: use `weft` (the default) or `dialect`"
                )),
            );
        }
    };
    let rx = app.engine.follow(&run.id, last_event_id.or(q.after));
    let subscribed = crate::metrics::Subscribed::new(app.live.clone());
    let events = futures::stream::unfold(
        (rx, view, subscribed),
        |(mut rx, view, subscribed)| async move {
            loop {
                let next = rx.recv().await?;
                let batch = match next {
                    Ok(e) => to_sse(&e, view.as_ref()),
                    Err(e) => vec![
                        SseEvent::default()
                            .event("error")
                            .data(serde_json::to_string(&Problem::from(e)).unwrap_or_default()),
                    ],
                };
                if !batch.is_empty() {
                    return Some((batch, (rx, view, subscribed)));
                }
            }
        },
    )
    .flat_map(|batch| futures::stream::iter(batch.into_iter().map(Ok::<_, Infallible>)));
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}

/// One event as SSE: `id` its `seq` (none for live-only deltas, which are never
/// replayed), `event` its type, `data` its JSON, in Weft's shape (written once for all
/// the streams that send it) or the dialect's: none, one, or several (a dialect may log
/// several entries for one event; they share its `id`, and are sent together).
fn to_sse(e: &SharedEvent, view: Option<&EventView>) -> Vec<SseEvent> {
    let with_id = |sse: SseEvent| {
        if e.kind.is_live_only() {
            sse
        } else {
            sse.id(e.seq.to_string())
        }
    };
    let Some(v) = view else {
        return vec![with_id(
            SseEvent::default().event(e.type_name()).data(e.json()),
        )];
    };
    v.translate(e)
        .into_iter()
        .map(|data| {
            let kind = data
                .get("type")
                .or_else(|| data.get("event"))
                .and_then(|t| t.as_str())
                .unwrap_or("event")
                .to_owned();
            with_id(SseEvent::default().event(kind).data(data.to_string()))
        })
        .collect()
}
