//! `workflow` blocks: a child workflow file, compiled when its parent loads and run as
//! a sub-flow with its own run state.

use super::doc::{ChildWorkflow, Interface};
use super::{Compiler, compile, project};
use crate::dialect::CompileContext;
use indexmap::IndexMap;
use serde_json::{Value, json};
use weft_core::Diagnostic;
use weft_core::ir::{Block, BlockKind, Rescue, SubFlowSpec, TransformSpec, ValueTemplate};

/// Child workflows nest at most this deep unless a block says otherwise (spec 001).
const DEFAULT_MAX_DEPTH: u32 = 10;

/// Whether `path` is a dotted path into one of the run state's three parts.
fn state_path(path: &str) -> bool {
    let mut parts = path.split('.');
    matches!(parts.next(), Some("results" | "shared_memory" | "metadata"))
        && parts.all(|p| !p.is_empty())
}

impl Compiler<'_> {
    /// `workflow`: a child workflow file run as a sub-flow. `inputs` (interface name ->
    /// parent state path) become the child's `shared_memory`; `outputs` (parent state
    /// path -> interface name, a child block's id) copy the child's results back; the
    /// output is the child's last output.
    pub(super) fn workflow(&mut self, raw: &Value, ptr: &str) -> Option<Block> {
        let w: ChildWorkflow = self.diags.parse(raw, ptr)?;
        let max_depth = w.max_depth.unwrap_or(DEFAULT_MAX_DEPTH);
        if max_depth == 0 {
            self.diags.push(Diagnostic::error(
                format!("{ptr}/max_depth"),
                "max_depth must be at least 1",
            ));
            return None;
        }
        let catch = match w.on_error.as_deref() {
            None | Some("raise") => false,
            Some("catch") => true,
            Some(other) => {
                let d = Diagnostic::error(
                    format!("{ptr}/on_error"),
                    format!("unknown on_error `{other}`"),
                );
                self.diags.push(d.hint_closest(
                    other,
                    ["raise", "catch"],
                    "on_error: raise or catch",
                ));
                return None;
            }
        };
        let flow = self.child_workflow(&w.workflow_ref, max_depth, &format!("{ptr}/workflow_ref"));
        // The mappings are checked even when the child does not load.
        let interface = flow.as_ref().and_then(|f| self.interfaces.get(f).cloned());
        let shared = self.child_inputs(&w, interface.as_ref(), ptr);
        let writes = self.child_outputs(&w, interface.as_ref(), ptr);
        let flow = flow?;
        let mut call = Block::new(BlockKind::SubFlow(SubFlowSpec {
            flow,
            share_state: false,
        }));
        call.data.input = Some(ValueTemplate(json!({
            "shared_memory": Value::Object(shared),
            "metadata": "{{ state.metadata }}",
        })));
        call.data.set = writes;
        if catch {
            // The parent goes on; the block's output says what went wrong.
            call.policy.rescue.push(Rescue {
                when: Vec::new(),
                then: Block::new(BlockKind::Transform(TransformSpec {
                    output: ValueTemplate(
                        json!({"output": {"error": "{{ error.message }}"}, "results": {}}),
                    ),
                    exit: None,
                })),
            });
        }
        let unwrap = Block::new(BlockKind::Transform(TransformSpec {
            output: ValueTemplate(Value::from("{{ input.output }}")),
            exit: None,
        }));
        Some(Block::new(BlockKind::Sequence(vec![call, unwrap])))
    }

    /// The child's `shared_memory` from the block's `inputs` (interface name -> parent
    /// state path), each name checked against the child's interface when it has one.
    fn child_inputs(
        &mut self,
        w: &ChildWorkflow,
        interface: Option<&Interface>,
        ptr: &str,
    ) -> serde_json::Map<String, Value> {
        let mut shared = serde_json::Map::new();
        for (name, path) in w.inputs.iter().flatten() {
            let iptr = weft_core::validate::child_pointer(&format!("{ptr}/inputs"), name);
            if name.contains('.') {
                self.diags.push(
                    Diagnostic::error(&iptr, format!("the interface name `{name}` contains a dot"))
                        .hint(
                            "spec 001: inputs map interface names (no dots) to parent state paths",
                        ),
                );
            }
            if let Some(i) = interface
                && !i.inputs.iter().any(|x| &x.name == name)
            {
                let known: Vec<&str> = i.inputs.iter().map(|x| x.name.as_str()).collect();
                self.not_in_interface(&w.workflow_ref, "input", name, &known, &iptr);
            }
            if !state_path(path) {
                self.diags.push(
                    Diagnostic::error(&iptr, format!("`{path}` is not a path into the run state"))
                        .hint("a path starts with results, shared_memory or metadata: results.research"),
                );
            }
            shared.insert(
                name.clone(),
                Value::from(format!(
                    "{{{{ at_path(state, {}) }}}}",
                    Value::from(path.as_str())
                )),
            );
        }
        for input in interface.map(|i| i.inputs.as_slice()).unwrap_or_default() {
            let given = w.inputs.iter().flatten().any(|(n, _)| n == &input.name);
            if !given && input.required.unwrap_or(true) && input.default.is_none() {
                self.diags.push(
                    Diagnostic::error(
                        format!("{ptr}/inputs"),
                        format!(
                            "the child workflow `{}` needs the input `{}`",
                            w.workflow_ref, input.name
                        ),
                    )
                    .hint(format!("inputs: {{{}: results.<block>}}", input.name)),
                );
            }
        }
        shared
    }

    /// The parent's state writes from the block's `outputs` (parent state path ->
    /// interface name): the child's block result of that name, or with an interface,
    /// the child's state at the output's `source`.
    fn child_outputs(
        &mut self,
        w: &ChildWorkflow,
        interface: Option<&Interface>,
        ptr: &str,
    ) -> IndexMap<String, ValueTemplate> {
        let mut writes = IndexMap::new();
        for (path, name) in w.outputs.iter().flatten() {
            let optr = weft_core::validate::child_pointer(&format!("{ptr}/outputs"), path);
            if name.contains('.') {
                self.diags.push(
                    Diagnostic::error(&optr, format!("the interface name `{name}` contains a dot"))
                        .hint(
                            "spec 001: outputs map parent state paths to interface names (no dots)",
                        ),
                );
            }
            if !state_path(path) {
                self.diags.push(
                    Diagnostic::error(&optr, format!("`{path}` is not a path into the run state"))
                        .hint("a path starts with results, shared_memory or metadata: results.summary"),
                );
            }
            let value = match interface {
                None => format!("{{{{ output.results[{}] }}}}", Value::from(name.as_str())),
                Some(i) => match i.outputs.iter().find(|o| &o.name == name) {
                    Some(o) => format!(
                        "{{{{ at_path(output.state, {}) }}}}",
                        Value::from(o.source.as_str())
                    ),
                    None => {
                        let known: Vec<&str> = i.outputs.iter().map(|o| o.name.as_str()).collect();
                        self.not_in_interface(&w.workflow_ref, "output", name, &known, &optr);
                        continue;
                    }
                },
            };
            writes.insert(path.clone(), ValueTemplate(Value::from(value)));
        }
        writes
    }

    /// An error at `ptr`: the child `workflow_ref`'s interface has no `side` (input or
    /// output) `name`; the hint lists the `known` ones.
    fn not_in_interface(
        &mut self,
        workflow_ref: &str,
        side: &str,
        name: &str,
        known: &[&str],
        ptr: &str,
    ) {
        let d = Diagnostic::error(
            ptr,
            format!("the child workflow `{workflow_ref}` has no {side} `{name}`"),
        );
        self.diags.push(d.hint_closest(
            name,
            known.iter().copied(),
            format!("its interface's {side}s: {}", known.join(", ")),
        ));
    }

    /// Writes each `interface` input into the child's state at its `target`: the value
    /// its parent passed under the input's name (in `{source}.shared_memory`), else the
    /// input's `default`. A child run by a parent starts its `shared_memory` from these
    /// alone.
    pub(super) fn interface_inputs(
        &mut self,
        start: &mut Block,
        interface: &Interface,
        source: &str,
    ) {
        if self.depth > 0 {
            start
                .data
                .set
                .insert("shared_memory".into(), ValueTemplate(json!({})));
        }
        for (i, input) in interface.inputs.iter().enumerate() {
            if !state_path(&input.target) {
                self.diags.push(
                    Diagnostic::error(
                        format!("/interface/inputs/{i}/target"),
                        format!("`{}` is not a path into the run state", input.target),
                    )
                    .hint("a target starts with shared_memory, metadata or results: shared_memory.topic"),
                );
                continue;
            }
            let name = Value::from(input.name.as_str());
            let default = input.default.clone().unwrap_or(Value::Null).to_string();
            start.data.set.insert(
                input.target.clone(),
                ValueTemplate(Value::from(format!(
                    "{{{{ {source}.shared_memory[{name}] if {source} is mapping and {source}.shared_memory is mapping and {source}.shared_memory[{name}] is defined else {default} }}}}"
                ))),
            );
        }
        for (i, output) in interface.outputs.iter().enumerate() {
            if !state_path(&output.source) {
                self.diags.push(
                    Diagnostic::error(
                        format!("/interface/outputs/{i}/source"),
                        format!("`{}` is not a path into the run state", output.source),
                    )
                    .hint("a source starts with results, shared_memory or metadata: results.summarize"),
                );
            }
        }
    }

    /// The child workflow `reference` (a file `<reference>.yaml` beside this one, in
    /// `workflows/`, or the project's `custom/workflows/`), compiled into this flow's
    /// `flows`; its flow name.
    pub(super) fn child_workflow(
        &mut self,
        reference: &str,
        max_depth: u32,
        ptr: &str,
    ) -> Option<String> {
        let name = format!("workflow {reference}");
        if self.flows.contains_key(&name) {
            return Some(name);
        }
        if self.depth + 1 > max_depth {
            self.diags.push(
                Diagnostic::error(ptr, format!("child workflows nest deeper than {max_depth} levels here; does `{reference}` run itself?"))
                    .hint("max_depth (default 10) bounds how deeply workflow blocks nest"),
            );
            return None;
        }
        if !super::is_file_id(reference) {
            self.diags.push(
                Diagnostic::error(ptr, format!("`{reference}` cannot name a workflow file"))
                    .hint("a workflow_ref is a file name without its extension: letters, digits, `_`, `-` and `.` (no `/` or `..`)"),
            );
            return None;
        }
        let Some(dir) = self.base() else {
            self.diags.push(
                Diagnostic::error(
                    ptr,
                    format!(
                        "cannot load the workflow `{reference}`: {}",
                        crate::dialect::NO_DIRECTORY
                    ),
                )
                .hint("run the workflow from its file, where its child workflows lie beside it"),
            );
            return None;
        };
        let mut candidates: Vec<std::path::PathBuf> = ["", "workflows/"]
            .iter()
            .flat_map(|sub| {
                let base = dir.join(format!("{sub}{reference}"));
                [
                    base.with_extension("yaml"),
                    base.with_extension("yml"),
                    base,
                ]
            })
            .collect();
        candidates.extend(project::places(Some(dir), "workflows", reference));
        let Some(path) = candidates.iter().find(|p| p.is_file()) else {
            self.diags.push(
                Diagnostic::error(ptr, format!("no workflow file for `{reference}`")).hint(
                    format!("looked for {reference}.yaml beside this file, in workflows/ and in the project's custom/workflows/; it is not in any"),
                ),
            );
            return None;
        };
        let here = CompileContext {
            map: self.map,
            base_dir: self.base_dir,
            depth: self.depth,
        };
        let loaded = here.include(path, |v, nested| {
            let interface = v
                .get("interface")
                .and_then(|i| serde_json::from_value::<Interface>(i.clone()).ok());
            compile(v, nested).map(|(f, _)| (f, interface))
        });
        match loaded {
            Ok((flow, interface)) => {
                // A child's provider aliases serve its blocks from the parent's flow.
                for (alias, def) in &flow.models {
                    self.models.insert(alias.clone(), def.clone());
                }
                self.flows.insert(name.clone(), flow);
                if let Some(i) = interface {
                    self.interfaces.insert(name.clone(), i);
                }
                Some(name)
            }
            Err(m) => {
                self.diags.push(Diagnostic::error(
                    ptr,
                    format!("the workflow `{reference}` does not load:\n{m}"),
                ));
                None
            }
        }
    }
}
