//! `type: dynamic_parallel`: a `map` over `items` whose branches are isolated, each
//! ending as TEA's `ParallelFlowResult` (`{state, source_node, index, success, error}`).
//!
//! What a branch's `state` holds follows TEA's engine (`yaml_nodes.py`): in steps and
//! subgraph mode the branch's final state; in action mode only what the action wrote
//! (its result under `output`, or merged) with the item and index. So an action-mode
//! fan-out over a list held in the state never copies that list into a branch: unless
//! the action's templates read `state`, the branch's state is the parent's, unchanged.

use super::{Compiler, doc::Node, transform};
use serde_json::{Value, json};
use weft_core::Diagnostic;
use weft_core::ir::{Block, BlockKind, MapSpec, OnError, Rescue, ValueTemplate};

/// The names a branch binds its item and index to.
struct Names {
    item: String,
    index: String,
}

impl Names {
    fn item_template(&self) -> String {
        format!("{{{{ {} }}}}", self.item)
    }

    fn index_template(&self) -> String {
        format!("{{{{ {} }}}}", self.index)
    }
}

/// A branch's work, and the template of its result's `state`.
struct BranchWork {
    work: Block,
    /// `None`: the branch's final state.
    result_state: Option<Value>,
    /// Whether the work can read the branch's state, which then gets the item and index
    /// as state keys (TEA's `branch_state[item_var] = item`).
    reads_state: bool,
}

impl Compiler<'_> {
    pub(super) fn dynamic_parallel(
        &mut self,
        n: &Node,
        ptr: &str,
        name: &str,
        in_loop: bool,
    ) -> Option<Block> {
        let items = self.items(n, ptr, name)?;
        self.check_fan_out_options(n, ptr);
        let names = Names {
            item: n.item_var.clone().unwrap_or_else(|| "item".into()),
            index: n.index_var.clone().unwrap_or_else(|| "index".into()),
        };
        let branch = self.branch_work(n, ptr, name, in_loop, &names)?;
        let fail_fast = n.fail_fast.unwrap_or(false);
        let body = branch_body(branch, name, &names, fail_fast);
        let mut map = Block::new(BlockKind::Map(MapSpec {
            items: ValueTemplate(items),
            item_var: names.item,
            index_var: names.index,
            item_input: None,
            body: Box::new(body),
            max_concurrency: n.max_concurrency.map(|c| c as u32),
            fail_fast,
            on_error: if fail_fast {
                OnError::Fail
            } else {
                OnError::Collect
            },
            isolate: true,
        }));
        let key = match &n.output {
            None => "parallel_results".to_owned(),
            Some(Value::String(k)) => k.clone(),
            Some(_) => {
                self.diags.push(Diagnostic::error(
                    format!("{ptr}/output"),
                    "a dynamic_parallel's output is the state key of its results",
                ));
                return None;
            }
        };
        map.data
            .set
            .insert(key, ValueTemplate(Value::from("{{ output }}")));
        Some(map)
    }

    /// `items`, as a template (a bare expression gets its braces).
    fn items(&mut self, n: &Node, ptr: &str, name: &str) -> Option<Value> {
        let Some(items) = &n.items else {
            self.diags.push(
                Diagnostic::error(ptr, format!("dynamic_parallel `{name}` needs `items`"))
                    .hint("items: \"{{ state.urls }}\""),
            );
            return None;
        };
        Some(match items {
            Value::String(s) if !s.contains("{{") => Value::from(format!("{{{{ {s} }}}}")),
            other => other.clone(),
        })
    }

    fn check_fan_out_options(&mut self, n: &Node, ptr: &str) {
        if let Some(c) = n.max_concurrency
            && c < 1
        {
            self.diags.push(Diagnostic::error(
                format!("{ptr}/max_concurrency"),
                "max_concurrency must be a positive integer",
            ));
        }
        if n.input.is_some() && n.subgraph.is_none() {
            self.diags.push(Diagnostic::error(
                format!("{ptr}/input"),
                "`input` belongs to subgraph mode",
            ));
        }
    }

    /// The work of one branch in the node's one mode (action, steps or subgraph).
    fn branch_work(
        &mut self,
        n: &Node,
        ptr: &str,
        name: &str,
        in_loop: bool,
        names: &Names,
    ) -> Option<BranchWork> {
        let modes: Vec<&str> = [
            (n.action.is_some(), "action"),
            (n.steps.is_some(), "steps"),
            (n.subgraph.is_some(), "subgraph"),
        ]
        .into_iter()
        .filter_map(|(on, m)| on.then_some(m))
        .collect();
        if modes.len() != 1 {
            let message = match modes.len() {
                0 => format!(
                    "dynamic_parallel `{name}` needs one of `action`, `steps` or `subgraph`"
                ),
                _ => format!(
                    "dynamic_parallel `{name}` has {}; the modes are mutually exclusive",
                    modes.join(" and ")
                ),
            };
            self.diags.push(
                Diagnostic::error(ptr, message)
                    .hint("spec 004: \"Three execution modes (mutually exclusive)\""),
            );
            return None;
        }
        let whole_state = |work| BranchWork {
            work,
            result_state: None,
            reads_state: true,
        };
        match modes[0] {
            "action" => {
                let a = n.action.as_ref().expect("action mode");
                let aptr = format!("{ptr}/action");
                let work = self.action(&a.uses, a.with.as_ref(), &aptr, name)?;
                let output = a.output.clone();
                let result_state = self.action_result_state(output.as_ref(), &aptr, names)?;
                let reads_state =
                    may_read_state(&work) || output.as_ref().is_some_and(mentions_state);
                Some(BranchWork {
                    work,
                    result_state: Some(result_state),
                    reads_state,
                })
            }
            "steps" => self
                .steps(
                    n.steps.as_deref().unwrap_or_default(),
                    &format!("{ptr}/steps"),
                    in_loop,
                )
                .map(whole_state),
            _ => self.subgraph(n, ptr, name).map(whole_state),
        }
    }

    /// An action-mode branch's `state`, as TEA's `run_action` returns it: the result
    /// under the `output` key, each key of an `output` mapping from its template, or
    /// without `output` the result itself (a mapping) or `{result: RESULT}`; then the
    /// item and index. `output` (the action's result) is bound for these templates.
    fn action_result_state(
        &mut self,
        output: Option<&Value>,
        ptr: &str,
        names: &Names,
    ) -> Option<Value> {
        let Some(mut state) = self.action_output(output, ptr)? else {
            return Some(Value::from(format!(
                "{{{{ merge(output if output is mapping else {{'result': output}}, {{{}: {}, {}: {}}}) }}}}",
                Value::from(names.item.as_str()),
                names.item,
                Value::from(names.index.as_str()),
                names.index,
            )));
        };
        state.insert(names.item.clone(), Value::from(names.item_template()));
        state.insert(names.index.clone(), Value::from(names.index_template()));
        Some(Value::Object(state))
    }
}

/// One branch: the item and index set as state keys (when the work can read them), the
/// work, then its `ParallelFlowResult`; without `fail_fast`, a failure becomes a failed
/// result in its place.
fn branch_body(branch: BranchWork, node: &str, names: &Names, fail_fast: bool) -> Block {
    let index = names.index_template();
    let mut blocks = Vec::with_capacity(3);
    if branch.reads_state {
        let mut enter = Block::new(BlockKind::Passthrough);
        enter.data.set.insert(
            names.item.clone(),
            ValueTemplate(Value::from(names.item_template())),
        );
        enter.data.set.insert(
            names.index.clone(),
            ValueTemplate(Value::from(index.clone())),
        );
        blocks.push(enter);
    }
    let mut result = transform(json!({
        "state": branch.result_state.clone().unwrap_or_else(|| Value::from("{{ state }}")),
        "source_node": node,
        "index": index,
        "success": true,
        "error": null,
    }));
    if branch.result_state.is_some() {
        // The action's result, as the result's templates name it.
        result
            .data
            .bind
            .insert("output".into(), ValueTemplate(Value::from("{{ input }}")));
    }
    blocks.push(branch.work);
    blocks.push(result);
    let mut body = Block::new(BlockKind::Sequence(blocks));
    if !fail_fast {
        // TEA keeps a failed branch as a result whose state holds its item and index
        // and whose error is the message (tea-notes: "kept in the results with its
        // error"); the error itself stays in the run's events.
        body.policy.rescue.push(Rescue {
            when: Vec::new(),
            then: transform(json!({
                "state": {
                    names.item.clone(): names.item_template(),
                    names.index.clone(): index,
                },
                "source_node": node,
                "index": index,
                "success": false,
                "error": "{{ input.error.message }}",
            })),
        });
    }
    body
}

/// Whether `block` can see the state: a template in it names `state`, or a block in it
/// reads the state beyond its templates (code without `args` gets it whole, a model call
/// keeps history in it or runs tools, a handler or sub-flow sees it).
fn may_read_state(block: &Block) -> bool {
    let mut opaque = false;
    let mut stack = vec![block];
    while let Some(b) = stack.pop() {
        opaque |= match &b.kind {
            BlockKind::Action(_)
            | BlockKind::Transform(_)
            | BlockKind::Passthrough
            | BlockKind::Sequence(_) => false,
            BlockKind::Llm(l) => l.history.is_some() || !l.tools.is_empty(),
            _ => true,
        };
        if let BlockKind::Sequence(steps) = &b.kind {
            stack.extend(steps);
        }
        stack.extend(b.policy.rescue.iter().map(|r| &r.then));
    }
    opaque
        || weft_core::validate::block_expression_sites(block)
            .iter()
            .any(|site| super::code::mentions(site.source, "state"))
}

/// Whether a template (any string inside `v`) names `state` as a word.
fn mentions_state(v: &Value) -> bool {
    match v {
        Value::String(s) => super::code::mentions(s, "state"),
        Value::Array(a) => a.iter().any(mentions_state),
        Value::Object(o) => o.values().any(mentions_state),
        _ => false,
    }
}
