//! # weft-web
//!
//! The page `weft serve` shows at `/`: the runs, each run drawn as its flow's graph with
//! every block coloured by where it stands, its steps on a timeline with their input,
//! output, error, model, tokens and cost, the approvals waiting across runs, a form to
//! start a run, and a retry that says beforehand what will run again.
//!
//! Pages are HTML rendered here (maud) from the engine's store, readable without
//! JavaScript; one small hand-written script (`assets/weft.js`) follows a run's events
//! through the API's Server-Sent Events, swaps in freshly rendered parts, and sends the
//! page's actions (start, approve, retry, cancel) to the JSON API as any client does.
//! The stylesheet and script are compiled into the binary: the page works offline and
//! from the same origin as the API, so no CORS or private-network rule stands between
//! the browser and a server on localhost.
//!
//! It owns the page only. Every change goes through the HTTP API of `weft-server`,
//! which mounts [`router`] behind the same authentication. It must not depend on
//! `weft-server`, the command line or any adapter, nor hold code for any one dialect (stored flows are read through `weft-dialects`).

mod approvals;
mod assets;
mod flows;
mod format;
mod graph;
mod layout;
mod login;
mod run;
mod runs;
mod schedules;
mod step;

use axum::Router;
use axum::routing::get;
use weft_engine::Engine;

/// The page's routes: `/` (runs), `/runs/{id}`, `/approvals`, `/flows`, `/schedules`
/// and `/new`.
pub fn router(engine: Engine) -> Router {
    Router::new()
        .route("/", get(runs::page))
        .route("/runs/{id}", get(run::page))
        .route("/approvals", get(approvals::page))
        .route("/flows", get(flows::list))
        .route("/schedules", get(schedules::page))
        .route("/new", get(flows::start))
        .with_state(engine)
}

/// `/assets/{file}`: the stylesheet and script, which hold nothing private, so that
/// the sign-in page is styled before anyone has signed in.
pub fn assets() -> Router {
    Router::new().route("/assets/{file}", get(assets::serve))
}

/// Whether a request path is one of the page's (rather than the API's): the server
/// answers unknown page paths with an HTML page and unknown API paths with JSON.
pub fn is_page_path(path: &str) -> bool {
    !(path.starts_with("/v1/") || path.starts_with("/mcp") || path == "/metrics")
}

pub use layout::not_found;
pub use login::login;
