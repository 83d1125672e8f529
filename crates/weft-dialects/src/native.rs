//! Weft's native format: the IR itself, as YAML or JSON, with `weft: 1` at the top.
//! Every key is known: a misspelt one is an error with a did-you-mean hint.

use crate::diagnostics::{Compiled, Diagnostics};
use crate::dialect::{CompileContext, Confidence, Dialect};
use crate::source_map::SourceMap;
use serde_json::Value;
use std::path::Path;
use weft_core::error::did_you_mean;
use weft_core::ir::FORMAT_VERSION;
use weft_core::validate::{child_pointer, validate};
use weft_core::{Diagnostic, Flow};

/// Weft's own format: the IR as YAML or JSON.
pub(crate) struct Native;

impl Dialect for Native {
    fn name(&self) -> &'static str {
        "native"
    }

    fn summary(&self) -> &'static str {
        "Weft's own format: the workflow IR as YAML or JSON, `weft: 1` at the top"
    }

    fn detect(&self, doc: &Value) -> Confidence {
        if doc.get("weft").is_some() {
            Confidence::Certain
        } else if doc.get("root").is_some() && doc.get("name").is_some() {
            Confidence::Likely
        } else {
            Confidence::No
        }
    }

    fn compile(&self, doc: Value, cx: &CompileContext<'_>) -> Compiled {
        compile(doc, cx.map, cx.base_dir)
    }

    fn schema(&self) -> Value {
        json_schema()
    }

    fn reference(&self) -> &'static str {
        include_str!("../../../docs/native-format.md")
    }

    fn ir_mirrors_document(&self) -> bool {
        true
    }
}

/// Compiles a parsed native document into a validated flow plus its warnings.
fn compile(mut doc: Value, map: &SourceMap, base_dir: Option<&Path>) -> Compiled {
    if let Some(v) = doc.get("weft") {
        match v.as_u64() {
            Some(n) if n >= 1 && n <= u64::from(FORMAT_VERSION) => {}
            Some(n) => {
                return Err(vec![
                    map.locate(
                        Diagnostic::error("/weft", format!("format version {n} is not supported"))
                            .hint(format!("this build reads `weft: {FORMAT_VERSION}`")),
                    ),
                ]);
            }
            None => {
                return Err(vec![
                    map.locate(
                        Diagnostic::error("/weft", "`weft` is the format version, a whole number")
                            .hint(format!("write `weft: {FORMAT_VERSION}`")),
                    ),
                ]);
            }
        }
    }
    inline_model_files(&mut doc, map, base_dir).map_err(|d| vec![d])?;
    let flow: Flow = serde_path_to_error::deserialize(doc)
        .map_err(|e| vec![map.locate(serde_diagnostic(&e))])?;
    let mut diags = Diagnostics::from(validate(&flow));
    for d in crate::dataflow::steps::steps_reads(&flow) {
        diags.push(d);
    }
    if !diags.has_errors() {
        for mut d in unprovided_state_reads(&flow) {
            // The IR is the document: its pointer locates the read itself.
            d.loc = None;
            diags.push(d);
        }
    }
    diags.finish(Some(flow), map)
}

/// Reads of state keys that no block writes and the flow's `state` does not declare
/// (see [`crate::dataflow::state`]).
fn unprovided_state_reads(flow: &Flow) -> Vec<Diagnostic> {
    let mut keys = std::collections::HashSet::new();
    let mut declare = |f: &Flow| {
        if let Some(state) = f.state.as_ref().and_then(Value::as_object) {
            keys.extend(state.keys().cloned());
        }
    };
    declare(flow);
    flow.flows.values().for_each(&mut declare);
    let declared = crate::dataflow::state::Declared {
        keys,
        block: "block",
        where_declared: "the flow's `state` does not declare it",
        unless: "",
        declare_hint: |key| format!("declare `{key}`, or write it from a block"),
        start: None,
    };
    crate::dataflow::state::unprovided_reads(flow, &declared)
}

/// A scripted model may keep its rules in a file beside the flow (`file: replies.yaml`);
/// the rules are read into the flow so that the stored flow is self-contained.
fn inline_model_files(
    doc: &mut Value,
    map: &SourceMap,
    base_dir: Option<&Path>,
) -> Result<(), Diagnostic> {
    let Some(models) = doc.get_mut("models").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    for (name, def) in models.iter_mut() {
        let Some(obj) = def.as_object_mut() else {
            continue;
        };
        let Some(file) = obj.get("file").and_then(Value::as_str).map(str::to_owned) else {
            continue;
        };
        let pointer = child_pointer(&child_pointer("/models", name), "file");
        let Some(base_dir) = base_dir else {
            return Err(map.locate(
                Diagnostic::error(
                    &pointer,
                    format!("cannot read `{file}`: {}", crate::dialect::NO_DIRECTORY),
                )
                .hint("write the model's rules inline (`rules:`), or run the flow from its file"),
            ));
        };
        let path = base_dir.join(&file);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            map.locate(Diagnostic::error(
                &pointer,
                format!("cannot read {}: {e}", path.display()),
            ))
        })?;
        let (rules, _) = crate::source_map::parse(&text).map_err(|d| {
            map.locate(Diagnostic::error(
                &pointer,
                format!("{}: {}", path.display(), d.message),
            ))
        })?;
        let rules = match rules {
            Value::Object(mut o) if o.contains_key("rules") => {
                o.remove("rules").unwrap_or(Value::Null)
            }
            other => other,
        };
        obj.remove("file");
        obj.insert("rules".into(), rules);
    }
    Ok(())
}

fn pointer_of(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut p = String::new();
    for seg in path.iter() {
        match seg {
            Segment::Seq { index } => p = format!("{p}/{index}"),
            Segment::Map { key } => p = child_pointer(&p, key),
            Segment::Enum { variant } => p = child_pointer(&p, variant),
            Segment::Unknown => {}
        }
    }
    p
}

/// Names inside backticks in a serde message, in order.
fn quoted(msg: &str) -> Vec<&str> {
    msg.split('`').skip(1).step_by(2).collect()
}

/// `v` read as a `T`, or the diagnostic of what is wrong, at its pointer under `ptr`.
pub(crate) fn parse_at<T: serde::de::DeserializeOwned>(
    v: &serde_json::Value,
    ptr: &str,
) -> Result<T, Diagnostic> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let mut d = serde_diagnostic(&e);
        d.pointer = format!("{ptr}{}", d.pointer);
        d
    })
}

/// Turns serde's message into a located diagnostic with a hint.
pub(crate) fn serde_diagnostic(e: &serde_path_to_error::Error<serde_json::Error>) -> Diagnostic {
    let pointer = pointer_of(e.path());
    let msg = e.inner().to_string();
    let names = quoted(&msg);
    if msg.starts_with("unknown field") || msg.starts_with("unknown variant") {
        let what = if msg.starts_with("unknown field") {
            "key"
        } else {
            "value"
        };
        let bad = names.first().copied().unwrap_or("");
        let expected = &names[1.min(names.len())..];
        // The path may already end at the unknown key (it does when deserializing from
        // a JSON value), or stop at its parent.
        let at = if what == "key" && !pointer.ends_with(&child_pointer("", bad)) {
            child_pointer(&pointer, bad)
        } else {
            pointer
        };
        let d = Diagnostic::error(at, format!("unknown {what} `{bad}`"));
        return match did_you_mean(bad, expected.iter().copied()) {
            Some(s) => d.hint(format!("did you mean `{s}`?")),
            None if !expected.is_empty() => {
                d.hint(format!("expected one of: {}", expected.join(", ")))
            }
            None => d,
        };
    }
    if msg.starts_with("missing field") {
        let field = names.first().copied().unwrap_or("");
        let hint = match field {
            "max_iterations" => "loops are always bounded: add `max_iterations: N`".to_owned(),
            "root" => "a flow needs a `root` block, e.g. `root: {sequence: [...]}`".to_owned(),
            "name" => "give the flow a `name:`".to_owned(),
            f => format!("add `{f}:`"),
        };
        return Diagnostic::error(pointer, format!("missing required key `{field}`")).hint(hint);
    }
    if msg.contains("exactly one kind") {
        let d = Diagnostic::error(pointer, msg.clone());
        return d;
    }
    Diagnostic::error(pointer, msg)
}

/// Writes `flow` in the native YAML format.
pub fn to_yaml(flow: &Flow) -> String {
    serde_saphyr::to_string(flow).unwrap_or_else(|e| format!("# cannot write YAML: {e}\n"))
}

/// The JSON Schema of the native format, for editors.
pub fn json_schema() -> Value {
    serde_json::to_value(schemars::schema_for!(Flow)).expect("schemas serialize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source_map::parse;

    fn load(text: &str) -> Result<Flow, Vec<Diagnostic>> {
        let (v, m) = parse(text).unwrap();
        compile(v, &m, None).map(|(f, _)| f)
    }

    #[test]
    fn a_state_read_nothing_provides_is_warned_of_at_the_read() {
        let flow = |key: &str| {
            format!(
                "weft: 1\nname: t\nstate: {{count: 0}}\nroot:\n  loop:\n    max_iterations: 9\n    while: \"state.{key} < 3\"\n    body:\n      transform: {{output: 1}}\n      set: {{count: \"{{{{ state.count + 1 }}}}\"}}\n"
            )
        };
        let (v, m) = parse(&flow("cuont")).unwrap();
        let (_, warnings) = compile(v, &m, None).unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:#?}");
        let w = &warnings[0];
        assert_eq!(w.pointer, "/root/loop/while");
        assert_eq!(w.loc.map(|l| (l.line, l.col)), Some((7, 5)));
        assert_eq!(w.hint.as_deref(), Some("did you mean `count`?"));
        let (v, m) = parse(&flow("count")).unwrap();
        assert!(compile(v, &m, None).unwrap().1.is_empty());
        // A host handler may patch any key: nothing is reported.
        let handled = flow("cuont").replace("transform: {output: 1}", "handler: {name: h}");
        let (v, m) = parse(&handled).unwrap();
        assert!(compile(v, &m, None).unwrap().1.is_empty());
    }

    #[test]
    fn misspelt_keys_are_located_with_a_suggestion() {
        let e = load("weft: 1\nname: t\nroot:\n  llm:\n    promt: hi\n").unwrap_err();
        assert_eq!(e[0].message, "unknown key `promt`");
        assert_eq!(e[0].hint.as_deref(), Some("did you mean `prompt`?"));
        assert_eq!(e[0].loc.map(|l| (l.line, l.col)), Some((5, 5)));
    }

    #[test]
    fn unknown_block_kinds_are_errors() {
        let e = load("weft: 1\nname: t\nroot:\n  sequence:\n    - pasthrough: {}\n").unwrap_err();
        assert_eq!(e[0].message, "unknown key `pasthrough`");
        assert_eq!(e[0].hint.as_deref(), Some("did you mean `passthrough`?"));
        assert_eq!(e[0].loc.map(|l| l.line), Some(5));
    }

    #[test]
    fn wrong_types_are_located() {
        let e = load("weft: 1\nname: t\nroot:\n  loop:\n    body: {passthrough: {}}\n    max_iterations: lots\n").unwrap_err();
        assert!(e[0].message.contains("invalid type"), "{}", e[0].message);
        assert_eq!(e[0].loc.map(|l| l.line), Some(6));
    }

    #[test]
    fn validation_errors_are_located() {
        let e = load("weft: 1\nname: t\nroot:\n  subflow: {flow: nope}\n").unwrap_err();
        assert_eq!(e[0].message, "unknown sub-flow `nope`");
        assert_eq!(e[0].loc.map(|l| l.line), Some(4));
    }

    #[test]
    fn newer_format_versions_are_refused() {
        let e = load("weft: 9\nname: t\nroot: {passthrough: {}}\n").unwrap_err();
        assert!(e[0].message.contains("version 9"));
    }

    #[test]
    fn yaml_round_trips_to_the_same_flow() {
        let f = load("weft: 1\nname: t\nroot:\n  sequence:\n    - id: a\n      transform: {output: \"{{ input }}\"}\n      retry: {attempts: 2}\n").unwrap();
        let again = load(&to_yaml(&f)).unwrap();
        assert_eq!(f, again);
    }
}
