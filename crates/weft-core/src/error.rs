//! Runtime errors (typed, so error routes can match on them) and static diagnostics
//! (located, so a person can fix the file).

use serde::{Deserialize, Serialize};
use std::fmt;

mod conversions;

/// What went wrong at run time, as a kind that rescue handlers and retry policies match on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The block ran past its timeout.
    Timeout,
    /// A token, cost or wall-time budget would be or was exceeded.
    Budget,
    /// An assertion on the block's output was false.
    Assertion,
    /// Sandboxed code raised, or hit one of its limits.
    Code,
    /// The model provider failed (a generic model error).
    Model,
    /// The provider throttled the call (HTTP 429 or equivalent).
    RateLimit,
    /// The provider rejected the credentials.
    Auth,
    /// The prompt did not fit the model's context window.
    ContextOverflow,
    /// The model's answer could not be parsed or did not match its schema.
    MalformedResponse,
    /// A native handler returned an error.
    Handler,
    /// A built-in action failed.
    Action,
    /// A value had the wrong shape for the block that received it.
    Input,
    /// An expression or template failed to evaluate.
    Expression,
    /// A person rejected an approval whose rejection is routed as an error.
    Rejected,
    /// The run or block was cancelled.
    Cancelled,
    /// A graph or sub-flow exceeded its step or depth limit.
    Limit,
    /// A loop reached its bound with its condition still unmet, where that is a failure.
    LoopExhausted,
    /// A graph node took none of its edges where that is a failure.
    Unrouted,
    /// Something the flow needs is not configured (model, sandbox, handler).
    Config,
    /// The journal or store failed.
    Store,
    /// A step that reaches outside the run was under way when its process died or lost
    /// the run, so whether its effect happened is unknown; its block said
    /// `on_unknown_outcome: fail` rather than repeat it (with its idempotency key).
    /// Never retried by a retry policy: retrying the run retries it on purpose.
    OutcomeUnknown,
    /// Any other kind, named by a handler or dialect.
    Other(Box<str>),
}

impl ErrorKind {
    const NAMED: &'static [(&'static str, ErrorKind)] = &[
        ("timeout", ErrorKind::Timeout),
        ("budget", ErrorKind::Budget),
        ("assertion", ErrorKind::Assertion),
        ("code", ErrorKind::Code),
        ("model", ErrorKind::Model),
        ("rate_limit", ErrorKind::RateLimit),
        ("auth", ErrorKind::Auth),
        ("context_overflow", ErrorKind::ContextOverflow),
        ("malformed_response", ErrorKind::MalformedResponse),
        ("handler", ErrorKind::Handler),
        ("action", ErrorKind::Action),
        ("input", ErrorKind::Input),
        ("expression", ErrorKind::Expression),
        ("rejected", ErrorKind::Rejected),
        ("cancelled", ErrorKind::Cancelled),
        ("limit", ErrorKind::Limit),
        ("loop_exhausted", ErrorKind::LoopExhausted),
        ("unrouted", ErrorKind::Unrouted),
        ("config", ErrorKind::Config),
        ("store", ErrorKind::Store),
        ("outcome_unknown", ErrorKind::OutcomeUnknown),
    ];

    /// The kind's stable name, as written in flow files (`rate_limit`).
    pub fn as_str(&self) -> &str {
        if let ErrorKind::Other(s) = self {
            return s;
        }
        Self::NAMED
            .iter()
            .find(|(_, k)| k == self)
            .map(|(n, _)| *n)
            .expect("every named kind is listed")
    }

    /// Parses a kind name; unknown names become [`ErrorKind::Other`].
    pub fn parse(name: &str) -> ErrorKind {
        Self::NAMED
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, k)| k.clone())
            .unwrap_or_else(|| ErrorKind::Other(name.into()))
    }

    /// Kinds worth retrying by default: transient failures, not mistakes in the flow.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ErrorKind::Timeout
                | ErrorKind::Model
                | ErrorKind::RateLimit
                | ErrorKind::MalformedResponse
                | ErrorKind::Code
                | ErrorKind::Handler
                | ErrorKind::Action
                | ErrorKind::Other(_)
        )
    }

    /// Names of the built-in kinds, for hints.
    pub fn known_names() -> impl Iterator<Item = &'static str> {
        Self::NAMED.iter().map(|(n, _)| *n)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(ErrorKind::parse(&s))
    }
}

impl schemars::JsonSchema for ErrorKind {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ErrorKind".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "An error kind: timeout, budget, assertion, code, model, rate_limit, auth, context_overflow, malformed_response, handler, action, input, expression, rejected, cancelled, limit, loop_exhausted, unrouted, config, store, or a custom name."
        })
    }
}

/// A runtime failure of one block: its kind, a message, and the block path where it arose.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{kind} error at {}: {message}", if path.is_empty() { "<run>" } else { path.as_str() })]
pub struct BlockError {
    /// What kind of failure this is.
    pub kind: ErrorKind,
    /// What happened, for a person.
    pub message: String,
    /// The path of the block that failed (empty until the engine fills it in).
    #[serde(default)]
    pub path: String,
    /// Extra machine-readable detail (HTTP status, retry-after, ...). Boxed to keep the
    /// error small: it travels in every `Result` of the engine's hot path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Box<serde_json::Value>>,
}

impl BlockError {
    /// An error of `kind` with `message`, not yet placed at a block path.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        BlockError {
            kind,
            message: message.into(),
            path: String::new(),
            detail: None,
        }
    }

    /// Places the error at `path` unless an inner block already claimed it.
    pub fn at(mut self, path: &str) -> Self {
        if self.path.is_empty() {
            self.path = path.to_owned();
        }
        self
    }

    /// Attaches machine-readable detail.
    pub fn with_detail(mut self, detail: serde_json::Value) -> Self {
        self.detail = Some(Box::new(detail));
        self
    }

    /// One field of the detail, if present.
    pub fn detail_field(&self, name: &str) -> Option<&serde_json::Value> {
        self.detail.as_deref().and_then(|d| d.get(name))
    }
}

/// A 1-based position in a source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct Loc {
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub col: u32,
}

/// How serious a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The flow cannot run.
    Error,
    /// The flow runs, but probably not as meant.
    Warning,
}

/// A problem found in a flow definition, located so a person can fix it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// What is wrong.
    pub message: String,
    /// How to fix it, when we can tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// Where in the document (a `/`-separated path of keys and indexes).
    #[serde(default)]
    pub pointer: String,
    /// Where in the source file, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loc: Option<Loc>,
}

impl Diagnostic {
    /// An error at `pointer`.
    pub fn error(pointer: impl Into<String>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            hint: None,
            pointer: pointer.into(),
            loc: None,
        }
    }

    /// A warning at `pointer`.
    pub fn warning(pointer: impl Into<String>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(pointer, message)
        }
    }

    /// Adds a hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Hints the candidate closest to `word` (`did you mean ...?`), or `otherwise` when
    /// none is a likely typo.
    pub fn hint_closest<'a>(
        self,
        word: &str,
        candidates: impl IntoIterator<Item = &'a str>,
        otherwise: impl Into<String>,
    ) -> Self {
        match did_you_mean(word, candidates) {
            Some(s) => self.hint(format!("did you mean `{s}`?")),
            None => self.hint(otherwise),
        }
    }

    /// Renders as `file:line:col: severity: message` plus an indented hint line.
    pub fn render(&self, file: &str) -> String {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let place = match self.loc {
            Some(l) => format!("{file}:{}:{}", l.line, l.col),
            None if self.pointer.is_empty() => file.to_owned(),
            None => format!("{file}: at {}", self.pointer),
        };
        let mut out = format!("{place}: {sev}: {}", self.message);
        if let Some(h) = &self.hint {
            out.push_str("\n  hint: ");
            out.push_str(h);
        }
        out
    }
}

/// `text` as an error message quotes what a person, a model or a service sent: in
/// backquotes, at most 60 characters (what was sent may be megabytes long), with its
/// length when cut.
pub fn quoted(text: &str) -> String {
    const SHOWN: usize = 60;
    match text.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("`{}…` ({} bytes)", &text[..cut], text.len()),
        None => format!("`{text}`"),
    }
}

/// The closest of `candidates` to `word`, if one is close enough to be a likely typo.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    // Jaro-Winkler ranks prefixes well but scores short words low, so one edit or
    // swapped pair (`rnu` for `run`) also counts as close.
    candidates
        .into_iter()
        .map(|c| {
            let mut score = strsim::jaro_winkler(word, c);
            if word.chars().count() >= 3 && strsim::osa_distance(word, c) <= 1 {
                score = score.max(0.81);
            }
            (score, c)
        })
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_names() {
        for name in ErrorKind::known_names() {
            assert_eq!(ErrorKind::parse(name).as_str(), name);
        }
        assert_eq!(
            ErrorKind::parse("search_error"),
            ErrorKind::Other("search_error".into())
        );
    }

    #[test]
    fn errors_stay_small_for_the_hot_path() {
        // Every engine Result carries one; see the note on `BlockError::detail`.
        assert!(
            std::mem::size_of::<BlockError>() <= 96,
            "{}",
            std::mem::size_of::<BlockError>()
        );
    }

    #[test]
    fn suggestions_find_typos_only() {
        assert_eq!(did_you_mean("promt", ["prompt", "model"]), Some("prompt"));
        assert_eq!(did_you_mean("zzz", ["prompt", "model"]), None);
    }

    #[test]
    fn diagnostics_render_with_location_and_hint() {
        let d = Diagnostic {
            loc: Some(Loc { line: 3, col: 5 }),
            ..Diagnostic::error("/root", "bad").hint("fix it")
        };
        assert_eq!(d.render("f.yaml"), "f.yaml:3:5: error: bad\n  hint: fix it");
    }
}
