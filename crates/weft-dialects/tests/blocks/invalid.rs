//! Documents that must not load: each gives a located error with a hint, never a panic,
//! and an unknown key or node type is never silently ignored.

/// `(file, expected line, words the message must contain, words the hint must contain)`.
const CASES: &[(&str, u32, &str, &str)] = &[
    // 1. A misspelt top-level key.
    (
        "name: t\nroot: {type: h, children: []}\ndescriptoin: x\n",
        3,
        "unknown key `descriptoin`",
        "did you mean `description`?",
    ),
    // 2. A node without a type.
    (
        "name: t\nroot:\n  type: h\n  children:\n    - step_id: a\n      prompt: hi\n",
        5,
        "a node needs a `type`",
        "types: h, v, loop, llm, code, passthrough",
    ),
    // 3. A misspelt node type.
    (
        "name: t\nroot:\n  type: lop\n  arrayField: x\n  children: []\n",
        3,
        "unknown node type `lop`",
        "did you mean `loop`?",
    ),
    // 4. An llm block without its prompt.
    (
        "name: t\nroot:\n  type: h\n  children:\n    - step_id: a\n      type: llm\n",
        5,
        "missing required key `prompt`",
        "add `prompt:`",
    ),
    // 5. A key of another block type (000: "Language: Python only" — code is for `code`).
    (
        "name: t\nroot:\n  type: h\n  children:\n    - step_id: a\n      type: llm\n      prompt: hi\n      code: x = 1\n",
        8,
        "unknown key `code`",
        "expected one of",
    ),
    // 6. A misspelt block key.
    (
        "name: t\nroot:\n  type: h\n  children:\n    - step_id: a\n      type: llm\n      prompt: hi\n      output_shema: {fields: []}\n",
        8,
        "unknown key `output_shema`",
        "did you mean `output_schema`?",
    ),
    // 7. A code block that writes its own wrapper (000: "Do NOT write def block(...) or
    // def _block(...) yourself").
    (
        "name: t\nroot:\n  type: h\n  children:\n    - step_id: a\n      type: code\n      code: |\n        def _block(initial):\n            return {}\n",
        7,
        "defines `def _block(initial):` itself",
        "write only the function body",
    ),
    // 8. Two blocks with one step_id.
    (
        "name: t\nroot:\n  type: h\n  children:\n    - {step_id: a, type: passthrough}\n    - {step_id: a, type: passthrough}\n",
        6,
        "the step_id `a` is used twice",
        "make each unique",
    ),
    // 9. An empty step_id.
    (
        "name: t\nroot:\n  type: h\n  children:\n    - step_id: \"\"\n      type: passthrough\n",
        5,
        "`step_id` is empty",
        "step_id: summarize",
    ),
    // 10. A loop without its arrayField (000: "The arrayField property names which key
    // contains the array").
    (
        "name: t\nroot:\n  type: h\n  children:\n    - type: loop\n      children: []\n",
        5,
        "missing required key `arrayField`",
        "add `arrayField:`",
    ),
    // 11. An empty arrayField.
    (
        "name: t\nroot:\n  type: loop\n  arrayField: \" \"\n  children: []\n",
        4,
        "`arrayField` is empty",
        "arrayField: items",
    ),
    // 12. arrayField on an h container.
    (
        "name: t\nroot:\n  type: h\n  arrayField: items\n  children: []\n",
        4,
        "unknown key `arrayField`",
        "expected one of",
    ),
    // 13. A schema field of an unknown type.
    (
        "name: t\nroot:\n  type: h\n  children:\n    - step_id: a\n      type: passthrough\n      input_schema:\n        fields:\n          - {name: x, type: strng}\n",
        9,
        "unknown field type `strng`",
        "did you mean `string`?",
    ),
    // 14. A schema listing a field twice.
    (
        "name: t\nroot:\n  type: h\n  children:\n    - step_id: a\n      type: passthrough\n      output_schema:\n        fields:\n          - {name: x}\n          - {name: x}\n",
        10,
        "the field `x` is listed twice",
        "",
    ),
    // 15. A schema that is neither a SchemaNode nor a JSON Schema object.
    (
        "name: t\nroot:\n  type: h\n  children:\n    - step_id: a\n      type: passthrough\n      input_schema: [x, y]\n",
        7,
        "a schema is `{fields: [{name, type}]}`",
        "input_schema: {fields:",
    ),
    // 16. A prompt with an expression (000: only "{{fieldName}}" and
    // "{{initial.fieldName}}").
    (
        "name: t\nroot:\n  type: h\n  children:\n    - step_id: a\n      type: llm\n      prompt: \"{{ a + b }}\"\n",
        7,
        "`{{a + b}}` is not a field reference",
        "",
    ),
    // 17. A prompt with an unclosed reference.
    (
        "name: t\nroot:\n  type: h\n  children:\n    - step_id: a\n      type: llm\n      prompt: \"Hello {{name\"\n",
        7,
        "is never closed",
        "",
    ),
    // 18. A prompt reading a field its input_schema does not have.
    (
        "name: t\nroot:\n  type: h\n  children:\n    - step_id: a\n      type: llm\n      prompt: \"Sum up {{txet}}\"\n      input_schema: {fields: [{name: text}]}\n",
        7,
        "`{{txet}}`, which is not a field of the input_schema",
        "did you mean `text`?",
    ),
    // 19. Children that are not a list.
    (
        "name: t\nroot:\n  type: v\n  children: {step_id: a, type: passthrough}\n",
        4,
        "invalid type",
        "",
    ),
    // 20. Two children of a v container merged under one key (000: "{<step_id>:
    // <block_output>}" and "{<index_as_string>: <container_output>}").
    (
        "name: t\nroot:\n  type: v\n  children:\n    - {step_id: \"1\", type: passthrough}\n    - {type: h, children: []}\n",
        6,
        "both merged under `1`",
        "rename the step",
    ),
    // 21. An empty model id.
    (
        "name: t\nroot:\n  type: h\n  children:\n    - step_id: a\n      type: llm\n      prompt: hi\n      model: \"\"\n",
        8,
        "`model` is empty",
        "model: openai/gpt-4o-mini",
    ),
    // 22. A file without a name.
    (
        "root:\n  type: h\n  children: []\n",
        1,
        "missing required key `name`",
        "give the flow a `name:`",
    ),
    // 23. A child that is not an object.
    (
        "name: t\nroot:\n  type: h\n  children:\n    - summarize\n",
        5,
        "a node is an object",
        "step_id",
    ),
    // 24. An unknown key in a schema field.
    (
        "name: t\nroot:\n  type: h\n  children:\n    - step_id: a\n      type: passthrough\n      input_schema: {fields: [{name: a, typ: string}]}\n",
        7,
        "unknown key `typ`",
        "did you mean `type`?",
    ),
];

#[test]
fn invalid_documents_give_located_errors_with_hints() {
    super::support::assert_invalid("blocks", CASES);
}

#[test]
fn a_code_block_without_an_input_schema_loads_with_a_warning() {
    // 000: "One positional parameter per field in the block's input_schema" — with none,
    // the function takes only `initial`, so the file is worth a warning.
    let loaded = weft_dialects::load_str(
        "name: t\nroot: {type: h, children: [{step_id: a, type: code, code: \"return {}\"}]}\n",
        "flow.yaml",
        None,
        None,
    )
    .unwrap();
    assert_eq!(loaded.warnings.len(), 1);
    assert!(loaded.warnings[0].message.contains("no input_schema"));
}

#[test]
fn only_a_v_container_merges_by_name() {
    // 000's merge rule is the v container's; in an h container a block `1` beside a
    // nested container at index 1 is fine.
    let text = "name: t\nroot:\n  type: h\n  children:\n    - {step_id: \"1\", type: passthrough}\n    - {type: h, children: []}\n";
    assert!(weft_dialects::load_str(text, "flow.yaml", None, None).is_ok());
}
