//! Budgets: each block with a budget adds a frame; model usage is charged to every frame
//! up the chain, and a call that would exceed any frame is refused before it is made —
//! or, for a frame with `on_exceed: warn`, reported by a `budget_warning` event once.
//! A frame with `warn_at` also warns once its usage reaches that fraction of a limit.

use std::sync::{Arc, Mutex};
use weft_core::event::EventKind;
use weft_core::ir::{Budget, OnExceed};
use weft_core::ports::Usage;
use weft_core::{BlockError, ErrorKind};

/// Warnings a frame has already given, so each is given once.
#[derive(Default)]
struct Warned {
    near: [bool; 2],
    over: [bool; 2],
}

pub(crate) struct Frame {
    owner: String,
    limit: Budget,
    used: Mutex<Usage>,
    warned: Mutex<Warned>,
    parent: Option<Arc<Frame>>,
}

/// Where a warning goes: the caller turns it into an event.
pub(crate) type Warn<'a> = &'a dyn Fn(EventKind);

/// The budget frames enclosing a block, innermost first.
#[derive(Clone, Default)]
pub(crate) struct Budgets(Option<Arc<Frame>>);

const TOKENS: usize = 0;
const COST: usize = 1;

impl Frame {
    fn owner_text(&self) -> String {
        if self.owner.is_empty() {
            "the run".to_owned()
        } else {
            format!("block `{}`", self.owner)
        }
    }

    /// Warns once for limit `which` (`over`: the limit itself, else the threshold).
    fn warn(&self, which: usize, over: bool, used: f64, limit: f64, path: &str, warn: Warn<'_>) {
        let mut w = self.warned.lock().expect("budget lock");
        let slot = if over {
            &mut w.over[which]
        } else {
            &mut w.near[which]
        };
        if std::mem::replace(slot, true) {
            return;
        }
        warn(EventKind::BudgetWarning {
            path: path.into(),
            owner: self.owner.clone(),
            budget: if which == TOKENS {
                "tokens"
            } else {
                "cost_usd"
            }
            .to_owned(),
            used,
            limit,
            exceeded: over,
        });
    }
}

impl Budgets {
    pub(crate) fn push(&self, owner: &str, limit: &Budget) -> Budgets {
        Budgets(Some(Arc::new(Frame {
            owner: owner.to_owned(),
            limit: limit.clone(),
            used: Mutex::new(Usage::default()),
            warned: Mutex::new(Warned::default()),
            parent: self.0.clone(),
        })))
    }

    /// What the innermost frame has been charged so far.
    pub(crate) fn innermost_usage(&self) -> Option<Usage> {
        self.0
            .as_deref()
            .map(|f| *f.used.lock().expect("budget lock"))
    }

    fn frames(&self) -> impl Iterator<Item = &Frame> {
        std::iter::successors(self.0.as_deref(), |f| f.parent.as_deref())
    }

    /// Refuses a call expected to use `expected_tokens` if it would exceed a budget that
    /// fails; a budget that warns gets its warning (at `path`) instead.
    pub(crate) fn check(
        &self,
        expected_tokens: u64,
        path: &str,
        warn: Warn<'_>,
    ) -> Result<(), BlockError> {
        for f in self.frames() {
            let used = *f.used.lock().expect("budget lock");
            let warns = f.limit.on_exceed == OnExceed::Warn;
            if let Some(max) = f.limit.tokens
                && used.total_tokens() + expected_tokens > max
            {
                if warns {
                    let with_call = (used.total_tokens() + expected_tokens) as f64;
                    f.warn(TOKENS, true, with_call, max as f64, path, warn);
                } else {
                    return Err(BlockError::new(
                        ErrorKind::Budget,
                        format!(
                            "token budget of {} would be exceeded: {} used + about {expected_tokens} for this call > {max}",
                            f.owner_text(),
                            used.total_tokens()
                        ),
                    )
                    .with_detail(serde_json::json!({"budget": "tokens", "owner": f.owner, "limit": max, "used": used.total_tokens()})));
                }
            }
            if let Some(max) = f.limit.cost_usd
                && used.cost_usd >= max
            {
                if warns {
                    f.warn(COST, true, used.cost_usd, max, path, warn);
                } else {
                    return Err(BlockError::new(
                        ErrorKind::Budget,
                        format!(
                            "cost budget of {} is spent: ${:.4} used of ${max:.4}",
                            f.owner_text(),
                            used.cost_usd
                        ),
                    )
                    .with_detail(serde_json::json!({"budget": "cost_usd", "owner": f.owner, "limit": max, "used": used.cost_usd})));
                }
            }
        }
        Ok(())
    }

    /// Charges `usage` to every enclosing frame, warning (at `path`) for each frame whose
    /// usage reaches its `warn_at` threshold.
    pub(crate) fn charge(&self, usage: &Usage, path: &str, warn: Warn<'_>) {
        for f in self.frames() {
            let used = {
                let mut u = f.used.lock().expect("budget lock");
                u.add(usage);
                *u
            };
            let Some(at) = f.limit.warn_at else { continue };
            if let Some(max) = f.limit.tokens
                && used.total_tokens() as f64 >= at * max as f64
            {
                f.warn(
                    TOKENS,
                    false,
                    used.total_tokens() as f64,
                    max as f64,
                    path,
                    warn,
                );
            }
            if let Some(max) = f.limit.cost_usd
                && used.cost_usd >= at * max
            {
                f.warn(COST, false, used.cost_usd, max, path, warn);
            }
        }
    }
}
