//! Tools souls may call: the top-level `tools:` map (tool id -> definition), each
//! compiled to a sub-flow that the engine runs when the model calls it. A tool is Python
//! code in the sandbox (`type: code`), one of Weft's built-in actions (`type: builtin`),
//! or an HTTP request (`type: http`); `docs/dialects/souls.md` gives the shapes.

use super::Compiler;
use crate::BUILTIN_ACTIONS;
use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::{Value, json};
use weft_core::Diagnostic;
use weft_core::ir::{ActionSpec, Block, BlockKind, Flow, ToolSpec, TransformSpec, ValueTemplate};
use weft_core::validate::child_pointer;

/// Tool types and the fields each has beside the common `type`, `description` and
/// `parameters`.
const TYPES: &[(&str, &[&str])] = &[
    ("code", &["code", "allowed_imports", "timeout_seconds"]),
    ("builtin", &["action", "with"]),
    (
        "http",
        &[
            "method",
            "url",
            "headers",
            "query",
            "body",
            "timeout_seconds",
        ],
    ),
];
const COMMON: &[&str] = &["type", "description", "parameters"];

/// A tool's time limit when it names none, in seconds (spec 001's code default).
const DEFAULT_TOOL_SECONDS: u64 = 30;

/// One entry of `tools:`.
#[derive(Debug, Deserialize)]
struct ToolDef {
    /// Read from the raw mapping before this parse, to check the type's fields.
    #[serde(rename = "type")]
    _kind: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    parameters: Option<Value>,
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    allowed_imports: Option<Vec<String>>,
    #[serde(default)]
    timeout_seconds: Option<u64>,
    #[serde(default)]
    action: Option<String>,
    #[serde(default, rename = "with")]
    with: Option<Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    headers: Option<IndexMap<String, String>>,
    #[serde(default)]
    query: Option<Value>,
    #[serde(default)]
    body: Option<Value>,
}

/// The flow name of tool `id`'s sub-flow.
fn flow_name(id: &str) -> String {
    format!("tools.{id}")
}

impl Compiler<'_> {
    /// Compiles the top-level `tools:` into sub-flows, keeping each tool's spec for the
    /// souls that list it.
    pub(super) fn tools(&mut self, tools: Option<&Value>) {
        let entries = match tools {
            None | Some(Value::Null) => return,
            Some(Value::Object(o)) => o.clone(),
            // runsight's form: ids of built-in tools and of the project's tool files.
            Some(Value::Array(ids)) => {
                self.listed_tools_form = true;
                return self.listed_tools(ids);
            }
            Some(_) => {
                self.diags.push(
                    Diagnostic::error("/tools", "tools is a list of tool ids, or a map of tool id to its definition")
                        .hint("tools:\n  word_count:\n    type: code\n    description: Counts words\n    code: |\n      def main(args):\n          return len(args[\"text\"].split())"),
                );
                return;
            }
        };
        for (id, raw) in entries {
            let ptr = child_pointer("/tools", &id);
            if let Some(spec) = self.tool(&id, &raw, &ptr) {
                self.tool_specs.insert(id, spec);
            }
        }
    }

    fn tool(&mut self, id: &str, raw: &Value, ptr: &str) -> Option<ToolSpec> {
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
        {
            self.diags.push(
                Diagnostic::error(ptr, format!("the tool id `{id}` is not a name")).hint(
                    "tool ids are letters, digits, `_` and `-`: models see them as function names",
                ),
            );
            return None;
        }
        let obj = raw.as_object().filter(|o| o.contains_key("type"));
        let Some(obj) = obj else {
            self.diags.push(
                Diagnostic::error(ptr, format!("the tool `{id}` needs a `type`"))
                    .hint("type: code, builtin or http"),
            );
            return None;
        };
        let kind = obj.get("type").and_then(Value::as_str).unwrap_or_default();
        let Some((kind, own)) = TYPES.iter().find(|(t, _)| *t == kind).copied() else {
            let d = Diagnostic::error(format!("{ptr}/type"), format!("unknown tool type `{kind}`"));
            self.diags.push(d.hint_closest(
                kind,
                TYPES.iter().map(|(t, _)| *t),
                "type: code, builtin or http",
            ));
            return None;
        };
        let mut ok = true;
        for key in obj.keys().map(String::as_str) {
            if !COMMON.contains(&key) && !own.contains(&key) {
                ok = false;
                let known: Vec<&str> = COMMON.iter().chain(own).copied().collect();
                let d = Diagnostic::error(
                    child_pointer(ptr, key),
                    format!("a {kind} tool has no field `{key}`"),
                );
                self.diags.push(d.hint_closest(
                    key,
                    known.iter().copied(),
                    format!("its fields: {}", known.join(", ")),
                ));
            }
        }
        let def: ToolDef = self.diags.parse(raw, ptr)?;
        if !ok {
            return None;
        }
        let parameters =
            self.tool_parameters(def.parameters.as_ref(), &format!("{ptr}/parameters"))?;
        if def
            .timeout_seconds
            .is_some_and(|s| !(1..=3600).contains(&s))
        {
            self.diags.push(Diagnostic::error(
                format!("{ptr}/timeout_seconds"),
                "timeout_seconds is from 1 to 3600",
            ));
            return None;
        }
        let seconds = def.timeout_seconds.unwrap_or(DEFAULT_TOOL_SECONDS);
        let root = match kind {
            "code" => self.code_tool(id, &def, ptr, seconds)?,
            "builtin" => self.builtin_tool(id, &def, ptr)?,
            _ => self.http_tool(&def, ptr, seconds)?,
        };
        let name = flow_name(id);
        self.flows
            .insert(name.clone(), Flow::new(name.clone(), root.with_id(id)));
        Some(ToolSpec {
            name: id.to_owned(),
            description: def.description,
            parameters,
            flow: name,
        })
    }

    /// A tool's `parameters`: a JSON Schema of an object (the arguments).
    pub(super) fn tool_parameters(
        &mut self,
        parameters: Option<&Value>,
        ptr: &str,
    ) -> Option<Value> {
        let Some(p) = parameters else {
            return Some(json!({"type": "object", "properties": {}}));
        };
        let is_object_schema = p
            .as_object()
            .is_some_and(|o| o.get("type").and_then(Value::as_str) == Some("object"));
        if !is_object_schema {
            self.diags.push(
                Diagnostic::error(ptr, "parameters is a JSON Schema of the arguments object")
                    .hint("parameters: {type: object, properties: {city: {type: string}}, required: [city]}"),
            );
            return None;
        }
        if let Err(e) = jsonschema::validator_for(p) {
            self.diags.push(Diagnostic::error(
                ptr,
                format!("parameters is not a valid JSON Schema: {e}"),
            ));
            return None;
        }
        Some(p.clone())
    }

    /// `type: code`: `def main(args)` in the Python sandbox, called with the model's
    /// arguments.
    fn code_tool(&mut self, id: &str, def: &ToolDef, ptr: &str, seconds: u64) -> Option<Block> {
        let Some(code) = &def.code else {
            self.diags.push(
                Diagnostic::error(ptr, format!("the code tool `{id}` needs `code`"))
                    .hint("code: |\n  def main(args):\n      return args"),
            );
            return None;
        };
        let spec = self.python_main(
            &format!("the code tool `{id}`"),
            code,
            "args",
            json!({"args": "{{ input }}"}),
            def.allowed_imports.clone(),
            seconds,
            ptr,
        )?;
        Some(Block::new(BlockKind::Code(spec)))
    }

    /// `type: builtin`: one of Weft's actions, with the arguments as its parameters (or
    /// `with:`, templates over `args`).
    fn builtin_tool(&mut self, id: &str, def: &ToolDef, ptr: &str) -> Option<Block> {
        let action = def.action.as_deref().unwrap_or_default();
        if !BUILTIN_ACTIONS.contains(&action) {
            let d = Diagnostic::error(
                format!("{ptr}/action"),
                if action.is_empty() {
                    format!("the builtin tool `{id}` needs an `action`")
                } else {
                    format!("`{action}` is not an action Weft runs")
                },
            );
            self.diags.push(d.hint_closest(
                action,
                BUILTIN_ACTIONS.iter().copied(),
                format!("the actions: {}", BUILTIN_ACTIONS.join(", ")),
            ));
            return None;
        }
        let params = def
            .with
            .clone()
            .unwrap_or_else(|| Value::from("{{ args }}"));
        Some(with_args(Block::new(BlockKind::Action(ActionSpec {
            uses: action.to_owned(),
            params: Some(ValueTemplate(params)),
        }))))
    }

    /// `type: http`: a GET (the arguments as query parameters) or a POST (the arguments
    /// as the JSON body); the model gets the response's body.
    fn http_tool(&mut self, def: &ToolDef, ptr: &str, seconds: u64) -> Option<Block> {
        let Some(url) = &def.url else {
            self.diags.push(
                Diagnostic::error(ptr, "an http tool needs a `url`")
                    .hint("url: \"https://api.example.com/weather/{{ args.city }}\""),
            );
            return None;
        };
        let method = def.method.as_deref().unwrap_or("GET");
        let post = match method.to_ascii_uppercase().as_str() {
            "GET" => false,
            "POST" => true,
            _ => {
                self.diags.push(
                    Diagnostic::error(
                        format!("{ptr}/method"),
                        format!("method `{method}` is not GET or POST"),
                    )
                    .hint("Weft's http tools GET or POST"),
                );
                return None;
            }
        };
        if post && def.query.is_some() || !post && def.body.is_some() {
            let (field, why) = if post {
                ("query", "a POST sends the arguments as its body")
            } else {
                ("body", "a GET has no body")
            };
            self.diags.push(
                Diagnostic::error(
                    format!("{ptr}/{field}"),
                    format!("`{field}` does not go with method {method}"),
                )
                .hint(why),
            );
            return None;
        }
        let mut with = serde_json::Map::new();
        with.insert("url".into(), Value::from(url.as_str()));
        with.insert("timeout_ms".into(), Value::from(seconds * 1000));
        if let Some(h) = &def.headers {
            with.insert("headers".into(), json!(h));
        }
        if post {
            let body = def
                .body
                .clone()
                .unwrap_or_else(|| Value::from("{{ args }}"));
            with.insert("json".into(), body);
        } else {
            let query = def
                .query
                .clone()
                .unwrap_or_else(|| Value::from("{{ args }}"));
            with.insert("params".into(), query);
        }
        let request = with_args(Block::new(BlockKind::Action(ActionSpec {
            uses: if post { "http.post" } else { "http.get" }.into(),
            params: Some(ValueTemplate(Value::Object(with))),
        })));
        let body = Block::new(BlockKind::Transform(TransformSpec {
            output: ValueTemplate(Value::from("{{ input.body }}")),
            exit: None,
        }));
        Some(Block::new(BlockKind::Sequence(vec![request, body])))
    }

    /// The specs of the tools a soul lists, each checked against `tools:`.
    pub(super) fn soul_tools(&mut self, ids: &[String], ptr: &str) -> Vec<ToolSpec> {
        let mut specs = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            match self.tool_specs.get(id) {
                Some(spec) => specs.push(spec.clone()),
                // runsight offers a soul only the tools its workflow declares, and
                // warns of the others.
                None if self.listed_tools_form
                    || self.tool_specs.is_empty()
                        && super::listed_tools::BUILTIN.contains(&id.as_str()) =>
                {
                    self.diags.push(
                        Diagnostic::warning(
                            format!("{ptr}/tools/{i}"),
                            format!("the soul's tool `{id}` is not declared under the workflow's `tools:`, so it is not offered"),
                        )
                        .hint(format!("declare it: tools: [{id}]")),
                    );
                }
                None => {
                    let known: Vec<String> = self.tool_specs.keys().cloned().collect();
                    let d = Diagnostic::error(
                        format!("{ptr}/tools/{i}"),
                        format!("the soul's tool `{id}` is not under the workflow's `tools:`"),
                    );
                    self.diags.push(d.hint_closest(
                        id,
                        known.iter().map(String::as_str),
                        if known.is_empty() {
                            "define it under the top-level `tools:`".to_owned()
                        } else {
                            format!("the tools: {}", known.join(", "))
                        },
                    ));
                }
            }
        }
        specs
    }
}

/// `block` with the model's arguments bound as `args` for its templates.
fn with_args(mut block: Block) -> Block {
    block
        .data
        .bind
        .insert("args".into(), ValueTemplate(Value::from("{{ input }}")));
    block
}
