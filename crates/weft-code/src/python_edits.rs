//! Rewrites of Python source by byte range, as the worker's source rewrites
//! (`python_modules.rs`, `python_methods.rs`) make them: each replacement stays on the
//! line it replaces, so errors keep the block's own line numbers.

/// A byte range of the source and its replacement.
pub(crate) type Edit = (usize, usize, String);

/// Appends `source` to `out` with `edits` (non-overlapping, any order) applied; an edit
/// that spans lines is followed by as many line breaks, so every later line keeps its
/// number.
pub(crate) fn splice_into(out: &mut String, source: &str, edits: &mut [Edit]) {
    edits.sort_by_key(|e| e.0);
    let mut rest = 0;
    for (start, end, replacement) in edits.iter() {
        out.push_str(&source[rest..*start]);
        out.push_str(replacement);
        for _ in 0..source[*start..*end].matches('\n').count() {
            out.push('\n');
        }
        rest = *end;
    }
    out.push_str(&source[rest..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_apply_in_order_and_keep_line_numbers() {
        let mut out = String::from("# shim\n");
        let mut edits = vec![(11, 12, "c".to_owned()), (0, 10, "x = (1)".to_owned())];
        splice_into(&mut out, "x = (1,\n2)\nabc\n", &mut edits);
        assert_eq!(out, "# shim\nx = (1)\n\ncbc\n");
    }
}
