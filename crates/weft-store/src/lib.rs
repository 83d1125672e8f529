//! # weft-store
//!
//! Owns run storage behind `weft-core`'s `Store` port (and its `TriggerStore` and
//! `ThreadStore`, in the same database): [`SqliteStore`], the durable
//! default (one file, WAL, group commit of journal appends on a writer thread), and
//! [`PostgresStore`], for many Weft processes sharing one database, and [`MemoryStore`],
//! for tests, benchmarks and embedders that need no durability.
//!
//! Must not depend on the engine or any dialect: it stores opaque JSON under keys.

mod key_row;
mod memory;
mod postgres;
mod run_row;
mod sqlite;
mod thread_row;
mod trigger_docs;

pub use memory::MemoryStore;
pub use postgres::{DEFAULT_LEASE, PostgresStore};
pub use sqlite::{Durability, SqliteStore};
