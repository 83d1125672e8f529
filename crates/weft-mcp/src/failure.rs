//! A tool that could not do what it was asked: an MCP tool error (`isError`) whose
//! message, hint and located diagnostics a model can act on. Never a protocol error.

use rmcp::model::CallToolResult;
use serde_json::{Value, json};
use weft_core::Diagnostic;
use weft_engine::EngineError;

/// Why a tool call failed.
#[derive(Debug)]
pub(crate) struct Failure {
    message: String,
    hint: Option<String>,
    diagnostics: Vec<Diagnostic>,
}

impl Failure {
    /// A failure saying `message`.
    pub(crate) fn new(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            hint: None,
            diagnostics: Vec::new(),
        }
    }

    /// With what to do about it.
    pub(crate) fn hint(mut self, hint: impl Into<String>) -> Failure {
        self.hint = Some(hint.into());
        self
    }

    /// A flow that does not load or validate, with each problem located.
    pub(crate) fn invalid_flow(diagnostics: Vec<Diagnostic>) -> Failure {
        Failure {
            diagnostics,
            ..Failure::new(
                "the flow is invalid: fix each diagnostic (its pointer, line:col and hint say where and how)",
            )
        }
    }

    /// The tool error a client receives.
    pub(crate) fn into_result(self) -> CallToolResult {
        let mut body = json!({"error": self.message});
        if let Some(h) = self.hint {
            body["hint"] = Value::String(h);
        }
        if !self.diagnostics.is_empty() {
            body["diagnostics"] = json!(self.diagnostics);
        }
        CallToolResult::structured_error(body)
    }
}

/// An error message from a parser, which may quote a value of any size: at most 300
/// characters.
pub(crate) fn cut(message: impl std::fmt::Display) -> String {
    let mut text = message.to_string();
    if let Some((at, _)) = text.char_indices().nth(300) {
        text.truncate(at);
        text.push('…');
    }
    text
}

/// A value the client sent, as an error message quotes it.
pub(crate) use weft_core::error::quoted;

impl From<EngineError> for Failure {
    fn from(e: EngineError) -> Failure {
        match e {
            EngineError::Invalid(d) => Failure::invalid_flow(d),
            EngineError::NotFound(id) => Failure::new(format!("no run with id {}", quoted(&id)))
                .hint("list_runs shows the runs there are"),
            other => Failure::new(other.to_string()),
        }
    }
}

impl From<weft_core::ports::StoreError> for Failure {
    fn from(e: weft_core::ports::StoreError) -> Failure {
        Failure::new(format!("the run database failed: {e}"))
    }
}
