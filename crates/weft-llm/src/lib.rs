//! # weft-llm
//!
//! Owns the model adapters behind `weft-core`'s `Model` port and the [`Router`] that
//! turns a model id (`provider/model`, or a flow's alias) into one of them. Today it has
//! the deterministic [`scripted`] provider, which makes flows with `llm` blocks run and
//! test offline; the cloud providers and the local GGUF model plug into the same router.
//!
//! Must not depend on the engine or any dialect.

pub mod scripted;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use weft_core::ir::ModelDef;
use weft_core::ports::{Model, ModelResolver};
use weft_core::{BlockError, ErrorKind};

/// Resolves model ids to models. Models built from a flow's alias are cached, so a
/// provider's state (connections, rate limits) is shared by every run in the process.
#[derive(Default)]
pub struct Router {
    cache: Mutex<HashMap<String, Arc<dyn Model>>>,
}

/// Providers this build can reach.
pub const PROVIDERS: &[&str] = &["scripted"];

impl Router {
    /// A router with every provider this build has.
    pub fn new() -> Router {
        Router::default()
    }

    fn build(&self, provider: &str, def: Option<&ModelDef>) -> Result<Arc<dyn Model>, BlockError> {
        match provider {
            "scripted" => {
                let def = def.ok_or_else(|| {
                    BlockError::new(
                        ErrorKind::Config,
                        "a scripted model is defined in the flow's `models` section with its `rules`",
                    )
                })?;
                Ok(Arc::new(scripted::Scripted::from_def(def)?))
            }
            other => Err(BlockError::new(
                ErrorKind::Config,
                format!(
                    "the model provider `{other}` is not available in this build (available: {})",
                    PROVIDERS.join(", ")
                ),
            )),
        }
    }
}

/// Splits `provider/model`; an id without a provider goes to `openai`, as files written
/// for other tools expect.
pub fn split_model_id(id: &str) -> (&str, &str) {
    match id.split_once('/') {
        Some((p, m)) if !p.is_empty() => (p, m),
        _ => ("openai", id),
    }
}

impl ModelResolver for Router {
    fn resolve(
        &self,
        id: &str,
        alias: Option<&ModelDef>,
    ) -> Result<(Arc<dyn Model>, String), BlockError> {
        let (provider, name) = match alias {
            Some(def) => (def.provider.as_str(), def.model.as_deref().unwrap_or(id)),
            None => split_model_id(id),
        };
        let cache_key = match alias {
            Some(def) => format!(
                "{id}\u{0}{}",
                serde_json::to_string(def).unwrap_or_default()
            ),
            None => id.to_owned(),
        };
        let mut cache = self.cache.lock().expect("model cache lock");
        if let Some(m) = cache.get(&cache_key) {
            return Ok((m.clone(), name.to_owned()));
        }
        let model = self.build(provider, alias)?;
        cache.insert(cache_key, model.clone());
        Ok((model, name.to_owned()))
    }
}
