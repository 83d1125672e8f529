//! # weft-llm
//!
//! Owns the model adapters behind `weft-core`'s `Model` port and the [`Router`] that
//! turns a model id (`provider/model`, or a flow's alias) into one of them: the cloud
//! and server providers ([`remote`], through `genai`), the deterministic [`scripted`]
//! provider, and record/replay [`cassette`]s around any of them. It also owns what is
//! shared by every call in the process: connection pools, the per-model concurrency and
//! rate limits ([`limits`]) and the price table ([`prices`]).
//!
//! Must not depend on the engine or any dialect.

pub mod cassette;
mod check;
mod errors;
pub mod limits;
mod ollama_wire;
mod openai_wire;
pub mod prices;
pub mod providers;
pub mod remote;
pub mod scripted;
mod wire;

pub use check::unknown_providers;

use cassette::{Cassette, CassetteMode, Taped};
use limits::Limiter;
use prices::{Price, PriceTable};
use providers::Provider;
use remote::{Remote, RemoteSettings};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use weft_core::ir::ModelDef;
use weft_core::ports::{Model, ModelResolver};
use weft_core::{BlockError, ErrorKind};

/// Reads a configuration variable (the process environment, or a test's map).
pub type Env = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Builds a model of a provider this crate does not own (the local GGUF model lives in
/// its own crate, so only builds that want it pay for llama.cpp): from the model name
/// after `provider/` and the flow's definition, if any.
pub type ProviderFactory =
    Arc<dyn Fn(&str, Option<&ModelDef>) -> Result<Arc<dyn Model>, BlockError> + Send + Sync>;

/// Resolves model ids to models. Models are cached by id and definition, and limits by
/// provider, endpoint and model, so a provider's state (connections, rate limits) is
/// shared by every run in the process.
pub struct Router {
    cache: Mutex<HashMap<String, Arc<dyn Model>>>,
    limiters: Mutex<HashMap<String, Arc<Limiter>>>,
    client: OnceLock<genai::Client>,
    http: OnceLock<reqwest::Client>,
    prices: PriceTable,
    cassette: Option<Arc<Cassette>>,
    env: Env,
    extra: HashMap<String, ProviderFactory>,
    net: Arc<weft_net::NetPolicy>,
}

/// Variables a flow's `api_key_env` may not name: Weft's own configuration (its token,
/// database, keys; a flow reads its secrets as `secrets.NAME`) and PostgreSQL's
/// connection settings. The key a flow names is sent to the base URL it names.
fn is_weft_s_own_variable(name: &str) -> bool {
    (name.starts_with("WEFT_") && !name.starts_with("WEFT_SECRET_"))
        || name.starts_with("PG")
        || name == "DATABASE_URL"
}

/// Providers this build can reach.
pub const PROVIDERS: &[&str] = &["openai", "anthropic", "gemini", "ollama", "scripted"];

/// Options a remote model's definition may set (besides `provider` and `model`).
const REMOTE_OPTIONS: &[&str] = &[
    "base_url",
    "api_key_env",
    "timeout_ms",
    "max_retries",
    "max_concurrency",
    "requests_per_minute",
    "stream",
    "price",
];

/// Default per-attempt timeout of a remote call.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// Default retries after the first attempt.
const DEFAULT_RETRIES: u32 = 2;
/// Default cap on concurrent calls per provider and model.
const DEFAULT_CONCURRENCY: usize = 1024;

impl Default for Router {
    fn default() -> Self {
        Router::new()
    }
}

/// The HTTP client in `cell`, built by `build` the first time; one that cannot be built
/// (no TLS roots, say) is a config error.
fn built_once<T: Clone, E: std::fmt::Display>(
    cell: &OnceLock<T>,
    build: impl FnOnce() -> Result<T, E>,
) -> Result<T, BlockError> {
    if let Some(c) = cell.get() {
        return Ok(c.clone());
    }
    let built = build().map_err(|e| {
        BlockError::new(
            ErrorKind::Config,
            format!("cannot set up the HTTP client: {e}"),
        )
    })?;
    Ok(cell.get_or_init(|| built).clone())
}

impl Router {
    /// A router reading the process environment, with the shipped price table.
    pub fn new() -> Router {
        Router {
            cache: Mutex::default(),
            limiters: Mutex::default(),
            client: OnceLock::new(),
            http: OnceLock::new(),
            prices: PriceTable::shipped(),
            cassette: None,
            env: Arc::new(|k| std::env::var(k).ok()),
            extra: HashMap::new(),
            net: Arc::new(weft_net::NetPolicy::open()),
        }
    }

    /// Sends every remote model call where `net` lets it go (the endpoint is checked
    /// when the model is resolved, each connection and redirect when it is made).
    pub fn with_net_policy(mut self, net: Arc<weft_net::NetPolicy>) -> Router {
        self.net = net;
        self
    }

    /// Adds the provider `name`, built by `factory`.
    pub fn with_provider(mut self, name: &str, factory: ProviderFactory) -> Router {
        self.extra.insert(name.to_owned(), factory);
        self
    }

    /// Reads configuration from `env` instead of the process environment.
    pub fn with_env(mut self, env: Env) -> Router {
        self.env = env;
        self
    }

    /// Prices calls with `prices`.
    pub fn with_prices(mut self, prices: PriceTable) -> Router {
        self.prices = prices;
        self
    }

    /// Sends every model call through `cassette`.
    pub fn with_cassette(mut self, cassette: Arc<Cassette>) -> Router {
        self.cassette = Some(cassette);
        self
    }

    /// The router the command line uses: keys and endpoints from `env`, plus
    /// `WEFT_PRICES` (a JSON price table merged over the shipped one) and
    /// `WEFT_CASSETTE` / `WEFT_CASSETTE_MODE` from it.
    pub fn from_env(env: Env) -> Result<Router, String> {
        let mut router = Router::new().with_env(env.clone());
        if let Some(path) = env("WEFT_PRICES") {
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("WEFT_PRICES={path}: {e}"))?;
            router
                .prices
                .extend_from_json(&text)
                .map_err(|e| format!("WEFT_PRICES={path}: {e}"))?;
        }
        if let Some(path) = env("WEFT_CASSETTE") {
            let mode = match env("WEFT_CASSETTE_MODE") {
                Some(m) => CassetteMode::parse(&m)?,
                None => CassetteMode::Replay,
            };
            router = router.with_cassette(Cassette::open(std::path::Path::new(&path), mode)?);
        }
        Ok(router)
    }

    /// The genai client every remote model shares, over the same HTTP client as
    /// [`Router::http`] (one connection pool, one network policy).
    fn client(&self) -> Result<genai::Client, BlockError> {
        let http = self.http()?;
        built_once(&self.client, || {
            genai::Client::builder().with_reqwest(http).build()
        })
    }

    /// The plain HTTP client of Weft's own OpenAI and Ollama clients ([`openai_wire`],
    /// [`ollama_wire`]), and under genai's: built with the network policy.
    fn http(&self) -> Result<reqwest::Client, BlockError> {
        built_once(&self.http, || {
            self.net
                .client()
                .connect_timeout(Duration::from_secs(10))
                .build()
        })
    }

    fn limiter(&self, key: String, def: Option<&ModelDef>) -> Result<Arc<Limiter>, BlockError> {
        let mut limiters = self.limiters.lock().expect("limiter lock");
        if let Some(l) = limiters.get(&key) {
            return Ok(l.clone());
        }
        let concurrency =
            option_u64(def, "max_concurrency")?.map_or(DEFAULT_CONCURRENCY, |n| n as usize);
        let rate = match def.and_then(|d| d.options.get("requests_per_minute")) {
            None => None,
            Some(v) => Some(
                v.as_f64()
                    .filter(|r| *r > 0.0)
                    .ok_or_else(|| option_error("requests_per_minute", "a positive number"))?,
            ),
        };
        let l = Arc::new(Limiter::new(Some(concurrency), rate));
        limiters.insert(key, l.clone());
        Ok(l)
    }

    fn remote(
        &self,
        provider: Provider,
        model: &str,
        def: Option<&ModelDef>,
    ) -> Result<Arc<dyn Model>, BlockError> {
        if let Some(def) = def {
            for key in def.options.keys() {
                if !REMOTE_OPTIONS.contains(&key.as_str()) {
                    let mut e = BlockError::new(
                        ErrorKind::Config,
                        format!("a {} model has no option `{key}`", provider.name()),
                    );
                    if let Some(m) =
                        weft_core::error::did_you_mean(key, REMOTE_OPTIONS.iter().copied())
                    {
                        e.message.push_str(&format!(" (did you mean `{m}`?)"));
                    }
                    return Err(e);
                }
            }
        }
        let text = |name: &str| {
            def.and_then(|d| d.options.get(name))
                .and_then(Value::as_str)
        };
        let endpoint = provider.endpoint(text("base_url"), &*self.env)?;
        if let Ok(url) = reqwest::Url::parse(&endpoint) {
            self.net.check_url(&url).map_err(|d| {
                BlockError::new(
                    ErrorKind::Config,
                    format!("the {} endpoint {endpoint}: {d}", provider.name()),
                )
            })?;
        }
        if let Some(own) = text("api_key_env").filter(|v| is_weft_s_own_variable(v)) {
            return Err(BlockError::new(
                ErrorKind::Config,
                format!(
                    "api_key_env may not name `{own}`: it holds Weft's own configuration, not a provider's key (a flow reads its secrets as `secrets.NAME`, from WEFT_SECRET_NAME)"
                ),
            ));
        }
        let key_variable = text("api_key_env").or(provider.key_variable());
        let api_key = key_variable
            .and_then(|v| (self.env)(v))
            .filter(|k| !k.is_empty());
        if let (None, Some(variable)) = (&api_key, key_variable) {
            return Err(BlockError::new(
                ErrorKind::Auth,
                format!(
                    "`{}/{model}` needs an API key: set {variable} (or run offline with a `local/` model or a cassette)",
                    provider.name()
                ),
            ));
        }
        let price = match def.and_then(|d| d.options.get("price")) {
            Some(v) => Some(serde_json::from_value::<Price>(v.clone()).map_err(|e| {
                option_error(
                    "price",
                    &format!("{{input, output}} in USD per million tokens ({e})"),
                )
            })?),
            None => self.prices.lookup(&format!("{}/{model}", provider.name())),
        };
        let settings = RemoteSettings {
            provider,
            endpoint: endpoint.clone(),
            api_key,
            timeout: option_u64(def, "timeout_ms")?.map_or(DEFAULT_TIMEOUT, Duration::from_millis),
            max_retries: option_u64(def, "max_retries")?
                .map_or(DEFAULT_RETRIES, |n| n.min(10) as u32),
            stream: match def.and_then(|d| d.options.get("stream")) {
                None => true,
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err(option_error("stream", "true or false")),
            },
            price,
        };
        let limiter = self.limiter(
            format!("{}\u{0}{endpoint}\u{0}{model}", provider.name()),
            def,
        )?;
        Ok(Arc::new(Remote::new(
            self.client()?,
            self.http()?,
            settings,
            limiter,
        )))
    }

    fn build(
        &self,
        provider: &str,
        model: &str,
        def: Option<&ModelDef>,
    ) -> Result<Arc<dyn Model>, BlockError> {
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
            other if self.extra.contains_key(other) => (self.extra[other])(model, def),
            other => match Provider::parse(other) {
                Some(p) => self.remote(p, model, def),
                None => {
                    let mut available: Vec<&str> = PROVIDERS.to_vec();
                    available.extend(self.extra.keys().map(String::as_str));
                    Err(BlockError::new(
                        ErrorKind::Config,
                        format!(
                            "the model provider `{other}` is not available in this build (available: {})",
                            available.join(", ")
                        ),
                    ))
                }
            },
        }
    }
}

fn option_error(name: &str, expected: &str) -> BlockError {
    BlockError::new(
        ErrorKind::Config,
        format!("the model option `{name}` must be {expected}"),
    )
}

fn option_u64(def: Option<&ModelDef>, name: &str) -> Result<Option<u64>, BlockError> {
    match def.and_then(|d| d.options.get(name)) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| option_error(name, "a whole number")),
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
    fn check(&self, flow: &weft_core::ir::Flow) -> Vec<weft_core::Diagnostic> {
        let extra: Vec<&str> = self.extra.keys().map(String::as_str).collect();
        unknown_providers(flow, &extra)
    }

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
        if let Some(m) = self.cache.lock().expect("model cache lock").get(&cache_key) {
            return Ok((m.clone(), name.to_owned()));
        }
        let model: Arc<dyn Model> = match &self.cassette {
            // Scripted and local models are already offline.
            Some(cassette) if provider != "scripted" && !self.extra.contains_key(provider) => {
                Arc::new(Taped {
                    inner: match cassette.mode() {
                        CassetteMode::Replay => None,
                        CassetteMode::Record => Some(self.build(provider, name, alias)?),
                    },
                    id: format!("{provider}/{name}"),
                    cassette: cassette.clone(),
                })
            }
            _ => self.build(provider, name, alias)?,
        };
        self.cache
            .lock()
            .expect("model cache lock")
            .insert(cache_key, model.clone());
        Ok((model, name.to_owned()))
    }
}
