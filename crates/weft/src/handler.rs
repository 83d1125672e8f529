//! [`handler`]: native async Rust logic with typed input and output. A handler is an
//! effectful leaf: its result is journaled, so a resumed run never runs it twice.

use crate::block::{Block, Kind};
use crate::parts::Parts;
use crate::scope::{Declarations, Declared, Resource, Scope};
use async_trait::async_trait;
use futures::future::BoxFuture;
use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use weft_core::ir::{self, BlockKind, HandlerSpec};
use weft_core::ports::{MessageSink, Native, NativeCall, NativeOutput, ParentBlock, ScopedStore};
use weft_core::{BlockError, ErrorKind, Patch, State};

/// Starts a handler named `name`; finish it with [`HandlerBuilder::execute`].
///
/// ```
/// use weft::prelude::*;
/// let shout = handler("shout").execute(|text: String, _ctx| async move {
///     Ok(text.to_uppercase())
/// });
/// assert_eq!(shout.kind(), Kind::Handler);
/// ```
pub fn handler(name: impl Into<String>) -> HandlerBuilder {
    HandlerBuilder {
        name: name.into(),
        description: String::new(),
        declared: IndexMap::new(),
    }
}

/// A handler being configured.
#[derive(Debug, Clone)]
pub struct HandlerBuilder {
    name: String,
    description: String,
    declared: IndexMap<&'static str, Declared>,
}

type Run = dyn Fn(Value, Ctx) -> BoxFuture<'static, Result<Value, BlockError>> + Send + Sync;

/// The engine's view of a handler: decode the input, run, encode the output.
struct HandlerFn {
    name: String,
    run: Box<Run>,
    declared: Declarations,
}

#[async_trait]
impl Native for HandlerFn {
    async fn call(&self, call: NativeCall) -> Result<NativeOutput, BlockError> {
        let writes = Arc::new(Mutex::new(Writes::default()));
        let ctx = Ctx {
            state: call.state,
            state_value: Arc::new(OnceLock::new()),
            path: call.path,
            run_id: call.run_id,
            writes: writes.clone(),
            messages: call.messages,
            parent: call.parent,
            scoped: call.scoped,
            declared: self.declared.clone(),
        };
        let output = (self.run)(call.input, ctx).await.map_err(|mut e| {
            if e.message.is_empty() {
                e.message = format!("the handler `{}` failed", self.name);
            }
            e
        })?;
        let w = std::mem::take(&mut *writes.lock().expect("handler writes lock"));
        Ok(NativeOutput {
            output,
            patch: w.patch,
            exit: w.exit,
        })
    }
}

#[derive(Default)]
struct Writes {
    patch: Patch,
    exit: Option<String>,
}

/// What a handler sees besides its input: the run state, where it runs, and a way to
/// write to the run state and pick an exit.
#[derive(Clone)]
pub struct Ctx {
    state: State,
    /// The state as one value, made the first time a handler asks for it.
    state_value: Arc<OnceLock<Value>>,
    path: String,
    run_id: Arc<str>,
    writes: Arc<Mutex<Writes>>,
    messages: Option<MessageSink>,
    parent: Option<Arc<ParentBlock>>,
    scoped: Option<ScopedStore>,
    declared: Declarations,
}

/// The block a handler runs inside (spec 002's `ctx.parent`).
#[derive(Debug, Clone, PartialEq)]
pub struct Parent {
    /// The parent's name.
    pub name: String,
    /// `sequencer`, `router` or `generator` (a tool's parent is its generator).
    pub kind: &'static str,
    /// The input the parent was called with.
    pub input: Value,
}

impl Ctx {
    /// The run state when the handler started.
    pub fn state(&self) -> &Value {
        self.state_value.get_or_init(|| self.state.to_value())
    }

    /// The block's path in the flow (its journal key).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Writes `value` at the dotted `path` of the run state once the handler returns
    /// (journaled with its result, so a replay writes it again without running it).
    pub fn set_state(&self, path: &str, value: impl Serialize) -> Result<(), BlockError> {
        let value = serde_json::to_value(value)
            .map_err(|e| BlockError::new(ErrorKind::Handler, format!("state value: {e}")))?;
        let segments = weft_core::value::split_path(path);
        if segments.is_empty() {
            return Err(BlockError::new(
                ErrorKind::Handler,
                format!("`{path}` is not a state path"),
            ));
        }
        self.writes
            .lock()
            .expect("handler writes lock")
            .patch
            .set(segments, value);
        Ok(())
    }

    /// Emits a message to the client: a `message` event `{type: "message", text}`.
    /// Handlers are silent unless they call this (or [`Ctx::emit_component`]); a replayed
    /// result does not emit again.
    pub fn emit_message(&self, text: impl Into<String>) {
        if let Some(m) = &self.messages {
            m.emit(serde_json::json!({"type": "message", "text": text.into()}));
        }
    }

    /// Emits a UI component: a `message` event `{type: "component", name, props}`.
    pub fn emit_component(&self, name: impl Into<String>, props: impl Serialize) {
        if let Some(m) = &self.messages {
            let props = serde_json::to_value(props).unwrap_or(Value::Null);
            m.emit(serde_json::json!({"type": "component", "name": name.into(), "props": props}));
        }
    }

    /// The nearest block this one runs inside: a step's sequencer, a route's router, a
    /// tool's generator; `None` at the top of a flow.
    pub fn parent(&self) -> Option<Parent> {
        let p = self.parent.as_deref()?;
        let kind = match p.kind.as_str() {
            "branch" => "router",
            "llm" => "generator",
            _ => "sequencer",
        };
        Some(Parent {
            name: p.name.clone(),
            kind,
            input: (*p.input).clone(),
        })
    }

    /// The run's session state (and the session resources this handler declares).
    /// Fails when the run belongs to no session.
    pub fn session(&self) -> Result<Scope, BlockError> {
        self.scope("session")
    }

    /// The run's user state.
    pub fn user(&self) -> Result<Scope, BlockError> {
        self.scope("user")
    }

    /// The run's project state.
    pub fn project(&self) -> Result<Scope, BlockError> {
        self.scope("project")
    }

    fn scope(&self, scope: &str) -> Result<Scope, BlockError> {
        Scope::of(scope, self.scoped.as_ref(), self.declared.get(scope))
    }

    /// Leaves the block by `exit` (for routing in graphs).
    pub fn exit(&self, exit: impl Into<String>) {
        self.writes.lock().expect("handler writes lock").exit = Some(exit.into());
    }
}

impl HandlerBuilder {
    /// What the handler does (a model reads it when the handler is a tool).
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Declares the fields of the session state this handler touches: missing fields
    /// read as `T::default()`'s (spec 002's partial state schemas).
    pub fn session_state<T: Serialize + Default>(self) -> Self {
        self.defaults_of("session", serde_json::to_value(T::default()).ok())
    }

    /// [`HandlerBuilder::session_state`] for the user scope.
    pub fn user_state<T: Serialize + Default>(self) -> Self {
        self.defaults_of("user", serde_json::to_value(T::default()).ok())
    }

    /// [`HandlerBuilder::session_state`] for the project scope.
    pub fn project_state<T: Serialize + Default>(self) -> Self {
        self.defaults_of("project", serde_json::to_value(T::default()).ok())
    }

    fn defaults_of(mut self, scope: &'static str, defaults: Option<Value>) -> Self {
        self.declared.entry(scope).or_default().defaults = defaults;
        self
    }

    /// Declares a session resource the handler uses (`ctx.session()?.resource(name)`).
    pub fn session_resource(self, name: impl Into<String>, r: Resource) -> Self {
        self.resource_of("session", name.into(), r)
    }

    /// Declares a user resource.
    pub fn user_resource(self, name: impl Into<String>, r: Resource) -> Self {
        self.resource_of("user", name.into(), r)
    }

    /// Declares a project resource.
    pub fn project_resource(self, name: impl Into<String>, r: Resource) -> Self {
        self.resource_of("project", name.into(), r)
    }

    fn resource_of(mut self, scope: &'static str, name: String, r: Resource) -> Self {
        self.declared
            .entry(scope)
            .or_default()
            .resources
            .insert(name, r);
        self
    }

    /// The handler's logic: `f` gets the input as `I` and a [`Ctx`], and returns `O`.
    /// An input that does not deserialize as `I` fails the block with kind `input`.
    pub fn execute<I, O, F, Fut>(self, f: F) -> Block
    where
        I: DeserializeOwned + JsonSchema + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(I, Ctx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, BlockError>> + Send + 'static,
    {
        let f = Arc::new(f);
        let name = self.name.clone();
        let run: Box<Run> = Box::new(move |input: Value, ctx: Ctx| {
            let f = f.clone();
            let name = name.clone();
            Box::pin(async move {
                let input: I = serde_json::from_value(input).map_err(|e| {
                    BlockError::new(
                        ErrorKind::Input,
                        format!(
                            "the handler `{name}` takes {}: {e}",
                            std::any::type_name::<I>()
                        ),
                    )
                })?;
                let out = f(input, ctx).await?;
                serde_json::to_value(out).map_err(|e| {
                    BlockError::new(
                        ErrorKind::Handler,
                        format!("the handler `{name}` returned a value that is not JSON: {e}"),
                    )
                })
            })
        });
        let native: Arc<dyn Native> = Arc::new(HandlerFn {
            name: self.name.clone(),
            run,
            declared: Arc::new(self.declared),
        });
        let mut parts = Parts::default();
        parts.handlers.insert(self.name.clone(), native);
        let ir = ir::Block::new(BlockKind::Handler(HandlerSpec {
            name: self.name.clone(),
            config: Value::Null,
        }))
        .with_name(self.name.clone());
        let mut block = Block::new(self.name, Kind::Handler, ir, parts);
        block.description = self.description;
        block.input_schema = Some(schema_of::<I>());
        block
    }
}

/// The JSON Schema of `T`, without the `$schema` and `title` decorations.
pub(crate) fn schema_of<T: JsonSchema>() -> Value {
    let mut v = serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Bool(true));
    if let Value::Object(m) = &mut v {
        m.remove("$schema");
        m.remove("title");
    }
    v
}
