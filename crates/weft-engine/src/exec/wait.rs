//! The `wait` step: the run pauses until a time, holding no process meanwhile.
//!
//! Its time is fixed the first time it is reached and journaled (`started`, with
//! `until_ms`), so a run resumed after a crash waits for the same moment. Paused, the
//! run's record carries the time (`wake_ms`); whichever process serves timers then
//! journals the step's answer (`elapsed`) and continues the run, as an approval's
//! answer would (see [`crate::Engine::wake`]). With `or_approval`, a person may answer
//! first, with one of its options.

use crate::run::{Cx, Exec, Outcome, Pending, Recorded, Stop, Suspension};
use std::sync::Arc;
use weft_core::event::{EventKind, now_ms};
use weft_core::ir::{WAIT_ELAPSED, WaitSpec, parse_wait_for, parse_wait_until};
use weft_core::ports::EntryKind;
use weft_core::{BlockError, ErrorKind, Patch, Value};

pub(crate) async fn run(cx: &Cx<'_>, w: &WaitSpec) -> Exec {
    let until_ms = match cx.run.recorded(&cx.key) {
        // Woken (or answered) in an earlier drive: the step ends now, for the first time.
        Some(Recorded::Answer(answer)) => return Ok(continued(cx, answer)),
        Some(Recorded::Started(started)) => started.get("until_ms").and_then(Value::as_i64),
        _ => None,
    };
    let until_ms = match until_ms {
        Some(until) => until,
        None => {
            let until = deadline(cx, w)?;
            let started = serde_json::json!({ "until_ms": until });
            cx.run.record(&cx.key, EntryKind::Started, started).await;
            if let Some(e) = cx.run.journal_failure() {
                return Err(Stop::Failed(e));
            }
            until
        }
    };
    if now_ms() as i64 >= until_ms {
        let answer = serde_json::json!({ "decision": WAIT_ELAPSED });
        cx.run
            .record(&cx.key, EntryKind::Answer, answer.clone())
            .await;
        cx.run.emitter.emit(|| EventKind::TimerFired {
            key: cx.key.to_string(),
        });
        // Its time had come when it was reached: it ran now, nothing was replayed.
        return Ok(Outcome {
            replayed: false,
            ..continued(cx, &answer)
        });
    }
    cx.run.emitter.emit(|| EventKind::TimerSet {
        key: cx.key.to_string(),
        until_ms,
    });
    let mut pending = Pending {
        key: cx.key.to_string(),
        prompt: String::new(),
        options: Vec::new(),
        wake_ms: Some(until_ms),
        timer_only: true,
    };
    if let Some(a) = &w.or_approval {
        pending.prompt = match &a.prompt {
            Some(p) => cx.render(&p.0, &cx.scope())?,
            None => String::new(),
        };
        pending.options = a.options.clone();
        pending.timer_only = false;
        cx.run.emitter.emit(|| EventKind::ApprovalRequested {
            key: cx.key.to_string(),
            prompt: pending.prompt.clone(),
            options: pending.options.clone(),
        });
    }
    Err(Stop::Suspended(Suspension {
        patch: Patch::default(),
        pending: vec![pending],
    }))
}

/// The step once its time came or a person answered: its input goes on, and its exit
/// is `elapsed` or the person's decision. Like an answered approval, it is marked
/// replayed: its end comes from the journal, so a later drive ends it the same way.
fn continued(cx: &Cx<'_>, answer: &Value) -> Outcome {
    let exit = answer
        .get("decision")
        .and_then(Value::as_str)
        .unwrap_or(WAIT_ELAPSED);
    Outcome {
        exit: Some(Arc::from(exit)),
        replayed: true,
        ..Outcome::of(cx.input.clone())
    }
}

/// The moment the step waits for, from its rendered `for` or `until`.
fn deadline(cx: &Cx<'_>, w: &WaitSpec) -> Result<i64, Stop> {
    let config = |message: String| Stop::Failed(BlockError::new(ErrorKind::Config, message));
    let scope = cx.scope();
    match (&w.duration, &w.until) {
        (Some(d), _) => {
            let text = cx.render(&d.0, &scope)?;
            let ms = parse_wait_for(&text).map_err(|e| config(format!("wait `for`: {e}")))?;
            Ok((now_ms() as i64).saturating_add(i64::try_from(ms).unwrap_or(i64::MAX)))
        }
        (None, Some(u)) => {
            let text = cx.render(&u.0, &scope)?;
            parse_wait_until(&text).map_err(|e| config(format!("wait `until`: {e}")))
        }
        (None, None) => Err(config("a wait names neither `for` nor `until`".into())),
    }
}
