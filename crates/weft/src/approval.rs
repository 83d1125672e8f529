//! [`approval`]: a step where the run waits for a person (or a program). Weft's addition
//! to the four primitives: the run pauses durably (nothing stays in memory) and
//! continues, days later if need be, when `Engine::answer` records the decision.

use crate::block::{Block, Kind};
use crate::parts::Parts;
use weft_core::ir::{self, ApprovalSpec, BlockKind, Template};

/// A step named `name` that asks `prompt` (a template) and waits for one of `options`
/// (default `approve`, `reject`). Its output is the answer (`{decision, note, ...}`);
/// its exit handle is the decision.
///
/// ```
/// use weft::prelude::*;
/// let gate = weft::approval("release", "Ship {{ input.version }}?", ["ship", "hold"]);
/// assert_eq!(gate.kind(), Kind::Approval);
/// ```
pub fn approval<S: Into<String>>(
    name: impl Into<String>,
    prompt: impl Into<String>,
    options: impl IntoIterator<Item = S>,
) -> Block {
    let name = name.into();
    let mut options: Vec<String> = options.into_iter().map(Into::into).collect();
    if options.is_empty() {
        options = vec!["approve".into(), "reject".into()];
    }
    let ir = ir::Block::new(BlockKind::Approval(ApprovalSpec {
        prompt: Some(Template(prompt.into())),
        options,
    }))
    .with_name(name.clone());
    Block::new(name, Kind::Approval, ir, Parts::default())
}
