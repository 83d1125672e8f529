//! Trace and span ids derived from a run's id, so that every process that drives a run
//! (the one that started it, the one that resumed it days later) names the same spans
//! the same way, and a resumed run's trace can link to the first one without storing
//! anything.

use opentelemetry::trace::{SpanId, TraceId};
use sha2::{Digest, Sha256};

fn digest(run_id: &str, part: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(run_id.as_bytes());
    h.update([0]);
    h.update(part.as_bytes());
    h.finalize().into()
}

/// The trace of a run's first execution (`part` = `start`) or of its re-entry at the
/// event `seq` (`part` = that number).
pub(crate) fn trace_id(run_id: &str, part: &str) -> TraceId {
    let d = digest(run_id, part);
    let mut b = [0u8; 16];
    b.copy_from_slice(&d[..16]);
    TraceId::from_bytes(b)
}

/// The span that begins with the run's event `part` (its seq, or `start`).
pub(crate) fn span_id(run_id: &str, part: &str) -> SpanId {
    let d = digest(run_id, part);
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[16..24]);
    // The all-zero id is invalid; a hash that gives it is not worth a second thought,
    // but costs nothing to avoid.
    if b == [0; 8] {
        b[7] = 1;
    }
    SpanId::from_bytes(b)
}
