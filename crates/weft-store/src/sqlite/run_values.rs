//! A run record's output and state, their large parts stored apart.
//!
//! A run's record keeps its output and its last state (`runs.output`, `runs.state`). The
//! state of a TEA fan-out over a list held in the state holds the list once per branch
//! result (shared in memory), and written whole it was n² numbers twice (36 MB for 2,000
//! items). The record refers to what the run's journal and events stored of these two
//! values in `run_values` (the whole value, or parts of it: the list, the results), its
//! columns holding `null` in their places and the parts' paths and ids in `output_refs`
//! and `state_refs`; the rest is inline. It stores nothing new itself: a record is
//! rewritten at every resume with values read back (new pointers), and storing their
//! parts again each time would grow the file with every pause. The record reads back
//! as it was written.

use super::shared_values::{Apart, SharedValues, ValueReader, read_apart};
use super::{err, shared_values};
use rusqlite::Connection;
use weft_core::ports::{RunRecord, StoreError};
use weft_core::value::Value;

/// The output and state columns of a run record about to be written.
pub(super) struct RunValues {
    output: Option<Apart>,
    state: Option<Apart>,
}

impl RunValues {
    /// `run`'s output and state, written with their large parts apart.
    pub(super) fn of(run: &RunRecord, values: &SharedValues) -> Result<RunValues, StoreError> {
        let apart = |v: &Option<weft_core::value::Shared>| {
            v.as_ref().map(|v| values.apart(&run.id, v)).transpose()
        };
        Ok(RunValues {
            output: apart(&run.output)?,
            state: apart(&run.state)?,
        })
    }

    /// `run`'s output and state whole, referring to nothing (a run a trigger starts,
    /// written on the database thread, has neither yet).
    pub(super) fn inline(run: &RunRecord) -> Result<RunValues, StoreError> {
        let whole = |v: &Option<weft_core::value::Shared>| {
            v.as_ref()
                .map(|v| {
                    Ok(Apart {
                        json: serde_json::to_string(v).map_err(|e| err("runs", e))?,
                        refs: None,
                        parts: Vec::new(),
                    })
                })
                .transpose()
        };
        Ok(RunValues {
            output: whole(&run.output)?,
            state: whole(&run.state)?,
        })
    }

    /// The output column: its JSON and the parts it refers to.
    pub(super) fn output(&self) -> (Option<&str>, Option<&str>) {
        column(self.output.as_ref())
    }

    /// The state column: its JSON and the parts it refers to.
    pub(super) fn state(&self) -> (Option<&str>, Option<&str>) {
        column(self.state.as_ref())
    }

    /// Writes the rows of the parts the columns refer to that are not there yet.
    pub(super) fn insert_parts(&self, conn: &Connection, run_id: &str) -> Result<(), StoreError> {
        let parts = [&self.output, &self.state]
            .into_iter()
            .flatten()
            .flat_map(|a| a.parts.iter().map(|p| (run_id, p)));
        shared_values::insert(conn, parts)
    }
}

fn column(apart: Option<&Apart>) -> (Option<&str>, Option<&str>) {
    match apart {
        Some(a) => (Some(&a.json), a.refs.as_deref()),
        None => (None, None),
    }
}

/// What a run row's `output_refs` and `state_refs` hold.
#[derive(Default)]
pub(super) struct Refs {
    pub(super) output: Option<String>,
    pub(super) state: Option<String>,
}

/// Puts back the parts `refs` says `run`'s output and state hold apart.
pub(super) fn put_back(
    conn: &Connection,
    run: &mut RunRecord,
    refs: Refs,
) -> Result<(), StoreError> {
    let mut reader = ValueReader::default();
    for (slot, refs) in [(&mut run.output, refs.output), (&mut run.state, refs.state)] {
        let Some(refs) = refs else {
            continue;
        };
        // A column with parts apart holds at least `null`.
        let json: Value = slot.take().map_or(Value::Null, |v| v.into_value());
        *slot = Some(read_apart(conn, &run.id, json, &refs, &mut reader)?);
    }
    Ok(())
}
