//! Rust closures as the engine's pure functions. Predicates, connectors and selectors
//! become named functions that templates call as `native("name", ...)`, so a flow built
//! in Rust stays plain IR: it serializes, journals and replays like any other.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::sync::Arc;
use weft_engine::Function;

/// The argument `args[i]` as `T`.
fn arg<T: DeserializeOwned>(args: &[Value], i: usize) -> Result<T, String> {
    let v = args.get(i).cloned().unwrap_or(Value::Null);
    serde_json::from_value(v).map_err(|e| {
        format!(
            "the value does not fit the closure's {} type: {e}",
            std::any::type_name::<T>()
        )
    })
}

fn out<R: Serialize>(r: R) -> Result<Value, String> {
    serde_json::to_value(r).map_err(|e| format!("the closure's result is not JSON: {e}"))
}

/// A closure of one typed value.
pub(crate) fn unary<T, R>(f: impl Fn(T) -> R + Send + Sync + 'static) -> Function
where
    T: DeserializeOwned,
    R: Serialize,
{
    Arc::new(move |args: &[Value]| out(f(arg(args, 0)?)))
}

/// A closure of a typed value and a second JSON value (the run state, an index).
pub(crate) fn binary<T, U, R>(f: impl Fn(T, U) -> R + Send + Sync + 'static) -> Function
where
    T: DeserializeOwned,
    U: DeserializeOwned,
    R: Serialize,
{
    Arc::new(move |args: &[Value]| out(f(arg(args, 0)?, arg(args, 1)?)))
}

/// The expression that calls function `name` with the expressions `args`.
pub(crate) fn call(name: &str, args: &[&str]) -> String {
    let mut s = format!("native({}", Value::from(name));
    for a in args {
        s.push_str(", ");
        s.push_str(a);
    }
    s.push(')');
    s
}

/// The value template `{{ <expr> }}`, which keeps the expression's type.
pub(crate) fn value_of(expr: &str) -> weft_core::ir::ValueTemplate {
    weft_core::ir::ValueTemplate(Value::from(format!("{{{{ {expr} }}}}")))
}
