//! How other errors become a [`BlockError`], so that handlers can `?` the errors of the
//! standard library and serde, and `return Err("too big".into())`.
//!
//! Rust's coherence rules allow `From<&str>` or a blanket `From<E: Error>`, never both
//! on one type (and `BlockError` is an `Error` itself). Text is what handlers write most,
//! so the text conversions are here, the standard errors are listed one by one, and any
//! other error goes through [`BlockError::from_error`] (or `Box<dyn Error + Send + Sync>`,
//! which `anyhow::Error` and most error types turn into with `.into()`).

use super::{BlockError, ErrorKind};
use serde_json::json;
use std::error::Error;

impl BlockError {
    /// An error of the kind named `kind` (`"search"`, or a built-in name such as
    /// `"rate_limit"`), which a `rescue` can match by that name.
    pub fn kind(kind: &str, message: impl Into<String>) -> BlockError {
        BlockError::new(ErrorKind::parse(kind), message)
    }

    /// A handler failure made of any error: its text is the message, and the texts of
    /// its sources (outermost first) are kept in `detail.sources`.
    pub fn from_error(error: impl Error) -> BlockError {
        let mut sources = Vec::new();
        let mut next = error.source();
        while let Some(e) = next {
            sources.push(e.to_string());
            next = e.source();
        }
        let e = BlockError::new(ErrorKind::Handler, error.to_string());
        if sources.is_empty() {
            e
        } else {
            e.with_detail(json!({ "sources": sources }))
        }
    }
}

impl From<&str> for BlockError {
    fn from(message: &str) -> BlockError {
        BlockError::new(ErrorKind::Handler, message)
    }
}

impl From<String> for BlockError {
    fn from(message: String) -> BlockError {
        BlockError::new(ErrorKind::Handler, message)
    }
}

impl From<Box<dyn Error + Send + Sync>> for BlockError {
    fn from(error: Box<dyn Error + Send + Sync>) -> BlockError {
        BlockError::from_error(&*error)
    }
}

/// `From` for error types that handlers meet often, each through
/// [`BlockError::from_error`].
macro_rules! from_errors {
    ($($ty:ty),* $(,)?) => {
        $(impl From<$ty> for BlockError {
            fn from(error: $ty) -> BlockError {
                BlockError::from_error(error)
            }
        })*
    };
}

from_errors!(
    std::io::Error,
    serde_json::Error,
    std::fmt::Error,
    std::num::ParseIntError,
    std::num::ParseFloatError,
    std::num::TryFromIntError,
    std::str::ParseBoolError,
    std::str::Utf8Error,
    std::string::FromUtf8Error,
    std::char::ParseCharError,
    std::net::AddrParseError,
    std::time::SystemTimeError,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("the index is unreadable")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn text_becomes_a_handler_error() {
        let e: BlockError = "too big".into();
        assert_eq!(
            (e.kind, e.message.as_str()),
            (ErrorKind::Handler, "too big")
        );
        let e: BlockError = format!("{} items", 3).into();
        assert_eq!(e.message, "3 items");
    }

    #[test]
    fn standard_errors_convert_with_question_mark() {
        fn parse(text: &str) -> Result<i64, BlockError> {
            Ok(text.parse::<i64>()?)
        }
        fn read() -> Result<String, BlockError> {
            Ok(std::fs::read_to_string("/nonexistent/weft")?)
        }
        fn decode() -> Result<serde_json::Value, BlockError> {
            Ok(serde_json::from_str("{")?)
        }
        assert!(parse("x").unwrap_err().message.contains("invalid digit"));
        assert!(read().unwrap_err().message.contains("No such file"));
        assert!(decode().unwrap_err().message.contains("EOF"));
    }

    #[test]
    fn the_source_chain_is_kept_in_detail() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        let e = BlockError::from_error(Outer(io));
        assert_eq!(e.message, "the index is unreadable");
        assert_eq!(e.detail_field("sources"), Some(&json!(["denied"])));
        let boxed: Box<dyn Error + Send + Sync> = Box::new(Outer(std::io::Error::other("x")));
        let e: BlockError = boxed.into();
        assert_eq!(e.detail_field("sources"), Some(&json!(["x"])));
    }

    #[test]
    fn a_named_kind_is_parsed() {
        assert_eq!(BlockError::kind("search", "down").kind.as_str(), "search");
        assert_eq!(
            BlockError::kind("rate_limit", "slow").kind,
            ErrorKind::RateLimit
        );
    }
}
