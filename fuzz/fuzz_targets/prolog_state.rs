//! Prolog builtins applied to state values made from the fuzzer's bytes: text of any
//! content, numbers, lists and objects. Every run must answer or fail with a Prolog
//! error; an abort, a crash or a hang is a finding. (The sandbox test
//! `prolog_builtins_on_state_values_answer_or_fail_at_once` runs a fixed table of the
//! same in CI.)
#![no_main]

#[path = "shared/prolog.rs"]
mod shared;

use serde_json::{Value, json};
use weft_code::protocol::Request;
use weft_core::ir::CodeLimits;

const GOALS: &[&str] = &[
    "atom_length(V, L), return(r, L)",
    "string_length(V, L), return(r, L)",
    "length(V, L), return(r, L)",
    "atom_codes(V, C), return(r, C)",
    "atom_chars(V, C), return(r, C)",
    "number_codes(N, V), return(r, N)",
    "atom_number(V, N), return(r, N)",
    "sub_atom(V, B, 2, A, S), return(r, [B, A, S])",
    "upcase_atom(V, U), return(r, U)",
    "X is V * 2 + 1, return(r, X)",
    "msort(V, X), return(r, X)",
    "V =.. L, return(r, L)",
    "nth0(1, V, X), return(r, X)",
    "sum_list(V, X), return(r, X)",
    "char_code(V, C), return(r, C)",
    "atom_concat(V, V, X), return(r, X)",
    "format(atom(A), \"~w ~q ~a\", [V, V, V]), return(r, A)",
    "term_to_atom(V, A), return(r, A)",
    "read_term_from_atom(V, T, []), return(r, T)",
    "atom_to_term(V, T, B), return(r, [T, B])",
    "number_chars(N, V), return(r, N)",
    "succ_or_zero(V)",
];

/// A state value from `text`, shaped by `shape`.
fn value(shape: u8, text: &str) -> Value {
    match shape % 7 {
        0 => Value::String(text.to_owned()),
        1 => text.parse::<i64>().map_or(json!(text.len()), Value::from),
        2 => text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Null, Value::Number),
        3 => json!([text, text.len(), [text]]),
        4 => json!({"k": text, "n": text.chars().count()}),
        5 => Value::Array(text.chars().map(|c| Value::String(c.to_string())).collect()),
        _ => json!(text.bytes().map(i64::from).collect::<Vec<_>>()),
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let [goal, shape, rest @ ..] = data else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let source = format!("state(s, V), {}.", GOALS[*goal as usize % GOALS.len()]);
    let req = Request {
        id: 1,
        language: "prolog".into(),
        source,
        entry: None,
        args: json!({"state": {"s": value(*shape, &text)}}),
        imports: None,
        builtins: None,
        limits: CodeLimits {
            time_ms: 100,
            memory_bytes: 16 << 20,
            max_depth: 100,
            output_bytes: 1 << 16,
        },
    };
    shared::run(&req);
});
