% What The Edge Agent's Prolog programs use and scryer-prolog lacks, loaded before every
% Prolog block (crates/weft-code/src/prolog.rs). Strings are lists of characters here.

:- use_module(library(lists)).
:- use_module(library(charsio)).

% SWI-Prolog's prefix declarations: `:- dynamic parent/2, child/2.`
:- op(1150, fx, dynamic).
:- op(1150, fx, discontiguous).

% SWI-Prolog builtins.
is_list(L) :- nonvar(L), ( L == [] -> true ; L = [_|T], is_list(T) ).
downcase_atom(A, L) :- atom_chars(A, Cs), maplist(weft_lower, Cs, Ls), atom_chars(L, Ls).
upcase_atom(A, U) :- atom_chars(A, Cs), maplist(weft_upper, Cs, Us), atom_chars(U, Us).
weft_lower(C, L) :- char_code(C, X), ( X >= 65, X =< 90 -> Y is X + 32 ; Y = X ), char_code(L, Y).
weft_upper(C, U) :- char_code(C, X), ( X >= 97, X =< 122 -> Y is X - 32 ; Y = X ), char_code(U, Y).
atom_string(A, S) :- ( atom(A) -> atom_chars(A, S) ; number(A) -> number_chars(A, S) ; atom(S) -> A = S ; atom_chars(A, S) ).
% SWI-Prolog's dicts are read as lists of Key-Value pairs (prolog_program.rs), which is
% also how an object of the state arrives.
is_dict(D) :- is_list(D), maplist(weft_pair, D).
weft_pair(K-_) :- atom(K).
get_dict(K, D, V) :- is_dict(D), member(K-V, D).
put_dict(K, D, V, New) :- ( select(K-_, D, Rest) -> true ; Rest = D ), append(Rest, [K-V], New).
dict_pairs(D, _, Pairs) :- ( var(D) -> D = Pairs ; keysort(D, Pairs) ).
msort(L, S) :- weft_keyed(L, P), keysort(P, K), weft_keyed(S, K).
weft_keyed([], []).
weft_keyed([X|Xs], [X-x|Ps]) :- weft_keyed(Xs, Ps).

% TEA's tea_load_code(+Text): loads program text (a model's answer, say) as a node's
% source is loaded: directives run, rules and facts are added (and forgotten after the
% block, like the node's own facts), goals are called.
tea_load_code(Code) :-
    ( atom(Code) -> atom_chars(Code, Cs) ; Cs = Code ),
    weft_clause_texts(Cs, Texts),
    weft_load_texts(Texts).
weft_load_texts([]).
weft_load_texts([T|Ts]) :-
    read_term_from_chars(T, Term, []),
    weft_load_term(Term),
    weft_load_texts(Ts).
weft_load_term((:- B)) :- !, call(B).
weft_load_term((H :- B)) :- !, assertz((H :- B)), assertz('$weft_fact'((H :- B))).
weft_load_term(T) :- weft_term(T).

% weft_clause_texts(+Chars, -Clauses): Chars cut after each clause's full stop (a `.`
% followed by layout, `%` or the end, outside quotes and comments, and not part of a
% symbolic atom such as `=..`); scryer reads one term from a list of characters.
weft_clause_texts(Cs, Ts) :- weft_scan(Cs, [], Ts).
weft_scan([], Cur, Ts) :- ( weft_blank(Cur) -> Ts = [] ; reverse(Cur, T), Ts = [T] ).
weft_scan(['%'|Cs], Cur, Ts) :- !, weft_after_line(Cs, Rest), weft_scan(Rest, Cur, Ts).
weft_scan([Q|Cs], Cur, Ts) :-
    memberchk(Q, ['\'', '"', '`']), !,
    weft_quoted(Cs, Q, [Q|Cur], Cur1, Rest),
    weft_scan(Rest, Cur1, Ts).
weft_scan(['.'|Cs], Cur, Ts) :-
    weft_clause_end(Cs),
    \+ ( Cur = [P|_], weft_symbol_char(P) ), !,
    reverse(['.'|Cur], T),
    Ts = [T|Ts1],
    weft_scan(Cs, [], Ts1).
weft_scan([C|Cs], Cur, Ts) :- weft_scan(Cs, [C|Cur], Ts).
weft_clause_end([]).
weft_clause_end([C|_]) :- ( C == '%' -> true ; char_code(C, X), X =< 32 ).
weft_after_line([], []).
weft_after_line(['\n'|Cs], Cs) :- !.
weft_after_line([_|Cs], R) :- weft_after_line(Cs, R).
weft_quoted([], _, Cur, Cur, []).
weft_quoted(['\\', C|Cs], Q, Cur, Out, R) :- !, weft_quoted(Cs, Q, [C, '\\'|Cur], Out, R).
weft_quoted([Q|Cs], Q, Cur, [Q|Cur], Cs) :- !.
weft_quoted([C|Cs], Q, Cur, Out, R) :- weft_quoted(Cs, Q, [C|Cur], Out, R).
weft_symbol_char(C) :- memberchk(C, ['#', '$', '&', '*', '+', '-', '.', '/', ':', '<', '=', '>', '?', '@', '^', '~', '\\']).
weft_blank(Cs) :- \+ ( member(C, Cs), char_code(C, X), X > 32 ).
