//! # weft-dialects
//!
//! Owns the front-end formats that compile to the core IR, behind one [`Dialect`] trait
//! and one [`registry`]: file loading, dialect detection, source maps (document pointer
//! -> line:column), the shared diagnostics collector, each dialect's JSON Schema and
//! reference text, and [`EventView`], the data that names a run's events as a dialect's
//! specification does. Weft's native YAML/JSON format and the seed dialects (`tea`,
//! `blocks`, `graph`, `souls`) are private modules reached only through the registry.
//!
//! It also owns the dataflow checks that run as a flow loads (what each block reads,
//! against what the blocks before it produce: docs/dataflow.md), reading templates with
//! `weft-expr` without evaluating them.
//!
//! Must not depend on the engine: it produces a [`Flow`] and diagnostics, nothing runs.

mod blocks;
mod dialect;
mod graph;
pub mod native;
pub mod registry;
mod shared;
mod souls;
mod tea;
pub mod view;

// The shared pieces keep their crate paths (`crate::dataflow`, ...): every dialect
// reaches them the same way.
pub use shared::source_map;
pub(crate) use shared::{dataflow, diagnostics, python_body, schema, template_text};

use std::path::Path;
use weft_core::{Diagnostic, Flow};

pub use diagnostics::{Compiled, Diagnostics};
pub use dialect::{CompileContext, Confidence, Dialect};
pub use registry::{detect, dialect, dialects};
pub use source_map::SourceMap;
pub use view::EventView;

/// The built-in actions a dialect may compile to (`weft-actions` serves them).
pub(crate) const BUILTIN_ACTIONS: &[&str] = &[
    "http.get",
    "http.post",
    "http.request",
    "json.parse",
    "file.read",
    "file.write",
    "file.append",
    "time.sleep",
];

/// A flow loaded from a file.
#[derive(Debug)]
pub struct Loaded {
    /// The compiled flow (shared, so preparing it to run does not copy it).
    pub flow: std::sync::Arc<Flow>,
    /// The dialect it was written in.
    pub dialect: &'static str,
    /// Content hash of the file's text.
    pub source_hash: String,
    /// The file's text.
    pub text: std::sync::Arc<str>,
    /// Warnings found while loading.
    pub warnings: Vec<Diagnostic>,
    /// Locates pointers into the IR, when the IR mirrors the file (native format).
    pub source_map: Option<SourceMap>,
    /// The dialect's own names for some of the run's events, and its result shape; to
    /// be stored with a run (see [`EventView::to_stored`]).
    pub events: EventView,
}

impl Loaded {
    /// [`Loaded::locate`] for each of `diagnostics` (what preparing the flow found).
    pub fn locate_all(&self, diagnostics: Vec<Diagnostic>) -> Vec<Diagnostic> {
        diagnostics.into_iter().map(|d| self.locate(d)).collect()
    }

    /// The flow's text as a store keeps it.
    pub fn flow_source(&self) -> weft_core::ports::FlowSource {
        weft_core::ports::FlowSource {
            id: weft_core::ports::FlowSource::id_of(self.dialect, &self.text),
            name: self.flow.name.clone(),
            dialect: self.dialect.to_owned(),
            text: self.text.to_string(),
            created_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64),
        }
    }

    /// Locates a diagnostic about the compiled flow (an IR pointer) in the file: through
    /// the source map for the native format, through block origins for the others.
    pub fn locate(&self, mut d: Diagnostic) -> Diagnostic {
        match &self.source_map {
            Some(m) => m.locate(d),
            None => {
                if d.loc.is_none() {
                    d.loc = weft_core::validate::origin_at(&self.flow, &d.pointer);
                }
                d
            }
        }
    }
}

/// How run `rec` is presented: the view stored with it when it started. A run started
/// by a Weft that stored no view gets one from the file it started from, if that file is
/// still there unchanged (its content hash matches); otherwise the engine's names.
pub fn view_of_run(rec: &weft_core::ports::RunRecord) -> EventView {
    if rec.view.is_some() {
        return EventView::from_stored(rec.view.as_ref());
    }
    let (Some(source), Some(name)) = (rec.source.as_deref(), rec.dialect.as_deref()) else {
        return EventView::default();
    };
    let Ok(text) = std::fs::read_to_string(source) else {
        return EventView::default();
    };
    if rec.source_hash.as_deref() != Some(weft_core::hash::content_hash(text.as_bytes()).as_str()) {
        return EventView::default();
    }
    match (source_map::parse(&text), registry::dialect(name)) {
        (Ok((doc, _)), Ok(dialect)) => dialect.event_view(&doc),
        _ => EventView::default(),
    }
}

/// Why a file could not be loaded: every problem found, located.
#[derive(Debug)]
pub struct LoadError {
    /// The file, as given.
    pub file: String,
    /// The problems.
    pub diagnostics: Vec<Diagnostic>,
}

impl LoadError {
    fn one(file: &str, d: Diagnostic) -> LoadError {
        LoadError {
            file: file.to_owned(),
            diagnostics: vec![d],
        }
    }

    /// Every diagnostic as `file:line:col: error: message` lines with hints.
    pub fn render(&self) -> String {
        self.diagnostics
            .iter()
            .map(|d| d.render(&self.file))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render())
    }
}

impl std::error::Error for LoadError {}

/// Reads and compiles the flow in `path`. `dialect` overrides detection.
pub fn load_file(path: &Path, dialect: Option<&str>) -> Result<Loaded, LoadError> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| {
        LoadError::one(
            &file,
            Diagnostic::error("", format!("cannot read the file: {e}"))
                .hint("check the path; flows are YAML or JSON files"),
        )
    })?;
    let text = String::from_utf8(bytes).map_err(|e| LoadError::one(&file, not_text(&e)))?;
    load_str(&text, &file, path.parent(), dialect)
}

/// Where and why bytes that are not UTF-8 cannot be a flow: the first bad byte's line
/// and column, and whether the file looks binary altogether.
fn not_text(e: &std::string::FromUtf8Error) -> Diagnostic {
    let bytes = e.as_bytes();
    let valid = &bytes[..e.utf8_error().valid_up_to()];
    let line = valid.iter().filter(|b| **b == b'\n').count() + 1;
    let line_start = valid.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let col = String::from_utf8_lossy(&valid[line_start..])
        .chars()
        .count()
        + 1;
    let binary = bytes.iter().take(8192).any(|b| *b == 0);
    let d = if binary {
        Diagnostic::error("", "the file is binary, not a YAML or JSON flow")
            .hint("check the path: flows are YAML or JSON text files")
    } else {
        Diagnostic::error(
            "",
            format!(
                "the file is not UTF-8 text: byte 0x{:02x} here starts no UTF-8 character",
                bytes[valid.len()]
            ),
        )
        .hint("save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)")
    };
    Diagnostic {
        loc: Some(weft_core::Loc {
            line: line as u32,
            col: col as u32,
        }),
        ..d
    }
}

/// Compiles the flow in `text`; `file` names it in diagnostics and `base_dir` resolves
/// files it refers to. `dialect` overrides detection.
pub fn load_str(
    text: &str,
    file: &str,
    base_dir: Option<&Path>,
    dialect: Option<&str>,
) -> Result<Loaded, LoadError> {
    let (value, map) = source_map::parse(text).map_err(|d| LoadError::one(file, d))?;
    let dialect = match dialect {
        Some(name) => registry::dialect(name).map_err(|d| LoadError::one(file, d))?,
        None => registry::detect(&value).map_err(|d| LoadError::one(file, map.locate(d)))?,
    };
    let source_hash = weft_core::hash::content_hash(text.as_bytes());
    let events = dialect.event_view(&value);
    let (flow, warnings) = dialect
        .compile(value, &CompileContext::new(&map, base_dir))
        .map_err(|diagnostics| LoadError {
            file: file.to_owned(),
            diagnostics,
        })?;
    Ok(Loaded {
        flow: std::sync::Arc::new(flow),
        dialect: dialect.name(),
        source_hash,
        text: text.into(),
        warnings,
        // Only when the IR mirrors the document do its pointers lead into the file; the
        // other dialects locate problems through each block's origin.
        source_map: dialect.ir_mirrors_document().then_some(map),
        events,
    })
}
