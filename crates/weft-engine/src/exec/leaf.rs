//! Leaves other than the model call: transform, approval, code, handler, action, and the
//! journaling wrapper every effectful leaf runs through.

use crate::run::{Cx, Exec, Outcome, Pending, Recorded, Stop, Suspension};
use std::future::Future;
use std::sync::Arc;
use weft_core::event::EventKind;
use weft_core::ir::{ActionSpec, ApprovalSpec, CodeSpec, HandlerSpec, SourceLines, TransformSpec};
use weft_core::ports::{CodeRequest, EntryKind, MessageSink, NativeCall, NativeOutput};
use weft_core::value::Shared;
use weft_core::{BlockError, ErrorKind, Patch, Value};

/// What a journaled step's work can reach, which decides when its entry is committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reach {
    /// Outside the run (a model, an action, a host function): everything journaled
    /// before is made durable first, so what the step was given survives a crash, and
    /// its own result is durable before anything after it starts.
    Outside,
    /// Only its inputs (sandboxed code): a crash runs it again from the same inputs, so
    /// its entry goes with the store's next commit instead of waiting for one of its own.
    Inputs,
    /// Outside the run, and it must not happen twice (`on_unknown_outcome: fail`): as
    /// `Outside`, and the step's start is also durable before it runs, so a later drive
    /// that finds the start without a result fails the step instead of repeating it.
    OutsideAtMostOnce,
}

/// Answers from the journal when it holds this step's result; otherwise runs `work`,
/// journals its result and returns it.
pub(crate) async fn journaled<F>(cx: &Cx<'_>, reach: Reach, work: F) -> Exec
where
    F: Future<Output = Exec>,
{
    match cx.run.recorded(&cx.key) {
        Some(Recorded::Result(v)) => return decode(v).map_err(Stop::Failed),
        Some(Recorded::Started(started)) => {
            return Err(Stop::Failed(outcome_unknown(cx, started)));
        }
        _ => {}
    }
    if reach != Reach::Inputs {
        cx.run.sync().await;
    }
    if reach == Reach::OutsideAtMostOnce {
        let started = serde_json::json!({"idempotency_key": cx.idempotency_key()});
        cx.run.record(&cx.key, EntryKind::Started, started).await;
        if let Some(e) = cx.run.journal_failure() {
            // Unrecorded, a start could not be told from a step never begun.
            return Err(Stop::Failed(e));
        }
    }
    let out = tokio::select! {
        r = work => r?,
        _ = cx.run.cancel.cancelled() => {
            return Err(Stop::Failed(BlockError::new(ErrorKind::Cancelled, "the run was cancelled")));
        }
    };
    let entry = encode(&out);
    match reach {
        Reach::Outside | Reach::OutsideAtMostOnce => {
            cx.run.record(&cx.key, EntryKind::Result, entry).await
        }
        Reach::Inputs => {
            cx.run
                .record_queued(&cx.key, EntryKind::Result, entry)
                .await
        }
    }
    Ok(out)
}

/// The failure of a step that an earlier drive started (`started`: what it recorded
/// then, its idempotency key) and recorded nothing after.
fn outcome_unknown(cx: &Cx<'_>, started: &Value) -> BlockError {
    BlockError::new(
        ErrorKind::OutcomeUnknown,
        format!(
            "step {} was under way when the process running it stopped, and it may not run twice (on_unknown_outcome: fail), so whether it took effect is unknown; check the service it calls (the request carried the idempotency key in this error's detail), then `weft runs retry` runs the step again with a new key",
            cx.key
        ),
    )
    .with_detail(started.clone())
}

/// The journal entry of a step's result. It shares the output and the patch's values
/// with the outcome instead of copying them, so a store can tell by pointer that the
/// step's events carry the same output (and store it once).
fn encode(out: &Outcome) -> Shared {
    let mut m = weft_core::value::SharedMap::new();
    m.insert("output".into(), out.output.clone());
    if let Some(x) = &out.exit {
        m.insert("exit".into(), Shared::new(Value::String(x.to_string())));
    }
    if !out.patch.is_empty() {
        m.insert("patch".into(), out.patch.to_shared());
    }
    Shared::object(m)
}

fn decode(v: &Shared) -> Result<Outcome, BlockError> {
    let corrupt = || BlockError::new(ErrorKind::Store, "a journal entry has an unexpected shape");
    let v = v.node();
    let output = v.get("output").ok_or_else(corrupt)?.to_shared();
    let exit = v
        .get("exit")
        .and_then(|x| x.as_json()?.as_str().map(Arc::from));
    let patch: Patch = match v.get("patch") {
        Some(p) => serde_json::from_value(p.to_value()).map_err(|_| corrupt())?,
        None => Patch::default(),
    };
    Ok(Outcome {
        output,
        exit,
        patch,
        replayed: true,
    })
}

pub(crate) fn transform(cx: &Cx<'_>, t: &TransformSpec) -> Exec {
    let scope = cx.scope();
    // `output: "{{ input }}"` passes the value on itself, not a copy of it.
    let output = cx.value_shared(&t.output.0, &scope)?;
    let exit = match &t.exit {
        Some(e) => Some(Arc::from(cx.render(&e.0, &scope)?.as_str())),
        None => None,
    };
    Ok(Outcome {
        exit,
        ..Outcome::of(output)
    })
}

/// An approval is answered from the journal, or suspends the run.
pub(crate) fn approval(cx: &Cx<'_>, a: &ApprovalSpec) -> Exec {
    if let Some(Recorded::Answer(answer)) = cx.run.recorded(&cx.key) {
        let decision = answer
            .get("decision")
            .and_then(Value::as_str)
            .map(Arc::from);
        return Ok(Outcome {
            exit: decision,
            replayed: true,
            ..Outcome::of(Arc::new(answer.clone()))
        });
    }
    let prompt = match &a.prompt {
        Some(p) => cx.render(&p.0, &cx.scope())?,
        None => String::new(),
    };
    cx.run.emitter.emit(|| EventKind::ApprovalRequested {
        key: cx.key.to_string(),
        prompt: prompt.clone(),
        options: a.options.clone(),
    });
    Err(Stop::Suspended(Suspension {
        patch: Patch::default(),
        pending: vec![Pending::approval(
            cx.key.to_string(),
            prompt,
            a.options.clone(),
        )],
    }))
}

/// Names for an error message: `a, b`, or `none`.
fn listed(names: Vec<String>) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

fn native_outcome(n: NativeOutput) -> Outcome {
    Outcome {
        exit: n.exit.map(|x| Arc::from(x.as_str())),
        patch: n.patch,
        ..Outcome::of(Arc::new(n.output))
    }
}

pub(crate) async fn code(cx: &Cx<'_>, spec: &CodeSpec) -> Exec {
    let engine = &cx.run.engine;
    let runner = engine
        .code
        .iter()
        .find(|r| r.languages().iter().any(|l| l == &spec.language))
        .ok_or_else(|| {
            let languages = engine.code.iter().flat_map(|r| r.languages()).collect();
            BlockError::new(
                ErrorKind::Config,
                format!(
                    "no sandbox for `{}` code is configured in this engine (available: {})",
                    spec.language,
                    listed(languages)
                ),
            )
        })?;
    let args = match &spec.args {
        Some(t) => cx.value_shared(&t.0, &cx.scope())?,
        None => Shared::from(weft_core::value::SharedMap::from_iter([
            ("input".to_owned(), cx.input.clone()),
            ("state".to_owned(), cx.state.to_shared()),
        ])),
    };
    let output = runner
        .run(CodeRequest {
            language: &spec.language,
            source: &spec.source,
            entry: spec.entry.as_deref(),
            args,
            imports: spec.imports.as_deref(),
            builtins: spec.builtins.as_deref(),
            limits: &spec.limits,
        })
        .await
        .map_err(|e| at_file_line(e, spec.origin))?;
    Ok(Outcome::of(output))
}

/// Names the flow file's line in a code failure that carries its source line (the
/// sandbox's `(line N)` counts lines of the source as run, which a loader may have
/// wrapped).
fn at_file_line(mut e: BlockError, origin: Option<SourceLines>) -> BlockError {
    let Some(origin) = origin else { return e };
    let Some(detail) = e.detail.as_deref_mut().and_then(Value::as_object_mut) else {
        return e;
    };
    let Some(line) = detail.get("line").and_then(Value::as_u64) else {
        return e;
    };
    let Some(file_line) = u32::try_from(line)
        .ok()
        .and_then(|l| origin.file_line_of(l))
    else {
        return e;
    };
    detail.insert("file_line".into(), Value::from(file_line));
    let source_suffix = format!(" (line {line})");
    if let Some(stem) = e.message.strip_suffix(&source_suffix) {
        e.message = format!("{stem} (line {file_line} of the flow file)");
    } else {
        e.message = format!("{} (line {file_line} of the flow file)", e.message);
    }
    e
}

fn native_call(cx: &Cx<'_>, config: Value) -> NativeCall {
    let messages = cx.run.emitter.active().then(|| {
        let emitter = cx.run.emitter.clone();
        let path = cx.key.clone();
        MessageSink(Arc::new(move |message| {
            emitter.emit(|| EventKind::Message {
                path: path.clone(),
                message,
            })
        }))
    });
    NativeCall {
        input: cx.input.to_value(),
        state: cx.state.clone(),
        config,
        path: cx.key.to_string(),
        run_id: cx.run.id.clone(),
        idempotency_key: cx.idempotency_key(),
        attempt: cx.attempt,
        messages,
        parent: cx.parent.clone(),
        scoped: cx.run.scoped.clone(),
    }
}

pub(crate) async fn handler(cx: &Cx<'_>, spec: &HandlerSpec) -> Exec {
    let f = cx.run.engine.handlers.get(&spec.name).ok_or_else(|| {
        BlockError::new(
            ErrorKind::Config,
            format!("no handler named `{}` is registered", spec.name),
        )
        .with_detail(serde_json::json!({"hint": "the host program registers handlers with EngineBuilder::handler"}))
    })?;
    let out = f.call(native_call(cx, spec.config.clone())).await?;
    Ok(native_outcome(out))
}

pub(crate) async fn action(cx: &Cx<'_>, spec: &ActionSpec) -> Exec {
    let engine = &cx.run.engine;
    let f = engine.actions.get(&spec.uses).ok_or_else(|| {
        let mut known: Vec<String> = engine.actions.keys().cloned().collect();
        known.sort_unstable();
        BlockError::new(
            ErrorKind::Config,
            format!(
                "no action named `{}` is available (available: {})",
                spec.uses,
                listed(known)
            ),
        )
    })?;
    let params = match &spec.params {
        Some(t) => cx.value(&t.0, &cx.scope())?,
        None => Value::Object(Default::default()),
    };
    let out = f.call(native_call(cx, params)).await?;
    Ok(native_outcome(out))
}
