//! Reads checked before a run: each flawed flow gets its diagnostic at the reading
//! node's line and column, and the same flow corrected gets none (no false errors, no
//! warnings). The rules are spec 000's data flow between blocks ("Data Flow Between
//! Blocks"), applied to what the flow declares.

use super::support::{assert_clean, assert_diagnostic};
use weft_core::Severity;

/// `(flawed, corrected, line, column, severity, words of the message, words of the hint)`.
type Case = (
    &'static str,
    &'static str,
    u32,
    u32,
    Severity,
    &'static str,
    &'static str,
);

const SPLIT: &str = "name: t\nroot:\n  type: h\n  children:\n    - step_id: split\n      type: code\n      code: \"return {'words': text.split()}\"\n      input_schema: {fields: [{name: text, type: string}]}\n      output_schema: {fields: [{name: words, type: array}]}\n";

const CASES: &[Case] = &[
    // 1. The example: a loop over a field the previous block does not declare.
    (
        "LOOP_WORDZ",
        "LOOP_WORDS",
        11,
        7,
        Severity::Error,
        "the loop iterates over `wordz`, but its input (the output of code block `split`) has no such field",
        "did you mean `words`?",
    ),
    // 2. A prompt reading a field the previous model's output_schema does not list.
    (
        "name: t\nroot:\n  type: h\n  children:\n    - step_id: a\n      type: llm\n      prompt: Title {{initial.text}}\n      output_schema: {fields: [{name: title, type: string}]}\n    - step_id: b\n      type: llm\n      prompt: Summarize {{titel}}\n",
        "name: t\nroot:\n  type: h\n  children:\n    - step_id: a\n      type: llm\n      prompt: Title {{initial.text}}\n      output_schema: {fields: [{name: title, type: string}]}\n    - step_id: b\n      type: llm\n      prompt: Summarize {{title}}\n",
        11,
        7,
        Severity::Error,
        "the prompt of llm block `b` reads `titel`, but its input (the output of llm block `a`) has no such field",
        "did you mean `title`?",
    ),
    // 3. A loop over a field declared as a number.
    (
        "name: t\nroot:\n  type: h\n  children:\n    - step_id: count\n      type: code\n      input_schema: {fields: [{name: x}]}\n      code: \"return {'n': 3, 'items': [1, 2, 3]}\"\n      output_schema: {fields: [{name: n, type: number}, {name: items, type: list}]}\n    - type: loop\n      arrayField: n\n      children: []\n",
        "name: t\nroot:\n  type: h\n  children:\n    - step_id: count\n      type: code\n      input_schema: {fields: [{name: x}]}\n      code: \"return {'n': 3, 'items': [1, 2, 3]}\"\n      output_schema: {fields: [{name: n, type: number}, {name: items, type: list}]}\n    - type: loop\n      arrayField: items\n      children: []\n",
        11,
        7,
        Severity::Error,
        "the loop iterates over `n`, which is a number in its input (the output of code block `count`), not a list",
        "arrayField names the input field that holds the list",
    ),
    // 4. A code parameter the previous block does not produce (an llm block without an
    // output_schema answers under `response`).
    (
        "name: t\nroot:\n  type: h\n  children:\n    - {step_id: a, type: llm, prompt: Say hi}\n    - step_id: b\n      type: code\n      code: \"return {'n': len(reply)}\"\n      input_schema: {fields: [{name: reply, type: string}]}\n",
        "name: t\nroot:\n  type: h\n  children:\n    - {step_id: a, type: llm, prompt: Say hi}\n    - step_id: b\n      type: code\n      code: \"return {'n': len(response)}\"\n      input_schema: {fields: [{name: response, type: string}]}\n",
        9,
        32,
        Severity::Error,
        "code block `b` takes the parameter `reply`, but its input (the output of llm block `a`) has no such field",
        "its input has `response`",
    ),
    // 5. A field the code's function has no parameter for: `_block(initial, **input)`
    // raises TypeError.
    (
        "name: t\nroot:\n  type: h\n  children:\n    - step_id: a\n      type: llm\n      prompt: Name and age of {{initial.who}}\n      output_schema: {fields: [{name: name, type: string}, {name: age, type: integer}]}\n    - step_id: b\n      type: code\n      code: \"return {'adult': age >= 18}\"\n      input_schema: {fields: [{name: age, type: integer}]}\n",
        "name: t\nroot:\n  type: h\n  children:\n    - step_id: a\n      type: llm\n      prompt: Name and age of {{initial.who}}\n      output_schema: {fields: [{name: name, type: string}, {name: age, type: integer}]}\n    - step_id: b\n      type: code\n      code: \"return {'adult': age >= 18}\"\n      input_schema: {fields: [{name: name, type: string}, {name: age, type: integer}]}\n",
        12,
        7,
        Severity::Error,
        "`name` is not one of its parameters: Python raises TypeError",
        "add `name` to its input_schema",
    ),
    // 6. An output_schema field that the code's literal return does not produce.
    (
        "name: t\nroot:\n  type: h\n  children:\n    - step_id: sum\n      type: code\n      input_schema: {fields: [{name: x}]}\n      code: \"return {'totl': 1}\"\n      output_schema: {fields: [{name: total, type: number}]}\n",
        "name: t\nroot:\n  type: h\n  children:\n    - step_id: sum\n      type: code\n      input_schema: {fields: [{name: x}]}\n      code: \"return {'total': 1}\"\n      output_schema: {fields: [{name: total, type: number}]}\n",
        9,
        33,
        Severity::Error,
        "the output_schema of code block `sum` lists `total`, but its code returns {'totl': ...} without it",
        "did you mean `totl`?",
    ),
    // 7. A prompt reading a field of a loop's output, which is a list.
    (
        "name: t\nroot:\n  type: h\n  children:\n    - type: loop\n      arrayField: items\n      children: [{step_id: each, type: llm, prompt: 'Rate {{items}}'}]\n    - {step_id: sum, type: llm, prompt: 'Sum up {{items}}'}\n",
        "name: t\nroot:\n  type: h\n  children:\n    - type: loop\n      arrayField: items\n      children: [{step_id: each, type: llm, prompt: 'Rate {{items}}'}]\n    - {step_id: sum, type: llm, prompt: 'Sum up the ratings of {{initial.topic}}'}\n",
        8,
        33,
        Severity::Error,
        "llm block `sum` reads `{{items}}`, but its input is a list (the output of a loop), which has no fields",
        "a loop outputs the list of its iterations' results",
    ),
    // 8. A `v` container's merge is keyed by step_id.
    (
        "name: t\nroot:\n  type: h\n  children:\n    - type: v\n      children:\n        - {step_id: pros, type: llm, prompt: 'Pros of {{initial.x}}'}\n        - {step_id: cons, type: llm, prompt: 'Cons of {{initial.x}}'}\n    - step_id: weigh\n      type: llm\n      prompt: 'Weigh {{pro}} against {{cons}}'\n",
        "name: t\nroot:\n  type: h\n  children:\n    - type: v\n      children:\n        - {step_id: pros, type: llm, prompt: 'Pros of {{initial.x}}'}\n        - {step_id: cons, type: llm, prompt: 'Cons of {{initial.x}}'}\n    - step_id: weigh\n      type: llm\n      prompt: 'Weigh {{pros}} against {{cons}}'\n",
        11,
        7,
        Severity::Error,
        "reads `pro`, but its input (the merged outputs of a `v` container) has no such field",
        "did you mean `pros`?",
    ),
    // 9. Types that disagree between a producer's output_schema and a consumer's
    // input_schema: a warning (a model may still answer in a way that works).
    (
        "name: t\nroot:\n  type: h\n  children:\n    - step_id: a\n      type: llm\n      prompt: How many in {{initial.x}}\n      output_schema: {fields: [{name: n, type: string}]}\n    - step_id: b\n      type: code\n      code: \"return {'twice': n * 2}\"\n      input_schema: {fields: [{name: n, type: number}]}\n",
        "name: t\nroot:\n  type: h\n  children:\n    - step_id: a\n      type: llm\n      prompt: How many in {{initial.x}}\n      output_schema: {fields: [{name: n, type: number}]}\n    - step_id: b\n      type: code\n      code: \"return {'twice': n * 2}\"\n      input_schema: {fields: [{name: n, type: number}]}\n",
        12,
        32,
        Severity::Warning,
        "`n` is a string in its input (the output of llm block `a`), but this schema declares a number",
        "agree on the field's type",
    ),
];

fn text(name: &str) -> String {
    let looped = |field: &str| {
        format!(
            "{SPLIT}    - type: loop\n      arrayField: {field}\n      children:\n        - {{step_id: each, type: passthrough}}\n"
        )
    };
    match name {
        "LOOP_WORDZ" => looped("wordz"),
        "LOOP_WORDS" => looped("words"),
        other => other.to_owned(),
    }
}

#[test]
fn flawed_reads_are_located_and_corrected_flows_are_clean() {
    for (flawed, corrected, line, col, severity, message, hint) in CASES {
        let at = (*line, *col);
        assert_diagnostic(&text(flawed), "blocks", message, at, *severity, hint);
        assert_clean(&text(corrected), "blocks");
    }
}
