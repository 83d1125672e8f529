//! Exposes JSON values to minijinja lazily: a lookup walks into the shared JSON value and
//! converts only the scalar it reaches, so evaluating `state.count < 5` costs the same
//! whether the state holds ten keys or ten thousand.

use crate::Scope;
use minijinja::Value as MjValue;
use minijinja::value::{Enumerator, Object, ObjectRepr};
use serde_json::Value;
use std::sync::Arc;

#[derive(Debug, Clone)]
enum Seg {
    Key(Arc<str>),
    Index(usize),
}

/// A view of one node inside a shared JSON value.
#[derive(Debug)]
struct JsonNode {
    root: Arc<Value>,
    path: Vec<Seg>,
}

impl JsonNode {
    fn target(&self) -> &Value {
        let mut cur = &*self.root;
        for seg in &self.path {
            cur = match (seg, cur) {
                (Seg::Key(k), Value::Object(m)) => m.get(&**k).unwrap_or(&Value::Null),
                (Seg::Index(i), Value::Array(a)) => a.get(*i).unwrap_or(&Value::Null),
                _ => &Value::Null,
            };
        }
        cur
    }

    fn child(&self, seg: Seg) -> MjValue {
        let mut path = Vec::with_capacity(self.path.len() + 1);
        path.extend(self.path.iter().cloned());
        path.push(seg);
        let node = JsonNode {
            root: self.root.clone(),
            path,
        };
        match node.target() {
            Value::Object(_) | Value::Array(_) => MjValue::from_object(node),
            scalar => scalar_to_mj(scalar),
        }
    }
}

fn scalar_to_mj(v: &Value) -> MjValue {
    match v {
        Value::Null => MjValue::from(()),
        Value::Bool(b) => MjValue::from(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                MjValue::from(i)
            } else if let Some(u) = n.as_u64() {
                MjValue::from(u)
            } else {
                MjValue::from(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => MjValue::from(s.as_str()),
        Value::Array(_) | Value::Object(_) => unreachable!("containers are wrapped lazily"),
    }
}

/// Converts a shared JSON value for minijinja without copying its containers.
pub fn to_mj(root: &Arc<Value>) -> MjValue {
    match &**root {
        Value::Object(_) | Value::Array(_) => MjValue::from_object(JsonNode {
            root: root.clone(),
            path: Vec::new(),
        }),
        scalar => scalar_to_mj(scalar),
    }
}

impl Object for JsonNode {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        match self.target() {
            Value::Array(_) => ObjectRepr::Seq,
            _ => ObjectRepr::Map,
        }
    }

    fn get_value(self: &Arc<Self>, key: &MjValue) -> Option<MjValue> {
        match self.target() {
            Value::Object(m) => {
                let k = key.as_str()?;
                let (k, _) = m.get_key_value(k)?;
                Some(self.child(Seg::Key(Arc::from(k.as_str()))))
            }
            Value::Array(a) => {
                let i = usize::try_from(key.as_i64()?).ok()?;
                (i < a.len()).then(|| self.child(Seg::Index(i)))
            }
            _ => None,
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        match self.target() {
            Value::Object(m) => {
                Enumerator::Values(m.keys().map(|k| MjValue::from(k.as_str())).collect())
            }
            Value::Array(a) => Enumerator::Seq(a.len()),
            _ => Enumerator::Empty,
        }
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        match self.target() {
            Value::Object(m) => Some(m.len()),
            Value::Array(a) => Some(a.len()),
            _ => Some(0),
        }
    }

    fn is_true(self: &Arc<Self>) -> bool {
        self.enumerator_len().unwrap_or(0) > 0
    }
}

/// The name under which the scope hands `native()` the host's functions; not a name a
/// template can bind.
pub(crate) const NATIVES: &str = "\u{0}natives";

/// The host's functions, as the scope hands them to `native()`.
#[derive(Debug)]
pub(crate) struct NativesObject(pub(crate) Arc<dyn crate::Natives>);

impl Object for NativesObject {}

/// The root namespace of an evaluation.
#[derive(Debug)]
pub(crate) struct ScopeObject(pub(crate) Scope);

impl Object for ScopeObject {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &MjValue) -> Option<MjValue> {
        let key = key.as_str()?;
        if key == NATIVES {
            let natives = self.0.natives.clone()?;
            return Some(MjValue::from_object(NativesObject(natives)));
        }
        self.0.bound(key).map(|b| match b {
            crate::Bound::Value(v) => to_mj(v),
            crate::Bound::Map(m) => MjValue::from_object(SharedMapObject(m.clone())),
        })
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        let mut names: Vec<&str> = Vec::new();
        for (n, _) in &self.0.bindings {
            if !names.contains(&&**n) {
                names.push(n);
            }
        }
        Enumerator::Values(names.into_iter().map(MjValue::from).collect())
    }
}

/// A shared map (the run state), seen without copying: each value it reaches is a view
/// of that value.
#[derive(Debug)]
pub(crate) struct SharedMapObject(pub(crate) Arc<crate::SharedMap>);

impl Object for SharedMapObject {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &MjValue) -> Option<MjValue> {
        self.0.get(key.as_str()?).map(to_mj)
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Values(self.0.keys().map(|k| MjValue::from(k.as_str())).collect())
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(self.0.len())
    }

    fn is_true(self: &Arc<Self>) -> bool {
        !self.0.is_empty()
    }
}
