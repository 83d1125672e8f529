//! A deterministic model for offline runs and tests: rules, tried in order, match the
//! last message and say what to answer — text, JSON, tool calls, or an error.
//!
//! ```yaml
//! models:
//!   fake:
//!     provider: scripted
//!     rules:
//!       - when: "capital of France"   # substring of the last message
//!         reply: "Paris."
//!       - role: tool                  # the last message is a tool result
//!         reply: "The tool said: {last}"
//!       - regex: "(?i)weather in (\\w+)"
//!         tool_calls: [{name: weather, arguments: {city: "Oslo"}}]
//!       - reply: "I don't know."      # no matcher: always matches
//!       - when: "cat"                 # an embed block's text
//!         embedding: [0.1, 0.9]
//! ```
//!
//! A rule with `embedding` answers only embedding calls (each text is matched on its
//! own); the others answer only chats, except `error`, which answers both.

use async_trait::async_trait;
use regex::Regex;
use serde::Deserialize;
use std::time::Duration;
use weft_core::ir::ModelDef;
use weft_core::ports::{
    DeltaSink, EmbedRequest, EmbedResponse, Model, ModelRequest, ModelResponse, ToolCall, Usage,
};
use weft_core::{BlockError, ErrorKind, Value};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleDef {
    #[serde(default)]
    when: Option<String>,
    #[serde(default)]
    regex: Option<String>,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    reply: Option<String>,
    #[serde(default)]
    json: Option<Value>,
    #[serde(default)]
    tool_calls: Vec<ToolCallDef>,
    #[serde(default)]
    embedding: Option<Vec<f32>>,
    #[serde(default)]
    error: Option<ErrorDef>,
    #[serde(default)]
    delay_ms: u64,
    /// A pause before each streamed word after the first, so the reply arrives as a real
    /// model's does (for clients that show text as it streams).
    #[serde(default)]
    stream_delay_ms: u64,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolCallDef {
    name: String,
    #[serde(default)]
    arguments: Value,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ErrorDef {
    kind: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    retry_after_ms: Option<u64>,
}

struct Rule {
    def: RuleDef,
    regex: Option<Regex>,
}

/// The scripted model.
pub struct Scripted {
    rules: Vec<Rule>,
}

fn config(msg: String) -> BlockError {
    BlockError::new(ErrorKind::Config, msg)
}

impl Scripted {
    /// Builds the model from a flow's alias (`rules:` list).
    pub fn from_def(def: &ModelDef) -> Result<Scripted, BlockError> {
        let rules = def
            .options
            .get("rules")
            .ok_or_else(|| config("a scripted model needs `rules`".into()))?;
        for key in def.options.keys() {
            if key != "rules" {
                return Err(config(format!(
                    "a scripted model takes only `rules`, not `{key}`"
                )));
            }
        }
        Scripted::from_rules(rules)
    }

    /// Builds the model from a JSON list of rules.
    pub fn from_rules(rules: &Value) -> Result<Scripted, BlockError> {
        let defs: Vec<RuleDef> = serde_json::from_value(rules.clone())
            .map_err(|e| config(format!("invalid scripted rules: {e}")))?;
        let rules = defs
            .into_iter()
            .enumerate()
            .map(|(i, def)| {
                let regex = def
                    .regex
                    .as_deref()
                    .map(Regex::new)
                    .transpose()
                    .map_err(|e| config(format!("scripted rule {i}: invalid regex: {e}")))?;
                let answers = usize::from(def.reply.is_some())
                    + usize::from(def.json.is_some())
                    + usize::from(!def.tool_calls.is_empty())
                    + usize::from(def.embedding.is_some())
                    + usize::from(def.error.is_some());
                if answers != 1 {
                    return Err(config(format!(
                        "scripted rule {i} must say exactly one of reply, json, tool_calls, embedding, error"
                    )));
                }
                Ok(Rule { def, regex })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Scripted { rules })
    }

    /// The first rule for a chat (`embedding: false`) or an embedding call whose
    /// matchers all hold for the last message (`role`, `text`).
    fn rule(&self, embedding: bool, role: &str, text: &str) -> Result<&RuleDef, BlockError> {
        self.rules
            .iter()
            .find(|r| {
                (r.def.error.is_some() || r.def.embedding.is_some() == embedding)
                    && r.def.role.as_deref().is_none_or(|want| want == role)
                    && r.def.when.as_deref().is_none_or(|w| text.contains(w))
                    && r.regex.as_ref().is_none_or(|re| re.is_match(text))
            })
            .map(|r| &r.def)
            .ok_or_else(|| {
                BlockError::new(
                    ErrorKind::Model,
                    format!(
                        "no scripted rule matches the {} {:?}",
                        if embedding { "text" } else { "message" },
                        text.chars().take(80).collect::<String>()
                    ),
                )
            })
    }
}

/// The error a rule's `error` says.
fn scripted_error(e: &ErrorDef) -> BlockError {
    let mut err = BlockError::new(ErrorKind::parse(&e.kind), e.message.clone());
    if let Some(ms) = e.retry_after_ms {
        err = err.with_detail(serde_json::json!({"retry_after_ms": ms}));
    }
    err
}

fn estimate(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4).max(1)
}

#[async_trait]
impl Model for Scripted {
    fn provider(&self) -> &str {
        "scripted"
    }

    async fn complete(
        &self,
        req: &ModelRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<ModelResponse, BlockError> {
        let last = req
            .messages
            .last()
            .map(|m| (m.role.as_str(), m.content.as_str()))
            .unwrap_or(("user", ""));
        let def = self.rule(false, last.0, last.1)?;
        if def.delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(def.delay_ms)).await;
        }
        if let Some(e) = &def.error {
            return Err(scripted_error(e));
        }
        let content = match (&def.reply, &def.json) {
            (Some(r), _) => r.replace("{last}", last.1),
            (None, Some(j)) => j.to_string(),
            _ => String::new(),
        };
        let mut first = true;
        for word in content.split_inclusive(' ') {
            if first || !word.is_empty() {
                if !first && def.stream_delay_ms > 0 {
                    tokio::time::sleep(Duration::from_millis(def.stream_delay_ms)).await;
                }
                on_delta(word);
                first = false;
            }
        }
        let tool_calls: Vec<ToolCall> = def
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, c)| ToolCall {
                id: format!("call_{i}"),
                name: c.name.clone(),
                arguments: c.arguments.clone(),
            })
            .collect();
        let prompt: u64 = req.messages.iter().map(|m| estimate(&m.content)).sum();
        let usage = def.usage.unwrap_or(Usage {
            input_tokens: prompt,
            output_tokens: estimate(&content),
            cost_usd: 0.0,
        });
        Ok(ModelResponse::finished(
            content,
            tool_calls,
            usage,
            req.model.clone(),
        ))
    }

    async fn embed(&self, req: &EmbedRequest) -> Result<EmbedResponse, BlockError> {
        let mut vectors = Vec::with_capacity(req.inputs.len());
        for text in &req.inputs {
            let def = self.rule(true, "user", text)?;
            if def.delay_ms > 0 {
                tokio::time::sleep(Duration::from_millis(def.delay_ms)).await;
            }
            match (&def.error, &def.embedding) {
                (Some(e), _) => return Err(scripted_error(e)),
                (None, Some(v)) => vectors.push(v.clone()),
                (None, None) => unreachable!("an embedding rule has an embedding or an error"),
            }
        }
        let usage = Usage {
            input_tokens: req.inputs.iter().map(|t| estimate(t)).sum(),
            output_tokens: 0,
            cost_usd: 0.0,
        };
        Ok(EmbedResponse {
            vectors,
            usage,
            model: Some(req.model.clone()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use weft_core::ports::Message;

    fn req(text: &str) -> ModelRequest {
        ModelRequest {
            messages: vec![Message::new("user", text)],
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn first_matching_rule_answers_and_streams() {
        let m = Scripted::from_rules(&json!([
            {"when": "France", "reply": "Paris is the capital."},
            {"reply": "I don't know."}
        ]))
        .unwrap();
        let seen = std::sync::Mutex::new(String::new());
        let sink = |d: &str| seen.lock().unwrap().push_str(d);
        let r = m.complete(&req("capital of France?"), &sink).await.unwrap();
        assert_eq!(r.content, "Paris is the capital.");
        assert_eq!(*seen.lock().unwrap(), "Paris is the capital.");
        let r = m
            .complete(&req("capital of Peru?"), &|_: &str| {})
            .await
            .unwrap();
        assert_eq!(r.content, "I don't know.");
    }

    #[tokio::test]
    async fn errors_carry_kind_and_retry_after() {
        let m = Scripted::from_rules(&json!([{"error": {"kind": "rate_limit", "message": "slow down", "retry_after_ms": 20}}])).unwrap();
        let e = m.complete(&req("hi"), &|_: &str| {}).await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::RateLimit);
        assert_eq!(e.detail_field("retry_after_ms"), Some(&json!(20)));
    }

    #[tokio::test]
    async fn embedding_rules_answer_each_text_and_only_embedding_calls() {
        let m = Scripted::from_rules(&json!([
            {"when": "cat", "embedding": [1.0, 0.0]},
            {"embedding": [0.0, 1.0]},
            {"reply": "chat"}
        ]))
        .unwrap();
        let r = m
            .embed(&EmbedRequest {
                model: "e".into(),
                inputs: vec!["a cat".into(), "a dog".into()],
                dimensions: None,
            })
            .await
            .unwrap();
        assert_eq!(r.vectors, vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
        assert_eq!(r.usage.input_tokens, 4);
        let chat = m.complete(&req("a cat"), &|_: &str| {}).await.unwrap();
        assert_eq!(chat.content, "chat");
        let only_chat = Scripted::from_rules(&json!([{"reply": "chat"}])).unwrap();
        let e = only_chat
            .embed(&EmbedRequest {
                model: "e".into(),
                inputs: vec!["x".into()],
                dimensions: None,
            })
            .await
            .unwrap_err();
        assert!(
            e.message.contains("no scripted rule matches the text"),
            "{e:?}"
        );
    }

    #[test]
    fn rules_must_say_one_thing() {
        assert!(Scripted::from_rules(&json!([{"when": "x"}])).is_err());
        assert!(Scripted::from_rules(&json!([{"reply": "a", "json": {}}])).is_err());
        assert!(Scripted::from_rules(&json!([{"rely": "a"}])).is_err());
    }
}
