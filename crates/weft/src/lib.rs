//! # weft
//!
//! Weft's Rust library API: spec 002's programming model, in which four primitives —
//! [`handler`], [`generator`], [`sequencer`] and [`router`] — compose into any AI
//! workflow. Each builder produces a [`Block`] that compiles to Weft's core IR, so a flow
//! built in Rust runs on the same engine as one loaded from a file: it is journaled
//! (a resumed run never repeats a step), pauses at approvals, streams events, and
//! converts to native YAML ([`Block::to_yaml`]) and back.
//!
//! ```
//! use weft::prelude::*;
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let words = handler("words").execute(|text: String, _ctx| async move {
//!     Ok(text.split_whitespace().count())
//! });
//! let pipeline = sequencer("count")
//!     .then(words)
//!     .then_if(|n: usize| n > 3, handler("long").execute(|n: usize, _ctx| async move { Ok(n * 10) }))
//!     .map(|n: usize| format!("{n} words"));
//! let block = pipeline.build();
//! let runtime = Runtime::builder().register(&block).build().unwrap();
//! let run = runtime.run(&block, "one two three four").await.unwrap();
//! assert_eq!(run.output.unwrap(), "40 words");
//! # });
//! ```
//!
//! Closures (predicates, connectors, selectors) become named functions that templates
//! call as `native("name", ...)`: the YAML of a flow names them, and a program that
//! loads it registers the same blocks with [`Runtime::builder`]. They are pure and run
//! again on replay; effects belong in handlers, whose results are journaled.
//!
//! Owns the builders, the runtime facade and the test harness. Depends on the engine,
//! the store, the model router and the native format; no dialect depends on it.

mod approval;
mod block;
mod func;
mod generator;
mod handler;
mod parts;
mod router;
mod runtime;
mod scope;
mod sequencer;
pub mod testing;
pub mod utility;

pub use approval::approval;
pub use block::{Block, Kind};
pub use generator::{AgentType, Generator, generator};
pub use handler::{Ctx, HandlerBuilder, Parent, handler};
pub use router::{Router, router};
pub use runtime::{Runtime, RuntimeBuilder};
pub use scope::{Resource, Scope, define_resource};
pub use sequencer::{
    BranchCase, DEFAULT_MAX_ITERATIONS, Entry, RescueCase, Sequencer, entry, sequencer,
};
pub use weft_core::ports::Scopes;

pub use weft_core::ir;
pub use weft_core::{BlockError, ErrorKind, Value};
pub use weft_engine::{Engine, RunResult};

/// Why a block could not be built into a flow or run.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Two different things share a name, or a sequencer's steps do not fit together.
    #[error("{0}")]
    Names(String),
    /// The flow does not validate (duplicate block names, bad references, ...).
    #[error("the flow is invalid: {}", .0.iter().map(|d| format!("{} at {}", d.message, d.pointer)).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<weft_core::Diagnostic>),
    /// The block uses a handler or function the runtime was not given.
    #[error(
        "`{0}` is not registered with this runtime: pass the block to RuntimeBuilder::register"
    )]
    NotRegistered(String),
    /// The input is not JSON.
    #[error("the input is not JSON: {0}")]
    Input(String),
    /// The engine could not drive the run.
    #[error(transparent)]
    Engine(#[from] weft_engine::EngineError),
}

/// `docs/library.md`: each of spec 002's examples beside the Rust that does the same;
/// every Rust snippet there runs as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/library.md")]
mod library_guide {}

/// Everything a flow author needs, in one `use`.
pub mod prelude {
    pub use crate::sequencer::{BranchCase, Entry, RescueCase, entry};
    pub use crate::{
        AgentType, Block, BlockError, BuildError, Ctx, ErrorKind, Kind, Runtime, Scopes, approval,
        define_resource, generator, handler, router, sequencer,
    };
}
