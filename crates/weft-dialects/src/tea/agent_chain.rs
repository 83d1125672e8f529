//! TEA's `agent.sequential`: agents of `settings.agents` in a chain, each one's answer
//! feeding the next one's task. A task is `tasks[i]`, else `task`, else TEA's default
//! (`{{ state.input }}` for the first agent, `{{ previous_response }}` after); in it
//! `previous_response`, `chain_index` and `chain_length` are bound, as TEA binds them,
//! and `transform` (with `current_response` bound) rewrites each answer before the next
//! agent sees it. The result is TEA's `{result, <output_key>, chain: [{agent, response,
//! success}], success, agents_called}`.

use super::{Compiler, template, transform};
use indexmap::IndexMap;
use serde_json::{Map, Value, json};
use weft_core::Diagnostic;
use weft_core::ir::{Block, BlockKind, ValueTemplate};

/// The options `agent.sequential` reads.
const OPTIONS: &[&str] = &[
    "agents",
    "task",
    "tasks",
    "transform",
    "early_exit_on_failure",
    "output_key",
];

impl Compiler<'_> {
    /// The block of `uses: agent.sequential` with `with`, at node pointer `ptr`.
    pub(super) fn agent_sequential(
        &mut self,
        with: Option<&Value>,
        ptr: &str,
        node: &str,
    ) -> Option<Block> {
        let uses = "agent.sequential";
        let wptr = format!("{ptr}/with");
        let with = self.with_mapping(
            uses,
            with,
            &wptr,
            "its `agents`",
            "with: {agents: [extractor, summarizer], task: \"{{ previous_response }}\"}",
        )?;
        if let Some(refusal) = self.passed_on_options(uses, with, OPTIONS, &wptr, (ptr, node)) {
            return Some(refusal);
        }
        let names: Vec<&str> = with
            .get("agents")
            .and_then(Value::as_array)
            .map(|l| l.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if names.is_empty() {
            self.diags.push(Diagnostic::error(
                &wptr,
                "agent.sequential needs `agents`, names from settings.agents in chain order",
            ));
            return None;
        }
        let tasks = self.chain_tasks(with, names.len(), &wptr)?;
        let rewrite = with.get("transform").and_then(Value::as_str);
        let mut steps = vec![transform(json!({"previous": "", "chain": []}))];
        for (i, (name, task)) in names.iter().zip(&tasks).enumerate() {
            let aptr = format!("{wptr}/agents/{i}");
            let call = self.agent_call(name, task, None, &aptr, ptr, node)?;
            steps.push(stage(call, name, i, names.len(), rewrite));
        }
        let key = with
            .get("output_key")
            .and_then(Value::as_str)
            .unwrap_or("sequential_result");
        let called: Vec<Value> = names.iter().map(|n| Value::from(*n)).collect();
        let mut result = Map::new();
        result.insert("result".into(), "{{ input.previous }}".into());
        result.insert(key.into(), "{{ input.previous }}".into());
        result.insert("chain".into(), "{{ input.chain }}".into());
        result.insert("success".into(), true.into());
        result.insert("agents_called".into(), Value::Array(called));
        steps.push(transform(Value::Object(result)));
        Some(Block::new(BlockKind::Sequence(steps)))
    }

    /// Each agent's task template, in chain order.
    fn chain_tasks(
        &mut self,
        with: &Map<String, Value>,
        agents: usize,
        wptr: &str,
    ) -> Option<Vec<String>> {
        if let Some(tasks) = with.get("tasks") {
            let list: Option<Vec<String>> = tasks
                .as_array()
                .map(|l| l.iter().map(|t| t.as_str().map(str::to_owned)).collect())
                .unwrap_or(None);
            return match list {
                Some(list) if list.len() == agents => Some(list),
                _ => {
                    self.diags.push(Diagnostic::error(
                        format!("{wptr}/tasks"),
                        format!("tasks is a list of {agents} task templates, one per agent"),
                    ));
                    None
                }
            };
        }
        let task = with.get("task").and_then(Value::as_str);
        Some(
            (0..agents)
                .map(|i| match (task, i) {
                    (Some(t), _) => t.to_owned(),
                    (None, 0) => "{{ state.input }}".to_owned(),
                    (None, _) => "{{ previous_response }}".to_owned(),
                })
                .collect(),
        )
    }

    /// TEA hands options it does not read on to every model call, which refuses them
    /// when the node runs; so does Weft (a typo of an option is refused when the file
    /// loads).
    pub(super) fn passed_on_options(
        &mut self,
        uses: &str,
        with: &Map<String, Value>,
        options: &[&str],
        wptr: &str,
        (ptr, node): (&str, &str),
    ) -> Option<Block> {
        let mut passed = Vec::new();
        for key in with.keys().filter(|k| !options.contains(&k.as_str())) {
            if options.iter().any(|o| strsim::levenshtein(o, key) <= 2) {
                let hint = format!("its options: {}", options.join(", "));
                self.unknown_option(uses, key, wptr, options, hint);
            } else {
                passed.push(format!("`{key}`"));
            }
        }
        if passed.is_empty() {
            return None;
        }
        let message = format!(
            "{uses} passes {} on to each model call (as TEA does), and a model call has no such option",
            passed.join(", ")
        );
        let hint = format!("{uses}'s options: {}", options.join(", "));
        Some(self.unavailable(message, &hint, ptr, node))
    }
}

/// One link of the chain: the agent's call with TEA's names bound for its task, then its
/// answer (through `transform`) as the next link's `previous`, with its chain entry.
fn stage(call: Block, name: &str, index: usize, length: usize, rewrite: Option<&str>) -> Block {
    let response = match rewrite {
        Some(t) => Value::from(t),
        None => Value::from("{{ input.content }}"),
    };
    let mut record = transform(json!({
        "previous": response,
        "chain": format!(
            "{{{{ chain_before + [{{'agent': {}, 'response': input.content, 'success': true}}] }}}}",
            Value::from(name)
        ),
    }));
    record
        .data
        .bind
        .insert("current_response".into(), template("{{ input.content }}"));
    let mut link = Block::new(BlockKind::Sequence(vec![call, record]));
    let bind: IndexMap<String, ValueTemplate> = [
        ("previous_response", template("{{ input.previous }}")),
        ("chain_before", template("{{ input.chain }}")),
        ("chain_index", ValueTemplate(Value::from(index))),
        ("chain_length", ValueTemplate(Value::from(length))),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    link.data.bind = bind;
    link
}
