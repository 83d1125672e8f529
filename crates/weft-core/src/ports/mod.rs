//! The traits the engine drives, one module per port. Adapters implement them without
//! depending on the engine; the engine calls them without knowing which adapter is
//! behind. Every item is re-exported here, so `weft_core::ports::Store` names the port
//! wherever it lives.

pub mod audit;
pub mod code;
pub mod events;
pub mod keys;
pub mod listing;
pub mod model;
pub mod native;
pub mod store;
pub mod threads;
pub mod triggers;
pub mod work;

pub use audit::*;
pub use code::*;
pub use events::*;
pub use keys::*;
pub use listing::*;
pub use model::*;
pub use native::*;
pub use store::*;
pub use threads::*;
pub use triggers::*;
pub use work::*;
