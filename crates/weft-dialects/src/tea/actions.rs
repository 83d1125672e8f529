//! `uses:` actions: model actions go to [`super::llm`]; the others are Weft's built-in
//! actions by name.

use super::Compiler;
use serde_json::Value;
use weft_core::Diagnostic;
use weft_core::ir::{ActionSpec, Block, BlockKind, ValueTemplate};

use super::llm::MODEL;
/// Actions Weft runs itself, by their names in tea files.
pub(super) use crate::BUILTIN_ACTIONS as BUILTIN;

impl Compiler<'_> {
    /// The block for `uses: NAME` with `with:`, at `ptr` (the node's pointer).
    pub(super) fn action(
        &mut self,
        uses: &str,
        with: Option<&Value>,
        ptr: &str,
        node: &str,
    ) -> Option<Block> {
        if MODEL.contains(&uses) {
            return self.llm_call(uses, with, ptr, node);
        }
        if BUILTIN.contains(&uses) {
            return Some(Block::new(BlockKind::Action(ActionSpec {
                uses: uses.to_owned(),
                params: with.cloned().map(ValueTemplate),
            })));
        }
        let known = || BUILTIN.iter().chain(MODEL).copied();
        let d = Diagnostic::error(format!("{ptr}/uses"), format!("unknown action `{uses}`"))
            .hint_closest(
                uses,
                known(),
                format!(
                    "Weft runs these actions: {}",
                    known().collect::<Vec<_>>().join(", ")
                ),
            );
        self.diags.push(d);
        None
    }
}
