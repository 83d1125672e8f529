//! `LISTEN weft_work`: a worker waiting for runs is woken when another process makes
//! one ready (a new queued run, a run made ready again), instead of waiting for its
//! next poll. The notifications come on a connection of their own, kept open (and
//! reopened after it breaks) from the first wait on; the worker's poll remains the
//! fallback while it is down, and for leases that lapse, which nothing announces.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::Notify;
use tokio_postgres::{AsyncMessage, NoTls};

/// How long to wait before reopening a broken notification connection.
const RECONNECT: Duration = Duration::from_secs(1);

/// Wakes a waiting worker when work may be ready.
pub(super) struct WorkSignal {
    config: tokio_postgres::Config,
    ready: Arc<Notify>,
    listening: AtomicBool,
}

impl WorkSignal {
    pub(super) fn new(config: tokio_postgres::Config) -> WorkSignal {
        WorkSignal {
            config,
            ready: Arc::new(Notify::new()),
            listening: AtomicBool::new(false),
        }
    }

    /// Returns when a notification arrives (or arrived since the last wait), or after
    /// `timeout`.
    pub(super) async fn wait(&self, timeout: Duration) {
        if !self.listening.swap(true, Ordering::AcqRel) {
            tokio::spawn(listen(self.config.clone(), Arc::downgrade(&self.ready)));
        }
        let _ = tokio::time::timeout(timeout, self.ready.notified()).await;
    }
}

/// Listens until the signal is dropped, reconnecting after failures.
async fn listen(config: tokio_postgres::Config, ready: Weak<Notify>) {
    while ready.strong_count() > 0 {
        if let Ok((client, mut connection)) = config.connect(NoTls).await {
            let forward = ready.clone();
            let messages = tokio::spawn(async move {
                while let Some(Ok(message)) =
                    std::future::poll_fn(|cx| connection.poll_message(cx)).await
                {
                    let Some(ready) = forward.upgrade() else {
                        return;
                    };
                    if let AsyncMessage::Notification(_) = message {
                        ready.notify_one();
                    }
                }
            });
            if client.batch_execute("LISTEN weft_work").await.is_ok() {
                // Work made ready while this connection was down is found by the poll
                // the worker makes now.
                if let Some(r) = ready.upgrade() {
                    r.notify_one();
                }
                let _ = messages.await;
            } else {
                messages.abort();
            }
            drop(client);
        }
        tokio::time::sleep(RECONNECT).await;
    }
}
