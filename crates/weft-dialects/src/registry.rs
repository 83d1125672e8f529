//! The dialects this build reads, and how a document's dialect is found. The front ends
//! (the command line, the library, the server) know dialects only through this list.

use crate::dialect::{Confidence, Dialect};
use serde_json::Value;
use weft_core::Diagnostic;

/// Every dialect, in the order `weft schema` and `describe_format` list them.
static DIALECTS: &[&dyn Dialect] = &[
    &crate::native::Native,
    &crate::tea::Tea,
    &crate::blocks::Blocks,
    &crate::graph::Graph,
    &crate::souls::Souls,
];

/// Every dialect this build reads.
pub fn dialects() -> &'static [&'static dyn Dialect] {
    DIALECTS
}

/// The names of every dialect, in order.
pub fn names() -> Vec<&'static str> {
    DIALECTS.iter().map(|d| d.name()).collect()
}

/// The dialect called `name`, or an error with the closest name.
pub fn dialect(name: &str) -> Result<&'static dyn Dialect, Diagnostic> {
    if let Some(d) = DIALECTS.iter().find(|d| d.name() == name) {
        return Ok(*d);
    }
    let all = names();
    Err(
        Diagnostic::error("", format!("unknown dialect `{name}`")).hint_closest(
            name,
            all.iter().copied(),
            format!("dialects: {}", all.join(", ")),
        ),
    )
}

/// The dialect a parsed document is written in: the one most sure of it. Two equally
/// sure, or none at all, is an error whose hint names `--dialect`.
pub fn detect(doc: &Value) -> Result<&'static dyn Dialect, Diagnostic> {
    if !doc.is_object() {
        return Err(Diagnostic::error(
            "",
            "a flow file holds an object (a YAML mapping) at its top",
        )
        .hint("start the file with `weft: 1` and `name:` for Weft's native format"));
    }
    let scored: Vec<(Confidence, &'static dyn Dialect)> =
        DIALECTS.iter().map(|d| (d.detect(doc), *d)).collect();
    let best = scored
        .iter()
        .map(|(c, _)| *c)
        .max()
        .unwrap_or(Confidence::No);
    let top: Vec<&'static dyn Dialect> = scored
        .iter()
        .filter(|(c, _)| *c == best && best > Confidence::No)
        .map(|(_, d)| *d)
        .collect();
    match top.as_slice() {
        [one] => Ok(*one),
        [] => Err(
            Diagnostic::error("", "cannot tell which dialect this file is written in").hint(
                format!(
                    "Weft's native format starts with `weft: 1`; or name the dialect with --dialect ({})",
                    names().join(", ")
                ),
            ),
        ),
        many => {
            let names: Vec<String> = many.iter().map(|d| format!("`{}`", d.name())).collect();
            Err(Diagnostic::error(
                "",
                format!(
                    "this file could be written in {}: its keys fit more than one dialect",
                    names.join(" or ")
                ),
            )
            .hint(format!(
                "name the dialect with --dialect {}",
                many.iter().map(|d| d.name()).collect::<Vec<_>>().join(" or --dialect ")
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_dialect_is_listed_once_under_its_own_name() {
        let mut seen = names();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), DIALECTS.len());
        for d in dialects() {
            assert_eq!(dialect(d.name()).unwrap().name(), d.name());
            assert!(!d.summary().is_empty() && !d.reference().is_empty());
            assert!(d.schema().is_object(), "{}", d.name());
        }
    }

    #[test]
    fn unknown_names_get_the_closest_one() {
        let e = dialect("tae").err().unwrap();
        assert!(e.hint.unwrap().contains("tea"));
    }

    #[test]
    fn detection_table() {
        let cases = [
            (
                json!({"weft": 1, "name": "x", "root": {"passthrough": {}}}),
                "native",
            ),
            (json!({"name": "x", "root": {"sequence": []}}), "native"),
            (
                json!({"name": "x", "nodes": [{"name": "a", "run": "return {}"}]}),
                "tea",
            ),
            (
                json!({"name": "x", "root": {"type": "h", "children": []}}),
                "blocks",
            ),
            (
                json!({"nodes": [{"id": "s", "type": "start"}], "connections": []}),
                "graph",
            ),
            (json!({"blocks": {}, "workflow": {"entry": "a"}}), "souls"),
        ];
        for (doc, want) in cases {
            assert_eq!(detect(&doc).map(|d| d.name()).unwrap(), want, "{doc}");
        }
    }
}
