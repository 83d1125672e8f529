//! Ready-made blocks for patterns every AI workflow repeats (spec 002, "Utility
//! blocks"): three generators — a summarizer, an intent classifier, a decomposer — and
//! a deterministic combiner (a handler). Each returns an ordinary block.

use crate::block::Block;
use crate::generator::{Generator, generator};
use crate::handler::handler;
use serde_json::{Value, json};
use weft_core::{BlockError, ErrorKind};

/// How long a summary is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Granularity {
    /// One or two sentences.
    Brief,
    /// A paragraph per main point.
    Detailed,
    /// A bulleted list of the key points.
    Bullets,
}

/// A generator that summarizes its input (text, or any value as JSON) as text.
///
/// ```
/// use weft::utility::{Granularity, summarizer};
/// let brief = summarizer("brief", Granularity::Brief);
/// assert_eq!(weft::Block::from(brief).name(), "brief");
/// ```
pub fn summarizer(name: impl Into<String>, granularity: Granularity) -> Generator {
    let how = match granularity {
        Granularity::Brief => "in one or two sentences",
        Granularity::Detailed => "in a few paragraphs, one per main point",
        Granularity::Bullets => "as a bulleted list of its key points",
    };
    generator(name)
        .prompt(format!(
            "You summarize what you are given {how}. Keep facts, names and numbers exact; add nothing."
        ))
        .user("{{ text(input) }}")
}

/// A generator that classifies its input into one of `categories` (`(name,
/// description)`), answering `{intent, confidence}` by structured output.
pub fn intent_classifier<'a>(
    name: impl Into<String>,
    categories: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Generator {
    let categories: Vec<(&str, &str)> = categories.into_iter().collect();
    let listing: String = categories
        .iter()
        .map(|(c, d)| format!("- {c}: {d}\n"))
        .collect();
    let names: Vec<&str> = categories.iter().map(|(c, _)| *c).collect();
    generator(name)
        .prompt(format!(
            "Classify the user's message into exactly one of these intents:\n{listing}Answer with the intent and your confidence from 0 to 1."
        ))
        .user("{{ text(input) }}")
        .output_schema(json!({
            "type": "object",
            "properties": {
                "intent": {"type": "string", "enum": names},
                "confidence": {"type": "number", "minimum": 0, "maximum": 1}
            },
            "required": ["intent", "confidence"],
            "additionalProperties": false
        }))
}

/// A generator that breaks a task into ordered sub-tasks: `{tasks: [{title,
/// description}]}`.
pub fn decomposer(name: impl Into<String>) -> Generator {
    generator(name)
        .prompt("Break the task you are given into a short ordered list of concrete sub-tasks, each with a title and a one-sentence description.")
        .user("{{ text(input) }}")
        .output_schema(json!({
            "type": "object",
            "properties": {
                "tasks": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"title": {"type": "string"}, "description": {"type": "string"}},
                        "required": ["title", "description"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["tasks"],
            "additionalProperties": false
        }))
}

/// How a [`combiner`] combines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Combine {
    /// Objects merged into one, later keys winning (the values of an object input, or
    /// the items of a list input, in order).
    Merge,
    /// Every value as text, joined with the separator.
    Join(String),
    /// Every list concatenated (a non-list value counts as a one-item list).
    Concat,
}

/// A handler that combines the parts of its input (the `{name: output}` of a parallel
/// step, or a list) deterministically, without a model.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use weft::utility::{Combine, combiner};
/// let run = weft::testing::TestHarness::new()
///     .run(combiner("join", Combine::Join(" | ".into())), serde_json::json!({"a": "x", "b": 2}))
///     .await;
/// assert_eq!(run.output(), "x | 2");
/// # });
/// ```
pub fn combiner(name: impl Into<String>, how: Combine) -> Block {
    handler(name)
        .description("Combines the parts of its input.")
        .execute(move |input: Value, _ctx| {
            let how = how.clone();
            async move { combine(input, &how) }
        })
}

fn combine(input: Value, how: &Combine) -> Result<Value, BlockError> {
    let parts: Vec<Value> = match input {
        Value::Object(m) => m.into_iter().map(|(_, v)| v).collect(),
        Value::Array(a) => a,
        other => vec![other],
    };
    Ok(match how {
        Combine::Merge => {
            let mut out = serde_json::Map::new();
            for p in parts {
                match p {
                    Value::Object(m) => out.extend(m),
                    other => {
                        return Err(BlockError::new(
                            ErrorKind::Input,
                            format!("a merge combines objects, and one part is {other}"),
                        ));
                    }
                }
            }
            Value::Object(out)
        }
        Combine::Join(sep) => Value::from(
            parts
                .iter()
                .map(|p| match p {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join(sep),
        ),
        Combine::Concat => Value::Array(
            parts
                .into_iter()
                .flat_map(|p| match p {
                    Value::Array(a) => a,
                    other => vec![other],
                })
                .collect(),
        ),
    })
}
