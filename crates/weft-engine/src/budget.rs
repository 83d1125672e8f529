//! Budgets: each block with a budget adds a frame; model usage is charged to every frame
//! up the chain, and a call that would exceed any frame is refused before it is made.

use std::sync::{Arc, Mutex};
use weft_core::ir::Budget;
use weft_core::ports::Usage;
use weft_core::{BlockError, ErrorKind};

pub(crate) struct Frame {
    owner: String,
    limit: Budget,
    used: Mutex<Usage>,
    parent: Option<Arc<Frame>>,
}

/// The budget frames enclosing a block, innermost first.
#[derive(Clone, Default)]
pub(crate) struct Budgets(Option<Arc<Frame>>);

impl Budgets {
    pub(crate) fn push(&self, owner: &str, limit: &Budget) -> Budgets {
        Budgets(Some(Arc::new(Frame {
            owner: owner.to_owned(),
            limit: limit.clone(),
            used: Mutex::new(Usage::default()),
            parent: self.0.clone(),
        })))
    }

    fn frames(&self) -> impl Iterator<Item = &Frame> {
        std::iter::successors(self.0.as_deref(), |f| f.parent.as_deref())
    }

    /// Refuses a call expected to use `expected_tokens` if it would exceed a budget.
    pub(crate) fn check(&self, expected_tokens: u64) -> Result<(), BlockError> {
        for f in self.frames() {
            let used = *f.used.lock().expect("budget lock");
            let owner = if f.owner.is_empty() {
                "the run".to_owned()
            } else {
                format!("block `{}`", f.owner)
            };
            if let Some(max) = f.limit.tokens
                && used.total_tokens() + expected_tokens > max
            {
                return Err(BlockError::new(
                    ErrorKind::Budget,
                    format!(
                        "token budget of {owner} would be exceeded: {} used + about {expected_tokens} for this call > {max}",
                        used.total_tokens()
                    ),
                )
                .with_detail(serde_json::json!({"budget": "tokens", "owner": f.owner, "limit": max, "used": used.total_tokens()})));
            }
            if let Some(max) = f.limit.cost_usd
                && used.cost_usd >= max
            {
                return Err(BlockError::new(
                    ErrorKind::Budget,
                    format!("cost budget of {owner} is spent: ${:.4} used of ${max:.4}", used.cost_usd),
                )
                .with_detail(serde_json::json!({"budget": "cost_usd", "owner": f.owner, "limit": max, "used": used.cost_usd})));
            }
        }
        Ok(())
    }

    /// Charges `usage` to every enclosing frame.
    pub(crate) fn charge(&self, usage: &Usage) {
        for f in self.frames() {
            f.used.lock().expect("budget lock").add(usage);
        }
    }
}
