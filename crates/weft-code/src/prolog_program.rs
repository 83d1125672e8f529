//! A Prolog node's source as The Edge Agent reads it: a program, term after term.
//! Directives (`:- use_module(...)`) and rules (`Head :- Body`) are definitions,
//! consulted before anything runs; every other term, in order, is either a fact (its
//! functor is not a goal's, so it is asserted, as TEA asserts `parent(alice, bob).`)
//! or a goal that is called (`state(x, X), Y is X + 1, return(y, Y).`). A source of
//! one goal and nothing else is still run as that goal.

/// The source split into definitions and the terms after them, each without its end.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Program {
    pub definitions: Vec<String>,
    pub terms: Vec<String>,
}

/// Characters that make up symbolic atoms and operators (`=..`, `:-`, `#=`): a `.`
/// among them is part of the operator, not the end of a clause.
fn is_symbol_char(c: char) -> bool {
    "#$&*+-./:<=>?@^~\\".contains(c)
}

/// Splits `source` into its clauses (each without its final `.`), outside quotes and
/// comments; a clause ends at a `.` followed by layout, `%` or the end of the text.
pub(crate) fn clauses(source: &str) -> Vec<String> {
    let chars: Vec<char> = source.chars().collect();
    let mut out = Vec::new();
    let mut current = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '%' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '/' if chars.get(i + 1) == Some(&'*') => {
                i += 2;
                while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                    i += 1;
                }
                i += 2;
                continue;
            }
            '\'' if char_code_quote(&chars, i) => {
                // `0'c`: a character code; `0'\n` and `0''` take one more.
                current.push(c);
                if let Some(&next) = chars.get(i + 1) {
                    current.push(next);
                    i += 1;
                    if (next == '\\' || next == '\'')
                        && let Some(&after) = chars.get(i + 1)
                    {
                        current.push(after);
                        i += 1;
                    }
                }
            }
            '\'' | '"' | '`' => {
                current.push(c);
                i += 1;
                while i < chars.len() {
                    current.push(chars[i]);
                    if chars[i] == '\\' && i + 1 < chars.len() {
                        current.push(chars[i + 1]);
                        i += 2;
                        continue;
                    }
                    if chars[i] == c {
                        break;
                    }
                    i += 1;
                }
            }
            '.' => {
                let before = i.checked_sub(1).map(|p| chars[p]);
                let after = chars.get(i + 1).copied();
                let ends = after.is_none_or(|a| a.is_whitespace() || a == '%')
                    && !before.is_some_and(is_symbol_char);
                if ends {
                    let clause = current.trim().to_owned();
                    if !clause.is_empty() {
                        out.push(clause);
                    }
                    current.clear();
                } else {
                    current.push(c);
                }
            }
            _ => current.push(c),
        }
        i += 1;
    }
    let rest = current.trim();
    if !rest.is_empty() {
        out.push(rest.to_owned());
    }
    out
}

/// Whether `clause` has `:-` at its top level (outside brackets and quotes).
fn is_rule(clause: &str) -> bool {
    let chars: Vec<char> = clause.chars().collect();
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    for (i, &c) in chars.iter().enumerate() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '\'' | '"' | '`' => quote = Some(c),
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' => depth -= 1,
                ':' if depth == 0
                    && chars.get(i + 1) == Some(&'-')
                    && !chars.get(i + 2).is_some_and(|&n| is_symbol_char(n))
                    && !i.checked_sub(1).is_some_and(|p| is_symbol_char(chars[p])) =>
                {
                    return true;
                }
                _ => {}
            },
        }
    }
    false
}

/// `name/arity` of a rule's head (`add(X, Y) :- ...` is `add/2`), when the head is a
/// plain name.
pub(crate) fn head_indicator(rule: &str) -> Option<String> {
    let head = rule.split(":-").next()?.trim();
    let (name, args) = match head.split_once('(') {
        Some((name, rest)) => (name.trim(), Some(rest.strip_suffix(')')?)),
        None => (head, None),
    };
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !plain {
        return None;
    }
    let arity = args.map_or(0, |a| {
        let mut depth = 0i32;
        let mut quote: Option<char> = None;
        let mut commas = 0;
        for c in a.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '\'' | '"' | '`') => quote = Some(c),
                (None, '(' | '[' | '{') => depth += 1,
                (None, ')' | ']' | '}') => depth -= 1,
                (None, ',') if depth == 0 => commas += 1,
                _ => {}
            }
        }
        commas + 1
    });
    Some(format!("{name}/{arity}"))
}

/// `name/arity` of each predicate the rules among `definitions` define, once each.
pub(crate) fn defined_predicates(definitions: &[String]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    definitions
        .iter()
        .filter_map(|d| head_indicator(d))
        .filter(|i| seen.insert(i.clone()))
        .collect()
}

/// `:- dynamic(Name/Arity).` for each of `predicates`: TEA asserts a program's rules,
/// so a program may change them with `assertz` and `retract` as it runs.
pub(crate) fn dynamic_declarations(predicates: &[String]) -> String {
    predicates
        .iter()
        .map(|p| format!(":- dynamic({p}).\n"))
        .collect()
}

/// Reads `source` as a program.
pub(crate) fn program(source: &str) -> Program {
    let mut p = Program::default();
    for clause in clauses(source) {
        if clause.starts_with(":-") || is_rule(&clause) {
            p.definitions.push(clause);
        } else {
            let term = clause.strip_prefix("?-").map_or(clause.as_str(), str::trim);
            p.terms.push(term.to_owned());
        }
    }
    p
}

/// Whether the quote at `i` follows `0` as in `0'c` (a character code), not a name
/// ending in 0.
fn char_code_quote(chars: &[char], i: usize) -> bool {
    i > 0
        && chars[i - 1] == '0'
        && !i
            .checked_sub(2)
            .is_some_and(|p| chars[p].is_alphanumeric() || chars[p] == '_')
}

/// An open bracket while [`swi_syntax`] reads: an SWI-Prolog dict (with whether
/// one of its values is open) or any other bracket.
enum Open {
    Dict { value_open: bool },
    Other,
}

/// `source` in the syntax scryer reads where SWI-Prolog's differs: anonymous dicts are
/// lists of `Key-(Value)` pairs, which come back as JSON objects (`_{a: 1, b: _{c: x}}`
/// is `[a-(1), b-([c-(x)])]`), and a line break inside a quoted item is written `\n`
/// (SWI reads multi-line strings; ISO Prolog does not). Comments are copied as they are.
pub(crate) fn swi_syntax(source: &str) -> String {
    if !source.contains("_{")
        && !source.contains('\n')
        && !SWI_TEXT_BUILTINS.iter().any(|b| source.contains(b))
    {
        return source.to_owned();
    }
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut stack: Vec<Open> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let word_before = i
            .checked_sub(1)
            .is_some_and(|p| chars[p].is_alphanumeric() || chars[p] == '_');
        match c {
            '%' => {
                while i < chars.len() && chars[i] != '\n' {
                    out.push(chars[i]);
                    i += 1;
                }
                continue;
            }
            '\'' if char_code_quote(&chars, i) => {
                // `0'c`: the quote and the character (two for `0'\n`, `0''`) as written.
                out.push(c);
                let take = if matches!(chars.get(i + 1), Some('\\' | '\'')) {
                    2
                } else {
                    1
                };
                for k in 1..=take {
                    if let Some(&n) = chars.get(i + k) {
                        out.push(n);
                    }
                }
                i += take;
            }
            '\'' | '"' | '`' => {
                out.push(c);
                i += 1;
                while i < chars.len() {
                    if chars[i] == '\n' {
                        out.push_str("\\n");
                        i += 1;
                        continue;
                    }
                    out.push(chars[i]);
                    if chars[i] == '\\' && i + 1 < chars.len() {
                        out.push(chars[i + 1]);
                        i += 2;
                        continue;
                    }
                    if chars[i] == c {
                        break;
                    }
                    i += 1;
                }
            }
            c if c.is_ascii_lowercase() && !word_before => {
                let end = (i..chars.len())
                    .find(|&k| !(chars[k].is_alphanumeric() || chars[k] == '_'))
                    .unwrap_or(chars.len());
                let word: String = chars[i..end].iter().collect();
                if chars.get(end) == Some(&'(') && SWI_TEXT_BUILTINS.contains(&word.as_str()) {
                    out.push_str("weft_");
                }
                out.push_str(&word);
                i = end;
                continue;
            }
            '_' if chars.get(i + 1) == Some(&'{') && !word_before => {
                stack.push(Open::Dict { value_open: false });
                out.push('[');
                i += 1;
            }
            '(' | '[' | '{' => {
                stack.push(Open::Other);
                out.push(c);
            }
            ')' | ']' | '}' => match stack.pop() {
                Some(Open::Dict { value_open }) => {
                    if value_open {
                        out.push(')');
                    }
                    out.push(']');
                }
                _ => out.push(c),
            },
            ':' if matches!(stack.last(), Some(Open::Dict { value_open: false })) => {
                stack.pop();
                stack.push(Open::Dict { value_open: true });
                out.push_str("-(");
            }
            ',' if matches!(stack.last(), Some(Open::Dict { value_open: true })) => {
                stack.pop();
                stack.push(Open::Dict { value_open: false });
                out.push_str("),");
            }
            _ => out.push(c),
        }
        i += 1;
    }
    out
}

/// Builtins that SWI-Prolog extends (text arguments that may be strings, `format/3`
/// writing to `atom(A)`): their calls are renamed to `weft_NAME`, defined in
/// prolog_compat.pl (scryer does not let a program redefine a builtin).
const SWI_TEXT_BUILTINS: &[&str] = &["sub_atom", "atom_length", "atom_concat", "format"];

/// The functors whose terms are goals to call, never facts to assert: control
/// constructs, the block's own predicates and the builtins TEA's programs use.
pub(crate) const GOAL_FUNCTORS: &[&str] = &[
    ",",
    ";",
    "->",
    "*->",
    "\\+",
    "state",
    "return",
    "variables",
    "secrets",
    "is",
    "=",
    "\\=",
    "==",
    "\\==",
    "<",
    ">",
    "=<",
    ">=",
    "=:=",
    "=\\=",
    "@<",
    "@>",
    "@=<",
    "@>=",
    "findall",
    "bagof",
    "setof",
    "forall",
    "member",
    "memberchk",
    "append",
    "length",
    "nth0",
    "nth1",
    "msort",
    "sort",
    "predsort",
    "reverse",
    "last",
    "sum_list",
    "sumlist",
    "max_list",
    "min_list",
    "max_member",
    "min_member",
    "exclude",
    "include",
    "maplist",
    "foldl",
    "call",
    "once",
    "ignore",
    "catch",
    "throw",
    "format",
    "write",
    "writeln",
    "print",
    "nl",
    "atom",
    "number",
    "integer",
    "float",
    "compound",
    "is_list",
    "ground",
    "var",
    "nonvar",
    "atomic",
    "callable",
    "atom_string",
    "atom_codes",
    "atom_chars",
    "atom_length",
    "atom_concat",
    "sub_atom",
    "weft_sub_atom",
    "weft_atom_length",
    "weft_atom_concat",
    "weft_format",
    "sub_string",
    "string_concat",
    "string_chars",
    "string_codes",
    "string_to_atom",
    "string_length",
    "string_lower",
    "string_upper",
    "split_string",
    "number_string",
    "term_string",
    "aggregate_all",
    "partition",
    "subtract",
    "delete",
    "nb_setval",
    "nb_getval",
    "b_setval",
    "b_getval",
    "atom_number",
    "number_codes",
    "atomic_list_concat",
    "upcase_atom",
    "downcase_atom",
    "tea_load_code",
    "char_code",
    "term_to_atom",
    "succ",
    "plus",
    "between",
    "numlist",
    "copy_term",
    "functor",
    "arg",
    "=..",
    "keysort",
    "pairs_keys_values",
    "pairs_keys",
    "pairs_values",
    "list_to_assoc",
    "get_assoc",
    "put_assoc",
    "assertz",
    "asserta",
    "assert",
    "retract",
    "retractall",
    "tab",
    "label",
    "labeling",
    "#=",
    "#\\=",
    "#<",
    "#>",
    "#=<",
    "#>=",
    "in",
    "ins",
    "all_different",
    "all_distinct",
    "sum",
    "tuples_in",
    "true",
    "fail",
    "false",
    "!",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_splits_into_definitions_and_terms() {
        let src = ":- use_module(library(clpfd)).\n% a comment. with a dot\nadd_ten(X, Y) :- Y is X + 10.\nparent(alice, bob).\n/* block. comment */\nstate(value, V), add_ten(V, R), L = [1.5, 'a. b', \"c. d\", 0'.], T =.. [f, x],\nX in 1..3, return(result, R).";
        let p = program(src);
        assert_eq!(
            p.definitions,
            [
                ":- use_module(library(clpfd))",
                "add_ten(X, Y) :- Y is X + 10"
            ]
        );
        assert_eq!(p.terms.len(), 2, "{:?}", p.terms);
        assert_eq!(p.terms[0], "parent(alice, bob)");
        assert!(
            p.terms[1].starts_with("state(value, V)") && p.terms[1].ends_with("return(result, R)")
        );
        assert!(p.terms[1].contains("0'.") && p.terms[1].contains("'a. b'"));
    }

    #[test]
    fn swi_dicts_become_pair_lists() {
        assert_eq!(
            swi_syntax("return(d, _{a: 1 + 2, b: _{c: 'x: y'}, l: [_{}, f(p, q)]}). % _{x: 1}"),
            "return(d, [a-( 1 + 2), b-( [c-( 'x: y')]), l-( [[], f(p, q)])]). % _{x: 1}"
        );
        assert_eq!(swi_syntax("X = my_{a: 1}"), "X = my_{a: 1}");
    }

    #[test]
    fn swi_text_builtins_are_renamed_outside_quotes_and_comments() {
        assert_eq!(
            swi_syntax(
                "sub_atom(Q, _, _, _, S), my_sub_atom(x), 'sub_atom(', atom_length(S, L). % atom_concat(a)"
            ),
            "weft_sub_atom(Q, _, _, _, S), my_sub_atom(x), 'sub_atom(', weft_atom_length(S, L). % atom_concat(a)"
        );
        assert_eq!(swi_syntax("X = sub_atom"), "X = sub_atom", "not a call");
    }

    #[test]
    fn a_rule_s_head_names_its_predicate() {
        assert_eq!(
            head_indicator("add(X, f(Y, Z), 'a,b') :- true").as_deref(),
            Some("add/3")
        );
        assert_eq!(head_indicator("go :- true").as_deref(), Some("go/0"));
        assert_eq!(head_indicator("X = Y :- true"), None);
    }

    #[test]
    fn line_breaks_in_quoted_items_are_escaped() {
        assert_eq!(
            swi_syntax("C = 0'., D = 0''', E = 'x\ny'"),
            "C = 0'., D = 0''', E = 'x\\ny'"
        );
        assert_eq!(
            swi_syntax("tea_load_code(\"\n  a(1).\n\"),\nX = 'p\nq'. % it's\n"),
            "tea_load_code(\"\\n  a(1).\\n\"),\nX = 'p\\nq'. % it's\n"
        );
    }

    #[test]
    fn one_goal_without_a_final_stop_is_one_term() {
        assert_eq!(
            program("state(x, X), return(y, X)").terms,
            ["state(x, X), return(y, X)"]
        );
        assert!(!is_rule("X = ':-'"));
        assert!(is_rule("a :- b"));
        assert!(!is_rule("f((a :- b))"));
    }
}
