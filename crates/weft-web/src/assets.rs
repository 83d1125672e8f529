//! The stylesheet and script, compiled in and served with a content hash in their
//! address, so a browser caches each version for good and never runs a stale one.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use std::sync::LazyLock;

struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const ASSETS: [Asset; 2] = [
    Asset {
        name: "weft.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../assets/weft.css"),
    },
    Asset {
        name: "weft.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../assets/weft.js"),
    },
];

/// Each asset's version: the start of its content's SHA-256.
static VERSIONS: LazyLock<Vec<String>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|a| hex::encode(&Sha256::digest(a.body.as_bytes())[..6]))
        .collect()
});

/// The address of asset `name`, versioned by its content.
pub(crate) fn url(name: &str) -> String {
    let i = ASSETS.iter().position(|a| a.name == name).unwrap_or(0);
    format!("/assets/{name}?v={}", VERSIONS[i])
}

pub(crate) async fn serve(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|a| a.name == file) {
        Some(a) => (
            [
                (header::CONTENT_TYPE, a.content_type),
                (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            a.body,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
}
