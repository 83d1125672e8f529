//! Lua 5.4 through mlua, in process: Lua cannot crash its host, and every limit is
//! enforced by the VM itself (an instruction hook on every thread for time, the
//! allocator for memory, Lua's own stack limits for recursion).
//!
//! The sandbox has no `io`, `os`, `package`, `require`, `debug`, `load`, `loadfile`,
//! `dofile`, `string.dump`, `collectgarbage`, `rawset` or metatable access to strings.
//! Each call gets a fresh global table; the libraries are shared through read-only
//! proxies, so one call cannot change what the next one sees.

use crate::lua_view::{Views, to_json};
use crate::protocol::{Failure, FailureKind};
use mlua::thread::ThreadStatus;
use mlua::{Function, HookTriggers, Lua, LuaOptions, StdLib, Table, Thread, VmState};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use weft_core::ir::CodeLimits;
use weft_core::value::Shared;

/// Instructions between two checks of the deadline.
const CHECK_EVERY: u32 = 1000;

/// The global through which a call hands its chunk the call's environment.
const ENVIRONMENT: &str = "__weft_environment";

/// What every chunk is compiled as: it takes its environment from [`ENVIRONMENT`] (a
/// global of the state, out of the code's reach once `_ENV` is replaced), on the
/// source's first line so that line numbers stay the source's own. mlua's
/// `set_environment` compiles a helper chunk on every call, a cost every Lua step paid.
fn with_environment_argument(source: &str) -> String {
    format!("local _ENV = {ENVIRONMENT}; {source}")
}

/// One Lua state with what it reuses across calls.
struct State {
    lua: Lua,
    /// The metatable of every call's global table: `__index` is the read-only library.
    meta: Table,
    /// Compiled chunks by source; each call gives the chunk a fresh environment.
    compiled: HashMap<String, Function>,
    /// The running call's limits, read by the instruction hook installed once.
    limits: Arc<HookLimits>,
    /// Large arguments are read through views ([`crate::lua_view`]).
    views: Views,
    /// The coroutine sliced calls run in, reused (a new one each call was garbage for
    /// Lua's collector to trace).
    coroutine: Option<Thread>,
}

#[derive(Default)]
struct HookLimits {
    /// Deadline as nanoseconds since `epoch`.
    deadline_ns: AtomicU64,
    /// When the call's first slice ends (nanoseconds since `epoch`): the hook then
    /// suspends the call's coroutine, so that the caller can finish it where blocking is
    /// allowed ([`LuaCall::Unfinished`]).
    slice_end_ns: AtomicU64,
    /// The call's own coroutine (as [`Thread::to_pointer`]): only it is suspended, never
    /// a coroutine the code made itself (its `resume` would see a yield it did not make).
    call_thread: AtomicUsize,
    /// The hook asked the call's coroutine to yield (Lua ignores it where a C function
    /// is on the stack; the hook then asks again).
    yield_asked: std::sync::atomic::AtomicBool,
    max_depth: AtomicUsize,
    epoch: OnceLock<Instant>,
}

impl HookLimits {
    fn epoch(&self) -> Instant {
        *self.epoch.get_or_init(Instant::now)
    }
}

/// Lua states, reused across calls (one per concurrent call at most).
#[derive(Default)]
pub struct LuaPool {
    idle: Mutex<Vec<State>>,
}

/// Global through which the prelude receives `materialize` (then removes it).
const MATERIALIZE: &str = "__weft_materialize";

const PRELUDE: &str = r#"
local materialize = __weft_materialize
__weft_materialize = nil
local raw_next, raw_get, raw_len = next, rawget, rawlen
local blocked = { "load", "loadfile", "dofile", "require", "collectgarbage", "rawset", "print" }
for _, name in ipairs(blocked) do _G[name] = nil end
string.dump = nil
getmetatable("").__metatable = false
local function readonly(t, name)
  return setmetatable({}, {
    __index = t,
    __newindex = function() error(name .. " is read-only in the sandbox", 2) end,
    __metatable = false,
  })
end
local safe = {}
for k, v in pairs(_G) do
  if type(v) == "table" and k ~= "_G" then safe[k] = readonly(v, k) else safe[k] = v end
end
safe._G = nil
safe.print = function() end
-- A view's own table is empty until it is made plain (see lua_view.rs).
safe.next = function(t, k) materialize(t) return raw_next(t, k) end
safe.rawget = function(t, k) materialize(t) return raw_get(t, k) end
safe.rawlen = function(t) materialize(t) return raw_len(t) end
return readonly(safe, "the global library")
"#;

fn new_state() -> mlua::Result<State> {
    let lua = Lua::new_with(
        StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::UTF8 | StdLib::COROUTINE,
        LuaOptions::default(),
    )?;
    let (views, materialize) = Views::new(&lua)?;
    lua.globals().raw_set(MATERIALIZE, materialize)?;
    let library: Table = lua.load(PRELUDE).set_name("=weft-prelude").eval()?;
    let meta = lua.create_table()?;
    meta.set("__index", library)?;
    // Shared by every call's environment: code must not reach it (`getmetatable(_ENV)`)
    // to change what later calls, of any run, see.
    meta.set("__metatable", false)?;
    let limits = Arc::new(HookLimits::default());
    let seen = limits.clone();
    // A global hook runs on every thread, coroutines included.
    lua.set_global_hook(
        HookTriggers::new().every_nth_instruction(CHECK_EVERY),
        move |lua, _| {
            let now = seen.epoch().elapsed().as_nanos() as u64;
            if now > seen.deadline_ns.load(Ordering::Relaxed) {
                return Err(mlua::Error::runtime("time limit exceeded"));
            }
            if now > seen.slice_end_ns.load(Ordering::Relaxed)
                && lua.current_thread().to_pointer() as usize
                    == seen.call_thread.load(Ordering::Relaxed)
            {
                seen.yield_asked.store(true, Ordering::Relaxed);
                return Ok(VmState::Yield);
            }
            // Each call costs at least one instruction, so a runaway recursion is caught
            // within CHECK_EVERY levels of the limit.
            let max_depth = seen.max_depth.load(Ordering::Relaxed);
            if lua.inspect_stack(max_depth, |_| ()).is_some() {
                return Err(mlua::Error::runtime(format!(
                    "recursion limit exceeded (max_depth {max_depth})"
                )));
            }
            Ok(VmState::Continue)
        },
    )?;
    Ok(State {
        lua,
        meta,
        compiled: HashMap::new(),
        limits,
        views,
        coroutine: None,
    })
}

fn failure(e: &mlua::Error) -> Failure {
    let text = match e {
        mlua::Error::CallbackError { cause, .. } => return failure(cause),
        other => other.to_string(),
    };
    let kind = if text.contains("time limit") {
        FailureKind::Timeout
    } else if text.contains("not enough memory") || matches!(e, mlua::Error::MemoryError(_)) {
        FailureKind::Memory
    } else if text.contains("stack overflow") || text.contains("recursion limit") {
        FailureKind::Recursion
    } else {
        FailureKind::Code
    };
    // mlua says `syntax error: [string "block"]:2: unexpected symbol`; say `line 2: ...`.
    let first = text.lines().next().unwrap_or("Lua error");
    let (message, line) = match first.split_once("[string \"block\"]:") {
        Some((before, after)) => match after.split_once(':') {
            Some((n, rest)) if n.parse::<u32>().is_ok() => {
                (format!("{before}line {n}:{rest}"), n.parse().ok())
            }
            _ => (first.to_owned(), None),
        },
        None => (first.to_owned(), None),
    };
    Failure {
        kind,
        message,
        line,
    }
}

/// How a call that may stop after its first slice went.
pub enum LuaCall {
    /// It ended, with its result or its failure.
    Done(Result<Value, Failure>),
    /// It ran past its first slice and waits, suspended, for [`LuaPool::finish`].
    Unfinished(SuspendedLuaCall),
}

/// A call that waits for [`LuaPool::finish`].
pub struct SuspendedLuaCall(Suspended);

enum Suspended {
    /// Stopped after its first slice: its Lua state and its coroutine.
    Running { state: State, thread: Thread },
    /// Not started: the code makes coroutines of its own, and work inside one of them
    /// cannot be suspended (the hook suspends only the call's own coroutine), so the
    /// whole call runs where blocking is allowed.
    NotStarted {
        source: String,
        entry: Option<String>,
        args: Shared,
        limits: CodeLimits,
    },
}

impl LuaPool {
    /// Runs `source` with `args`: as a chunk with `args`' keys as globals (its `return`
    /// value is the result), or, with `entry`, calls that function with `args`.
    pub fn run(
        &self,
        source: &str,
        entry: Option<&str>,
        args: &Shared,
        limits: &CodeLimits,
    ) -> Result<Value, Failure> {
        match self.start(source, entry, args, limits, None) {
            LuaCall::Done(result) => result,
            LuaCall::Unfinished(call) => self.finish(call),
        }
    }

    /// Starts a call as [`LuaPool::run`] does. With a `slice`, a call still running once
    /// the slice is over is suspended and returned unfinished, so that a short call
    /// costs no hand-off to another thread and a long one does not hold this one; code
    /// that makes coroutines of its own (its source mentions `coroutine`) is returned
    /// unfinished before it starts.
    pub fn start(
        &self,
        source: &str,
        entry: Option<&str>,
        args: &Shared,
        limits: &CodeLimits,
        slice: Option<Duration>,
    ) -> LuaCall {
        if slice.is_some() && source.contains("coroutine") {
            return LuaCall::Unfinished(SuspendedLuaCall(Suspended::NotStarted {
                source: source.to_owned(),
                entry: entry.map(str::to_owned),
                args: args.clone(),
                limits: limits.clone(),
            }));
        }
        let mut state = match self.take() {
            Ok(s) => s,
            Err(e) => return LuaCall::Done(Err(e)),
        };
        let resumed = begin(&mut state, source, entry, args, limits, slice);
        self.settle(state, resumed)
    }

    /// Runs a suspended call to its end.
    pub fn finish(&self, call: SuspendedLuaCall) -> Result<Value, Failure> {
        let (state, thread) = match call.0 {
            Suspended::Running { state, thread } => (state, thread),
            Suspended::NotStarted {
                source,
                entry,
                args,
                limits,
            } => return self.run(&source, entry.as_deref(), &args, &limits),
        };
        state.limits.slice_end_ns.store(u64::MAX, Ordering::Relaxed);
        state.limits.yield_asked.store(false, Ordering::Relaxed);
        let resumed = thread
            .resume::<mlua::Value>(())
            .map(|out| (Some(thread), out))
            .map_err(|e| failure(&e));
        match self.settle(state, resumed) {
            LuaCall::Done(result) => result,
            // The slice is over, so the hook asks nothing more: only the code's own
            // `coroutine.yield` could stop it, and that is a failure (see `settle`).
            LuaCall::Unfinished(_) => Err(Failure::new(
                FailureKind::Code,
                "the Lua call stopped again after its first slice",
            )),
        }
    }

    /// What the call's coroutine came back with: its result (the state goes back to
    /// the pool), or the suspended call.
    fn settle(
        &self,
        mut state: State,
        resumed: Result<(Option<Thread>, mlua::Value), Failure>,
    ) -> LuaCall {
        let result = match resumed {
            Ok((Some(thread), _)) if thread.status() == ThreadStatus::Resumable => {
                if state.limits.yield_asked.load(Ordering::Relaxed) {
                    return LuaCall::Unfinished(SuspendedLuaCall(Suspended::Running {
                        state,
                        thread,
                    }));
                }
                // The code's own `coroutine.yield` outside any coroutine it made, as a
                // plain call of the chunk reported it.
                Err(Failure::new(
                    FailureKind::Code,
                    "attempt to yield from outside a coroutine",
                ))
            }
            Ok((thread, out)) => {
                state.coroutine = thread;
                to_json(&state.lua, &state.views, out).map_err(|e| {
                    Failure::new(
                        FailureKind::Code,
                        format!("the result cannot be converted to JSON: {e}"),
                    )
                })
            }
            Err(e) => Err(e),
        };
        state.views.end_call();
        // A state whose call failed may hold a half-built environment; it is cheap to replace.
        if result.is_ok() {
            let _ = state.lua.set_memory_limit(0);
            self.give_back(state);
        }
        LuaCall::Done(result)
    }

    /// Compiles `source` without running it, on an idle state of the pool: building a
    /// state (its libraries, the prelude, the hook) cost 30 times the compile, and a
    /// flow's validation checks every Lua block.
    pub fn check(&self, source: &str) -> Result<(), Failure> {
        let state = self.take()?;
        let result = state
            .lua
            .load(with_environment_argument(source))
            .set_name("block")
            .into_function()
            .map(|_| ())
            .map_err(|e| failure(&e));
        self.give_back(state);
        result
    }

    /// An idle state, or a new one when none is idle.
    fn take(&self) -> Result<State, Failure> {
        let idle = self.idle.lock().expect("lua pool lock").pop();
        match idle {
            Some(s) => Ok(s),
            None => new_state().map_err(|e| failure(&e)),
        }
    }

    /// Returns a state, healthy, to the idle ones.
    fn give_back(&self, state: State) {
        self.idle.lock().expect("lua pool lock").push(state);
    }
}

/// Sets the call up and runs it: with a `slice`, in a coroutine resumed for the first
/// time (the coroutine and what it returned or yielded); without, as a plain call.
fn begin(
    state: &mut State,
    source: &str,
    entry: Option<&str>,
    args: &Shared,
    limits: &CodeLimits,
    slice: Option<Duration>,
) -> Result<(Option<Thread>, mlua::Value), Failure> {
    let fail = |e: mlua::Error| failure(&e);
    let lua = &state.lua;
    let hook = &state.limits;
    let now = hook.epoch().elapsed();
    let deadline = now + Duration::from_millis(limits.time_ms);
    hook.deadline_ns
        .store(deadline.as_nanos() as u64, Ordering::Relaxed);
    let slice_end = slice.map_or(u64::MAX, |s| (now + s).as_nanos() as u64);
    hook.slice_end_ns.store(slice_end, Ordering::Relaxed);
    hook.yield_asked.store(false, Ordering::Relaxed);
    hook.max_depth
        .store(limits.max_depth as usize, Ordering::Relaxed);
    lua.set_memory_limit(lua.used_memory() + limits.memory_bytes as usize)
        .map_err(fail)?;

    let env = lua.create_table().map_err(fail)?;
    env.set_metatable(Some(state.meta.clone())).map_err(fail)?;
    if entry.is_none() {
        for k in args.node().keys() {
            let v = state.views.expose_arg(lua, args, Some(k)).map_err(fail)?;
            env.set(k, v).map_err(fail)?;
        }
    }
    let chunk = match state.compiled.get(source) {
        Some(f) => f.clone(),
        None => {
            let f = lua
                .load(with_environment_argument(source))
                .set_name("block")
                .into_function()
                .map_err(fail)?;
            if state.compiled.len() >= 256 {
                state.compiled.clear();
            }
            state.compiled.insert(source.to_owned(), f.clone());
            f
        }
    };
    lua.globals().raw_set(ENVIRONMENT, &env).map_err(fail)?;
    let (body, arg) = match entry {
        None => (chunk, mlua::MultiValue::new()),
        Some(name) => {
            // Defining the functions is not sliced: a plain call cannot be suspended.
            chunk.call::<()>(()).map_err(fail)?;
            let f: mlua::Function = env.get(name).map_err(|_| {
                Failure::new(
                    FailureKind::Code,
                    format!("the code defines no function `{name}`"),
                )
            })?;
            let arg = state.views.expose_arg(lua, args, None).map_err(fail)?;
            (f, mlua::MultiValue::from_iter([arg]))
        }
    };
    if slice.is_none() {
        return body
            .call::<mlua::Value>(arg)
            .map(|out| (None, out))
            .map_err(fail);
    }
    let thread = match state.coroutine.take() {
        Some(t) if t.reset(body.clone()).is_ok() => t,
        _ => lua.create_thread(body).map_err(fail)?,
    };
    hook.call_thread
        .store(thread.to_pointer() as usize, Ordering::Relaxed);
    let out = thread.resume::<mlua::Value>(arg).map_err(fail)?;
    Ok((Some(thread), out))
}
