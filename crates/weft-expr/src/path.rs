//! Templates that only name a value (`{{ state }}`, `{{ input.items[0].title }}`), the
//! commonest kind in flows: looked up in the JSON the scope holds, without the round
//! trip through the template engine's values (converting a whole state to them and
//! back was a sixth of a code step's cost). Whatever the lookup cannot answer exactly as
//! the engine would (a missing key, an unbound name, an index into a string) is left to
//! the engine.

use crate::Scope;
use serde_json::Value;
use std::borrow::Cow;
use weft_value::{Kind, Node, Shared};

/// One step of a path: an object's key or an array's index.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    Key(String),
    Index(usize),
}

/// A name and the steps after it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Path {
    name: String,
    steps: Vec<Step>,
}

impl Path {
    /// `expr` read as a path (`name`, then `.key`, `[0]`, `['key']` or `["key"]` steps,
    /// with no spaces), or `None` when it is any other expression.
    pub(crate) fn parse(expr: &str) -> Option<Path> {
        let (name, mut rest) = identifier(expr)?;
        let mut steps = Vec::new();
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix('.') {
                let (key, tail) = identifier(after)?;
                steps.push(Step::Key(key.to_owned()));
                rest = tail;
            } else if let Some(after) = rest.strip_prefix('[') {
                let (step, tail) = bracket(after)?;
                steps.push(step);
                rest = tail;
            } else {
                return None;
            }
        }
        Some(Path {
            name: name.to_owned(),
            steps,
        })
    }

    /// The value the path names in `scope`, when every step finds what it names (a
    /// copy only when the path names a value built of shared parts).
    pub(crate) fn lookup<'s>(&self, scope: &'s Scope) -> Option<Cow<'s, Value>> {
        self.node(scope).map(Node::json)
    }

    /// The value the path names, shared when it is a shared part of what the scope
    /// binds, and whether it is a shared container (a list or object whose holder
    /// should keep the pointer).
    pub(crate) fn lookup_shared(&self, scope: &Scope) -> Option<(Shared, bool)> {
        Some(match self.node(scope)? {
            Node::Shared(s) => (s.clone(), !matches!(s.node().kind(), Kind::Scalar(_))),
            Node::Json(v) => (Shared::new(v.clone()), false),
        })
    }

    fn node<'s>(&self, scope: &'s Scope) -> Option<Node<'s>> {
        let mut at = scope.bound(&self.name)?.node();
        for step in &self.steps {
            at = match step {
                Step::Key(k) => at.get(k)?,
                Step::Index(i) => at.at(*i)?,
            };
        }
        Some(at)
    }
}

/// A leading identifier and what follows it.
fn identifier(s: &str) -> Option<(&str, &str)> {
    let end = s
        .char_indices()
        .find(|&(i, c)| !(c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit())))
        .map_or(s.len(), |(i, _)| i);
    (end > 0).then(|| s.split_at(end))
}

/// The step inside `[...]` (its opening bracket already read) and what follows it.
fn bracket(s: &str) -> Option<(Step, &str)> {
    let close = s.find(']')?;
    let (inside, rest) = (&s[..close], &s[close + 1..]);
    let step = match inside.as_bytes().first()? {
        b'0'..=b'9' => Step::Index(inside.parse().ok()?),
        q @ (b'\'' | b'"') => {
            let key = inside.strip_prefix(*q as char)?.strip_suffix(*q as char)?;
            if key.contains(['\\', '\'', '"']) {
                return None;
            }
            Step::Key(key.to_owned())
        }
        _ => return None,
    };
    Some((step, rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn key(k: &str) -> Step {
        Step::Key(k.into())
    }

    #[test]
    fn paths_are_names_keys_and_indexes_and_nothing_else() {
        let p = Path::parse("input.items[0]['a b'].c_2").unwrap();
        assert_eq!(p.name, "input");
        assert_eq!(
            p.steps,
            [key("items"), Step::Index(0), key("a b"), key("c_2")]
        );
        assert_eq!(Path::parse("state").unwrap().steps, []);
        for not_a_path in [
            "input.count + 1",
            "input[-1]",
            "input[i]",
            "input.a | length",
            "input.x()",
            "1input",
            "input .a",
            "input['a\\'b']",
            "",
            "'text'",
        ] {
            assert_eq!(Path::parse(not_a_path), None, "{not_a_path}");
        }
    }

    #[test]
    fn a_lookup_answers_only_what_it_finds() {
        let mut scope = Scope::new();
        scope.bind(
            "input",
            Arc::new(json!({"items": [{"a b": {"c_2": 5}}], "n": 3})),
        );
        let p = |s: &str| Path::parse(s).unwrap();
        assert_eq!(
            p("input.items[0]['a b'].c_2").lookup(&scope).as_deref(),
            Some(&json!(5))
        );
        assert_eq!(p("input.missing").lookup(&scope), None);
        assert_eq!(p("input.items[3]").lookup(&scope), None);
        assert_eq!(p("input.n.x").lookup(&scope), None);
        assert_eq!(p("unbound").lookup(&scope), None);
        // A shared map: a key steps into one of its values; the whole map is a copy.
        scope.bind_map(
            "state",
            Arc::new(
                [("k".to_owned(), Shared::new(json!([7])))]
                    .into_iter()
                    .collect(),
            ),
        );
        assert_eq!(p("state.k[0]").lookup(&scope).as_deref(), Some(&json!(7)));
        assert_eq!(p("state[0]").lookup(&scope), None);
        assert_eq!(p("state.nope").lookup(&scope), None);
        assert_eq!(
            p("state").lookup(&scope).as_deref(),
            Some(&json!({"k": [7]}))
        );
        // What names a shared part is that part, not a copy of it.
        let (k, shares) = p("state.k").lookup_shared(&scope).unwrap();
        let Some(Shared::Object(map)) = scope.bound("state") else {
            unreachable!()
        };
        assert!(shares && Shared::ptr_eq(&k, &map["k"]));
        assert_eq!(
            p("state.k[0]").lookup_shared(&scope),
            Some((Shared::new(json!(7)), false))
        );
    }
}
