//! TEA's interrupts: a run stops before or after a node until a person resumes it
//! (`interrupt: before|after` or `interrupt_before: true` on a node, or the node's name in
//! `config.interrupt_before` / `config.interrupt_after`, or in the same lists at the top
//! of the file, where TEA's own examples also write them). Weft's own way to stop a run
//! for a person is an approval, which survives restarts and is answered with `weft
//! approve`; so an interrupt is an approval block, whose one answer is `approve` (a
//! TEA run can only be resumed), run before or after the node's own block.

use super::Compiler;
use super::doc::{Node, TeaDoc};
use serde_json::Value;
use std::collections::HashSet;
use weft_core::Diagnostic;
use weft_core::ir::{ApprovalSpec, Block, BlockKind, Template};

/// Where a node stops for a person.
#[derive(Default)]
pub(super) struct Interrupts {
    before: HashSet<String>,
    after: HashSet<String>,
}

impl Interrupts {
    /// `node`'s block with its interrupts around it (the block itself when it has none).
    /// The node's bindings move to the outside, so the node still sees what it would
    /// have seen.
    pub(super) fn around(&self, name: &str, mut block: Block) -> Block {
        let before = self.before.contains(name);
        let after = self.after.contains(name);
        if !before && !after {
            return block;
        }
        let bind = std::mem::take(&mut block.data.bind);
        let mut steps = Vec::new();
        if before {
            steps.push(stop(name, "before"));
        }
        steps.push(block);
        if after {
            steps.push(stop(name, "after"));
        }
        let mut wrapped = Block::new(BlockKind::Sequence(steps));
        wrapped.data.bind = bind;
        wrapped
    }
}

/// The approval that stands for an interrupt `when` ("before" / "after") node `name`.
fn stop(name: &str, when: &str) -> Block {
    Block::new(BlockKind::Approval(ApprovalSpec {
        prompt: Some(Template(format!(
            "The flow is interrupted {when} node `{name}` (TEA's interrupt_{when}). Approve to go on."
        ))),
        options: vec!["approve".into()],
    }))
    .with_id(format!("{name}.interrupt_{when}"))
}

impl Compiler<'_> {
    /// The nodes `tea` interrupts at, from the nodes' own keys and `config`.
    pub(super) fn interrupts(&mut self, tea: &TeaDoc) -> Interrupts {
        let mut found = Interrupts::default();
        for (i, n) in tea.nodes.iter().enumerate() {
            let Some(name) = &n.name else { continue };
            let (before, after) = self.node_interrupts(n, &format!("/nodes/{i}"));
            if before {
                found.before.insert(name.clone());
            }
            if after {
                found.after.insert(name.clone());
            }
        }
        let names: HashSet<&str> = tea.nodes.iter().filter_map(|n| n.name.as_deref()).collect();
        let in_config = |key: &str| tea.config.as_ref().and_then(|c| c.get(key));
        let lists = [
            (
                "interrupt_before",
                "/config/interrupt_before",
                in_config("interrupt_before"),
                true,
            ),
            (
                "interrupt_after",
                "/config/interrupt_after",
                in_config("interrupt_after"),
                false,
            ),
            (
                "interrupt_before",
                "/interrupt_before",
                tea.interrupt_before.as_ref(),
                true,
            ),
            (
                "interrupt_after",
                "/interrupt_after",
                tea.interrupt_after.as_ref(),
                false,
            ),
        ];
        for (key, ptr, list, before) in lists {
            let Some(list) = list else { continue };
            let set = if before {
                &mut found.before
            } else {
                &mut found.after
            };
            let Some(list) = list.as_array() else {
                self.diags.push(
                    Diagnostic::error(ptr, format!("`{key}` is a list of node names"))
                        .hint(format!("{key}: [review]")),
                );
                continue;
            };
            for (i, entry) in list.iter().enumerate() {
                match entry.as_str() {
                    Some(name) if names.contains(name) => {
                        set.insert(name.to_owned());
                    }
                    _ => {
                        let d = Diagnostic::error(
                            format!("{ptr}/{i}"),
                            format!("`{key}` names {entry}, which is not a node"),
                        );
                        let text = entry.as_str().unwrap_or_default();
                        self.diags.push(d.hint_closest(
                            text,
                            names.iter().copied(),
                            "name a node of this file",
                        ));
                    }
                }
            }
        }
        found
    }

    /// A node's own `interrupt: before|after`, `interrupt_before: true` and
    /// `interrupt_after: true`.
    fn node_interrupts(&mut self, n: &Node, ptr: &str) -> (bool, bool) {
        let mut before = n.interrupt_before.unwrap_or(false);
        let mut after = n.interrupt_after.unwrap_or(false);
        match n.interrupt.as_ref() {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if s == "before" => before = true,
            Some(Value::String(s)) if s == "after" => after = true,
            Some(other) => self.diags.push(
                Diagnostic::error(
                    format!("{ptr}/interrupt"),
                    format!("interrupt is `before` or `after`, not {other}"),
                )
                .hint("interrupt: before"),
            ),
        }
        (before, after)
    }
}
