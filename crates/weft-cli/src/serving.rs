//! The long-lived commands: `weft serve` (the HTTP API, a worker, or both), `weft
//! worker` and `weft mcp`.

use crate::cli::{DbArgs, Role};
use crate::commands::{Failure, serving_engine};
use crate::database;
use crate::exit;
use crate::run_settings::RunSettings;
use crate::settings::Settings;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use weft_core::ports::WorkQueue;
use weft_engine::Engine;

/// Why `--role api|worker` and `weft worker` refuse a SQLite file.
const SHARED_ONLY: &str = "error: workers and API-only servers share a PostgreSQL database (--db postgres://USER@HOST/DB or WEFT_DB); with a SQLite file, one `weft serve` does both (docs/scaling.md)";

/// How `weft serve` was asked to serve.
pub(crate) struct Serving {
    pub(crate) addr: std::net::SocketAddr,
    pub(crate) token_file: Option<PathBuf>,
    pub(crate) max_runs: Option<usize>,
    pub(crate) allow_mcp_approvals: bool,
    /// Open the page in a browser once listening.
    pub(crate) open: bool,
    /// Which part of the work this process does.
    pub(crate) role: Role,
    /// Flow files stored as named flows before serving.
    pub(crate) flows: Vec<PathBuf>,
    /// Browser origins allowed to call the API.
    pub(crate) allowed_origins: Vec<String>,
    /// How this process's worker takes runs, when it has one.
    pub(crate) working: Working,
}

/// How a worker process takes runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Working {
    /// Runs driven at once.
    pub(crate) concurrency: usize,
    /// How long a lease on a run lasts unrenewed.
    pub(crate) lease: Duration,
}

impl From<&crate::cli::WorkerArgs> for Working {
    fn from(args: &crate::cli::WorkerArgs) -> Working {
        Working {
            concurrency: args.concurrency as usize,
            lease: args.lease,
        }
    }
}

/// `weft serve`: the HTTP API over the same engine `weft run` builds, until Ctrl-C; on
/// a shared database, as the role says: the API, a worker, or both.
pub(crate) async fn serve(
    serving: Serving,
    db: &DbArgs,
    run: &RunSettings,
    settings: &Settings,
) -> Result<u8, Failure> {
    let addr = serving.addr;
    let token = match serving.token_file.as_deref() {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .map_err(|e| {
                    Failure::invalid(format!(
                        "error: cannot read the token file {}: {e}",
                        path.display()
                    ))
                })?
                .trim()
                .to_owned(),
        ),
        None => settings.token.clone(),
    };
    let opened = database::open(db, settings, serving.working.lease).await?;
    let shared = opened.queue.is_some();
    let queue = match (serving.role, opened.queue) {
        (Role::All, queue) => queue,
        (_, None) => return Err(Failure::invalid(SHARED_ONLY)),
        (Role::Worker, Some(queue)) => {
            let adapters = crate::engines::Adapters::new(settings)?;
            let engine = serving_engine(opened.store, &adapters, run, false);
            return work(engine, queue, serving.working, Some(run.to_value())).await;
        }
        (Role::Api, Some(_)) => None,
    };
    let adapters = crate::engines::Adapters::new(settings)?;
    // On a shared database the workers drive every run, this process's own worker
    // loop (`--role all`) among them.
    let engine = serving_engine(opened.store, &adapters, run, shared);
    for path in &serving.flows {
        crate::triggers::store_flow_file(&engine, path).await?;
    }
    let config = weft_server::ServerConfig {
        token,
        run_settings: Some(run.to_value()),
        max_runs: serving.max_runs,
        allow_mcp_approvals: serving.allow_mcp_approvals,
        test_engines: Some(adapters.test_engines(run)),
        allowed_origins: serving.allowed_origins.clone(),
        ..weft_server::ServerConfig::new(addr)
    };
    if let Some(queue) = queue {
        // `--role all` on a shared database: this process is one of the workers too.
        // Its server fires the schedules and timers, for both.
        let (engine, working) = (engine.clone(), serving.working);
        tokio::spawn(async move { work(engine, queue, working, None).await });
    }
    let fail = |e: weft_server::ServerError| Failure::invalid(format!("error: {e}"));
    let listener = weft_server::bind(&config).await.map_err(fail)?;
    let bound = listener.local_addr().unwrap_or(addr);
    let page = page_url(bound, config.token.is_some());
    eprintln!(
        "weft serve: listening on http://{bound} (the page: {page}; the API: docs/server.md)"
    );
    if serving.open
        && let Err(e) = open::that_detached(&page)
    {
        eprintln!("weft serve: cannot open a browser ({e}); open {page}");
    }
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    weft_server::serve(listener, engine, config, shutdown)
        .await
        .map_err(fail)?;
    Ok(exit::OK)
}

/// Where a person opens the page of a server bound to `bound`: a wildcard address is
/// reached through loopback, and a server with a token starts at its sign-in form.
fn page_url(bound: std::net::SocketAddr, token: bool) -> String {
    let ip = match bound.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    let path = if token { "/login" } else { "/" };
    format!(
        "http://{}{path}",
        std::net::SocketAddr::new(ip, bound.port())
    )
}

/// `weft mcp`: the MCP tools on stdin/stdout over the engine `weft run` builds, until
/// the client disconnects.
pub(crate) async fn mcp(
    allow_approvals: bool,
    db: &DbArgs,
    run: &RunSettings,
    settings: &Settings,
) -> Result<u8, Failure> {
    let store = database::open(db, settings, weft_store::DEFAULT_LEASE)
        .await?
        .store;
    let adapters = crate::engines::Adapters::new(settings)?;
    // The stdio server drives its runs itself, on any database: it is one client's
    // process, and workers need not run beside it.
    let engine = serving_engine(store, &adapters, run, false);
    let options = weft_mcp::McpOptions {
        allow_approvals,
        test_engines: Some(adapters.test_engines(run)),
    };
    let service = weft_service::Service::new(engine, Some(run.to_value()));
    weft_mcp::WeftMcp::new(service, options)
        .serve_stdio()
        .await
        .map_err(|e| Failure::invalid(format!("error: {e}")))?;
    Ok(exit::OK)
}

/// `weft worker`: drives the runs of a shared database until Ctrl-C.
pub(crate) async fn worker(
    working: Working,
    db: &DbArgs,
    run: &RunSettings,
    settings: &Settings,
) -> Result<u8, Failure> {
    let opened = database::open(db, settings, working.lease).await?;
    let Some(queue) = opened.queue else {
        return Err(Failure::invalid(SHARED_ONLY));
    };
    let adapters = crate::engines::Adapters::new(settings)?;
    let engine = serving_engine(opened.store, &adapters, run, false);
    work(engine, queue, working, Some(run.to_value())).await
}

/// The worker loop of this process, until Ctrl-C. The runs it drives then are taken
/// over by other workers once their leases lapse. With `run_settings`, it also fires
/// schedules and wakes timers (no server in this process does).
async fn work(
    engine: Engine,
    queue: Arc<dyn WorkQueue>,
    working: Working,
    run_settings: Option<serde_json::Value>,
) -> Result<u8, Failure> {
    eprintln!(
        "weft worker: {} taking up to {} runs at once (leases of {})",
        engine.owner_name(),
        working.concurrency,
        humantime::format_duration(working.lease)
    );
    let config = weft_server::WorkerConfig {
        concurrency: working.concurrency,
        triggers: run_settings.is_some(),
        run_settings,
        ..weft_server::WorkerConfig::default()
    };
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    weft_server::work(engine, queue, config, shutdown).await;
    Ok(exit::OK)
}
