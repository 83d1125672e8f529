//! Python function bodies, as several dialects have users write them: the file holds
//! only the body, and the runtime wraps it in a function definition.

/// `def <name>(<params>):` around the dedented `body`, after `prelude` (imports the
/// dialect provides). A body with no statements returns `None`, as an empty function
/// would if Python allowed one.
/// The line of `define`'s output on which the body's first line sits.
pub(crate) fn body_line(prelude: &str) -> u32 {
    prelude.lines().count() as u32 + 2
}

pub(crate) fn define(prelude: &str, name: &str, params: &[&str], body: &str) -> String {
    let mut out = String::from(prelude);
    out.push_str(&format!("def {name}({}):\n", params.join(", ")));
    let mut any = false;
    for line in dedent(body).lines() {
        if line.trim().is_empty() {
            out.push('\n');
        } else {
            out.push_str("    ");
            out.push_str(line);
            out.push('\n');
            any = true;
        }
    }
    if !any {
        out.push_str("    return None\n");
    }
    out
}

/// Removes the indentation every non-blank line shares.
pub(crate) fn dedent(text: &str) -> String {
    let indent = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    text.lines()
        .map(|l| {
            if l.len() >= indent {
                &l[indent..]
            } else {
                l.trim_start()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The keys of the dict each `return` of function body `body` builds, when every
/// `return` in it is a dict literal whose keys are string literals; `None` when one
/// returns anything else (or nothing), or the body does not parse.
pub(crate) fn literal_return_keys(body: &str) -> Option<Vec<Vec<String>>> {
    function_return_keys(&define("", "f", &[], body), "f")
}

/// [`literal_return_keys`] of the top-level function `name` of Python module `source`.
pub(crate) fn function_return_keys(source: &str, name: &str) -> Option<Vec<Vec<String>>> {
    use ruff_python_ast::Stmt;
    use ruff_python_ast::visitor::Visitor;
    let parsed = ruff_python_parser::parse_module(source).ok()?;
    let f = parsed.syntax().body.iter().find_map(|s| match s {
        Stmt::FunctionDef(f) if f.name.id.as_str() == name => Some(f),
        _ => None,
    })?;
    let mut returns = Returns::default();
    for stmt in &f.body {
        returns.visit_stmt(stmt);
    }
    (!returns.other && !returns.keys.is_empty()).then_some(returns.keys)
}

/// The `return` statements of one function (not of functions or classes inside it).
#[derive(Default)]
struct Returns {
    keys: Vec<Vec<String>>,
    /// A `return` of something other than a literal dict with literal keys.
    other: bool,
}

impl<'a> ruff_python_ast::visitor::Visitor<'a> for Returns {
    fn visit_stmt(&mut self, stmt: &'a ruff_python_ast::Stmt) {
        use ruff_python_ast::{Expr, Stmt};
        match stmt {
            Stmt::FunctionDef(_) | Stmt::ClassDef(_) => {}
            Stmt::Return(r) => match r.value.as_deref() {
                Some(Expr::Dict(d)) => {
                    let keys: Option<Vec<String>> = d
                        .items
                        .iter()
                        .map(|item| match &item.key {
                            Some(Expr::StringLiteral(s)) => Some(s.value.to_str().to_owned()),
                            _ => None,
                        })
                        .collect();
                    match keys {
                        Some(keys) => self.keys.push(keys),
                        None => self.other = true,
                    }
                }
                _ => self.other = true,
            },
            _ => ruff_python_ast::visitor::walk_stmt(self, stmt),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_returns_give_their_keys_and_anything_else_gives_none() {
        assert_eq!(
            literal_return_keys("if x:\n    return {'a': 1, \"b\": 2}\nreturn {'a': 0}\n"),
            Some(vec![vec!["a".into(), "b".into()], vec!["a".into()]])
        );
        assert_eq!(
            literal_return_keys("def g():\n    return 1\nreturn {'a': g()}\n"),
            Some(vec![vec!["a".into()]])
        );
        for body in [
            "return d\n",
            "return {**d}\n",
            "return {k: 1}\n",
            "if x:\n    return\nreturn {'a': 1}\n",
            "x = 1\n",
            "return {'a': \n",
        ] {
            assert_eq!(literal_return_keys(body), None, "{body}");
        }
    }

    #[test]
    fn a_body_is_dedented_and_indented_under_its_definition() {
        let f = define(
            "import json\n",
            "f",
            &["a", "b"],
            "  x = a\n\n  return x + b\n",
        );
        assert_eq!(
            f,
            "import json\ndef f(a, b):\n    x = a\n\n    return x + b\n"
        );
    }

    #[test]
    fn an_empty_body_returns_none() {
        assert_eq!(
            define("", "f", &[], "\n  \n"),
            "def f():\n\n\n    return None\n"
        );
    }
}
