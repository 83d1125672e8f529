//! The `blocks` dialect: the block runtime contract of spec `000`, in the file shape
//! `{name, root}` that `docs/dialects/blocks.md` shows.
//!
//! Data flows as the spec says: an `h` container is a sequence (each child gets the
//! previous output), a `v` container runs its children concurrently on one input and
//! merges their outputs by `step_id` (or index, for nested containers), a `loop` runs its
//! children in sequence for each item of `arrayField`, and `initial` is the flow's input
//! everywhere. No run state is used: everything travels as block inputs and outputs.

mod dataflow;
mod doc;
mod prompt;
mod schema;

use crate::diagnostics::{Compiled, Diagnostics, read_document};
use crate::dialect::{CompileContext, Confidence, Dialect};
use crate::schema::SchemaBuilder;
use crate::source_map::SourceMap;
use doc::{BlocksDoc, CodeBlock, Container, LlmBlock, LoopNode, PassthroughBlock};
use indexmap::IndexMap;
use serde_json::{Value, json};
use std::collections::HashSet;
use weft_core::Diagnostic;
use weft_core::ir::{
    Assertion, Block, BlockKind, CodeLimits, CodeSpec, Expr, Flow, LlmSpec, MapSpec, OnError,
    ParallelSpec, SourceLines, Template, TransformSpec, ValueTemplate,
};

/// Node types, as `type` spells them.
const TYPES: &[&str] = &["h", "v", "loop", "llm", "code", "passthrough"];

/// The builtins a `code` block may call (spec 000, "Sandbox Rules").
const CODE_BUILTINS: &[&str] = &[
    "abs",
    "bool",
    "dict",
    "enumerate",
    "float",
    "int",
    "isinstance",
    "len",
    "list",
    "max",
    "min",
    "range",
    "reversed",
    "round",
    "set",
    "sorted",
    "str",
    "sum",
    "tuple",
    "zip",
];

/// The function a `code` block's body becomes (spec 000: "Generated wrapper").
const CODE_ENTRY: &str = "_block";

/// The key an `llm` block without an `output_schema` puts its answer under.
pub const TEXT_KEY: &str = "response";

/// Spec 000's block runtime contract.
pub(crate) struct Blocks;

impl Dialect for Blocks {
    fn name(&self) -> &'static str {
        "blocks"
    }

    fn summary(&self) -> &'static str {
        "spec 000's block runtime contract: h/v/loop containers of llm, code and passthrough blocks, YAML or JSON"
    }

    fn detect(&self, doc: &Value) -> Confidence {
        let root_type = doc
            .get("root")
            .and_then(|r| r.get("type"))
            .and_then(Value::as_str);
        if doc.get("weft").is_some() {
            Confidence::No
        } else if root_type.is_some_and(|t| TYPES.contains(&t)) {
            Confidence::Certain
        } else if doc.get("root").is_some() {
            Confidence::Weak
        } else {
            Confidence::No
        }
    }

    fn compile(&self, doc: Value, cx: &CompileContext<'_>) -> Compiled {
        compile(doc, cx.map)
    }

    fn schema(&self) -> Value {
        let mut b = SchemaBuilder::default();
        b.def::<BlocksDoc>("BlocksDoc");
        let container = b.def::<Container>("Container");
        let kinds = [
            ("h", container.clone()),
            ("v", container),
            ("loop", b.def::<LoopNode>("LoopNode")),
            ("llm", b.def::<LlmBlock>("LlmBlock")),
            ("code", b.def::<CodeBlock>("CodeBlock")),
            ("passthrough", b.def::<PassthroughBlock>("PassthroughBlock")),
        ];
        let node = b.tagged("Node", "type", &kinds);
        let children = json!({"type": "array", "items": node});
        b.property("BlocksDoc", "root", node);
        b.property("Container", "children", children.clone());
        b.property("LoopNode", "children", children);
        b.finish(
            "BlocksDoc",
            "A block runtime flow (Weft's blocks dialect, spec 000)",
        )
    }

    fn reference(&self) -> &'static str {
        include_str!("../../../../docs/dialects/blocks.md")
    }
}

/// Compiles a parsed `blocks` document into a flow plus its warnings.
fn compile(doc: Value, map: &SourceMap) -> Compiled {
    let file: BlocksDoc = read_document(doc, map)?;
    let mut c = Compiler {
        map,
        diags: Diagnostics::new(),
        step_ids: HashSet::new(),
    };
    let flow = c.node(&file.root, "/root").map(|root| {
        let mut flow = Flow::new(file.name, root);
        flow.description = file.description;
        flow
    });
    // What each block reads is checked once the document's shape is right.
    if flow.is_some() && !c.diags.has_errors() {
        dataflow::check(&file.root, &mut c.diags);
    }
    c.diags.finish(flow, map)
}

struct Compiler<'a> {
    map: &'a SourceMap,
    diags: Diagnostics,
    step_ids: HashSet<String>,
}

impl Compiler<'_> {
    fn node(&mut self, v: &Value, ptr: &str) -> Option<Block> {
        if !v.is_object() {
            self.diags.push(
                Diagnostic::error(ptr, format!("a node is an object, not {v}"))
                    .hint("a block is {step_id, type, ...}; a container is {type: h | v | loop, children: [...]}"),
            );
            return None;
        }
        let Some(kind) = v.get("type") else {
            self.diags.push(
                Diagnostic::error(ptr, "a node needs a `type`")
                    .hint(format!("types: {}", TYPES.join(", "))),
            );
            return None;
        };
        let mut block = match kind.as_str().unwrap_or_default() {
            "h" => {
                let c: Container = self.diags.parse(v, ptr)?;
                let children = self.children(&c.children, ptr, false);
                Block::new(match children?.into_values().collect::<Vec<_>>() {
                    none if none.is_empty() => BlockKind::Passthrough,
                    steps => BlockKind::Sequence(steps),
                })
            }
            "v" => {
                let c: Container = self.diags.parse(v, ptr)?;
                let branches = self.children(&c.children, ptr, true)?;
                if branches.is_empty() {
                    // Nothing runs; the merged dict of no outputs is empty.
                    constant(json!({}))
                } else {
                    Block::new(BlockKind::Parallel(ParallelSpec {
                        branches,
                        max_concurrency: None,
                        fail_fast: true,
                        on_error: OnError::default(),
                        isolate: false,
                        race: false,
                    }))
                }
            }
            "loop" => {
                let l: LoopNode = self.diags.parse(v, ptr)?;
                self.loop_node(&l, ptr)?
            }
            "llm" => {
                let b: LlmBlock = self.diags.parse(v, ptr)?;
                self.llm(b, ptr)?
            }
            "code" => {
                let b: CodeBlock = self.diags.parse(v, ptr)?;
                self.code(b, ptr)?
            }
            "passthrough" => {
                let b: PassthroughBlock = self.diags.parse(v, ptr)?;
                self.step_id(&b.step_id, ptr)?;
                for (s, key) in [
                    (&b.input_schema, "input_schema"),
                    (&b.output_schema, "output_schema"),
                ] {
                    self.schema(s.as_ref(), &format!("{ptr}/{key}"));
                }
                let mut block = Block::new(BlockKind::Passthrough).with_id(b.step_id);
                block.description = b.description;
                block
            }
            other => {
                let shown = if kind.is_string() {
                    other.to_owned()
                } else {
                    kind.to_string()
                };
                self.diags.push(
                    Diagnostic::error(
                        format!("{ptr}/type"),
                        format!("unknown node type `{shown}`"),
                    )
                    .hint_closest(
                        &shown,
                        TYPES.iter().copied(),
                        format!("types: {}", TYPES.join(", ")),
                    ),
                );
                return None;
            }
        };
        block.origin = self.map.loc(ptr);
        Some(block)
    }

    /// A container's children by the name their output is merged under in a `v`
    /// container: the `step_id` of a block, the index of a nested container.
    /// `merged` says whether the names matter (a `v` container); elsewhere each child is
    /// keyed by its index.
    fn children(
        &mut self,
        children: &[Value],
        ptr: &str,
        merged: bool,
    ) -> Option<IndexMap<String, Block>> {
        let mut out = IndexMap::new();
        let mut ok = true;
        for (i, child) in children.iter().enumerate() {
            let cptr = format!("{ptr}/children/{i}");
            let Some(block) = self.node(child, &cptr) else {
                ok = false;
                continue;
            };
            let key = match child.get("step_id").and_then(Value::as_str) {
                Some(id) if merged && !is_container(child) => id.to_owned(),
                _ => i.to_string(),
            };
            if out.contains_key(&key) {
                self.diags.push(
                    Diagnostic::error(&cptr, format!("two children of this container are both merged under `{key}`"))
                        .hint("a `v` container merges block outputs by step_id and nested containers by index; rename the step"),
                );
                ok = false;
                continue;
            }
            out.insert(key, block);
        }
        ok.then_some(out)
    }

    /// Each item of `input[arrayField]`, with the other input keys beside it, through the
    /// children in sequence; the output is the list of results in item order.
    fn loop_node(&mut self, l: &LoopNode, ptr: &str) -> Option<Block> {
        if l.array_field.trim().is_empty() {
            self.diags.push(
                Diagnostic::error(format!("{ptr}/arrayField"), "`arrayField` is empty")
                    .hint("name the input key that holds the list: arrayField: items"),
            );
            return None;
        }
        let children = self.children(&l.children, ptr, false)?;
        let body = match children.into_values().collect::<Vec<_>>() {
            none if none.is_empty() => Block::new(BlockKind::Passthrough),
            steps => Block::new(BlockKind::Sequence(steps)),
        };
        let field = Value::from(l.array_field.as_str()).to_string();
        let mut check = Block::new(BlockKind::Passthrough);
        check.policy.assert.push(Assertion {
            warn: false,
            that: Expr(format!(
                // `undefined is sequence` holds in the template language, hence `defined`.
                "output[{field}] is defined and output[{field}] is sequence \
                 and output[{field}] is not string and output[{field}] is not mapping"
            )),
            message: Some(format!(
                "the loop's input has no list under `{}` (its arrayField)",
                l.array_field
            )),
        });
        let map = Block::new(BlockKind::Map(MapSpec {
            items: ValueTemplate(Value::from(format!("{{{{ input[{field}] }}}}"))),
            item_var: "item".into(),
            index_var: "index".into(),
            item_input: Some(ValueTemplate(Value::from(format!(
                "{{{{ merge(input, {{{field}: item}}) }}}}"
            )))),
            body: Box::new(body),
            // The spec's loop iterates; one item at a time keeps the order of effects.
            max_concurrency: Some(1),
            fail_fast: true,
            on_error: OnError::default(),
            isolate: false,
        }));
        Some(Block::new(BlockKind::Sequence(vec![check, map])))
    }

    fn llm(&mut self, b: LlmBlock, ptr: &str) -> Option<Block> {
        self.step_id(&b.step_id, ptr)?;
        let input = self.schema(b.input_schema.as_ref(), &format!("{ptr}/input_schema"));
        let output = self.schema(b.output_schema.as_ref(), &format!("{ptr}/output_schema"));
        if b.prompt.trim().is_empty() {
            self.diags.push(
                Diagnostic::error(
                    format!("{ptr}/prompt"),
                    format!("llm block `{}` has an empty prompt", b.step_id),
                )
                .hint("prompt: \"Summarize {{text}}\""),
            );
            return None;
        }
        let prompt = match prompt::translate(&b.prompt) {
            Ok(p) => p,
            Err(m) => {
                self.diags
                    .push(Diagnostic::error(format!("{ptr}/prompt"), m));
                return None;
            }
        };
        if let Some(Some(schema)) = &input {
            for field in &prompt.fields {
                if !schema.fields.contains(field) {
                    self.diags.push(
                        Diagnostic::error(
                            format!("{ptr}/prompt"),
                            format!("the prompt reads `{{{{{field}}}}}`, which is not a field of the input_schema"),
                        )
                        .hint_closest(
                            field,
                            schema.fields.iter().map(String::as_str),
                            format!("input fields: {}", schema.fields.join(", ")),
                        ),
                    );
                }
            }
        }
        if b.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
            self.diags.push(
                Diagnostic::error(format!("{ptr}/model"), "`model` is empty")
                    .hint("model: openai/gpt-4o-mini"),
            );
        }
        // Templates render a missing key as nothing; a prompt must not lose a field
        // silently, so the block's input is checked for each one first.
        let mut check = Block::new(BlockKind::Passthrough);
        for r in &prompt.refs {
            let root = if r.initial { "initial" } else { "output" };
            check.policy.assert.push(Assertion {
                warn: false,
                that: Expr(format!("{root}{} is defined", r.subscripts)),
                message: Some(format!(
                    "llm block `{}` reads `{{{{{}}}}}`, which its {} does not have",
                    b.step_id,
                    r.shown,
                    if r.initial { "flow input" } else { "input" }
                )),
            });
        }
        let output = output.flatten();
        let spec = LlmSpec {
            model: b.model,
            prompt: Some(Template(prompt.template)),
            output_schema: output.as_ref().map(|s| s.json.clone()),
            ..LlmSpec::default()
        };
        let mut call = Block::new(BlockKind::Llm(spec)).with_id(b.step_id);
        call.description = b.description;
        call.origin = self.map.loc(ptr);
        let mut steps = Vec::new();
        if !check.policy.assert.is_empty() {
            steps.push(check);
        }
        steps.push(call);
        if output.is_none() {
            // The output is a dict; without field names the answer goes under one key.
            steps.push(constant(json!({ TEXT_KEY: "{{ input }}" })));
        }
        Some(match steps.len() {
            1 => steps.pop().expect("one step"),
            _ => Block::new(BlockKind::Sequence(steps)),
        })
    }

    fn code(&mut self, b: CodeBlock, ptr: &str) -> Option<Block> {
        self.step_id(&b.step_id, ptr)?;
        let input = self.schema(b.input_schema.as_ref(), &format!("{ptr}/input_schema"));
        self.schema(b.output_schema.as_ref(), &format!("{ptr}/output_schema"));
        let cptr = format!("{ptr}/code");
        if b.code.trim().is_empty() {
            self.diags.push(Diagnostic::error(
                &cptr,
                format!("code block `{}` has no code", b.step_id),
            ));
            return None;
        }
        if let Some(line) = b.code.lines().find(|l| {
            let t = l.trim_start();
            t.starts_with("def _block(") || t.starts_with("def block(")
        }) {
            self.diags.push(
                Diagnostic::error(&cptr, format!("the code defines `{}` itself", line.trim()))
                    .hint("write only the function body: the runtime wraps it in `def _block(initial, <input fields>)`"),
            );
            return None;
        }
        let fields = match input {
            Some(Some(s)) => s.fields,
            Some(None) => return None,
            // Whether its input has keys is the dataflow pass's to say.
            None => Vec::new(),
        };
        let mut params = vec!["initial"];
        params.extend(fields.iter().map(String::as_str));
        let spec = CodeSpec {
            language: "python".into(),
            source: crate::python_body::define("", CODE_ENTRY, &params, &b.code),
            origin: self
                .map
                .text_line(&format!("{ptr}/code"))
                .map(|file_line| SourceLines {
                    source_line: crate::python_body::body_line(""),
                    file_line,
                }),
            entry: Some(CODE_ENTRY.into()),
            // `_block(initial=<flow input>, **pipeline_input)`.
            args: Some(ValueTemplate(Value::from(
                "{{ merge(input, {'initial': initial}) }}",
            ))),
            imports: Some(Vec::new()),
            builtins: Some(CODE_BUILTINS.iter().map(|b| (*b).to_owned()).collect()),
            limits: CodeLimits::default(),
        };
        let mut block = Block::new(BlockKind::Code(spec)).with_id(b.step_id);
        block.policy.assert.push(Assertion {
            warn: false,
            that: Expr("output is mapping".into()),
            message: Some("a code block must return a dict".into()),
        });
        block.description = b.description;
        Some(block)
    }

    /// `None` when absent, `Some(None)` when present but wrong (reported).
    fn schema(&mut self, v: Option<&Value>, ptr: &str) -> Option<Option<schema::Schema>> {
        let v = v?;
        Some(match schema::read(v, ptr) {
            Ok(s) => Some(s),
            Err(d) => {
                self.diags.push(d);
                None
            }
        })
    }

    fn step_id(&mut self, id: &str, ptr: &str) -> Option<()> {
        let iptr = format!("{ptr}/step_id");
        if id.trim().is_empty() {
            self.diags
                .push(Diagnostic::error(iptr, "`step_id` is empty").hint("step_id: summarize"));
            return None;
        }
        if !self.step_ids.insert(id.to_owned()) {
            self.diags.push(
                Diagnostic::error(iptr, format!("the step_id `{id}` is used twice"))
                    .hint("step ids name outputs and journal entries: make each unique"),
            );
            return None;
        }
        Some(())
    }
}

fn is_container(v: &Value) -> bool {
    matches!(
        v.get("type").and_then(Value::as_str),
        Some("h" | "v" | "loop")
    )
}

fn constant(v: Value) -> Block {
    Block::new(BlockKind::Transform(TransformSpec {
        output: ValueTemplate(v),
        exit: None,
    }))
}
