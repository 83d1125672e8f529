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
//! It owns the HTTP surface and that loop only: requests become calls on one [`weft_engine::Engine`]
//! built by the caller (with its models, sandboxes and actions), and every error
//! becomes a JSON problem object. The MCP tools of `weft-mcp` are served at `/mcp`
//! (streamable HTTP) and the page of `weft-web` at `/`, over the same engine, behind the
//! same token (which a browser gives once at `/login` for a session cookie). It must
//! not depend on the command line or on any store, model or sandbox adapter.

mod api;
mod auth;
mod config;
mod events;
mod flows;
mod listing;
mod metrics;
mod problem;
mod runs;
mod slots;
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
    /// Settings stored with each run this server starts (see `RunRecord::settings`).
    pub(crate) run_settings: Option<serde_json::Value>,
    /// The server's own gauges.
    pub(crate) live: Arc<metrics::Live>,
    /// How many new runs may run at once.
    pub(crate) slots: slots::Slots,
}

/// The API's routes over `engine`, with the configuration's token, body limit and run
/// limit.
pub fn router(engine: Engine, config: &ServerConfig) -> Router {
    router_with(engine, config, slots::Slots::new(config.max_runs))
}

fn router_with(engine: Engine, config: &ServerConfig, slots: slots::Slots) -> Router {
    let app = App {
        engine,
        run_settings: config.run_settings.clone(),
        live: Arc::default(),
        slots,
    };
    let mcp = weft_mcp::WeftMcp::new(
        app.engine.clone(),
        weft_mcp::McpOptions {
            allow_approvals: config.allow_mcp_approvals,
            run_settings: config.run_settings.clone(),
            test_engines: config.test_engines.clone(),
        },
    )
    .http_service(config.mcp_hosts());
    let routes = api::routes();
    let document = Arc::new(api::openapi(&routes));
    let api = api::router(routes)
        .route(
            "/v1/openapi.json",
            get(move || async move { axum::Json((*document).clone()) }),
        )
        .with_state(app.clone());
    let page = weft_web::router(app.engine.clone());
    let credentials = auth::Credentials::new(config.token.as_deref());
    let guarded = api
        .merge(page)
        .nest_service("/mcp", mcp)
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            credentials.clone(),
            auth::require_token,
        ));
    let login = Router::new()
        .route("/login", get(auth::login_form).post(auth::login))
        .with_state(credentials);
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .merge(weft_web::assets())
        .merge(login)
        .merge(guarded)
        .layer(axum::extract::DefaultBodyLimit::max(config.max_body_bytes))
}

/// A path nothing serves: the page's HTML answer for a page address, a JSON problem for
/// the API's.
async fn not_found(uri: axum::http::Uri) -> axum::response::Response {
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
    let app_slots = slots::Slots::new(config.max_runs);
    if !engine.continues_on_workers() {
        runs::resume_orphans(&engine, &app_slots).await;
    }
    let app = router_with(engine, &config, app_slots);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(ServerError::Serve)
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
