//! TEA's `agent.dispatch`: a task for one of the agents `settings.agents` declares
//! (`system_prompt`, `model`, `temperature`, `max_tokens`, `timeout`), which is a model
//! call with that agent's system prompt. The result is TEA's `{response, content, agent,
//! success, attempts}` with the call's `model` and `usage`. An agent the file does not
//! declare is refused when the file loads (TEA finds out when the node runs).

use super::Compiler;
use serde_json::{Map, Value, json};
use weft_core::Diagnostic;
use weft_core::ir::{Block, BlockKind, TransformSpec, ValueTemplate};

/// The options `agent.dispatch` reads.
const OPTIONS: &[&str] = &["agent", "task", "timeout", "max_retries"];

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
        let Some(agent) = self.agents.get(name).cloned() else {
            let d = Diagnostic::error(
                format!("{wptr}/agent"),
                format!("no agent `{name}` in settings.agents"),
            );
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
        if let Some(t) = with.get("timeout").or_else(|| agent.get("timeout")) {
            call.insert("timeout".into(), t.clone());
        }
        let model_call = self.llm_call("agent.dispatch", Some(&Value::Object(call)), ptr, node)?;
        let result = Block::new(BlockKind::Transform(TransformSpec {
            output: ValueTemplate(json!({
                "response": "{{ input.content }}",
                "content": "{{ input.content }}",
                "agent": name,
                "success": true,
                "attempts": 1,
                "model": "{{ input.model }}",
                "usage": "{{ input.usage }}",
            })),
            exit: None,
        }));
        Some(Block::new(BlockKind::Sequence(vec![model_call, result])))
    }
}
