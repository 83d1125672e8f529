//! [`router`]: routes are declared up front, so the flow can be validated, drawn and
//! converted; which one runs is chosen at run time by a selector.

use crate::block::{Block, Kind};
use crate::func;
use crate::parts::Parts;
use crate::sequencer::choose;
use serde::de::DeserializeOwned;
use serde_json::Value;
use weft_core::ir;

/// Starts a router named `name`.
///
/// ```
/// use weft::prelude::*;
/// let chat = handler("chat").execute(|t: String, _ctx| async move { Ok(format!("chat: {t}")) });
/// let plan = handler("plan").execute(|t: String, _ctx| async move { Ok(format!("plan: {t}")) });
/// let mode = router("mode")
///     .routes([chat, plan])
///     .select(|text: String, _state: serde_json::Value| {
///         if text.starts_with("plan") { "plan" } else { "chat" }.to_owned()
///     });
/// assert_eq!(mode.kind(), Kind::Router);
/// ```
pub fn router(name: impl Into<String>) -> Router {
    Router {
        name: name.into(),
        routes: Vec::new(),
        parts: Parts::default(),
    }
}

/// A router being configured; [`Router::select`] finishes it.
pub struct Router {
    name: String,
    routes: Vec<(String, ir::Block)>,
    parts: Parts,
}

impl Router {
    /// The routes it may take, each a block (its name is how the selector names it).
    pub fn routes(mut self, routes: impl IntoIterator<Item = impl Into<Block>>) -> Self {
        for r in routes {
            let b: Block = r.into();
            self.parts.merge(&b.parts);
            self.routes.push((b.name.clone(), b.ir));
        }
        self
    }

    /// Finishes the router: `select(input, state)` names the route to run (a name that is
    /// not a route fails the block).
    pub fn select<T: DeserializeOwned>(
        mut self,
        select: impl Fn(T, Value) -> String + Send + Sync + 'static,
    ) -> Block {
        let f = self
            .parts
            .function(format!("{}.select", self.name), func::binary(select));
        let mut ir = choose(
            &self.name,
            &func::call(&f, &["input", "state"]),
            self.routes,
            &mut self.parts,
        );
        ir.name = Some(self.name.clone());
        Block::new(self.name, Kind::Router, ir, self.parts)
    }
}
