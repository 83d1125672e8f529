//! Tool calling for a model that has no native tool format: the tools are described in
//! the system prompt, and grammar-constrained sampling forces the answer to be either
//! one call, `{"tool": <name>, "arguments": {...}}`, or a final `{"answer": ...}`.
//!
//! Small local models choose poorly, but what they produce is always well-formed: a
//! call names a tool that exists and carries arguments that match its schema.

use crate::protocol::Turn;
use serde_json::{Value, json};
use weft_core::ports::{Message, ModelRequest, ToolCall, ToolChoice};

/// The conversation and the output schema of a request that offers tools.
pub(crate) fn prompt(request: &ModelRequest) -> (Vec<Turn>, Value) {
    let mut listing = String::from(if request.tools.is_empty() {
        // The tool rounds are spent: what the tools said is in the conversation.
        "You have used your tools. Reply with only {\"answer\": ...}, answering from their results.\n"
    } else {
        "You can call tools. To call one, reply with only this JSON: \
         {\"tool\": \"<name>\", \"arguments\": {...}}. \
         When you have the final answer, reply with only {\"answer\": ...}.\nTools:\n"
    });
    for tool in &request.tools {
        listing.push_str(&format!(
            "- {}: {} Arguments (JSON Schema): {}\n",
            tool.name, tool.description, tool.parameters
        ));
    }
    let mut turns = Vec::with_capacity(request.messages.len() + 1);
    let has_system = request.messages.first().is_some_and(|m| m.role == "system");
    if !has_system {
        turns.push(Turn {
            role: "system".into(),
            content: listing.clone(),
        });
    }
    for (i, m) in request.messages.iter().enumerate() {
        turns.push(turn(m, (i == 0 && has_system).then_some(listing.as_str())));
    }
    (turns, schema(request))
}

/// One message as the model sees it: calls as the JSON it would have written, results
/// as a user turn naming the tool.
fn turn(m: &Message, tools_listing: Option<&str>) -> Turn {
    match m.role.as_str() {
        "system" => Turn {
            role: "system".into(),
            content: match tools_listing {
                Some(listing) => format!("{}\n\n{listing}", m.content),
                None => m.content.clone(),
            },
        },
        "assistant" if !m.tool_calls.is_empty() => Turn {
            role: "assistant".into(),
            content: m
                .tool_calls
                .iter()
                .map(|c| json!({"tool": c.name, "arguments": c.arguments}).to_string())
                .collect::<Vec<_>>()
                .join("\n"),
        },
        "tool" => Turn {
            role: "user".into(),
            content: format!("Tool result: {}", m.content),
        },
        _ => Turn {
            role: m.role.clone(),
            content: m.content.clone(),
        },
    }
}

/// Either a call of one of the tools, with its arguments' schema, or the answer (of the
/// request's output schema, or text); a turn that must call a tool (that tool) has no
/// answer among its choices.
fn schema(request: &ModelRequest) -> Value {
    let must = request.tool_choice.as_ref();
    let mut choices: Vec<Value> = request
        .tools
        .iter()
        .filter(|t| !matches!(must, Some(ToolChoice::Tool(name)) if *name != t.name))
        .map(|t| {
            json!({
                "type": "object",
                "properties": {"tool": {"const": t.name}, "arguments": t.parameters},
                "required": ["tool", "arguments"],
                "additionalProperties": false
            })
        })
        .collect();
    if must.is_some() && !choices.is_empty() {
        return json!({"oneOf": choices});
    }
    let answer = request
        .output_schema
        .clone()
        .unwrap_or_else(|| json!({"type": "string"}));
    choices.push(json!({
        "type": "object",
        "properties": {"answer": answer},
        "required": ["answer"],
        "additionalProperties": false
    }));
    json!({"oneOf": choices})
}

/// What the model chose: the answer's text (JSON text under an output schema), or the
/// tool calls. Call ids count the calls made so far in the conversation, so they are
/// unique within it and the same on every replay.
pub(crate) fn read(
    content: &str,
    request: &ModelRequest,
) -> Result<(String, Vec<ToolCall>), String> {
    let value: Value = serde_json::from_str(content.trim())
        .map_err(|e| format!("the answer is not the JSON its grammar demands ({e}): {content}"))?;
    if let Some(answer) = value.get("answer") {
        let text = match answer {
            Value::String(s) if request.output_schema.is_none() => s.clone(),
            other => other.to_string(),
        };
        return Ok((text, Vec::new()));
    }
    let name = value.get("tool").and_then(Value::as_str);
    let Some(tool) = request.tools.iter().find(|t| Some(t.name.as_str()) == name) else {
        return Err(format!("the answer names no offered tool: {content}"));
    };
    let earlier: usize = request.messages.iter().map(|m| m.tool_calls.len()).sum();
    Ok((
        String::new(),
        vec![ToolCall {
            id: format!("local-call-{}", earlier + 1),
            name: tool.name.clone(),
            arguments: value.get("arguments").cloned().unwrap_or(json!({})),
        }],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_core::ports::ToolDef;

    fn request() -> ModelRequest {
        ModelRequest {
            model: "m".into(),
            messages: vec![
                Message::new("system", "Be brief."),
                Message::new("user", "What is 2 + 3?"),
            ],
            tools: vec![ToolDef {
                name: "add".into(),
                description: "Adds two numbers.".into(),
                parameters: json!({"type": "object", "properties": {
                    "a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
            }],
            ..ModelRequest::default()
        }
    }

    #[test]
    fn the_tools_are_listed_in_the_system_turn_and_the_schema_offers_each_and_an_answer() {
        let (turns, schema) = prompt(&request());
        assert_eq!(turns.len(), 2);
        assert!(turns[0].content.starts_with("Be brief.\n\n"));
        assert!(turns[0].content.contains("- add: Adds two numbers."));
        let choices = schema["oneOf"].as_array().unwrap();
        assert_eq!(choices.len(), 2);
        assert_eq!(choices[0]["properties"]["tool"]["const"], "add");
        assert_eq!(choices[1]["properties"]["answer"]["type"], "string");
    }

    #[test]
    fn a_conversation_without_a_system_turn_gets_one() {
        let mut r = request();
        r.messages.remove(0);
        let (turns, _) = prompt(&r);
        assert_eq!(turns[0].role, "system");
        assert!(turns[0].content.starts_with("You can call tools."));
    }

    /// The conversation goes on with a call of `add` that answered 5.
    fn called_add(r: &mut ModelRequest) {
        r.messages.push(Message {
            role: "assistant".into(),
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: "local-call-1".into(),
                name: "add".into(),
                arguments: json!({"a": 2, "b": 3}),
            }],
            tool_call_id: None,
        });
        r.messages.push(Message {
            tool_call_id: Some("local-call-1".into()),
            ..Message::new("tool", "5")
        });
    }

    #[test]
    fn earlier_calls_and_results_are_shown_as_the_model_would_have_written_them() {
        let mut r = request();
        called_add(&mut r);
        let (turns, _) = prompt(&r);
        let written: Value = serde_json::from_str(&turns[2].content).unwrap();
        assert_eq!(
            written,
            json!({"tool": "add", "arguments": {"a": 2, "b": 3}})
        );
        assert_eq!(turns[3].role, "user");
        assert_eq!(turns[3].content, "Tool result: 5");
        // The next call's id follows the one already made.
        let (_, calls) = read(r#"{"tool": "add", "arguments": {"a": 5, "b": 1}}"#, &r).unwrap();
        assert_eq!(calls[0].id, "local-call-2");
    }

    #[test]
    fn once_the_rounds_are_spent_the_only_choice_is_an_answer_from_the_results() {
        let mut r = request();
        r.tools.clear();
        called_add(&mut r);
        let (turns, schema) = prompt(&r);
        assert!(turns[0].content.contains("You have used your tools"));
        assert_eq!(turns.last().unwrap().content, "Tool result: 5");
        assert_eq!(schema["oneOf"].as_array().unwrap().len(), 1);
        let (answer, calls) = read(r#"{"answer": "It is 5."}"#, &r).unwrap();
        assert_eq!((answer.as_str(), calls.len()), ("It is 5.", 0));
    }

    #[test]
    fn answers_and_calls_are_read_back() {
        let r = request();
        let (text, calls) = read(r#"{"answer": "5"}"#, &r).unwrap();
        assert_eq!((text.as_str(), calls.len()), ("5", 0));
        let (text, calls) =
            read(r#" {"tool": "add", "arguments": {"a": 2, "b": 3}} "#, &r).unwrap();
        assert!(text.is_empty());
        assert_eq!(calls[0].name, "add");
        assert_eq!(calls[0].arguments, json!({"a": 2, "b": 3}));
        assert!(read(r#"{"tool": "mul", "arguments": {}}"#, &r).is_err());
        assert!(read("not json", &r).is_err());
    }

    #[test]
    fn a_turn_that_must_call_a_tool_has_no_answer_to_choose() {
        let mut r = request();
        r.tool_choice = Some(ToolChoice::Required);
        let (_, s) = prompt(&r);
        assert_eq!(
            s["oneOf"].as_array().unwrap().len(),
            1,
            "only the tool: {s}"
        );
        assert_eq!(s["oneOf"][0]["properties"]["tool"]["const"], "add");
        r.tool_choice = Some(ToolChoice::Tool("add".into()));
        let (_, s) = prompt(&r);
        assert_eq!(s["oneOf"].as_array().unwrap().len(), 1, "{s}");
    }

    #[test]
    fn under_an_output_schema_the_answer_is_that_schema_and_comes_back_as_json_text() {
        let mut r = request();
        r.output_schema =
            Some(json!({"type": "object", "properties": {"sum": {"type": "number"}}}));
        let (_, schema) = prompt(&r);
        assert_eq!(schema["oneOf"][1]["properties"]["answer"]["type"], "object");
        let (text, _) = read(r#"{"answer": {"sum": 5}}"#, &r).unwrap();
        assert_eq!(text, r#"{"sum":5}"#);
    }
}
