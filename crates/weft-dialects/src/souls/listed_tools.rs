//! runsight's form of `tools:`: a list of tool ids. Three are built in — `http` (a
//! request the model describes), `file_io` (read or write a file in the files
//! directory) and `delegate` (the model picks the block's exit) — and any other id is
//! the project's `custom/tools/<id>.yaml`, a Python function (`executor: python`) or a
//! request template (`executor: request`). Each becomes a sub-flow, as the map form's
//! tools do (`tools.rs`); `delegate` is made per block, since its ports are the
//! block's exits.

use super::Compiler;
use crate::template_text::literal;
use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use weft_core::Diagnostic;
use weft_core::ir::{
    ActionSpec, Assertion, Block, BlockKind, BranchSpec, Case, Expr, Flow, LlmOutput, Template,
    ToolSpec, TransformSpec, ValueTemplate,
};

/// The ids runsight reserves for its built-in tools.
pub(super) const BUILTIN: &[&str] = &["http", "file_io", "delegate"];

/// The largest tool answer a model is given, as runsight cuts them (64 KB).
const MAX_ANSWER: usize = 65_536;

/// A request tool's time limit when it names none, in seconds.
const DEFAULT_REQUEST_SECONDS: u64 = 30;

/// `custom/tools/<id>.yaml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CustomTool {
    #[serde(rename = "version", default)]
    _version: Option<Value>,
    id: String,
    #[serde(rename = "kind", default)]
    _kind: Option<String>,
    #[serde(rename = "type")]
    kind_of_tool: String,
    executor: String,
    #[serde(rename = "name", default)]
    _name: Option<String>,
    description: String,
    #[serde(default)]
    parameters: Option<Value>,
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    code_file: Option<String>,
    #[serde(default)]
    request: Option<RequestDef>,
    #[serde(default)]
    timeout_seconds: Option<u64>,
}

/// A request tool's `request:`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestDef {
    #[serde(default)]
    method: Option<String>,
    url: String,
    #[serde(default)]
    headers: Option<IndexMap<String, String>>,
    #[serde(default)]
    body_template: Option<String>,
    #[serde(default)]
    response_path: Option<String>,
}

impl Compiler<'_> {
    /// `tools: [id, ...]`: each id a built-in tool or one of the project's.
    pub(super) fn listed_tools(&mut self, ids: &[Value]) {
        for (i, v) in ids.iter().enumerate() {
            let ptr = format!("/tools/{i}");
            let Some(id) = v.as_str() else {
                self.diags.push(
                    Diagnostic::error(&ptr, "a listed tool is its id")
                        .hint("tools: [http, file_io, delegate, my_tool]"),
                );
                continue;
            };
            let spec = match id {
                "http" => Some(self.http_builtin()),
                "file_io" => Some(self.file_io_builtin()),
                // Made per block, from the block's exits.
                "delegate" => {
                    self.delegate_declared = true;
                    None
                }
                _ => self.custom_tool(id, &ptr),
            };
            if let Some(spec) = spec {
                self.tool_specs.insert(id.to_owned(), spec);
            }
        }
    }

    /// Registers `root` as the sub-flow of tool `id` and returns the tool's spec.
    fn register_tool(
        &mut self,
        id: &str,
        description: &str,
        parameters: Value,
        root: Block,
    ) -> ToolSpec {
        let name = format!("tools.{id}");
        self.flows
            .insert(name.clone(), Flow::new(name.clone(), root.with_id(id)));
        ToolSpec {
            name: id.to_owned(),
            description: description.to_owned(),
            parameters,
            flow: name,
        }
    }

    /// `http`: the request the model describes; the answer is the response's body
    /// (`response_path` picks a field of a JSON one), cut at 64 KB.
    fn http_builtin(&mut self) -> ToolSpec {
        let parameters = json!({
            "type": "object",
            "properties": {
                "method": {"type": "string", "description": "GET, POST, PUT, PATCH, DELETE or HEAD"},
                "url": {"type": "string", "description": "The URL to request"},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                "body": {"type": "string", "description": "The request body"},
                "response_path": {"type": "string", "description": "A dotted path to pick from a JSON response"},
            },
            "required": ["method", "url"],
        });
        let request = Block::new(BlockKind::Action(ActionSpec {
            uses: "http.request".into(),
            params: Some(ValueTemplate(Value::from(
                "{{ omit(input, 'response_path') }}",
            ))),
        }));
        let answer = answer_of("args.response_path if args.response_path is string else none");
        let mut root = Block::new(BlockKind::Sequence(vec![request, answer]));
        root.data
            .bind
            .insert("args".into(), ValueTemplate(Value::from("{{ input }}")));
        self.register_tool(
            "http",
            "Makes an HTTP request and answers with the response's body.",
            parameters,
            root,
        )
    }

    /// `file_io`: reads or writes a file in the run's files directory.
    fn file_io_builtin(&mut self) -> ToolSpec {
        let parameters = json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["read", "write"]},
                "path": {"type": "string", "description": "A path relative to the files directory"},
                "content": {"type": "string", "description": "What to write (write only)"},
            },
            "required": ["action", "path"],
        });
        let read = Block::new(BlockKind::Action(ActionSpec {
            uses: "file.read".into(),
            params: Some(ValueTemplate(json!({"path": "{{ input.path }}"}))),
        }));
        let write = Block::new(BlockKind::Sequence(vec![
            Block::new(BlockKind::Action(ActionSpec {
                uses: "file.write".into(),
                params: Some(ValueTemplate(json!({
                    "path": "{{ input.path }}",
                    "content": "{{ input.content if input.content is defined and input.content is not none else '' }}",
                }))),
            })),
            transform("Written {{ input.bytes }} bytes to {{ input.path }}"),
        ]));
        let mut unknown = transform("{{ input }}");
        unknown.policy.assert.push(Assertion {
            warn: false,
            that: Expr("false".into()),
            message: Some("file_io: `action` is `read` or `write`".into()),
        });
        let root = Block::new(BlockKind::Branch(BranchSpec {
            cases: vec![
                Case {
                    name: Some("read".into()),
                    when: Expr("input.action == 'read'".into()),
                    then: read,
                },
                Case {
                    name: Some("write".into()),
                    when: Expr("input.action == 'write'".into()),
                    then: write,
                },
            ],
            otherwise: Some(Box::new(unknown)),
        }));
        self.register_tool(
            "file_io",
            "Reads or writes a text file (paths are relative; no `..`).",
            parameters,
            root,
        )
    }

    /// The project's `custom/tools/<id>.yaml`.
    fn custom_tool(&mut self, id: &str, ptr: &str) -> Option<ToolSpec> {
        if !super::is_file_id(id) {
            self.diags.push(
                Diagnostic::error(ptr, format!("the tool id `{id}` cannot name a file"))
                    .hint("a tool's id is letters, digits, `_`, `-` and `.` (no `/` or `..`)"),
            );
            return None;
        }
        let (places, found) = self.project_file("tools", id);
        let Some((path, text)) = found else {
            let d = Diagnostic::error(
                ptr,
                format!(
                    "no tool `{id}`: it is not built in, nor in {}",
                    super::project::looked_in(&places)
                ),
            );
            self.diags.push(d.hint_closest(
                id,
                BUILTIN.iter().copied(),
                "the built-in tools are http, file_io and delegate; a project's own tool is custom/tools/<id>.yaml",
            ));
            return None;
        };
        let def: CustomTool =
            self.read_project_file(&path, &text, &format!("the tool file for `{id}`"), ptr)?;
        let problem = if def.id != id {
            Some(format!("{} says its id is `{}`", path.display(), def.id))
        } else if def.kind_of_tool != "custom" {
            Some(format!(
                "{}: a project's tool has `type: custom`",
                path.display()
            ))
        } else if BUILTIN.contains(&id) {
            Some(format!("`{id}` is a built-in tool's id"))
        } else if def.description.trim().is_empty() {
            Some(format!(
                "{}: the tool needs a `description`",
                path.display()
            ))
        } else {
            None
        };
        if let Some(p) = problem {
            self.diags.push(Diagnostic::error(ptr, p));
            return None;
        }
        let parameters = self.tool_parameters(def.parameters.as_ref(), ptr)?;
        let root = match def.executor.as_str() {
            "python" => self.python_tool(id, &def, &path, ptr)?,
            "request" => self.request_tool(id, &def, &parameters, ptr)?,
            other => {
                let d = Diagnostic::error(
                    ptr,
                    format!("{}: unknown executor `{other}`", path.display()),
                );
                self.diags.push(d.hint_closest(
                    other,
                    ["python", "request"],
                    "executor: python or request",
                ));
                return None;
            }
        };
        Some(self.register_tool(id, &def.description, parameters, root))
    }

    /// `executor: python`: `def main(args)` from `code` or `code_file` (beside the YAML).
    fn python_tool(&mut self, id: &str, def: &CustomTool, path: &Path, ptr: &str) -> Option<Block> {
        let code = match (&def.code, &def.code_file) {
            (Some(c), None) => c.clone(),
            (None, Some(f)) => {
                let file = code_file(path, f);
                match file.as_ref().map(std::fs::read_to_string) {
                    Some(Ok(c)) => c,
                    _ => {
                        self.diags.push(
                            Diagnostic::error(ptr, format!("the tool `{id}`'s code_file `{f}` cannot be read"))
                                .hint("code_file names a file beside the tool's YAML, without `/` or `..`"),
                        );
                        return None;
                    }
                }
            }
            _ => {
                self.diags.push(Diagnostic::error(
                    ptr,
                    format!("the python tool `{id}` needs exactly one of `code` and `code_file`"),
                ));
                return None;
            }
        };
        if def.request.is_some() || def.timeout_seconds.is_some() {
            self.diags.push(Diagnostic::error(
                ptr,
                format!("the python tool `{id}` takes no `request` or `timeout_seconds`"),
            ));
            return None;
        }
        let spec = self.python_main(
            &format!("the tool `{id}`"),
            &code,
            "args",
            json!({"args": "{{ input }}"}),
            None,
            DEFAULT_REQUEST_SECONDS,
            ptr,
        )?;
        // The code is in another file: a line number of the workflow would mislead.
        let spec = weft_core::ir::CodeSpec {
            origin: None,
            ..spec
        };
        Some(Block::new(BlockKind::Code(spec)))
    }

    /// `executor: request`: the request template, `{{ param }}` from the arguments and
    /// `${VAR}` from the secrets (`WEFT_SECRET_<VAR>`: a tool never reads the whole
    /// environment).
    fn request_tool(
        &mut self,
        id: &str,
        def: &CustomTool,
        parameters: &Value,
        ptr: &str,
    ) -> Option<Block> {
        let Some(r) = &def.request else {
            self.diags.push(
                Diagnostic::error(ptr, format!("the request tool `{id}` needs `request:`"))
                    .hint("request: {method: POST, url: \"https://...\", body_template: '{\"text\": \"{{ message }}\"}'}"),
            );
            return None;
        };
        if def.code.is_some() || def.code_file.is_some() {
            self.diags.push(Diagnostic::error(
                ptr,
                format!("the request tool `{id}` takes no `code` or `code_file`"),
            ));
            return None;
        }
        if def.timeout_seconds == Some(0) {
            self.diags
                .push(Diagnostic::error(ptr, "timeout_seconds is at least 1"));
            return None;
        }
        let mut vars = Vec::new();
        let mut with = serde_json::Map::new();
        with.insert(
            "method".into(),
            Value::from(r.method.as_deref().unwrap_or("GET")),
        );
        with.insert("url".into(), Value::from(env_refs(&r.url, &mut vars)));
        if let Some(h) = &r.headers {
            let headers: serde_json::Map<String, Value> = h
                .iter()
                .map(|(k, v)| (k.clone(), Value::from(env_refs(v, &mut vars))))
                .collect();
            with.insert("headers".into(), Value::Object(headers));
        }
        if let Some(b) = &r.body_template {
            with.insert("body".into(), Value::from(env_refs(b, &mut vars)));
        }
        let seconds = def.timeout_seconds.unwrap_or(DEFAULT_REQUEST_SECONDS);
        with.insert("timeout_ms".into(), Value::from(seconds * 1000));
        let mut request = Block::new(BlockKind::Action(ActionSpec {
            uses: "http.request".into(),
            params: Some(ValueTemplate(Value::Object(with))),
        }));
        // runsight's templates name the arguments bare: `{{ message }}`.
        if let Some(props) = parameters.get("properties").and_then(Value::as_object) {
            for name in props.keys().filter(|n| is_identifier(n)) {
                request.data.bind.insert(
                    name.clone(),
                    ValueTemplate(Value::from(format!(
                        "{{{{ input[{}] }}}}",
                        Value::from(name.as_str())
                    ))),
                );
            }
        }
        let path = r
            .response_path
            .as_ref()
            .map(|p| Value::from(p.as_str()).to_string())
            .unwrap_or_else(|| "none".into());
        let mut steps = Vec::new();
        if !vars.is_empty() {
            steps.push(secrets_check(id, &vars));
        }
        steps.push(request);
        steps.push(answer_of(&path));
        Some(Block::new(BlockKind::Sequence(steps)))
    }

    /// The `delegate` tool of block `id`, whose ports are `exits`: the model calls it
    /// with `{port, task}` to pick the exit; a port not among them is answered with the
    /// valid ones, as runsight answers.
    pub(super) fn delegate_tool(&mut self, id: &str, exits: &[String]) -> ToolSpec {
        let parameters = json!({
            "type": "object",
            "properties": {
                "port": {"type": "string", "enum": exits, "description": "The exit to take"},
                "task": {"type": "string", "description": "The task for that exit"},
            },
            "required": ["port", "task"],
        });
        let ports = Value::from(exits.to_vec());
        let root = transform(&format!(
            "{{%- if input.port in {ports} -%}}{{{{ {{'port': input.port, 'task': input.task}} | tojson }}}}{{%- else -%}}error: `{{{{ input.port }}}}` is not a port of this block; the ports: {}{{%- endif -%}}",
            literal(&exits.join(", "))
        ));
        let mut spec = self.register_tool(&format!("delegate.{id}"), "", parameters, root);
        spec.name = "delegate".into();
        spec.description =
            "Routes the work to one of the block's exits (ports), with the task for it.".into();
        spec
    }
}

/// `call` (a soul's model call offered `delegate`) followed by the exit its last valid
/// `delegate` call chose; the output is the model's answer.
pub(super) fn delegated(mut call: Block) -> Block {
    if let BlockKind::Llm(l) = &mut call.kind {
        l.output = LlmOutput::Message;
    }
    let chosen = "{%- set ok = input.tool_results | selectattr('name', 'eq', 'delegate') | map(attribute='result') | select('startingwith', '{') | list -%}{{ fromjson(ok | last).port if ok else '' }}";
    let decide = Block::new(BlockKind::Transform(TransformSpec {
        output: ValueTemplate(Value::from("{{ input.content }}")),
        exit: Some(Template(chosen.into())),
    }));
    Block::new(BlockKind::Sequence(vec![call, decide]))
}

fn transform(output: &str) -> Block {
    Block::new(BlockKind::Transform(TransformSpec {
        output: ValueTemplate(Value::from(output)),
        exit: None,
    }))
}

/// What a request tool gives the model: the body of `{status, headers, body}`, the field
/// at `path` (an expression: a dotted path, or none) of a JSON one, as text cut at 64 KB.
fn answer_of(path: &str) -> Block {
    transform(&format!(
        "{{%- set p = {path} -%}}{{%- set v = at_path(input.body, p) if p and input.body is mapping else input.body -%}}{{%- set t = text(v) -%}}{{{{ t if t | length <= {MAX_ANSWER} else t[:{MAX_ANSWER}] ~ '[truncated]' }}}}"
    ))
}

/// `text` with each `${VAR}` as the secret `var` (recorded in `vars`).
fn env_refs(text: &str, vars: &mut Vec<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        match after.find('}').map(|end| (&after[..end], end)) {
            Some((var, end)) if is_env_name(var) => {
                let key = Value::from(var.to_ascii_lowercase());
                out.push_str(&format!("{{{{ secrets[{key}] }}}}"));
                if !vars.iter().any(|v| v == var) {
                    vars.push(var.to_owned());
                }
                rest = &after[end + 1..];
            }
            _ => {
                out.push_str("${");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A step that fails, naming the variable, when a secret a request needs is not set.
fn secrets_check(id: &str, vars: &[String]) -> Block {
    let mut check = transform("{{ input }}");
    for var in vars {
        let key = Value::from(var.to_ascii_lowercase());
        check.policy.assert.push(Assertion {
            warn: false,
            that: Expr(format!("secrets[{key}] is defined")),
            message: Some(format!(
                "the tool `{id}` needs ${{{var}}}: set WEFT_SECRET_{var} (Weft gives tools only the variables named WEFT_SECRET_*)"
            )),
        });
    }
    check
}

/// The file `name` beside the tool file `yaml`, if `name` stays in that directory.
fn code_file(yaml: &Path, name: &str) -> Option<PathBuf> {
    (super::is_file_id(name)).then(|| yaml.with_file_name(name))
}

fn is_identifier(name: &str) -> bool {
    is_env_name(name)
        && !matches!(
            name,
            "input" | "state" | "initial" | "secrets" | "vars" | "run" | "step"
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_references_become_secrets() {
        let mut vars = Vec::new();
        let t = env_refs(
            "${HOOK_URL}/x?k=${KEY}&again=${KEY} ${not valid} $",
            &mut vars,
        );
        assert_eq!(
            t,
            "{{ secrets[\"hook_url\"] }}/x?k={{ secrets[\"key\"] }}&again={{ secrets[\"key\"] }} ${not valid} $"
        );
        assert_eq!(vars, ["HOOK_URL", "KEY"]);
    }
}
