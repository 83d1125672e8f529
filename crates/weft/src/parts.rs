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
        for (name, h) in &other.handlers {
            match self.handlers.get(name) {
                Some(mine) if !Arc::ptr_eq(mine, h) => self
                    .conflicts
                    .push(format!("two different handlers are named `{name}`")),
                Some(_) => {}
                None => {
                    self.handlers.insert(name.clone(), h.clone());
                }
            }
        }
        for (name, f) in &other.functions {
            match self.functions.get(name) {
                Some(mine) if !Arc::ptr_eq(mine, f) => self.conflicts.push(format!(
                    "two different functions are named `{name}` (two blocks share a name)"
                )),
                Some(_) => {}
                None => {
                    self.functions.insert(name.clone(), f.clone());
                }
            }
        }
        for (name, flow) in &other.flows {
            match self.flows.get(name) {
                Some(mine) if mine != flow => self
                    .conflicts
                    .push(format!("two different tools are named `{name}`")),
                Some(_) => {}
                None => {
                    self.flows.insert(name.clone(), flow.clone());
                }
            }
        }
        for (name, def) in &other.models {
            match self.models.get(name) {
                Some(mine) if mine != def => self
                    .conflicts
                    .push(format!("two different models are named `{name}`")),
                Some(_) => {}
                None => {
                    self.models.insert(name.clone(), def.clone());
                }
            }
        }
        self.conflicts.extend(other.conflicts.iter().cloned());
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
