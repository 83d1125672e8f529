//! TEA's planner: `plan.decompose` (a model splits a goal into subtasks with
//! dependencies, checked to form a DAG), `plan.execute` (the subtasks in dependency
//! order, one at a time or in waves of those ready, each by an action such as
//! `llm.call`, with TEA's failure strategies `abort`, `skip`, `retry` and `replan`),
//! `plan.replan` (a model plans the remaining work again, keeping what is done) and
//! `plan.status` (counts and progress).
//!
//! The model calls and the subtasks' actions are Weft blocks, journaled like any step;
//! the plan's bookkeeping (reading the model's JSON, the DAG check, the order, the
//! strategies) is Python of this module (`plan.py`) run in Weft's sandbox. The record of
//! an execution travels from one block to the next as its input:
//!
//! ```text
//! execute: start -> loop [map over the wave: the executor (its result or error)
//!          -> advance -> a new plan when the strategy asks -> wait when retrying]
//!          -> result
//! ```
//!
//! As in TEA, what goes wrong with a plan (a model answer that is no plan, a cycle, a
//! subtask that fails under `abort`) is the action's result, `{error, success: false}`,
//! not a failed node; a model call that fails fails the node, as in Weft's other
//! model patterns.

use super::{Compiler, python_call, template, transform};
use indexmap::IndexMap;
use serde_json::{Map, Value, json};
use weft_core::Diagnostic;
use weft_core::ir::{
    ActionSpec, Block, BlockKind, BranchSpec, Case, Expr, LoopSpec, MapSpec, OnError, Rescue,
    ValueTemplate,
};

/// The planner's bookkeeping, in Python.
const PLAN_PY: &str = include_str!("plan.py");

/// The most waves of subtasks one `plan.execute` runs.
const MAX_WAVES: u32 = 200;

/// How each strategy asks for a plan (Weft's wording of TEA's prompts).
const FLAT: &str = "You plan. Split the goal you are given into a flat list of subtasks, each one step that can be done on its own, each naming the subtasks it depends on by their ids (dependencies form no cycle). Give descriptive ids such as \"search_sources\". Usually 3 to 10 subtasks.";
const HIERARCHICAL: &str = "You plan. Split the goal you are given into phases and the steps of each phase: a phase's steps depend on the phase, a later phase on the steps before it; ids such as \"phase_1\", \"phase_1_2\". Dependencies form a tree with no cycle.";
const ITERATIVE: &str = "You plan one stretch at a time. Given what is done, name the next one to three subtasks that can be done now, and set \"planning_complete\" to true when they finish the goal.";
const PLAN_SHAPE: &str = "Reply with JSON only: {\"subtasks\": [{\"id\": \"...\", \"description\": \"...\", \"dependencies\": [\"...\"]}]}.";

/// The options of each action.
const DECOMPOSE: &[&str] = &[
    "goal",
    "model",
    "strategy",
    "max_depth",
    "max_subtasks",
    "prompt_template",
    "temperature",
    "provider",
    "api_base",
    "planner",
];
const EXECUTE: &[&str] = &[
    "plan",
    "parallel",
    "max_concurrent",
    "subtask_executor",
    "on_subtask_failure",
    "max_retries",
    "retry_delay",
    "max_replans",
    "model",
    "provider",
    "api_base",
];
const REPLAN: &[&str] = &["plan", "model", "temperature", "provider", "api_base"];
const STATUS: &[&str] = &["plan", "include_completed", "include_details"];

impl Compiler<'_> {
    /// `plan.decompose`: a model call, its answer read as a plan.
    pub(in crate::tea) fn plan_decompose(
        &mut self,
        with: Option<&Value>,
        ptr: &str,
        node: &str,
    ) -> Option<Block> {
        let wptr = format!("{ptr}/with");
        let given = self.with_options(
            "plan.decompose",
            with,
            &wptr,
            (
                "its `goal`",
                "with: {goal: \"{{ state.task }}\", strategy: flat}",
            ),
            DECOMPOSE,
        )?;
        let with = self.planner_options(given, &wptr);
        let goal = self
            .required_text(
                "plan.decompose",
                &with,
                (
                    "goal",
                    "a string (a template)",
                    Some("goal: \"{{ state.task }}\""),
                ),
                &wptr,
            )?
            .to_owned();
        let strategy = self.plan_strategy(with.get("strategy"), &wptr)?;
        let max_depth =
            self.constant_count(with.get("max_depth"), &format!("{wptr}/max_depth"), 3, 20)?;
        let max_subtasks = self.constant_count(
            with.get("max_subtasks"),
            &format!("{wptr}/max_subtasks"),
            15,
            200,
        )?;
        let system = match with.get("prompt_template").and_then(Value::as_str) {
            Some(custom) => custom.to_owned(),
            None => strategy_prompt(&strategy, max_depth, max_subtasks),
        };
        let call = self.model_turn(
            "plan.decompose",
            &with,
            (system, "Goal: {{ goal }}".to_owned()),
            with.get("model"),
            (ptr, node),
        )?;
        let read = python(
            "decompose(content, goal, strategy, model, max_subtasks)",
            json!({
                "content": "{{ input.content }}",
                "goal": "{{ goal }}",
                "strategy": strategy,
                "model": "{{ input.model }}",
                "max_subtasks": max_subtasks,
            }),
        );
        let mut b = Block::new(BlockKind::Sequence(vec![call, read]));
        b.data.bind = IndexMap::from([("goal".to_owned(), template(&goal))]);
        Some(b)
    }

    /// `planner:` (in TEA's own examples, though not among the options TEA reads):
    /// its keys are read as the action's own, those given beside it first.
    fn planner_options(&mut self, with: &Map<String, Value>, wptr: &str) -> Map<String, Value> {
        let mut out = with.clone();
        if let Some(planner) = out.remove("planner") {
            let Some(planner) = planner.as_object() else {
                self.diags.push(Diagnostic::error(
                    format!("{wptr}/planner"),
                    "planner is a mapping of plan.decompose's options",
                ));
                return out;
            };
            self.diags.push(Diagnostic::warning(
                format!("{wptr}/planner"),
                "`planner` is not an option TEA's plan.decompose reads; Weft reads its keys as the action's own options",
            ));
            for (k, v) in planner {
                if !DECOMPOSE.contains(&k.as_str()) || k == "planner" {
                    let hint = format!("its options: {}", DECOMPOSE.join(", "));
                    self.unknown_option(
                        "plan.decompose",
                        k,
                        &format!("{wptr}/planner"),
                        DECOMPOSE,
                        hint,
                    );
                    continue;
                }
                out.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        out
    }

    fn plan_strategy(&mut self, v: Option<&Value>, wptr: &str) -> Option<String> {
        const STRATEGIES: [&str; 3] = ["flat", "hierarchical", "iterative"];
        let given = match v {
            None => return Some("flat".into()),
            Some(Value::String(s)) => self.constant(s),
            Some(_) => None,
        };
        match given {
            Some(s) if STRATEGIES.contains(&s.as_str()) => Some(s),
            _ => {
                let shown = v.map(Value::to_string).unwrap_or_default();
                let d = Diagnostic::error(
                    format!("{wptr}/strategy"),
                    format!("unknown planning strategy {shown}"),
                );
                self.diags.push(d.hint_closest(
                    shown.trim_matches('"'),
                    STRATEGIES,
                    "strategies: flat, hierarchical, iterative",
                ));
                None
            }
        }
    }

    /// `plan.status`: the plan's counts and progress.
    pub(in crate::tea) fn plan_status(&mut self, with: Option<&Value>, ptr: &str) -> Option<Block> {
        let wptr = format!("{ptr}/with");
        let with = self.optional_with("plan.status", with, &wptr, Some(STATUS))?;
        Some(python(
            "status(plan, include_completed, include_details)",
            json!({
                "plan": with.get("plan").cloned().unwrap_or_else(|| Value::from("{{ state.get('plan') }}")),
                "include_completed": with.get("include_completed").cloned().unwrap_or(Value::Bool(true)),
                "include_details": with.get("include_details").cloned().unwrap_or(Value::Bool(false)),
            }),
        ))
    }

    /// `plan.replan`: a model plans the remaining work again.
    pub(in crate::tea) fn plan_replan(
        &mut self,
        with: Option<&Value>,
        ptr: &str,
        node: &str,
    ) -> Option<Block> {
        let uses = "plan.replan";
        let wptr = format!("{ptr}/with");
        let with = self.optional_with(uses, with, &wptr, None)?;
        if let Some(refusal) = self.passed_on_options(uses, with, REPLAN, &wptr, (ptr, node)) {
            return Some(refusal);
        }
        let call = self.model_turn(
            uses,
            with,
            (
                "You plan again after a subtask failed.".to_owned(),
                "{{ input.prompt }}".to_owned(),
            ),
            with.get("model"),
            (ptr, node),
        )?;
        let ask = python(
            "{'prompt': replan_prompt(filled(plan), failed, reason)} if plan and not readable(plan) else {'error': 'No plan to replan' if not plan else 'Replan failed: ' + readable(plan), 'success': False}",
            json!({
                "plan": with.get("plan").cloned().unwrap_or_else(|| Value::from("{{ state.get('plan') }}")),
                "failed": "{{ state.get('failed_subtask') }}",
                "reason": "{{ state.get('failure_reason', 'Unknown') }}",
            }),
        );
        let answer = python(
            "standalone_replan(filled(plan), {}, failed, reason, content)",
            json!({
                "plan": with.get("plan").cloned().unwrap_or_else(|| Value::from("{{ state.get('plan') }}")),
                "failed": "{{ state.get('failed_subtask') }}",
                "reason": "{{ state.get('failure_reason', 'Unknown') }}",
                "content": "{{ input.content }}",
            }),
        );
        let replan = Block::new(BlockKind::Sequence(vec![call, answer]));
        Some(Block::new(BlockKind::Sequence(vec![
            ask,
            Block::new(BlockKind::Branch(BranchSpec {
                cases: vec![Case {
                    name: Some("replan".into()),
                    when: Expr("'prompt' in input".into()),
                    then: replan,
                }],
                otherwise: None,
            })),
        ])))
    }

    /// `plan.execute`: the subtasks in waves, by the executor action.
    pub(in crate::tea) fn plan_execute(
        &mut self,
        with: Option<&Value>,
        ptr: &str,
        node: &str,
    ) -> Option<Block> {
        let uses = "plan.execute";
        let wptr = format!("{ptr}/with");
        let with = self.optional_with(uses, with, &wptr, Some(EXECUTE))?;
        let strategy = match with
            .get("on_subtask_failure")
            .map(|v| v.as_str().and_then(|s| self.constant(s)))
        {
            None => "abort".to_owned(),
            Some(Some(s)) if ["abort", "skip", "retry", "replan"].contains(&s.as_str()) => s,
            Some(other) => {
                let shown = other.unwrap_or_default();
                let d = Diagnostic::error(
                    format!("{wptr}/on_subtask_failure"),
                    format!("unknown failure strategy `{shown}`"),
                );
                self.diags.push(d.hint_closest(
                    &shown,
                    ["abort", "skip", "retry", "replan"],
                    "on_subtask_failure: abort, skip, retry or replan",
                ));
                return None;
            }
        };
        let width = self
            .constant_count(
                with.get("max_concurrent"),
                &format!("{wptr}/max_concurrent"),
                3,
                64,
            )?
            .max(1);
        let options = json!({
            "parallel": with.get("parallel").cloned().unwrap_or(Value::Bool(false)),
            "max_concurrent": width,
            "on_subtask_failure": strategy,
            "max_retries": self.constant_count(with.get("max_retries"), &format!("{wptr}/max_retries"), 2, 20)?,
            "retry_delay": with.get("retry_delay").cloned().unwrap_or(json!(1.0)),
            "max_replans": self.constant_count(with.get("max_replans"), &format!("{wptr}/max_replans"), 2, 20)?,
        });
        let executor = self.subtask_executor(with, &wptr, node)?;
        let replan = self.model_turn(
            uses,
            with,
            (
                "You plan again after a subtask failed.".to_owned(),
                "{{ carried.replan.prompt }}".to_owned(),
            ),
            with.get("model"),
            (ptr, node),
        )?;
        let start = python(
            "start(plan, results, replans, options)",
            json!({
                "plan": with.get("plan").cloned().unwrap_or_else(|| Value::from("{{ state.get('plan') }}")),
                "results": "{{ state.get('subtask_results') or {} }}",
                "replans": "{{ state.get('replan_count') or 0 }}",
                "options": options,
            }),
        );
        let finish = python(
            &format!("finish(record, {MAX_WAVES})"),
            json!({"record": "{{ input }}"}),
        );
        Some(Block::new(BlockKind::Sequence(vec![
            start,
            waves(executor, width, replan),
            finish,
        ])))
    }

    /// The block that runs one subtask (`subtask` and `subtask_results` bound), giving
    /// `{ok, result, error}`: `subtask_executor`'s action, by default `llm.call` with
    /// the subtask (and its dependencies' results) as the prompt.
    fn subtask_executor(
        &mut self,
        with: &Map<String, Value>,
        wptr: &str,
        node: &str,
    ) -> Option<Block> {
        let config = with.get("subtask_executor").and_then(Value::as_object);
        let action = config
            .and_then(|c| c.get("action"))
            .and_then(Value::as_str)
            .unwrap_or("llm.call");
        let mut params = config
            .and_then(|c| c.get("with"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if action == "llm.call" {
            if !params.contains_key("model") {
                for key in ["model", "provider", "api_base"] {
                    if let Some(v) = with.get(key) {
                        params.insert(key.into(), v.clone());
                    }
                }
            }
            if !params.contains_key("messages") && !params.contains_key("prompt") {
                params.insert("messages".into(), json!([
                    {"role": "system", "content": "You carry out one subtask of a larger plan. Do it and give a useful result."},
                    {"role": "user", "content": "Subtask: {{ subtask.description }}{% for d in subtask.dependencies %}{% if d in subtask_results %}\nResult from '{{ d }}': {{ (subtask_results[d] | string)[:500] }}{% endif %}{% endfor %}"},
                ]));
            }
        }
        let eptr = format!("{wptr}/subtask_executor");
        let run = self.action(action, Some(&Value::Object(params)), &eptr, node)?;
        let judged = transform(Value::from(
            "{{ {'ok': false, 'error': input.error} if input is mapping and input.error else {'ok': true, 'result': input.content if input is mapping and 'content' in input else input} }}",
        ));
        let mut b = Block::new(BlockKind::Sequence(vec![run, judged]));
        b.policy.rescue.push(Rescue {
            when: Vec::new(),
            then: transform(Value::from(
                "{{ {'ok': false, 'error': input.error.message} }}",
            )),
        });
        Some(b)
    }
}

/// The loop of waves: each runs the ready subtasks at once (at most `width`), applies
/// their outcomes, plans again when the strategy asks, and waits before a retry.
fn waves(executor: Block, width: u32, replan: Block) -> Block {
    // TEA runs each subtask's action on a copy of the state holding `current_subtask`
    // and `subtask_results`, so the executor's templates read them from `state`; the
    // branches are isolated, so the copy's keys stay in the branch.
    let mut context = Block::new(BlockKind::Passthrough);
    context.data.set = IndexMap::from([
        ("current_subtask".to_owned(), template("{{ subtask }}")),
        (
            "subtask_results".to_owned(),
            template("{{ subtask_results }}"),
        ),
    ]);
    let executor = Block::new(BlockKind::Sequence(vec![context, executor]));
    let mut wave = Block::new(BlockKind::Map(MapSpec {
        items: template("{{ carried.batch }}"),
        item_var: "subtask".into(),
        index_var: "subtask_index".into(),
        item_input: None,
        body: Box::new(executor),
        max_concurrency: Some(width),
        fail_fast: false,
        on_error: OnError::Fail,
        isolate: true,
    }));
    wave.data.bind = IndexMap::from([(
        "subtask_results".to_owned(),
        template("{{ carried.results }}"),
    )]);
    let advance = python(
        "advance(record, outcomes)",
        json!({"record": "{{ carried }}", "outcomes": "{{ input }}"}),
    );
    let again = python(
        "after_replan(record, content)",
        json!({"record": "{{ carried }}", "content": "{{ input.content }}"}),
    );
    let mut replanning = Block::new(BlockKind::Sequence(vec![replan, again]));
    replanning.data.bind = IndexMap::from([("carried".to_owned(), template("{{ input }}"))]);
    let pause = Block::new(BlockKind::Action(ActionSpec {
        uses: "time.sleep".into(),
        params: Some(ValueTemplate(json!({"ms": "{{ input.sleep_ms }}"}))),
    }));
    let after = Block::new(BlockKind::Branch(BranchSpec {
        cases: vec![
            Case {
                name: Some("replan".into()),
                when: Expr("input.replan".into()),
                then: replanning,
            },
            Case {
                name: Some("wait".into()),
                when: Expr("input.sleep_ms > 0 and not input.done".into()),
                then: pause,
            },
        ],
        otherwise: None,
    }));
    let mut body = Block::new(BlockKind::Sequence(vec![wave, advance, after]));
    body.data.bind = IndexMap::from([("carried".to_owned(), template("{{ input }}"))]);
    Block::new(BlockKind::Loop(LoopSpec {
        body: Box::new(body),
        max_iterations: MAX_WAVES,
        while_: Some(Expr("not input.done".into())),
        until: None,
        fail_at_max: false,
        warn_at_max: false,
    }))
}

/// The system prompt of a strategy.
fn strategy_prompt(strategy: &str, max_depth: u32, max_subtasks: u32) -> String {
    match strategy {
        "hierarchical" => format!(
            "{HIERARCHICAL} At most {max_depth} levels deep and {max_subtasks} subtasks in all. {PLAN_SHAPE}"
        ),
        "iterative" => format!(
            "{ITERATIVE}\n\nDone so far:\n{{% for k, v in (state.get('subtask_results') or {{}}).items() %}}- {{{{ k }}}}: {{{{ (v | string)[:100] }}}}\n{{% else %}}None\n{{% endfor %}}\nReply with JSON only: {{\"subtasks\": [{{\"id\": \"...\", \"description\": \"...\", \"dependencies\": []}}], \"planning_complete\": false}}."
        ),
        _ => format!("{FLAT} {PLAN_SHAPE}"),
    }
}

/// A block running PLAN_PY's Python: `call` (an expression of its functions) with `args`
/// as names; its value is the block's output.
fn python(call: &str, args: Value) -> Block {
    python_call(PLAN_PY, call, args)
}
