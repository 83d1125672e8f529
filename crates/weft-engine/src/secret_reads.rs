//! Secrets a flow reads that the engine was not given. A template renders a missing
//! `secrets.API_TOKEN` as nothing, so a run would send `Authorization: Bearer ` and
//! succeed; the flow is refused before it starts instead, naming what to set.

use serde_json::Value;
use weft_core::Diagnostic;
use weft_core::ir::Flow;
use weft_core::validate::{SiteKind, expression_sites};

/// An error for each place `flow` reads `secrets.NAME` where `secrets` holds no `NAME`.
/// A read of `secrets` as a whole (a subscript with a computed name) is left alone.
pub(crate) fn unset_secrets(flow: &Flow, secrets: &Value) -> Vec<Diagnostic> {
    let held = secrets.as_object();
    let mut out: Vec<Diagnostic> = Vec::new();
    for site in expression_sites(flow) {
        let Some(paths) = weft_expr::reads(site.source, site.kind == SiteKind::Expr) else {
            continue;
        };
        let mut names: Vec<&str> = paths
            .iter()
            .filter_map(|p| p.strip_prefix("secrets."))
            .map(|rest| rest.split('.').next().unwrap_or(rest))
            .collect();
        names.sort_unstable();
        names.dedup();
        for name in names {
            if held.is_some_and(|h| h.contains_key(name)) {
                continue;
            }
            out.push(unset(&site.pointer, name, held));
        }
    }
    out
}

/// The error for `secrets.name`, saying which variable sets it, or which spelling reads
/// the secret that is set under another case.
fn unset(pointer: &str, name: &str, held: Option<&serde_json::Map<String, Value>>) -> Diagnostic {
    let variable = format!("WEFT_SECRET_{}", name.to_ascii_uppercase());
    let other_case = held.and_then(|h| h.keys().find(|k| k.eq_ignore_ascii_case(name)));
    let d = Diagnostic::error(
        pointer,
        format!("the flow reads `secrets.{name}`, which is not set"),
    );
    match other_case {
        Some(spelt) => d.hint(format!(
            "a secret is set as `secrets.{spelt}`: read it by that name (secret names are the variable's name after WEFT_SECRET_, in lower case or as written)"
        )),
        None => d.hint(format!(
            "set the variable {variable} for the process that runs the flow"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn flow_reading(template: &str) -> Flow {
        let yaml = format!("weft: 1\nname: f\nroot:\n  transform: {{output: \"{template}\"}}\n");
        let loaded = weft_dialects::load_str(&yaml, "f.yaml", None, None).unwrap();
        (*loaded.flow).clone()
    }

    #[test]
    fn a_secret_that_is_not_set_is_named_with_its_variable() {
        let flow = flow_reading("Bearer {{ secrets.api_token }}");
        let d = unset_secrets(&flow, &json!({}));
        assert_eq!(d.len(), 1);
        assert!(
            d[0].message.contains("`secrets.api_token`"),
            "{}",
            d[0].message
        );
        assert!(
            d[0].hint
                .as_deref()
                .unwrap()
                .contains("WEFT_SECRET_API_TOKEN")
        );
        assert!(unset_secrets(&flow, &json!({"api_token": "t"})).is_empty());
    }

    #[test]
    fn another_spelling_of_a_set_secret_is_named() {
        let flow = flow_reading("{{ secrets.API_Token }}");
        let d = unset_secrets(&flow, &json!({"api_token": "t"}));
        assert!(
            d[0].hint
                .as_deref()
                .unwrap()
                .contains("`secrets.api_token`"),
            "{:?}",
            d[0].hint
        );
        // A computed name cannot be checked before the run.
        assert!(unset_secrets(&flow_reading("{{ secrets[input.which] }}"), &json!({})).is_empty());
    }
}
