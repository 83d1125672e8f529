//! Content hashes: a run is a flow (by content hash) plus an input.

use sha2::{Digest, Sha256};

/// Hex SHA-256 of `bytes`, used to identify a flow's exact content.
pub fn content_hash(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}
