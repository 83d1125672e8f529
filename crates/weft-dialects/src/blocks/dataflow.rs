//! The `blocks` dialect's dataflow pass: spec 000's rules for what each block receives
//! (an `h` container's previous output, a `v` container's merge by `step_id` or index, a
//! loop's per-item input, a passthrough's input forwarded), applied to what the flow
//! declares (`output_schema`s, literal `return {...}`s), so that a read of a field the
//! input cannot have is reported before a run: an `arrayField`, a prompt's
//! `{{field}}`, a code block's parameter, an `input_schema` field.
//!
//! The flow's own input (`initial`) is declared nowhere in this dialect, so reads of it
//! and of a root-level first block's input are never reported.

use super::{prompt, schema};
use crate::Diagnostics;
use crate::dataflow::{Record, Shape, article};
use crate::python_body::literal_return_keys;
use serde_json::Value;
use weft_core::Diagnostic;

/// Checks the reads of every node under `root` (a document that compiled).
pub(super) fn check(root: &Value, diags: &mut Diagnostics) {
    Pass { diags }.node(root, "/root", Shape::Unknown);
}

struct Pass<'d> {
    diags: &'d mut Diagnostics,
}

/// A block's declared schema at `ptr` (`input_schema`, `output_schema`), read as a
/// record of its fields; each field with the pointer it is declared at.
struct Declared {
    record: Record,
    at: Vec<String>,
}

fn declared(block: &Value, key: &str, ptr: &str, from: String) -> Option<Declared> {
    let value = block.get(key)?;
    let sptr = format!("{ptr}/{key}");
    let read = schema::read(value, &sptr).ok()?;
    let node = value.get("fields").is_some();
    let closed = node || value.get("additionalProperties") == Some(&Value::Bool(false));
    let mut at = Vec::new();
    let fields = read.fields.iter().enumerate().map(|(i, name)| {
        at.push(if node {
            format!("{sptr}/fields/{i}/name")
        } else {
            format!("{sptr}/properties/{name}")
        });
        let ty = read.json["properties"][name]["type"].as_str();
        (name.clone(), Shape::of_type(ty))
    });
    let mut record = Record::new(fields, from);
    record.closed = closed;
    Some(Declared { record, at })
}

fn step_id(block: &Value) -> &str {
    block.get("step_id").and_then(Value::as_str).unwrap_or("?")
}

fn children(node: &Value) -> &[Value] {
    node.get("children")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

impl Pass<'_> {
    /// Checks node `v` at `ptr`, which receives `input`; what it outputs.
    fn node(&mut self, v: &Value, ptr: &str, input: Shape) -> Shape {
        match v.get("type").and_then(Value::as_str) {
            Some("h") => self.sequence(v, ptr, input),
            Some("v") => self.merge(v, ptr, input),
            Some("loop") => self.looped(v, ptr, input),
            Some("llm") => self.llm(v, ptr, &input),
            Some("code") => self.code(v, ptr, &input),
            Some("passthrough") => input,
            _ => Shape::Unknown,
        }
    }

    fn sequence(&mut self, v: &Value, ptr: &str, input: Shape) -> Shape {
        let mut shape = input;
        for (i, child) in children(v).iter().enumerate() {
            shape = self.node(child, &format!("{ptr}/children/{i}"), shape);
        }
        shape
    }

    /// Every child gets `input`; the outputs are merged by `step_id` (blocks) or index
    /// (containers), as the compiler keys them.
    fn merge(&mut self, v: &Value, ptr: &str, input: Shape) -> Shape {
        let mut fields = Vec::new();
        for (i, child) in children(v).iter().enumerate() {
            let out = self.node(child, &format!("{ptr}/children/{i}"), input.clone());
            let key = match child.get("step_id").and_then(Value::as_str) {
                Some(id) if !super::is_container(child) => id.to_owned(),
                _ => i.to_string(),
            };
            fields.push((key, out));
        }
        let from = "the merged outputs of a `v` container".to_owned();
        Shape::Record(Record::new(fields, from).exact())
    }

    /// Each item of `input[arrayField]`, beside the input's other fields, through the
    /// children; a list of their outputs.
    fn looped(&mut self, v: &Value, ptr: &str, input: Shape) -> Shape {
        let field = v.get("arrayField").and_then(Value::as_str).unwrap_or("");
        let fptr = format!("{ptr}/arrayField");
        let item_input = match &input {
            Shape::Record(r) => match r.fields.get(field) {
                None if r.closed => {
                    self.diags
                        .push(r.missing(&fptr, "the loop iterates over", field));
                    Shape::Unknown
                }
                Some(shape) if !shape.can_be("array") => {
                    let ty = shape.json_type().unwrap_or("value");
                    self.diags.push(
                        Diagnostic::error(
                            &fptr,
                            format!(
                                "the loop iterates over `{field}`, which is {} in its input ({}), not a list",
                                article(ty),
                                r.from
                            ),
                        )
                        .hint("a loop's arrayField names the input field that holds the list"),
                    );
                    Shape::Unknown
                }
                found => {
                    let item = match found {
                        Some(Shape::List(item)) => (**item).clone(),
                        _ => Shape::Unknown,
                    };
                    let mut per_item = r.clone();
                    per_item.fields.insert(field.to_owned(), item);
                    Shape::Record(per_item)
                }
            },
            Shape::List(_) => {
                self.diags.push(not_an_object(
                    &fptr,
                    "the loop",
                    &format!("a field `{field}`"),
                ));
                Shape::Unknown
            }
            _ => Shape::Unknown,
        };
        Shape::List(Box::new(self.sequence(v, ptr, item_input)))
    }

    fn llm(&mut self, v: &Value, ptr: &str, input: &Shape) -> Shape {
        let id = step_id(v);
        match declared(v, "input_schema", ptr, String::new()) {
            Some(wanted) => {
                self.wanted_fields(&wanted, input, ptr, &format!("llm block `{id}` reads"))
            }
            None => {
                let fields = v
                    .get("prompt")
                    .and_then(Value::as_str)
                    .and_then(|p| prompt::translate(p).ok())
                    .map(|p| p.fields)
                    .unwrap_or_default();
                self.prompt_fields(&fields, input, &format!("{ptr}/prompt"), id);
            }
        }
        let from = format!("the output of llm block `{id}`");
        match declared(v, "output_schema", ptr, from.clone()) {
            // The model's answer is checked against the schema: exactly these fields.
            Some(out) => Shape::Record(out.record.exact()),
            None => Shape::Record(
                Record::new([(super::TEXT_KEY.to_owned(), Shape::Typed("string"))], from).exact(),
            ),
        }
    }

    /// The `{{field}}`s of a prompt with no input_schema, against the block's input.
    fn prompt_fields(&mut self, fields: &[String], input: &Shape, ptr: &str, id: &str) {
        match input {
            Shape::Record(r) if r.closed => {
                for f in fields.iter().filter(|f| !r.fields.contains_key(*f)) {
                    let what = format!("the prompt of llm block `{id}` reads");
                    self.diags.push(r.missing(ptr, &what, f));
                }
            }
            Shape::List(_) if !fields.is_empty() => {
                let read = format!("`{{{{{}}}}}`", fields[0]);
                self.diags
                    .push(not_an_object(ptr, &format!("llm block `{id}`"), &read));
            }
            _ => {}
        }
    }

    /// An input_schema's fields against the block's input: each must be there, of a
    /// type it can have.
    fn wanted_fields(&mut self, wanted: &Declared, input: &Shape, ptr: &str, what: &str) {
        match input {
            Shape::Record(r) => {
                for ((name, want), at) in wanted.record.fields.iter().zip(&wanted.at) {
                    match r.fields.get(name) {
                        None if r.closed => self.diags.push(r.missing(at, what, name)),
                        Some(have) => self.agree(have, want, name, r, at),
                        None => {}
                    }
                }
            }
            Shape::List(_) if !wanted.record.fields.is_empty() => {
                let first = wanted.record.fields.keys().next().map(String::as_str);
                let read = format!("`{}`", first.unwrap_or_default());
                self.diags
                    .push(not_an_object(&format!("{ptr}/input_schema"), what, &read));
            }
            _ => {}
        }
    }

    /// A warning when field `name` of input `r` (shape `have`) is declared `want`
    /// at `at` with a type it cannot have.
    fn agree(&mut self, have: &Shape, want: &Shape, name: &str, r: &Record, at: &str) {
        let (Some(have_ty), Some(want_ty)) = (have.json_type(), want.json_type()) else {
            return;
        };
        if !have.can_be(want_ty) {
            self.diags.push(
                Diagnostic::warning(
                    at,
                    format!(
                        "`{name}` is {} in its input ({}), but this schema declares {}",
                        article(have_ty),
                        r.from,
                        article(want_ty)
                    ),
                )
                .hint("make the producer's output_schema and this input_schema agree on the field's type"),
            );
        }
    }

    /// A code block is called `_block(initial=..., **input)`: its input's fields must
    /// be its parameters, no more and no fewer.
    fn code(&mut self, v: &Value, ptr: &str, input: &Shape) -> Shape {
        let id = step_id(v);
        let params = declared(v, "input_schema", ptr, String::new());
        let who = format!("code block `{id}`");
        match input {
            Shape::List(_) => {
                let what = "its input's fields as its parameters";
                self.diags.push(not_an_object(ptr, &who, what));
            }
            Shape::Record(r) => {
                if let Some(params) = &params {
                    let what = format!("{who} takes the parameter");
                    self.wanted_fields(params, input, ptr, &what);
                }
                if r.exact {
                    self.extra_fields(r, params.as_ref(), ptr, id);
                } else if params.is_none() {
                    self.diags.push(no_parameters(ptr, id));
                }
            }
            _ if params.is_none() => self.diags.push(no_parameters(ptr, id)),
            _ => {}
        }
        self.code_output(v, ptr, id)
    }

    /// The fields of exact input `r` that are not parameters of code block `id`.
    fn extra_fields(&mut self, r: &Record, params: Option<&Declared>, ptr: &str, id: &str) {
        let taken = |k: &String| params.is_some_and(|p| p.record.fields.contains_key(k));
        let at = match params {
            Some(_) => format!("{ptr}/input_schema"),
            None => ptr.to_owned(),
        };
        for extra in r.fields.keys().filter(|k| !taken(k)) {
            self.diags.push(
                Diagnostic::error(
                    &at,
                    format!(
                        "code block `{id}` is called with every field of its input ({}), and `{extra}` is not one of its parameters: Python raises TypeError",
                        r.from
                    ),
                )
                .hint(format!("add `{extra}` to its input_schema (the parameters are `initial` and the input_schema's fields)")),
            );
        }
    }

    /// What a code block returns: the keys of its literal `return {...}`s, checked
    /// against its output_schema, else what the schema declares.
    fn code_output(&mut self, v: &Value, ptr: &str, id: &str) -> Shape {
        let from = format!("the output of code block `{id}`");
        let schema = declared(v, "output_schema", ptr, from.clone());
        let returns = v
            .get("code")
            .and_then(Value::as_str)
            .and_then(literal_return_keys);
        let Some(returns) = returns else {
            return match schema {
                Some(s) => Shape::Record(s.record),
                None => Shape::Typed("object"),
            };
        };
        if let Some(s) = &schema {
            for (name, at) in s.record.fields.keys().zip(&s.at) {
                if let Some(keys) = returns.iter().find(|keys| !keys.contains(name)) {
                    self.diags.push(
                        Diagnostic::error(
                            at,
                            format!(
                                "the output_schema of code block `{id}` lists `{name}`, but its code returns {{{}}} without it",
                                keys.iter().map(|k| format!("'{k}': ...")).collect::<Vec<_>>().join(", ")
                            ),
                        )
                        .hint_closest(name, keys.iter().map(String::as_str), "return every field the output_schema lists"),
                    );
                }
            }
        }
        let mut fields: Vec<(String, Shape)> = Vec::new();
        for key in returns.iter().flatten() {
            if !fields.iter().any(|(k, _)| k == key) {
                let declared = schema
                    .as_ref()
                    .and_then(|s| s.record.fields.get(key))
                    .cloned();
                fields.push((key.clone(), declared.unwrap_or_default()));
            }
        }
        let same = returns.iter().all(|keys| keys.len() == fields.len());
        let record = Record::new(fields, from);
        Shape::Record(if same { record.exact() } else { record })
    }
}

/// The warning for code block `id`, which has no input_schema, on an input that may
/// have fields.
fn no_parameters(ptr: &str, id: &str) -> Diagnostic {
    Diagnostic::warning(
        ptr,
        format!("code block `{id}` has no input_schema, so its function takes only `initial`; any key in its input is an error"),
    )
    .hint("list the input fields: input_schema: {fields: [{name: x, type: number}]}")
}

/// The error for `who` reading `what` from an input that is a list (a loop's output).
fn not_an_object(ptr: &str, who: &str, what: &str) -> Diagnostic {
    Diagnostic::error(
        ptr,
        format!("{who} reads {what}, but its input is a list (the output of a loop), which has no fields"),
    )
    .hint("a loop outputs the list of its iterations' results, which a block after it receives whole: a prompt can only read `{{initial.x}}` there, and a code block cannot take a list; loop over items inside the blocks that need them")
}
