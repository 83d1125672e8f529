//! # weft-server
//!
//! Weft's HTTP API (`weft serve`): flows in any dialect are checked, stored and drawn;
//! runs are started from a stored flow or a flow's text, read, answered, cancelled, and
//! followed as Server-Sent Events read from the run's
//! stored event log, so a client that reconnects (after a minute or a restart) gets
//! every event it missed. The routes and their JSON are documented in `docs/server.md`.
//!
//! It also owns the worker loop ([`work`]) that `weft worker` and `weft serve --role
//! worker|all` run over a store many processes share: claim runs that wait, drive them
//! with the engine, wait for a notification or a poll.
//!
//! Beside its own `/v1` API it speaks two other systems' APIs over the same runs:
//! AgentFlow's `/api/*` (`docs/agentflow-api.md`) and LangGraph's Agent Server API
//! (`/threads`, `/runs`, `/assistants`: `docs/langgraph-api.md`), whose threads live in
//! the store's [`weft_core::ports::ThreadStore`].
//!
//! It owns the HTTP surface and that loop only: requests become calls on one [`weft_engine::Engine`]
//! built by the caller (with its models, sandboxes and actions), and every error
//! becomes a JSON problem object (the other systems' doors answer in their shapes). The MCP tools of `weft-mcp` are served at `/mcp`
//! (streamable HTTP) and the page of `weft-web` at `/`, over the same engine, behind the
//! same token (which a browser gives once at `/login` for a session cookie). It must
//! not depend on the command line or on any store, model or sandbox adapter.

mod access;
mod agentflow;
mod api;
mod audit;
mod audit_api;
mod auth;
mod config;
mod events;
mod flows;
mod hooks;
pub mod keys;
mod keys_api;
mod langgraph;
mod listing;
mod metrics;
mod problem;
mod runs;
mod schedules;
mod worker;

pub use config::{ConfigError, ServerConfig};
pub use problem::Problem;
pub use worker::{WorkerConfig, work};

use axum::Router;
use axum::routing::get;
use std::sync::Arc;
use weft_engine::Engine;

/// What every request handler shares.
#[derive(Clone)]
pub(crate) struct App {
    pub(crate) engine: Engine,
    /// Checks flows and starts runs (within the server's run limit, with its settings).
    pub(crate) service: weft_service::Service,
    /// The server's own gauges.
    pub(crate) live: Arc<metrics::Live>,
    /// Starts the runs of schedules and webhooks.
    pub(crate) launcher: weft_triggers::Launcher,
    /// What this process's triggers did.
    pub(crate) counters: Arc<weft_triggers::Counters>,
    /// The store's API keys, as this server read them last.
    pub(crate) keys: Arc<keys::KeyCache>,
}

impl App {
    /// The store's schedules, webhooks and timers.
    pub(crate) fn triggers(&self) -> Result<&dyn weft_core::ports::TriggerStore, Problem> {
        self.engine.store().triggers().ok_or_else(|| {
            Problem::new(axum::http::StatusCode::NOT_IMPLEMENTED, "not supported")
                .detail("this server's store keeps no schedules or webhooks")
        })
    }
}

/// The service of a server over `engine`: its run settings and run limit.
fn service(engine: &Engine, config: &ServerConfig) -> weft_service::Service {
    weft_service::Service::new(engine.clone(), config.run_settings.clone())
        .with_run_limit(config.max_runs)
}

/// Every access rule of every door: `(method, path template, scope)`, the scope
/// `None` for a route any caller the server let in may call. Routes no rule names are
/// refused; docs/security.md is this table.
pub fn access_rules() -> Vec<(String, String, Option<&'static str>)> {
    access::Rules::new(api::rules(&api::routes())).listed()
}

/// The API's routes over `engine`, with the configuration's token, body limit and run
/// limit.
pub fn router(engine: Engine, config: &ServerConfig) -> Router {
    router_with(service(&engine, config), config, Arc::default())
}

fn router_with(
    service: weft_service::Service,
    config: &ServerConfig,
    counters: Arc<weft_triggers::Counters>,
) -> Router {
    let key_cache = Arc::new(keys::KeyCache::new(service.store().clone()));
    let app = App {
        launcher: weft_triggers::Launcher::new(service.clone()),
        engine: service.engine().clone(),
        service,
        live: Arc::default(),
        counters,
        keys: key_cache.clone(),
    };
    let mcp = weft_mcp::WeftMcp::new(
        app.service.clone(),
        weft_mcp::McpOptions {
            allow_approvals: config.allow_mcp_approvals,
            test_engines: config.test_engines.clone(),
        },
    )
    .http_service(config.mcp_hosts());
    let routes = api::routes();
    let public = api::public_routes();
    let document = Arc::new(api::openapi(&routes, &public));
    let auditor = audit::Auditor::new(app.engine.store().clone());
    let guard = Arc::new(access::Guard {
        rules: access::Rules::new(api::rules(&routes)),
        audit: auditor.clone(),
    });
    let public = api::router(public).with_state(app.clone());
    let api = api::router(routes)
        .route(
            "/v1/openapi.json",
            get(move || async move { axum::Json((*document).clone()) }),
        )
        .with_state(app.clone());
    let page = weft_web::router(app.engine.clone());
    let gate = Arc::new(auth::Gate {
        token: auth::Credentials::new(config.token.as_deref()),
        keys: key_cache,
        audit: auditor,
    });
    // Every door's routes: who is calling (the token, a key) first, then whether the
    // route's rule lets them.
    let guarded = api
        .merge(agentflow::router(app.clone()))
        .merge(langgraph::router(app.clone()))
        .merge(page)
        .nest_service("/mcp", mcp)
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(guard, access::check))
        .layer(axum::middleware::from_fn_with_state(
            gate.clone(),
            auth::authenticate,
        ));
    let login = Router::new()
        .route("/login", get(auth::login_form).post(auth::login))
        .with_state(gate);
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .merge(public)
        .merge(weft_web::assets())
        .merge(login)
        .merge(guarded)
        .layer(axum::extract::DefaultBodyLimit::max(config.max_body_bytes));
    match cors(&config.allowed_origins) {
        // Outermost, so that a browser's preflight is answered before the token is asked.
        Some(cors) => app.layer(cors),
        None => app,
    }
}

/// CORS for pages from `origins` (none: no CORS headers): they may send the token
/// (`Authorization`, LangGraph's `x-api-key`) and `Last-Event-ID`, and read where a new
/// run is and where its stream is (`Content-Location`, `Location`).
fn cors(origins: &[String]) -> Option<tower_http::cors::CorsLayer> {
    use axum::http::{HeaderName, HeaderValue, Method, header};
    use tower_http::cors::{AllowOrigin, CorsLayer};
    if origins.is_empty() {
        return None;
    }
    let allowed = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()))
    };
    let headers = [
        header::AUTHORIZATION,
        header::CONTENT_TYPE,
        header::ACCEPT,
        header::CACHE_CONTROL,
        HeaderName::from_static("x-api-key"),
        HeaderName::from_static("last-event-id"),
        HeaderName::from_static("idempotency-key"),
    ];
    let methods = [Method::GET, Method::POST, Method::PATCH, Method::DELETE];
    Some(
        CorsLayer::new()
            .allow_origin(allowed)
            .allow_methods(methods)
            .allow_headers(headers)
            .expose_headers([header::CONTENT_LOCATION, header::LOCATION])
            .max_age(std::time::Duration::from_secs(600)),
    )
}

/// A path nothing serves: the page's HTML answer for a page address, a JSON problem for
/// the API's.
pub(crate) async fn not_found(uri: axum::http::Uri) -> axum::response::Response {
    use axum::response::IntoResponse;
    if weft_web::is_page_path(uri.path()) {
        weft_web::not_found()
    } else {
        problem::not_found().await.into_response()
    }
}

/// Checks `config` and binds its address (port 0 picks a free one: read it from the
/// listener).
pub async fn bind(config: &ServerConfig) -> Result<tokio::net::TcpListener, ServerError> {
    config.check()?;
    tokio::net::TcpListener::bind(config.addr)
        .await
        .map_err(|e| ServerError::Bind(config.addr, e))
}

/// Serves the API on `listener` until `shutdown` completes. Runs that were running
/// when a previous server on the same store died are resumed first (unless workers
/// drive the runs: they take them over).
pub async fn serve(
    listener: tokio::net::TcpListener,
    engine: Engine,
    config: ServerConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let service = service(&engine, &config);
    if !engine.continues_on_workers() {
        runs::resume_orphans(&service).await;
    }
    let counters = Arc::<weft_triggers::Counters>::default();
    let (stop, stopped) = tokio::sync::watch::channel(());
    serve_triggers(
        weft_triggers::Launcher::new(service.clone()),
        counters.clone(),
        stopped,
    );
    let app = router_with(service, &config, counters);
    let shutdown = async move {
        shutdown.await;
        drop(stop);
    };
    // The route table is built once here: serving the router itself rebuilds it for
    // every connection (axum's `Service<IncomingStream>`), and each idle connection, an
    // SSE follower's among them, held its own copy of every door's routes
    // (docs/performance.md).
    axum::serve(listener, app.into_make_service())
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(ServerError::Serve)
}

/// Runs the schedule loop and the timer loop of `launcher`'s engine on their own tasks
/// until `stopped`'s sender is dropped. Every server and worker on a store runs them:
/// the store lets one process record each firing and wake each run.
pub fn serve_triggers(
    launcher: weft_triggers::Launcher,
    counters: Arc<weft_triggers::Counters>,
    stopped: tokio::sync::watch::Receiver<()>,
) {
    let until = |mut rx: tokio::sync::watch::Receiver<()>| async move {
        let _ = rx.changed().await;
    };
    let engine = launcher.engine().clone();
    tokio::spawn(weft_triggers::serve_timers(
        engine,
        counters.clone(),
        until(stopped.clone()),
    ));
    tokio::spawn(weft_triggers::run_schedules(
        launcher,
        counters,
        until(stopped),
    ));
}

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The configuration is unsafe or incomplete.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The address could not be bound.
    #[error("cannot listen on {0}: {1}")]
    Bind(std::net::SocketAddr, std::io::Error),
    /// Serving failed.
    #[error("the server stopped: {0}")]
    Serve(std::io::Error),
}
