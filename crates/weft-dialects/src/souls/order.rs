//! Reads of a block's result that can never succeed: block `A` reads `results.B` (an
//! input's `from`, a gate's `eval_key`, a synthesize block's `input_block_ids`) although
//! no path of the workflow leads from `B` to `A`, so `B` cannot have run when `A` does
//! and the read is always empty. Spec 001's blocks pass data only through `results`, so
//! this is the dialect's dataflow check.
//!
//! What runs before what: transitions, conditional transitions, gate shorthands and
//! routes (all edges of the workflow's graph), `error_route`s, and a loop's inner blocks,
//! which run while the loop does, again and again (each before and after the others).

use std::collections::{HashMap, HashSet};
use weft_core::Diagnostic;
use weft_core::ir::Edge;

/// One read of a block's result.
pub(super) struct ResultRead {
    /// The result key read: a block id, or a dispatch block's `<id>.<exit>`.
    pub key: String,
    /// Where it is read: a pointer under `/blocks/<reader>`.
    pub pointer: String,
}

/// Which blocks can have run before which.
pub(super) struct Order {
    /// For each block, the blocks it can lead to directly.
    next: HashMap<String, Vec<String>>,
}

impl Order {
    /// The order of a workflow with `edges`, `error_routes` (block -> route) and
    /// `loops` (loop block -> its inner blocks).
    pub(super) fn new(
        edges: &[Edge],
        error_routes: &[(String, String)],
        loops: &[(String, Vec<String>)],
    ) -> Order {
        let mut next: HashMap<String, Vec<String>> = HashMap::new();
        let mut link = |from: &str, to: &str| {
            next.entry(from.to_owned()).or_default().push(to.to_owned());
        };
        for e in edges {
            link(&e.from, &e.to);
        }
        for (from, to) in error_routes {
            link(from, to);
        }
        for (looped, inner) in loops {
            for i in inner {
                link(looped, i);
                link(i, looped);
            }
        }
        Order { next }
    }

    /// Whether `before` can have run by the time `reader` runs: a path leads from it
    /// to `reader`.
    fn can_precede(&self, before: &str, reader: &str) -> bool {
        let mut seen: HashSet<&str> = HashSet::new();
        let mut todo = vec![before];
        while let Some(at) = todo.pop() {
            for n in self.next.get(at).into_iter().flatten() {
                if n == reader {
                    return true;
                }
                if seen.insert(n) {
                    todo.push(n);
                }
            }
        }
        false
    }

    /// An error for each of `reads` whose block cannot have run before its reader.
    pub(super) fn check(
        &self,
        reads: &[ResultRead],
        is_block: impl Fn(&str) -> bool,
    ) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        for r in reads {
            let Some(reader) = reader_of(&r.pointer) else {
                continue;
            };
            let block = match r.key.split_once('.') {
                Some((id, _)) if !is_block(&r.key) => id,
                _ => r.key.as_str(),
            };
            if self.can_precede(block, &reader) {
                continue;
            }
            out.push(
                Diagnostic::error(
                    &r.pointer,
                    format!(
                        "block `{reader}` reads the result of `{block}`, which cannot have run before it: no transition, route or loop leads from `{block}` to `{reader}`, so the read is always empty"
                    ),
                )
                .hint(format!(
                    "read a block that runs earlier, or make `{block}` run before `{reader}` (a transition from it, or both inside one loop)"
                )),
            );
        }
        out
    }
}

/// The block whose definition holds `pointer` (`/blocks/<id>/...`), unescaped.
fn reader_of(pointer: &str) -> Option<String> {
    let id = pointer.strip_prefix("/blocks/")?.split('/').next()?;
    Some(id.replace("~1", "/").replace("~0", "~"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(from: &str, to: &str) -> Edge {
        Edge {
            from: from.into(),
            to: to.into(),
            when: None,
            exit: None,
            parallel: false,
            origin: None,
        }
    }

    fn read(key: &str, reader: &str) -> ResultRead {
        ResultRead {
            key: key.into(),
            pointer: format!("/blocks/{reader}/inputs/x/from"),
        }
    }

    #[test]
    fn results_are_readable_downstream_in_loops_and_after_error_routes() {
        let order = Order::new(
            &[edge("a", "b"), edge("b", "c")],
            &[("c".into(), "rescue".into())],
            &[("c".into(), vec!["i1".into(), "i2".into()])],
        );
        let blocks = ["a", "b", "c", "i1", "i2", "rescue", "d"];
        let is_block = |k: &str| blocks.contains(&k);
        let fine = [read("a", "c"), read("i2", "i1"), read("b", "rescue")];
        let errors = order.check(&fine, is_block);
        assert!(errors.is_empty(), "{errors:#?}");
        let errors = order.check(
            &[read("c", "a"), read("b", "b"), read("d.yes", "a")],
            is_block,
        );
        let readers: Vec<&str> = errors
            .iter()
            .map(|d| d.message.split('`').nth(1).unwrap())
            .collect();
        assert_eq!(readers, ["a", "b", "a"]);
        assert!(
            errors[2].message.contains("the result of `d`"),
            "{}",
            errors[2].message
        );
    }
}
