//! Prompts (`prompts/list`, `prompts/get`): one per dialect, "write a flow in DIALECT
//! that TASK", carrying the dialect's reference (its kinds, fields and examples) and one
//! of the repository's example flows in it, and the way to check the result before it
//! runs. They change only with Weft's version, so lists are cacheable for everyone.

use rmcp::ErrorData;
use rmcp::model::{
    CacheScope, GetPromptResult, ListPromptsResult, Prompt, PromptArgument, PromptMessage, Role,
};
use serde_json::Value;

/// How long a client may keep the prompt list (an hour: it changes only with Weft).
const LIST_TTL_MS: u64 = 60 * 60 * 1000;

/// The prompt of dialect `name`: `write_<name>_flow`.
fn prompt_name(dialect: &str) -> String {
    format!("write_{dialect}_flow")
}

/// An example flow of each dialect, from the repository's `examples/`.
fn example(dialect: &str) -> Option<&'static str> {
    Some(match dialect {
        "native" => include_str!("../../../examples/hello.yaml"),
        "tea" => include_str!("../../../examples/tea/counter.yaml"),
        "blocks" => include_str!("../../../examples/blocks/word-stats.json"),
        "graph" => include_str!("../../../examples/graph/keyword-router.json"),
        "souls" => include_str!("../../../examples/souls/word-stats.yaml"),
        _ => return None,
    })
}

/// Every prompt, one per dialect.
pub(crate) fn list() -> ListPromptsResult {
    let prompts = weft_dialects::dialects()
        .iter()
        .map(|d| {
            Prompt::new(
                prompt_name(d.name()),
                Some(format!(
                    "Write a flow in Weft's `{}` dialect ({})",
                    d.name(),
                    d.summary()
                )),
                Some(vec![
                    PromptArgument::new("task")
                        .with_description("what the flow should do, in a sentence or two")
                        .with_required(true),
                ]),
            )
        })
        .collect();
    ListPromptsResult::with_all_items(prompts)
        .with_ttl_ms(LIST_TTL_MS)
        .with_cache_scope(CacheScope::Public)
}

/// Prompt `name` with its `task` argument.
pub(crate) fn get(
    name: &str,
    arguments: Option<&serde_json::Map<String, Value>>,
) -> Result<GetPromptResult, ErrorData> {
    let dialect = weft_dialects::dialects()
        .iter()
        .find(|d| prompt_name(d.name()) == name)
        .ok_or_else(|| {
            let known: Vec<String> = weft_dialects::dialects()
                .iter()
                .map(|d| prompt_name(d.name()))
                .collect();
            ErrorData::invalid_params(
                format!("no prompt `{name}`; the prompts: {}", known.join(", ")),
                None,
            )
        })?;
    let task = arguments
        .and_then(|a| a.get("task"))
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            ErrorData::invalid_params(
                format!("prompt `{name}` needs the argument `task`: what the flow should do"),
                None,
            )
        })?;
    let name = dialect.name();
    let mut messages = vec![PromptMessage::new_text(
        Role::User,
        format!(
            "Write a flow in Weft's `{name}` dialect that does this: {task}\n\n\
             Follow the dialect's reference below exactly. Check the flow with the tool \
             `validate_flow` (dialect `{name}`) and fix every error it reports (each has a \
             line, a column and a hint; warnings name reads that will probably fail), then \
             save it with `save_flow` and try it with `test_flow` before `run_flow`.\n\n\
             # The `{name}` dialect\n\n{}",
            dialect.reference()
        ),
    )];
    if let Some(example) = example(name) {
        messages.push(PromptMessage::new_text(
            Role::User,
            format!("A complete `{name}` flow that validates, as an example of the shape:\n\n```\n{example}```"),
        ));
    }
    Ok(GetPromptResult::new(messages).with_description(format!("Write a `{name}` flow")))
}
