//! How large a value's JSON is, found without writing it.

use weft_core::value::{Kind, Node, Value};

/// Whether `node`'s JSON is at least `limit` bytes long, walking no more of it than
/// that: a lower bound (strings count their bytes unescaped, numbers other than
/// integers three), which is all the choice between inline and stored needs.
pub(super) fn json_reaches(node: Node<'_>, limit: usize) -> bool {
    let mut left = Budget(limit);
    left.node(node)
}

/// Bytes still to find before a value counts as large.
struct Budget(usize);

impl Budget {
    /// Counts `n` bytes; true once the limit is reached.
    fn spend(&mut self, n: usize) -> bool {
        self.0 = self.0.saturating_sub(n);
        self.0 == 0
    }

    fn node(&mut self, node: Node<'_>) -> bool {
        if let Some(v) = node.as_json() {
            return self.json(v);
        }
        match node.kind() {
            // `{` and `}`, and per entry its quoted key, a colon and a comma but one.
            Kind::Object(_) => {
                self.spend(1)
                    || node.keys().into_iter().any(|k| {
                        self.spend(k.len() + 4) || node.get(k).is_some_and(|v| self.node(v))
                    })
            }
            Kind::Array(n) => {
                self.spend(1 + n) || (0..n).any(|i| node.at(i).is_some_and(|v| self.node(v)))
            }
            Kind::Scalar(v) => self.json(v),
        }
    }

    fn json(&mut self, v: &Value) -> bool {
        match v {
            Value::Null | Value::Bool(_) => self.spend(4),
            Value::Number(n) => self.spend(number_len(n)),
            Value::String(s) => self.spend(s.len() + 2),
            Value::Array(a) => self.spend(1 + a.len()) || a.iter().any(|v| self.json(v)),
            Value::Object(m) => {
                self.spend(1)
                    || m.iter()
                        .any(|(k, v)| self.spend(k.len() + 4) || self.json(v))
            }
        }
    }
}

/// How many characters a number takes at least.
fn number_len(n: &serde_json::Number) -> usize {
    let digits = |mut u: u64| {
        let mut d = 1;
        while u >= 10 {
            u /= 10;
            d += 1;
        }
        d
    };
    match (n.as_u64(), n.as_i64()) {
        (Some(u), _) => digits(u),
        (None, Some(i)) => 1 + digits(i.unsigned_abs()),
        _ => 3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::shared_values::LARGE;
    use serde_json::json;
    use weft_core::value::{Shared, SharedMap};

    #[test]
    fn the_size_check_agrees_with_serialized_json_around_the_limit() {
        for n in [0, 1, 10, 100, 500, 700, 1000, 1200, 2000, 5000] {
            let plain =
                Shared::new(json!({"items": (0..n).collect::<Vec<_>>(), "s": "x".repeat(n)}));
            let mut parts = SharedMap::new();
            parts.insert("state".into(), plain.clone());
            parts.insert("n".into(), Shared::new(json!(n)));
            parts.insert("f".into(), Shared::new(json!([1.5, -3, null, true])));
            let built = Shared::object(parts);
            for v in [&plain, &built] {
                let len = serde_json::to_vec(v).unwrap().len();
                let reaches = json_reaches(v.node(), LARGE);
                // A lower bound: never says large of a small value, and says it of any
                // value a little past the limit.
                assert!(!reaches || len >= LARGE, "n={n}: {len} bytes said large");
                assert!(reaches || len < LARGE + 64, "n={n}: {len} bytes said small");
            }
        }
    }
}
