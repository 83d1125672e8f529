//! State reads checked before a run: a template or condition that reads `state.x` when
//! no node writes `x` and the file declares no such key gets a warning at its node (TEA
//! renders it as nothing); the same file corrected gets none, and reads that may be
//! absent on purpose, or that an unknowable writer may provide, are left alone.

use super::support::{assert_clean, assert_diagnostic};
use weft_core::Severity;

const COUNTER: &str = "name: t\nnodes:\n  - name: inc\n    run: |\n      return {\"count\": state.get(\"count\", 0) + 1}\nedges:\n  - {from: __start__, to: inc}\n  - {from: inc, to: inc, when: \"state.COUNT < 3\"}\n  - {from: inc, to: __end__, when: \"state.COUNT >= 3\"}\n";

const GREETING: &str = "name: t\ninitial_state: {name: Ada}\nnodes:\n  - name: greet\n    uses: file.write\n    with: {path: out.txt, content: \"Hello {{ state.NAME }}\"}\n    output: written\nedges:\n  - {from: __start__, to: greet}\n  - {from: greet, to: __end__}\n";

/// `(flawed, corrected, line, column, words of the message, words of the hint)`.
const CASES: &[(&str, &str, &str, u32, u32, &str, &str)] = &[
    // A condition on a misspelt key that a Python node writes.
    (
        "COUNTER",
        "cuont",
        "count",
        3,
        5,
        "`state.cuont` is read here, but no node writes `cuont`",
        "did you mean `count`?",
    ),
    // A template reading a misspelt key of initial_state.
    (
        "GREETING",
        "nmae",
        "name",
        4,
        5,
        "`state.nmae` is read here",
        "did you mean `name`?",
    ),
];

fn text(name: &str, key: &str) -> String {
    match name {
        "COUNTER" => COUNTER.replace("COUNT", key),
        _ => GREETING.replace("NAME", key),
    }
}

#[test]
fn misspelt_state_reads_are_warned_of_and_corrected_files_are_clean() {
    for (flow, flawed, corrected, line, col, message, hint) in CASES {
        let at = (*line, *col);
        let d = assert_diagnostic(
            &text(flow, flawed),
            "tea",
            message,
            at,
            Severity::Warning,
            hint,
        );
        assert!(d.pointer.starts_with("/nodes/"), "{d:#?}");
        assert_clean(&text(flow, corrected), "tea");
    }
}

#[test]
fn reads_that_may_be_absent_on_purpose_or_written_unknowably_are_left_alone() {
    for yaml in [
        // Guarded in the template itself.
        "name: t\nnodes:\n  - name: greet\n    uses: file.write\n    with: {path: out.txt, content: \"Hello {{ state.who | default('you') }}{% if state.title is defined %} {{ state.title }}{% endif %}\"}\n    output: written\n",
        // Declared as the run's input by state_schema.
        "name: t\nstate_schema: {who: str}\nnodes:\n  - name: greet\n    uses: file.write\n    with: {path: out.txt, content: \"Hello {{ state.who }}\"}\n    output: written\n",
        // A node whose return is not a literal dict may write any key.
        "name: t\nnodes:\n  - name: load\n    run: |\n      return dict(state[\"pairs\"])\n  - name: greet\n    uses: file.write\n    with: {path: out.txt, content: \"Hello {{ state.who }}\"}\n    output: written\nedges:\n  - {from: __start__, to: load}\n  - {from: load, to: greet}\n  - {from: greet, to: __end__}\n",
    ] {
        assert_clean(yaml, "tea");
    }
}
