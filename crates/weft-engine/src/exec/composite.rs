//! Composites: sequence, parallel, map, loop, branch, sub-flow.

use super::{exec, kind_of};
use crate::run::{Cx, Exec, Outcome, Recorded, Stop, Suspension};
use futures::StreamExt;
use futures::future::BoxFuture;
use std::sync::Arc;
use weft_core::event::{EventKind, LoopExit};
use weft_core::ir::{Block, BranchSpec, LoopSpec, MapSpec, OnError, ParallelSpec, step_segment};
use weft_core::ports::EntryKind;
use weft_core::value::{Shared, SharedMap};
use weft_core::{BlockError, ErrorKind, Patch, State, Value};

pub(crate) async fn sequence(cx: &Cx<'_>, steps: &[Block]) -> Exec {
    let mut input = cx.input.clone();
    let mut state = cx.state.clone();
    let mut patch = Patch::default();
    let mut exit = None;
    for (i, step) in steps.iter().enumerate() {
        let out = exec(
            cx.child(&step_segment(steps, i), input, state.clone()),
            step,
        )
        .await
        .map_err(|s| s.after(&patch))?;
        state.apply(&out.patch);
        patch.extend(out.patch);
        input = out.output;
        exit = out.exit;
    }
    Ok(Outcome {
        exit,
        patch,
        ..Outcome::of(input)
    })
}

/// How many branches of a parallel block or map run at once when it sets no
/// `max_concurrency`. Every branch is polled on the run's one task, so more in flight
/// overlaps no more work; it only holds more suspended branches, and each operation
/// then costs more (a map of 100,000 journaled actions: 7.1 s and 437 MB unbounded,
/// 1.8 s and 165 MB at 1,024; docs/performance.md). 1,024 is also the default limit of
/// open files, which that many HTTP calls at once would meet.
const IN_FLIGHT: usize = 1024;

/// Settles concurrently run children: results in declaration order, the first failure
/// (in order) unless failures are collected, and every pending approval.
struct Settled {
    outputs: Vec<Shared>,
    patch: Patch,
}

async fn run_concurrently<'a>(
    cx: &'a Cx<'a>,
    children: Vec<(String, Cx<'a>, &'a Block, Option<Value>)>,
    max_concurrency: Option<u32>,
    fail_fast: bool,
    on_error: OnError,
    isolate: bool,
) -> Result<Settled, Stop> {
    let n = children.len();
    let limit = max_concurrency.map_or(n.clamp(1, IN_FLIGHT), |m| m as usize);
    let emitter = &cx.run.emitter;
    let path = cx.key.clone();
    emitter.emit(|| EventKind::FanOutStarted {
        path: path.clone(),
        branches: n,
        max_concurrency,
    });
    let mut futs: Vec<BoxFuture<'a, (usize, Exec)>> = Vec::with_capacity(n);
    for (i, (name, ccx, block, item)) in children.into_iter().enumerate() {
        let path = path.clone();
        futs.push(Box::pin(async move {
            emitter.emit(|| EventKind::BranchStarted {
                path: path.clone(),
                branch: name.clone(),
                item,
            });
            let r = exec(ccx, block).await;
            emitter.emit(|| EventKind::BranchEnded {
                path,
                branch: name,
                success: r.is_ok(),
                error: match &r {
                    Err(Stop::Failed(e)) => Some(e.clone()),
                    _ => None,
                },
            });
            (i, r)
        }));
    }
    let mut stream = futures::stream::iter(futs).buffer_unordered(limit);
    let mut results: Vec<Option<Exec>> = (0..n).map(|_| None).collect();
    while let Some((i, r)) = stream.next().await {
        if fail_fast && on_error == OnError::Collect && matches!(r, Err(Stop::Failed(_))) {
            // The first failure cancels the rest; each cancelled branch is kept in the
            // results as a failure of its own.
            results[i] = Some(r);
            drop(stream);
            for slot in results.iter_mut().filter(|s| s.is_none()) {
                *slot = Some(Err(Stop::Failed(
                    BlockError::new(
                        ErrorKind::Cancelled,
                        "cancelled: another branch failed first (fail_fast)",
                    )
                    .at(&cx.key),
                )));
            }
            break;
        }
        if fail_fast
            && on_error == OnError::Fail
            && let Err(Stop::Failed(e)) = r
        {
            // Dropping the stream cancels every branch still running.
            drop(stream);
            emitter.emit(|| EventKind::FanOutEnded {
                path: path.clone(),
                total: n,
                succeeded: results.iter().filter(|r| matches!(r, Some(Ok(_)))).count(),
                failed: 1,
            });
            return Err(Stop::Failed(e));
        }
        results[i] = Some(r);
    }
    let mut settled = Settled {
        outputs: Vec::with_capacity(n),
        patch: Patch::default(),
    };
    let (mut succeeded, mut failed) = (0, 0);
    let mut suspended = Suspension::default();
    let mut first_error: Option<BlockError> = None;
    for r in results
        .into_iter()
        .map(|r| r.expect("every branch settles"))
    {
        match r {
            Ok(out) => {
                succeeded += 1;
                if !isolate {
                    settled.patch.extend(out.patch);
                }
                settled.outputs.push(out.output);
            }
            Err(Stop::Failed(e)) => {
                failed += 1;
                settled
                    .outputs
                    .push(Shared::new(serde_json::json!({"error": e})));
                first_error.get_or_insert(e);
            }
            Err(Stop::Suspended(s)) => {
                suspended.merge(if isolate { s.without_writes() } else { s });
                settled.outputs.push(Shared::null());
            }
        }
    }
    emitter.emit(|| EventKind::FanOutEnded {
        path: path.clone(),
        total: n,
        succeeded,
        failed,
    });
    if on_error == OnError::Fail
        && let Some(e) = first_error
    {
        return Err(Stop::Failed(e));
    }
    if !suspended.pending.is_empty() {
        // What the finished branches wrote counts as done so far.
        return Err(Stop::Suspended(suspended.after(settled.patch)));
    }
    Ok(settled)
}

pub(crate) async fn parallel(cx: &Cx<'_>, p: &ParallelSpec) -> Exec {
    if p.race {
        return race(cx, p).await;
    }
    let children = p
        .branches
        .iter()
        .map(|(name, b)| {
            (
                name.clone(),
                cx.child(name, cx.input.clone(), cx.state.clone()),
                b,
                None,
            )
        })
        .collect();
    let settled = run_concurrently(
        cx,
        children,
        p.max_concurrency,
        p.fail_fast,
        p.on_error,
        p.isolate,
    )
    .await?;
    let output: SharedMap = p.branches.keys().cloned().zip(settled.outputs).collect();
    Ok(Outcome {
        patch: settled.patch,
        ..Outcome::of(Shared::object(output))
    })
}

pub(crate) async fn map(cx: &Cx<'_>, m: &MapSpec) -> Exec {
    let scope = cx.scope();
    let items = match cx.value(&m.items.0, &scope)? {
        Value::Array(a) => a,
        Value::Null => Vec::new(),
        other => {
            return Err(Stop::Failed(BlockError::new(
                ErrorKind::Input,
                format!(
                    "map items must be a list, but they evaluated to {}",
                    kind_of(&other)
                ),
            )));
        }
    };
    let emit_items = cx.run.emitter.active();
    let mut children = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let item = Arc::new(item);
        let index = Arc::new(Value::from(i));
        let mut locals = cx.locals.clone();
        locals.bind(m.item_var.as_str(), item.clone());
        locals.bind(m.index_var.as_str(), index);
        let input = match &m.item_input {
            Some(t) => {
                let mut s = scope.clone();
                s.extend(&locals);
                Shared::new(cx.value(&t.0, &s)?)
            }
            None => item.clone().into(),
        };
        let mut ccx = cx.child(&format!("[{i}]"), input, cx.state.clone());
        ccx.locals = locals;
        let shown = emit_items.then(|| (*item).clone());
        children.push((i.to_string(), ccx, &*m.body, shown));
    }
    let settled = run_concurrently(
        cx,
        children,
        m.max_concurrency,
        m.fail_fast,
        m.on_error,
        m.isolate,
    )
    .await?;
    Ok(Outcome {
        patch: settled.patch,
        ..Outcome::of(Shared::array(settled.outputs))
    })
}

pub(crate) async fn run_loop(cx: &Cx<'_>, l: &LoopSpec, label: Option<&str>) -> Exec {
    let emitter = &cx.run.emitter;
    emitter.emit(|| EventKind::LoopStarted {
        path: cx.key.clone(),
        max_iterations: l.max_iterations,
    });
    let mut input = cx.input.clone();
    let mut state = cx.state.clone();
    let mut patch = Patch::default();
    let mut exit: Option<Arc<str>> = None;
    let mut done = 0u32;
    let mut reason = LoopExit::MaxIterationsReached;
    for i in 0..l.max_iterations {
        if cx.run.cancel.is_cancelled() {
            return Err(Stop::Failed(BlockError::new(
                ErrorKind::Cancelled,
                "the run was cancelled",
            )));
        }
        let mut icx = cx.child(&format!("#{i}"), input.clone(), state.clone());
        icx.locals.bind("iteration", Arc::new(Value::from(i)));
        let condition = match &l.while_ {
            Some(w) => Some(icx.truthy(&w.0, &icx.scope())?),
            None => None,
        };
        emitter.emit(|| EventKind::LoopIteration {
            path: cx.key.clone(),
            iteration: i,
            condition,
        });
        if condition == Some(false) {
            reason = LoopExit::ConditionFalse;
            break;
        }
        let out = exec(icx.clone(), &l.body)
            .await
            .map_err(|s| s.after(&patch))?;
        state.apply(&out.patch);
        patch.extend_compacting(out.patch);
        input = out.output;
        exit = out.exit;
        done += 1;
        if let Some(u) = &l.until {
            let mut scope = icx.scope();
            scope.bind_map("state", state.shared().clone());
            scope.bind("output", input.clone());
            scope.bind(
                "exit",
                Arc::new(
                    exit.as_deref()
                        .map_or(Value::Null, |x| Value::String(x.to_owned())),
                ),
            );
            if icx.truthy(&u.0, &scope)? {
                reason = LoopExit::ConditionTrue;
                break;
            }
        }
    }
    // A `while` loop whose bound and condition end together still ends on its condition.
    if reason == LoopExit::MaxIterationsReached
        && let Some(w) = &l.while_
    {
        let mut ecx = cx.clone();
        ecx.input = input.clone();
        ecx.state = state.clone();
        if !ecx.truthy(&w.0, &ecx.scope())? {
            reason = LoopExit::ConditionFalse;
        }
    }
    emitter.emit(|| EventKind::LoopEnded {
        path: cx.key.clone(),
        iterations: done,
        reason,
    });
    if reason == LoopExit::MaxIterationsReached {
        at_bound(cx, l, label)?;
    }
    Ok(Outcome {
        exit,
        patch,
        ..Outcome::of(input)
    })
}

pub(crate) async fn branch(cx: &Cx<'_>, b: &BranchSpec) -> Exec {
    let scope = cx.scope();
    for (i, case) in b.cases.iter().enumerate() {
        if cx.truthy(&case.when.0, &scope)? {
            let name = case.name.clone().unwrap_or_else(|| format!("case{i}"));
            cx.run.emitter.emit(|| EventKind::RouteTaken {
                path: cx.key.clone(),
                from: None,
                to: name.clone(),
            });
            return exec(
                cx.child(&name, cx.input.clone(), cx.state.clone()),
                &case.then,
            )
            .await;
        }
    }
    match &b.otherwise {
        Some(o) => {
            cx.run.emitter.emit(|| EventKind::RouteTaken {
                path: cx.key.clone(),
                from: None,
                to: "otherwise".into(),
            });
            exec(cx.child("otherwise", cx.input.clone(), cx.state.clone()), o).await
        }
        None => Ok(Outcome::of(cx.input.clone())),
    }
}

/// Runs sub-flow `name` of the current flow with `input`, under path segment `seg`.
pub(crate) async fn run_subflow(
    cx: &Cx<'_>,
    name: &str,
    input: Shared,
    share_state: bool,
    seg: &str,
) -> Exec {
    // A sub-flow may call its siblings: names resolve in the current flow's own
    // sub-flows, then in the run's top-level flow's, as validation checks them.
    let sub = cx
        .flow
        .flows
        .get(name)
        .or_else(|| cx.run.prepared.flow.flows.get(name))
        .ok_or_else(|| BlockError::new(ErrorKind::Config, format!("unknown sub-flow `{name}`")))?;
    let max_depth = cx.flow.limits.max_subflow_depth;
    if cx.depth + 1 > max_depth {
        return Err(Stop::Failed(BlockError::new(
            ErrorKind::Limit,
            format!("sub-flows nest deeper than max_subflow_depth ({max_depth})"),
        )));
    }
    let state = if share_state {
        cx.state.clone()
    } else {
        sub.state.clone().map(State::from_value).unwrap_or_default()
    };
    let mut scx = cx.child(seg, input, state);
    scx.flow = sub;
    scx.vars = Arc::new(Value::Object(sub.vars.clone().into_iter().collect()));
    scx.locals = weft_expr::Scope::new();
    scx.depth += 1;
    // The sub-flow's own state is not the caller's.
    let mut out = exec(scx, &sub.root)
        .await
        .map_err(|stop| stop.without_writes_if(!share_state))?;
    if !share_state {
        out.patch = Patch::default();
    }
    Ok(out)
}

/// A parallel block whose first successful branch wins. The winner's name is journaled
/// under the block's key, and a replay runs only that branch (answered from its journal).
async fn race(cx: &Cx<'_>, p: &ParallelSpec) -> Exec {
    let emitter = &cx.run.emitter;
    let path = cx.key.clone();
    let replayed_winner = match cx.run.recorded(&cx.key) {
        Some(Recorded::Result(v)) => v.get("winner").and_then(|w| w.as_json()?.as_str()),
        _ => None,
    };
    let entrants: Vec<(&String, &Block)> = p
        .branches
        .iter()
        .filter(|(name, _)| replayed_winner.is_none_or(|w| w == name.as_str()))
        .collect();
    emitter.emit(|| EventKind::FanOutStarted {
        path: path.clone(),
        branches: entrants.len(),
        max_concurrency: p.max_concurrency,
    });
    let limit = p
        .max_concurrency
        .map_or(entrants.len().max(1), |m| m as usize);
    let mut runs: Vec<BoxFuture<'_, (&String, Exec)>> = Vec::with_capacity(entrants.len());
    for (name, block) in entrants {
        let ccx = cx.child(name, cx.input.clone(), cx.state.clone());
        runs.push(Box::pin(async move { (name, exec(ccx, block).await) }));
    }
    let mut stream = futures::stream::iter(runs).buffer_unordered(limit);
    let mut failures = 0;
    let mut last_stop = None;
    while let Some((name, r)) = stream.next().await {
        match r {
            Ok(out) => {
                // Dropping the stream cancels every branch still running.
                drop(stream);
                if replayed_winner.is_none() {
                    let winner = serde_json::json!({"winner": name});
                    cx.run.record(&cx.key, EntryKind::Result, winner).await;
                }
                emitter.emit(|| EventKind::FanOutEnded {
                    path: path.clone(),
                    total: p.branches.len(),
                    succeeded: 1,
                    failed: failures,
                });
                return Ok(Outcome {
                    exit: Some(Arc::from(name.as_str())),
                    patch: if p.isolate {
                        Patch::default()
                    } else {
                        out.patch
                    },
                    ..Outcome::of(out.output)
                });
            }
            // A branch that waits for an approval cannot win before it is answered.
            Err(stop @ Stop::Suspended(_)) => last_stop = Some(stop),
            Err(stop @ Stop::Failed(_)) => {
                failures += 1;
                if !matches!(last_stop, Some(Stop::Suspended(_))) {
                    last_stop = Some(stop);
                }
            }
        }
    }
    emitter.emit(|| EventKind::FanOutEnded {
        path: path.clone(),
        total: p.branches.len(),
        succeeded: 0,
        failed: failures,
    });
    Err(match last_stop {
        Some(Stop::Failed(e)) => Stop::Failed(BlockError::new(
            e.kind.clone(),
            format!("every branch of the race failed; the last: {}", e.message),
        )),
        Some(suspended) => suspended.without_writes_if(p.isolate),
        None => Stop::Failed(BlockError::new(ErrorKind::Input, "a race needs branches")),
    })
}

/// What a loop that reached its bound with its condition unmet does: ends quietly (its
/// `loop_ended` event says why), warns, or fails with `loop_exhausted`. A loop without
/// a condition runs to its bound by design.
fn at_bound(cx: &Cx<'_>, l: &LoopSpec, label: Option<&str>) -> Result<(), Stop> {
    let condition = match (&l.until, &l.while_) {
        (Some(u), _) => format!("until {}", u.0),
        (None, Some(w)) => format!("while {}", w.0),
        (None, None) => return Ok(()),
    };
    if !l.fail_at_max && !l.warn_at_max {
        return Ok(());
    }
    let name = label.unwrap_or(&cx.key);
    let message = format!(
        "the loop `{name}` stopped at its bound of {} iterations with its condition unmet",
        l.max_iterations
    );
    if l.fail_at_max {
        let detail = serde_json::json!({
            "loop": name,
            "max_iterations": l.max_iterations,
            "condition": condition,
        });
        return Err(Stop::Failed(
            BlockError::new(ErrorKind::LoopExhausted, message).with_detail(detail),
        ));
    }
    cx.run.emitter.emit(|| EventKind::Warning {
        path: cx.key.clone(),
        code: "loop_bound_reached".to_owned(),
        message,
    });
    Ok(())
}
