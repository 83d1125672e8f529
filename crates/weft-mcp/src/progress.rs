//! `notifications/progress` while a tool waits for a run: one notification per leaf
//! step the run completes, with the steps done so far, the flow's step count when it is
//! fixed (no loop, map, branch, graph or sub-flow makes it vary), and the step's path as
//! the message. Read from the run's stored event log, so a run a worker drives elsewhere
//! reports too.

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RoleServer};
use std::sync::Arc;
use std::time::Duration;
use weft_core::Flow;
use weft_core::event::EventKind;
use weft_core::ir::BlockKind;
use weft_core::ports::Store;

/// How often the event log is read for new steps.
const POLL: Duration = Duration::from_millis(50);

/// Where a tool call's progress goes: the client that asked, under its token.
#[derive(Clone)]
pub(crate) struct Progress {
    pub(crate) peer: Peer<RoleServer>,
    pub(crate) token: ProgressToken,
}

/// The leaf steps `flow` always runs, when that number is fixed.
pub(crate) fn fixed_steps(flow: &Flow) -> Option<usize> {
    let mut leaves = 0;
    let mut varies = false;
    weft_core::validate::walk_blocks(flow, &mut |_, b| match &b.kind {
        BlockKind::Loop(_)
        | BlockKind::Map(_)
        | BlockKind::Branch(_)
        | BlockKind::Graph(_)
        | BlockKind::SubFlow(_) => varies = true,
        k if k.is_leaf() => leaves += 1,
        _ => {}
    });
    (!varies).then_some(leaves)
}

/// Reports a run's completed leaf steps to a client, from its event log.
pub(crate) struct Follower {
    store: Arc<dyn Store>,
    run_id: String,
    progress: Progress,
    total: Option<usize>,
    after: Option<u64>,
    done: u64,
}

impl Follower {
    /// Follows run `run_id` for `progress`, counting toward `total` when known.
    pub(crate) fn new(
        store: Arc<dyn Store>,
        run_id: String,
        progress: Progress,
        total: Option<usize>,
    ) -> Follower {
        Follower {
            store,
            run_id,
            progress,
            total,
            after: None,
            done: 0,
        }
    }

    /// Reports what the run completed since the last look, until dropped.
    pub(crate) async fn follow(&mut self) {
        loop {
            if !self.pump().await {
                tokio::time::sleep(POLL).await;
            }
        }
    }

    /// Reports the steps completed since the last look; whether there were events.
    pub(crate) async fn pump(&mut self) -> bool {
        let events = self
            .store
            .events(&self.run_id, self.after, 500)
            .await
            .unwrap_or_default();
        for e in &events {
            self.after = Some(e.seq);
            if let EventKind::StepCompleted { path, kind, .. } = &e.kind
                && BlockKind::is_leaf_name(kind)
            {
                self.done += 1;
                let mut param =
                    ProgressNotificationParam::new(self.progress.token.clone(), self.done as f64)
                        .with_message(path.to_string());
                if let Some(total) = self.total {
                    param = param.with_total(total as f64);
                }
                // A client that went away stops nothing: the run goes on.
                let _ = self.progress.peer.notify_progress(param).await;
            }
        }
        !events.is_empty()
    }
}
