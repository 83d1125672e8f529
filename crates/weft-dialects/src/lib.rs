//! # weft-dialects
//!
//! Owns the front-end formats that compile to the core IR: file loading, dialect
//! detection, source maps (document pointer -> line:column), located diagnostics, and
//! Weft's own native YAML/JSON format with its JSON Schema. The seed dialects (`tea`,
//! `blocks`, `souls`, `graph`) plug into [`load_str`] through the same machinery.
//!
//! Must not depend on the engine: it produces a [`Flow`] and diagnostics, nothing runs.

pub mod blocks;
pub mod graph;
pub mod native;
mod python_body;
pub mod souls;
pub mod source_map;
pub mod tea;
mod template_text;

use std::path::Path;
use weft_core::{Diagnostic, Flow};

pub use source_map::SourceMap;

/// The built-in actions a dialect may compile to (`weft-actions` serves them).
pub(crate) const BUILTIN_ACTIONS: &[&str] = &[
    "http.get",
    "http.post",
    "json.parse",
    "file.read",
    "file.write",
    "file.append",
    "time.sleep",
];

/// Dialects Weft knows by name, in detection order.
pub const DIALECTS: &[&str] = &["native", "tea", "blocks", "graph", "souls"];

/// Dialects the specs describe that this build cannot compile yet.
pub const PLANNED: &[&str] = &[];

/// A flow loaded from a file.
#[derive(Debug)]
pub struct Loaded {
    /// The compiled flow.
    pub flow: Flow,
    /// The dialect it was written in.
    pub dialect: &'static str,
    /// Content hash of the file's text.
    pub source_hash: String,
    /// Warnings found while loading.
    pub warnings: Vec<Diagnostic>,
    /// Locates pointers into the IR, when the IR mirrors the file (native format).
    pub source_map: Option<SourceMap>,
    /// The dialect's own names for some of the run's events.
    pub events: EventView,
}

/// Events under the names a dialect's specification gives them (`LoopStart`, ...), for
/// event streams meant for that dialect's users. The engine's events stay as they are;
/// a view adds a line of the dialect's own for the events it knows.
#[derive(Debug, Clone, Default)]
pub enum EventView {
    /// The dialect names no events of its own.
    #[default]
    Engine,
    /// Spec 004's loop and dynamic-parallel events.
    Tea(tea::events::TeaEvents),
    /// Spec 003's log entries.
    Graph(graph::events::GraphEvents),
}

impl EventView {
    /// The view for a file written in `dialect`.
    fn of(dialect: &str, doc: &serde_json::Value) -> EventView {
        match dialect {
            "tea" => EventView::Tea(tea::events::TeaEvents::of(doc)),
            "graph" => EventView::Graph(graph::events::GraphEvents::of(doc)),
            _ => EventView::Engine,
        }
    }

    /// The view for a run that continues (resume, approval, retry): read again from the
    /// flow file it started from, but only when the file is unchanged (its content hash is
    /// `source_hash`), since a changed file may name other nodes. Otherwise the engine's
    /// names only.
    pub fn of_file(path: &Path, dialect: &str, source_hash: Option<&str>) -> EventView {
        let Ok(text) = std::fs::read_to_string(path) else {
            return EventView::Engine;
        };
        if source_hash != Some(weft_core::hash::content_hash(text.as_bytes()).as_str()) {
            return EventView::Engine;
        }
        match source_map::parse(&text) {
            Ok((doc, _)) => EventView::of(dialect, &doc),
            Err(_) => EventView::Engine,
        }
    }

    /// The dialect's event for `e`, if it has one: a JSON object with `run_id`, `seq`,
    /// `at_ms`, `type` and the dialect's payload.
    pub fn translate(&self, e: &weft_core::event::Event) -> Option<serde_json::Value> {
        match self {
            EventView::Engine => None,
            EventView::Tea(t) => t.translate(e),
            EventView::Graph(g) => g.translate(e),
        }
    }
}

/// A dialect's event line: the engine event's `run_id`, `seq` and `at_ms`, the dialect's
/// `type`, and the fields of `payload`.
fn envelope(
    e: &weft_core::event::Event,
    kind: &str,
    payload: serde_json::Value,
) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    out.insert("run_id".into(), serde_json::Value::from(&*e.run_id));
    out.insert("seq".into(), serde_json::Value::from(e.seq));
    out.insert("at_ms".into(), serde_json::Value::from(e.at_ms));
    out.insert("type".into(), serde_json::Value::from(kind));
    if let serde_json::Value::Object(p) = payload {
        out.extend(p);
    }
    serde_json::Value::Object(out)
}

impl Loaded {
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
    let text = String::from_utf8(bytes).map_err(|e| {
        LoadError::one(
            &file,
            Diagnostic::error("", format!("the file is not UTF-8 text: {e}")),
        )
    })?;
    load_str(&text, &file, path.parent(), dialect)
}

/// Compiles the flow in `text`; `file` names it in diagnostics and `base_dir` resolves
/// files it refers to.
pub fn load_str(
    text: &str,
    file: &str,
    base_dir: Option<&Path>,
    dialect: Option<&str>,
) -> Result<Loaded, LoadError> {
    let (value, map) = source_map::parse(text).map_err(|d| LoadError::one(file, d))?;
    let dialect = match dialect {
        Some(d) => resolve_dialect_name(d).map_err(|d| LoadError::one(file, d))?,
        None => detect(&value).map_err(|d| LoadError::one(file, map.locate(d)))?,
    };
    let source_hash = weft_core::hash::content_hash(text.as_bytes());
    let events = EventView::of(dialect, &value);
    let compiled = match dialect {
        "native" => native::compile(value, &map, base_dir),
        "tea" => tea::compile(value, &map, base_dir),
        "blocks" => blocks::compile(value, &map),
        "graph" => graph::compile(value, &map),
        "souls" => souls::compile(value, &map, base_dir),
        other => unreachable!("dialect `{other}` is listed but not wired"),
    };
    compiled
        .map(|(flow, warnings)| Loaded {
            flow,
            dialect,
            source_hash,
            warnings,
            // Only the native format's pointers lead into the file; the other dialects
            // locate problems through each block's origin.
            source_map: (dialect == "native").then_some(map),
            events,
        })
        .map_err(|diagnostics| LoadError {
            file: file.to_owned(),
            diagnostics,
        })
}

fn resolve_dialect_name(name: &str) -> Result<&'static str, Diagnostic> {
    if let Some(d) = DIALECTS.iter().find(|d| **d == name) {
        return Ok(d);
    }
    if PLANNED.contains(&name) {
        return Err(Diagnostic::error(
            "",
            format!("the `{name}` dialect is not implemented in this build yet"),
        )
        .hint(format!("this build reads: {}", DIALECTS.join(", "))));
    }
    let all: Vec<&str> = DIALECTS.iter().chain(PLANNED).copied().collect();
    Err(
        Diagnostic::error("", format!("unknown dialect `{name}`")).hint_closest(
            name,
            all.iter().copied(),
            format!("dialects: {}", all.join(", ")),
        ),
    )
}

/// Tells which dialect a parsed document is written in.
pub fn detect(doc: &serde_json::Value) -> Result<&'static str, Diagnostic> {
    let Some(obj) = doc.as_object() else {
        return Err(Diagnostic::error(
            "",
            "a flow file holds an object (a YAML mapping) at its top",
        )
        .hint("start the file with `weft: 1` and `name:` for Weft's native format"));
    };
    if !obj.contains_key("weft") && blocks::looks_like(doc) {
        return Ok("blocks");
    }
    if !obj.contains_key("weft") && graph::looks_like(doc) {
        return Ok("graph");
    }
    if obj.contains_key("weft") || (obj.contains_key("root") && obj.contains_key("name")) {
        return Ok("native");
    }
    let guess = if obj.contains_key("nodes")
        && (obj.contains_key("connections") || obj.contains_key("edges"))
        && doc["nodes"]
            .as_array()
            .is_some_and(|n| n.iter().any(|n| n.get("data").is_some()))
    {
        Some("graph")
    } else if obj.contains_key("nodes") {
        Some("tea")
    } else if obj.contains_key("blocks") && obj.contains_key("workflow") {
        Some("souls")
    } else if obj.contains_key("root") {
        Some("blocks")
    } else {
        None
    };
    if let Some(g @ ("tea" | "blocks" | "graph" | "souls")) = guess {
        return Ok(g);
    }
    Err(match guess {
        Some(g) => Diagnostic::error("", format!("this looks like a `{g}` flow, and the `{g}` dialect is not implemented in this build yet"))
            .hint(format!("this build reads: {}", DIALECTS.join(", "))),
        None => Diagnostic::error("", "cannot tell which dialect this file is written in")
            .hint("Weft's native format starts with `weft: 1`; or name the dialect with --dialect"),
    })
}
