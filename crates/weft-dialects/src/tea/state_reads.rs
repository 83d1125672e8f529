//! Which state keys a Python node can read, when its code says so plainly.
//!
//! A tea node's code gets the whole state, and a Python node runs in a sandbox process:
//! the state crosses the process boundary on every call. A fan-out over a list held in
//! the state (`items: "{{ state.urls }}"`) would send that list to every branch. So when
//! every use of `state` in the code is a subscript or a `.get` with a literal key
//! (`state["url"]`, `state.get("n", 0)`), only those keys are sent; the code cannot tell
//! the difference. Any other use (`state` passed on, iterated, returned, rebound,
//! `"k" in state`, a key that is not a literal) sends the whole state, as before.

use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{Expr, ExprName, ModModule};
use ruff_python_parser::Parsed;

/// The name the state has in a node's code.
const STATE: &str = "state";

/// The keys of `state` that a Python module reads, in first-read order, or None when
/// the code may read more.
pub(super) fn python_state_keys(parsed: &Parsed<ModModule>) -> Option<Vec<String>> {
    let mut reads = Reads::default();
    for stmt in &parsed.syntax().body {
        reads.visit_stmt(stmt);
    }
    (!reads.whole).then_some(reads.keys)
}

#[derive(Default)]
struct Reads {
    keys: Vec<String>,
    /// `state` is used in a way that may read any key.
    whole: bool,
}

impl Reads {
    fn key(&mut self, key: &str) {
        if !self.keys.iter().any(|k| k == key) {
            self.keys.push(key.to_owned());
        }
    }
}

fn is_state(e: &Expr) -> bool {
    matches!(e, Expr::Name(ExprName { id, .. }) if id.as_str() == STATE)
}

fn literal(e: &Expr) -> Option<String> {
    match e {
        Expr::StringLiteral(s) => Some(s.value.to_str().to_owned()),
        _ => None,
    }
}

impl<'a> Visitor<'a> for Reads {
    fn visit_expr(&mut self, expr: &'a Expr) {
        match expr {
            // state["key"] (read, written or deleted: a write only changes the copy)
            Expr::Subscript(s) if is_state(&s.value) => match literal(&s.slice) {
                Some(k) => self.key(&k),
                None => {
                    self.whole = true;
                    self.visit_expr(&s.slice);
                }
            },
            // state.get("key"[, default])
            Expr::Call(c) if matches!(c.func.as_ref(), Expr::Attribute(a) if a.attr.id.as_str() == "get" && is_state(&a.value)) => {
                match c.arguments.args.first().and_then(literal) {
                    Some(k) if c.arguments.keywords.is_empty() => {
                        self.key(&k);
                        for arg in c.arguments.args.iter().skip(1) {
                            self.visit_expr(arg);
                        }
                    }
                    _ => {
                        self.whole = true;
                        visitor::walk_expr(self, expr);
                    }
                }
            }
            e if is_state(e) => self.whole = true,
            _ => visitor::walk_expr(self, expr),
        }
    }
}

#[cfg(test)]
mod tests {
    fn keys(body: &str) -> Option<Vec<String>> {
        super::super::code::wrap_python(body, false).state_keys
    }

    #[test]
    fn literal_subscripts_and_gets_name_their_keys() {
        assert_eq!(
            keys(
                "x = state['a'] + state.get(\"b\", 0)\nstate['c'] = 1\nreturn {'y': state['a']}\n"
            ),
            Some(vec!["a".into(), "b".into(), "c".into()])
        );
        assert_eq!(keys("return {'n': 1}\n"), Some(vec![]));
    }

    #[test]
    fn any_other_use_reads_the_whole_state() {
        for body in [
            "return state\n",
            "return {'n': len(state)}\n",
            "k = 'a'\nreturn {'v': state[k]}\n",
            "return {'v': state.get(k)}\n",
            "return {'v': 'a' in state}\n",
            "return {'v': list(state.keys())}\n",
            "return {'v': [k for k in state]}\n",
            "s = state\nreturn {'v': s['a']}\n",
            "return {'v': json.dumps(state)}\n",
            "return {'v': (lambda: state)()}\n",
            "return {**state}\n",
            "return {'v': state.get(default=1)}\n",
        ] {
            assert_eq!(keys(body), None, "{body}");
        }
    }

    #[test]
    fn code_that_does_not_parse_reads_the_whole_state() {
        assert_eq!(keys("return {'a': state['a']\n"), None);
    }
}
