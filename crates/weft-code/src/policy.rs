//! What Python code may import and which builtins it may call, checked on the parsed
//! source before it first runs (in the worker process, like everything that touches
//! untrusted source). Spec 000 allows a short list of builtins and no `import`; spec 001
//! allows `allowed_imports` only.

use crate::protocol::{Failure, FailureKind};
use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{Expr, ExprContext, Parameter, Stmt};
use ruff_text_size::Ranged;
use std::collections::HashSet;

/// Python's builtin functions; a name in this list that the code never binds itself is
/// a call of the builtin.
const BUILTIN_FUNCTIONS: &[&str] = &[
    "abs",
    "aiter",
    "all",
    "anext",
    "any",
    "ascii",
    "bin",
    "bool",
    "breakpoint",
    "bytearray",
    "bytes",
    "callable",
    "chr",
    "classmethod",
    "compile",
    "complex",
    "delattr",
    "dict",
    "dir",
    "divmod",
    "enumerate",
    "eval",
    "exec",
    "exit",
    "filter",
    "float",
    "format",
    "frozenset",
    "getattr",
    "globals",
    "hasattr",
    "hash",
    "help",
    "hex",
    "id",
    "input",
    "int",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "list",
    "locals",
    "map",
    "max",
    "memoryview",
    "min",
    "next",
    "object",
    "oct",
    "open",
    "ord",
    "pow",
    "print",
    "property",
    "quit",
    "range",
    "repr",
    "reversed",
    "round",
    "set",
    "setattr",
    "slice",
    "sorted",
    "staticmethod",
    "str",
    "sum",
    "super",
    "tuple",
    "type",
    "vars",
    "zip",
    "__import__",
];

struct Uses<'a> {
    imports: Vec<(String, usize)>,
    loads: Vec<(&'a str, usize)>,
    bound: HashSet<&'a str>,
    line_starts: Vec<usize>,
}

impl Uses<'_> {
    fn line(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|&s| s <= offset)
    }
}

impl<'a> Visitor<'a> for Uses<'a> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        let line = self.line(stmt.range().start().to_usize());
        match stmt {
            Stmt::Import(i) => {
                for alias in &i.names {
                    self.imports.push((alias.name.id.to_string(), line));
                    let bound = alias.asname.as_ref().unwrap_or(&alias.name);
                    self.bound
                        .insert(bound.id.as_str().split('.').next().unwrap_or(""));
                }
            }
            Stmt::ImportFrom(i) => {
                let module = i
                    .module
                    .as_ref()
                    .map(|m| m.id.to_string())
                    .unwrap_or_default();
                self.imports
                    .push((format!("{}{module}", ".".repeat(i.level as usize)), line));
                for alias in &i.names {
                    self.bound
                        .insert(alias.asname.as_ref().unwrap_or(&alias.name).id.as_str());
                }
            }
            Stmt::FunctionDef(f) => {
                self.bound.insert(f.name.id.as_str());
            }
            Stmt::ClassDef(c) => {
                self.bound.insert(c.name.id.as_str());
            }
            _ => {}
        }
        visitor::walk_stmt(self, stmt);
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        // `__import__('name')` is an import of `name` (the sandbox runs it as one).
        if let Expr::Call(call) = expr
            && let Some(module) = crate::python_modules::literal_import(call)
        {
            let line = self.line(call.range().start().to_usize());
            self.imports.push((module.to_owned(), line));
        }
        if let Expr::Name(n) = expr {
            match n.ctx {
                ExprContext::Load => self
                    .loads
                    .push((n.id.as_str(), self.line(n.range.start().to_usize()))),
                _ => {
                    self.bound.insert(n.id.as_str());
                }
            }
        }
        visitor::walk_expr(self, expr);
    }

    fn visit_parameter(&mut self, parameter: &'a Parameter) {
        self.bound.insert(parameter.name.id.as_str());
        visitor::walk_parameter(self, parameter);
    }

    fn visit_except_handler(&mut self, handler: &'a ruff_python_ast::ExceptHandler) {
        let ruff_python_ast::ExceptHandler::ExceptHandler(h) = handler;
        if let Some(name) = &h.name {
            self.bound.insert(name.id.as_str());
        }
        visitor::walk_except_handler(self, handler);
    }
}

fn allowed_import(module: &str, allowed: &[String]) -> bool {
    // `import urllib.parse` needs `urllib.parse` (or `urllib`) allowed.
    allowed
        .iter()
        .any(|a| module == a || module.starts_with(&format!("{a}.")))
}

/// Refuses code that imports a module outside `imports` or calls a builtin outside
/// `builtins` (each `None` allows everything).
pub(crate) fn check(
    source: &str,
    inputs: &[String],
    imports: Option<&[String]>,
    builtins: Option<&[String]>,
) -> Result<(), Failure> {
    if imports.is_none() && builtins.is_none() {
        return Ok(());
    }
    let parsed = match ruff_python_parser::parse_module(source) {
        Ok(p) => p,
        // monty reports syntax errors with their line when it compiles the code.
        Err(_) => return Ok(()),
    };
    let mut line_starts = vec![0];
    line_starts.extend(source.match_indices('\n').map(|(i, _)| i + 1));
    let mut uses = Uses {
        imports: Vec::new(),
        loads: Vec::new(),
        bound: inputs.iter().map(String::as_str).collect(),
        line_starts,
    };
    for stmt in &parsed.syntax().body {
        uses.visit_stmt(stmt);
    }
    if let Some(allowed) = imports {
        for (module, line) in &uses.imports {
            if !allowed_import(module, allowed) {
                let list = if allowed.is_empty() {
                    "none".to_owned()
                } else {
                    allowed.join(", ")
                };
                return Err(Failure {
                    kind: FailureKind::Code,
                    message: format!(
                        "ImportError: importing `{module}` is not allowed here (allowed: {list}) (line {line})"
                    ),
                    line: Some(*line as u32),
                });
            }
        }
    }
    if let Some(allowed) = builtins {
        for (name, line) in &uses.loads {
            if BUILTIN_FUNCTIONS.contains(name)
                && !uses.bound.contains(name)
                && !allowed.iter().any(|a| a == name)
            {
                return Err(Failure {
                    kind: FailureKind::Code,
                    message: format!(
                        "NameError: the builtin `{name}` is not allowed here (line {line})"
                    ),
                    line: Some(*line as u32),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn imports_outside_the_list_are_refused_with_their_line() {
        let allowed = strings(&["json", "urllib.parse"]);
        assert!(
            check(
                "import json\nimport urllib.parse",
                &[],
                Some(&allowed),
                None
            )
            .is_ok()
        );
        let e = check("import json\nimport os", &[], Some(&allowed), None).unwrap_err();
        assert!(
            e.message.contains("`os`") && e.message.contains("line 2"),
            "{}",
            e.message
        );
        let e = check("from subprocess import run", &[], Some(&allowed), None).unwrap_err();
        assert!(e.message.contains("`subprocess`"), "{}", e.message);
        let e = check("t = __import__('subprocess')", &[], Some(&allowed), None).unwrap_err();
        assert!(e.message.contains("`subprocess`"), "{}", e.message);
        assert!(check("import urllib.request", &[], Some(&allowed), None).is_err());
        assert!(check("import json", &[], Some(&[]), None).is_err());
    }

    #[test]
    fn builtins_outside_the_list_are_refused_unless_the_code_binds_the_name() {
        let allowed = strings(&["len", "str"]);
        assert!(check("len(str(1))", &[], None, Some(&allowed)).is_ok());
        let e = check("x = 1\ny = type(x)", &[], None, Some(&allowed)).unwrap_err();
        assert!(
            e.message.contains("`type`") && e.message.contains("line 2"),
            "{}",
            e.message
        );
        // A parameter or variable of the same name is the code's own.
        assert!(check("def f(type):\n    return type", &[], None, Some(&allowed)).is_ok());
        assert!(check("print = len\nprint('x')", &[], None, Some(&allowed)).is_ok());
        assert!(check("type", &strings(&["type"]), None, Some(&allowed)).is_ok());
    }
}
