//! What a dialect is to the rest of Weft: a name, a way to recognise its documents, a
//! compiler to the core IR, a schema and a reference text for writers (people, editors,
//! language models), and a view that names a run's events as its specification does.
//!
//! Adding a dialect is one module implementing [`Dialect`] and one line in
//! [`crate::registry`].

use crate::diagnostics::Compiled;
use crate::source_map::SourceMap;
use crate::view::EventView;
use serde_json::Value;
use std::path::Path;
use weft_core::{Diagnostic, Flow};

/// How sure a dialect is that a document is written in it. Detection takes the most
/// confident dialect; two at the same level are an ambiguity the user resolves with
/// `--dialect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Confidence {
    /// Not this dialect.
    No,
    /// The document has a key this dialect uses, and little else tells.
    Weak,
    /// The shape fits this dialect and no stronger sign says otherwise.
    Likely,
    /// The document carries this dialect's own marker or shape.
    Certain,
}

/// Where a document is compiled: its source map and the directory files it names are
/// read from, and how deeply it is nested in the file the user gave (a sub-flow file
/// included by another counts one more).
#[derive(Debug, Clone, Copy)]
pub struct CompileContext<'a> {
    /// Pointer -> line:column of the document.
    pub map: &'a SourceMap,
    /// The directory of the document's file, when it has one. A document without one
    /// (a flow sent as text to a server, MCP or a trigger) reads no file beside it:
    /// there is no directory of its own, and the process's working directory is the
    /// operator's, not the flow author's.
    pub base_dir: Option<&'a Path>,
    /// 0 for the file the user gave; 1 for a file it includes, and so on.
    pub depth: u32,
}

impl<'a> CompileContext<'a> {
    /// The context of a top-level document.
    pub fn new(map: &'a SourceMap, base_dir: Option<&'a Path>) -> CompileContext<'a> {
        CompileContext {
            map,
            base_dir,
            depth: 0,
        }
    }

    /// The context of a file this document includes.
    pub fn nested<'b>(&self, map: &'b SourceMap, base_dir: Option<&'b Path>) -> CompileContext<'b> {
        CompileContext {
            map,
            base_dir,
            depth: self.depth + 1,
        }
    }
}

impl CompileContext<'_> {
    /// Reads and parses the file at `path` that this document includes, and compiles it
    /// with `compile` in a context nested in this one (the file's own source map and
    /// directory, one level deeper); its problems, rendered against its path, when it
    /// does not load.
    pub fn include<T>(
        &self,
        path: &Path,
        compile: impl FnOnce(Value, &CompileContext<'_>) -> Result<T, Vec<Diagnostic>>,
    ) -> Result<T, String> {
        let shown = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
        let (doc, map) = crate::source_map::parse(&text).map_err(|d| d.render(&shown))?;
        let nested = self.nested(&map, path.parent());
        compile(doc, &nested).map_err(|problems| {
            problems
                .iter()
                .map(|d| d.render(&shown))
                .collect::<Vec<_>>()
                .join("\n")
        })
    }

    /// [`CompileContext::include`] of a flow written in Weft's native format or, when
    /// detection does not find it native, in `own` (the including document's dialect).
    pub fn include_flow(&self, path: &Path, own: &dyn Dialect) -> Result<Flow, String> {
        self.include(path, |doc, nested| {
            let dialect = match crate::registry::detect(&doc) {
                Ok(d) if d.name() == "native" => d,
                _ => own,
            };
            dialect.compile(doc, nested).map(|(flow, _)| flow)
        })
    }
}

/// Why a document sent as text cannot name a file to read beside it.
pub const NO_DIRECTORY: &str =
    "the flow was sent as text, so it has no directory to read files beside it from";

/// A file format that compiles to Weft's core IR.
pub trait Dialect: Send + Sync {
    /// The name users give with `--dialect` and that runs record.
    fn name(&self) -> &'static str;

    /// One line saying what the format is.
    fn summary(&self) -> &'static str;

    /// How sure this dialect is that `doc` (an object) is written in it.
    fn detect(&self, doc: &Value) -> Confidence;

    /// Compiles a parsed document into a flow and its warnings, or every error found.
    fn compile(&self, doc: Value, cx: &CompileContext<'_>) -> Compiled;

    /// The JSON Schema of the format's documents.
    fn schema(&self) -> Value;

    /// The format's reference for a writer: its block kinds, their fields, examples.
    fn reference(&self) -> &'static str;

    /// How the format's specification names a run's events and shapes its result, for a
    /// run of `doc`. The engine's names only, unless the dialect says otherwise.
    fn event_view(&self, doc: &Value) -> EventView {
        let _ = doc;
        EventView::default()
    }

    /// Whether the compiled IR mirrors the document, so that a pointer into the IR is a
    /// pointer into the file (true only of the native format). Otherwise diagnostics
    /// about the compiled flow are located through each block's origin.
    fn ir_mirrors_document(&self) -> bool {
        false
    }
}
