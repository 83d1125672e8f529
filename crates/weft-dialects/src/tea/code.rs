//! `run:`/`script:` bodies: which language they are in and how Weft calls them.
//!
//! A Python body is the body of a function (it ends with `return {...}`), so it is
//! wrapped as `def _tea_node(state, variables, secrets, ...)`; Lua bodies are chunks that
//! `return` a table already; a Prolog body is one goal. Each gets `state`, `variables` and
//! `secrets` (and, in a fan-in node, `parallel_results`).

use serde_json::{Value, json};
use weft_core::ir::{CodeLimits, CodeSpec, SourceLines, ValueTemplate};

/// The function a wrapped Python body becomes.
pub(super) const ENTRY: &str = "_tea_node";

/// A body's language: `language:` if given, else `-- lua` on the first line, else Python.
pub(super) fn language_of(source: &str, declared: Option<&str>) -> Result<&'static str, String> {
    match declared {
        Some("python") => Ok("python"),
        Some("lua") => Ok("lua"),
        Some("prolog") => Ok("prolog"),
        Some(other) => Err(format!(
            "unknown language `{other}` (the languages are python, lua and prolog)"
        )),
        None => {
            let first = source.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            Ok(if first.trim() == "-- lua" {
                "lua"
            } else {
                "python"
            })
        }
    }
}

/// The code block for a body in `language`, whose text starts on `text_line` of the file
/// (when its lines are the file's).
pub(super) fn code_spec(
    language: &'static str,
    source: &str,
    fan_in: bool,
    text_line: Option<u32>,
) -> CodeSpec {
    let mut args = json!({
        "state": "{{ state }}",
        "variables": "{{ variables }}",
        "secrets": "{{ secrets }}",
    });
    if fan_in {
        args["parallel_results"] = Value::from("{{ parallel_results }}");
    }
    let (source, entry, body_line) = match language {
        "python" => {
            let wrapped = wrap_python(source, fan_in);
            if let Some(picked) = wrapped.state_keys.as_deref().and_then(picked_state) {
                args["state"] = Value::from(picked);
            }
            (
                wrapped.source,
                Some(ENTRY.to_owned()),
                Some(wrapped.body_line),
            )
        }
        "lua" => (source.to_owned(), None, Some(1)),
        // A Prolog body is rewritten into clauses, so its lines are not the file's.
        _ => (source.to_owned(), None, None),
    };
    CodeSpec {
        language: language.to_owned(),
        source,
        origin: body_line
            .zip(text_line)
            .map(|(source_line, file_line)| SourceLines {
                source_line,
                file_line,
            }),
        entry,
        args: Some(ValueTemplate(args)),
        imports: None,
        builtins: None,
        limits: CodeLimits::default(),
    }
}

/// The template of a state of only `keys` (those the state has), or None when a key
/// is not plain enough to write in a template literal.
fn picked_state(keys: &[String]) -> Option<String> {
    let plain = |k: &String| {
        k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ' '))
    };
    keys.iter().all(plain).then(|| {
        let names: String = keys.iter().map(|k| format!(", '{k}'")).collect();
        format!("{{{{ pick(state{names}) }}}}")
    })
}

/// A Python body made a module.
pub(super) struct WrappedPython {
    /// `def _tea_node(...)` around the body.
    pub(super) source: String,
    /// The line of `source` on which the body starts.
    pub(super) body_line: u32,
    /// The state keys the body reads, or None when it may read any
    /// ([`super::state_reads`]).
    pub(super) state_keys: Option<Vec<String>>,
}

/// `def _tea_node(...)` around the dedented body; `json` is always imported and
/// `datetime` when the body names it without importing it, as The Edge Agent does.
/// The module is parsed once, for both passes over it.
pub(super) fn wrap_python(body: &str, fan_in: bool) -> WrappedPython {
    let mut prelude = String::from("import json\n");
    if mentions(body, "datetime") && !body.contains("import datetime") {
        prelude.push_str("import datetime\n");
    }
    let mut params = vec!["state", "variables", "secrets"];
    if fan_in {
        params.push("parallel_results");
    }
    let source = crate::python_body::define(&prelude, ENTRY, &params, body);
    let body_line = crate::python_body::body_line(&prelude);
    // Code that does not parse is run as it is: the sandbox reports the error at its line.
    let Ok(parsed) = ruff_python_parser::parse_module(&source) else {
        return WrappedPython {
            source,
            body_line,
            state_keys: None,
        };
    };
    // Read on the module before the rewrite: a rewritten `state.FIELD` becomes
    // `_tea_field(state, ...)`, a use of the whole state either way.
    let state_keys = super::state_reads::python_state_keys(&parsed);
    match super::result_fields::rewrite(&source, &parsed) {
        Some(rewritten) => WrappedPython {
            source: format!("{}{rewritten}", super::result_fields::HELPER),
            body_line: body_line + 1,
            state_keys,
        },
        None => WrappedPython {
            source,
            body_line,
            state_keys,
        },
    }
}

/// Whether `word` appears in `text` as a whole identifier.
pub(super) fn mentions(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !ident(before) && !ident(after)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_bodies_become_functions() {
        let w = wrap_python("  x = state['a']\n  return {'b': x}\n", false);
        assert_eq!(w.body_line, 3);
        assert_eq!(
            w.source,
            "import json\ndef _tea_node(state, variables, secrets):\n    x = state['a']\n    return {'b': x}\n"
        );
    }

    #[test]
    fn datetime_is_imported_when_named() {
        assert!(
            wrap_python("return {'t': str(datetime.date.today())}", false)
                .source
                .contains("import datetime\n")
        );
        assert!(
            !wrap_python("return {'mydatetime': 1}", false)
                .source
                .contains("import datetime")
        );
    }

    #[test]
    fn lua_is_recognised_by_its_first_line() {
        assert_eq!(language_of("-- lua\nreturn {}", None).unwrap(), "lua");
        assert_eq!(language_of("return {}", None).unwrap(), "python");
        assert_eq!(language_of("x", Some("prolog")).unwrap(), "prolog");
        assert!(language_of("x", Some("ruby")).is_err());
    }
}
