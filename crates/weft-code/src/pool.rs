//! A pool of pre-started sandbox worker processes. Each call borrows an idle worker,
//! sends one request and waits for the answer under a deadline. A worker that misses its
//! deadline is killed; one that dies is reported with the cause it printed (out of
//! memory, stack overflow) and replaced on the next call. Weft itself never runs the
//! interpreter, so nothing the code does can take it down.

use crate::files::FileAccess;
use crate::kept_args::SentParts;
use crate::lines::{HOST_SPIN, LineBuffer};
use crate::protocol::{Failure, FailureKind, FileAnswer, FromWorker, Request, Response};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::Semaphore;

/// How to start a worker process.
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    /// The program (the `weft` binary).
    pub program: PathBuf,
    /// Its arguments (`["sandbox-worker"]`).
    pub args: Vec<String>,
}

/// How long a new worker may take to set itself up.
const STARTUP: Duration = Duration::from_secs(60);

/// Extra time past the code's own limit before the worker is killed.
const GRACE: Duration = Duration::from_millis(500);

struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
    lines: LineBuffer,
    /// The parts of earlier arguments this worker keeps.
    sent: SentParts,
}

impl Worker {
    /// The worker's next line: polled for `spin` first (a short block answers within
    /// it, and the task never sleeps), then awaited.
    async fn read_line(&mut self, spin: Duration) -> std::io::Result<Option<String>> {
        if let Some(line) = self.lines.spin_for_line(self.stdout.as_raw_fd(), spin)? {
            return Ok(line);
        }
        loop {
            if let Some(line) = self.lines.take_line()? {
                return Ok(Some(line));
            }
            if self.stdout.read_buf(self.lines.room()).await? == 0 {
                return Ok(None);
            }
        }
    }
}

/// Worker processes shared by every run in the process.
pub struct Pool {
    command: WorkerCommand,
    idle: Mutex<Vec<Worker>>,
    slots: Semaphore,
    next_id: AtomicU64,
}

impl Pool {
    /// A pool of at most `size` workers started with `command` (started on first use).
    pub fn new(command: WorkerCommand, size: usize) -> Arc<Pool> {
        Arc::new(Pool {
            command,
            idle: Mutex::new(Vec::new()),
            slots: Semaphore::new(size.max(1)),
            next_id: AtomicU64::new(1),
        })
    }

    async fn spawn(&self) -> Result<Worker, Failure> {
        let mut child = Command::new(&self.command.program)
            .args(&self.command.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env_clear()
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                Failure::new(
                    FailureKind::Crash,
                    format!(
                        "cannot start the sandbox worker {}: {e}",
                        self.command.program.display()
                    ),
                )
            })?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| Failure::new(FailureKind::Crash, "no worker stdin"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| Failure::new(FailureKind::Crash, "no worker stdout"))?;
        crate::lines::set_nonblocking(stdout.as_raw_fd()).map_err(|e| {
            Failure::new(
                FailureKind::Crash,
                format!("cannot set up the worker pipe: {e}"),
            )
        })?;
        let mut worker = Worker {
            child,
            stdin,
            stdout,
            lines: LineBuffer::default(),
            sent: SentParts::default(),
        };
        // Wait for the worker to be set up (the Prolog machine takes a while to start)
        // before any block's clock starts.
        match tokio::time::timeout(STARTUP, worker.read_line(Duration::ZERO)).await {
            Ok(Ok(Some(line))) if line.trim() == crate::worker::READY => Ok(worker),
            Ok(_) => Err(died(worker).await),
            Err(_) => {
                let _ = worker.child.kill().await;
                Err(Failure::new(
                    FailureKind::Crash,
                    format!(
                        "the sandbox worker did not start within {} s",
                        STARTUP.as_secs()
                    ),
                ))
            }
        }
    }

    /// Runs `req` in a worker; `files` performs its code's file operations (without it,
    /// every one is refused).
    pub async fn call(
        &self,
        mut req: Request,
        files: Option<&Arc<FileAccess>>,
    ) -> Result<serde_json::Value, Failure> {
        let _slot = self
            .slots
            .acquire()
            .await
            .map_err(|_| Failure::new(FailureKind::Crash, "the sandbox pool is closed"))?;
        let reused = self.idle.lock().expect("pool lock").pop();
        let mut worker = match reused {
            Some(w) => w,
            None => self.spawn().await?,
        };
        req.id = self.next_id.fetch_add(1, Ordering::Relaxed);
        (req.args, req.kept) = worker.sent.prepare(&req.args);
        let deadline = Duration::from_millis(req.limits.time_ms) + GRACE;
        let exchange = async {
            let mut line = serde_json::to_string(&req).map_err(std::io::Error::other)?;
            line.push('\n');
            worker.stdin.write_all(line.as_bytes()).await?;
            worker.stdin.flush().await?;
            loop {
                let Some(line) = worker.read_line(HOST_SPIN).await? else {
                    return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
                };
                match FromWorker::parse(&line).map_err(std::io::Error::other)? {
                    FromWorker::Done(resp) => return Ok::<Response, std::io::Error>(resp),
                    FromWorker::File(file) => {
                        let answer = perform(files, file).await;
                        let mut line =
                            serde_json::to_string(&answer).map_err(std::io::Error::other)?;
                        line.push('\n');
                        worker.stdin.write_all(line.as_bytes()).await?;
                        worker.stdin.flush().await?;
                    }
                }
            }
        };
        match tokio::time::timeout(deadline, exchange).await {
            Ok(Ok(resp)) if resp.id == req.id => {
                if resp.retiring {
                    let _ = worker.child.wait().await;
                } else {
                    self.idle.lock().expect("pool lock").push(worker);
                }
                resp.result
            }
            Ok(Ok(_)) => Err(Failure::new(
                FailureKind::Crash,
                "the sandbox worker answered out of turn",
            )),
            Ok(Err(_)) => Err(died(worker).await),
            Err(_) => {
                let _ = worker.child.kill().await;
                Err(Failure::new(
                    FailureKind::Timeout,
                    format!(
                        "the code did not finish within its time limit of {} ms",
                        req.limits.time_ms
                    ),
                ))
            }
        }
    }
}

/// Performs a file operation off the runtime's threads (a read may be large).
async fn perform(files: Option<&Arc<FileAccess>>, call: monty_types::OsFunctionCall) -> FileAnswer {
    let refused = |why: &str| {
        monty_types::MontyException::new(monty_types::ExcType::PermissionError, Some(why.into()))
    };
    let result = match files {
        None => Err(refused("sandboxed code has no files here")),
        Some(files) => {
            let files = files.clone();
            tokio::task::spawn_blocking(move || files.answer(call))
                .await
                .unwrap_or_else(|e| Err(refused(&format!("the file operation failed: {e}"))))
        }
    };
    FileAnswer { result }
}

/// Why a worker died, from its exit status and the last thing it printed.
async fn died(mut worker: Worker) -> Failure {
    let status = tokio::time::timeout(Duration::from_secs(2), worker.child.wait()).await;
    let mut said = String::new();
    if let Some(mut err) = worker.child.stderr.take() {
        let mut buf = vec![0u8; 64 * 1024];
        if let Ok(Ok(n)) =
            tokio::time::timeout(Duration::from_millis(200), err.read(&mut buf)).await
        {
            said = String::from_utf8_lossy(&buf[..n]).into_owned();
        }
    }
    let _ = worker.child.kill().await;
    let how = match status {
        Ok(Ok(s)) => s.to_string(),
        _ => "it stopped answering".to_owned(),
    };
    if said.contains("memory allocation")
        || said.contains("out of memory")
        || said.contains("capacity overflow")
    {
        Failure::new(
            FailureKind::Memory,
            "the code exceeded its memory limit (the sandbox process ran out of memory)",
        )
    } else if said.contains("overflowed its stack") || said.contains("stack overflow") {
        Failure::new(
            FailureKind::Recursion,
            "the code nested too deeply (the sandbox process overflowed its stack)",
        )
    } else {
        let said = said.lines().last().unwrap_or("").trim();
        Failure::new(
            FailureKind::Crash,
            format!(
                "the sandbox process died ({how}){}",
                if said.is_empty() {
                    String::new()
                } else {
                    format!(": {said}")
                }
            ),
        )
    }
}
