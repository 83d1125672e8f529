//! `describe_format`: a dialect's reference for a writer, from the dialect registry.

use crate::args::DescribeFormat;
use crate::failure::Failure;
use serde_json::{Value, json};

pub(crate) fn describe(a: DescribeFormat) -> Result<Value, Failure> {
    let Some(name) = a.dialect else {
        let dialects: Vec<Value> = weft_dialects::registry::dialects()
            .iter()
            .map(|d| json!({"dialect": d.name(), "summary": d.summary()}))
            .collect();
        return Ok(json!({
            "dialects": dialects,
            "hint": "describe_format {dialect} gives one dialect's reference and JSON Schema",
        }));
    };
    let dialect = weft_dialects::registry::dialect(&name).map_err(|d| {
        let hint = d.hint.clone().unwrap_or_default();
        Failure::new(format!(
            "no dialect is called {}",
            crate::failure::quoted(&name)
        ))
        .hint(hint)
    })?;
    Ok(json!({
        "dialect": dialect.name(),
        "summary": dialect.summary(),
        "reference": dialect.reference(),
        "schema": dialect.schema(),
    }))
}
