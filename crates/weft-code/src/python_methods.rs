//! Methods used as values. monty calls a method but cannot hand one around
//! (`max(scores, key=scores.get)` fails with "'dict' object has no attribute 'get'"),
//! which ordinary Python, and The Edge Agent's examples, do. So before a block runs, a
//! common method taken from a name without calling it becomes a lambda that calls it:
//! `scores.get` is `(lambda *_a: scores.get(*_a))`. The rewrite stays on its line, and
//! code without such a use is not parsed at all.

use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{Expr, ExprContext};
use ruff_text_size::Ranged;

/// Methods of the built-in types that code hands around as values.
const METHODS: &[&str] = &[
    "get",
    "items",
    "keys",
    "values",
    "pop",
    "setdefault",
    "update",
    "copy",
    "append",
    "extend",
    "index",
    "count",
    "insert",
    "remove",
    "sort",
    "upper",
    "lower",
    "strip",
    "lstrip",
    "rstrip",
    "split",
    "join",
    "replace",
    "startswith",
    "endswith",
    "format",
    "title",
    "capitalize",
    "isdigit",
    "isalpha",
    "isalnum",
    "isspace",
    "add",
    "discard",
];

/// `source` with each method value turned into a lambda, or None when it has none.
pub(crate) fn rewrite(source: &str) -> Option<String> {
    if !METHODS.iter().any(|m| used_as_value(source, m)) {
        return None;
    }
    let parsed = ruff_python_parser::parse_module(source).ok()?;
    let mut finder = Values::default();
    for stmt in &parsed.syntax().body {
        finder.visit_stmt(stmt);
    }
    if finder.edits.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(source.len() + 32 * finder.edits.len());
    crate::python_edits::splice_into(&mut out, source, &mut finder.edits);
    Some(out)
}

/// Whether `.method` appears in `source` other than before a `(`: the cheap test that
/// spares most code the parse.
fn used_as_value(source: &str, method: &str) -> bool {
    let needle = format!(".{method}");
    source.match_indices(&needle).any(|(i, _)| {
        let rest = &source[i + needle.len()..];
        let next = rest.chars().next();
        let continues_name = next.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !continues_name && !rest.trim_start().starts_with('(')
    })
}

#[derive(Default)]
struct Values {
    edits: Vec<crate::python_edits::Edit>,
}

impl<'a> Visitor<'a> for Values {
    fn visit_expr(&mut self, expr: &'a Expr) {
        match expr {
            // A called method is fine; its receiver and arguments may hold values.
            Expr::Call(call) => {
                match call.func.as_ref() {
                    Expr::Attribute(a) => self.visit_expr(&a.value),
                    other => self.visit_expr(other),
                }
                for arg in &call.arguments.args {
                    self.visit_expr(arg);
                }
                for kw in &call.arguments.keywords {
                    self.visit_expr(&kw.value);
                }
                return;
            }
            Expr::Attribute(a)
                if a.ctx == ExprContext::Load && METHODS.contains(&a.attr.id.as_str()) =>
            {
                if let Expr::Name(name) = a.value.as_ref() {
                    let range = a.range();
                    self.edits.push((
                        range.start().to_usize(),
                        range.end().to_usize(),
                        format!(
                            "(lambda *_a: {}.{}(*_a))",
                            name.id.as_str(),
                            a.attr.id.as_str()
                        ),
                    ));
                    return;
                }
            }
            _ => {}
        }
        visitor::walk_expr(self, expr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_taken_as_values_become_lambdas() {
        let src = "best = max(scores, key=scores.get)\nxs.append(1)\nf = str.upper\ny = scores.get('a')\n";
        assert_eq!(
            rewrite(src).unwrap(),
            "best = max(scores, key=(lambda *_a: scores.get(*_a)))\nxs.append(1)\nf = (lambda *_a: str.upper(*_a))\ny = scores.get('a')\n"
        );
        assert_eq!(rewrite("y = d.get('a')\nz = d.getter\n"), None);
    }
}
