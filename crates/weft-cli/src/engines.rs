//! The engines a command builds: every one shares this process's model providers,
//! sandboxes and secrets; they differ in their store, their sinks, and whether their
//! actions may write (a test run's may not).

use crate::commands::Failure;
use crate::run_settings::RunSettings;
use crate::settings::Settings;
use std::sync::Arc;
use weft_core::ports::{ModelResolver, Store};
use weft_engine::{Engine, EngineBuilder};

/// What every engine of this process shares.
#[derive(Clone)]
pub(crate) struct Adapters {
    models: Arc<dyn ModelResolver>,
    code: Arc<weft_code::Sandboxes>,
    secrets: serde_json::Value,
    telemetry: Option<Arc<weft_otel::Telemetry>>,
    net: Arc<weft_net::NetPolicy>,
}

impl Adapters {
    /// The model providers (and the local model), the sandbox pool and the secrets
    /// `settings` name.
    pub(crate) fn new(settings: &Settings) -> Result<Adapters, Failure> {
        let me = settings.program.clone().ok_or_else(|| {
            Failure::invalid("error: cannot find the weft binary for worker processes")
        })?;
        let router = weft_llm::Router::from_env(settings.model_env())
            .map_err(|e| Failure::invalid(format!("error: {e}")))?
            .with_net_policy(settings.net.clone());
        #[cfg(feature = "local")]
        let router = router.with_provider(
            LOCAL_PROVIDER,
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
            telemetry: settings.telemetry.clone(),
            net: settings.net.clone(),
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
            .code_runner(Arc::new(
                self.code
                    .with_files(weft_code::FileAccess::new(run.files.clone(), writes)),
            ))
            .secrets(self.secrets.clone());
        let actions = if writes {
            weft_actions::builtins(run.files.clone(), self.net.clone())
        } else {
            weft_actions::without_writes(run.files.clone(), self.net.clone())
        };
        for (name, action) in actions {
            b = b.action(name, action);
        }
        if let Some(t) = &self.telemetry {
            b = b.sink(t.sink());
            if t.config().capture_content {
                b = b.capture_model_content(t.config().content_chars);
            }
        }
        match &run.model {
            Some(m) => b.default_model(m.clone()),
            // Without --model or $WEFT_MODEL, blocks that name no model use the local
            // one, and the run says so: its answers are slow and small.
            #[cfg(feature = "local")]
            None => b.fallback_model(crate::local::DEFAULT_LOCAL_MODEL, NO_MODEL_ADVICE),
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

/// What a run that names no model, and has none from `--model` or `$WEFT_MODEL`, is told.
const NO_MODEL_ADVICE: &str = "set --model or WEFT_MODEL";

/// The warning `weft validate` gives a block that names no model when no default is set.
pub(crate) fn no_model_warning() -> String {
    #[cfg(feature = "local")]
    return format!(
        "no model: using {}; {NO_MODEL_ADVICE}",
        crate::local::DEFAULT_LOCAL_MODEL
    );
    #[cfg(not(feature = "local"))]
    return format!("no model: the run fails at this block; {NO_MODEL_ADVICE}");
}

/// The provider of the offline models (`local/<name>`).
#[cfg(feature = "local")]
const LOCAL_PROVIDER: &str = "local";

/// The model providers this build adds to those `weft_llm` reaches.
#[cfg(feature = "local")]
const EXTRA_PROVIDERS: &[&str] = &[LOCAL_PROVIDER];
#[cfg(not(feature = "local"))]
const EXTRA_PROVIDERS: &[&str] = &[];

/// An error for each model of `flow` whose provider this build cannot reach.
pub(crate) fn unknown_providers(flow: &weft_core::ir::Flow) -> Vec<weft_core::Diagnostic> {
    weft_llm::unknown_providers(flow, EXTRA_PROVIDERS)
}
