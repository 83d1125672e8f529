//! Content hashes: a run is a flow (by content hash) plus an input.

use sha2::{Digest, Sha256};

/// Hex SHA-256 of `bytes`, used to identify a flow's exact content.
pub fn content_hash(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The idempotency key of one attempt of an effectful step: 32 hex characters derived
/// from the run id, the step key, how many times the run was retried, and the attempts
/// of the step and its enclosing blocks (`attempts`, empty for every first attempt).
///
/// The same attempt gets the same key in every process, so an effect repeated by a
/// resume after a crash reaches its service with the key it had; a retry (of the step,
/// an enclosing block or the whole run) is a new request with a new key.
pub fn idempotency_key(run_id: &str, step_key: &str, retries: u32, attempts: &str) -> String {
    let mut h = Sha256::new();
    for part in [run_id, step_key, &retries.to_string(), attempts] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    hex::encode(&h.finalize()[..16])
}
