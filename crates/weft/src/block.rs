//! [`Block`]: the one contract every primitive shares — a name, an IR block, and the
//! host-side parts it needs — plus block-level connectors and flow conversion.

use crate::BuildError;
use crate::func;
use crate::parts::Parts;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use weft_core::ir::{self, BlockKind, TransformSpec};

/// Which of the four primitives a block is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Native Rust logic.
    Handler,
    /// A model call.
    Generator,
    /// A pipeline of blocks.
    Sequencer,
    /// A choice among declared routes.
    Router,
    /// A wait for a person's decision (Weft's addition to the spec's four).
    Approval,
}

impl Kind {
    /// The kind's name, as the spec writes it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Kind::Handler => "handler",
            Kind::Generator => "generator",
            Kind::Sequencer => "sequencer",
            Kind::Router => "router",
            Kind::Approval => "approval",
        }
    }
}

/// A composable unit of work: a handler, generator, sequencer or router.
///
/// A block is a value: clone it, nest it in sequencers, route to it, offer it to a
/// generator as a tool. Its name must be unique in a flow (it keys the journal).
#[derive(Clone)]
pub struct Block {
    pub(crate) name: String,
    pub(crate) kind: Kind,
    pub(crate) ir: ir::Block,
    pub(crate) parts: Parts,
    pub(crate) description: String,
    /// JSON Schema of the input, when the block declares one (tools need it).
    pub(crate) input_schema: Option<Value>,
    /// How many connectors were attached, for unique function names.
    connectors: u32,
}

impl std::fmt::Debug for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Block")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("ir", &self.ir)
            .finish_non_exhaustive()
    }
}

impl Block {
    pub(crate) fn new(name: String, kind: Kind, ir: ir::Block, parts: Parts) -> Block {
        Block {
            name,
            kind,
            ir,
            parts,
            description: String::new(),
            input_schema: None,
            connectors: 0,
        }
    }

    /// The block's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Which primitive it is.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The core-IR block it compiles to.
    pub fn ir(&self) -> &ir::Block {
        &self.ir
    }

    /// The same block described (a model reads the description when the block is a tool).
    pub fn describe(mut self, description: impl Into<String>) -> Block {
        self.description = description.into();
        self
    }

    /// Defines the model alias `name` for every generator in this block (and in flows
    /// that contain it): `{provider: scripted, rules: [...]}` for a deterministic
    /// model, or a provider with options such as `base_url`.
    pub fn model(mut self, name: impl Into<String>, def: ir::ModelDef) -> Block {
        self.parts.model(&name.into(), &def);
        self
    }

    /// A version of this block that accepts a different input: `f` turns what it is
    /// given into what the block expects.
    ///
    /// ```
    /// use weft::prelude::*;
    /// let search = handler("search").execute(|q: Query, _ctx| async move { Ok(q.limit) });
    /// let from_text = search.connect_input(|text: String| Query { text, limit: 10 });
    /// # #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    /// # struct Query { text: String, limit: u32 }
    /// assert_eq!(from_text.name(), "search");
    /// ```
    pub fn connect_input<T, U>(mut self, f: impl Fn(T) -> U + Send + Sync + 'static) -> Block
    where
        T: DeserializeOwned,
        U: Serialize,
    {
        let name = self.connector_name("connect_input");
        let name = self.parts.function(name, func::unary(f));
        self.ir = with_input(
            std::mem::replace(&mut self.ir, placeholder()),
            &func::call(&name, &["input"]),
        );
        self.input_schema = None;
        self
    }

    /// A version of this block whose output `f` reshapes.
    pub fn connect_output<T, U>(mut self, f: impl Fn(T) -> U + Send + Sync + 'static) -> Block
    where
        T: DeserializeOwned,
        U: Serialize,
    {
        let name = self.connector_name("connect_output");
        let name = self.parts.function(name, func::unary(f));
        let shape = transform(&func::call(&name, &["input"]));
        self.ir = wrap(std::mem::replace(&mut self.ir, placeholder()), |b| {
            vec![b, shape]
        });
        self
    }

    fn connector_name(&mut self, what: &str) -> String {
        self.connectors += 1;
        format!("{}.{what}.{}", self.name, self.connectors)
    }

    /// The whole flow this block runs as: its IR as the root, its tools as sub-flows.
    /// Names are checked here: two different handlers, functions or tools under one
    /// name, or two blocks with one name, are errors.
    pub fn to_flow(&self) -> Result<ir::Flow, BuildError> {
        if let Some(c) = self.parts.conflicts.first() {
            return Err(BuildError::Names(c.clone()));
        }
        let mut flow = ir::Flow::new(self.name.clone(), self.ir.clone());
        flow.flows = self.parts.flows.clone();
        // Tools resolve model ids in their own sub-flow.
        for sub in flow.flows.values_mut() {
            sub.models.extend(self.parts.models.clone());
        }
        flow.models = self.parts.models.clone();
        let diags = weft_core::validate::validate(&flow);
        let errors: Vec<_> = diags
            .into_iter()
            .filter(|d| d.severity == weft_core::Severity::Error)
            .collect();
        if errors.is_empty() {
            Ok(flow)
        } else {
            Err(BuildError::Invalid(errors))
        }
    }

    /// The flow in Weft's native YAML format. Handlers and closures appear by name
    /// (`handler: {name}`, `native("name", ...)`): a program that loads the YAML
    /// registers the same blocks with [`crate::Runtime`] to run it.
    pub fn to_yaml(&self) -> Result<String, BuildError> {
        Ok(weft_dialects::native::to_yaml(&self.to_flow()?))
    }
}

impl From<&Block> for Block {
    fn from(b: &Block) -> Block {
        b.clone()
    }
}

/// A transform whose output is the expression `expr`.
pub(crate) fn transform(expr: &str) -> ir::Block {
    ir::Block::new(BlockKind::Transform(TransformSpec {
        output: func::value_of(expr),
        exit: None,
    }))
}

/// A stand-in while a block is moved into its wrapper.
fn placeholder() -> ir::Block {
    ir::Block::new(BlockKind::Passthrough)
}

/// `block` with its input computed by the expression `expr`.
pub(crate) fn with_input(block: ir::Block, expr: &str) -> ir::Block {
    let mut w = wrap(block, |b| vec![b]);
    w.data.input = Some(func::value_of(expr));
    w
}

/// `block` inside an anonymous sequence of `steps(block)`.
pub(crate) fn wrap(block: ir::Block, steps: impl FnOnce(ir::Block) -> Vec<ir::Block>) -> ir::Block {
    ir::Block::new(BlockKind::Sequence(steps(block)))
}
