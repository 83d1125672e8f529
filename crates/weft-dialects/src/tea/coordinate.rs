//! TEA's `agent.coordinate`: a leader agent splits the task into one subtask per worker
//! (a JSON array in its answer, found and read as TEA reads it, the task itself for each
//! worker when there is none), the workers answer at once (one after another with
//! `parallel_workers: false`), and the leader aggregates their answers, with
//! `validation_prompt` appended. The result is TEA's `{result, rounds, worker_results,
//! success, leader, workers}`. TEA starts another round only after a failed call; in
//! Weft a failed call fails the node, so there is one round (`max_rounds` is checked).

use super::{Compiler, transform};
use indexmap::IndexMap;
use serde_json::{Map, Value, json};
use weft_core::Diagnostic;
use weft_core::ir::{Block, BlockKind, CodeLimits, CodeSpec, ParallelSpec, ValueTemplate};

/// The options `agent.coordinate` reads.
const OPTIONS: &[&str] = &[
    "leader",
    "workers",
    "task",
    "validation_prompt",
    "max_rounds",
    "parallel_workers",
];

/// The leader's subtasks from its answer, as TEA finds them: the text from the first
/// `[` to the last `]` read as JSON, else the task for every worker; padded with the
/// last subtask to one per worker.
const SUBTASKS: &str = r#"import json
start = content.find("[")
end = content.rfind("]") + 1
subtasks = [task] * workers
if start >= 0 and end > start:
    try:
        found = json.loads(content[start:end])
        if isinstance(found, list):
            subtasks = found
    except Exception:
        pass
while len(subtasks) < workers:
    subtasks.append(subtasks[-1] if subtasks else task)
return {"subtasks": [s if isinstance(s, str) else json.dumps(s) for s in subtasks]}
"#;

impl Compiler<'_> {
    /// The block of `uses: agent.coordinate` with `with`, at node pointer `ptr`.
    pub(super) fn agent_coordinate(
        &mut self,
        with: Option<&Value>,
        ptr: &str,
        node: &str,
    ) -> Option<Block> {
        let uses = "agent.coordinate";
        let wptr = format!("{ptr}/with");
        let with = self.with_mapping(
            uses,
            with,
            &wptr,
            "its `leader`, `workers` and `task`",
            "with: {leader: lead, workers: [writer, coder], task: \"{{ state.request }}\"}",
        )?;
        if let Some(refusal) = self.passed_on_options(uses, with, OPTIONS, &wptr, (ptr, node)) {
            return Some(refusal);
        }
        let leader = with.get("leader").and_then(Value::as_str);
        let task = with.get("task").and_then(Value::as_str);
        let workers: Vec<&str> = with
            .get("workers")
            .and_then(Value::as_array)
            .map(|l| l.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let (Some(leader), Some(task), false) = (leader, task, workers.is_empty()) else {
            self.diags.push(Diagnostic::error(
                &wptr,
                "agent.coordinate needs `leader` and `workers` (names from settings.agents) and `task` (a template)",
            ));
            return None;
        };
        self.check_rounds(with, &wptr)?;
        let lptr = format!("{wptr}/leader");
        let plan = self.agent_call(
            leader,
            &plan_prompt(task, workers.len()),
            None,
            &lptr,
            ptr,
            node,
        )?;
        let split = subtasks_block(task, workers.len());
        let sequential = with.get("parallel_workers") == Some(&Value::Bool(false));
        let team = self.worker_calls(&workers, sequential, &wptr, ptr, node)?;
        let validation = with.get("validation_prompt").and_then(Value::as_str);
        let prompt = aggregate_prompt(task, &workers, validation);
        let aggregate = self.agent_call(leader, &prompt, None, &lptr, ptr, node)?;
        let called: Vec<Value> = workers.iter().map(|w| Value::from(*w)).collect();
        let results: Vec<Value> = workers
            .iter()
            .map(|w| Value::from(format!("{{{{ worker_outputs[{}] }}}}", Value::from(*w))))
            .collect();
        let result = transform(json!({
            "result": "{{ input.content }}",
            "rounds": 1,
            "worker_results": [results],
            "success": true,
            "leader": leader,
            "workers": called,
        }));
        let mut finish = Block::new(BlockKind::Sequence(vec![aggregate, result]));
        finish
            .data
            .bind
            .insert("worker_outputs".into(), ValueTemplate("{{ input }}".into()));
        Some(Block::new(BlockKind::Sequence(vec![
            plan, split, team, finish,
        ])))
    }

    /// `max_rounds`, a whole number of at least 1.
    fn check_rounds(&mut self, with: &Map<String, Value>, wptr: &str) -> Option<()> {
        match with.get("max_rounds") {
            Some(n) if n.as_u64().is_none_or(|n| n == 0) => {
                self.diags.push(Diagnostic::error(
                    format!("{wptr}/max_rounds"),
                    "max_rounds is a whole number of at least 1",
                ));
                None
            }
            _ => Some(()),
        }
    }

    /// One call per worker with its subtask, at once or one after another.
    fn worker_calls(
        &mut self,
        workers: &[&str],
        sequential: bool,
        wptr: &str,
        ptr: &str,
        node: &str,
    ) -> Option<Block> {
        let mut branches = IndexMap::new();
        for (i, name) in workers.iter().enumerate() {
            let aptr = format!("{wptr}/workers/{i}");
            if branches.contains_key(*name) {
                self.diags.push(Diagnostic::error(
                    aptr,
                    format!("`{name}` is named twice in `workers`"),
                ));
                return None;
            }
            let task = format!("{{{{ input.subtasks[{i}] }}}}");
            let call = self.agent_call(name, &task, None, &aptr, ptr, node)?;
            branches.insert((*name).to_owned(), call);
        }
        Some(Block::new(BlockKind::Parallel(ParallelSpec {
            branches,
            max_concurrency: sequential.then_some(1),
            fail_fast: true,
            on_error: Default::default(),
            isolate: true,
            race: false,
        })))
    }
}

/// TEA's request to the leader for subtasks; `task` stays a template.
fn plan_prompt(task: &str, workers: usize) -> String {
    format!(
        "You are a coordinator. Break down this task into subtasks for {workers} workers.\n\nTask: {task}\n\nRespond with a JSON array of subtasks, one for each worker:\n[\"subtask 1\", \"subtask 2\", ...]"
    )
}

/// TEA's request to the leader to aggregate the workers' answers (the worker outputs
/// are the block's input); `task` and `validation` stay templates.
fn aggregate_prompt(task: &str, workers: &[&str], validation: Option<&str>) -> String {
    let answers: Vec<String> = workers
        .iter()
        .enumerate()
        .map(|(i, w)| {
            format!(
                "- Worker {}: {{{{ input[{}].content }}}}",
                i + 1,
                Value::from(*w)
            )
        })
        .collect();
    let mut prompt = format!(
        "You are a coordinator. Aggregate these worker responses into a final answer.\n\nOriginal task: {task}\n\nWorker responses:\n{}\n\nProvide the final aggregated result.",
        answers.join("\n")
    );
    if let Some(v) = validation {
        prompt.push_str("\n\n");
        prompt.push_str(v);
    }
    prompt
}

/// The Python step that reads the leader's answer into one subtask per worker.
fn subtasks_block(task: &str, workers: usize) -> Block {
    Block::new(BlockKind::Code(CodeSpec {
        language: "python".into(),
        source: SUBTASKS.into(),
        origin: None,
        entry: None,
        args: Some(ValueTemplate(json!({
            "content": "{{ input.content }}",
            "task": task,
            "workers": workers,
        }))),
        imports: None,
        builtins: None,
        limits: CodeLimits::default(),
    }))
}
