//! Reads of `steps.X` in Weft's native format. Other formats keep each step's result
//! under a name of its own (runsight's `results.X`, TEA's state); the native format has
//! no `steps` at all — a step's output is the next step's `input`, and what a later step
//! needs is written to the state — so such a read is undefined whenever it runs. It is
//! refused where it is written, with the way native flows pass a result along.

use std::collections::BTreeSet;
use weft_core::Diagnostic;
use weft_core::ir::{BlockKind, Flow};
use weft_core::validate::{SiteKind, expression_sites, walk_blocks};

/// An error for each template or condition of `flow` that reads `steps` (none when a
/// `map` names its item or index `steps`, which binds the name).
pub(crate) fn steps_reads(flow: &Flow) -> Vec<Diagnostic> {
    let mut ids: BTreeSet<&str> = BTreeSet::new();
    let mut bound = false;
    walk_blocks(flow, &mut |_, b| {
        if let Some(id) = &b.id {
            ids.insert(id.as_str());
        }
        if let BlockKind::Map(m) = &b.kind {
            bound |= m.item_var == "steps" || m.index_var == "steps";
        }
    });
    let mut out = Vec::new();
    if bound {
        return out;
    }
    for site in expression_sites(flow) {
        let Some(paths) = weft_expr::reads(site.source, site.kind == SiteKind::Expr) else {
            continue;
        };
        let Some(step) = paths
            .iter()
            .filter_map(|p| p.strip_prefix("steps"))
            .find(|rest| rest.is_empty() || rest.starts_with('.'))
        else {
            continue;
        };
        let named = step.trim_start_matches('.').split('.').next().unwrap_or("");
        let message =
            "`steps` is not in scope in Weft's native format: it is undefined whenever this runs";
        let d = Diagnostic::error(&site.pointer, message);
        out.push(if ids.contains(named) {
            d.hint(format!(
                "a step's output is the next step's `input`; to read `{named}`'s output later, write it to the state where it runs (`set: {{{named}: \"{{{{ output }}}}\"}}`) and read `state.{named}` once it has run"
            ))
        } else {
            d.hint_closest(
                named,
                ids.iter().copied(),
                "a step's output is the next step's `input`; a later step reads what an earlier one wrote to the state with `set`",
            )
        });
    }
    out
}

#[cfg(test)]
mod tests {
    fn errors(yaml: &str) -> Vec<String> {
        match crate::load_str(yaml, "f.yaml", None, None) {
            Ok(_) => Vec::new(),
            Err(e) => e.diagnostics.iter().map(|d| d.render("f.yaml")).collect(),
        }
    }

    #[test]
    fn a_read_of_steps_is_refused_at_its_line_with_the_way_to_pass_a_result() {
        let flow = "weft: 1\nname: f\nroot:\n  sequence:\n    - id: first\n      transform: {output: \"{{ steps.second.output }}\"}\n    - id: second\n      transform: {output: 2}\n";
        let said = errors(flow);
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].starts_with("f.yaml:6:"), "{}", said[0]);
        assert!(said[0].contains("`steps` is not in scope"), "{}", said[0]);
        assert!(said[0].contains("set: {second:"), "{}", said[0]);
        let misspelt = flow.replace("steps.second", "steps.secnod");
        assert!(errors(&misspelt)[0].contains("did you mean `second`?"));
        let condition = "weft: 1\nname: f\nroot:\n  loop:\n    max_iterations: 2\n    until: steps.x.output\n    body: {transform: {output: 1}}\n";
        assert!(
            errors(condition)[0].starts_with("f.yaml:6:"),
            "{:?}",
            errors(condition)
        );
    }

    #[test]
    fn a_map_that_names_its_item_steps_binds_it() {
        let flow = "weft: 1\nname: f\nroot:\n  map:\n    items: \"{{ [1, 2] }}\"\n    item_var: steps\n    body: {transform: {output: \"{{ steps }}\"}}\n";
        assert!(errors(flow).is_empty(), "{:?}", errors(flow));
    }
}
