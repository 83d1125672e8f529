//! TEA's `validate.extraction`: checks entities and relationships a model extracted
//! in TEA's three layers, each only when the ones before it passed:
//!
//! 1. structure, against `extraction_schema` (required fields, relationship types, the
//!    fields each type requires);
//! 2. Prolog `validation_constraints`: the extraction as facts (`entity/2,3`,
//!    `relationship/3..6`) with the file's rules, each `validation_error(Type,
//!    Context)` an error;
//! 3. `semantic_probes`: a model asked a yes/no question about each item a probe
//!    selects (`for_each`, `where`), a `no` an error (`on_fail: reject` stops there).
//!
//! The result and error records are TEA's (`{valid, errors, validated_at}`). The
//! bookkeeping is Python run in Weft's sandbox (`validate.py`), the constraints a
//! Prolog block and each question a model call, so every layer is journaled.

mod probes;

use super::doc::TeaDoc;
use super::{Compiler, python_call, template, transform};
use indexmap::IndexMap;
use serde_json::{Value, json};
use weft_core::Diagnostic;
use weft_core::ir::{
    Block, BlockKind, BranchSpec, Case, CodeLimits, CodeSpec, Expr, Rescue, ValueTemplate,
};

/// The layers' bookkeeping, in Python.
const VALIDATE_PY: &str = include_str!("validate.py");

/// The Prolog layer: the facts and the file's rules loaded as `tea_load_code/1` loads a
/// program, then every `validation_error(Type, Context)`, as text.
const CONSTRAINTS: &str = r#"
weft_ev_texts([], []).
weft_ev_texts([T-C|Fs], [[TT, CT]|Es]) :-
    weft_format(atom(TT), "~w", [T]),
    weft_format(atom(CT), "~w", [C]),
    weft_ev_texts(Fs, Es).
weft_ev_run :-
    prolog(code, Code),
    tea_load_code(Code),
    findall(T-C, validation_error(T, C), Found),
    weft_ev_texts(Found, Errors),
    return(errors, Errors).
true, weft_ev_run.
"#;

/// What a probe's model is told (Weft's wording of TEA's fact-checker).
const FACT_CHECKER: &str = "You check a statement against a text. Answer with one word: yes or no.";

/// TEA's reading of a yes/no answer: any negative word (even within another word)
/// makes it a no, else an affirmative one a yes, else it is a no.
/// (An expression of `r`, the answer in lower case.)
const YES: &str = "not ('no' in r or 'false' in r or 'incorrect' in r or 'negative' in r or 'not true' in r or 'not correct' in r) and ('yes' in r or 'true' in r or 'correct' in r or 'affirmative' in r or 'indeed' in r)";

/// Names a probe's question may use besides the item's fields.
const PROBE_SCOPE: &[&str] = &[
    "state",
    "text",
    "variables",
    "secrets",
    "loop",
    "true",
    "false",
    "none",
    "True",
    "False",
    "None",
    "not",
    "and",
    "or",
    "in",
    "is",
    "if",
    "elif",
    "else",
    "endif",
    "for",
    "endfor",
    "set",
];

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

impl Compiler<'_> {
    /// The block of `uses: validate.extraction` with `with`, at node pointer `ptr`.
    pub(in crate::tea) fn validate_extraction(
        &mut self,
        with: Option<&Value>,
        ptr: &str,
        node: &str,
    ) -> Option<Block> {
        let uses = "validate.extraction";
        let wptr = format!("{ptr}/with");
        let with = self.optional_with(uses, with, &wptr, Some(OPTIONS))?;
        if with.contains_key("logging") {
            self.diags.push(Diagnostic::warning(
                format!("{wptr}/logging"),
                "logging is read, not used: Weft journals each validation's result as the step's output",
            ));
        }
        let layer =
            |key: &str, default: &Option<Value>| with.get(key).or(default.as_ref()).cloned();
        let schema = layer("schema", &self.extraction.schema).unwrap_or_else(|| json!({}));
        let rules = self.constraint_rules(
            layer("constraints", &self.extraction.constraints).as_ref(),
            &wptr,
        )?;
        let probes = self.probes(layer("probes", &self.extraction.probes).as_ref(), &wptr)?;
        let input = |key: &str, default: &str| {
            with.get(key)
                .cloned()
                .unwrap_or_else(|| Value::from(format!("{{{{ state.get('{key}', {default}) }}}}")))
        };
        let source_text = input("source_text", "state.get('text', '')");
        let specs: Vec<Value> = probes
            .iter()
            .map(|p| json!({"for_each": p.for_each, "where": p.filter}))
            .collect();
        let mut steps = vec![python(
            "check(entities, relationships, schema, rules, probes)",
            json!({
                "entities": input("entities", "[]"),
                "relationships": input("relationships", "[]"),
                "schema": schema,
                "rules": rules,
                "probes": specs,
            }),
        )];
        if !rules.is_empty() {
            steps.push(when("'facts' in input", constraints()));
        }
        for (i, probe) in probes.iter().enumerate() {
            let asked = self.probe(i, probe, &source_text, ptr, node)?;
            steps.push(when("input.probing", asked));
        }
        steps.push(python("verdict(record)", json!({"record": "{{ input }}"})));
        Some(Block::new(BlockKind::Sequence(steps)))
    }

    /// The Prolog rules of `validation_constraints` (TEA reads only Prolog there).
    fn constraint_rules(&mut self, constraints: Option<&Value>, wptr: &str) -> Option<String> {
        let Some(c) = constraints.filter(|c| !c.is_null()) else {
            return Some(String::new());
        };
        let language = c
            .get("language")
            .and_then(Value::as_str)
            .unwrap_or("prolog");
        if language != "prolog" {
            self.diags.push(Diagnostic::error(
                format!("{wptr}/constraints"),
                format!("validation_constraints language must be 'prolog', got '{language}'"),
            ));
            return None;
        }
        Some(
            c.get("rules")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        )
    }
}

/// `then` when `condition` holds of the record, else the record as it is.
fn when(condition: &str, then: Block) -> Block {
    Block::new(BlockKind::Branch(BranchSpec {
        cases: vec![Case {
            name: None,
            when: Expr(condition.into()),
            then,
        }],
        otherwise: None,
    }))
}

/// The Prolog layer over the record's facts and rules (a program that does not load is
/// TEA's `prolog_error`).
fn constraints() -> Block {
    let mut program = Block::new(BlockKind::Code(CodeSpec {
        language: "prolog".into(),
        source: CONSTRAINTS.to_owned(),
        origin: None,
        entry: None,
        args: Some(ValueTemplate(
            json!({"prolog": {"code": "{{ input.facts }}"}}),
        )),
        imports: None,
        builtins: None,
        limits: CodeLimits::default(),
    }));
    program.policy.rescue.push(Rescue {
        when: Vec::new(),
        then: transform(Value::from("{{ {'prolog_error': input.error.message} }}")),
    });
    let mut b = Block::new(BlockKind::Sequence(vec![
        program,
        python(
            "after_constraints(record, found)",
            json!({"record": "{{ record }}", "found": "{{ input }}"}),
        ),
    ]));
    b.data.bind = IndexMap::from([("record".to_owned(), template("{{ input }}"))]);
    b
}

/// `text` as a template that renders to the text itself, its own `{{ }}` untouched.
fn literal(text: &str) -> Value {
    Value::from(format!("{{{{ {} }}}}", Value::from(text)))
}

/// A block running VALIDATE_PY's Python: `call` (an expression of its functions) with `args`
/// as names; its value is the block's output.
fn python(call: &str, args: Value) -> Block {
    python_call(VALIDATE_PY, call, args)
}
