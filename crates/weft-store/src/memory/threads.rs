//! The memory store's threads.

use super::{MemoryStore, poisoned};
use crate::thread_row::thread_exists;
use async_trait::async_trait;
use std::collections::HashMap;
use weft_core::ports::{StoreError, Thread, ThreadQuery, ThreadStore};
use weft_core::value::Value;

/// A thread and the runs that joined it, oldest first.
pub(super) struct Kept {
    thread: Thread,
    runs: Vec<String>,
}

/// What the memory store keeps for threads, by id.
pub(super) type Threads = HashMap<String, Kept>;

#[async_trait]
impl ThreadStore for MemoryStore {
    async fn create_thread(&self, thread: &Thread) -> Result<(), StoreError> {
        let mut threads = self.threads.lock().map_err(|_| poisoned())?;
        if threads.contains_key(&thread.id) {
            return Err(thread_exists(&thread.id));
        }
        let kept = Kept {
            thread: thread.clone(),
            runs: Vec::new(),
        };
        threads.insert(thread.id.clone(), kept);
        Ok(())
    }

    async fn thread(&self, id: &str) -> Result<Option<Thread>, StoreError> {
        let threads = self.threads.lock().map_err(|_| poisoned())?;
        Ok(threads.get(id).map(|k| k.thread.clone()))
    }

    async fn threads(&self, query: &ThreadQuery) -> Result<Vec<Thread>, StoreError> {
        let threads = self.threads.lock().map_err(|_| poisoned())?;
        let mut all: Vec<&Thread> = threads.values().map(|k| &k.thread).collect();
        all.sort_by(|a, b| (b.created_ms, &b.id).cmp(&(a.created_ms, &a.id)));
        Ok(query.page(all.into_iter().cloned()))
    }

    async fn merge_thread_metadata(
        &self,
        id: &str,
        metadata: &serde_json::Map<String, Value>,
        at_ms: i64,
    ) -> Result<Option<Thread>, StoreError> {
        let mut threads = self.threads.lock().map_err(|_| poisoned())?;
        let Some(kept) = threads.get_mut(id) else {
            return Ok(None);
        };
        kept.thread.merge_metadata(metadata, at_ms);
        Ok(Some(kept.thread.clone()))
    }

    async fn set_thread_values(
        &self,
        id: &str,
        values: &Value,
        at_ms: i64,
    ) -> Result<Option<Thread>, StoreError> {
        let mut threads = self.threads.lock().map_err(|_| poisoned())?;
        let Some(kept) = threads.get_mut(id) else {
            return Ok(None);
        };
        kept.thread.values = Some(values.clone());
        kept.thread.updated_ms = at_ms;
        Ok(Some(kept.thread.clone()))
    }

    async fn delete_thread(&self, id: &str) -> Result<bool, StoreError> {
        let mut threads = self.threads.lock().map_err(|_| poisoned())?;
        Ok(threads.remove(id).is_some())
    }

    async fn join_thread(
        &self,
        id: &str,
        run_id: &str,
        expected: u64,
        at_ms: i64,
    ) -> Result<bool, StoreError> {
        let mut threads = self.threads.lock().map_err(|_| poisoned())?;
        let Some(kept) = threads.get_mut(id).filter(|k| k.thread.runs == expected) else {
            return Ok(false);
        };
        kept.runs.push(run_id.to_owned());
        kept.thread.runs += 1;
        kept.thread.last_run = Some(run_id.to_owned());
        kept.thread.values = None;
        kept.thread.updated_ms = at_ms;
        Ok(true)
    }

    async fn thread_runs(&self, id: &str, limit: usize) -> Result<Vec<String>, StoreError> {
        let threads = self.threads.lock().map_err(|_| poisoned())?;
        Ok(threads
            .get(id)
            .map(|k| k.runs.iter().rev().take(limit).cloned().collect())
            .unwrap_or_default())
    }
}
