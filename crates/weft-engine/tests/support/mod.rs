//! Test support: build engines over real stores and load flows from YAML text.

#![allow(dead_code)]

use async_trait::async_trait;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use weft_core::event::{Event, EventKind};
use weft_core::ports::{Native, NativeCall, NativeOutput, Store};
use weft_core::{BlockError, Value};
use weft_engine::{CollectingSink, Engine, Prepared};

type Fut = Pin<Box<dyn Future<Output = Result<NativeOutput, BlockError>> + Send>>;

/// A native handler from a closure.
pub struct FnNative(pub Box<dyn Fn(NativeCall) -> Fut + Send + Sync>);

#[async_trait]
impl Native for FnNative {
    async fn call(&self, call: NativeCall) -> Result<NativeOutput, BlockError> {
        (self.0)(call).await
    }
}

pub fn native<F, R>(f: F) -> Arc<dyn Native>
where
    F: Fn(NativeCall) -> R + Send + Sync + 'static,
    R: Future<Output = Result<NativeOutput, BlockError>> + Send + 'static,
{
    Arc::new(FnNative(Box::new(move |c| Box::pin(f(c)))))
}

/// Loads a native flow from YAML text (panics with the diagnostics if it is invalid).
pub fn flow(yaml: &str) -> Arc<Prepared> {
    let loaded =
        weft_dialects::load_str(yaml, "test.yaml", None, None).unwrap_or_else(|e| panic!("{e}"));
    Arc::new(Prepared::new(loaded.flow).unwrap_or_else(|d| panic!("{d:?}")))
}

pub struct Harness {
    pub engine: Engine,
    pub events: Arc<CollectingSink>,
}

pub fn harness(store: Arc<dyn Store>, handlers: Vec<(&str, Arc<dyn Native>)>) -> Harness {
    let events = Arc::new(CollectingSink::new());
    let mut b = Engine::builder(store)
        .models(Arc::new(weft_llm::Router::new()))
        .sink(events.clone());
    for (name, h) in handlers {
        b = b.handler(name, h);
    }
    Harness {
        engine: b.build(),
        events,
    }
}

pub fn memory() -> Arc<dyn Store> {
    Arc::new(weft_store::MemoryStore::new())
}

impl Harness {
    /// Starts a run of `flow` with its default input and waits for where it stands.
    pub async fn run(&self, flow: Arc<Prepared>) -> weft_engine::RunResult {
        self.engine
            .start(flow, None, weft_engine::RunOptions::default())
            .await
            .expect("the engine could not drive the run")
            .end()
            .await
            .expect("the engine could not drive the run")
    }

    pub fn kinds(&self) -> Vec<EventKind> {
        self.events
            .events()
            .into_iter()
            .map(|e: Event| e.kind)
            .collect()
    }
}

pub fn ok(v: Value) -> Result<NativeOutput, BlockError> {
    Ok(NativeOutput::from(v))
}
