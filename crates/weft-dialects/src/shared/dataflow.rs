//! What the dialects' dataflow passes know about a value before a run: its shape as far
//! as the flow's declarations (schemas, literal outputs, container rules) tell. Each
//! dialect walks its own document with these and reports, at the reading node, a read
//! that cannot succeed (an error) or probably will not (a warning).
//!
//! The rule that keeps the passes honest: a shape is only as certain as what declared
//! it. An unknown value is never a reason for an error; a field is missing for sure only
//! from a record that says no other field can be there.

pub(crate) mod state;
pub(crate) mod steps;

use indexmap::IndexMap;
use weft_core::Diagnostic;

/// What a value can be.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) enum Shape {
    /// Anything: nothing declares it.
    #[default]
    Unknown,
    /// An object with the fields `Record` lists.
    Record(Record),
    /// A list whose items have this shape.
    List(Box<Shape>),
    /// A value of this JSON type (`string`, `number`, `integer`, `boolean`, `object`):
    /// its type is declared, its contents are not.
    Typed(&'static str),
}

/// An object whose fields are (partly) known.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Record {
    /// The fields it has, each with its value's shape.
    pub fields: IndexMap<String, Shape>,
    /// No field but these can be there (a declared schema, a literal object).
    pub closed: bool,
    /// Every one of these fields is there and no other: enforced at run time (a model's
    /// structured output, a container's merge), not only declared.
    pub exact: bool,
    /// What the value is, for messages: "the output of llm block `split`".
    pub from: String,
}

impl Record {
    /// An object with the fields `fields`, from `from`.
    pub(crate) fn new(
        fields: impl IntoIterator<Item = (String, Shape)>,
        from: impl Into<String>,
    ) -> Record {
        Record {
            fields: fields.into_iter().collect(),
            closed: true,
            exact: false,
            from: from.into(),
        }
    }

    /// This record, enforced at run time (when it is closed: an open one can have
    /// more fields whatever enforces it).
    pub(crate) fn exact(mut self) -> Record {
        self.exact = self.closed;
        self
    }

    /// The names of its fields, joined for a hint.
    pub(crate) fn listed(&self) -> String {
        if self.fields.is_empty() {
            "no fields".to_owned()
        } else {
            self.fields
                .keys()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    }

    /// The error for a read of field `name` that this record cannot have, at `ptr`:
    /// `what` says who reads it ("the loop's arrayField reads").
    pub(crate) fn missing(&self, ptr: &str, what: &str, name: &str) -> Diagnostic {
        Diagnostic::error(
            ptr,
            format!(
                "{what} `{name}`, but its input ({}) has no such field",
                self.from
            ),
        )
        .hint_closest(
            name,
            self.fields.keys().map(String::as_str),
            format!("its input has {}", self.listed()),
        )
    }
}

impl Shape {
    /// The shape a declared JSON type gives (`array` a list of anything, `object` an
    /// object of unknown fields).
    pub(crate) fn of_type(json_type: Option<&str>) -> Shape {
        match json_type {
            Some("array") => Shape::List(Box::new(Shape::Unknown)),
            Some("string") => Shape::Typed("string"),
            Some("number") => Shape::Typed("number"),
            Some("integer") => Shape::Typed("integer"),
            Some("boolean") => Shape::Typed("boolean"),
            Some("object") => Shape::Typed("object"),
            _ => Shape::Unknown,
        }
    }

    /// Its JSON type, when known.
    pub(crate) fn json_type(&self) -> Option<&'static str> {
        match self {
            Shape::Unknown => None,
            Shape::Record(_) => Some("object"),
            Shape::List(_) => Some("array"),
            Shape::Typed(t) => Some(t),
        }
    }

    /// Whether a value of this shape can be of JSON type `want` (an integer is a
    /// number; what is unknown can be anything).
    pub(crate) fn can_be(&self, want: &str) -> bool {
        match self.json_type() {
            None => true,
            Some(have) => have == want || (have == "integer" && want == "number"),
        }
    }
}

/// `a list`, `a string`, ... for messages.
pub(crate) fn article(json_type: &str) -> String {
    let noun = match json_type {
        "array" => "list",
        "object" => "object",
        "integer" => "integer",
        other => other,
    };
    match noun.chars().next() {
        Some('a' | 'e' | 'i' | 'o' | 'u') => format!("an {noun}"),
        _ => format!("a {noun}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_field_names_the_closest_one() {
        let r = Record::new(
            [("words".to_owned(), Shape::of_type(Some("array")))],
            "the output of code block `split`",
        );
        let d = r.missing("/root/arrayField", "the loop iterates over", "wordz");
        assert_eq!(d.pointer, "/root/arrayField");
        assert!(d.message.contains("`wordz`"), "{}", d.message);
        assert!(d.message.contains("code block `split`"), "{}", d.message);
        assert_eq!(d.hint.as_deref(), Some("did you mean `words`?"));
    }

    #[test]
    fn unknown_shapes_can_be_anything_and_integers_are_numbers() {
        assert!(Shape::Unknown.can_be("array"));
        assert!(Shape::Typed("integer").can_be("number"));
        assert!(!Shape::Typed("string").can_be("array"));
        assert_eq!(article("array"), "a list");
        assert_eq!(article("integer"), "an integer");
    }
}
