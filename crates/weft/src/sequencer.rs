//! [`sequencer`]: composes blocks into a pipeline with spec 002's chainable methods. Each
//! method records a step; [`Sequencer::build`] folds the steps into core IR (a sequence,
//! with branches, maps, loops and parallels where the methods ask for them).

use crate::block::{Block, Kind, transform, with_input, wrap};
use crate::func;
use crate::parts::Parts;
use indexmap::IndexMap;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::time::Duration;
use weft_core::ir::{
    self, BlockKind, BranchSpec, Case, Expr, LoopSpec, MapSpec, OnError, ParallelSpec, Rescue,
    ValueTemplate,
};
use weft_core::{BlockError, ErrorKind};
use weft_engine::Function;

/// The bound of `do_until` and `do_while` when none is given: every loop ends.
pub const DEFAULT_MAX_ITERATIONS: u32 = 25;

/// Starts a sequencer named `name`.
///
/// ```
/// use weft::prelude::*;
/// let double = handler("double").execute(|n: i64, _ctx| async move { Ok(n * 2) });
/// let pipeline = sequencer("pipeline")
///     .then(double)
///     .then_if(|n: i64| n > 10, handler("big").execute(|n: i64, _ctx| async move { Ok(n) }))
///     .map(|n: i64| n + 1);
/// assert_eq!(pipeline.build().kind(), Kind::Sequencer);
/// ```
pub fn sequencer(name: impl Into<String>) -> Sequencer {
    Sequencer {
        name: name.into(),
        steps: Vec::new(),
        parts: Parts::default(),
        errors: Vec::new(),
        count: 0,
    }
}

/// One recorded method call.
#[derive(Clone)]
enum Step {
    Block(ir::Block),
    /// Jump back to the step `target` while `again(output)` holds, at most `max` times.
    LoopBack {
        target: String,
        again: String,
        max: u32,
    },
    /// Background work beside the rest of the chain, until `WaitForWork`.
    Work(ir::Block),
    WaitForWork {
        timeout: Option<Duration>,
        /// Whether a failure of the work fails the sequencer here (else it is logged in
        /// the run's events and the chain goes on).
        fail_on_error: bool,
    },
    /// Ends the chain when `stop(value)` holds.
    ExitIf(String),
    /// Recovery for failures of every step so far.
    Rescue(Vec<Rescue>),
}

/// A block given to [`Sequencer::parallel`], with an optional connector.
pub struct Entry {
    block: Block,
    connector: Option<Function>,
}

/// A parallel entry whose input `connector` computes from the step's input.
pub fn entry<T, U>(
    connector: impl Fn(T) -> U + Send + Sync + 'static,
    block: impl Into<Block>,
) -> Entry
where
    T: DeserializeOwned,
    U: Serialize,
{
    Entry {
        block: block.into(),
        connector: Some(func::unary(connector)),
    }
}

impl<B: Into<Block>> From<B> for Entry {
    fn from(b: B) -> Entry {
        Entry {
            block: b.into(),
            connector: None,
        }
    }
}

/// One case of [`Sequencer::branch`]: a condition and the block it runs.
pub struct BranchCase {
    name: String,
    when: Function,
    block: Block,
    connector: Option<Function>,
}

impl BranchCase {
    /// The case `name`: runs `block` when `when(input)` holds.
    pub fn new<T: DeserializeOwned>(
        name: impl Into<String>,
        when: impl Fn(T) -> bool + Send + Sync + 'static,
        block: impl Into<Block>,
    ) -> BranchCase {
        BranchCase {
            name: name.into(),
            when: func::unary(when),
            block: block.into(),
            connector: None,
        }
    }

    /// The block's input, computed from the step's input.
    pub fn connector<T, U>(mut self, f: impl Fn(T) -> U + Send + Sync + 'static) -> BranchCase
    where
        T: DeserializeOwned,
        U: Serialize,
    {
        self.connector = Some(func::unary(f));
        self
    }
}

/// One case of [`Sequencer::rescue`].
pub struct RescueCase {
    when: Vec<ErrorKind>,
    block: Block,
}

impl RescueCase {
    /// Recovers from errors of these kinds (`ErrorKind::RateLimit`, ...).
    pub fn when(kinds: impl IntoIterator<Item = ErrorKind>, block: impl Into<Block>) -> RescueCase {
        RescueCase {
            when: kinds.into_iter().collect(),
            block: block.into(),
        }
    }

    /// Recovers from any error.
    pub fn any(block: impl Into<Block>) -> RescueCase {
        RescueCase::when([], block)
    }
}

/// A pipeline being composed; it becomes a [`Block`] with [`Sequencer::build`] (or
/// `.into()` wherever a block is expected).
#[derive(Clone)]
pub struct Sequencer {
    name: String,
    steps: Vec<Step>,
    parts: Parts,
    errors: Vec<String>,
    count: u32,
}

impl Sequencer {
    /// A fresh function name for the `what` of this sequencer's next step.
    fn function(&mut self, what: &str, f: Function) -> String {
        self.count += 1;
        let name = format!("{}.{what}.{}", self.name, self.count);
        self.parts.function(name, f)
    }

    /// Takes a block into the sequencer: its parts merge into this one's.
    fn take(&mut self, block: impl Into<Block>) -> ir::Block {
        let b: Block = block.into();
        self.parts.merge(&b.parts);
        b.ir
    }

    /// `block` run only when the function `when` (named for `what`) holds of the step's
    /// input; otherwise the input passes on.
    fn guarded(&mut self, what: &str, when: Function, block: ir::Block) -> ir::Block {
        let f = self.function(what, when);
        only_if(&func::call(&f, &["input"]), block)
    }

    /// `block` fed by the function `connector` (when there is one) of the step's input.
    fn connected(
        &mut self,
        what: &str,
        connector: Option<Function>,
        block: ir::Block,
    ) -> ir::Block {
        match connector {
            None => block,
            Some(c) => {
                let name = self.function(what, c);
                with_input(block, &func::call(&name, &["input"]))
            }
        }
    }

    fn push(mut self, b: ir::Block) -> Self {
        self.steps.push(Step::Block(b));
        self
    }

    /// Runs `block` on the previous step's output.
    pub fn then(mut self, block: impl Into<Block>) -> Self {
        let b = self.take(block);
        self.push(b)
    }

    /// Runs `block` on what `connector` makes of the previous step's output.
    pub fn then_with<T, U>(
        mut self,
        connector: impl Fn(T) -> U + Send + Sync + 'static,
        block: impl Into<Block>,
    ) -> Self
    where
        T: DeserializeOwned,
        U: Serialize,
    {
        let b = self.take(block);
        let b = self.connected("then_with", Some(func::unary(connector)), b);
        self.push(b)
    }

    /// Runs `block` only when `when(value)` holds; otherwise the value passes on.
    pub fn then_if<T: DeserializeOwned>(
        mut self,
        when: impl Fn(T) -> bool + Send + Sync + 'static,
        block: impl Into<Block>,
    ) -> Self {
        let b = self.take(block);
        let b = self.guarded("then_if", func::unary(when), b);
        self.push(b)
    }

    /// Transforms the value inline.
    pub fn map<T, U>(mut self, f: impl Fn(T) -> U + Send + Sync + 'static) -> Self
    where
        T: DeserializeOwned,
        U: Serialize,
    {
        let f = self.function("map", func::unary(f));
        self.push(transform(&func::call(&f, &["input"])))
    }

    /// Runs the entries concurrently on the value; the output is `{name: output}`.
    pub fn parallel<N: Into<String>>(self, entries: impl IntoIterator<Item = (N, Entry)>) -> Self {
        self.parallel_limited(entries, None)
    }

    /// [`Sequencer::parallel`], at most `max_concurrency` entries at once.
    pub fn parallel_limited<N: Into<String>>(
        mut self,
        entries: impl IntoIterator<Item = (N, Entry)>,
        max_concurrency: Option<u32>,
    ) -> Self {
        let mut branches = IndexMap::new();
        for (name, e) in entries {
            let name: String = name.into();
            let b = self.take(e.block);
            let b = self.connected(&format!("parallel.{name}"), e.connector, b);
            branches.insert(name, b);
        }
        self.push(parallel_block(branches, max_concurrency))
    }

    /// Runs `block` for each item of the value (a list), concurrently; the output is the
    /// list of results in item order.
    pub fn for_each(self, block: impl Into<Block>, max_concurrency: Option<u32>) -> Self {
        self.for_each_of(None, block, max_concurrency)
    }

    /// Runs `block` for each item of the list `extract` takes from the value.
    pub fn for_each_in<T, U>(
        mut self,
        extract: impl Fn(T) -> Vec<U> + Send + Sync + 'static,
        block: impl Into<Block>,
        max_concurrency: Option<u32>,
    ) -> Self
    where
        T: DeserializeOwned,
        U: Serialize,
    {
        let f = self.function("for_each_in", func::unary(extract));
        self.for_each_of(Some(f), block, max_concurrency)
    }

    fn for_each_of(
        mut self,
        extract: Option<String>,
        block: impl Into<Block>,
        max_concurrency: Option<u32>,
    ) -> Self {
        let body = self.take(block);
        let items = match extract {
            Some(f) => func::value_of(&func::call(&f, &["input"])),
            None => func::value_of("input"),
        };
        self.push(map_block(items, body, max_concurrency))
    }

    /// Runs, for each item of the value, the one of `routes` that `pick(item, index)`
    /// names.
    pub fn for_each_dynamic<T: DeserializeOwned>(
        mut self,
        routes: impl IntoIterator<Item = impl Into<Block>>,
        pick: impl Fn(T, usize) -> String + Send + Sync + 'static,
        max_concurrency: Option<u32>,
    ) -> Self {
        let f = self.function("for_each_dynamic", func::binary(pick));
        let routes: Vec<(String, ir::Block)> = routes
            .into_iter()
            .map(|r| {
                let b: Block = r.into();
                let name = b.name.clone();
                (name, self.take(b))
            })
            .collect();
        let body = choose(
            &self.name,
            &func::call(&f, &["item", "index"]),
            routes,
            &mut self.parts,
        );
        self.push(map_block(func::value_of("input"), body, max_concurrency))
    }

    /// Runs `block` repeatedly, each time on its previous output, until `done(output)`
    /// holds (checked after each run). A guard of [`DEFAULT_MAX_ITERATIONS`] runs keeps
    /// it finite: reaching it with `done` still false fails the step with kind
    /// `loop_exhausted` (a bound you did not choose never ends a run with a wrong value).
    pub fn do_until<T: DeserializeOwned>(
        self,
        done: impl Fn(T) -> bool + Send + Sync + 'static,
        block: impl Into<Block>,
    ) -> Self {
        self.repeat("do_until", func::unary(done), false, block, Bound::Guard)
    }

    /// [`Sequencer::do_until`] with the bound you choose: reaching it with `done` still
    /// false ends the loop with the last output and a `warning` event saying so.
    pub fn do_until_at_most<T: DeserializeOwned>(
        self,
        done: impl Fn(T) -> bool + Send + Sync + 'static,
        block: impl Into<Block>,
        max_iterations: u32,
    ) -> Self {
        let bound = Bound::Chosen(max_iterations);
        self.repeat("do_until", func::unary(done), false, block, bound)
    }

    /// A loop of `block` whose condition `f` (negated when `negate`) ends it.
    fn repeat(
        mut self,
        what: &str,
        f: Function,
        negate: bool,
        block: impl Into<Block>,
        bound: Bound,
    ) -> Self {
        let body = self.take(block);
        let f = self.function(what, f);
        let call = func::call(&f, &["output"]);
        let until = if negate { format!("not {call}") } else { call };
        self.push(loop_block(what, body, &until, bound))
    }

    /// Runs `block` repeatedly while `again(output)` holds (checked after each run),
    /// within the same guard as [`Sequencer::do_until`].
    pub fn do_while<T: DeserializeOwned>(
        self,
        again: impl Fn(T) -> bool + Send + Sync + 'static,
        block: impl Into<Block>,
    ) -> Self {
        self.repeat("do_while", func::unary(again), true, block, Bound::Guard)
    }

    /// [`Sequencer::do_while`] with the bound you choose (a `warning` event when it ends
    /// the loop).
    pub fn do_while_at_most<T: DeserializeOwned>(
        self,
        again: impl Fn(T) -> bool + Send + Sync + 'static,
        block: impl Into<Block>,
        max_iterations: u32,
    ) -> Self {
        let bound = Bound::Chosen(max_iterations);
        self.repeat("do_while", func::unary(again), true, block, bound)
    }

    /// Jumps back to the step named `target` while `when(value)` holds, at most
    /// `max_iterations` times; then the chain goes on (with a `warning` event when
    /// `when` still held).
    pub fn loop_back<T: DeserializeOwned>(
        mut self,
        target: impl Into<String>,
        when: impl Fn(T) -> bool + Send + Sync + 'static,
        max_iterations: u32,
    ) -> Self {
        let again = self.function("loop_back", func::unary(when));
        self.steps.push(Step::LoopBack {
            target: target.into(),
            again,
            max: max_iterations,
        });
        self
    }

    /// Runs `block` in the background on the current value; the chain goes on at once.
    /// A failure of the work emits its error event and never fails the chain.
    pub fn work(mut self, block: impl Into<Block>) -> Self {
        let b = self.take(block);
        self.steps.push(Step::Work(b));
        self
    }

    /// [`Sequencer::work`] on what `connector` makes of the current value.
    pub fn work_with<T, U>(
        mut self,
        connector: impl Fn(T) -> U + Send + Sync + 'static,
        block: impl Into<Block>,
    ) -> Self
    where
        T: DeserializeOwned,
        U: Serialize,
    {
        let b = self.take(block);
        let b = self.connected("work_with", Some(func::unary(connector)), b);
        self.steps.push(Step::Work(b));
        self
    }

    /// Waits here for the background work started before (at most `timeout`: work still
    /// running then is stopped, as a failure would be). Without it, the work is awaited
    /// when the sequencer ends: a run never finishes with work still running.
    pub fn wait_for_work(self, timeout: Option<Duration>) -> Self {
        self.wait(timeout, false)
    }

    /// [`Sequencer::wait_for_work`], failing here with the work's own error when the
    /// background work started before failed (flow-state-dev's `waitForWork({
    /// failOnError: true })`); without it a failed work is recorded and the chain goes
    /// on.
    pub fn wait_for_work_or_fail(self, timeout: Option<Duration>) -> Self {
        self.wait(timeout, true)
    }

    fn wait(mut self, timeout: Option<Duration>, fail_on_error: bool) -> Self {
        self.steps.push(Step::WaitForWork {
            timeout,
            fail_on_error,
        });
        self
    }

    /// [`Sequencer::work`] only when `when(value)` holds: otherwise nothing is started
    /// (and the block never sees the value). The value passes on either way.
    pub fn work_if<T: DeserializeOwned>(
        mut self,
        when: impl Fn(T) -> bool + Send + Sync + 'static,
        block: impl Into<Block>,
    ) -> Self {
        let b = self.take(block);
        let b = self.guarded("work_if", func::unary(when), b);
        self.steps.push(Step::Work(b));
        self
    }

    /// [`Sequencer::work_if`] on what `connector` makes of the value; the connector runs
    /// only when `when` holds.
    pub fn work_if_with<T, U, C>(
        mut self,
        when: impl Fn(C) -> bool + Send + Sync + 'static,
        connector: impl Fn(T) -> U + Send + Sync + 'static,
        block: impl Into<Block>,
    ) -> Self
    where
        T: DeserializeOwned,
        U: Serialize,
        C: DeserializeOwned,
    {
        let b = self.take(block);
        let b = self.connected("work_if_with", Some(func::unary(connector)), b);
        let b = self.guarded("work_if", func::unary(when), b);
        self.steps.push(Step::Work(b));
        self
    }

    /// Fails the chain here with `error(value)` when `when(value)` holds; otherwise the
    /// value passes on. A [`RescueCase`] matching the error's kind catches it.
    pub fn throw_if<T: DeserializeOwned>(
        mut self,
        when: impl Fn(T) -> bool + Send + Sync + 'static,
        error: impl Fn(T) -> BlockError + Send + Sync + 'static,
    ) -> Self {
        // A name of its own: one handler name is one block wherever it stands.
        self.count += 1;
        let name = format!("{}.throw_if.{}", self.name, self.count);
        let read = move |v: &Value| {
            serde_json::from_value::<T>(v.clone()).map_err(|e| {
                BlockError::new(ErrorKind::Input, format!("throw_if cannot read {v}: {e}"))
            })
        };
        let guard = crate::handler(name).execute(move |v: Value, _ctx| {
            let out = read(&v).and_then(|t| {
                if when(t) {
                    Err(read(&v).map_or_else(|e| e, &error))
                } else {
                    Ok(v.clone())
                }
            });
            async move { out }
        });
        self.then(guard)
    }

    /// Routes the value to the first case whose condition holds; without one, the value
    /// passes on.
    pub fn branch(mut self, cases: impl IntoIterator<Item = BranchCase>) -> Self {
        let mut out = Vec::new();
        for c in cases {
            let b = self.take(c.block);
            let b = self.connected(&format!("branch.{}.input", c.name), c.connector, b);
            let when = self.function(&format!("branch.{}", c.name), c.when);
            out.push(Case {
                name: Some(c.name),
                when: Expr(func::call(&when, &["input"])),
                then: b,
            });
        }
        self.push(ir::Block::new(BlockKind::Branch(BranchSpec {
            cases: out,
            otherwise: None,
        })))
    }

    /// Runs `block` for its effects; the value passes on unchanged.
    pub fn tap(mut self, block: impl Into<Block>) -> Self {
        let b = self.take(block);
        self.push(tapped(b))
    }

    /// Calls `f` on the value for its effects (logging, metrics); the value passes on.
    /// `f` runs again when a run is replayed.
    pub fn tap_fn<T: DeserializeOwned + Serialize>(
        mut self,
        f: impl Fn(&T) + Send + Sync + 'static,
    ) -> Self {
        let f = self.function(
            "tap_fn",
            func::unary(move |v: T| {
                f(&v);
                v
            }),
        );
        self.push(transform(&func::call(&f, &["input"])))
    }

    /// [`Sequencer::tap`], only when `when(value)` holds.
    pub fn tap_if<T: DeserializeOwned>(
        mut self,
        when: impl Fn(T) -> bool + Send + Sync + 'static,
        block: impl Into<Block>,
    ) -> Self {
        let b = self.take(block);
        let b = self.guarded("tap_if", func::unary(when), tapped(b));
        self.push(b)
    }

    /// Recovers from a failure of any step so far: the first case whose kinds match runs
    /// instead, with `{error, input}` as its input, and its output goes on.
    pub fn rescue(mut self, cases: impl IntoIterator<Item = RescueCase>) -> Self {
        let rescues = cases
            .into_iter()
            .map(|c| Rescue {
                when: c.when,
                then: self.take(c.block),
            })
            .collect();
        self.steps.push(Step::Rescue(rescues));
        self
    }

    /// Runs the blocks concurrently; the first to succeed gives the output, the others
    /// are cancelled. Fails only when all fail.
    pub fn race(mut self, blocks: impl IntoIterator<Item = impl Into<Block>>) -> Self {
        let branches = self.named(blocks);
        let mut p = parallel_block(branches, None);
        if let BlockKind::Parallel(spec) = &mut p.kind {
            spec.race = true;
        }
        self.push(p)
    }

    /// Runs the blocks concurrently; the output is the list of their outputs, in order.
    /// The first failure cancels the rest and fails the step.
    pub fn all(mut self, blocks: impl IntoIterator<Item = impl Into<Block>>) -> Self {
        let branches = self.named(blocks);
        let list: Vec<Value> = branches
            .keys()
            .map(|n| Value::from(format!("{{{{ input[{}] }}}}", Value::from(n.as_str()))))
            .collect();
        let mut p = parallel_block(branches, None);
        if let BlockKind::Parallel(spec) = &mut p.kind {
            spec.fail_fast = true;
        }
        let collect = ir::Block::new(BlockKind::Transform(ir::TransformSpec {
            output: ValueTemplate(Value::Array(list)),
            exit: None,
        }));
        self.push(ir::Block::new(BlockKind::Sequence(vec![p, collect])))
    }

    /// Tries the blocks in order on the value; the first that succeeds gives the output.
    /// Fails with the last failure when none succeeds.
    pub fn any(mut self, blocks: impl IntoIterator<Item = impl Into<Block>>) -> Self {
        let blocks: Vec<ir::Block> = blocks.into_iter().map(|b| self.take(b)).collect();
        let mut tries = blocks.into_iter().rev();
        let Some(last) = tries.next() else {
            self.errors.push("any() needs at least one block".into());
            return self;
        };
        let chain = tries.fold(last, |fallback, first| {
            // A rescue's input is {error, input}: the fallback gets the original input.
            let fallback = with_input(fallback, "input.input");
            let mut primary = wrap(first, |b| vec![b]);
            primary.policy.rescue.push(Rescue {
                when: Vec::new(),
                then: fallback,
            });
            primary
        });
        self.push(chain)
    }

    /// Ends the chain here when `stop(value)` holds: the value is the sequencer's output
    /// and the later steps do not run.
    pub fn exit_if<T: DeserializeOwned>(
        mut self,
        stop: impl Fn(T) -> bool + Send + Sync + 'static,
    ) -> Self {
        let f = self.function("exit_if", func::unary(stop));
        self.steps.push(Step::ExitIf(f));
        self
    }

    /// Blocks by name, for the concurrent methods; a block given twice is keyed
    /// `name@1` the second time, as a repeated sequence step is.
    fn named(
        &mut self,
        blocks: impl IntoIterator<Item = impl Into<Block>>,
    ) -> IndexMap<String, ir::Block> {
        let mut out = IndexMap::new();
        for b in blocks {
            let b: Block = b.into();
            let repeats = out
                .keys()
                .filter(|k: &&String| k.split('@').next() == Some(b.name.as_str()))
                .count();
            let key = match repeats {
                0 => b.name.clone(),
                n => format!("{}@{n}", b.name),
            };
            out.insert(key, self.take(b));
        }
        out
    }

    /// The sequencer as a block.
    pub fn build(self) -> Block {
        let mut parts = self.parts;
        parts
            .conflicts
            .extend(self.errors.iter().map(|e| format!("{}: {e}", self.name)));
        let steps = match fold(&self.steps) {
            Ok(s) => s,
            Err(e) => {
                parts.conflicts.push(format!("{}: {e}", self.name));
                Vec::new()
            }
        };
        let ir = ir::Block::new(BlockKind::Sequence(steps)).with_name(self.name.clone());
        Block::new(self.name, Kind::Sequencer, ir, parts)
    }
}

impl From<Sequencer> for Block {
    fn from(s: Sequencer) -> Block {
        s.build()
    }
}

/// Folds recorded steps into the IR blocks of a sequence.
fn fold(steps: &[Step]) -> Result<Vec<ir::Block>, String> {
    // A rescue covers every step before it, background work started there included
    // (which is therefore awaited where the rescue stands).
    if let Some(r) = steps.iter().rposition(|s| matches!(s, Step::Rescue(_))) {
        let Step::Rescue(rescues) = &steps[r] else {
            unreachable!("found above")
        };
        let mut body = one(fold(&steps[..r])?);
        body.policy.rescue.extend(rescues.iter().cloned());
        let mut out = vec![body];
        out.extend(fold(&steps[r + 1..])?);
        return Ok(out);
    }
    let mut out: Vec<ir::Block> = Vec::new();
    let mut i = 0;
    while i < steps.len() {
        match &steps[i] {
            Step::Block(b) => out.push(b.clone()),
            Step::Rescue(_) => unreachable!("rescues are folded first"),
            Step::ExitIf(f) => {
                let rest = fold(&steps[i + 1..])?;
                let go_on = format!("not {}", func::call(f, &["input"]));
                out.push(only_if(&go_on, one(rest)));
                return Ok(out);
            }
            Step::Work(bg) => {
                let end = steps[i + 1..]
                    .iter()
                    .position(|s| matches!(s, Step::WaitForWork { .. }))
                    .map_or(steps.len(), |p| i + 1 + p);
                let (timeout, fail_on_error) = match steps.get(end) {
                    Some(Step::WaitForWork {
                        timeout,
                        fail_on_error,
                    }) => (*timeout, *fail_on_error),
                    _ => (None, false),
                };
                let rest = fold(&steps[i + 1..end])?;
                out.push(beside(one(rest), bg.clone(), timeout, fail_on_error));
                i = end + 1;
                continue;
            }
            // Nothing runs in the background here.
            Step::WaitForWork { .. } => {}
            Step::LoopBack { target, again, max } => {
                let Some(k) = out.iter().rposition(|b| b.label() == Some(target.as_str())) else {
                    return Err(format!(
                        "loop_back names `{target}`, which is not an earlier step of this sequencer"
                    ));
                };
                let body = one(out.drain(k..).collect());
                let until = format!("not {}", func::call(again, &["output"]));
                let bound = Bound::Chosen(max.saturating_add(1));
                out.push(loop_block("loop_back", body, &until, bound));
            }
        }
        i += 1;
    }
    Ok(out)
}

/// The blocks as one block: itself when there is one, a sequence otherwise (a
/// passthrough when there are none).
fn one(mut blocks: Vec<ir::Block>) -> ir::Block {
    match blocks.len() {
        0 => ir::Block::new(BlockKind::Passthrough),
        1 => blocks.pop().expect("one block"),
        _ => ir::Block::new(BlockKind::Sequence(blocks)),
    }
}

/// `main` with `work` running beside it: the output is `main`'s; the work's failure
/// (or its running past `timeout`) is rescued into nothing.
fn beside(
    main: ir::Block,
    work: ir::Block,
    timeout: Option<Duration>,
    fail_on_error: bool,
) -> ir::Block {
    let mut bg = wrap(work, |b| vec![b]);
    bg.policy.timeout_ms = timeout.map(|t| t.as_millis().max(1) as u64);
    if !fail_on_error {
        bg.policy.rescue.push(Rescue {
            when: Vec::new(),
            then: transform("none"),
        });
    }
    let mut branches = IndexMap::new();
    branches.insert("main".to_owned(), main);
    branches.insert("work".to_owned(), bg);
    ir::Block::new(BlockKind::Sequence(vec![
        parallel_block(branches, None),
        transform("input.main"),
    ]))
}

/// `block` when the condition `when` holds; otherwise the input passes on.
fn only_if(when: &str, block: ir::Block) -> ir::Block {
    ir::Block::new(BlockKind::Branch(BranchSpec {
        cases: vec![Case {
            name: None,
            when: Expr(when.to_owned()),
            then: block,
        }],
        otherwise: None,
    }))
}

/// `block` for its effects: the input passes on.
fn tapped(block: ir::Block) -> ir::Block {
    let mut t = wrap(block, |b| vec![b, transform("weft_tapped")]);
    t.data
        .bind
        .insert("weft_tapped".into(), func::value_of("input"));
    t
}

fn parallel_block(
    branches: IndexMap<String, ir::Block>,
    max_concurrency: Option<u32>,
) -> ir::Block {
    ir::Block::new(BlockKind::Parallel(ParallelSpec {
        branches,
        max_concurrency,
        fail_fast: false,
        on_error: OnError::Fail,
        isolate: false,
        race: false,
    }))
}

fn map_block(items: ValueTemplate, body: ir::Block, max_concurrency: Option<u32>) -> ir::Block {
    ir::Block::new(BlockKind::Map(MapSpec {
        items,
        item_var: "item".into(),
        index_var: "index".into(),
        item_input: None,
        body: Box::new(body),
        max_concurrency,
        fail_fast: false,
        on_error: OnError::Fail,
        isolate: false,
    }))
}

/// How a loop is bounded: by the guard every loop has, or by the user.
#[derive(Clone, Copy)]
enum Bound {
    /// [`DEFAULT_MAX_ITERATIONS`]; reaching it with the condition unmet is a failure.
    Guard,
    /// A bound the user chose; reaching it ends the loop with a warning.
    Chosen(u32),
}

/// A loop named `name` (its step's display name) of `body` until `until` holds.
fn loop_block(name: &str, body: ir::Block, until: &str, bound: Bound) -> ir::Block {
    let (max_iterations, guard) = match bound {
        Bound::Guard => (DEFAULT_MAX_ITERATIONS, true),
        Bound::Chosen(n) => (n, false),
    };
    ir::Block::new(BlockKind::Loop(LoopSpec {
        body: Box::new(body),
        max_iterations,
        while_: None,
        until: Some(Expr(until.to_owned())),
        fail_at_max: guard,
        warn_at_max: !guard,
    }))
    .with_name(name)
}

/// Runs the route that the expression `pick` names (evaluated once); naming no route
/// fails with an error that says which name it was and what the routes are (through a
/// function registered in `parts`, since an assertion's message is fixed text).
pub(crate) fn choose(
    owner: &str,
    pick: &str,
    routes: Vec<(String, ir::Block)>,
    parts: &mut Parts,
) -> ir::Block {
    let names: Vec<String> = routes.iter().map(|(n, _)| n.clone()).collect();
    let cases = routes
        .into_iter()
        .map(|(name, then)| Case {
            when: Expr(format!("weft_route == {}", Value::from(name.as_str()))),
            name: Some(name),
            then,
        })
        .collect();
    let said = format!("`{owner}` chose a route it does not declare");
    let routes = names.join(", ");
    let refuse: weft_engine::Function = std::sync::Arc::new(move |args: &[Value]| {
        let chosen = args.first().cloned().unwrap_or(Value::Null);
        Err(format!("{said}: {chosen} (its routes: {routes})"))
    });
    let refuse = parts.function(format!("{owner}.no_such_route"), refuse);
    let none = transform(&func::call(&refuse, &["weft_route"]));
    let mut b = ir::Block::new(BlockKind::Branch(BranchSpec {
        cases,
        otherwise: Some(Box::new(none)),
    }));
    b.data
        .bind
        .insert("weft_route".into(), func::value_of(pick));
    b
}
