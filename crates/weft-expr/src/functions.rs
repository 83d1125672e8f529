//! Python builtins that conditions written for Python tools use (`len(x) > 0`,
//! `str(n)`, `int(s)`), and JSON helpers for reshaping values between blocks.

use minijinja::value::{Rest, ValueKind};
use minijinja::{Environment, Error, ErrorKind, Value};

fn invalid(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, msg.into())
}

fn len(v: Value) -> Result<Value, Error> {
    if let Some(s) = v.as_str() {
        return Ok(Value::from(s.chars().count()));
    }
    v.len()
        .map(Value::from)
        .ok_or_else(|| invalid(format!("object of kind {} has no len()", v.kind())))
}

fn to_str(v: Value) -> Value {
    if v.is_none() {
        return Value::from("None");
    }
    match v.kind() {
        ValueKind::Bool => Value::from(if v.is_true() { "True" } else { "False" }),
        _ => Value::from(v.to_string()),
    }
}

fn to_int(v: Value) -> Result<Value, Error> {
    if let Some(s) = v.as_str() {
        return s
            .trim()
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| invalid(format!("invalid literal for int(): {s:?}")));
    }
    match v.kind() {
        ValueKind::Bool => Ok(Value::from(i64::from(v.is_true()))),
        ValueKind::Number => {
            let f = f64::try_from(v.clone()).map_err(|_| invalid("not a number"))?;
            Ok(Value::from(f.trunc() as i64))
        }
        _ => Err(invalid(format!(
            "int() argument must be a string or a number, not {}",
            v.kind()
        ))),
    }
}

fn to_float(v: Value) -> Result<Value, Error> {
    if let Some(s) = v.as_str() {
        return s
            .trim()
            .parse::<f64>()
            .map(Value::from)
            .map_err(|_| invalid(format!("could not convert string to float: {s:?}")));
    }
    match v.kind() {
        ValueKind::Bool => Ok(Value::from(if v.is_true() { 1.0 } else { 0.0 })),
        ValueKind::Number => f64::try_from(v)
            .map(Value::from)
            .map_err(|_| invalid("not a number")),
        _ => Err(invalid("float() argument must be a string or a number")),
    }
}

fn numbers(args: &[Value]) -> Result<Vec<Value>, Error> {
    if args.len() == 1 && matches!(args[0].kind(), ValueKind::Seq | ValueKind::Iterable) {
        Ok(args[0].try_iter()?.collect())
    } else {
        Ok(args.to_vec())
    }
}

fn min(args: Rest<Value>) -> Result<Value, Error> {
    numbers(&args)?
        .into_iter()
        .min_by(|a, b| a.cmp(b))
        .ok_or_else(|| invalid("min() arg is an empty sequence"))
}

fn max(args: Rest<Value>) -> Result<Value, Error> {
    numbers(&args)?
        .into_iter()
        .max_by(|a, b| a.cmp(b))
        .ok_or_else(|| invalid("max() arg is an empty sequence"))
}

fn sum(v: Value) -> Result<Value, Error> {
    let mut total_i: i64 = 0;
    let mut total_f: f64 = 0.0;
    let mut is_float = false;
    for x in v.try_iter()? {
        if let Some(i) = x.as_i64() {
            total_i = total_i
                .checked_add(i)
                .ok_or_else(|| invalid("sum() overflowed"))?;
        } else {
            total_f += f64::try_from(x).map_err(|_| invalid("sum() of non-numbers"))?;
            is_float = true;
        }
    }
    Ok(if is_float {
        Value::from(total_f + total_i as f64)
    } else {
        Value::from(total_i)
    })
}

fn abs(v: Value) -> Result<Value, Error> {
    if let Some(i) = v.as_i64() {
        return Ok(Value::from(
            i.checked_abs().ok_or_else(|| invalid("abs() overflowed"))?,
        ));
    }
    f64::try_from(v)
        .map(|f| Value::from(f.abs()))
        .map_err(|_| invalid("abs() of a non-number"))
}

fn to_list(v: Value) -> Result<Value, Error> {
    if let Some(s) = v.as_str() {
        return Ok(Value::from(
            s.chars().map(|c| c.to_string()).collect::<Vec<_>>(),
        ));
    }
    Ok(Value::from(v.try_iter()?.collect::<Vec<_>>()))
}

/// `merge(a, b, ...)`: a new object with the keys of each argument, later ones winning.
fn merge(args: Rest<Value>) -> Result<Value, Error> {
    let mut out = indexmap_like();
    for a in args.iter() {
        if a.is_none() || a.is_undefined() {
            continue;
        }
        if a.kind() != ValueKind::Map {
            return Err(invalid(format!("merge() takes objects, not {}", a.kind())));
        }
        for k in a.try_iter()? {
            let v = a.get_item(&k)?;
            out.retain(|(ek, _)| ek != &k);
            out.push((k, v));
        }
    }
    Ok(Value::from_pairs(out))
}

fn indexmap_like() -> Vec<(Value, Value)> {
    Vec::new()
}

/// `omit(obj, "k1", "k2")`: the object without those keys.
fn omit(obj: Value, keys: Rest<Value>) -> Result<Value, Error> {
    let mut out = Vec::new();
    for k in obj.try_iter()? {
        if !keys.contains(&k) {
            let v = obj.get_item(&k)?;
            out.push((k, v));
        }
    }
    Ok(Value::from_pairs(out))
}

/// `pick(obj, "k1", "k2")`: an object of those keys of `obj` that it has, in that order:
/// what a step reads of a large object, without copying the rest.
fn pick(obj: Value, keys: Rest<Value>) -> Result<Value, Error> {
    if obj.kind() != ValueKind::Map {
        return Err(invalid(format!(
            "pick() takes an object, not {}",
            obj.kind()
        )));
    }
    let mut out = Vec::with_capacity(keys.len());
    for k in keys.iter() {
        let v = obj.get_item(k)?;
        if !v.is_undefined() {
            out.push((k.clone(), v));
        }
    }
    Ok(Value::from_pairs(out))
}

/// A value as prompt text: a string as it is, anything else as its JSON.
fn text(v: Value) -> Result<Value, Error> {
    if let Some(s) = v.as_str() {
        return Ok(Value::from(s));
    }
    serde_json::to_string(&v)
        .map(Value::from)
        .map_err(|e| invalid(format!("text: {e}")))
}

fn fromjson(s: &str) -> Result<Value, Error> {
    let v: serde_json::Value =
        serde_json::from_str(s).map_err(|e| invalid(format!("fromjson: {e}")))?;
    Ok(crate::to_mj(&std::sync::Arc::new(v)))
}

/// `native(name, args...)`: calls a function the host program registered (the scope
/// carries them; see [`crate::Natives`]).
fn native(state: &minijinja::State, name: String, args: Rest<Value>) -> Result<Value, Error> {
    let natives = state
        .lookup(crate::json_object::NATIVES)
        .and_then(|v| {
            v.downcast_object_ref::<crate::json_object::NativesObject>()
                .map(|n| n.0.clone())
        })
        .ok_or_else(|| {
            invalid(format!(
                "native(`{name}`): this engine has no native functions registered"
            ))
        })?;
    let args = args
        .iter()
        .map(crate::to_json)
        .collect::<Result<Vec<_>, _>>()?;
    let out = natives
        .call(&name, &args)
        .map_err(|e| invalid(format!("native(`{name}`): {e}")))?;
    Ok(crate::to_mj(&std::sync::Arc::new(out)))
}

pub(crate) fn register(env: &mut Environment<'static>) {
    env.add_function("native", native);
    env.add_function("len", len);
    env.add_function("str", to_str);
    env.add_function("int", to_int);
    env.add_function("float", to_float);
    env.add_function("bool", |v: Value| v.is_true());
    env.add_function("min", min);
    env.add_function("max", max);
    env.add_function("sum", sum);
    env.add_function("abs", abs);
    env.add_function("list", to_list);
    env.add_function("merge", merge);
    env.add_function("omit", omit);
    env.add_function("pick", pick);
    env.add_function("fromjson", fromjson);
    env.add_function("text", text);
    env.add_filter("text", text);
    env.add_filter("fromjson", fromjson);
    env.add_filter("merge", merge);
    env.add_filter("omit", omit);
    // Python spellings of the constants, as conditions written for Python tools use them.
    env.add_global("True", true);
    env.add_global("False", false);
    env.add_global("None", ());
}
