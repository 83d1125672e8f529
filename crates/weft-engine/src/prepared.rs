//! A flow made ready to run: validated, hashed, every expression compiled once.

use std::sync::Arc;
use weft_core::validate::{SiteKind, expression_sites, validate};
use weft_core::{Diagnostic, Flow, Severity};
use weft_expr::Exprs;

/// A validated flow with its expressions compiled. Share it across runs.
pub struct Prepared {
    pub(crate) flow: Arc<Flow>,
    pub(crate) exprs: Exprs,
    pub(crate) hash: String,
    pub(crate) ir_json: String,
    pub(crate) warnings: Vec<Diagnostic>,
}

impl Prepared {
    /// Validates `flow` and compiles its expressions. Returns every error found
    /// (warnings do not stop a flow; they are kept in [`Prepared::warnings`]). A shared
    /// flow (`Arc<Flow>`) is kept as it is, not copied.
    pub fn new(flow: impl Into<Arc<Flow>>) -> Result<Prepared, Vec<Diagnostic>> {
        let flow = flow.into();
        let mut diags = validate(&flow);
        let mut exprs = Exprs::new();
        for site in expression_sites(&flow) {
            if let Err(e) = exprs.add(site.source, site.kind == SiteKind::Expr) {
                diags.push(
                    Diagnostic::error(site.pointer, e.message)
                        .hint("templates and conditions are Jinja2 expressions, e.g. `{{ input.name }}` or `state.count < 5`"),
                );
            }
        }
        let (errors, warnings): (Vec<_>, Vec<_>) = diags
            .into_iter()
            .partition(|d| d.severity == Severity::Error);
        if !errors.is_empty() {
            return Err(errors);
        }
        let ir_json = serde_json::to_string(&*flow).expect("the IR always serializes");
        let hash = weft_core::hash::content_hash(ir_json.as_bytes());
        Ok(Prepared {
            flow,
            exprs,
            hash,
            ir_json,
            warnings,
        })
    }

    /// The flow.
    pub fn flow(&self) -> &Flow {
        &self.flow
    }

    /// The flow's content hash.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// Warnings found while preparing.
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.warnings
    }
}

impl crate::Engine {
    /// Validates `flow` (its models too, against this engine's providers, and the
    /// secrets it reads, against this engine's) and compiles its expressions.
    pub fn prepare(&self, flow: impl Into<Arc<Flow>>) -> Result<Arc<Prepared>, Vec<Diagnostic>> {
        let flow = flow.into();
        let mut unreachable = match &self.inner.models {
            Some(models) => models.check(&flow),
            None => Vec::new(),
        };
        unreachable.extend(crate::secret_reads::unset_secrets(
            &flow,
            &self.inner.secrets,
        ));
        let prepared = Prepared::new(flow)?;
        if unreachable.is_empty() {
            Ok(Arc::new(prepared))
        } else {
            Err(unreachable)
        }
    }
}
