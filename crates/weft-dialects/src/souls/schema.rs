//! The souls dialect's JSON Schema: the file, its souls, and each block type with the
//! common fields beside its own.

use super::doc::{
    ChildWorkflow, Code, Common, DispatchExit, Gate, Linear, Loop, Soul, SoulsDoc, Synthesize,
};
use crate::schema::{SchemaBuilder, reference};
use serde_json::{Map, Value, json};

/// The schema of a souls workflow file.
pub(super) fn json_schema() -> Value {
    let mut b = SchemaBuilder::default();
    b.def::<SoulsDoc>("SoulsDoc");
    b.def::<Soul>("Soul");
    b.def::<Common>("Common");
    b.def::<DispatchExit>("DispatchExit");
    let kinds = [
        ("linear", b.def::<Linear>("Linear")),
        ("gate", b.def::<Gate>("Gate")),
        ("code", b.def::<Code>("Code")),
        ("loop", b.def::<Loop>("Loop")),
        ("workflow", b.def::<ChildWorkflow>("ChildWorkflow")),
        ("synthesize", b.def::<Synthesize>("Synthesize")),
        (
            "dispatch",
            b.raw(
                "Dispatch",
                json!({"type": "object", "properties": {"exits": {"type": "array", "items": reference("DispatchExit")}}, "required": ["exits"]}),
            ),
        ),
    ];
    let common = b.get_mut("Common").clone();
    let blocks: Vec<Value> = kinds
        .iter()
        .map(|(kind, own)| {
            let own_name = own["$ref"].as_str().unwrap_or("").rsplit('/').next().unwrap_or("");
            let own = b.get_mut(own_name).clone();
            let mut properties: Map<String, Value> =
                common["properties"].as_object().cloned().unwrap_or_default();
            properties.extend(own["properties"].as_object().cloned().unwrap_or_default());
            properties.insert("type".into(), json!({"const": kind}));
            properties.insert(
                "assertions".into(),
                json!({"type": "array", "description": "checks of the block's output (spec 001, Assertions)"}),
            );
            let mut required = vec![Value::from("type")];
            required.extend(own["required"].as_array().cloned().unwrap_or_default());
            b.raw(
                &format!("{kind}_block"),
                json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false}),
            )
        })
        .collect();
    let block = b.raw("Block", json!({ "oneOf": blocks }));
    b.property(
        "SoulsDoc",
        "blocks",
        json!({"type": "object", "additionalProperties": block}),
    );
    b.property(
        "SoulsDoc",
        "souls",
        json!({"type": "object", "additionalProperties": reference("Soul")}),
    );
    b.finish(
        "SoulsDoc",
        "A souls workflow (Weft's souls dialect, spec 001)",
    )
}
