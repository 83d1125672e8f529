//! Helpers for conditions over block results whose shape is not known in advance: a
//! result that may be JSON text, a dotted path into it that may be missing, a number
//! that may be written as text, a regular-expression search.

use minijinja::value::ValueKind;
use minijinja::{Environment, Error, ErrorKind, Value};

/// Patterns are compiled with this size bound, so a flow cannot make one exhaust memory.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

fn invalid(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, msg.into())
}

/// `json_or_text(v)`: a string holding JSON as the parsed value; anything else as it is.
fn json_or_text(v: Value) -> Value {
    match v.as_str().map(serde_json::from_str::<serde_json::Value>) {
        Some(Ok(parsed)) => crate::to_mj(&std::sync::Arc::new(parsed)),
        _ => v,
    }
}

/// The value at a dotted `path` in mappings, or `None` where a key is missing or a step
/// is not a mapping.
fn walk(obj: &Value, path: &str) -> Option<Value> {
    let mut at = obj.clone();
    for key in path.split('.') {
        if at.kind() != ValueKind::Map {
            return None;
        }
        let next = at.get_attr(key).ok()?;
        if next.is_undefined() {
            return None;
        }
        at = next;
    }
    Some(at)
}

/// `at_path(obj, "a.b")`: the value there, or none.
fn at_path(obj: Value, path: &str) -> Value {
    walk(&obj, path).unwrap_or(Value::from(()))
}

/// `has_path(obj, "a.b")`: whether every key on the path exists (its value may be none).
fn has_path(obj: Value, path: &str) -> bool {
    walk(&obj, path).is_some()
}

/// `to_number(v)`: a number, or a string that reads as one, as a float; else none.
fn to_number(v: Value) -> Value {
    let n = match v.kind() {
        ValueKind::Number => f64::try_from(v).ok(),
        ValueKind::String => v.as_str().and_then(|s| s.trim().parse::<f64>().ok()),
        ValueKind::Bool => Some(if v.is_true() { 1.0 } else { 0.0 }),
        _ => None,
    };
    n.filter(|n| n.is_finite())
        .map_or(Value::from(()), Value::from)
}

/// `search(pattern, text)`: whether the regular expression matches anywhere in `text`.
fn search(pattern: &str, text: &str) -> Result<bool, Error> {
    regex::RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map(|re| re.is_match(text))
        .map_err(|e| invalid(format!("search: invalid pattern: {e}")))
}

pub(crate) fn register(env: &mut Environment<'static>) {
    env.add_function("json_or_text", json_or_text);
    env.add_function("at_path", at_path);
    env.add_function("has_path", has_path);
    env.add_function("to_number", to_number);
    env.add_function("search", search);
}
