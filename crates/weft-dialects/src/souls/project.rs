//! The files of a runsight project around a workflow. runsight keeps each kind of thing
//! a workflow names in a folder of its own, one file per id — `custom/souls/<id>.yaml`,
//! `custom/tools/<id>.yaml`, `custom/workflows/<id>.yaml`, `custom/providers/<id>.yaml`
//! — and its workflows in `custom/workflows/`, so a workflow finds its project in its
//! own directory or one of the three above it.

use super::Compiler;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};
use weft_core::Diagnostic;

/// How many directories, the workflow's own first, may hold the project's `custom/`.
const LEVELS: usize = 4;

/// Where the project's `<kind>` file for `id` may be, nearest first; nowhere for a
/// workflow sent as text, which has no directory.
pub(super) fn places(base: Option<&Path>, kind: &str, id: &str) -> Vec<PathBuf> {
    let file = format!("{id}.yaml");
    base.into_iter()
        .flat_map(|base| base.ancestors().take(LEVELS))
        .map(|dir| dir.join("custom").join(kind).join(&file))
        .collect()
}

/// The places looked in, for a diagnostic that says a file was not found there.
pub(super) fn looked_in(places: &[PathBuf]) -> String {
    if places.is_empty() {
        return format!("any file ({})", crate::dialect::NO_DIRECTORY);
    }
    let shown: Vec<String> = places.iter().map(|p| p.display().to_string()).collect();
    shown.join(", ")
}

/// The first of `places` that can be read, with its text.
pub(super) fn first_readable(places: &[PathBuf]) -> Option<(PathBuf, String)> {
    places
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok().map(|t| (p.clone(), t)))
}

/// `text`, the file at `path`, read as a `T`; the error is located in that file
/// (`path:line:col: message`), ready to quote in a diagnostic of the workflow.
fn parse_file<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T, String> {
    let shown = path.display().to_string();
    let (value, map) = crate::source_map::parse(text).map_err(|d| d.render(&shown))?;
    serde_path_to_error::deserialize::<_, T>(value).map_err(|e| {
        map.locate(crate::native::serde_diagnostic(&e))
            .render(&shown)
    })
}

impl Compiler<'_> {
    /// The directory the workflow's own files are read from, when it has one.
    pub(super) fn base(&self) -> Option<&Path> {
        self.base_dir
    }

    /// Where the project's `kind` file for `id` may be (for an error that lists them),
    /// and the first of those that reads, with its text.
    pub(super) fn project_file(
        &self,
        kind: &str,
        id: &str,
    ) -> (Vec<PathBuf>, Option<(PathBuf, String)>) {
        let places = places(self.base(), kind, id);
        let found = first_readable(&places);
        (places, found)
    }

    /// `text`, the file at `path`, read as a `T`; one that does not load is an error at
    /// `ptr` (the reference that named it), saying `what` it is and quoting the file's own
    /// location.
    pub(super) fn read_project_file<T: DeserializeOwned>(
        &mut self,
        path: &Path,
        text: &str,
        what: &str,
        ptr: &str,
    ) -> Option<T> {
        match parse_file(path, text) {
            Ok(v) => Some(v),
            Err(m) => {
                self.diags.push(Diagnostic::error(
                    ptr,
                    format!("{what} does not load:\n{m}"),
                ));
                None
            }
        }
    }
}
