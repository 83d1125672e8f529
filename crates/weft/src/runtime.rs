//! [`Runtime`]: an engine with the handlers and functions of the blocks it was given,
//! which runs those blocks (or flows loaded from their YAML) durably.

use crate::BuildError;
use crate::block::Block;
use crate::parts::Parts;
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;
use weft_core::ir;
use weft_core::ports::{EventSink, ModelResolver, Scopes, Store};
use weft_engine::{Engine, RunResult};
use weft_service::{How, Service};

/// Runs blocks built with this crate. Cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    engine: Engine,
    parts: Arc<Parts>,
}

/// Configures a [`Runtime`].
pub struct RuntimeBuilder {
    store: Option<Arc<dyn Store>>,
    models: Option<Arc<dyn ModelResolver>>,
    default_model: Option<String>,
    sinks: Vec<Arc<dyn EventSink>>,
    parts: Parts,
}

impl Runtime {
    /// Starts configuring a runtime: register the blocks it will run, then `build()`.
    ///
    /// ```
    /// use weft::prelude::*;
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let greet = handler("greet").execute(|name: String, _ctx| async move { Ok(format!("hello {name}")) });
    /// let runtime = Runtime::builder().register(&greet).build().unwrap();
    /// let run = runtime.run(&greet, "Ada").await.unwrap();
    /// assert_eq!(run.output.unwrap(), "hello Ada");
    /// # });
    /// ```
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder {
            store: None,
            models: None,
            default_model: None,
            sinks: Vec::new(),
            parts: Parts::default(),
        }
    }

    /// The engine underneath (resume, answer approvals, retry, cancel, list runs).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Runs `block` on `input` until it completes, fails or pauses.
    pub async fn run(&self, block: &Block, input: impl Serialize) -> Result<RunResult, BuildError> {
        self.run_in(block, input, Scopes::default()).await
    }

    /// [`Runtime::run`] for a session, user and project: the block's handlers read and
    /// change their state (`ctx.session()`, ...), kept in the store across runs.
    pub async fn run_in(
        &self,
        block: &Block,
        input: impl Serialize,
        scopes: Scopes,
    ) -> Result<RunResult, BuildError> {
        for name in block.parts.handlers.keys() {
            if !self.parts.handlers.contains_key(name) {
                return Err(BuildError::NotRegistered(name.clone()));
            }
        }
        for name in block.parts.functions.keys() {
            if !self.parts.functions.contains_key(name) {
                return Err(BuildError::NotRegistered(name.clone()));
            }
        }
        self.run_flow_in(block.to_flow()?, input, scopes).await
    }

    /// Runs a flow (one loaded from the YAML of a registered block, say) on `input`;
    /// a shared flow (`Arc<Flow>`, as `weft_dialects::load_str` gives it) is not copied.
    pub async fn run_flow(
        &self,
        flow: impl Into<Arc<ir::Flow>>,
        input: impl Serialize,
    ) -> Result<RunResult, BuildError> {
        self.run_flow_in(flow, input, Scopes::default()).await
    }

    /// [`Runtime::run_flow`] for a session, user and project.
    pub async fn run_flow_in(
        &self,
        flow: impl Into<Arc<ir::Flow>>,
        input: impl Serialize,
        scopes: Scopes,
    ) -> Result<RunResult, BuildError> {
        let input: Value =
            serde_json::to_value(input).map_err(|e| BuildError::Input(e.to_string()))?;
        let prepared = self.engine.prepare(flow).map_err(BuildError::Invalid)?;
        let how = How {
            scopes,
            ..How::default()
        };
        let service = Service::new(self.engine.clone(), None);
        let started = service.start_built(prepared, Some(input), how).await?;
        Ok(started.underway.end().await?)
    }
}

impl RuntimeBuilder {
    /// Registers the handlers and functions of `block` (and of every block inside it).
    pub fn register(mut self, block: &Block) -> Self {
        self.parts.merge(&block.parts);
        self
    }

    /// Keeps runs in `store` (default: in memory; `weft_store::SqliteStore` survives
    /// restarts).
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// Resolves model ids (default: every provider, configured from the environment).
    pub fn models(mut self, models: Arc<dyn ModelResolver>) -> Self {
        self.models = Some(models);
        self
    }

    /// The model for generators that name none.
    pub fn default_model(mut self, id: impl Into<String>) -> Self {
        self.default_model = Some(id.into());
        self
    }

    /// Sends every event of every run to `sink`.
    pub fn sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.sinks.push(sink);
        self
    }

    /// Builds the runtime; two different things registered under one name are an error.
    pub fn build(self) -> Result<Runtime, BuildError> {
        if let Some(c) = self.parts.conflicts.first() {
            return Err(BuildError::Names(c.clone()));
        }
        let store = self
            .store
            .unwrap_or_else(|| Arc::new(weft_store::MemoryStore::new()));
        let models = self
            .models
            .unwrap_or_else(|| Arc::new(weft_llm::Router::new()));
        let mut b = Engine::builder(store).models(models);
        if let Some(m) = self.default_model {
            b = b.default_model(m);
        }
        for s in self.sinks {
            b = b.sink(s);
        }
        for (name, h) in &self.parts.handlers {
            b = b.handler(name.clone(), h.clone());
        }
        for (name, f) in &self.parts.functions {
            let f = f.clone();
            b = b.function(name.clone(), move |args| f(args));
        }
        Ok(Runtime {
            engine: b.build(),
            parts: Arc::new(self.parts),
        })
    }
}
