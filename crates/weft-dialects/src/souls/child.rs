//! `workflow` blocks: a child workflow file, compiled when its parent loads and run as
//! a sub-flow with its own run state.

use super::doc::ChildWorkflow;
use super::{Compiler, compile};
use crate::dialect::CompileContext;
use indexmap::IndexMap;
use serde_json::{Value, json};
use std::path::Path;
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
            writes.insert(
                path.clone(),
                ValueTemplate(Value::from(format!(
                    "{{{{ output.results[{}] }}}}",
                    Value::from(name.as_str())
                ))),
            );
        }
        let flow =
            self.child_workflow(&w.workflow_ref, max_depth, &format!("{ptr}/workflow_ref"))?;
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

    /// The child workflow `reference` (a file `<reference>.yaml` beside this one, or in
    /// `workflows/`), compiled into this flow's `flows`; its flow name.
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
        let dir = self.base_dir.unwrap_or(Path::new("."));
        let candidates: Vec<std::path::PathBuf> = ["", "workflows/"]
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
        let Some(path) = candidates.iter().find(|p| p.is_file()) else {
            self.diags.push(
                Diagnostic::error(ptr, format!("no workflow file for `{reference}`")).hint(
                    format!("looked for {reference}.yaml beside this file and in workflows/"),
                ),
            );
            return None;
        };
        let loaded = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))
            .and_then(|text| {
                let (v, m) = crate::source_map::parse(&text)
                    .map_err(|d| d.render(&path.display().to_string()))?;
                let nested = CompileContext {
                    map: &m,
                    base_dir: path.parent(),
                    depth: self.depth + 1,
                };
                compile(v, &nested).map(|(f, _)| f).map_err(|ds| {
                    ds.iter()
                        .map(|d| d.render(&path.display().to_string()))
                        .collect::<Vec<_>>()
                        .join("\n")
                })
            });
        match loaded {
            Ok(flow) => {
                self.flows.insert(name.clone(), flow);
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
