//! Documents that must not load: each gives a located error with a hint, never a panic,
//! and an unknown key or node type is never silently ignored.

/// `(file, expected line, words the message must contain, words the hint must contain)`.
const CASES: &[(&str, u32, &str, &str)] = &[
    // 1. A misspelt top-level key.
    (
        "name: t\nnodez: []\n",
        2,
        "unknown key `nodez`",
        "did you mean `nodes`?",
    ),
    // 2. A misspelt node key.
    (
        "name: t\nnodes:\n  - name: a\n    rnu: \"return {}\"\n",
        4,
        "unknown key `rnu`",
        "did you mean `run`?",
    ),
    // 3. An unknown node type.
    (
        "name: t\nnodes:\n  - name: a\n    type: while_lop\n    condition: \"True\"\n    max_iterations: 2\n    body: [{name: b, run: \"return {}\"}]\n",
        4,
        "unknown node type `while_lop`",
        "did you mean `while_loop`?",
    ),
    // 4. A while_loop without max_iterations (004: "max_iterations is required").
    (
        "name: t\nnodes:\n  - name: a\n    type: while_loop\n    condition: \"True\"\n    body: [{name: b, run: \"return {}\"}]\n",
        3,
        "needs `max_iterations`",
        "1 to 1000",
    ),
    // 5. max_iterations out of range (004: "Range must be 1-1000").
    (
        "name: t\nnodes:\n  - name: a\n    type: while_loop\n    condition: \"True\"\n    max_iterations: 1001\n    body: [{name: b, run: \"return {}\"}]\n",
        6,
        "outside 1-1000",
        "Range must be 1-1000",
    ),
    // 6. max_iterations of zero.
    (
        "name: t\nnodes:\n  - name: a\n    type: while_loop\n    condition: \"True\"\n    max_iterations: 0\n    body: [{name: b, run: \"return {}\"}]\n",
        6,
        "outside 1-1000",
        "1-1000",
    ),
    // 7. Nested while-loops (004: "Nested while-loops are NOT supported").
    (
        "name: t\nnodes:\n  - name: a\n    type: while_loop\n    condition: \"True\"\n    max_iterations: 2\n    body:\n      - name: inner\n        type: while_loop\n        condition: \"True\"\n        max_iterations: 2\n        body: [{name: b, run: \"return {}\"}]\n",
        8,
        "nested while-loops are not supported",
        "Nested while-loops",
    ),
    // 8. goto to a node that does not exist.
    (
        "name: t\nnodes:\n  - name: draft\n    run: \"return {}\"\n    goto: drafts\n",
        5,
        "unknown node `drafts`",
        "did you mean `draft`?",
    ),
    // 8b. A dynamic_parallel's fan_in that names no node, though a goto routes it.
    (
        "name: t\nnodes:\n  - name: p\n    type: dynamic_parallel\n    items: \"{{ [1] }}\"\n    fan_in: rnak\n    goto: rank\n    steps: [{name: s, run: \"return {}\"}]\n  - name: rank\n    run: \"return {}\"\n",
        6,
        "unknown node `rnak`",
        "did you mean `rank`?",
    ),
    // 8c. An invalid condition in a goto rule, located at the condition.
    (
        "name: t\nnodes:\n  - name: a\n    run: \"return {}\"\n    goto:\n      - {if: \"state.x >\", to: b}\n      - {to: b}\n  - name: b\n    run: \"return {}\"\n",
        6,
        "syntax error",
        "Jinja2 expressions",
    ),
    // 8d. An invalid condition on a legacy edge, as a bare `when` and as a condition.
    (
        "name: t\nnodes:\n  - name: a\n    run: \"return {}\"\n  - name: b\n    run: \"return {}\"\nedges:\n  - {from: __start__, to: a}\n  - {from: a, to: b, when: \"state.x >\"}\n  - {from: b, to: __end__}\n",
        9,
        "syntax error",
        "Jinja2 expressions",
    ),
    (
        "name: t\nnodes:\n  - name: a\n    run: \"return {}\"\n  - name: b\n    run: \"return {}\"\nedges:\n  - {from: __start__, to: a}\n  - {from: a, to: b, condition: {type: expression, value: \"state.x >\"}, when: true}\n  - {from: b, to: __end__}\n",
        9,
        "syntax error",
        "Jinja2 expressions",
    ),
    // 9. An edge from an unknown node.
    (
        "name: t\nnodes:\n  - name: a\n    run: \"return {}\"\nedges:\n  - {from: b, to: a}\n",
        6,
        "unknown node `b`",
        "nodes: a",
    ),
    // 10. Two execution methods on one node.
    (
        "name: t\nnodes:\n  - name: a\n    run: \"return {}\"\n    uses: json.parse\n    with: {text: \"1\"}\n",
        3,
        "run and uses",
        "a node runs code",
    ),
    // 11. An unknown action, with a suggestion.
    (
        "name: t\nnodes:\n  - name: a\n    uses: http.gett\n    with: {url: \"http://x\"}\n",
        4,
        "unknown action `http.gett`",
        "did you mean `http.get`?",
    ),
    // 12. dynamic_parallel without items (004: "items: Jinja2 expression ... Required").
    (
        "name: t\nnodes:\n  - name: a\n    type: dynamic_parallel\n    steps: [{name: s, run: \"return {}\"}]\n",
        3,
        "needs `items`",
        "items:",
    ),
    // 13. dynamic_parallel with two modes (004: "mutually exclusive").
    (
        "name: t\nnodes:\n  - name: a\n    type: dynamic_parallel\n    items: \"{{ state.xs }}\"\n    steps: [{name: s, run: \"return {}\"}]\n    action: {uses: json.parse, with: {text: \"1\"}}\n",
        3,
        "mutually exclusive",
        "mutually exclusive",
    ),
    // 14. max_concurrency not positive (004: "max_concurrency must be positive integer").
    (
        "name: t\nnodes:\n  - name: a\n    type: dynamic_parallel\n    items: \"{{ state.xs }}\"\n    max_concurrency: 0\n    steps: [{name: s, run: \"return {}\"}]\n",
        6,
        "positive integer",
        "",
    ),
    // 15. Two nodes with one name.
    (
        "name: t\nnodes:\n  - name: a\n    run: \"return {}\"\n  - name: a\n    run: \"return {}\"\n",
        5,
        "two nodes are named `a`",
        "unique",
    ),
    // 16. A loop key on an ordinary node.
    (
        "name: t\nnodes:\n  - name: a\n    run: \"return {}\"\n    max_iterations: 3\n",
        5,
        "`max_iterations` belongs to",
        "remove it",
    ),
    // 17. A fan-in target not marked fan_in: true.
    (
        "name: t\nnodes:\n  - name: a\n    run: \"return {}\"\n  - name: b\n    run: \"return {}\"\n  - name: j\n    run: \"return {}\"\nedges:\n  - {from: a, to: b, type: parallel, fan_in: j}\n",
        10,
        "not marked `fan_in: true`",
        "add `fan_in: true`",
    ),
    // 18. An unknown language.
    (
        "name: t\nnodes:\n  - name: a\n    language: ruby\n    run: \"puts 1\"\n",
        4,
        "unknown language `ruby`",
        "",
    ),
    // 19. A condition that is not an expression.
    (
        "name: t\nnodes:\n  - name: a\n    type: while_loop\n    condition: \"state.count <\"\n    max_iterations: 2\n    body: [{name: b, run: \"return {}\"}]\n",
        3,
        "state.count <",
        "Jinja2",
    ),
    // 20. A node without a name.
    (
        "name: t\nnodes:\n  - run: \"return {}\"\n",
        3,
        "needs a `name`",
        "name: fetch",
    ),
    // 21. A reserved node name.
    (
        "name: t\nnodes:\n  - name: __end__\n    run: \"return {}\"\n",
        3,
        "reserved",
        "rename",
    ),
    // 22. An llm.call option that does not exist.
    (
        "name: t\nnodes:\n  - name: a\n    uses: llm.call\n    with: {model: m, messages: [{role: user, content: hi}], temprature: 0}\n",
        5,
        "no option `temprature`",
        "did you mean `temperature`?",
    ),
    // 23. A goto rule with a misspelt key.
    (
        "name: t\nnodes:\n  - name: a\n    run: \"return {}\"\n    goto:\n      - {iff: \"state.x\", to: a}\n",
        6,
        "unknown key `iff`",
        "did you mean `if`?",
    ),
    // 24. An unknown state_schema type.
    (
        "name: t\nstate_schema:\n  count: integr\nnodes:\n  - name: a\n    run: \"return {}\"\n",
        3,
        "unknown type",
        "did you mean `integer`?",
    ),
    // 25. An llm.tools tool whose action Weft does not run.
    (
        "name: t\nnodes:\n  - name: a\n    uses: llm.tools\n    with:\n      model: m\n      prompt: hi\n      tools:\n        - {name: get, action: http.gett}\n",
        9,
        "not an action Weft runs",
        "did you mean `http.get`?",
    ),
    // 26. A tool option on llm.call.
    (
        "name: t\nnodes:\n  - name: a\n    uses: llm.call\n    with: {model: m, prompt: hi, tools: []}\n",
        5,
        "no option `tools`",
        "is an option of `uses: llm.tools`",
    ),
    // 27. A tool_choice that names no tool.
    (
        "name: t\nnodes:\n  - name: a\n    uses: llm.tools\n    with:\n      model: m\n      prompt: hi\n      tool_choice: reed\n      tools:\n        - {name: read, action: file.read}\n",
        8,
        "tool_choice `reed`",
        "did you mean `read`?",
    ),
];

#[test]
fn invalid_documents_give_located_errors_with_hints() {
    super::support::assert_invalid("tea", CASES);
}
