//! A thread as the stores keep it: for the SQL ones, one row, its metadata and values
//! as JSON text; for all, the error of a thread that exists already.

use weft_core::ports::{StoreError, Thread};

/// The columns of a thread's row, as read (`id, metadata, created_ms, updated_ms, runs,
/// last_run, state`).
pub(crate) struct ThreadRow {
    pub(crate) id: String,
    pub(crate) metadata: String,
    pub(crate) created_ms: i64,
    pub(crate) updated_ms: i64,
    pub(crate) runs: i64,
    pub(crate) last_run: Option<String>,
    pub(crate) values: Option<String>,
}

impl ThreadRow {
    /// The thread, its metadata and values read back from their text.
    pub(crate) fn into_thread(self) -> Result<Thread, StoreError> {
        let corrupt = |what: &str, e: serde_json::Error| {
            StoreError::Corrupt(format!(
                "thread `{}`'s {what} does not read back: {e}",
                self.id
            ))
        };
        let metadata = serde_json::from_str(&self.metadata).map_err(|e| corrupt("metadata", e))?;
        let values = self
            .values
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
            .map_err(|e| corrupt("values", e))?;
        Ok(Thread {
            metadata,
            values,
            created_ms: self.created_ms,
            updated_ms: self.updated_ms,
            runs: self.runs.try_into().unwrap_or_default(),
            last_run: self.last_run,
            id: self.id,
        })
    }
}

/// `value` as the JSON text a row keeps.
pub(crate) fn json_text(value: &impl serde::Serialize) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::backend("threads", e))
}

/// A thread that cannot be created: one has its id.
pub(crate) fn thread_exists(id: &str) -> StoreError {
    StoreError::Conflict(format!("a thread with id {id} exists already"))
}
