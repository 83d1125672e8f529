//! The code port: sandboxes that run Python, Lua and Prolog for code blocks.

use crate::error::BlockError;
use crate::ir::CodeLimits;
use crate::value::Value;
use async_trait::async_trait;

/// One execution of sandboxed code.
#[derive(Debug, Clone, PartialEq)]
pub struct CodeRequest<'a> {
    /// The language.
    pub language: &'a str,
    /// The source.
    pub source: &'a str,
    /// A function to call, or none to run the source as a script.
    pub entry: Option<&'a str>,
    /// Variables in scope (script) or keyword arguments (`entry`); shared, so that a
    /// large value (a fan-in's results) reaches the sandbox's wire without a copy.
    pub args: crate::value::Shared,
    /// Modules the code may import; `None` allows every module the sandbox has.
    pub imports: Option<&'a [String]>,
    /// Builtin functions the code may call; `None` allows all of them.
    pub builtins: Option<&'a [String]>,
    /// Limits.
    pub limits: &'a CodeLimits,
}

/// Runs code in a sandbox.
#[async_trait]
pub trait CodeRunner: Send + Sync {
    /// Languages this runner executes.
    fn languages(&self) -> Vec<String>;
    /// Parses and compiles `source` ahead of time, reporting syntax errors.
    fn check(&self, language: &str, source: &str) -> Result<(), BlockError>;
    /// Runs the request and returns the code's result.
    async fn run(&self, request: CodeRequest<'_>) -> Result<Value, BlockError>;
}
