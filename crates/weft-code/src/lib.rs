//! # weft-code
//!
//! Owns the sandboxes behind `weft-core`'s `CodeRunner` port:
//!
//! - **Python** runs in [monty](https://crates.io/crates/monty), a Python interpreter
//!   written in Rust with no host access, inside a pool of pre-started worker processes
//!   (the `weft` binary started as `weft sandbox-worker`). A stack overflow or an
//!   allocation failure inside the interpreter ends a worker, never Weft.
//! - **Lua** 5.4 runs in process through mlua, which cannot crash its host; its limits
//!   are enforced by the VM.
//!
//! Python's file operations go to the engine, which performs them inside the run's
//! files directory or a private `/tmp` ([`files`]); a worker itself opens nothing.
//!
//! Every execution is bounded in wall time, memory, recursion depth and result size; a
//! limit ends the block with a clean error (kind `timeout`, or `code` with the limit in
//! its detail). Must not depend on the engine or any dialect.

mod confine;
pub mod files;
mod kept_args;
mod lines;
mod lua;
mod lua_view;
mod policy;
mod pool;
#[cfg(feature = "prolog")]
mod prolog;
#[cfg(feature = "prolog")]
mod prolog_program;
pub mod protocol;
mod python;
mod python_edits;
mod python_methods;
mod python_modules;
mod url;
mod worker;

use async_trait::async_trait;
use protocol::{Failure, FailureKind, Request};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use weft_core::ports::{CodeRequest, CodeRunner};
use weft_core::{BlockError, ErrorKind};

pub use files::FileAccess;
pub use lua::{LuaCall, LuaPool, SuspendedLuaCall};
pub use pool::{Pool, WorkerCommand};
#[cfg(feature = "prolog")]
pub use prolog::Prolog as PrologInterpreter;
pub use python::Compiled as PythonInterpreter;
pub use worker::{WorkerKind, worker_main};

/// Refuses a result whose JSON is longer than `limit` bytes, without building it whole.
pub(crate) fn check_output(v: Value, limit: u64) -> Result<Value, Failure> {
    match json_len_within(&v, limit) {
        Some(_) => Ok(v),
        None => Err(Failure::new(
            FailureKind::Output,
            format!("the result is larger than the output limit of {limit} bytes"),
        )),
    }
}

/// The length of `v`'s JSON, counted without writing it, when it is at most `limit`
/// bytes (counting stops past it); `None` past it, or when `v` cannot be written.
pub(crate) fn json_len_within(v: &impl serde::Serialize, limit: u64) -> Option<u64> {
    struct Bounded {
        len: u64,
        limit: u64,
    }
    impl std::io::Write for Bounded {
        fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
            self.len += data.len() as u64;
            if self.len > self.limit {
                return Err(std::io::Error::other("past the limit"));
            }
            Ok(data.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counted = Bounded { len: 0, limit };
    serde_json::to_writer(&mut counted, v).ok()?;
    Some(counted.len)
}

/// Lua blocks whose time limit is at most this run on the calling thread, without a
/// hand-off to a blocking thread, which costs far more than such a block
/// (docs/performance.md measures both).
pub const INLINE_MAX_MS: u64 = 20;

/// Runs `work` (the rest of a Lua call) where blocking is allowed: on this thread when
/// the runtime can hand its other tasks to another one meanwhile (`block_in_place`),
/// else on a blocking thread.
async fn where_blocking_is_allowed(
    work: impl FnOnce() -> Result<Value, protocol::Failure> + Send + 'static,
) -> Result<Result<Value, protocol::Failure>, BlockError> {
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi_thread {
        Ok(tokio::task::block_in_place(work))
    } else {
        tokio::task::spawn_blocking(work)
            .await
            .map_err(|e| BlockError::new(ErrorKind::Code, format!("the Lua sandbox failed: {e}")))
    }
}

/// How long any other Lua call runs on the calling (async) thread before it is suspended
/// and finished where blocking is allowed: long enough for nearly every step, short
/// enough that a busy script does not stall the runtime's other tasks.
pub const INLINE_SLICE: Duration = Duration::from_millis(2);

fn worker_request(req: &CodeRequest<'_>) -> Request {
    Request {
        id: 0,
        language: req.language.to_owned(),
        source: req.source.to_owned(),
        entry: req.entry.map(str::to_owned),
        args: req.args.clone(),
        kept: Default::default(),
        imports: req.imports.map(<[String]>::to_vec),
        builtins: req.builtins.map(<[String]>::to_vec),
        limits: req.limits.clone(),
    }
}

/// The sandboxes, as one `CodeRunner`.
pub struct Sandboxes {
    lua: Arc<LuaPool>,
    python: Arc<Pool>,
    #[cfg(feature = "prolog")]
    prolog: Arc<Pool>,
}

impl Sandboxes {
    /// Python runs in up to `python_workers` processes started with `worker`.
    pub fn new(worker: WorkerCommand, python_workers: usize) -> Sandboxes {
        Sandboxes {
            lua: Arc::new(LuaPool::default()),
            #[cfg(feature = "prolog")]
            prolog: Pool::new(
                WorkerCommand {
                    program: worker.program.clone(),
                    args: worker
                        .args
                        .iter()
                        .cloned()
                        .chain(["--prolog".to_owned()])
                        .collect(),
                },
                python_workers,
            ),
            python: Pool::new(worker, python_workers),
        }
    }
}

impl Sandboxes {
    /// The same sandboxes, with Python's file operations performed by `files`.
    pub fn with_files(self: &Arc<Self>, files: FileAccess) -> WithFiles {
        WithFiles {
            sandboxes: self.clone(),
            files: Arc::new(files),
        }
    }
}

/// Sandboxes whose Python code may use files (see [`files`]): one per run's files
/// directory, over the process's shared workers.
pub struct WithFiles {
    sandboxes: Arc<Sandboxes>,
    files: Arc<FileAccess>,
}

#[async_trait]
impl CodeRunner for WithFiles {
    fn languages(&self) -> Vec<String> {
        self.sandboxes.languages()
    }

    fn check(&self, language: &str, source: &str) -> Result<(), BlockError> {
        self.sandboxes.check(language, source)
    }

    async fn run(&self, req: CodeRequest<'_>) -> Result<Value, BlockError> {
        self.sandboxes.run_with(req, Some(&self.files)).await
    }
}

#[async_trait]
impl CodeRunner for Sandboxes {
    fn languages(&self) -> Vec<String> {
        let mut languages = vec!["python".to_owned(), "lua".to_owned()];
        if cfg!(feature = "prolog") {
            languages.push("prolog".to_owned());
        }
        languages
    }

    fn check(&self, language: &str, source: &str) -> Result<(), BlockError> {
        match language {
            "lua" => self.lua.check(source).map_err(BlockError::from),
            // Python and Prolog are parsed in a worker process when they first run
            // there: parsing hostile source in Weft's own process is exactly what the
            // workers avoid.
            "python" => Ok(()),
            "prolog" if cfg!(feature = "prolog") => Ok(()),
            other => Err(BlockError::new(
                ErrorKind::Config,
                format!("no sandbox runs `{other}`"),
            )),
        }
    }

    async fn run(&self, req: CodeRequest<'_>) -> Result<Value, BlockError> {
        self.run_with(req, None).await
    }
}

impl Sandboxes {
    /// Runs `req`; Python's file operations go to `files`, or are refused without it.
    async fn run_with(
        &self,
        req: CodeRequest<'_>,
        files: Option<&Arc<FileAccess>>,
    ) -> Result<Value, BlockError> {
        match req.language {
            "lua" => {
                let limits = req.limits;
                // A block that declares a short time limit runs right here to its end (the
                // limit bounds how long this thread is held). Any other runs here for its
                // first slice, which is all most calls need; one still running then (or
                // one the pool will not slice) is finished where blocking is allowed.
                let slice = (limits.time_ms > INLINE_MAX_MS).then_some(INLINE_SLICE);
                let result = match self
                    .lua
                    .start(req.source, req.entry, &req.args, limits, slice)
                {
                    LuaCall::Done(result) => result,
                    LuaCall::Unfinished(call) => {
                        let lua = self.lua.clone();
                        where_blocking_is_allowed(move || lua.finish(call)).await?
                    }
                };
                let result = result.and_then(|v| check_output(v, limits.output_bytes));
                result.map_err(BlockError::from)
            }
            "python" => self
                .python
                .call(worker_request(&req), files)
                .await
                .map_err(BlockError::from),
            #[cfg(feature = "prolog")]
            "prolog" => self
                .prolog
                .call(worker_request(&req), None)
                .await
                .map_err(BlockError::from),
            other => Err(BlockError::new(
                ErrorKind::Config,
                format!("no sandbox runs `{other}`"),
            )),
        }
    }
}
