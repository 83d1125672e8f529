//! Exposes JSON values to minijinja lazily: a lookup walks into the shared JSON value and
//! converts only the scalar it reaches, so evaluating `state.count < 5` costs the same
//! whether the state holds ten keys or ten thousand.

use crate::Scope;
use minijinja::Value as MjValue;
use minijinja::value::{Enumerator, Object, ObjectRepr};
use serde_json::Value;
use std::sync::Arc;
use weft_value::{Kind, Node, Shared};

#[derive(Debug, Clone)]
enum Seg {
    Key(Arc<str>),
    Index(usize),
}

/// A view of one node inside a shared value.
#[derive(Debug)]
struct JsonNode {
    root: Shared,
    path: Vec<Seg>,
}

static NULL: Value = Value::Null;

impl JsonNode {
    fn target(&self) -> Node<'_> {
        let mut cur = self.root.node();
        for seg in &self.path {
            let next = match seg {
                Seg::Key(k) => cur.get(k),
                Seg::Index(i) => cur.at(*i),
            };
            cur = next.unwrap_or(Node::Json(&NULL));
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
        match node.target().kind() {
            Kind::Scalar(scalar) => scalar_to_mj(scalar),
            _ => MjValue::from_object(node),
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
    shared_to_mj(&Shared::Json(root.clone()))
}

/// Converts a shared value for minijinja without copying its containers.
pub fn shared_to_mj(root: &Shared) -> MjValue {
    match root.node().kind() {
        Kind::Scalar(scalar) => scalar_to_mj(scalar),
        _ => MjValue::from_object(JsonNode {
            root: root.clone(),
            path: Vec::new(),
        }),
    }
}

/// The shared value `v` is a view of, when it is one (a lookup into a bound value, such
/// as `state.items`, or what `pick(state, 'items')` holds), without copying it.
pub(crate) fn viewed(v: &MjValue) -> Option<Shared> {
    let node = v.downcast_object_ref::<JsonNode>()?;
    Some(node.target().to_shared())
}

impl Object for JsonNode {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        match self.target().kind() {
            Kind::Array(_) => ObjectRepr::Seq,
            _ => ObjectRepr::Map,
        }
    }

    fn get_value(self: &Arc<Self>, key: &MjValue) -> Option<MjValue> {
        let target = self.target();
        match target.kind() {
            Kind::Object(_) => {
                let k = key.as_str()?;
                target.get(k)?;
                Some(self.child(Seg::Key(Arc::from(k))))
            }
            Kind::Array(n) => {
                let i = usize::try_from(key.as_i64()?).ok()?;
                (i < n).then(|| self.child(Seg::Index(i)))
            }
            Kind::Scalar(_) => None,
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        let target = self.target();
        match target.kind() {
            Kind::Object(_) => {
                Enumerator::Values(target.keys().into_iter().map(MjValue::from).collect())
            }
            Kind::Array(n) => Enumerator::Seq(n),
            Kind::Scalar(_) => Enumerator::Empty,
        }
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(match self.target().kind() {
            Kind::Object(n) | Kind::Array(n) => n,
            Kind::Scalar(_) => 0,
        })
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
            let natives = self.0.natives_bound()?.clone();
            return Some(MjValue::from_object(NativesObject(natives)));
        }
        self.0.bound(key).map(shared_to_mj)
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        let mut names: Vec<&str> = Vec::new();
        for n in self.0.names() {
            if !names.contains(&n) {
                names.push(n);
            }
        }
        Enumerator::Values(names.into_iter().map(MjValue::from).collect())
    }
}
