//! Schedules, hooks and firings as the SQL stores keep them: a schedule or hook is one
//! JSON document under its key, a firing one row. What both stores read and write of
//! them is written here once; a document or firing that does not read back is an error
//! naming it, never a default.

use serde::Serialize;
use serde::de::DeserializeOwned;
use weft_core::ports::{Firing, FiringOutcome, StoreError};

/// The column that keys the documents of `table` (`schedules` by id, `hooks` by name).
pub(crate) fn key_column(table: &str) -> &'static str {
    if table == "hooks" { "name" } else { "id" }
}

/// `doc` as the text stored for it in `table`.
pub(crate) fn write_doc(table: &str, doc: &impl Serialize) -> Result<String, StoreError> {
    serde_json::to_string(doc).map_err(|e| StoreError::backend(table, e))
}

/// The document stored under `key` in `table`, read back.
pub(crate) fn read_doc<T: DeserializeOwned>(
    table: &str,
    key: &str,
    text: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(text)
        .map_err(|e| StoreError::Corrupt(format!("{table} `{key}` does not read back: {e}")))
}

/// The error of creating a document under a `key` that `table` holds already.
pub(crate) fn exists_already(table: &str, key: &str) -> StoreError {
    StoreError::Conflict(format!("`{key}` exists already in {table}"))
}

/// The columns of a firing's row, as read.
pub(crate) struct FiringRow {
    pub(crate) fire_ms: i64,
    pub(crate) outcome: String,
    pub(crate) run_id: Option<String>,
    pub(crate) missed: i64,
    pub(crate) at_ms: i64,
    pub(crate) error: Option<String>,
}

impl FiringRow {
    /// The firing of schedule `schedule_id` this row holds.
    pub(crate) fn into_firing(self, schedule_id: &str) -> Result<Firing, StoreError> {
        let corrupt =
            |what: String| StoreError::Corrupt(format!("a firing of `{schedule_id}` {what}"));
        Ok(Firing {
            schedule_id: schedule_id.to_owned(),
            fire_ms: self.fire_ms,
            outcome: FiringOutcome::parse(&self.outcome)
                .ok_or_else(|| corrupt(format!("is `{}`", self.outcome)))?,
            run_id: self.run_id,
            missed: u32::try_from(self.missed)
                .map_err(|_| corrupt(format!("missed {} times", self.missed)))?,
            at_ms: self.at_ms,
            error: self.error,
        })
    }
}
