//! The `tea` dialect's state reads (see [`crate::dataflow::state`]): TEA renders a
//! missing key as nothing, and the run's input can supply any key (`--input`), so a read
//! of a key no node writes and the file does not declare is a warning at its node.

use crate::dataflow::state::{Declared, unprovided_reads};
use std::collections::{HashMap, HashSet};
use weft_core::{Diagnostic, Flow, Loc};

/// The warnings for `flow`'s reads of state keys that nothing provides; `declared` are
/// the keys of `initial_state` and `state_schema`, `node_at` the document pointer of
/// the node written at each location.
pub(super) fn check(
    flow: &Flow,
    declared: HashSet<String>,
    node_at: &HashMap<Loc, String>,
) -> Vec<Diagnostic> {
    let declared = Declared {
        keys: declared,
        block: "node",
        where_declared: "neither initial_state nor state_schema declares it",
        unless: " unless the run's input supplies it",
        declare_hint: |key| {
            format!("declare it in state_schema (`{key}: str`), or write it from a node")
        },
        start: Some("__start__"),
    };
    unprovided_reads(flow, &declared)
        .into_iter()
        .map(|mut d| {
            d.pointer = d
                .loc
                .and_then(|l| node_at.get(&l))
                .cloned()
                .unwrap_or_default();
            d
        })
        .collect()
}
