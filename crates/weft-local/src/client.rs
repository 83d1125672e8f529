//! The engine's side of the local model: starts the worker process on first use, sends
//! it one job (a generation or an embedding) at a time, turns its deltas into the
//! engine's, and replaces it if it dies.

use crate::protocol::{EmbedJob, Job, Request, Turn, WorkerLine};
use crate::tools;
use async_trait::async_trait;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::Mutex;
use weft_core::ports::{
    DeltaSink, EmbedRequest, EmbedResponse, Model, ModelRequest, ModelResponse, Usage,
};
use weft_core::{BlockError, ErrorKind};

/// How to start a model worker: the program and the arguments before the model's path
/// (`weft` and `["model-worker"]`).
#[derive(Debug, Clone)]
pub struct ModelCommand {
    /// The program (the `weft` binary).
    pub program: PathBuf,
    /// Its arguments before the model file.
    pub args: Vec<String>,
}

/// Longest a worker may take to load its model.
const STARTUP: Duration = Duration::from_secs(120);

/// Tokens generated when a block sets no `max_tokens`.
const DEFAULT_MAX_TOKENS: u32 = 512;

struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// A GGUF model served by a worker process.
pub struct LocalModel {
    command: ModelCommand,
    path: PathBuf,
    timeout: Duration,
    worker: Mutex<Option<Worker>>,
}

/// Where `local/<name>` lives: a name ending in `.gguf` is a path; any other is
/// `<models>/<name>.gguf`, with `<models>` from `WEFT_MODELS` or `~/.cache/weft/models`.
pub fn model_path(name: &str, models_dir: Option<&Path>) -> PathBuf {
    if name.ends_with(".gguf") {
        return PathBuf::from(name);
    }
    let dir = models_dir.map(Path::to_path_buf).unwrap_or_else(|| {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default()
            .join(".cache/weft/models")
    });
    dir.join(format!("{name}.gguf"))
}

fn fail(message: impl Into<String>) -> BlockError {
    BlockError::new(ErrorKind::Model, message)
}

impl LocalModel {
    /// The model in `path`, served by workers started with `command`; each generation
    /// may take at most `timeout`. Fails when the file is missing.
    pub fn new(
        command: ModelCommand,
        path: PathBuf,
        timeout: Duration,
    ) -> Result<LocalModel, BlockError> {
        if !path.is_file() {
            return Err(BlockError::new(
                ErrorKind::Config,
                format!(
                    "the local model file {} does not exist (fetch the default one with scripts/fetch-model)",
                    path.display()
                ),
            ));
        }
        Ok(LocalModel {
            command,
            path,
            timeout,
            worker: Mutex::new(None),
        })
    }

    async fn spawn(&self) -> Result<Worker, BlockError> {
        let mut child = Command::new(&self.command.program)
            .args(&self.command.args)
            .arg(&self.path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| fail(format!("cannot start the local model worker: {e}")))?;
        let stdin = child.stdin.take().ok_or_else(|| fail("no worker stdin"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| fail("no worker stdout"))?;
        let mut worker = Worker {
            child,
            stdin,
            stdout: BufReader::new(stdout),
        };
        let mut line = String::new();
        match tokio::time::timeout(STARTUP, worker.stdout.read_line(&mut line)).await {
            Ok(Ok(n)) if n > 0 && line.trim() == crate::worker::READY => Ok(worker),
            Ok(_) => Err(died(worker, "while loading the model").await),
            Err(_) => Err(fail(format!(
                "the local model did not load within {} s",
                STARTUP.as_secs()
            ))),
        }
    }

    /// Sends `job` to the worker (started if none runs) and returns its last line, a
    /// `done` or `vectors`; deltas on the way go to `on_delta`. A worker that dies or
    /// overruns the timeout is replaced by the next job.
    async fn run(&self, job: &Job, on_delta: DeltaSink<'_>) -> Result<WorkerLine, BlockError> {
        // One job at a time: the worker uses every core it is given.
        let mut slot = self.worker.lock().await;
        if slot.is_none() {
            *slot = Some(self.spawn().await?);
        }
        let worker = slot.as_mut().expect("set above");
        match tokio::time::timeout(self.timeout, Self::exchange(worker, job, on_delta)).await {
            Ok(Ok(Ok(last))) => Ok(last),
            Ok(Ok(Err(message))) => {
                let kind = if message.contains("context window") {
                    ErrorKind::ContextOverflow
                } else {
                    ErrorKind::Model
                };
                Err(BlockError::new(
                    kind,
                    format!("the local model failed: {message}"),
                ))
            }
            Ok(Err(_)) => {
                let worker = slot.take().expect("present");
                Err(died(worker, "while answering").await)
            }
            Err(_) => {
                // The worker is mid-job; it cannot be reused.
                if let Some(mut w) = slot.take() {
                    let _ = w.child.kill().await;
                }
                Err(BlockError::new(
                    ErrorKind::Timeout,
                    format!(
                        "the local model did not answer within {} ms",
                        self.timeout.as_millis()
                    ),
                ))
            }
        }
    }

    async fn exchange(
        worker: &mut Worker,
        job: &Job,
        on_delta: DeltaSink<'_>,
    ) -> std::io::Result<Result<WorkerLine, String>> {
        let mut line = serde_json::to_string(job).map_err(std::io::Error::other)?;
        line.push('\n');
        worker.stdin.write_all(line.as_bytes()).await?;
        worker.stdin.flush().await?;
        loop {
            let mut answer = String::new();
            if worker.stdout.read_line(&mut answer).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            match serde_json::from_str::<WorkerLine>(&answer).map_err(std::io::Error::other)? {
                WorkerLine::Delta(d) => on_delta(&d),
                WorkerLine::Error(e) => return Ok(Err(e)),
                last => return Ok(Ok(last)),
            }
        }
    }
}

/// A worker's last line that is not the one the job asked for: a broken worker.
fn unexpected(line: &WorkerLine) -> BlockError {
    fail(format!(
        "the local model worker answered out of turn: {}",
        serde_json::to_string(line).unwrap_or_default()
    ))
}

/// Why a worker stopped, from the last thing it printed.
async fn died(mut worker: Worker, when: &str) -> BlockError {
    let status = tokio::time::timeout(Duration::from_secs(2), worker.child.wait()).await;
    let mut said = String::new();
    if let Some(mut err) = worker.child.stderr.take() {
        let mut buf = vec![0u8; 16 * 1024];
        if let Ok(Ok(n)) =
            tokio::time::timeout(Duration::from_millis(200), err.read(&mut buf)).await
        {
            said = String::from_utf8_lossy(&buf[..n]).into_owned();
        }
    }
    let how = match status {
        Ok(Ok(s)) => s.to_string(),
        _ => "it stopped answering".into(),
    };
    let last = said
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    fail(format!(
        "the local model process died {when} ({how}){}",
        if last.is_empty() {
            String::new()
        } else {
            format!(": {last}")
        }
    ))
}

#[async_trait]
impl Model for LocalModel {
    fn provider(&self) -> &str {
        "local"
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<ModelResponse, BlockError> {
        if !request.provider_tools.is_empty() {
            return Err(BlockError::new(
                ErrorKind::Config,
                "the local model runs no provider tools; remove provider_tools or use a cloud provider",
            ));
        }
        // A conversation that has called tools keeps their protocol to its end, so the
        // last turn (offered no tool once the rounds are spent) is still an answer the
        // grammar reads back, not an imitation of a call.
        let offers_tools = !request.tools.is_empty()
            || request
                .messages
                .iter()
                .any(|m| !m.tool_calls.is_empty() || m.role == "tool");
        let (messages, schema) = if offers_tools {
            let (turns, schema) = tools::prompt(request);
            (turns, Some(schema))
        } else {
            let turns = request
                .messages
                .iter()
                .map(|m| Turn {
                    role: m.role.clone(),
                    content: m.content.clone(),
                })
                .collect();
            (turns, request.output_schema.clone())
        };
        let req = Request {
            messages,
            max_tokens: request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            temperature: request.temperature,
            seed: 0,
            schema,
        };
        // With tools the tokens spell a JSON choice, not the answer: the answer is
        // passed on whole once it is known.
        let quiet = |_: &str| {};
        let stream_to: DeltaSink<'_> = if offers_tools { &quiet } else { on_delta };
        let done = match self.run(&Job::Generate(req), stream_to).await? {
            WorkerLine::Done(done) => done,
            other => return Err(unexpected(&other)),
        };
        let usage = Usage {
            input_tokens: done.input_tokens,
            output_tokens: done.output_tokens,
            cost_usd: 0.0,
        };
        let (content, tool_calls) = if offers_tools {
            let (content, calls) = tools::read(&done.content, request)
                .map_err(|m| BlockError::new(ErrorKind::Model, format!("the local model: {m}")))?;
            if !content.is_empty() {
                on_delta(&content);
            }
            (content, calls)
        } else {
            (done.content, Vec::new())
        };
        Ok(ModelResponse::finished(
            content,
            tool_calls,
            usage,
            request.model.clone(),
        ))
    }

    async fn embed(&self, request: &EmbedRequest) -> Result<EmbedResponse, BlockError> {
        let job = Job::Embed(EmbedJob {
            embed: request.inputs.clone(),
        });
        let embedded = match self.run(&job, &|_: &str| {}).await? {
            WorkerLine::Vectors(v) => v,
            other => return Err(unexpected(&other)),
        };
        let vectors = embedded.vectors;
        if let Some(n) = request.dimensions {
            // A mean-pooled vector cannot be shortened meaningfully; say so rather than
            // cut it.
            let have = vectors.first().map_or(0, Vec::len);
            if have != n as usize {
                return Err(BlockError::new(
                    ErrorKind::Config,
                    format!(
                        "the local model `{}` makes vectors of {have} dimensions, not {n}: remove `dimensions`",
                        request.model
                    ),
                ));
            }
        }
        Ok(EmbedResponse {
            vectors,
            usage: Usage {
                input_tokens: embedded.input_tokens,
                output_tokens: 0,
                cost_usd: 0.0,
            },
            model: Some(request.model.clone()),
        })
    }
}
