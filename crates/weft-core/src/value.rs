//! Values exchanged between blocks, and the state patches blocks return.

use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::sync::Arc;

/// Every value a block receives or returns is JSON.
pub type Value = serde_json::Value;

/// What kind of JSON value `v` is, as messages name it (`a list`, `an object`, ...).
pub fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

pub use weft_value::{Kind, Node, Shared, SharedMap, WeakShared};

/// The run state: a JSON object shared by reference, copied on write at its top level.
///
/// A branch of a fan-out starts from its parent's state (one pointer); when it writes a
/// key, it copies the top-level keys and pointers, not the values, so a state holding a
/// list of 100,000 items costs a branch the same whether it writes or not. A write below
/// a top-level key copies that key's value if another holder shares it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State(Arc<SharedMap>);

impl State {
    /// The state `value` holds: its keys when it is an object; anything else is an
    /// empty state (a state is always an object).
    pub fn from_value(value: Value) -> State {
        match value {
            Value::Object(map) => State(Arc::new(
                map.into_iter().map(|(k, v)| (k, Shared::new(v))).collect(),
            )),
            _ => State::default(),
        }
    }

    /// The value at top-level `key`.
    pub fn get(&self, key: &str) -> Option<&Shared> {
        self.0.get(key)
    }

    /// The shared object itself, for a reader that walks it without copying.
    pub fn shared(&self) -> &Arc<SharedMap> {
        &self.0
    }

    /// The state as one JSON value: a deep copy, for readers that need one.
    pub fn to_value(&self) -> Value {
        Value::Object(
            self.0
                .iter()
                .map(|(k, v)| (k.clone(), v.to_value()))
                .collect(),
        )
    }

    /// The state as one shared value: a pointer to it, not a copy.
    pub fn to_shared(&self) -> Shared {
        Shared::Object(self.0.clone())
    }

    /// Applies `patch`: see [`Patch::apply_to`] for what each write does.
    pub fn apply(&mut self, patch: &Patch) {
        if patch.is_empty() {
            return;
        }
        let map = Arc::make_mut(&mut self.0);
        for op in &patch.0 {
            // A patch read back from a damaged journal may hold an empty path: it writes
            // nothing rather than failing the run.
            let Some((first, rest)) = op.path.split_first() else {
                continue;
            };
            if rest.is_empty() {
                map.insert(first.clone(), op.value.clone());
                continue;
            }
            let slot = map.entry(first.clone()).or_insert_with(Shared::null);
            write_at(slot.make_mut(), rest, &op.value);
        }
    }
}

impl Serialize for State {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter())
    }
}

/// One write to the run state: `path` names nested object keys from the state's root.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatchOp {
    /// Object keys from the root of the state; never empty.
    pub path: Vec<String>,
    /// The value stored there, shared with whoever else holds it (the block's output,
    /// say): writing it into the state copies nothing at the top level.
    pub value: Shared,
}

/// An ordered list of state writes. Patches compose by concatenation, so the patches of
/// parallel branches merge deterministically in branch order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Patch(pub Vec<PatchOp>);

impl Patch {
    /// The patch as the JSON it serializes to, its values shared rather than copied
    /// (a journal entry holds a step's patch this way).
    pub fn to_shared(&self) -> Shared {
        let ops = self.0.iter().map(|op| {
            let mut o = SharedMap::new();
            o.insert("path".into(), Shared::new(op.path.clone().into()));
            o.insert("value".into(), op.value.clone());
            Shared::object(o)
        });
        Shared::array(ops.collect())
    }

    /// True when the patch writes nothing.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds a write of `value` at the dotted or split `path`.
    pub fn set(&mut self, path: Vec<String>, value: Value) {
        self.set_shared(path, Shared::new(value));
    }

    /// Adds a write of a shared `value` at `path`.
    pub fn set_shared(&mut self, path: Vec<String>, value: impl Into<Shared>) {
        let value = value.into();
        if !path.is_empty() {
            self.0.push(PatchOp { path, value });
        }
    }

    /// Adds one write per key of `object` (a shallow merge), each sharing what the
    /// object shares; non-objects are ignored.
    pub fn merge_object(&mut self, object: &Shared) {
        let node = object.node();
        for k in node.keys() {
            if let Some(v) = node.get(k) {
                self.0.push(PatchOp {
                    path: vec![k.to_owned()],
                    value: v.to_shared(),
                });
            }
        }
    }

    /// Appends every write of `other` after this patch's own.
    pub fn extend(&mut self, other: Patch) {
        self.0.extend(other.0);
    }

    /// Appends `other` as [`Patch::extend`] does, and [compacts](Patch::compact) the
    /// patch each time its length passes a power of two (from 64): a loop of 200,000
    /// iterations that writes the same keys holds its last writes, not all 200,000,
    /// and compacting costs a constant per write.
    pub fn extend_compacting(&mut self, other: Patch) {
        const FROM: usize = 64;
        let before = self.0.len();
        self.0.extend(other.0);
        let after = self.0.len();
        if after >= FROM && (before < FROM || after.ilog2() > before.ilog2()) {
            self.compact();
        }
    }

    /// Drops every write that a later one replaces (one at the same path, or at a path
    /// that contains it): the patch then makes the same state from any state.
    pub fn compact(&mut self) {
        let mut written: HashSet<&[String]> = HashSet::new();
        let keep: Vec<bool> = self
            .0
            .iter()
            .rev()
            .map(|op| {
                let replaced = (1..=op.path.len()).any(|n| written.contains(&op.path[..n]));
                if !replaced {
                    written.insert(&op.path);
                }
                !replaced
            })
            .collect();
        let mut keep = keep.into_iter().rev();
        self.0.retain(|_| keep.next().unwrap_or(true));
    }

    /// Applies the writes in order to `state`, creating intermediate objects as needed
    /// (a non-object in the way is replaced by an object).
    pub fn apply_to(&self, state: &mut Value) {
        for op in &self.0 {
            write_at(state, &op.path, &op.value);
        }
    }
}

/// Writes `value` at `path` below `at`, making objects of whatever is in the way.
fn write_at(at: &mut Value, path: &[String], value: &Shared) {
    let mut cur = at;
    let Some((last, parents)) = path.split_last() else {
        return;
    };
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
        .insert(last.clone(), value.to_value());
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
    fn a_patch_as_a_shared_value_is_its_json_and_shares_its_values() {
        let list = Shared::new(json!([1, 2, 3]));
        let mut patch = Patch::default();
        patch.set_shared(vec!["a".into(), "b".into()], list.clone());
        patch.set(vec!["n".into()], json!(1));
        let shared = patch.to_shared();
        assert_eq!(shared, serde_json::to_value(&patch).unwrap());
        match shared.node().at(0).and_then(|op| op.get("value")) {
            Some(Node::Shared(v)) => assert!(Shared::ptr_eq(v, &list)),
            _ => panic!("the value is not shared"),
        }
    }

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
    fn compacting_keeps_the_state_a_patch_makes_from_any_state() {
        let writes = [
            ("a.b", json!(1)),
            ("x", json!("x0")),
            ("a.c.d", json!(2)),
            ("a", json!({"fresh": true})),
            ("a.e", json!(3)),
            ("x", json!("x1")),
            ("y.z", json!([1])),
            ("y", json!(7)),
            ("y.w", json!(8)),
        ];
        let mut p = Patch::default();
        for (path, v) in &writes {
            p.set(split_path(path), v.clone());
        }
        let mut compacted = p.clone();
        compacted.compact();
        let paths: Vec<String> = compacted.0.iter().map(|op| op.path.join(".")).collect();
        assert_eq!(paths, ["a", "a.e", "x", "y", "y.w"]);
        for base in [
            json!({}),
            json!({"a": 5, "x": {"deep": 1}, "keep": 1}),
            json!({"a": {"b": 0, "other": 1}, "y": "s"}),
        ] {
            let (mut full, mut short) = (base.clone(), base.clone());
            p.apply_to(&mut full);
            compacted.apply_to(&mut short);
            assert_eq!(full, short, "from {base}");
        }
    }

    #[test]
    fn a_long_run_of_the_same_writes_stays_short() {
        let mut p = Patch::default();
        for i in 0..100_000 {
            let mut step = Patch::default();
            step.set(split_path("count"), json!(i));
            step.set(split_path("log.last"), json!(i));
            p.extend_compacting(step);
        }
        assert!(p.0.len() < 64, "{} writes kept", p.0.len());
        let mut state = json!({});
        p.apply_to(&mut state);
        assert_eq!(state, json!({"count": 99_999, "log": {"last": 99_999}}));
    }

    #[test]
    fn a_state_makes_what_a_value_makes_and_shares_what_it_does_not_write() {
        let base = json!({"items": [1, 2, 3], "x": 5, "deep": {"a": 1}, "s": "t"});
        let mut p = Patch::default();
        p.set(split_path("deep.b"), json!(2));
        p.set(split_path("x.y"), json!(true));
        p.set(split_path("new"), json!([0]));
        p.set(split_path("s"), json!("u"));
        let mut value = base.clone();
        p.apply_to(&mut value);
        let parent = State::from_value(base);
        let mut branch = parent.clone();
        branch.apply(&p);
        assert_eq!(branch.to_value(), value);
        assert_eq!(serde_json::to_value(&branch).unwrap(), value);
        // Key order is the value's: written keys keep their place, new ones come last.
        let keys: Vec<&String> = branch.shared().keys().collect();
        assert_eq!(keys, ["items", "x", "deep", "s", "new"]);
        // The parent is unchanged, and the key the branch did not write is shared.
        assert_eq!(parent.get("x"), Some(&Shared::new(json!(5))));
        assert!(Shared::ptr_eq(
            &parent.shared()["items"],
            &branch.shared()["items"]
        ));
        assert_eq!(State::from_value(json!(3)), State::default());
    }

    #[test]
    fn an_empty_path_read_back_from_a_journal_writes_nothing() {
        let p: Patch = serde_json::from_value(json!([{"path": [], "value": 1}])).unwrap();
        let mut value = json!({"a": 1});
        p.apply_to(&mut value);
        assert_eq!(value, json!({"a": 1}));
        let mut state = State::from_value(json!({"a": 1}));
        state.apply(&p);
        assert_eq!(state.to_value(), json!({"a": 1}));
    }

    #[test]
    fn later_writes_win_in_order() {
        let mut state = json!({});
        let mut a = Patch::default();
        a.merge_object(&Shared::new(json!({"k": 1})));
        let mut b = Patch::default();
        b.merge_object(&Shared::new(json!({"k": 2})));
        a.extend(b);
        a.apply_to(&mut state);
        assert_eq!(state, json!({"k": 2}));
    }
}
