//! The diagnostics collector every dialect's compiler writes to: problems gathered while
//! compiling go on (so a file's errors are reported together), then [`Diagnostics::finish`]
//! locates them in the file and decides whether the flow stands.

use crate::source_map::SourceMap;
use serde::de::DeserializeOwned;
use serde_json::Value;
use weft_core::{Diagnostic, Flow, Severity};

/// What compiling a document gives: the flow and its warnings, or every error.
pub type Compiled = Result<(Flow, Vec<Diagnostic>), Vec<Diagnostic>>;

/// Problems found so far while compiling one document.
#[derive(Debug, Default)]
pub struct Diagnostics {
    found: Vec<Diagnostic>,
}

impl Diagnostics {
    /// An empty collector.
    pub fn new() -> Diagnostics {
        Diagnostics::default()
    }

    /// Records a problem (an error or a warning, as `d` says).
    pub fn push(&mut self, d: Diagnostic) {
        self.found.push(d);
    }

    /// Reads the node at `ptr` as `T`, recording what is wrong there (unknown or missing
    /// keys, wrong types) when it is not one.
    pub fn parse<T: DeserializeOwned>(&mut self, v: &Value, ptr: &str) -> Option<T> {
        crate::native::parse_at(v, ptr)
            .map_err(|d| self.push(d))
            .ok()
    }

    /// Whether an error (not only warnings) was recorded.
    pub fn has_errors(&self) -> bool {
        self.found.iter().any(|d| d.severity == Severity::Error)
    }

    /// The compiler's result: `flow` with the warnings when it built one and no problem
    /// is an error, else every error; each located in the file through `map`.
    pub fn finish(self, flow: Option<Flow>, map: &SourceMap) -> Compiled {
        // A part compiled twice (a node that another node's action also runs) would
        // report its problems twice.
        let mut seen = std::collections::HashSet::new();
        let (errors, warnings): (Vec<_>, Vec<_>) = self
            .found
            .into_iter()
            .filter(|d| {
                seen.insert((
                    d.severity == Severity::Error,
                    d.pointer.clone(),
                    d.message.clone(),
                ))
            })
            .map(|d| map.locate(d))
            .partition(|d| d.severity == Severity::Error);
        match flow {
            Some(f) if errors.is_empty() => Ok((f, warnings)),
            _ => Err(errors),
        }
    }
}

impl From<Vec<Diagnostic>> for Diagnostics {
    fn from(found: Vec<Diagnostic>) -> Diagnostics {
        Diagnostics { found }
    }
}

/// A whole document read as the dialect's top-level type `T`, or the first problem,
/// located in the file.
pub fn read_document<T: DeserializeOwned>(
    doc: Value,
    map: &SourceMap,
) -> Result<T, Vec<Diagnostic>> {
    serde_path_to_error::deserialize(doc)
        .map_err(|e| vec![map.locate(crate::native::serde_diagnostic(&e))])
}
