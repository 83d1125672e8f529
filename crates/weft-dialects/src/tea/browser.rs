//! The actions of TEA's browser (WebAssembly) runtime that run code, which TEA hands to
//! a JavaScript interpreter the page registers: `lua.eval` (Lua with `state` as a
//! global; the result is what the code returns) and `prolog.query` (a program, then a
//! `?- Goal.` whose answers are the result: `{bindings: [{Var: Value}...], success}`).
//! Weft runs both in its own sandboxes. TEA renders templates into the code before it
//! runs it: `prolog.query` does too (its program is read from text at run time, as
//! `tea_load_code/1` reads one); a template in `lua.eval`'s code fails the node when
//! reached, as Weft runs Lua as written.

use super::Compiler;
use serde_json::{Value, json};
use weft_core::ir::{Block, BlockKind, CodeLimits, CodeSpec, ValueTemplate};

/// The browser runtime's code actions.
pub(super) const BROWSER: &[&str] = &["lua.eval", "prolog.query"];

/// Reads the program text given as `prolog(code, Text)`: each clause loaded as
/// `tea_load_code/1` loads one, and the last `?- Goal.` kept; then every answer of the
/// goal as an object of its named variables. (The last term, a conjunction, is the
/// block's goal.)
const PROLOG_QUERY: &str = r#"
weft_pq_load([], Q, Q).
weft_pq_load([T|Ts], Q0, Q) :-
    read_term_from_chars(T, Term, [variable_names(Vs)]),
    (   Term = (?- G) -> weft_pq_load(Ts, query(G, Vs), Q)
    ;   weft_load_term(Term), weft_pq_load(Ts, Q0, Q)
    ).
weft_pq_object([], []).
weft_pq_object([N=V|Vs], [N-W|Ps]) :-
    ( var(V) -> W = '_' ; W = V ),
    weft_pq_object(Vs, Ps).
weft_pq_answers(none, [], true).
weft_pq_answers(query(G, Vs), Objects, Success) :-
    findall(Vs, call(G), Answers),
    maplist(weft_pq_object, Answers, Objects),
    ( Answers == [] -> Success = false ; Success = true ).
weft_pq_run :-
    prolog(code, Code),
    ( atom(Code) -> atom_chars(Code, Cs) ; Cs = Code ),
    weft_clause_texts(Cs, Texts),
    weft_pq_load(Texts, none, Query),
    weft_pq_answers(Query, Objects, Success),
    return(bindings, Objects),
    return(success, Success).
true, weft_pq_run.
"#;

impl Compiler<'_> {
    /// The block of `uses: lua.eval` or `prolog.query` with `with`, at `ptr`.
    pub(super) fn browser_code(
        &mut self,
        uses: &str,
        with: Option<&Value>,
        ptr: &str,
        node: &str,
    ) -> Option<Block> {
        let wptr = format!("{ptr}/with");
        let with = self.with_options(
            uses,
            with,
            &wptr,
            ("its `code`", "with: {code: \"return {n = 1}\"}"),
            &["code"],
        )?;
        let code = self.required_text(uses, with, ("code", "a string", None), &wptr)?;
        let spec = if uses == "lua.eval" {
            let hint = "read the value from `state` in the code instead";
            if let Some(refusal) = self.templated_code(uses, code, "Lua", hint, (ptr, node)) {
                return Some(refusal);
            }
            CodeSpec {
                language: "lua".into(),
                source: code.to_owned(),
                origin: self.code_origin(&wptr, 1),
                entry: None,
                args: Some(ValueTemplate(json!({"state": "{{ state }}"}))),
                imports: None,
                builtins: None,
                limits: CodeLimits::default(),
            }
        } else {
            CodeSpec {
                language: "prolog".into(),
                source: PROLOG_QUERY.to_owned(),
                origin: None,
                entry: None,
                args: Some(ValueTemplate(json!({"prolog": {"code": code}}))),
                imports: None,
                builtins: None,
                limits: CodeLimits::default(),
            }
        };
        Some(Block::new(BlockKind::Code(spec)))
    }
}
