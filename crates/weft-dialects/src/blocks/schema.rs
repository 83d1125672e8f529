//! `input_schema` / `output_schema`: a SchemaNode (`{fields: [{name, type,
//! description?}]}`, spec 000) or, as files exported elsewhere carry, a plain JSON Schema
//! object. Both give the field names in order and a JSON Schema for structured output.

use super::doc::SchemaNode;
use serde_json::{Map, Value, json};
use weft_core::Diagnostic;

/// Field types, with the Python spellings LLM authors also write.
const TYPES: &[(&str, &str)] = &[
    ("string", "string"),
    ("str", "string"),
    ("number", "number"),
    ("float", "number"),
    ("integer", "integer"),
    ("int", "integer"),
    ("boolean", "boolean"),
    ("bool", "boolean"),
    ("array", "array"),
    ("list", "array"),
    ("object", "object"),
    ("dict", "object"),
    ("any", ""),
];

/// A block's schema, read.
#[derive(Debug, Clone)]
pub(super) struct Schema {
    /// Field names in array order.
    pub fields: Vec<String>,
    /// An object schema with every field required and no others.
    pub json: Value,
}

/// Reads the schema at `ptr`.
pub(super) fn read(value: &Value, ptr: &str) -> Result<Schema, Diagnostic> {
    if value.get("fields").is_some() {
        let node: SchemaNode = serde_path_to_error::deserialize(value).map_err(|e| {
            let mut d = crate::native::serde_diagnostic(&e);
            d.pointer = format!("{ptr}{}", d.pointer);
            d
        })?;
        let mut properties = Map::new();
        let mut fields = Vec::new();
        for (i, f) in node.fields.iter().enumerate() {
            let fptr = format!("{ptr}/fields/{i}");
            if f.name.trim().is_empty() {
                return Err(Diagnostic::error(
                    format!("{fptr}/name"),
                    "a field needs a name",
                ));
            }
            if fields.contains(&f.name) {
                return Err(Diagnostic::error(
                    format!("{fptr}/name"),
                    format!("the field `{}` is listed twice", f.name),
                ));
            }
            let mut prop = match f.ty.as_deref() {
                None => json!({}),
                Some(t) => match TYPES.iter().find(|(name, _)| name.eq_ignore_ascii_case(t)) {
                    Some((_, "")) => json!({}),
                    Some((_, json_type)) => json!({"type": json_type}),
                    None => {
                        let names: Vec<&str> = TYPES.iter().map(|(n, _)| *n).collect();
                        return Err(Diagnostic::error(
                            format!("{fptr}/type"),
                            format!("unknown field type `{t}`"),
                        )
                        .hint_closest(
                            t,
                            names.iter().copied(),
                            format!("types: {}", names.join(", ")),
                        ));
                    }
                },
            };
            if let Some(d) = &f.description {
                prop["description"] = Value::from(d.as_str());
            }
            properties.insert(f.name.clone(), prop);
            fields.push(f.name.clone());
        }
        return Ok(Schema {
            json: json!({
                "type": "object",
                "properties": properties,
                "required": fields,
                "additionalProperties": false
            }),
            fields,
        });
    }
    match value.get("properties").and_then(Value::as_object) {
        Some(props) if value.get("type").is_none_or(|t| t == "object") => Ok(Schema {
            fields: props.keys().cloned().collect(),
            json: value.clone(),
        }),
        _ => Err(
            Diagnostic::error(ptr, "a schema is `{fields: [{name, type}]}`")
                .hint("input_schema: {fields: [{name: topic, type: string}]}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_node_gives_its_fields_in_order_and_a_strict_object_schema() {
        let s = read(
            &json!({"fields": [{"name": "b", "type": "str", "description": "B"}, {"name": "a", "type": "integer"}]}),
            "/x",
        )
        .unwrap();
        assert_eq!(s.fields, vec!["b", "a"]);
        assert_eq!(
            s.json["properties"]["b"],
            json!({"type": "string", "description": "B"})
        );
        assert_eq!(s.json["required"], json!(["b", "a"]));
        assert_eq!(s.json["additionalProperties"], json!(false));
    }

    #[test]
    fn a_json_schema_object_is_taken_as_it_is() {
        let v = json!({"type": "object", "properties": {"x": {"type": "number"}}});
        let s = read(&v, "/x").unwrap();
        assert_eq!((s.fields, s.json), (vec!["x".to_owned()], v));
    }

    #[test]
    fn bad_schemas_are_located() {
        let e = read(
            &json!({"fields": [{"name": "a", "type": "strng"}]}),
            "/root/input_schema",
        )
        .unwrap_err();
        assert_eq!(e.pointer, "/root/input_schema/fields/0/type");
        assert!(e.hint.unwrap().contains("`string`"));
        let e = read(&json!({"fields": [{"name": "a", "kind": "string"}]}), "/s").unwrap_err();
        assert_eq!(e.pointer, "/s/fields/0/kind");
        assert!(read(&json!({"fields": [{"name": "a"}, {"name": "a"}]}), "/s").is_err());
        assert!(read(&json!(["a"]), "/s").is_err());
    }
}
