//! The thread port: conversations whose runs follow one another. A thread names the
//! runs started on it, oldest first; what it holds (its values, its status) is read from
//! its latest run, so the store keeps only the thread itself and the order of its runs.
//!
//! A run joins a thread only if the thread has the number of runs its starter saw
//! (an optimistic version): of two requests that start a run on one idle thread at
//! once, one joins it and the other learns that it lost, which is what lets a door
//! refuse, queue or interrupt a second run (LangGraph's `multitask_strategy`).

use crate::ports::store::StoreError;
use crate::value::Value;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// A thread as the store keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thread {
    /// Its id, unique in the store.
    pub id: String,
    /// What its creator attached to it: a JSON object.
    pub metadata: Value,
    /// Creation time, Unix milliseconds.
    pub created_ms: i64,
    /// Last change (metadata, a run joining), Unix milliseconds.
    pub updated_ms: i64,
    /// How many runs joined it: the version a new run's join is checked against.
    pub runs: u64,
    /// The latest run that joined it.
    pub last_run: Option<String>,
    /// Values a client wrote to the thread since its latest run (LangGraph's
    /// `update_state`): they stand for the thread's values until the next run joins,
    /// which starts from them and clears them. `None`: the latest run's values stand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Value>,
}

impl Thread {
    /// Sets each key of `metadata` in the thread's metadata (an object, made one if it
    /// is not), keeping the others, as of `at_ms`: what every store's
    /// [`ThreadStore::merge_thread_metadata`] does, inside its own atomic step.
    pub fn merge_metadata(&mut self, metadata: &serde_json::Map<String, Value>, at_ms: i64) {
        if !self.metadata.is_object() {
            self.metadata = Value::Object(Default::default());
        }
        if let Some(m) = self.metadata.as_object_mut() {
            m.extend(metadata.clone());
        }
        self.updated_ms = at_ms;
    }
}

/// Which threads [`ThreadStore::threads`] lists, newest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThreadQuery {
    /// Only threads whose metadata holds each of these keys with the same value.
    pub metadata: Option<serde_json::Map<String, Value>>,
    /// Only these threads, when given.
    pub ids: Option<Vec<String>>,
    /// Skips this many matching threads.
    pub offset: usize,
    /// At most this many.
    pub limit: usize,
}

impl ThreadQuery {
    /// Whether `thread` is one the query asks for (offset and limit aside).
    pub fn matches(&self, thread: &Thread) -> bool {
        let ids_match = self.ids.as_ref().is_none_or(|ids| ids.contains(&thread.id));
        let metadata_match = self.metadata.as_ref().is_none_or(|wanted| {
            wanted
                .iter()
                .all(|(k, v)| thread.metadata.get(k) == Some(v))
        });
        ids_match && metadata_match
    }

    /// The page of `newest_first` the query asks for: the matching threads after
    /// `offset`, at most `limit`. Stores that cannot filter metadata themselves read
    /// their threads newest first through this.
    pub fn page(&self, newest_first: impl IntoIterator<Item = Thread>) -> Vec<Thread> {
        newest_first
            .into_iter()
            .filter(|t| self.matches(t))
            .skip(self.offset)
            .take(self.limit)
            .collect()
    }
}

/// Threads and the order of their runs.
#[async_trait]
pub trait ThreadStore: Send + Sync {
    /// Stores a new thread; [`StoreError::Conflict`] when one has its id.
    async fn create_thread(&self, thread: &Thread) -> Result<(), StoreError>;
    /// The thread `id`.
    async fn thread(&self, id: &str) -> Result<Option<Thread>, StoreError>;
    /// The threads `query` asks for, newest first (by creation, then id).
    async fn threads(&self, query: &ThreadQuery) -> Result<Vec<Thread>, StoreError>;
    /// Sets each key of `metadata` (an object) in thread `id`'s metadata, keeping the
    /// others, in one atomic step; the thread as it is then, or `None` if there is none.
    async fn merge_thread_metadata(
        &self,
        id: &str,
        metadata: &serde_json::Map<String, Value>,
        at_ms: i64,
    ) -> Result<Option<Thread>, StoreError>;
    /// Deletes thread `id` and its list of runs (the runs themselves stay); whether
    /// there was one.
    async fn delete_thread(&self, id: &str) -> Result<bool, StoreError>;
    /// Sets the values a client wrote to thread `id` (see [`Thread::values`]); the
    /// thread as it is then, or `None` if there is none.
    async fn set_thread_values(
        &self,
        id: &str,
        values: &Value,
        at_ms: i64,
    ) -> Result<Option<Thread>, StoreError>;
    /// Makes `run_id` the thread's latest run if the thread has exactly `expected`
    /// runs now, and clears the values a client wrote; `false` (nothing written) when
    /// it has not, or there is no thread.
    async fn join_thread(
        &self,
        id: &str,
        run_id: &str,
        expected: u64,
        at_ms: i64,
    ) -> Result<bool, StoreError>;
    /// The ids of the runs that joined thread `id`, newest first, at most `limit`.
    async fn thread_runs(&self, id: &str, limit: usize) -> Result<Vec<String>, StoreError>;
}
