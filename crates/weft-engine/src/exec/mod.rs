//! Executes one block: shapes its input, applies its policies (budget, timeout, retry,
//! rescue, assertions), dispatches on its kind, and writes its output into the state.

mod composite;
mod embed;
mod graph;
mod leaf;
mod llm;
mod stall;
mod wait;

use crate::run::{Cx, Exec, Outcome, Recorded, Stop};
use futures::future::BoxFuture;
use leaf::Reach;
use rand::Rng;
use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_core::event::EventKind;
use weft_core::ir::{Block, BlockKind, Retry, UnknownOutcome};
use weft_core::ports::EntryKind;
use weft_core::value::{Kind, Shared, split_path};
use weft_core::{BlockError, ErrorKind, Value};

pub(crate) use composite::run_subflow;

/// Runs `block` in `cx`. Boxed because blocks nest.
pub(crate) fn exec<'a>(cx: Cx<'a>, block: &'a Block) -> BoxFuture<'a, Exec> {
    Box::pin(exec_block(cx, block))
}

fn cancelled() -> BlockError {
    BlockError::new(ErrorKind::Cancelled, "the run was cancelled")
}

async fn exec_block<'a>(mut cx: Cx<'a>, block: &'a Block) -> Exec {
    if cx.run.cancel.is_cancelled() {
        return Err(Stop::Failed(cancelled().at(&cx.key)));
    }
    cx.run.engine.event_room().await;
    if let Some(t) = &block.data.input {
        cx.input = cx
            .value_shared(&t.0, &cx.scope())
            .map_err(|e| e.at(&cx.key))?;
    }
    if !block.data.bind.is_empty() {
        let scope = cx.scope();
        for (name, t) in &block.data.bind {
            let v = cx.value_shared(&t.0, &scope).map_err(|e| e.at(&cx.key))?;
            cx.locals.bind(name.as_str(), v);
        }
    }
    if let Some(b) = &block.policy.budget {
        cx.budgets = cx.budgets.push(block.label().unwrap_or(&cx.key), b);
    }
    if let Some(s) = &block.policy.stall {
        cx.stall = cx.stall.within(s);
    }
    // A named block that runs others (a composite, or a model call running tools) is
    // the parent native functions inside it see.
    if let Some(id) = block.label()
        && !cx.run.engine.handlers.is_empty()
        && matches!(
            block.kind,
            BlockKind::Sequence(_)
                | BlockKind::Parallel(_)
                | BlockKind::Map(_)
                | BlockKind::Loop(_)
                | BlockKind::Branch(_)
                | BlockKind::Graph(_)
                | BlockKind::SubFlow(_)
                | BlockKind::Llm(_)
        )
    {
        cx.parent = Some(Arc::new(weft_core::ports::ParentBlock {
            name: id.to_owned(),
            kind: block.kind_name().to_owned(),
            input: cx.input.clone().into_json(),
        }));
    }
    let started = Instant::now();
    let emitter = &cx.run.emitter;
    let leaf = block.kind.is_leaf();
    // Rendered before the step starts, so that a template error fails it as an input
    // error does: before its `step_started`.
    let announced = match &block.data.announce {
        Some(t) => Some(cx.value(&t.0, &cx.scope()).map_err(|e| e.at(&cx.key))?),
        None => None,
    };
    emitter.emit(|| EventKind::StepStarted {
        path: cx.key.clone(),
        kind: block.kind_name().into(),
        input: leaf.then(|| cx.input.clone()),
    });
    if let Some(message) = announced {
        emitter.emit(|| EventKind::Message {
            path: cx.key.clone(),
            message,
        });
    }
    let wall = block.policy.budget.as_ref().and_then(|b| b.wall_ms);
    let warn_only = block
        .policy
        .budget
        .as_ref()
        .is_some_and(|b| b.on_exceed == weft_core::ir::OnExceed::Warn);
    let result = match wall {
        None => run_with_policy(&cx, block).await,
        Some(ms) if warn_only => {
            let r = run_with_policy(&cx, block).await;
            let took = started.elapsed().as_millis() as u64;
            if took > ms {
                emitter.emit(|| EventKind::BudgetWarning {
                    path: cx.key.clone(),
                    owner: block
                        .label()
                        .map_or_else(|| cx.key.to_string(), str::to_owned),
                    budget: "wall_ms".into(),
                    used: took as f64,
                    limit: ms as f64,
                    exceeded: true,
                });
            }
            r
        }
        Some(ms) => {
            match tokio::time::timeout(Duration::from_millis(ms), run_with_policy(&cx, block)).await
            {
                Ok(r) => r,
                Err(_) => Err(Stop::Failed(
                    BlockError::new(
                        ErrorKind::Budget,
                        format!("wall-time budget of {ms} ms exceeded"),
                    )
                    .with_detail(serde_json::json!({"budget": "wall_ms", "limit": ms}))
                    .at(&cx.key),
                )),
            }
        }
    };
    match result {
        Ok(mut out) => {
            write_state(&cx, block, &mut out).map_err(|e| e.at(&cx.key))?;
            emitter.emit(|| EventKind::StepCompleted {
                path: cx.key.clone(),
                kind: block.kind_name().into(),
                elapsed_us: started.elapsed().as_micros() as u64,
                replayed: out.replayed,
                exit: out.exit.as_deref().map(str::to_owned),
                output: leaf.then(|| out.output.clone()),
            });
            Ok(out)
        }
        Err(Stop::Failed(e)) => {
            let e = e.at(&cx.key);
            emitter.emit(|| EventKind::StepFailed {
                path: cx.key.clone(),
                error: e.clone(),
            });
            Err(Stop::Failed(e))
        }
        Err(s) => Err(s),
    }
}

/// `merge_output` and `set`: the block's declared state writes.
fn write_state(cx: &Cx<'_>, block: &Block, out: &mut Outcome) -> Result<(), BlockError> {
    if block.data.merge_output {
        let returned = match out.output.node().kind() {
            Kind::Object(_) | Kind::Scalar(Value::Null) => None,
            Kind::Array(_) => Some("a list"),
            Kind::Scalar(v) => Some(kind_of(v)),
        };
        if let Some(returned) = returned {
            return Err(BlockError::new(
                ErrorKind::Input,
                format!("merge_output needs an object output, but the block returned {returned}"),
            ));
        }
        out.patch.merge_object(&out.output);
    }
    if !block.data.set.is_empty() || block.data.emit.is_some() {
        let mut scope = cx.scope();
        scope.bind("output", out.output.clone());
        if let Some(x) = &out.exit {
            scope.bind("exit", Arc::new(Value::String(x.to_string())));
        }
        for (path, t) in &block.data.set {
            let v = cx.value_shared(&t.0, &scope)?;
            out.patch.set_shared(split_path(path), v);
        }
        if let Some(t) = &block.data.emit {
            let message = cx.value(&t.0, &scope)?;
            cx.run.emitter.emit(|| EventKind::Message {
                path: cx.key.clone(),
                message,
            });
        }
    }
    Ok(())
}

pub(crate) use weft_core::value::kind_of;

fn should_retry(retry: &Retry, e: &BlockError) -> bool {
    if matches!(
        e.kind,
        ErrorKind::Cancelled | ErrorKind::Store | ErrorKind::Budget | ErrorKind::OutcomeUnknown
    ) {
        return false;
    }
    if retry.on.is_empty() {
        e.kind.is_transient() || e.kind == ErrorKind::Assertion
    } else {
        retry.on.contains(&e.kind)
    }
}

/// The delay before attempt `attempt + 1`: exponential, capped, with jitter, and at
/// least what the provider asked for in `retry_after_ms`.
fn backoff(retry: &Retry, attempt: u32, e: &BlockError) -> Duration {
    let exp = retry.multiplier.powi(attempt.saturating_sub(1) as i32);
    let mut ms = (retry.backoff_ms as f64 * exp).min(retry.max_backoff_ms as f64);
    if retry.jitter {
        ms *= rand::rng().random_range(0.5..=1.0);
    }
    let asked = e
        .detail_field("retry_after_ms")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    Duration::from_millis((ms as u64).max(asked))
}

async fn run_with_policy(cx: &Cx<'_>, block: &Block) -> Exec {
    let effectful = block.kind.is_effectful();
    let mut error = match effectful.then(|| cx.run.recorded(&cx.key)).flatten() {
        // A failure the journal holds is replayed as it was, without retrying.
        Some(Recorded::Failure(e)) => e.clone(),
        _ => match attempt_with_retries(cx, block).await {
            Err(Stop::Failed(e)) => {
                if effectful && !matches!(e.kind, ErrorKind::Cancelled | ErrorKind::Store) {
                    let v = serde_json::to_value(&e).unwrap_or(Value::Null);
                    cx.run.record(&cx.key, EntryKind::Failure, v).await;
                }
                e
            }
            other => return other,
        },
    };
    error = error.at(&cx.key);
    for (i, rescue) in block.policy.rescue.iter().enumerate() {
        if rescue.when.is_empty() || rescue.when.contains(&error.kind) {
            cx.run.emitter.emit(|| EventKind::StepRescued {
                path: cx.key.clone(),
                error: error.clone(),
            });
            let err_value = Arc::new(serde_json::to_value(&error).unwrap_or(Value::Null));
            let input = Shared::new(serde_json::json!({"error": *err_value, "input": cx.input}));
            let mut rc = cx.child(&format!("rescue{i}"), input, cx.state.clone());
            rc.locals.bind("error", err_value);
            return exec(rc, &rescue.then).await;
        }
    }
    Err(Stop::Failed(error))
}

async fn attempt_with_retries(cx: &Cx<'_>, block: &Block) -> Exec {
    let mut attempt = 1u32;
    loop {
        let result = if attempt == 1 {
            attempt_once(cx, block).await
        } else {
            attempt_once(&cx.at_attempt(attempt), block).await
        };
        let Some(retry) = &block.policy.retry else {
            return result;
        };
        match result {
            Err(Stop::Failed(e)) if attempt < retry.attempts && should_retry(retry, &e) => {
                let delay = backoff(retry, attempt, &e);
                cx.run.emitter.emit(|| EventKind::StepRetrying {
                    path: cx.key.clone(),
                    attempt,
                    delay_ms: delay.as_millis() as u64,
                    error: e.clone(),
                });
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = cx.run.cancel.cancelled() => return Err(Stop::Failed(cancelled())),
                }
                attempt += 1;
            }
            other => return other,
        }
    }
}

async fn attempt_once(cx: &Cx<'_>, block: &Block) -> Exec {
    let started = Instant::now();
    let run = dispatch(cx, block);
    let out = match block.policy.timeout_ms {
        None => run.await?,
        Some(ms) => match tokio::time::timeout(Duration::from_millis(ms), run).await {
            Ok(r) => r?,
            Err(_) => {
                return Err(Stop::Failed(BlockError::new(
                    ErrorKind::Timeout,
                    format!("the block did not finish within {ms} ms"),
                )));
            }
        },
    };
    if !block.policy.assert.is_empty() {
        let mut scope = cx.scope();
        scope.bind("output", out.output.clone());
        // What the attempt cost, for assertions on it: its wall time, and the model
        // usage charged to the block's own budget frame (only a block with a budget has
        // one).
        let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
        scope.bind("elapsed_ms", Arc::new(Value::from(elapsed_ms)));
        if block.policy.budget.is_some()
            && let Some(u) = cx.budgets.innermost_usage()
        {
            scope.bind(
                "usage",
                Arc::new(serde_json::json!({
                    "input_tokens": u.input_tokens,
                    "output_tokens": u.output_tokens,
                    "total_tokens": u.total_tokens(),
                    "cost_usd": u.cost_usd,
                })),
            );
        }
        for a in &block.policy.assert {
            if !cx.truthy(&a.that.0, &scope)? {
                let msg = a
                    .message
                    .clone()
                    .unwrap_or_else(|| format!("assertion `{}` is false", a.that.0));
                if !a.warn {
                    return Err(Stop::Failed(BlockError::new(ErrorKind::Assertion, msg)));
                }
                cx.run.emitter.emit(|| EventKind::Warning {
                    path: cx.key.clone(),
                    code: "assertion_failed".into(),
                    message: msg,
                });
            }
        }
    }
    Ok(out)
}

async fn dispatch(cx: &Cx<'_>, block: &Block) -> Exec {
    // An effectful step that will run (not replay) sees `step`, its idempotency key, in
    // its templates (a code block without `args` has none, and hashing the key is a
    // cost every step of a loop of code would pay for nothing).
    let mut effect = None;
    let has_templates = !matches!(&block.kind, BlockKind::Code(c) if c.args.is_none());
    let ecx = if block.kind.is_effectful() && has_templates && cx.run.recorded(&cx.key).is_none() {
        &*effect.insert(cx.for_effect())
    } else {
        cx
    };
    let outside = match block.policy.on_unknown_outcome {
        Some(UnknownOutcome::Fail) => Reach::OutsideAtMostOnce,
        Some(UnknownOutcome::Repeat) | None => Reach::Outside,
    };
    // Each kind's future is boxed: inline, the largest of them (a model call's) sized
    // every block's future, which every block, a transform too, allocated and copied.
    match &block.kind {
        BlockKind::Passthrough => Ok(Outcome::of(cx.input.clone())),
        BlockKind::Transform(t) => leaf::transform(cx, t),
        BlockKind::Approval(a) => leaf::approval(cx, a),
        BlockKind::Wait(w) => boxed(wait::run(cx, w)).await,
        BlockKind::Llm(s) => boxed(leaf::journaled(ecx, outside, llm::run(ecx, s))).await,
        BlockKind::Embed(s) => boxed(leaf::journaled(ecx, outside, embed::run(ecx, s))).await,
        BlockKind::Code(s) => boxed(leaf::journaled(ecx, Reach::Inputs, leaf::code(ecx, s))).await,
        BlockKind::Handler(s) => boxed(leaf::journaled(ecx, outside, leaf::handler(ecx, s))).await,
        BlockKind::Action(s) => boxed(leaf::journaled(ecx, outside, leaf::action(ecx, s))).await,
        BlockKind::Sequence(steps) => boxed(composite::sequence(cx, steps)).await,
        BlockKind::Parallel(p) => boxed(composite::parallel(cx, p)).await,
        BlockKind::Map(m) => boxed(composite::map(cx, m)).await,
        BlockKind::Loop(l) => boxed(composite::run_loop(cx, l, block.label())).await,
        BlockKind::Branch(b) => boxed(composite::branch(cx, b)).await,
        BlockKind::Graph(g) => boxed(graph::run(cx, g)).await,
        BlockKind::SubFlow(s) => {
            boxed(run_subflow(
                cx,
                &s.flow,
                cx.input.clone(),
                s.share_state,
                &s.flow,
            ))
            .await
        }
    }
}

fn boxed<'a>(f: impl std::future::Future<Output = Exec> + Send + 'a) -> BoxFuture<'a, Exec> {
    Box::pin(f)
}
