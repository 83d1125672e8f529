//! What the engine and a sandbox worker process say to each other: one JSON object per
//! line each way.

pub use crate::kept_args::{ArgStep, KeptParts};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_core::ir::CodeLimits;
use weft_core::{BlockError, ErrorKind};

/// One execution of a code block.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    /// Correlates the answer.
    pub id: u64,
    /// The language (`python`).
    pub language: String,
    /// The source.
    pub source: String,
    /// A function to call with `args` as keyword arguments; or none to run the source as
    /// a script with `args`' keys as variables.
    pub entry: Option<String>,
    /// Arguments (an object); serialized from the caller's shared value as it is, read
    /// back as plain JSON.
    pub args: weft_core::value::Shared,
    /// Large parts of `args` the worker keeps between requests ([`crate::kept_args`]).
    #[serde(default, skip_serializing_if = "KeptParts::is_empty")]
    pub kept: KeptParts,
    /// Modules the code may import; `None` allows every module the sandbox has.
    #[serde(default)]
    pub imports: Option<Vec<String>>,
    /// Builtin functions the code may call; `None` allows all of them.
    #[serde(default)]
    pub builtins: Option<Vec<String>>,
    /// Limits.
    pub limits: CodeLimits,
}

/// Which limit or failure ended an execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The code raised an exception (or failed to compile).
    Code,
    /// The time limit.
    Timeout,
    /// The memory limit.
    Memory,
    /// The recursion limit.
    Recursion,
    /// The result was larger than the output limit.
    Output,
    /// The sandbox process died.
    Crash,
}

/// Why an execution produced no value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    /// Which limit or failure.
    pub kind: FailureKind,
    /// What happened, for a person (the exception and its line).
    pub message: String,
    /// The line in the block's source, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

impl Failure {
    /// A failure of `kind`.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Failure {
        Failure {
            kind,
            message: message.into(),
            line: None,
        }
    }
}

impl From<Failure> for BlockError {
    fn from(f: Failure) -> BlockError {
        let kind = match f.kind {
            FailureKind::Timeout => ErrorKind::Timeout,
            _ => ErrorKind::Code,
        };
        let limit = match f.kind {
            FailureKind::Code => None,
            FailureKind::Timeout => Some("time"),
            FailureKind::Memory => Some("memory"),
            FailureKind::Recursion => Some("recursion"),
            FailureKind::Output => Some("output"),
            FailureKind::Crash => Some("crash"),
        };
        let mut detail = serde_json::Map::new();
        if let Some(l) = limit {
            detail.insert("limit".into(), Value::String(l.into()));
        }
        if let Some(line) = f.line {
            detail.insert("line".into(), Value::from(line));
        }
        let e = BlockError::new(kind, f.message);
        if detail.is_empty() {
            e
        } else {
            e.with_detail(Value::Object(detail))
        }
    }
}

/// The worker's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Response {
    /// The request's id.
    pub id: u64,
    /// The value, or why there is none.
    pub result: Result<Value, Failure>,
    /// The worker exits after this answer (an interpreter failed inside); do not reuse it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retiring: bool,
}

/// A file operation a worker asks the engine to perform while code runs (a worker may
/// open no file itself: see [`crate::files`]); the engine answers with a [`FileAnswer`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileCall {
    /// The operation, as the interpreter describes it.
    pub file: monty_types::OsFunctionCall,
}

/// A line from a worker, read with [`FromWorker::parse`]: a file operation, then the
/// request's answer.
#[derive(Debug, Clone)]
pub enum FromWorker {
    /// A file operation.
    File(monty_types::OsFunctionCall),
    /// The answer to the request.
    Done(Response),
}

/// The engine's answer to a file operation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileAnswer {
    /// The operation's value, or the exception the code sees.
    pub result: Result<monty_types::MontyObject, monty_types::MontyException>,
}

impl FromWorker {
    /// Reads a worker's line. Every request's answer takes this path, so the kind is told
    /// by the line's first key rather than by serde's untagged trial, which buffers the
    /// whole value first.
    pub fn parse(line: &str) -> serde_json::Result<FromWorker> {
        if line.starts_with("{\"file\":") {
            serde_json::from_str::<FileCall>(line).map(|c| FromWorker::File(c.file))
        } else {
            serde_json::from_str(line).map(FromWorker::Done)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_line_is_a_file_operation_or_an_answer() {
        let asked = FileCall {
            file: monty_types::OsFunctionCall::ReadText("notes.md".into()),
        };
        let line = serde_json::to_string(&asked).unwrap();
        assert!(matches!(
            FromWorker::parse(&line).unwrap(),
            FromWorker::File(monty_types::OsFunctionCall::ReadText(p)) if p.as_str() == "notes.md"
        ));
        let answered = Response {
            id: 7,
            result: Ok(serde_json::json!({"file": "a value, not an operation"})),
            retiring: false,
        };
        let line = serde_json::to_string(&answered).unwrap();
        assert!(matches!(
            FromWorker::parse(&line).unwrap(),
            FromWorker::Done(Response { id: 7, .. })
        ));
        assert!(FromWorker::parse("{\"file\": 3}").is_err());
    }
}
