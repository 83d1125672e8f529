//! Values exchanged between blocks, and the state patches blocks return.

use serde::{Deserialize, Serialize};

/// Every value a block receives or returns is JSON.
pub type Value = serde_json::Value;

/// One write to the run state: `path` names nested object keys from the state's root.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatchOp {
    /// Object keys from the root of the state; never empty.
    pub path: Vec<String>,
    /// The value stored there.
    pub value: Value,
}

/// An ordered list of state writes. Patches compose by concatenation, so the patches of
/// parallel branches merge deterministically in branch order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Patch(pub Vec<PatchOp>);

impl Patch {
    /// True when the patch writes nothing.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds a write of `value` at the dotted or split `path`.
    pub fn set(&mut self, path: Vec<String>, value: Value) {
        if !path.is_empty() {
            self.0.push(PatchOp { path, value });
        }
    }

    /// Adds one write per key of `object` (a shallow merge); non-objects are ignored.
    pub fn merge_object(&mut self, object: &Value) {
        if let Value::Object(map) = object {
            for (k, v) in map {
                self.0.push(PatchOp {
                    path: vec![k.clone()],
                    value: v.clone(),
                });
            }
        }
    }

    /// Appends every write of `other` after this patch's own.
    pub fn extend(&mut self, other: Patch) {
        self.0.extend(other.0);
    }

    /// Applies the writes in order to `state`, creating intermediate objects as needed
    /// (a non-object in the way is replaced by an object).
    pub fn apply_to(&self, state: &mut Value) {
        for op in &self.0 {
            let mut cur = &mut *state;
            let (last, parents) = op.path.split_last().expect("patch paths are never empty");
            for key in parents {
                if !cur.is_object() {
                    *cur = Value::Object(Default::default());
                }
                cur = cur
                    .as_object_mut()
                    .expect("just made an object")
                    .entry(key.clone())
                    .or_insert(Value::Null);
            }
            if !cur.is_object() {
                *cur = Value::Object(Default::default());
            }
            cur.as_object_mut()
                .expect("just made an object")
                .insert(last.clone(), op.value.clone());
        }
    }
}

/// Splits a dotted state path (`results.draft`) into its keys.
pub fn split_path(path: &str) -> Vec<String> {
    path.split('.')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_writes_create_objects_and_keep_siblings() {
        let mut state = json!({"results": {"a": 1}, "x": 5});
        let mut p = Patch::default();
        p.set(split_path("results.b"), json!(2));
        p.set(split_path("x.y"), json!(true));
        p.apply_to(&mut state);
        assert_eq!(
            state,
            json!({"results": {"a": 1, "b": 2}, "x": {"y": true}})
        );
    }

    #[test]
    fn later_writes_win_in_order() {
        let mut state = json!({});
        let mut a = Patch::default();
        a.merge_object(&json!({"k": 1}));
        let mut b = Patch::default();
        b.merge_object(&json!({"k": 2}));
        a.extend(b);
        a.apply_to(&mut state);
        assert_eq!(state, json!({"k": 2}));
    }
}
