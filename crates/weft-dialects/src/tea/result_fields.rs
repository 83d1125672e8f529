//! The Edge Agent's parallel results are objects whose fields read as attributes
//! (`result.state`, `result.index`) as well as keys; in Weft they are plain dicts, which
//! Python code can only subscript. So in a tea Python body, `NAME.FIELD` for one of
//! those fields is read through a one-line helper that subscripts a dict and takes the
//! attribute of anything else. Only loads of a plain name's field are rewritten, on the
//! same line, so errors keep their line numbers.

use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{Expr, ExprContext, ModModule};
use ruff_python_parser::Parsed;
use ruff_text_size::Ranged;

/// The fields of TEA's parallel results (`ParallelFlowResult`) and of its branch
/// results in Weft (`{state, source_node, index}`).
const FIELDS: &[&str] = &[
    "state",
    "index",
    "source_node",
    "branch",
    "success",
    "error",
    "error_type",
    "timing_ms",
];

/// The helper the rewritten reads call; one line, so it shifts the body by one.
pub(super) const HELPER: &str =
    "def _tea_field(o, k): return o[k] if isinstance(o, dict) else getattr(o, k)\n";

/// `source` (a whole Python module, `parsed`) with each `NAME.FIELD` load read through
/// `_tea_field`, or None when it has none.
pub(super) fn rewrite(source: &str, parsed: &Parsed<ModModule>) -> Option<String> {
    if !FIELDS.iter().any(|f| source.contains(&format!(".{f}"))) {
        return None;
    }
    let mut finder = Reads::default();
    for stmt in &parsed.syntax().body {
        finder.visit_stmt(stmt);
    }
    if finder.edits.is_empty() {
        return None;
    }
    finder.edits.sort_by_key(|e| e.0);
    let mut out = String::with_capacity(source.len() + 16 * finder.edits.len());
    let mut rest = 0;
    for (start, end, text) in finder.edits {
        out.push_str(&source[rest..start]);
        out.push_str(&text);
        rest = end;
    }
    out.push_str(&source[rest..]);
    Some(out)
}

#[derive(Default)]
struct Reads {
    /// Byte ranges and their replacements.
    edits: Vec<(usize, usize, String)>,
}

impl<'a> Visitor<'a> for Reads {
    fn visit_expr(&mut self, expr: &'a Expr) {
        if let Expr::Attribute(a) = expr
            && a.ctx == ExprContext::Load
            && FIELDS.contains(&a.attr.id.as_str())
            && let Expr::Name(name) = a.value.as_ref()
        {
            let range = a.range();
            self.edits.push((
                range.start().to_usize(),
                range.end().to_usize(),
                format!(
                    "_tea_field({}, \"{}\")",
                    name.id.as_str(),
                    a.attr.id.as_str()
                ),
            ));
        }
        visitor::walk_expr(self, expr);
    }
}

#[cfg(test)]
mod tests {
    fn rewrite(source: &str) -> Option<String> {
        super::rewrite(source, &ruff_python_parser::parse_module(source).unwrap())
    }

    #[test]
    fn field_reads_of_a_name_go_through_the_helper() {
        let src = "for r in results:\n    ok = r.state.get('x') == 1 and r.index > 0\n    r.state = 2\n    s = state.get('a')\n    t = obj.other\n";
        let out = rewrite(src).unwrap();
        assert_eq!(
            out,
            "for r in results:\n    ok = _tea_field(r, \"state\").get('x') == 1 and _tea_field(r, \"index\") > 0\n    r.state = 2\n    s = state.get('a')\n    t = obj.other\n"
        );
        assert_eq!(rewrite("x = a.b\n"), None);
    }
}
