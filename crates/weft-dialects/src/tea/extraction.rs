//! TEA's `validate.extraction`: checks entities and relationships a model extracted
//! against the file's `extraction_schema` (required fields, relationship types and the
//! fields each type requires), with TEA's error records (`type`, `path`, `expected`,
//! `actual`, `message`) and result (`{valid, errors, validated_at}`).
//!
//! The check is Python run in Weft's sandbox (so it is journaled like any step). TEA's
//! two further layers, Prolog `validation_constraints` and model-asked
//! `semantic_probes`, are not built: a validation that would need them fails when it
//! runs, saying so, rather than passing what TEA would have rejected.

use super::Compiler;
use super::doc::TeaDoc;
use serde_json::{Map, Value, json};
use weft_core::Diagnostic;
use weft_core::ir::{Block, BlockKind, CodeLimits, CodeSpec, ValueTemplate};

/// The options `validate.extraction` reads.
const OPTIONS: &[&str] = &[
    "entities",
    "relationships",
    "source_text",
    "schema",
    "constraints",
    "probes",
    "logging",
    "agent_name",
];

/// The file's sections that are `validate.extraction`'s defaults.
#[derive(Default)]
pub(super) struct Defaults {
    schema: Option<Value>,
    constraints: Option<Value>,
    probes: Option<Value>,
}

impl Defaults {
    pub(super) fn of(tea: &TeaDoc) -> Self {
        Defaults {
            schema: tea.extraction_schema.clone(),
            constraints: tea.validation_constraints.clone(),
            probes: tea.semantic_probes.clone(),
        }
    }
}

/// The structural check, TEA's rules and messages (its `StructuralValidator`).
const STRUCTURAL: &str = r#"
import datetime

def structural_errors(entities, relationships, schema):
    entity_spec = schema.get("entities") or {}
    relationship_spec = schema.get("relationships") or {}
    errors = []
    for i, entity in enumerate(entities or []):
        for name in entity_spec.get("required_fields") or []:
            if entity.get(name) is None:
                errors.append({"type": "missing_required_field", "path": f"entities[{i}].{name}", "entity": entity, "expected": name, "actual": None, "message": f"Entity missing required field '{name}'"})
    types = relationship_spec.get("types") or []
    needs = relationship_spec.get("type_requirements") or {}
    for i, rel in enumerate(relationships or []):
        for name in relationship_spec.get("required_fields") or []:
            if rel.get(name) is None:
                errors.append({"type": "missing_required_field", "path": f"relationships[{i}].{name}", "relationship": rel, "expected": name, "actual": None, "message": f"Relationship missing required field '{name}'"})
        kind = rel.get("type")
        if types and kind not in types:
            errors.append({"type": "invalid_relationship_type", "path": f"relationships[{i}].type", "relationship": rel, "expected": types, "actual": kind, "message": f"Invalid relationship type '{kind}', expected one of {types}"})
        if kind and kind in needs:
            for name in needs[kind]:
                if rel.get(name) is None:
                    errors.append({"type": "missing_type_specific_field", "path": f"relationships[{i}].{name}", "relationship": rel, "expected": name, "actual": None, "message": f"Relationship type '{kind}' requires field '{name}'"})
    return errors

if not isinstance(entities, list) or not isinstance(relationships, list):
    raise ValueError("validate.extraction: entities and relationships are lists")
errors = structural_errors(entities, relationships, schema or {})
{"valid": len(errors) == 0, "errors": errors, "validated_at": datetime.datetime.now().isoformat()}
"#;

impl Compiler<'_> {
    /// The block of `uses: validate.extraction` with `with`, at node pointer `ptr`.
    pub(super) fn validate_extraction(
        &mut self,
        with: Option<&Value>,
        ptr: &str,
        node: &str,
    ) -> Option<Block> {
        let uses = "validate.extraction";
        let wptr = format!("{ptr}/with");
        let empty = Map::new();
        let with = match with {
            None | Some(Value::Null) => &empty,
            Some(w) => self.with_options(uses, Some(w), &wptr, ("", ""), OPTIONS)?,
        };
        let layer =
            |key: &str, default: &Option<Value>| with.get(key).or(default.as_ref()).cloned();
        let constraints = layer("constraints", &self.extraction.constraints);
        let probes = layer("probes", &self.extraction.probes);
        let unbuilt: Vec<&str> = [
            (
                has_rules(constraints.as_ref()),
                "Prolog `validation_constraints`",
            ),
            (
                is_nonempty(probes.as_ref()),
                "`semantic_probes` (a model asked about each item)",
            ),
        ]
        .into_iter()
        .filter_map(|(on, what)| on.then_some(what))
        .collect();
        if !unbuilt.is_empty() {
            let message = format!(
                "validate.extraction with {}: Weft checks extractions against `extraction_schema` only; TEA's other layers are not built",
                unbuilt.join(" and ")
            );
            return Some(self.unavailable(
                message,
                "docs/dialects/tea.md, validate.extraction",
                ptr,
                node,
            ));
        }
        if with.contains_key("logging") {
            self.diags.push(Diagnostic::warning(
                format!("{wptr}/logging"),
                "logging is read, not used: Weft journals each validation's result as the step's output",
            ));
        }
        let schema = layer("schema", &self.extraction.schema).unwrap_or_else(|| json!({}));
        let input = |key: &str, default: &str| {
            with.get(key)
                .cloned()
                .unwrap_or_else(|| Value::from(format!("{{{{ state.get('{key}', {default}) }}}}")))
        };
        let check = Block::new(BlockKind::Code(CodeSpec {
            language: "python".into(),
            source: STRUCTURAL.trim_start().to_owned(),
            origin: None,
            entry: None,
            args: Some(ValueTemplate(json!({
                "entities": input("entities", "[]"),
                "relationships": input("relationships", "[]"),
                "schema": schema,
            }))),
            imports: None,
            builtins: None,
            limits: CodeLimits::default(),
        }));
        Some(check)
    }
}

/// Whether `validation_constraints` has Prolog rules.
fn has_rules(constraints: Option<&Value>) -> bool {
    constraints
        .and_then(|c| c.get("rules"))
        .and_then(Value::as_str)
        .is_some_and(|r| !r.trim().is_empty())
}

/// Whether `semantic_probes` lists any probe.
fn is_nonempty(probes: Option<&Value>) -> bool {
    probes
        .and_then(Value::as_array)
        .is_some_and(|p| !p.is_empty())
}
