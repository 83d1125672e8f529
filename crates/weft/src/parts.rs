//! What a block needs from the host beyond its IR: the native handlers and pure functions
//! it calls, and the sub-flows that serve as its tools. Blocks carry their parts; a
//! composite merges its children's, so a flow's root knows everything to register.

use indexmap::IndexMap;
use std::sync::Arc;
use weft_core::ir;
use weft_core::ports::Native;
use weft_engine::Function;

/// The host-side pieces of a block.
#[derive(Clone, Default)]
pub(crate) struct Parts {
    /// Native handlers by registered name.
    pub(crate) handlers: IndexMap<String, Arc<dyn Native>>,
    /// Pure functions templates call as `native(name, ...)`.
    pub(crate) functions: IndexMap<String, Function>,
    /// Sub-flows (tools) by name.
    pub(crate) flows: IndexMap<String, ir::Flow>,
    /// Model aliases generators may name (a scripted model, a provider with options).
    pub(crate) models: IndexMap<String, ir::ModelDef>,
    /// Two different things registered under one name, found while merging.
    pub(crate) conflicts: Vec<String>,
}

impl Parts {
    /// Adds `other`'s parts. The same handler or function reached twice (a block used in
    /// two places) is one registration; two different ones under one name are a conflict.
    pub(crate) fn merge(&mut self, other: &Parts) {
        let c = &mut self.conflicts;
        for (name, h) in &other.handlers {
            add(&mut self.handlers, c, name, h, Arc::ptr_eq, "handlers");
        }
        for (name, f) in &other.functions {
            add(&mut self.functions, c, name, f, Arc::ptr_eq, "functions");
        }
        for (name, flow) in &other.flows {
            add(&mut self.flows, c, name, flow, |a, b| a == b, "tools");
        }
        for (name, def) in &other.models {
            add(&mut self.models, c, name, def, |a, b| a == b, "models");
        }
        self.conflicts.extend(other.conflicts.iter().cloned());
    }

    /// Defines the model alias `name`.
    pub(crate) fn model(&mut self, name: &str, def: &ir::ModelDef) {
        add(
            &mut self.models,
            &mut self.conflicts,
            name,
            def,
            |a, b| a == b,
            "models",
        );
    }

    /// Registers `f` under `name`, returning the name.
    pub(crate) fn function(&mut self, name: String, f: Function) -> String {
        if self.functions.contains_key(&name) {
            self.conflicts
                .push(format!("two different functions are named `{name}`"));
        }
        self.functions.insert(name.clone(), f);
        name
    }
}

/// Adds `value` under `name` to `map`, unless `same` finds it there already; a different
/// `what` under that name is a conflict.
fn add<V: Clone>(
    map: &mut IndexMap<String, V>,
    conflicts: &mut Vec<String>,
    name: &str,
    value: &V,
    same: impl Fn(&V, &V) -> bool,
    what: &str,
) {
    match map.get(name) {
        Some(mine) if !same(mine, value) => {
            conflicts.push(format!("two different {what} are named `{name}`"))
        }
        Some(_) => {}
        None => {
            map.insert(name.to_owned(), value.clone());
        }
    }
}
