% What The Edge Agent's Prolog programs use and scryer-prolog lacks, loaded before every
% Prolog block (crates/weft-code/src/prolog.rs). Strings are lists of characters here.

:- use_module(library(lists)).
:- use_module(library(charsio)).
:- use_module(library(pairs)).
:- use_module(library(assoc)).
:- use_module(library(format)).

% SWI-Prolog's prefix declarations: `:- dynamic parent/2, child/2.`
:- op(1150, fx, dynamic).
:- op(1150, fx, discontiguous).

% SWI-Prolog builtins.
is_list(L) :- nonvar(L), ( L == [] -> true ; L = [_|T], is_list(T) ).
downcase_atom(A, L) :- weft_text_chars(A, Cs), maplist(weft_lower, Cs, Ls), atom_chars(L, Ls).
upcase_atom(A, U) :- weft_text_chars(A, Cs), maplist(weft_upper, Cs, Us), atom_chars(U, Us).
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

% SWI-Prolog's text: an atom, a number, or a string (here a list of characters, or of
% codes) is accepted wherever SWI takes text. Calls of the ISO builtins that SWI extends
% so (sub_atom/5, atom_length/2, atom_concat/3) are renamed to these in a block's source
% (prolog_program.rs), since scryer does not let a program redefine a builtin.
weft_text_chars(T, Cs) :-
    (   atom(T) -> atom_chars(T, Cs)
    ;   number(T) -> number_chars(T, Cs)
    ;   T == [] -> Cs = []
    ;   is_list(T), T = [C|_], integer(C) -> maplist(char_code_, T, Cs)
    ;   is_list(T) -> Cs = T
    ;   throw(error(type_error(text, T), _))
    ).
char_code_(Code, Char) :- char_code(Char, Code).
weft_text_atom(T, A) :- ( var(T) -> A = T ; weft_text_chars(T, Cs), atom_chars(A, Cs) ).
weft_sub_atom(T, B, L, A, Sub) :-
    weft_text_atom(T, T1), weft_text_atom(Sub, Sub1), sub_atom(T1, B, L, A, Sub1).
weft_atom_length(T, L) :- weft_text_chars(T, Cs), length(Cs, L).
weft_atom_concat(A, B, C) :-
    weft_text_atom(A, A1), weft_text_atom(B, B1), weft_text_atom(C, C1),
    atom_concat(A1, B1, C1).
% format/1 (SWI's, no arguments) and format/2 as they are; format/3 also to SWI's sinks atom(A), string(S), chars(Cs), codes(Cs).
weft_format(F) :- format(F, []).
weft_format(F, Args) :- format(F, Args).
weft_format(Sink, F, Args) :-
    (   nonvar(Sink), weft_sink(Sink, Cs, Out)
    ->  weft_text_chars(F, Fs), phrase(format_(Fs, Args), Cs), Out
    ;   format(Sink, F, Args)
    ).
weft_sink(atom(A), Cs, atom_chars(A, Cs)).
weft_sink(string(S), Cs, S = Cs).
weft_sink(chars(S), Cs, S = Cs).
weft_sink(codes(S), Cs, maplist(char_code, Cs, S)).

% SWI-Prolog's strings (lists of characters here).
string(S) :- is_list(S), S \== [], maplist(weft_is_char, S).
weft_is_char(C) :- atom(C), atom_length(C, 1).
string_chars(S, Cs) :- ( var(S) -> S = Cs ; weft_text_chars(S, Cs) ).
string_codes(S, Codes) :-
    ( var(S) -> maplist(char_code_, Codes, S) ; weft_text_chars(S, Cs), maplist(char_code, Cs, Codes) ).
string_to_atom(S, A) :- ( var(S) -> atom_chars(A, S) ; weft_text_atom(S, A) ).
string_length(S, L) :- weft_text_chars(S, Cs), length(Cs, L).
string_concat(A, B, C) :-
    (   nonvar(A), nonvar(B) -> weft_text_chars(A, As), weft_text_chars(B, Bs), append(As, Bs, C)
    ;   weft_text_chars(C, Cs), append(As, Bs, Cs), A = As, B = Bs
    ).
string_lower(S, L) :- weft_text_chars(S, Cs), maplist(weft_lower, Cs, L).
string_upper(S, U) :- weft_text_chars(S, Cs), maplist(weft_upper, Cs, U).
string_code(I, S, C) :- weft_text_chars(S, Cs), nth1(I, Cs, Ch), char_code(Ch, C).
number_string(N, S) :- ( var(N) -> weft_text_chars(S, Cs), weft_trim(Cs, T), number_chars(N, T) ; number_chars(N, S) ).
term_string(T, S) :- ( var(T) -> weft_read_text(S, T, []) ; write_term_to_chars(T, [quoted(true)], S) ).
term_to_atom(T, A) :- ( var(T) -> weft_read_text(A, T, []) ; write_term_to_chars(T, [quoted(true)], Cs), atom_chars(A, Cs) ).
% A term read from text, which SWI takes with or without its final full stop.
weft_read_text(Text, T, Options) :-
    weft_text_chars(Text, Cs0), weft_trim(Cs0, Cs1),
    ( append(_, ['.'], Cs1) -> Cs = Cs1 ; append(Cs1, [' ', '.'], Cs) ),
    read_term_from_chars(Cs, T, Options).
sub_string(S, B, L, A, Sub) :-
    weft_text_atom(S, S1), weft_text_atom(Sub, Sub1), sub_atom(S1, B, L, A, Sub2),
    ( var(Sub) -> atom_chars(Sub2, Sub) ; Sub1 = Sub2 ).
% split_string(+Text, +SepChars, +PadChars, -Parts): SWI's, with strings as char lists.
split_string(S, Seps, Pad, Parts) :-
    weft_text_chars(S, Cs), weft_text_chars(Seps, SepCs), weft_text_chars(Pad, PadCs),
    weft_split(Cs, SepCs, Fields),
    maplist(weft_strip(PadCs), Fields, Parts).
weft_split(Cs, Seps, [F|Fs]) :-
    (   append(F, [C|Rest], Cs), memberchk(C, Seps) -> weft_split(Rest, Seps, Fs)
    ;   F = Cs, Fs = []
    ).
weft_strip(Pad, Cs, Out) :-
    weft_drop(Pad, Cs, Cs1), reverse(Cs1, R), weft_drop(Pad, R, R1), reverse(R1, Out).
weft_drop(Pad, [C|Cs], Out) :- memberchk(C, Pad), !, weft_drop(Pad, Cs, Out).
weft_drop(_, Cs, Cs).
weft_trim(Cs, T) :- weft_strip([' ', '\t', '\n', '\r'], Cs, T).
atomic_list_concat(L, A) :- maplist(weft_text_chars, L, Css), append(Css, Cs), atom_chars(A, Cs).
atomic_list_concat(L, Sep, A) :-
    (   ground(L) -> weft_text_chars(Sep, SepCs), maplist(weft_text_chars, L, Css),
        weft_join(Css, SepCs, Cs), atom_chars(A, Cs)
    ;   weft_text_chars(Sep, SepCs), SepCs \== [], weft_text_chars(A, Cs),
        weft_split_on(Cs, SepCs, Parts), maplist(weft_chars_atom, Parts, L)
    ).
weft_chars_atom(Cs, A) :- atom_chars(A, Cs).
weft_join([], _, []).
weft_join([C], _, C) :- !.
weft_join([C|Cs], Sep, Out) :- weft_join(Cs, Sep, Rest), append(C, Sep, C1), append(C1, Rest, Out).
weft_split_on(Cs, Sep, [P|Ps]) :-
    (   append(P, Rest0, Cs), append(Sep, Rest, Rest0) -> weft_split_on(Rest, Sep, Ps)
    ;   P = Cs, Ps = []
    ).
atom_number(A, N) :- atom(A), weft_text_chars(A, Cs), catch(number_chars(N, Cs), _, fail).
atom_to_term(A, T, Bindings) :-
    weft_read_text(A, T, [variable_names(Bindings)]).

% SWI-Prolog's list and control predicates.
last([X], X) :- !.
last([_|T], X) :- last(T, X).
max_list(L, M) :- list_max(L, M).
min_list(L, M) :- list_min(L, M).
sumlist(L, S) :- sum_list(L, S).
max_member(M, L) :- weft_extreme(L, @>, M).
min_member(M, L) :- weft_extreme(L, @<, M).
weft_extreme([X|Xs], Order, M) :- foldl(weft_pick(Order), Xs, X, M).
weft_pick(Order, X, M0, M) :- ( call(Order, X, M0) -> M = X ; M = M0 ).
include(_, [], []).
include(G, [X|Xs], Out) :- ( call(G, X) -> Out = [X|Out1] ; Out = Out1 ), include(G, Xs, Out1).
exclude(_, [], []).
exclude(G, [X|Xs], Out) :- ( call(G, X) -> Out = Out1 ; Out = [X|Out1] ), exclude(G, Xs, Out1).
partition(_, [], [], []).
partition(G, [X|Xs], I, E) :-
    ( call(G, X) -> I = [X|I1], E = E1 ; I = I1, E = [X|E1] ), partition(G, Xs, I1, E1).
subtract([], _, []).
subtract([X|Xs], L, R) :- ( memberchk(X, L) -> R = R1 ; R = [X|R1] ), subtract(Xs, L, R1).
delete([], _, []).
delete([X|Xs], Y, R) :- ( X \= Y -> R = [X|R1] ; R = R1 ), delete(Xs, Y, R1).
predsort(P, L, Sorted) :- length(L, N), ( N < 2 -> Sorted = L ; weft_predsort(P, N, L, _, Sorted) ).
weft_predsort(P, 2, [X1, X2|L], L, R) :- !, call(P, Delta, X1, X2), weft_sort2(Delta, X1, X2, R).
weft_predsort(_, 1, [X|L], L, [X]) :- !.
weft_predsort(_, 0, L, L, []) :- !.
weft_predsort(P, N, L1, L3, R) :-
    N1 is N // 2, plus(N1, N2, N),
    weft_predsort(P, N1, L1, L2, R1), weft_predsort(P, N2, L2, L3, R2),
    weft_predmerge(P, R1, R2, R).
weft_sort2(<, X1, X2, [X1, X2]).
weft_sort2(=, X1, _, [X1]).
weft_sort2(>, X1, X2, [X2, X1]).
weft_predmerge(_, [], R, R) :- !.
weft_predmerge(_, R, [], R) :- !.
weft_predmerge(P, [H1|T1], [H2|T2], Result) :-
    call(P, Delta, H1, H2), !, weft_predmerge_(Delta, P, H1, H2, T1, T2, Result).
weft_predmerge_(<, P, H1, H2, T1, T2, [H1|R]) :- weft_predmerge(P, T1, [H2|T2], R).
weft_predmerge_(=, P, H1, _, T1, T2, [H1|R]) :- weft_predmerge(P, T1, T2, R).
weft_predmerge_(>, P, H1, H2, T1, T2, [H2|R]) :- weft_predmerge(P, [H1|T1], T2, R).
plus(X, Y, Z) :- ( integer(X), integer(Y) -> Z is X + Y ; integer(X), integer(Z) -> Y is Z - X ; X is Z - Y ).
ignore(G) :- ( call(G) -> true ; true ).
writeln(X) :- write(X), nl.
print(X) :- write_term(X, [portray(true), numbervars(true), quoted(true)]).
tab(N) :- N1 is N, ( N1 > 0 -> put_char(' '), N2 is N1 - 1, tab(N2) ; true ).
nb_setval(K, V) :- bb_put(K, V).
b_setval(K, V) :- bb_put(K, V).
nb_getval(K, V) :- bb_get(K, V).
b_getval(K, V) :- bb_get(K, V).
% aggregate_all/3 of SWI's library(aggregate): count, sum, max, min, bag and set.
aggregate_all(count, G, C) :- !, findall(x, G, L), length(L, C).
aggregate_all(sum(E), G, S) :- !, findall(E, G, L), foldl(weft_add, L, 0, S).
aggregate_all(max(E), G, M) :- !, findall(E, G, L), L \== [], list_max(L, M).
aggregate_all(min(E), G, M) :- !, findall(E, G, L), L \== [], list_min(L, M).
aggregate_all(bag(E), G, L) :- !, findall(E, G, L).
aggregate_all(set(E), G, S) :- !, findall(E, G, L), sort(L, S).
weft_add(X, S0, S) :- S is S0 + X.

% SWI-Prolog's yall lambdas: `[X,Y]>>Goal` and `Free/[X]>>Goal`, copied before each call
% (but for the free variables), parameters bound in order, further arguments appended.
'>>'(Ps, B) :- weft_yall(Ps, B, []).
'>>'(Ps, B, A1) :- weft_yall(Ps, B, [A1]).
'>>'(Ps, B, A1, A2) :- weft_yall(Ps, B, [A1, A2]).
'>>'(Ps, B, A1, A2, A3) :- weft_yall(Ps, B, [A1, A2, A3]).
'>>'(Ps, B, A1, A2, A3, A4) :- weft_yall(Ps, B, [A1, A2, A3, A4]).
'>>'(Ps, B, A1, A2, A3, A4, A5) :- weft_yall(Ps, B, [A1, A2, A3, A4, A5]).
'>>'(Ps, B, A1, A2, A3, A4, A5, A6) :- weft_yall(Ps, B, [A1, A2, A3, A4, A5, A6]).
weft_yall(Ps0, B0, Args) :-
    (   nonvar(Ps0), Ps0 = Free/Params0
    ->  copy_term(Free/Params0>>B0, Free1/Params>>B), Free1 = Free
    ;   copy_term(Ps0>>B0, Params>>B)
    ),
    weft_bind(Params, Args, Rest),
    (   Rest == [] -> call(B) ; G =.. [call, B|Rest], call(G) ).
weft_bind([], Rest, Rest) :- !.
weft_bind(_, [], []) :- !.
weft_bind([P|Ps], [A|As], Rest) :- P = A, weft_bind(Ps, As, Rest).
