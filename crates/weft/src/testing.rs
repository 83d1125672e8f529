//! A harness for testing blocks: every generator answers from a scripted model (rules
//! matched against the last message), runs are kept in memory, and the result comes
//! with every event the run emitted.

use crate::block::Block;
use crate::runtime::Runtime;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::sync::Arc;
use weft_core::BlockError;
use weft_core::event::{Event, EventKind};
use weft_core::ir::{self, BlockKind, ModelDef};
use weft_core::ports::{RunStatus, Scopes, Store};
use weft_engine::{CollectingSink, RunResult};

/// The model id generators that name none get under the harness.
const TEST_MODEL: &str = "test";

/// Runs blocks against a scripted model and an in-memory store.
///
/// ```
/// use weft::prelude::*;
/// use weft::testing::TestHarness;
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let agent = generator("agent").user("Capital of {{ input }}?");
/// let run = TestHarness::new()
///     .reply("Capital of France", "Paris.")
///     .run(agent, "France")
///     .await;
/// assert_eq!(run.output(), "Paris.");
/// # });
/// ```
#[derive(Clone)]
pub struct TestHarness {
    rules: Vec<Value>,
    scopes: Scopes,
    /// One store for every run of the harness, so scoped state carries from run to run.
    store: Arc<dyn Store>,
}

impl Default for TestHarness {
    fn default() -> Self {
        TestHarness::new()
    }
}

impl TestHarness {
    /// A harness whose model has no rules yet, with an empty in-memory store.
    pub fn new() -> TestHarness {
        TestHarness {
            rules: Vec::new(),
            scopes: Scopes::default(),
            store: Arc::new(weft_store::MemoryStore::new()),
        }
    }

    /// Later runs belong to these session, user and project (the store is shared by
    /// every run of the harness, so their state carries over).
    pub fn scopes(mut self, scopes: Scopes) -> TestHarness {
        self.scopes = scopes;
        self
    }

    /// The store the runs use (to read scoped state or journals in a test).
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// When the last message contains `when`, the model answers `reply`.
    pub fn reply(self, when: &str, reply: &str) -> TestHarness {
        self.rule(json!({"when": when, "reply": reply}))
    }

    /// When the last message contains `when`, the model calls the tool `name`.
    pub fn tool_call(self, when: &str, name: &str, arguments: Value) -> TestHarness {
        self.rule(json!({"when": when, "tool_calls": [{"name": name, "arguments": arguments}]}))
    }

    /// After a tool answered, the model answers `reply` (`{last}` is the tool's result).
    pub fn after_tool(self, reply: &str) -> TestHarness {
        self.rule(json!({"role": "tool", "reply": reply}))
    }

    /// Any rule of the scripted model (`when`, `regex`, `role`, `reply`, `json`,
    /// `tool_calls`, `error`, `delay_ms`, `usage`; see `weft_llm::scripted`).
    pub fn rule(mut self, rule: Value) -> TestHarness {
        self.rules.push(rule);
        self
    }

    /// The flow of `block` with every model it names answered by the scripted model.
    pub fn flow(&self, block: &Block) -> Result<ir::Flow, crate::BuildError> {
        let mut flow = block.to_flow()?;
        let def = ModelDef {
            provider: "scripted".into(),
            model: None,
            options: [("rules".to_owned(), Value::Array(self.rules.clone()))]
                .into_iter()
                .collect(),
        };
        script_models(&mut flow, &def);
        Ok(flow)
    }

    /// Runs `block` on `input`; panics if the block cannot be built (a test's mistake).
    pub async fn run(&self, block: impl Into<Block>, input: impl Serialize) -> TestRun {
        let block: Block = block.into();
        let events = Arc::new(CollectingSink::new());
        let runtime = Runtime::builder()
            .register(&block)
            .store(self.store.clone())
            .default_model(TEST_MODEL)
            .sink(events.clone())
            .build()
            .unwrap_or_else(|e| panic!("the block does not build: {e}"));
        let flow = self
            .flow(&block)
            .unwrap_or_else(|e| panic!("the block does not build: {e}"));
        let result = runtime
            .run_flow_in(flow, input, self.scopes.clone())
            .await
            .unwrap_or_else(|e| panic!("the run could not be driven: {e}"));
        TestRun {
            output: result.output.as_ref().map(|o| o.to_value()),
            state: result.state.to_value(),
            result,
            events: events.events(),
        }
    }
}

/// Points every model id used in `flow` and its sub-flows at `def`. A model chosen by a
/// template when the block runs could name any model, so such a block gets the test model.
fn script_models(flow: &mut ir::Flow, def: &ModelDef) {
    fix_chosen_models(flow);
    let mut ids = vec![TEST_MODEL.to_owned()];
    weft_core::validate::walk_blocks(flow, &mut |_, b| {
        if let BlockKind::Llm(l) = &b.kind
            && let Some(m) = &l.model
            && !ids.contains(m)
        {
            ids.push(m.clone());
        }
    });
    alias(flow, &ids, def);
}

fn fix_chosen_models(flow: &mut ir::Flow) {
    flow.root.visit_mut(&mut |block| {
        if let BlockKind::Llm(l) = &mut block.kind
            && l.model.as_ref().is_some_and(|m| m.contains("{{"))
        {
            l.model = Some(TEST_MODEL.to_owned());
        }
    });
    for sub in flow.flows.values_mut() {
        fix_chosen_models(sub);
    }
}

fn alias(flow: &mut ir::Flow, ids: &[String], def: &ModelDef) {
    for id in ids {
        flow.models.insert(id.clone(), def.clone());
    }
    for sub in flow.flows.values_mut() {
        alias(sub, ids, def);
    }
}

/// A finished (or paused) test run and its events.
#[derive(Debug)]
pub struct TestRun {
    /// Where the run stands.
    pub result: RunResult,
    /// Every event it emitted, in order.
    pub events: Vec<Event>,
    /// The result's output as plain JSON, for assertions.
    pub output: Option<Value>,
    /// The result's state as plain JSON.
    pub state: Value,
}

impl TestRun {
    /// The output; panics with the error when the run did not complete.
    pub fn output(&self) -> &Value {
        assert_eq!(
            self.result.status,
            RunStatus::Completed,
            "the run did not complete: {:?}",
            self.result.error
        );
        self.output.as_ref().expect("a completed run has an output")
    }

    /// The output as a `T`.
    pub fn output_as<T: DeserializeOwned>(&self) -> T {
        serde_json::from_value(self.output().clone())
            .unwrap_or_else(|e| panic!("the output is not a {}: {e}", std::any::type_name::<T>()))
    }

    /// The error, when the run failed.
    pub fn error(&self) -> Option<&BlockError> {
        self.result.error.as_ref()
    }

    /// The `message` events' payloads (generators' emissions), in order.
    pub fn messages(&self) -> Vec<&Value> {
        self.events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Message { message, .. } => Some(message),
                _ => None,
            })
            .collect()
    }

    /// The tools the model called, with their arguments, in order.
    pub fn tool_calls(&self) -> Vec<(&str, &Value)> {
        self.events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::ToolCalled {
                    tool, arguments, ..
                } => Some((tool.as_str(), arguments)),
                _ => None,
            })
            .collect()
    }

    /// How many times a step named `name` started: a path whose last segment is `name`,
    /// or `name@n` where the block is used again in one sequence.
    pub fn starts(&self, name: &str) -> usize {
        self.events
            .iter()
            .filter(|e| match &e.kind {
                EventKind::StepStarted { path, .. } => {
                    let last = path.rsplit('/').next().unwrap_or(path);
                    let base = last.split_once('@').map_or(last, |(b, _)| b);
                    base == name
                }
                _ => false,
            })
            .count()
    }

    /// The `warning` events, as `(path, code, message)`, in order.
    pub fn warnings(&self) -> Vec<(&str, &str, &str)> {
        self.events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Warning {
                    path,
                    code,
                    message,
                } => Some((&**path, code.as_str(), message.as_str())),
                _ => None,
            })
            .collect()
    }

    /// The errors of steps that failed along the way (rescued or not), in order.
    pub fn step_errors(&self) -> Vec<&BlockError> {
        self.events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::StepFailed { error, .. } => Some(error),
                _ => None,
            })
            .collect()
    }
}
