//! Prolog through scryer-prolog, with spec 004's contract: the block's arguments are
//! facts (`state(Key, Value)` for every key of `state`, likewise `variables/2`, ...), and
//! the code writes results with `return(Key, Value)`; the result is the object of all
//! returned pairs. The source is one goal, e.g. `state(value, V), V2 is V * 2,
//! return(result, V2).`, or a program as The Edge Agent reads one (`prolog_program.rs`):
//! directives and rules, facts, and goals in order.
//!
//! Runs only in a Prolog worker process, which starts its machine before it confines
//! itself (scryer loads its libraries then) and retires after any panic inside scryer.

use crate::prolog_program;
use crate::protocol::{Failure, FailureKind, Request};
use scryer_prolog::{LeafAnswer, Machine, MachineBuilder, StreamConfig, Term};
use serde_json::{Map, Number, Value};

/// Inferences a goal may make per millisecond of its time limit. Scryer makes 5 to 21
/// million a second here (a `between/3` loop, `repeat, fail`), so this bound ends a
/// runaway goal at about its time limit or later, as a clean `timeout` that keeps the
/// worker and its loaded machine, instead of the kill at the deadline (which still
/// covers builtins that run long without counting inferences). Counting makes a tight
/// loop about a third slower.
const INFERENCES_PER_MS: u64 = 20_000;

/// A scryer machine, started once per worker.
pub struct Prolog {
    machine: Machine,
    /// A program failed to load (after which scryer panics on the next query) or
    /// redefined a helper: the machine must not be used again.
    broken: bool,
    /// Whether [`PROGRAM_HELPERS`] are loaded.
    helpers_loaded: bool,
}

/// A block's own program, consulted on its own after the helpers.
struct BlockProgram {
    text: String,
    /// Whether it defines a predicate the helpers define.
    redefines_helpers: bool,
}

/// The block's arguments as facts, its definitions, `weft_main` (its goal, or its terms
/// in order) and `weft_clear`, which forgets everything the block defined (a later block
/// on this machine, of any run, must not see a predicate it did not define itself).
fn block_program(req: &Request) -> BlockProgram {
    let mut program = String::from(
        ":- use_module(library(lists)).\n:- use_module(library(between)).\n:- use_module(library(iso_ext)).\n:- dynamic('$weft_return'/2).\n",
    );
    let mut defined = Vec::new();
    let args = req.args.json();
    if let Value::Object(args) = &*args {
        for (name, value) in args.iter().filter(|(n, _)| is_plain_atom(n)) {
            let arity = if value.is_object() { 2 } else { 1 };
            defined.push(format!("{name}/{arity}"));
            match value {
                Value::Object(m) => {
                    for (k, v) in m {
                        program.push_str(&format!(
                            "{name}({}, {}).\n",
                            quote_atom(k),
                            term_text(v)
                        ));
                    }
                }
                other => program.push_str(&format!("{name}({}).\n", term_text(other))),
            }
        }
    }
    program.push_str("return(K, V) :- assertz('$weft_return'(K, V)).\n");
    let mut source = prolog_program::swi_syntax(&req.source);
    if uses_clpfd(&source) {
        program.push_str(":- use_module(library(clpz)).\n");
        source = source.replace("library(clpfd)", "library(clpz)");
    }
    let parsed = prolog_program::program(&source);
    let mut redefines_helpers = false;
    let main = if parsed.definitions.is_empty() && parsed.terms.len() <= 1 {
        // One goal: run as written.
        let goal = source.trim().trim_end_matches('.').trim();
        format!("weft_main :- (\n{goal}\n).\n")
    } else {
        // A program: its definitions, then its terms in order, each asserted as a
        // fact or called as a goal.
        let rules = prolog_program::defined_predicates(&parsed.definitions);
        redefines_helpers = rules.iter().any(|r| HELPER_PREDICATES.contains(r));
        defined.extend(rules);
        let mut text = String::new();
        for d in &parsed.definitions {
            text.push_str(&format!("{d}.\n"));
        }
        let terms: Vec<String> = parsed.terms.iter().map(|t| format!("(\n{t}\n)")).collect();
        text.push_str(&format!(
            "weft_main :- weft_terms([{}]).\n",
            terms.join(", ")
        ));
        text
    };
    // Declared dynamic: a lookup in an empty state fails instead of raising, TEA's
    // programs change their rules with `assertz`/`retract`, and `weft_clear` forgets them.
    program.push_str(&prolog_program::dynamic_declarations(&defined));
    program.push_str(&main);
    let clears: Vec<String> = defined.iter().filter_map(|d| retract_all(d)).collect();
    let clears = if clears.is_empty() {
        "true".to_owned()
    } else {
        clears.join(", ")
    };
    // The load marker last: present only if everything before it loaded.
    program.push_str(&format!("weft_clear :- {clears}.\nweft_loaded.\n"));
    BlockProgram {
        text: program,
        redefines_helpers,
    }
}

/// `retractall(name(_, ...))` for `name/arity`.
fn retract_all(indicator: &str) -> Option<String> {
    let (name, arity) = indicator.rsplit_once('/')?;
    let arity: usize = arity.parse().ok()?;
    Some(if arity == 0 {
        format!("retractall({name})")
    } else {
        format!("retractall({name}({}))", vec!["_"; arity].join(", "))
    })
}

/// `name/arity` of every predicate [`PROGRAM_HELPERS`] define.
static HELPER_PREDICATES: std::sync::LazyLock<std::collections::HashSet<String>> =
    std::sync::LazyLock::new(|| {
        prolog_program::clauses(&PROGRAM_HELPERS)
            .iter()
            .filter(|c| !c.starts_with(":-"))
            .filter_map(|c| prolog_program::head_indicator(c))
            .collect()
    });

/// `s` between `quote`s, with the backslash, the quote and newlines escaped.
fn quoted(s: &str, quote: char) -> String {
    let escaped = s
        .replace('\\', "\\\\")
        .replace(quote, &format!("\\{quote}"))
        .replace('\n', "\\n");
    format!("{quote}{escaped}{quote}")
}

fn quote_atom(s: &str) -> String {
    quoted(s, '\'')
}

/// Writes a JSON value as a Prolog term: objects become lists of `Key-Value` pairs.
fn term_text(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i.to_string(),
            (None, Some(f)) if f.is_finite() => format!("{f:?}"),
            _ => "nan".into(),
        },
        // The Edge Agent passes strings as atoms, so `Class = critical_incident` and
        // `atom_length/2` work on them as its programs expect.
        Value::String(s) => quote_atom(s),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(term_text).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(m) => format!(
            "[{}]",
            m.iter()
                .map(|(k, v)| format!("{}-{}", quote_atom(k), term_text(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn is_plain_atom(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn to_json(t: Term) -> Value {
    match t {
        Term::Integer(i) => i
            .to_string()
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or_else(|_| Value::String(i.to_string())),
        Term::Float(f) => Number::from_f64(f).map_or(Value::Null, Value::Number),
        Term::Atom(a) => match a.as_str() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            "null" => Value::Null,
            "[]" => Value::Array(Vec::new()),
            _ => Value::String(a),
        },
        Term::String(s) => Value::String(s),
        Term::List(items) => {
            let pairs = !items.is_empty()
                && items.iter().all(|i| matches!(i, Term::Compound(f, args) if f == "-" && args.len() == 2 && matches!(args[0], Term::Atom(_))));
            if pairs {
                let mut m = Map::new();
                for item in items {
                    if let Term::Compound(_, mut args) = item {
                        let v = args.pop().map(to_json).unwrap_or(Value::Null);
                        if let Some(Term::Atom(k)) = args.pop() {
                            m.insert(k, v);
                        }
                    }
                }
                Value::Object(m)
            } else {
                Value::Array(items.into_iter().map(to_json).collect())
            }
        }
        Term::Var(_) => Value::Null,
        other => Value::String(written(&other)),
    }
}

/// Writes a term as Prolog would print it, for error messages.
fn written(t: &Term) -> String {
    match t {
        Term::Integer(i) => i.to_string(),
        Term::Float(f) => f.to_string(),
        Term::Atom(a) => a.clone(),
        Term::String(s) => format!("{s:?}"),
        Term::List(items) => format!(
            "[{}]",
            items.iter().map(written).collect::<Vec<_>>().join(", ")
        ),
        Term::Compound(f, args) => format!(
            "{f}({})",
            args.iter().map(written).collect::<Vec<_>>().join(", ")
        ),
        Term::Var(v) => v.clone(),
        other => format!("{other:?}"),
    }
}

/// The predicates that run a program's terms in order (asserting facts, calling goals)
/// and forget the asserted facts after the query, so the next block starts clean.
/// Written once per worker: every Prolog block loads them.
static PROGRAM_HELPERS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let functors: Vec<String> = prolog_program::GOAL_FUNCTORS
        .iter()
        .map(|f| quote_atom(f))
        .collect();
    format!(
        ":- dynamic('$weft_fact'/1).\n\
         weft_goal_functor(F) :- memberchk(F, [{}]).\n\
         weft_terms([]).\n\
         weft_terms([T|Ts]) :- weft_term(T), weft_terms(Ts).\n\
         weft_term(T) :- ( compound(T), functor(T, F, _), \\+ weft_goal_functor(F) -> assertz(T), assertz('$weft_fact'(T)) ; call(T) ).\n\
         weft_forget :- ( retract('$weft_fact'(F)), retract(F), fail ; true ).\n\
         {SWI_COMPAT}",
        functors.join(", ")
    )
});

/// SWI-Prolog builtins and declarations that The Edge Agent's programs use and scryer
/// lacks, and TEA's own `tea_load_code/1`.
const SWI_COMPAT: &str = include_str!("prolog_compat.pl");

/// Operators and predicates of CLP(FD), which SWI-Prolog (and so The Edge Agent) loads
/// on first use.
const CLPFD_WORDS: &[&str] = &[
    "#=",
    "#\\=",
    "#<",
    "#>",
    "#=<",
    "#>=",
    " ins ",
    "label(",
    "labeling(",
    "all_different(",
    "all_distinct(",
    "library(clpfd)",
];

/// Whether `source` uses CLP(FD): scryer serves it as `clpz`, loaded for such blocks
/// only (a worker keeps it loaded; blocks without constraints never pay for it).
fn uses_clpfd(source: &str) -> bool {
    CLPFD_WORDS.iter().any(|w| source.contains(w))
        || (source.contains(" in ") && source.contains(".."))
}

/// The interesting part of an error term: `error(Formal, Context)` -> `Formal`.
fn describe(t: &Term) -> String {
    match t {
        Term::Compound(f, args) if f == "error" && !args.is_empty() => written(&args[0]),
        other => written(other),
    }
}

impl Prolog {
    /// Starts a machine with output kept in memory (never on the worker's stdout).
    pub fn start() -> Prolog {
        Prolog {
            machine: MachineBuilder::new()
                .with_streams(StreamConfig::in_memory())
                .build(),
            broken: false,
            helpers_loaded: false,
        }
    }

    /// Whether the machine must be replaced before its next use: a program failed to
    /// load, after which scryer 0.10 panics on the next query (found by fuzzing).
    pub fn broken(&self) -> bool {
        self.broken
    }

    /// Runs the request's goal with its arguments as facts.
    pub fn run(&mut self, req: &Request) -> Result<Value, Failure> {
        if !self.helpers_loaded {
            // Once per machine: the helpers and the SWI-Prolog compatibility layer stay
            // loaded (they are most of the text a block would otherwise consult).
            self.machine
                .consult_module_string("weft_helpers", PROGRAM_HELPERS.as_str());
            self.helpers_loaded = true;
        }
        let block = block_program(req);
        // Empty the module first, so a program that fails to load never leaves the
        // previous block's code in place to run.
        self.machine
            .consult_module_string("weft_block", ":- dynamic(weft_loaded/0).\n");
        self.machine.consult_module_string("weft_block", block.text);
        // A block that redefines a helper replaced it for every later block: this
        // machine is not used again.
        if block.redefines_helpers {
            self.broken = true;
        }
        let loaded = matches!(
            self.machine.run_query("weft_loaded.").next(),
            Some(Ok(LeafAnswer::True | LeafAnswer::LeafAnswer { .. }))
        );
        if !loaded {
            self.broken = true;
            return Err(Failure::new(
                FailureKind::Code,
                "the Prolog code does not load (check its syntax: clauses and goals, each ending in a full stop)",
            ));
        }
        let steps = req.limits.time_ms.saturating_mul(INFERENCES_PER_MS);
        // The goal's own exceptions are caught here, inside the query: scryer 0.10 lets
        // some escape `call_with_inference_limit/3` badly (an unknown procedure spun
        // until the deadline; a type error came back as `[]`).
        let query = format!(
            "retractall('$weft_return'(_, _)), ( catch(call_with_inference_limit(weft_main, {steps}, WeftLimit), WeftError, true) -> WeftHeld = true ; WeftHeld = false ), findall(K-V, '$weft_return'(K, V), WeftResults), weft_forget, weft_clear."
        );
        // The goal's failure is a binding, not the query's: what the block asserted and
        // defined is forgotten whether its goal held or not.
        let first = self.machine.run_query(query).next();
        if let Some(Ok(LeafAnswer::LeafAnswer { bindings, .. })) = &first
            && matches!(bindings.get("WeftHeld"), Some(Term::Atom(a)) if a == "false")
        {
            return Err(Failure::new(FailureKind::Code, "the Prolog goal failed"));
        }
        if let Some(Ok(LeafAnswer::LeafAnswer { bindings, .. })) = &first
            && let Some(error) = bindings
                .get("WeftError")
                .filter(|e| !matches!(e, Term::Var(_)))
        {
            return Err(Failure::new(
                FailureKind::Code,
                format!("Prolog error: {}", describe(error)),
            ));
        }
        match first {
            Some(Ok(LeafAnswer::LeafAnswer { bindings, .. })) if matches!(bindings.get("WeftLimit"), Some(Term::Atom(a)) if a == "inference_limit_exceeded") => {
                Err(Failure::new(
                    FailureKind::Timeout,
                    format!(
                        "the Prolog code did not finish within its time limit of {} ms ({steps} inferences)",
                        req.limits.time_ms
                    ),
                ))
            }
            Some(Ok(LeafAnswer::LeafAnswer { mut bindings, .. })) => Ok(bindings
                .remove("WeftResults")
                .map(to_json)
                .map(|v| {
                    if v == Value::Array(Vec::new()) {
                        Value::Object(Map::new())
                    } else {
                        v
                    }
                })
                .unwrap_or(Value::Null)),
            Some(Ok(LeafAnswer::True)) => Ok(Value::Object(Map::new())),
            Some(Ok(LeafAnswer::False)) | None => {
                Err(Failure::new(FailureKind::Code, "the Prolog goal failed"))
            }
            Some(Ok(LeafAnswer::Exception(t))) | Some(Err(t)) => Err(Failure::new(
                FailureKind::Code,
                format!("Prolog error: {}", describe(&t)),
            )),
        }
    }
}
