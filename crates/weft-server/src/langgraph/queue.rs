//! Runs queued behind a thread's running run (`multitask_strategy: enqueue`, LangGraph's
//! default): each waits on its own task for the thread's latest run to end or pause,
//! then starts from the thread's values as they are then.
//!
//! A queued run lives in this process until it starts: a server that stops before
//! then loses it (its client's stream ends without it; once started, a run is as
//! durable as any).

use super::start::{NewRun, start_if_idle};
use super::threads::find;
use super::{Door, time};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use weft_core::ports::{RunRecord, RunStatus};

/// A run waiting for its thread.
pub(crate) struct Waiting {
    thread_id: String,
    new: NewRun,
    created_ms: i64,
}

impl Waiting {
    pub(crate) fn new(thread_id: &str, new: NewRun) -> Waiting {
        Waiting {
            thread_id: thread_id.to_owned(),
            new,
            created_ms: weft_core::event::now_ms() as i64,
        }
    }

    /// The run as LangGraph's clients read one: `pending`.
    fn shown(&self) -> Value {
        json!({
            "run_id": self.new.run_id,
            "thread_id": self.thread_id,
            "assistant_id": self.new.flow,
            "created_at": time(self.created_ms),
            "updated_at": time(self.created_ms),
            "status": "pending",
            "metadata": {},
            "multitask_strategy": "enqueue",
            "kwargs": {"input": self.new.input},
        })
    }
}

/// The queued runs of this process, by run id, with the tasks that start them.
#[derive(Clone, Default)]
pub(crate) struct Queue(Arc<Mutex<HashMap<String, (Waiting, tokio::task::AbortHandle)>>>);

impl Queue {
    /// Queues `waiting` behind its thread's running run.
    pub(crate) fn wait(&self, door: Door, waiting: Waiting) {
        let run_id = waiting.new.run_id.clone();
        let (thread_id, queue) = (waiting.thread_id.clone(), self.clone());
        let mut runs = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let task = tokio::spawn(async move {
            queue.start_in_turn(&door, &thread_id, &run_id).await;
            queue.remove(&run_id);
        });
        runs.insert(waiting.new.run_id.clone(), (waiting, task.abort_handle()));
    }

    /// Waits for the thread's latest run to end or pause, then starts the queued run;
    /// again while another run takes its turn first.
    async fn start_in_turn(&self, door: &Door, thread_id: &str, run_id: &str) {
        let app = &door.app;
        loop {
            if let Ok(thread) = find(app, thread_id).await
                && let Some(latest) = thread.last_run
            {
                until_stopped(door, &latest).await;
            }
            let started = {
                let runs = self.0.lock().unwrap_or_else(|p| p.into_inner());
                let Some((waiting, _)) = runs.get(run_id) else {
                    return;
                };
                waiting.new.clone()
            };
            match start_if_idle(app, thread_id, &started).await {
                Ok(true) => return,
                Ok(false) => continue,
                Err(e) => {
                    let why = format!("the queued run was not started: {}", e.detail);
                    eprintln!("weft serve: run {run_id} of thread {thread_id}: {why}");
                    let failed = Ended::Failed(why);
                    record_dropped(app, thread_id, &started, failed).await;
                    return;
                }
            }
        }
    }

    fn remove(&self, run_id: &str) -> Option<(Waiting, tokio::task::AbortHandle)> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(run_id)
    }

    /// Cancels queued run `run_id` of `thread_id`: whether it was queued. The run is
    /// stored as cancelled, so that a client following it sees it end.
    pub(crate) async fn cancel(&self, app: &crate::App, thread_id: &str, run_id: &str) -> bool {
        let dropped = {
            let mut runs = self.0.lock().unwrap_or_else(|p| p.into_inner());
            if runs
                .get(run_id)
                .is_none_or(|(w, _)| w.thread_id != thread_id)
            {
                return false;
            }
            runs.remove(run_id)
        };
        if let Some((waiting, task)) = dropped {
            task.abort();
            record_dropped(app, thread_id, &waiting.new, Ended::Cancelled).await;
        }
        true
    }

    /// Queued run `run_id` of `thread_id`, as clients read a run.
    pub(crate) fn shown(&self, thread_id: &str, run_id: &str) -> Option<Value> {
        let runs = self.0.lock().unwrap_or_else(|p| p.into_inner());
        runs.get(run_id)
            .filter(|(w, _)| w.thread_id == thread_id)
            .map(|(w, _)| w.shown())
    }

    /// The stream modes queued run `run_id` asked for.
    pub(crate) fn modes(&self, run_id: &str) -> Option<super::modes::Modes> {
        let runs = self.0.lock().unwrap_or_else(|p| p.into_inner());
        runs.get(run_id).map(|(w, _)| w.new.modes.clone())
    }

    /// The queued runs of `thread_id`, newest first.
    pub(crate) fn of_thread(&self, thread_id: &str) -> Vec<Value> {
        let runs = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let mut mine: Vec<&Waiting> = runs
            .values()
            .map(|(w, _)| w)
            .filter(|w| w.thread_id == thread_id)
            .collect();
        mine.sort_by(|a, b| (b.created_ms, &b.new.run_id).cmp(&(a.created_ms, &a.new.run_id)));
        mine.into_iter().map(Waiting::shown).collect()
    }
}

/// Returns once run `run_id` has ended or paused: at once when it has (a paused run
/// holds its thread no more, and sends no event that would end a wait), else when its
/// events say so. Where its events stand is read before its status, so an end between
/// the two reads is among the events followed.
async fn until_stopped(door: &Door, run_id: &str) {
    let store = door.app.engine.store();
    let Ok(next) = store.next_event_seq(run_id).await else {
        return;
    };
    let going = store
        .get_run(run_id)
        .await
        .ok()
        .flatten()
        .is_some_and(|run| matches!(run.status, RunStatus::Queued | RunStatus::Running));
    if !going {
        return;
    }
    let mut events = door.app.engine.follow(run_id, next.checked_sub(1));
    let _ = super::stream::until_it_stops(&mut events).await;
    super::stream::settled(&door.app, run_id).await;
}

/// How a queued run ended without starting.
enum Ended {
    Cancelled,
    Failed(String),
}

/// Stores queued run `new` as it ended without starting, so that the clients that
/// follow it see it end (their streams wait for it to be stored) and read why.
async fn record_dropped(app: &crate::App, thread_id: &str, new: &NewRun, ended: Ended) {
    let now = weft_core::event::now_ms() as i64;
    let mut run = RunRecord::new(
        new.run_id.clone(),
        new.flow_hash.clone(),
        new.flow.clone(),
        new.input.clone(),
        now,
    );
    run.flow_id = Some(new.flow_id.clone());
    run.settings = super::start::settings_with(app.service.run_settings().cloned(), thread_id, new);
    match ended {
        Ended::Cancelled => run.status = RunStatus::Cancelled,
        Ended::Failed(why) => {
            run.status = RunStatus::Failed;
            run.error = Some(json!({"kind": "input", "message": why}));
        }
    }
    if let Err(e) = app.engine.store().create_run(&run).await {
        eprintln!(
            "weft serve: run {} of thread {thread_id} was not recorded: {e}",
            run.id
        );
    }
}
