//! # weft-value
//!
//! Owns [`Shared`], the JSON value a run hands from step to step: a plain JSON value
//! behind an `Arc`, or an object or list whose parts are themselves shared. A value
//! built from others (a fan-out's results, each holding its branch's state; an object
//! template naming `{{ state }}`) then points at them instead of copying them, so a
//! thousand results of a state that holds a thousand items cost a thousand pointers to
//! one list, not a million numbers. Every reader still sees plain JSON: [`Shared`]
//! serializes as the value it stands for, compares as it, and [`Node`] walks it.
//!
//! Depends on no other Weft crate.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// A JSON value.
pub type Value = serde_json::Value;

/// An object whose values are shared: copying it copies its keys and pointers, never the
/// values they point to.
pub type SharedMap = IndexMap<String, Shared>;

/// A JSON value held by reference, whose objects and lists may hold shared parts.
///
/// Cloning one is a pointer copy. Values behind it are never changed in place while
/// shared ([`Shared::make_mut`] copies first), which is what lets a store recognise a
/// value it has written by its pointer ([`Shared::ptr_eq`]).
#[derive(Clone)]
pub enum Shared {
    /// A plain JSON value.
    Json(Arc<Value>),
    /// An object whose values are shared (a run's state, or an object built of shared
    /// values).
    Object(Arc<SharedMap>),
    /// A list whose items are shared (a fan-out's results).
    Array(Arc<Vec<Shared>>),
}

/// A [`Shared`] value's allocation, held without the value: whether a value met later
/// is the same one, by pointer (the weak reference keeps the allocation from being
/// reused), without keeping a large value alive for it.
pub enum WeakShared {
    /// Of a [`Shared::Json`].
    Json(std::sync::Weak<Value>),
    /// Of a [`Shared::Object`].
    Object(std::sync::Weak<SharedMap>),
    /// Of a [`Shared::Array`].
    Array(std::sync::Weak<Vec<Shared>>),
}

impl WeakShared {
    /// `value`'s allocation.
    pub fn of(value: &Shared) -> WeakShared {
        match value {
            Shared::Json(v) => WeakShared::Json(Arc::downgrade(v)),
            Shared::Object(m) => WeakShared::Object(Arc::downgrade(m)),
            Shared::Array(a) => WeakShared::Array(Arc::downgrade(a)),
        }
    }

    /// Whether `value` is the one held: the same allocation.
    pub fn is(&self, value: &Shared) -> bool {
        match (self, value) {
            (WeakShared::Json(h), Shared::Json(v)) => std::ptr::eq(h.as_ptr(), Arc::as_ptr(v)),
            (WeakShared::Object(h), Shared::Object(m)) => std::ptr::eq(h.as_ptr(), Arc::as_ptr(m)),
            (WeakShared::Array(h), Shared::Array(a)) => std::ptr::eq(h.as_ptr(), Arc::as_ptr(a)),
            _ => false,
        }
    }
}

impl Shared {
    /// `value`, shared.
    pub fn new(value: Value) -> Shared {
        Shared::Json(Arc::new(value))
    }

    /// JSON `null`.
    pub fn null() -> Shared {
        Shared::new(Value::Null)
    }

    /// The value as a node to walk.
    pub fn node(&self) -> Node<'_> {
        Node::Shared(self)
    }

    /// The plain JSON value, when it is one (not built of shared parts).
    pub fn as_json(&self) -> Option<&Value> {
        match self {
            Shared::Json(v) => Some(v),
            _ => None,
        }
    }

    /// The value as plain JSON: borrowed when it is plain, else a copy.
    pub fn json(&self) -> Cow<'_, Value> {
        match self {
            Shared::Json(v) => Cow::Borrowed(v),
            _ => Cow::Owned(self.to_value()),
        }
    }

    /// A deep copy as plain JSON.
    pub fn to_value(&self) -> Value {
        self.node().to_value()
    }

    /// The value as plain JSON, copied only if another holder shares it.
    pub fn into_value(self) -> Value {
        match self {
            Shared::Json(v) => Arc::unwrap_or_clone(v),
            other => other.to_value(),
        }
    }

    /// The value as one shared plain JSON value (a copy when it is built of parts).
    pub fn into_json(self) -> Arc<Value> {
        match self {
            Shared::Json(v) => v,
            other => Arc::new(other.to_value()),
        }
    }

    /// The value to change in place: made plain first, and copied if shared, so that no
    /// other holder sees the change.
    pub fn make_mut(&mut self) -> &mut Value {
        if !matches!(self, Shared::Json(_)) {
            *self = Shared::new(self.to_value());
        }
        match self {
            Shared::Json(v) => Arc::make_mut(v),
            _ => unreachable!("made plain above"),
        }
    }

    /// A list of `items`: one plain JSON list when every item is plain and held only
    /// here (moved, not copied), else a list of the shared items.
    pub fn array(items: Vec<Shared>) -> Shared {
        if items.iter().all(Shared::is_plain_and_unshared) {
            return Shared::new(Value::Array(
                items.into_iter().map(Shared::into_value).collect(),
            ));
        }
        Shared::Array(Arc::new(items))
    }

    /// An object of `entries`, plain or shared as [`Shared::array`] decides for a list.
    pub fn object(entries: SharedMap) -> Shared {
        if entries.values().all(Shared::is_plain_and_unshared) {
            return Shared::new(Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, v.into_value()))
                    .collect(),
            ));
        }
        Shared::Object(Arc::new(entries))
    }

    /// Plain JSON that no one else holds: moving it into a plain container copies
    /// nothing another holder could share.
    fn is_plain_and_unshared(&self) -> bool {
        matches!(self, Shared::Json(v) if Arc::strong_count(v) == 1)
    }

    /// Whether `a` and `b` are the same allocation (and so the same value).
    pub fn ptr_eq(a: &Shared, b: &Shared) -> bool {
        match (a, b) {
            (Shared::Json(x), Shared::Json(y)) => Arc::ptr_eq(x, y),
            (Shared::Object(x), Shared::Object(y)) => Arc::ptr_eq(x, y),
            (Shared::Array(x), Shared::Array(y)) => Arc::ptr_eq(x, y),
            _ => false,
        }
    }

    /// Whether the value is JSON `null`.
    pub fn is_null(&self) -> bool {
        matches!(self.as_json(), Some(Value::Null))
    }

    /// The value at `key`, when this is an object holding it.
    pub fn get(&self, key: &str) -> Option<Node<'_>> {
        self.node().get(key)
    }
}

impl Default for Shared {
    fn default() -> Self {
        Shared::null()
    }
}

impl From<Value> for Shared {
    fn from(v: Value) -> Self {
        Shared::new(v)
    }
}

impl From<Arc<Value>> for Shared {
    fn from(v: Arc<Value>) -> Self {
        Shared::Json(v)
    }
}

impl From<SharedMap> for Shared {
    fn from(m: SharedMap) -> Self {
        Shared::Object(Arc::new(m))
    }
}

impl From<Vec<Shared>> for Shared {
    fn from(items: Vec<Shared>) -> Self {
        Shared::Array(Arc::new(items))
    }
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shared::Json(v) => fmt::Debug::fmt(v, f),
            Shared::Object(m) => f.debug_map().entries(m.iter()).finish(),
            Shared::Array(a) => f.debug_list().entries(a.iter()).finish(),
        }
    }
}

/// Compact JSON, as `serde_json::Value` displays.
impl fmt::Display for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shared::Json(v) => fmt::Display::fmt(v, f),
            other => f.write_str(&serde_json::to_string(other).map_err(|_| fmt::Error)?),
        }
    }
}

impl PartialEq for Shared {
    fn eq(&self, other: &Shared) -> bool {
        Shared::ptr_eq(self, other) || self.node() == other.node()
    }
}

impl PartialEq<Value> for Shared {
    fn eq(&self, other: &Value) -> bool {
        self.node() == Node::Json(other)
    }
}

impl PartialEq<str> for Shared {
    fn eq(&self, other: &str) -> bool {
        self.as_json().is_some_and(|v| v == other)
    }
}

impl PartialEq<&str> for Shared {
    fn eq(&self, other: &&str) -> bool {
        self == *other
    }
}

/// `shared == 4`, `shared == true`: as `serde_json::Value` compares with them.
macro_rules! eq_with_scalar {
    ($($t:ty),*) => {$(
        impl PartialEq<$t> for Shared {
            fn eq(&self, other: &$t) -> bool {
                self.as_json().is_some_and(|v| v == other)
            }
        }
    )*};
}
eq_with_scalar!(i32, i64, u32, u64, f64, bool, String);

impl Serialize for Shared {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Shared::Json(v) => v.serialize(s),
            Shared::Object(m) => s.collect_map(m.iter()),
            Shared::Array(a) => s.collect_seq(a.iter()),
        }
    }
}

impl<'de> Deserialize<'de> for Shared {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(Shared::new)
    }
}

/// A place inside a [`Shared`] value: a shared part, or plain JSON inside one.
#[derive(Clone, Copy)]
pub enum Node<'a> {
    /// A shared part (the root, or a value of a shared object or list).
    Shared(&'a Shared),
    /// Plain JSON inside a shared part.
    Json(&'a Value),
}

/// What a [`Node`] is.
pub enum Kind<'a> {
    /// A string, number, boolean or null.
    Scalar(&'a Value),
    /// An object of this many keys.
    Object(usize),
    /// A list of this many items.
    Array(usize),
}

impl<'a> Node<'a> {
    /// The node with shared wrappers around plain JSON looked through.
    fn plain(self) -> Node<'a> {
        match self {
            Node::Shared(Shared::Json(v)) => Node::Json(v),
            other => other,
        }
    }

    /// What the node is.
    pub fn kind(self) -> Kind<'a> {
        match self.plain() {
            Node::Shared(Shared::Object(m)) => Kind::Object(m.len()),
            Node::Shared(Shared::Array(a)) => Kind::Array(a.len()),
            Node::Json(Value::Object(m)) => Kind::Object(m.len()),
            Node::Json(Value::Array(a)) => Kind::Array(a.len()),
            Node::Json(v) => Kind::Scalar(v),
            Node::Shared(Shared::Json(v)) => Kind::Scalar(v),
        }
    }

    /// The value at `key`, when this is an object holding it.
    pub fn get(self, key: &str) -> Option<Node<'a>> {
        match self.plain() {
            Node::Shared(Shared::Object(m)) => m.get(key).map(Node::Shared),
            Node::Json(Value::Object(m)) => m.get(key).map(Node::Json),
            _ => None,
        }
    }

    /// The item at `index`, when this is a list that long.
    pub fn at(self, index: usize) -> Option<Node<'a>> {
        match self.plain() {
            Node::Shared(Shared::Array(a)) => a.get(index).map(Node::Shared),
            Node::Json(Value::Array(a)) => a.get(index).map(Node::Json),
            _ => None,
        }
    }

    /// An object's keys in order (none for anything else).
    pub fn keys(self) -> Vec<&'a str> {
        match self.plain() {
            Node::Shared(Shared::Object(m)) => m.keys().map(String::as_str).collect(),
            Node::Json(Value::Object(m)) => m.keys().map(String::as_str).collect(),
            _ => Vec::new(),
        }
    }

    /// The plain JSON value the node is, without copying it, when it is plain.
    pub fn as_json(self) -> Option<&'a Value> {
        match self.plain() {
            Node::Json(v) => Some(v),
            Node::Shared(_) => None,
        }
    }

    /// The node as plain JSON: borrowed when it is plain, else a copy.
    pub fn json(self) -> Cow<'a, Value> {
        match self.as_json() {
            Some(v) => Cow::Borrowed(v),
            None => Cow::Owned(self.to_value()),
        }
    }

    /// A deep copy as plain JSON.
    pub fn to_value(self) -> Value {
        match self.plain() {
            Node::Json(v) => v.clone(),
            Node::Shared(Shared::Object(m)) => {
                Value::Object(m.iter().map(|(k, v)| (k.clone(), v.to_value())).collect())
            }
            Node::Shared(Shared::Array(a)) => {
                Value::Array(a.iter().map(Shared::to_value).collect())
            }
            Node::Shared(Shared::Json(v)) => (**v).clone(),
        }
    }

    /// The node as a shared value: a pointer copy when it is a shared part, else a copy
    /// of the plain JSON.
    pub fn to_shared(self) -> Shared {
        match self {
            Node::Shared(s) => s.clone(),
            Node::Json(v) => Shared::new(v.clone()),
        }
    }
}

impl PartialEq for Node<'_> {
    fn eq(&self, other: &Node<'_>) -> bool {
        if let (Some(a), Some(b)) = (self.as_json(), other.as_json()) {
            return a == b;
        }
        match (self.kind(), other.kind()) {
            (Kind::Object(n), Kind::Object(m)) => {
                n == m
                    && self
                        .keys()
                        .into_iter()
                        .all(|k| self.get(k).zip(other.get(k)).is_some_and(|(a, b)| a == b))
            }
            (Kind::Array(n), Kind::Array(m)) => {
                n == m && (0..n).all(|i| self.at(i).zip(other.at(i)).is_some_and(|(a, b)| a == b))
            }
            (Kind::Scalar(a), Kind::Scalar(b)) => a == b,
            _ => false,
        }
    }
}

impl Serialize for Node<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Node::Shared(v) => v.serialize(s),
            Node::Json(v) => v.serialize(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn results_sharing(list: &Shared, n: usize) -> Shared {
        let results: Vec<Shared> = (0..n)
            .map(|i| {
                let mut state = SharedMap::new();
                state.insert("items".into(), list.clone());
                state.insert("r".into(), Shared::new(json!(i)));
                let mut result = SharedMap::new();
                result.insert("state".into(), state.into());
                result.insert("index".into(), Shared::new(json!(i)));
                result.into()
            })
            .collect();
        results.into()
    }

    #[test]
    fn a_value_built_of_shared_parts_reads_serializes_and_compares_as_plain_json() {
        let list = Shared::new(json!([1, 2, 3]));
        let built = results_sharing(&list, 2);
        let plain = json!([
            {"state": {"items": [1, 2, 3], "r": 0}, "index": 0},
            {"state": {"items": [1, 2, 3], "r": 1}, "index": 1},
        ]);
        assert_eq!(built.to_value(), plain);
        assert_eq!(serde_json::to_value(&built).unwrap(), plain);
        assert_eq!(built, Shared::new(plain.clone()));
        assert_eq!(built, plain);
        let r = built
            .node()
            .at(1)
            .and_then(|n| n.get("state"))
            .and_then(|n| n.get("r"));
        assert_eq!(r.and_then(Node::as_json), Some(&json!(1)));
        assert_eq!(
            built.node().at(0).unwrap().get("state").unwrap().keys(),
            ["items", "r"]
        );
        assert_ne!(built, Shared::new(json!([])));
    }

    #[test]
    fn results_of_a_shared_list_point_at_it_rather_than_copy_it() {
        let list = Shared::new(json!((0..1000).collect::<Vec<_>>()));
        let built = results_sharing(&list, 1000);
        let Shared::Json(arc) = &list else {
            unreachable!()
        };
        // One holder here, one per result: the list itself was never copied.
        assert_eq!(Arc::strong_count(arc), 1001);
        let inner = built
            .node()
            .at(999)
            .unwrap()
            .get("state")
            .unwrap()
            .get("items");
        assert!(matches!(inner, Some(Node::Shared(s)) if Shared::ptr_eq(s, &list)));
    }

    #[test]
    fn changing_a_shared_value_in_place_leaves_other_holders_alone() {
        let list = Shared::new(json!([1]));
        let built = results_sharing(&list, 1);
        let mut changed = built.clone();
        changed.make_mut()[0]["index"] = json!(9);
        assert_eq!(built.to_value()[0]["index"], json!(0));
        assert_eq!(changed.to_value()[0]["index"], json!(9));
        assert_eq!(list, json!([1]));
    }

    #[test]
    fn a_list_of_values_held_nowhere_else_is_one_plain_list() {
        let plain = Shared::array(vec![Shared::new(json!(1)), Shared::new(json!({"a": 2}))]);
        assert_eq!(plain.as_json(), Some(&json!([1, {"a": 2}])));
        let held = Shared::new(json!([0]));
        let built = Shared::array(vec![held.clone(), Shared::new(json!(1))]);
        assert!(matches!(built, Shared::Array(_)));
        assert_eq!(built, json!([[0], 1]));
        let object: SharedMap = [("k".to_owned(), held.clone())].into_iter().collect();
        assert!(matches!(Shared::object(object), Shared::Object(_)));
    }

    #[test]
    fn a_shared_value_reads_back_as_plain_json() {
        let s: Shared = serde_json::from_str(r#"{"a": [1, {"b": null}]}"#).unwrap();
        assert!(s.as_json().is_some());
        assert_eq!(s, json!({"a": [1, {"b": null}]}));
        assert!(Shared::null().is_null());
    }
}
