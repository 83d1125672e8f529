//! The native port: handlers registered by the host and built-in actions, called with a
//! block's input and the run's context.

use super::store::{Scopes, Store};
use crate::error::BlockError;
use crate::value::{Patch, State, Value};
use async_trait::async_trait;
use std::sync::Arc;

/// What a native handler or action sees.
#[derive(Debug, Clone)]
pub struct NativeCall {
    /// The block's input.
    pub input: Value,
    /// A snapshot of the run state (shared, not copied: [`State::to_value`] copies it).
    pub state: State,
    /// The block's configuration (`config` of a handler, rendered `with` of an action).
    pub config: Value,
    /// The block's path.
    pub path: String,
    /// The run's id.
    pub run_id: Arc<str>,
    /// The idempotency key of this attempt of the step (see
    /// [`crate::hash::idempotency_key`]): the same when a resume after a crash repeats
    /// the call, new for a retry. Send it to services that deduplicate requests.
    pub idempotency_key: String,
    /// The step's attempt under its own retry policy (1 for the first).
    pub attempt: u32,
    /// Emits `message` events on the run's stream, under the block's path.
    pub messages: Option<MessageSink>,
    /// The nearest enclosing named composite (or model call, for a tool).
    pub parent: Option<Arc<ParentBlock>>,
    /// The run's session, user and project, and the store that keeps their state.
    pub scoped: Option<ScopedStore>,
}

/// A run's scopes and the store that keeps their documents.
#[derive(Clone)]
pub struct ScopedStore {
    /// The run's session, user and project.
    pub scopes: Arc<Scopes>,
    /// Where the documents are kept.
    pub store: Arc<dyn Store>,
}

impl std::fmt::Debug for ScopedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopedStore")
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

/// Lets a native function emit `message` events on its run's stream. Emitted when the
/// function runs; a replayed result does not emit them again.
#[derive(Clone)]
pub struct MessageSink(pub Arc<dyn Fn(Value) + Send + Sync>);

impl MessageSink {
    /// Emits `message`.
    pub fn emit(&self, message: Value) {
        (self.0)(message)
    }
}

impl std::fmt::Debug for MessageSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MessageSink")
    }
}

/// A block a native function runs inside: its id, its kind's name, and its input.
#[derive(Debug, Clone, PartialEq)]
pub struct ParentBlock {
    /// The block's id.
    pub name: String,
    /// Its kind (`sequence`, `branch`, `llm`, ...).
    pub kind: String,
    /// The input it was called with.
    pub input: Arc<Value>,
}

/// What a native handler or action returns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NativeOutput {
    /// The output value.
    pub output: Value,
    /// State writes.
    pub patch: Patch,
    /// An exit handle for routing.
    pub exit: Option<String>,
}

impl From<Value> for NativeOutput {
    fn from(output: Value) -> Self {
        NativeOutput {
            output,
            ..Default::default()
        }
    }
}

/// A native function: a `handler` block (registered by the host) or an `action`.
#[async_trait]
pub trait Native: Send + Sync {
    /// Runs the function.
    async fn call(&self, call: NativeCall) -> Result<NativeOutput, BlockError>;
}
