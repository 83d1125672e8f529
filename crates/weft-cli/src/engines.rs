//! The engines a command builds: every one shares this process's model providers,
//! sandboxes and secrets; they differ in their store, their sinks, and whether their
//! actions may write (a test run's may not).

use crate::commands::Failure;
use crate::run_settings::RunSettings;
use crate::settings::Settings;
use std::sync::Arc;
use weft_core::ports::{CodeRunner, ModelResolver, Store};
use weft_engine::{Engine, EngineBuilder};

/// What every engine of this process shares.
#[derive(Clone)]
pub(crate) struct Adapters {
    models: Arc<dyn ModelResolver>,
    code: Arc<dyn CodeRunner>,
    secrets: serde_json::Value,
}

impl Adapters {
    /// The model providers (and the local model), the sandbox pool and the secrets
    /// `settings` name.
    pub(crate) fn new(settings: &Settings) -> Result<Adapters, Failure> {
        let me = settings.program.clone().ok_or_else(|| {
            Failure::invalid("error: cannot find the weft binary for worker processes")
        })?;
        let router = weft_llm::Router::from_env(settings.model_env())
            .map_err(|e| Failure::invalid(format!("error: {e}")))?;
        #[cfg(feature = "local")]
        let router = router.with_provider(
            "local",
            crate::local::local_models(me.clone(), settings.models_dir.clone()),
        );
        let worker = weft_code::WorkerCommand {
            program: me,
            args: vec!["sandbox-worker".into()],
        };
        let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
        Ok(Adapters {
            models: Arc::new(router),
            code: Arc::new(weft_code::Sandboxes::new(worker, workers)),
            secrets: settings.secrets.clone(),
        })
    }

    /// An engine over `store` acting as `run` says; with `writes` false, the actions
    /// that write (files, HTTP posts) fail instead.
    pub(crate) fn builder(
        &self,
        store: Arc<dyn Store>,
        run: &RunSettings,
        writes: bool,
    ) -> EngineBuilder {
        let mut b = Engine::builder(store)
            .models(self.models.clone())
            .code_runner(self.code.clone())
            .secrets(self.secrets.clone());
        let actions = if writes {
            weft_actions::builtins(run.files.clone())
        } else {
            weft_actions::without_writes(run.files.clone())
        };
        for (name, action) in actions {
            b = b.action(name, action);
        }
        match &run.model {
            Some(m) => b.default_model(m.clone()),
            // Without --model or $WEFT_MODEL, blocks that name no model use the local one.
            #[cfg(feature = "local")]
            None => b.default_model(crate::local::DEFAULT_LOCAL_MODEL.to_owned()),
            #[cfg(not(feature = "local"))]
            None => b,
        }
    }

    /// Engines for `test_flow`: each over a new in-memory store, its writes denied.
    pub(crate) fn test_engines(&self, run: &RunSettings) -> weft_mcp::TestEngines {
        let (adapters, run) = (self.clone(), run.clone());
        Arc::new(move || {
            let store = Arc::new(weft_store::MemoryStore::new());
            adapters.builder(store, &run, false).build()
        })
    }
}
