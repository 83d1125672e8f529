//! Stored values read back, each once per reader, their parts put back in place.

use super::parts::Path;
use crate::sqlite::{decompress, err};
use rusqlite::{Connection, OptionalExtension, params};
use std::collections::{HashMap, HashSet};
use weft_core::ports::StoreError;
use weft_core::value::{Shared, SharedMap, Value};

/// Reads the values a run's journal entries and events refer to, each once per reader:
/// a part stored once and referred to from many places is read once and shared by all
/// of them, as it was when it was written.
#[derive(Default)]
pub(in crate::sqlite) struct ValueReader {
    read: HashMap<String, Shared>,
    /// Values being read, to refuse a value that refers to itself.
    reading: HashSet<String>,
}

impl ValueReader {
    /// The value stored under `id` for run `run_id`, its parts in place.
    pub(in crate::sqlite) fn get(
        &mut self,
        conn: &Connection,
        run_id: &str,
        id: &str,
    ) -> Result<Shared, StoreError> {
        if let Some(v) = self.read.get(id) {
            return Ok(v.clone());
        }
        let corrupt = |why: String| {
            StoreError::Corrupt(format!("the stored value {id} of run {run_id}: {why}"))
        };
        if !self.reading.insert(id.to_owned()) {
            return Err(corrupt("it refers to itself".into()));
        }
        let key = uuid::Uuid::try_parse(id).map_err(|e| corrupt(e.to_string()))?;
        let row: Option<(Vec<u8>, Option<String>)> = conn
            .prepare_cached("SELECT body, refs FROM run_values WHERE run_id = ?1 AND id = ?2")
            .and_then(|mut s| {
                s.query_row(params![run_id, &key.as_bytes()[..]], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()
            })
            .map_err(|e| err("values", e))?;
        let (body, refs) = row.ok_or_else(|| corrupt("it is missing".into()))?;
        let json = decompress(&body).map_err(corrupt)?;
        let value: Value = serde_json::from_slice(&json).map_err(|e| corrupt(e.to_string()))?;
        let value = match refs {
            Some(refs) => self.with_parts(conn, run_id, value, &refs, &corrupt)?,
            None => Shared::new(value),
        };
        self.reading.remove(id);
        self.read.insert(id.to_owned(), value.clone());
        Ok(value)
    }

    /// `json` with the parts `refs` (`[[path, id], ...]`) names read and put in place;
    /// `corrupt` says where damage was found.
    fn with_parts(
        &mut self,
        conn: &Connection,
        run_id: &str,
        json: Value,
        refs: &str,
        corrupt: &dyn Fn(String) -> StoreError,
    ) -> Result<Shared, StoreError> {
        let refs: Vec<(Path, String)> =
            serde_json::from_str(refs).map_err(|e| corrupt(e.to_string()))?;
        let mut parts = Vec::with_capacity(refs.len());
        for (path, part) in refs {
            parts.push((path, self.get(conn, run_id, &part)?));
        }
        fill(json, parts).map_err(corrupt)
    }
}

/// A value kept in a column of its own ([`super::SharedValues::apart`]), its parts read
/// and put back: `json` as the column holds it, `refs` its parts.
pub(in crate::sqlite) fn read_apart(
    conn: &Connection,
    run_id: &str,
    json: Value,
    refs: &str,
    reader: &mut ValueReader,
) -> Result<Shared, StoreError> {
    let corrupt = |why: String| StoreError::Corrupt(format!("a value of run {run_id}: {why}"));
    reader.with_parts(conn, run_id, json, refs, &corrupt)
}

/// `value` with each part put at its path (where `value` holds `null`), as a value built
/// of shared parts: the parts are shared, not copied.
fn fill(value: Value, parts: Vec<(Path, Shared)>) -> Result<Shared, String> {
    if parts.is_empty() {
        return Ok(Shared::new(value));
    }
    if let Some(i) = parts.iter().position(|(path, _)| path.is_empty()) {
        return match (parts.len(), value) {
            (1, Value::Null) => Ok(parts.into_iter().nth(i).map(|(_, v)| v).unwrap_or_default()),
            _ => Err("a part stored apart in place of the whole value".into()),
        };
    }
    // Each part under the key or index its path starts with.
    let mut under: HashMap<String, Vec<(Path, Shared)>> = HashMap::new();
    for (mut path, part) in parts {
        let first = path.remove(0);
        under.entry(first).or_default().push((path, part));
    }
    let mut filled = |key: String, child: Value| match under.remove(&key) {
        Some(parts) => fill(child, parts),
        None => Ok(Shared::new(child)),
    };
    let shared = match value {
        Value::Object(m) => {
            let mut out = SharedMap::with_capacity(m.len());
            for (k, child) in m {
                let v = filled(k.clone(), child)?;
                out.insert(k, v);
            }
            Shared::object(out)
        }
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, child) in items.into_iter().enumerate() {
                out.push(filled(i.to_string(), child)?);
            }
            Shared::array(out)
        }
        _ => return Err("parts stored apart inside a value that holds none".into()),
    };
    match under.keys().next() {
        Some(k) => Err(format!(
            "a part stored apart at `{k}`, which the value does not have"
        )),
        None => Ok(shared),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parts_are_put_back_at_their_paths_and_shared() {
        let list = Shared::new(json!([1, 2, 3]));
        let value = json!({"a": [{"items": null, "n": 0}, {"items": null, "n": 1}], "b": "x"});
        let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Path>();
        let filled = fill(
            value,
            vec![
                (path(&["a", "0", "items"]), list.clone()),
                (path(&["a", "1", "items"]), list.clone()),
            ],
        )
        .unwrap();
        assert_eq!(
            filled,
            json!({"a": [{"items": [1, 2, 3], "n": 0}, {"items": [1, 2, 3], "n": 1}], "b": "x"})
        );
        let items = |i: usize| match filled.node().get("a").unwrap().at(i).unwrap().get("items") {
            Some(weft_core::value::Node::Shared(s)) => s.clone(),
            _ => panic!("not shared"),
        };
        assert!(Shared::ptr_eq(&items(0), &items(1)) && Shared::ptr_eq(&items(0), &list));
        // A path the value does not have is damage, not a value without the part.
        assert!(fill(json!({"a": 1}), vec![(path(&["b"]), list.clone())]).is_err());
        assert!(fill(json!({"a": 1}), vec![(path(&["a", "x"]), list.clone())]).is_err());
    }
}
