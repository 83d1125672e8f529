//! # weft-core
//!
//! Owns the vocabulary every other Weft crate speaks: the workflow IR ([`ir`]), the
//! values blocks exchange ([`value`]), typed runtime errors and located diagnostics
//! ([`error`]), static validation ([`validate`]), the typed event stream ([`event`]), and
//! the port traits the engine drives ([`ports`], one module each: models, code sandboxes,
//! native handlers, stores, the work queue of shared stores, event sinks), model
//! [`usage`], and the [`diagram`] of a flow that front ends draw.
//!
//! It must not depend on an async runtime, on I/O, on any adapter, or on any dialect: the
//! dialect compilers produce this IR and the engine executes it, and neither needs to know
//! about the other.

pub mod diagram;
pub mod error;
pub mod event;
pub mod hash;
pub mod ir;
pub mod ports;
pub mod usage;
pub mod validate;
pub mod value;

pub use error::{BlockError, Diagnostic, ErrorKind, Loc, Severity};
pub use ir::{Block, BlockKind, Flow};
pub use value::{Patch, State, Value};
