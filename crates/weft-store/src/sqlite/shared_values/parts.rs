//! A value written with its large shared parts stored apart.
//!
//! A value built of shared parts can hold one part many times: the results of a TEA
//! fan-out over a list held in the state each hold a state that holds the list (one `Arc`
//! in memory), and written out whole they were the list once per branch — 2,000 items,
//! 2,000 branches: 4 million numbers. Written here, a part whose JSON is
//! [`LARGE`](super::LARGE) or more is stored as a value of its own (or found among the
//! run's stored values by pointer) and the writing holds `null` in its place, with the
//! part's path and id in its list of references; the list is then stored once and
//! referred to 2,000 times. A part that is small once its own large parts are taken out
//! (a branch's state) stays inline.

use super::size::json_reaches;
use super::{LARGE, SharedValues, StoredValue};
use crate::sqlite::err;
use weft_core::ports::StoreError;
use weft_core::value::Shared;

/// Where a part stored apart belongs: the keys and indexes from the value's root.
pub(super) type Path = Vec<String>;

/// One value being written: its JSON, and the parts it refers to.
pub(super) struct Written {
    /// The value's JSON, `null` where a part is stored apart.
    pub(super) json: Vec<u8>,
    /// Each part stored apart: its place and its id.
    pub(super) refs: Vec<(Path, String)>,
    /// The parts stored apart, as they are written with it.
    pub(super) parts: Vec<StoredValue>,
}

/// Whether writing a value may store parts not stored yet.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum NewParts {
    /// Large parts not stored yet are stored apart.
    Store,
    /// Only parts stored already are referred to; the rest is written inline. A run's
    /// record, rewritten at every resume with values read back (new pointers), would
    /// otherwise store its large parts again each time.
    Inline,
}

/// Writes `value` of run `run`, storing its large shared parts apart (through `values`,
/// which finds those it stored before).
pub(super) fn write(
    values: &SharedValues,
    run: &str,
    value: &Shared,
    new_parts: NewParts,
) -> Result<Written, StoreError> {
    let mut writer = Writer {
        values,
        run,
        new_parts,
        written: Written {
            json: Vec::new(),
            refs: Vec::new(),
            parts: Vec::new(),
        },
        path: Vec::new(),
    };
    writer.value(value)?;
    Ok(writer.written)
}

struct Writer<'a> {
    values: &'a SharedValues,
    run: &'a str,
    new_parts: NewParts,
    written: Written,
    /// Where the writer is in the value.
    path: Path,
}

impl Writer<'_> {
    fn value(&mut self, value: &Shared) -> Result<(), StoreError> {
        let json_err = |e| err("values", e);
        match value {
            Shared::Json(v) => {
                serde_json::to_writer(&mut self.written.json, &**v).map_err(json_err)
            }
            Shared::Object(m) => {
                self.written.json.push(b'{');
                for (i, (k, part)) in m.iter().enumerate() {
                    if i > 0 {
                        self.written.json.push(b',');
                    }
                    serde_json::to_writer(&mut self.written.json, k).map_err(json_err)?;
                    self.written.json.push(b':');
                    self.path.push(k.clone());
                    self.part(part)?;
                    self.path.pop();
                }
                self.written.json.push(b'}');
                Ok(())
            }
            Shared::Array(items) => {
                self.written.json.push(b'[');
                for (i, part) in items.iter().enumerate() {
                    if i > 0 {
                        self.written.json.push(b',');
                    }
                    self.path.push(i.to_string());
                    self.part(part)?;
                    self.path.pop();
                }
                self.written.json.push(b']');
                Ok(())
            }
        }
    }

    /// A shared part: referred to when the run stored it already, stored apart when it
    /// is large once its own large parts are out, else written inline.
    fn part(&mut self, part: &Shared) -> Result<(), StoreError> {
        if let Some(stored) = self.values.find(self.run, part) {
            self.refer(stored);
            return Ok(());
        }
        if self.new_parts == NewParts::Inline {
            // Parts of it may be stored already.
            return self.value(part);
        }
        if !json_reaches(part.node(), LARGE) {
            // No part of it can be large either.
            return serde_json::to_writer(&mut self.written.json, part)
                .map_err(|e| err("values", e));
        }
        let inner = write(self.values, self.run, part, self.new_parts)?;
        if inner.json.len() >= LARGE {
            let stored = self
                .values
                .remember(self.run, part, StoredValue::new(inner)?);
            self.refer(stored);
            return Ok(());
        }
        self.written.json.extend_from_slice(&inner.json);
        for (path, id) in inner.refs {
            self.written
                .refs
                .push(([self.path.clone(), path].concat(), id));
        }
        self.written.parts.extend(inner.parts);
        Ok(())
    }

    fn refer(&mut self, stored: StoredValue) {
        self.written.json.extend_from_slice(b"null");
        self.written.refs.push((self.path.clone(), stored.id()));
        self.written.parts.push(stored);
    }
}
