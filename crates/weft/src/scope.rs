//! Scoped state: documents kept in the store across runs, one per session, user and
//! project (spec 002's `ctx.session`, `ctx.user`, `ctx.project`), each with the
//! resources blocks declare. Changes are atomic in the store (two handlers incrementing
//! one counter lose nothing) and happen when the handler runs: a replayed handler does
//! not change the state again.

use indexmap::IndexMap;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::sync::Arc;
use weft_core::ports::{ScopedChange, ScopedStore};
use weft_core::{BlockError, ErrorKind};

/// A resource a block declares: its state's defaults and whether blocks may change it.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    defaults: Value,
    writable: bool,
}

/// A resource whose state starts as `T::default()`; `writable` lets blocks change it.
///
/// ```
/// #[derive(serde::Serialize, Default)]
/// struct Plan { steps: Vec<String>, status: String }
/// let plan = weft::define_resource::<Plan>(true);
/// ```
pub fn define_resource<T: Serialize + Default>(writable: bool) -> Resource {
    Resource {
        defaults: serde_json::to_value(T::default()).unwrap_or(Value::Null),
        writable,
    }
}

/// What a handler declares of one scope: its state's defaults and its resources.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Declared {
    pub(crate) defaults: Option<Value>,
    pub(crate) resources: IndexMap<String, Resource>,
}

/// One scoped document, as a handler sees it.
#[derive(Clone)]
pub struct Scope {
    key: String,
    store: ScopedStore,
    defaults: Option<Value>,
    writable: bool,
    resources: IndexMap<String, Resource>,
}

fn store_error(e: weft_core::ports::StoreError) -> BlockError {
    BlockError::new(ErrorKind::Store, e.to_string())
}

impl Scope {
    /// The scope `scope` of the run, with what the handler declares of it.
    pub(crate) fn of(
        scope: &str,
        scoped: Option<&ScopedStore>,
        declared: Option<&Declared>,
    ) -> Result<Scope, BlockError> {
        let not_in = || {
            BlockError::new(
                ErrorKind::Config,
                format!(
                    "the run belongs to no {scope}: start it with Scopes {{ {scope}: Some(..), .. }}"
                ),
            )
        };
        let store = scoped.ok_or_else(not_in)?;
        let key = store.scopes.key(scope).ok_or_else(not_in)?;
        Ok(Scope {
            key,
            store: store.clone(),
            defaults: declared.and_then(|d| d.defaults.clone()),
            writable: true,
            resources: declared.map(|d| d.resources.clone()).unwrap_or_default(),
        })
    }

    /// The resource `name` the handler declared for this scope.
    pub fn resource(&self, name: &str) -> Result<Scope, BlockError> {
        let r = self.resources.get(name).ok_or_else(|| {
            BlockError::new(
                ErrorKind::Config,
                format!(
                    "no resource `{name}` is declared for `{}` (declared: {})",
                    self.key,
                    self.resources
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })?;
        Ok(Scope {
            key: format!("{}/resources/{name}", self.key),
            store: self.store.clone(),
            defaults: Some(r.defaults.clone()),
            writable: r.writable,
            resources: IndexMap::new(),
        })
    }

    /// The document: the declared defaults, overlaid by what is stored.
    pub async fn state(&self) -> Result<Value, BlockError> {
        let stored = self
            .store
            .store
            .scoped_state(&self.key)
            .await
            .map_err(store_error)?;
        Ok(self.with_defaults(stored))
    }

    /// The document as a `T`.
    pub async fn state_as<T: DeserializeOwned>(&self) -> Result<T, BlockError> {
        serde_json::from_value(self.state().await?).map_err(|e| {
            BlockError::new(
                ErrorKind::Input,
                format!(
                    "the state of `{}` is not a {}: {e}",
                    self.key,
                    std::any::type_name::<T>()
                ),
            )
        })
    }

    /// Sets these fields (an object), leaving the others; returns the new document.
    pub async fn patch_state(&self, fields: impl Serialize) -> Result<Value, BlockError> {
        let fields = serde_json::to_value(fields)
            .map_err(|e| BlockError::new(ErrorKind::Handler, format!("state patch: {e}")))?;
        self.change(ScopedChange::Patch(fields)).await
    }

    /// Adds `by` to the number at the dotted `path` (0 when absent); returns the new
    /// document.
    pub async fn inc_state(&self, path: &str, by: f64) -> Result<Value, BlockError> {
        self.change(ScopedChange::Inc {
            path: path.to_owned(),
            by,
        })
        .await
    }

    async fn change(&self, change: ScopedChange) -> Result<Value, BlockError> {
        if !self.writable {
            return Err(BlockError::new(
                ErrorKind::Handler,
                format!("`{}` is a read-only resource", self.key),
            ));
        }
        let stored = self
            .store
            .store
            .change_scoped_state(&self.key, &[change])
            .await
            .map_err(store_error)?;
        Ok(self.with_defaults(Some(stored)))
    }

    fn with_defaults(&self, stored: Option<Value>) -> Value {
        let mut doc = match &self.defaults {
            Some(Value::Object(d)) => Value::Object(d.clone()),
            _ => Value::Object(Default::default()),
        };
        if let (Value::Object(out), Some(Value::Object(s))) = (&mut doc, stored) {
            out.extend(s);
        }
        doc
    }
}

/// A handler's declarations, by scope.
pub(crate) type Declarations = Arc<IndexMap<&'static str, Declared>>;
