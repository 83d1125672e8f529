//! Building a dialect's JSON Schema from the Rust types its compiler reads, so that the
//! schema an editor or a language model is given cannot drift from what Weft accepts.
//! Where a document holds one of several node kinds told apart by a tag (`type: llm`),
//! the kinds are joined into one `oneOf`.

use schemars::JsonSchema;
use serde_json::{Map, Value, json};

/// Definitions gathered for one dialect's schema.
#[derive(Default)]
pub(crate) struct SchemaBuilder {
    defs: Map<String, Value>,
}

/// A reference to the definition `name`.
pub(crate) fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/$defs/{name}") })
}

impl SchemaBuilder {
    /// Adds `T`'s schema as the definition `name` (and the types it uses under their own
    /// names); returns a reference to it.
    pub(crate) fn def<T: JsonSchema>(&mut self, name: &str) -> Value {
        let mut schema = serde_json::to_value(schemars::schema_for!(T)).expect("schemas serialize");
        if let Some(Value::Object(defs)) = schema.as_object_mut().and_then(|s| s.remove("$defs")) {
            self.defs.extend(defs);
        }
        if let Some(s) = schema.as_object_mut() {
            s.remove("$schema");
        }
        self.defs.insert(name.to_owned(), schema);
        reference(name)
    }

    /// Adds the definition `name` as it is.
    pub(crate) fn raw(&mut self, name: &str, schema: Value) -> Value {
        self.defs.insert(name.to_owned(), schema);
        reference(name)
    }

    /// The definition `name`, to adjust a field whose type the Rust side leaves open.
    pub(crate) fn get_mut(&mut self, name: &str) -> &mut Value {
        self.defs
            .get_mut(name)
            .unwrap_or_else(|| panic!("no definition `{name}`"))
    }

    /// Sets the schema of property `property` of definition `def`.
    pub(crate) fn property(&mut self, def: &str, property: &str, schema: Value) {
        self.get_mut(def)["properties"][property] = schema;
    }

    /// Defines `name` as one of `kinds`, each `(tag value, schema)`, told apart by the
    /// tag property `tag`.
    pub(crate) fn tagged(&mut self, name: &str, tag: &str, kinds: &[(&str, Value)]) -> Value {
        let one_of: Vec<Value> = kinds
            .iter()
            .map(|(value, schema)| {
                json!({
                    "allOf": [
                        {"properties": {tag: {"const": value}}, "required": [tag]},
                        schema,
                    ]
                })
            })
            .collect();
        self.raw(name, json!({ "oneOf": one_of }))
    }

    /// The whole schema, whose root is the definition `root`.
    pub(crate) fn finish(self, root: &str, title: &str) -> Value {
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": title,
            "$ref": format!("#/$defs/{root}"),
            "$defs": self.defs,
        })
    }
}
