//! # weft-actions
//!
//! Owns Weft's built-in `action` blocks, each a `Native` behind `weft-core`'s port:
//! `file.read`, `file.write`, `file.append` (confined to one directory), `http.get`,
//! `http.post`, `http.request` (any method, where the network policy lets them go),
//! `json.parse` and `time.sleep`. Model calls
//! are `llm` blocks, not actions.
//!
//! Must not depend on the engine or any dialect.

mod files;
mod http;

use async_trait::async_trait;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use weft_core::ports::{Native, NativeCall, NativeOutput};
use weft_core::{BlockError, ErrorKind, Value};

pub use files::FileRoot;
use http::{Http, Verb};
pub use weft_net::NetPolicy;

fn param<'a>(call: &'a NativeCall, name: &str) -> Result<&'a Value, BlockError> {
    call.config.get(name).ok_or_else(|| {
        BlockError::new(
            ErrorKind::Input,
            format!("the action needs `with: {{{name}: ...}}`"),
        )
    })
}

fn str_param<'a>(call: &'a NativeCall, name: &str) -> Result<&'a str, BlockError> {
    param(call, name)?.as_str().ok_or_else(|| {
        BlockError::new(
            ErrorKind::Input,
            format!("the action's `{name}` must be a string"),
        )
    })
}

/// A parameter as text: a string as it is, any other value as its JSON.
fn as_text(v: &Value) -> std::borrow::Cow<'_, str> {
    match v {
        Value::String(s) => s.as_str().into(),
        other => other.to_string().into(),
    }
}

/// `json.parse`: parses `with.text` as JSON.
struct JsonParse;

#[async_trait]
impl Native for JsonParse {
    async fn call(&self, call: NativeCall) -> Result<NativeOutput, BlockError> {
        let text = str_param(&call, "text")?;
        serde_json::from_str::<Value>(text)
            .map(NativeOutput::from)
            .map_err(|e| BlockError::new(ErrorKind::Action, format!("json.parse: {e}")))
    }
}

/// `time.sleep`: waits `with.ms` milliseconds (at most an hour), then passes its input on.
struct Sleep;

#[async_trait]
impl Native for Sleep {
    async fn call(&self, call: NativeCall) -> Result<NativeOutput, BlockError> {
        let ms = param(&call, "ms")?
            .as_u64()
            .filter(|ms| *ms <= 3_600_000)
            .ok_or_else(|| {
                BlockError::new(
                    ErrorKind::Input,
                    "time.sleep's `ms` must be a whole number up to 3600000",
                )
            })?;
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(NativeOutput::from(call.input))
    }
}

/// Every built-in action, by name. File actions are confined to `files`; HTTP actions
/// go where `net` lets them.
pub fn builtins(files: PathBuf, net: Arc<NetPolicy>) -> Vec<(&'static str, Arc<dyn Native>)> {
    let root = Arc::new(FileRoot::new(files));
    let client = http::SharedClient::new(net);
    vec![
        (
            "file.read",
            Arc::new(files::Read(root.clone())) as Arc<dyn Native>,
        ),
        (
            "file.write",
            Arc::new(files::Write {
                root: root.clone(),
                append: false,
            }),
        ),
        ("file.append", Arc::new(files::Write { root, append: true })),
        ("http.get", Arc::new(Http::new(client.clone(), Verb::Get))),
        ("http.post", Arc::new(Http::new(client.clone(), Verb::Post))),
        ("http.request", Arc::new(Http::new(client, Verb::Named))),
        ("json.parse", Arc::new(JsonParse)),
        ("time.sleep", Arc::new(Sleep)),
    ]
}

/// The built-in actions that change the world outside the run.
pub const WRITING: &[&str] = &["file.write", "file.append", "http.post", "http.request"];

/// Every built-in action, with those that write ([`WRITING`]) replaced by one that
/// fails saying so: for a run that must leave no trace (a model testing its flow).
pub fn without_writes(files: PathBuf, net: Arc<NetPolicy>) -> Vec<(&'static str, Arc<dyn Native>)> {
    builtins(files, net)
        .into_iter()
        .map(|(name, action)| {
            if WRITING.contains(&name) {
                (name, Arc::new(Denied(name)) as Arc<dyn Native>)
            } else {
                (name, action)
            }
        })
        .collect()
}

/// An action a run may not take.
struct Denied(&'static str);

#[async_trait]
impl Native for Denied {
    async fn call(&self, _: NativeCall) -> Result<NativeOutput, BlockError> {
        Err(BlockError::new(
            ErrorKind::Action,
            format!(
                "{} is denied in a test run: it would write outside the run",
                self.0
            ),
        ))
    }
}
