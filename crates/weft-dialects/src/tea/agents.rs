//! TEA's agents: `agent.dispatch`, a task for one of the agents `settings.agents`
//! declares (`system_prompt`, `model`, `temperature`, `max_tokens`, `timeout`), which is a
//! model call with that agent's system prompt, giving TEA's `{response, content, agent,
//! success, attempts}` with the call's `model` and `usage`; and `agent.parallel`, the same
//! task to several agents at once, their answers aggregated as TEA does (`collect`,
//! `vote`, `first`). An agent the file does not declare is refused when the file loads
//! (TEA finds out when the node runs).

use super::{Compiler, transform};
use indexmap::IndexMap;
use serde_json::{Map, Value, json};
use weft_core::Diagnostic;
use weft_core::ir::{Block, BlockKind, CodeLimits, CodeSpec, ParallelSpec, ValueTemplate};

/// The options `agent.dispatch` reads.
const OPTIONS: &[&str] = &["agent", "task", "timeout", "max_retries"];

/// The options `agent.parallel` reads.
const PARALLEL_OPTIONS: &[&str] = &["agents", "task", "aggregation", "max_concurrent", "timeout"];

/// How `agent.parallel` aggregates its agents' answers (TEA's `consensus` is not run).
const AGGREGATIONS: [&str; 3] = ["collect", "vote", "first"];

/// TEA's `vote`: the most common answer (the first seen wins a tie), with the counts.
const VOTE: &str = r#"
local counts, order = {}, {}
for _, answer in ipairs(responses) do
  local key = type(answer) == "string" and answer or tostring(answer)
  if counts[key] == nil then counts[key] = 0; order[#order + 1] = key end
  counts[key] = counts[key] + 1
end
local best = order[1]
for _, key in ipairs(order) do
  if counts[key] > counts[best] then best = key end
end
return {result = best, votes = counts, unanimous = #order == 1,
        total_votes = #responses, aggregation = "vote", success = true,
        agents_called = agents_called, raw_results = raw_results}
"#;

impl Compiler<'_> {
    /// The block of `uses: agent.dispatch` with `with`, at node pointer `ptr`.
    pub(super) fn agent_dispatch(
        &mut self,
        with: Option<&Value>,
        ptr: &str,
        node: &str,
    ) -> Option<Block> {
        let wptr = format!("{ptr}/with");
        let with = self.with_options(
            "agent.dispatch",
            with,
            &wptr,
            (
                "its `agent` and `task`",
                "with: {agent: researcher, task: \"Research {{ state.topic }}\"}",
            ),
            OPTIONS,
        )?;
        let (Some(name), Some(task)) = (
            with.get("agent").and_then(Value::as_str),
            with.get("task").and_then(Value::as_str),
        ) else {
            self.diags.push(Diagnostic::error(
                &wptr,
                "agent.dispatch needs `agent` (a name from settings.agents) and `task` (a template)",
            ));
            return None;
        };
        self.agent_call(
            name,
            task,
            with.get("timeout"),
            &format!("{wptr}/agent"),
            ptr,
            node,
        )
    }

    /// One agent's answer to `task` (a template): the model call with the agent's
    /// settings, then TEA's result of it. `aptr` points at where the file names it.
    pub(super) fn agent_call(
        &mut self,
        name: &str,
        task: &str,
        timeout: Option<&Value>,
        aptr: &str,
        ptr: &str,
        node: &str,
    ) -> Option<Block> {
        let Some(agent) = self.agents.get(name).cloned() else {
            let d = Diagnostic::error(aptr, format!("no agent `{name}` in settings.agents"));
            let known: Vec<String> = self.agents.keys().cloned().collect();
            self.diags.push(d.hint_closest(
                name,
                known.iter().map(String::as_str),
                "declare it: settings: {agents: {NAME: {system_prompt: ...}}}",
            ));
            return None;
        };
        let mut call = Map::new();
        call.insert("prompt".into(), Value::from(task));
        if let Some(system) = agent.get("system_prompt").and_then(Value::as_str) {
            call.insert(
                "system".into(),
                Value::from(crate::template_text::literal(system)),
            );
        }
        for key in ["model", "provider", "api_base", "temperature", "max_tokens"] {
            if let Some(v) = agent.get(key).or_else(|| self.llm_settings.get(key)) {
                call.insert(key.into(), v.clone());
            }
        }
        if let Some(t) = timeout.or_else(|| agent.get("timeout")) {
            call.insert("timeout".into(), t.clone());
        }
        let model_call = self.llm_call("agent.dispatch", Some(&Value::Object(call)), ptr, node)?;
        let result = transform(json!({
            "response": "{{ input.content }}",
            "content": "{{ input.content }}",
            "agent": name,
            "success": true,
            "attempts": 1,
            "model": "{{ input.model }}",
            "usage": "{{ input.usage }}",
        }));
        Some(Block::new(BlockKind::Sequence(vec![model_call, result])))
    }

    /// The block of `uses: agent.parallel` with `with`, at node pointer `ptr`.
    pub(super) fn agent_parallel(
        &mut self,
        with: Option<&Value>,
        ptr: &str,
        node: &str,
    ) -> Option<Block> {
        let wptr = format!("{ptr}/with");
        let with = self.with_options(
            "agent.parallel",
            with,
            &wptr,
            (
                "its `agents` and `task`",
                "with: {agents: [a, b], task: \"Review {{ state.code }}\", aggregation: collect}",
            ),
            PARALLEL_OPTIONS,
        )?;
        let names: Vec<&str> = match with.get("agents").and_then(Value::as_array) {
            Some(list) if !list.is_empty() => list.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let task = with.get("task").and_then(Value::as_str);
        let (Some(task), false) = (task, names.is_empty()) else {
            self.diags.push(Diagnostic::error(
                &wptr,
                "agent.parallel needs `agents` (names from settings.agents) and `task` (a template)",
            ));
            return None;
        };
        let aggregation = with
            .get("aggregation")
            .and_then(Value::as_str)
            .unwrap_or("collect");
        if !AGGREGATIONS.contains(&aggregation) {
            let d = Diagnostic::error(
                format!("{wptr}/aggregation"),
                format!("agent.parallel cannot aggregate by `{aggregation}`"),
            );
            self.diags.push(d.hint_closest(
                aggregation,
                AGGREGATIONS,
                "Weft aggregates by collect, vote or first; TEA's consensus (asking every agent again until enough agree) it does not run",
            ));
            return None;
        }
        let mut branches = IndexMap::new();
        for (i, name) in names.iter().enumerate() {
            let aptr = format!("{wptr}/agents/{i}");
            if branches.contains_key(*name) {
                self.diags.push(Diagnostic::error(
                    aptr,
                    format!("`{name}` is named twice in `agents`"),
                ));
                return None;
            }
            let call = self.agent_call(name, task, with.get("timeout"), &aptr, ptr, node)?;
            branches.insert((*name).to_owned(), call);
        }
        let max_concurrency = with
            .get("max_concurrent")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok());
        let first = aggregation == "first";
        let fan_out = Block::new(BlockKind::Parallel(ParallelSpec {
            branches,
            max_concurrency,
            fail_fast: false,
            on_error: Default::default(),
            isolate: true,
            race: first,
        }));
        Some(Block::new(BlockKind::Sequence(vec![
            fan_out,
            aggregate(aggregation, &names),
        ])))
    }
}

/// TEA's aggregation of the agents' results (the fan-out's output: by agent name, or
/// the winner's result for `first`), with TEA's `success`, `agents_called` and
/// `raw_results`.
fn aggregate(aggregation: &str, names: &[&str]) -> Block {
    let called: Vec<Value> = names.iter().map(|n| Value::from(*n)).collect();
    let responses: Vec<Value> = names
        .iter()
        .map(|n| Value::from(format!("{{{{ input[{}].content }}}}", Value::from(*n))))
        .collect();
    let raw: Vec<Value> = names
        .iter()
        .map(|n| Value::from(format!("{{{{ input[{}] }}}}", Value::from(*n))))
        .collect();
    let with_common = |mut v: Value| {
        let m = v.as_object_mut().expect("an object");
        m.insert("success".into(), Value::Bool(true));
        m.insert("agents_called".into(), Value::Array(called.clone()));
        v
    };
    match aggregation {
        "first" => transform(with_common(json!({
            "result": "{{ input.content }}",
            "agent": "{{ input.agent }}",
            "aggregation": "first",
            "raw_results": ["{{ input }}"],
        }))),
        "vote" => Block::new(BlockKind::Code(CodeSpec {
            language: "lua".into(),
            source: VOTE.into(),
            origin: None,
            entry: None,
            args: Some(ValueTemplate(json!({
                "responses": responses,
                "agents_called": called,
                "raw_results": raw,
            }))),
            imports: None,
            builtins: None,
            limits: CodeLimits::default(),
        })),
        _ => transform(with_common(json!({
            "responses": responses,
            "count": names.len(),
            "aggregation": "collect",
            "raw_results": raw,
        }))),
    }
}
