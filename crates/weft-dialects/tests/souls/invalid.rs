//! Documents that must not load: each error names its line, says what is wrong and
//! hints at the fix (exit 2 from `weft run`, checked in `tests/cli.rs`).

const HEAD: &str = "version: \"1.0\"\nsouls:\n  writer: {system_prompt: Write.}\n";

/// A souls file: the shared head (3 lines), then `body` from line 4.
fn doc(body: &str) -> String {
    format!("{HEAD}{body}")
}

/// Block `a` reads `b`, which runs after it.
const READS_LATER: &str = "blocks:\n  a:\n    type: linear\n    soul_ref: writer\n    inputs: {draft: {from: b}}\n  b:\n    type: linear\n    soul_ref: writer\nworkflow:\n  name: w\n  entry: a\n  transitions:\n    - {from: a, to: b}\n";

fn cases() -> Vec<(String, u32, &'static str, &'static str)> {
    let wf = "workflow:\n  name: w\n  entry: a\n";
    vec![
        // 1. An unknown block type.
        (doc(&format!("blocks:\n  a:\n    type: lineal\n    soul_ref: writer\n{wf}")), 6, "unknown block type `lineal`", "did you mean `linear`?"),
        // 2. A field of no block type.
        (doc(&format!("blocks:\n  a:\n    type: linear\n    soul: writer\n{wf}")), 7, "has no field `soul`", "did you mean `soul_ref`?"),
        // 3. A gate with only one shorthand.
        (doc(&format!("blocks:\n  a:\n    type: gate\n    soul_ref: writer\n    eval_key: a\n    pass: a\n{wf}")), 5, "go together", "give both targets"),
        // 4. A timeout out of range.
        (doc(&format!("blocks:\n  a:\n    type: linear\n    soul_ref: writer\n    timeout_seconds: 0\n{wf}")), 8, "must be 1-3600", "default 300"),
        // 5. Too many loop rounds.
        (doc(&format!("blocks:\n  a:\n    type: loop\n    inner_block_refs: [b]\n    max_rounds: 60\n  b:\n    type: linear\n    soul_ref: writer\n{wf}")), 8, "must be 1-50", "default 5"),
        // 6. A loop over a block that does not exist.
        (doc(&format!("blocks:\n  a:\n    type: loop\n    inner_block_refs: [writ]\n  write:\n    type: linear\n    soul_ref: writer\n{wf}")), 7, "`writ` is not a block", "did you mean `write`?"),
        // 7. A soul that is neither inline nor in souls/.
        (doc(&format!("blocks:\n  a:\n    type: linear\n    soul_ref: writr\n{wf}")), 7, "no soul `writr`", "did you mean `writer`?"),
        // 8. A transition to a block that does not exist.
        (doc("blocks:\n  a:\n    type: linear\n    soul_ref: writer\n  bb:\n    type: linear\n    soul_ref: writer\nworkflow:\n  name: w\n  entry: a\n  transitions:\n    - {from: a, to: b}\n"), 15, "`b` is not a block", "did you mean `bb`?"),
        // 9. An entry that is not a block.
        (doc("blocks:\n  start:\n    type: linear\n    soul_ref: writer\nworkflow:\n  name: w\n  entry: strat\n"), 10, "the entry `strat` is not a block", "did you mean `start`?"),
        // 10. A conditional transition on an exit the block does not declare.
        (doc("blocks:\n  a:\n    type: linear\n    soul_ref: writer\n    exits: [{id: yes, label: Yes}, {id: no, label: No}]\nworkflow:\n  name: w\n  entry: a\n  conditional_transitions:\n    - {from: a, yse: null}\n"), 13, "has no exit `yse`", "did you mean `yes`?"),
        // 11. carry_context from a block outside the loop.
        (doc(&format!("blocks:\n  a:\n    type: loop\n    inner_block_refs: [b]\n    carry_context: {{source_blocks: [c]}}\n  b:\n    type: linear\n    soul_ref: writer\n  c:\n    type: linear\n    soul_ref: writer\n{wf}")), 8, "not one of this loop's inner blocks", "subset of inner_block_refs"),
        // 12. An unknown break_condition operator.
        (doc(&format!("blocks:\n  a:\n    type: loop\n    inner_block_refs: [b]\n    break_condition: {{eval_key: s, operator: equal, value: 1}}\n  b:\n    type: linear\n    soul_ref: writer\n{wf}")), 8, "unknown operator `equal`", "did you mean `equals`?"),
        // 13. A stall phase Weft does not watch.
        (doc(&format!("blocks:\n  a:\n    type: linear\n    soul_ref: writer\n    stall_thresholds: {{first_tokn: 30}}\n{wf}")), 8, "unknown stall phase `first_tokn`", "did you mean `first_token`?"),
        // 14. A child workflow that is nowhere.
        (doc(&format!("blocks:\n  a:\n    type: workflow\n    workflow_ref: child\n{wf}")), 7, "cannot load the workflow `child`: the flow was sent as text", "run the workflow from its file"),
        // 15. Code without main.
        (doc(&format!("blocks:\n  a:\n    type: code\n    code: |\n      def run(data):\n          return 1\n{wf}")), 7, "defines no `main` function", "def main(data)"),
        // 16. An unknown retry backoff.
        (doc(&format!("blocks:\n  a:\n    type: linear\n    soul_ref: writer\n    retry_config: {{max_attempts: 2, backoff: exponental}}\n{wf}")), 8, "unknown backoff `exponental`", "did you mean `exponential`?"),
        // 17. A dispatch branch without its task.
        (doc(&format!("blocks:\n  a:\n    type: dispatch\n    exits:\n      - {{id: x, label: X, soul_ref: writer}}\n{wf}")), 8, "missing required key `task`", "add `task:`"),
        // 18. An error route to nowhere.
        (doc(&format!("blocks:\n  a:\n    type: linear\n    soul_ref: writer\n    error_route: fallbak\n  fallback:\n    type: linear\n    soul_ref: writer\n{wf}")), 8, "the error route `fallbak` is not a block", "did you mean `fallback`?"),
        // 19. A dependency on a block that does not exist.
        (doc(&format!("blocks:\n  a:\n    type: linear\n    soul_ref: writer\n    depends: [ghost]\n{wf}")), 8, "the dependency `ghost` is not a block", "the blocks: a"),
        // 20. A misspelt workflow key.
        (doc(&format!("blocks:\n  a:\n    type: linear\n    soul_ref: writer\n{wf}  transitons: []\n")), 11, "unknown key `transitons`", "did you mean `transitions`?"),
        // 21. Two plain transitions from one block.
        (doc("blocks:\n  a:\n    type: linear\n    soul_ref: writer\n  b:\n    type: linear\n    soul_ref: writer\nworkflow:\n  name: w\n  entry: a\n  transitions:\n    - {from: a, to: b}\n    - {from: a, to: null}\n"), 16, "`a` has two transitions", "conditional_transitions"),
        // 22. A block id that cannot key the results.
        (doc("blocks:\n  a.b:\n    type: linear\n    soul_ref: writer\nworkflow:\n  name: w\n  entry: a.b\n"), 5, "is not a name", "letters, digits"),
        // 23. A misspelt soul field.
        ("version: \"1.0\"\nsouls:\n  writer: {system_promt: Write.}\nblocks:\n  a:\n    type: linear\n    soul_ref: writer\nworkflow: {name: w, entry: a}\n".to_owned(), 3, "unknown key `system_promt`", "did you mean `system_prompt`?"),
        // 24. A budget that only warns.
        (doc(&format!("blocks:\n  a:\n    type: linear\n    soul_ref: writer\n    limits: {{token_cap: 10, on_exceed: warm}}\n{wf}")), 8, "unknown on_exceed `warm`", "did you mean `warn`?"),
        // 25. Too many attempts.
        (doc(&format!("blocks:\n  a:\n    type: linear\n    soul_ref: writer\n    retry_config: {{max_attempts: 30}}\n{wf}")), 8, "must be 1-20", ""),
        // 26. Routes without their one default.
        (doc(&format!("blocks:\n  a:\n    type: linear\n    soul_ref: writer\n    routes:\n      - {{case: ok, goto: a, when: {{conditions: []}}}}\n{wf}")), 8, "0 default routes", "exactly one default"),
        // 27. Routes and output_conditions together.
        (doc(&format!("blocks:\n  a:\n    type: linear\n    soul_ref: writer\n    output_conditions: [{{case_id: x, default: true}}]\n    routes: [{{case: y, goto: a, default: true}}]\n{wf}")), 9, "routes or output_conditions, not both", "mutually exclusive"),
        // 28. An unknown combinator.
        (doc(&format!("blocks:\n  a:\n    type: linear\n    soul_ref: writer\n    output_conditions:\n      - case_id: x\n        condition_group: {{combinator: nor, conditions: []}}\n{wf}")), 10, "unknown combinator `nor`", "did you mean `or`?"),
        // 29. An unknown operator in a case.
        (doc(&format!("blocks:\n  a:\n    type: linear\n    soul_ref: writer\n    output_conditions:\n      - case_id: x\n        condition_group:\n          conditions: [{{eval_key: s, operator: greater, value: 1}}]\n{wf}")), 11, "unknown operator `greater`", "the operators"),
        // 30. An interface name with a dot.
        (doc(&format!("blocks:\n  a:\n    type: workflow\n    workflow_ref: child\n    inputs: {{topic.name: results.a}}\n{wf}")), 8, "contains a dot", "no dots"),
        // 31. An output path outside the run state.
        (doc(&format!("blocks:\n  a:\n    type: workflow\n    workflow_ref: child\n    outputs: {{summary: s}}\n{wf}")), 8, "`summary` is not a path into the run state", "results, shared_memory or metadata"),
        // 32. An unknown on_error.
        (doc(&format!("blocks:\n  a:\n    type: workflow\n    workflow_ref: child\n    on_error: ignore\n{wf}")), 8, "unknown on_error `ignore`", "raise or catch"),
        // 33. An unknown assertion type.
        (doc(&format!("blocks:\n  a:\n    type: linear\n    soul_ref: writer\n    assertions:\n      - {{type: contain, value: x}}\n{wf}")), 9, "unknown assertion type `contain`", "did you mean `contains`?"),
        // 34. A judge on a gate.
        (doc(&format!("blocks:\n  a:\n    type: gate\n    soul_ref: writer\n    eval_key: a\n    assertions:\n      - {{type: llm_judge, value: Is it fair?}}\n{wf}")), 10, "chooses an exit", "check the block's output"),
        // 35. A warning threshold that is not a share of the cap.
        (doc(&format!("limits: {{token_cap: 100, warn_at_pct: 80}}\nblocks:\n  a:\n    type: linear\n    soul_ref: writer\n{wf}")), 4, "warn_at_pct is a fraction above 0 and at most 1", "0.8 warns at 80%"),
        // 36. An unknown output type.
        (doc(&format!("blocks:\n  a:\n    type: linear\n    soul_ref: writer\n    outputs: {{n: integr}}\n{wf}")), 8, "unknown output type `integr`", "did you mean `integer`?"),
        // 37. A soul reference that climbs out of the souls directory.
        (doc(&format!("blocks:\n  a:\n    type: linear\n    soul_ref: ../../etc/passwd\n{wf}")), 7, "cannot name a file in souls/", "no `/` or `..`"),
        // 38. A workflow reference that climbs out of the workflow's directory.
        (doc(&format!("blocks:\n  a:\n    type: workflow\n    workflow_ref: ../secrets/flow\n{wf}")), 7, "cannot name a workflow file", "no `/` or `..`"),
        // 39. A stall threshold out of range.
        (doc(&format!("blocks:\n  a:\n    type: linear\n    soul_ref: writer\n    stall_thresholds: {{token_gap: 0}}\n{wf}")), 8, "threshold is 0 s; it must be 1-3600", ""),
        // 40. A soul that lists a tool the workflow does not define.
        (format!("version: \"1.0\"\ntools:\n  word_count: {{type: code, code: \"def main(args):\\n    return 1\"}}\nsouls:\n  writer: {{system_prompt: Write., tools: [word_cont]}}\nblocks:\n  a:\n    type: linear\n    soul_ref: writer\n{wf}"), 5, "the soul's tool `word_cont` is not under the workflow's `tools:`", "did you mean `word_count`?"),
        // 41. An unknown tool type.
        (format!("version: \"1.0\"\ntools:\n  fetch:\n    type: htp\n    url: https://example.com\n{}blocks:\n  a:\n    type: linear\n    soul_ref: writer\n{wf}", &HEAD[15..]), 4, "unknown tool type `htp`", "did you mean `http`?"),
        // 42. A field of another tool type.
        (format!("version: \"1.0\"\ntools:\n  read:\n    type: builtin\n    action: file.read\n    url: x\n{}blocks:\n  a:\n    type: linear\n    soul_ref: writer\n{wf}", &HEAD[15..]), 6, "a builtin tool has no field `url`", "its fields"),
        // 43. A builtin tool that runs no action Weft has.
        (format!("version: \"1.0\"\ntools:\n  read:\n    type: builtin\n    action: file.raed\n{}blocks:\n  a:\n    type: linear\n    soul_ref: writer\n{wf}", &HEAD[15..]), 5, "`file.raed` is not an action Weft runs", "did you mean `file.read`?"),
        // 44. A code tool without main.
        (format!("version: \"1.0\"\ntools:\n  count:\n    type: code\n    code: |\n      def count(args):\n          return 1\n{}blocks:\n  a:\n    type: linear\n    soul_ref: writer\n{wf}", &HEAD[15..]), 5, "defines no `main` function", "def main(args)"),
        // 45. Parameters that are not an object schema.
        (format!("version: \"1.0\"\ntools:\n  count:\n    type: code\n    code: \"def main(args):\\n    return 1\"\n    parameters: {{text: string}}\n{}blocks:\n  a:\n    type: linear\n    soul_ref: writer\n{wf}", &HEAD[15..]), 6, "parameters is a JSON Schema of the arguments object", "type: object"),
        // 46. A required tool call of a tool the soul does not list.
        (format!("version: \"1.0\"\ntools:\n  count: {{type: code, code: \"def main(args):\\n    return 1\"}}\nsouls:\n  writer:\n    system_prompt: Write.\n    tools: [count]\n    required_tool_calls: [cont]\nblocks:\n  a:\n    type: linear\n    soul_ref: writer\n{wf}"), 8, "must call `cont`, which is not one of its tools", "list it under the soul's `tools` too"),
        // 47. An http tool with a method it cannot send.
        (format!("version: \"1.0\"\ntools:\n  put:\n    type: http\n    method: PUT\n    url: https://example.com\n{}blocks:\n  a:\n    type: linear\n    soul_ref: writer\n{wf}", &HEAD[15..]), 5, "method `PUT` is not GET or POST", "GET or POST"),
        // 48. A non-retryable error that is no error kind Weft retries.
        (doc(&format!("blocks:\n  a:\n    type: linear\n    soul_ref: writer\n    retry_config: {{max_attempts: 2, non_retryable_errors: [rate_limt]}}\n{wf}")), 8, "`rate_limt` is not an error kind Weft retries", "did you mean `rate_limit`?"),
        // 49. A read of a block that only runs later (issue 37: a reference to a block
        // that cannot have run before this one).
        (doc(READS_LATER), 8, "block `a` reads the result of `b`, which cannot have run before it", "read a block that runs earlier"),
        // 51. A field that a linear block's declared outputs do not have.
        (doc("blocks:\n  a:\n    type: linear\n    soul_ref: writer\n    outputs: {title: str, body: str}\n  b:\n    type: linear\n    soul_ref: writer\n    inputs: {t: {from: a.titel}}\nworkflow:\n  name: w\n  entry: a\n  transitions:\n    - {from: a, to: b}\n"), 12, "this reads `titel` of block `a`'s result, but its `outputs` declare `title`, `body`", "did you mean `title`?"),
        // 50. A gate judging a block on another branch.
        (doc("blocks:\n  a:\n    type: linear\n    soul_ref: writer\n    exits: [{id: x, label: X}, {id: y, label: Y}]\n  b:\n    type: linear\n    soul_ref: writer\n  g:\n    type: gate\n    soul_ref: writer\n    eval_key: b\nworkflow:\n  name: w\n  entry: a\n  conditional_transitions:\n    - {from: a, x: b, y: g}\n"), 15, "block `g` reads the result of `b`, which cannot have run before it", "make `b` run before `g`"),
    ]
}

#[test]
fn invalid_documents_give_located_errors_with_hints() {
    let cases = cases();
    let borrowed: Vec<(&str, u32, &str, &str)> = cases
        .iter()
        .map(|(t, l, m, h)| (t.as_str(), *l, *m, *h))
        .collect();
    super::support::assert_invalid("souls", &borrowed);
}

#[test]
fn reads_of_blocks_that_ran_before_load() {
    // Case 49 turned round: `b` reads `a`, which runs first.
    let fixed = doc(READS_LATER)
        .replace("    inputs: {draft: {from: b}}\n  b:", "  b:")
        .replace(
            "  b:\n    type: linear\n    soul_ref: writer\n",
            "  b:\n    type: linear\n    soul_ref: writer\n    inputs: {draft: {from: a}}\n",
        );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.yaml");
    std::fs::write(&path, &fixed).unwrap();
    let loaded = weft_dialects::load_file(&path, Some("souls"));
    assert!(
        loaded.is_ok(),
        "{:?}\n{fixed}",
        loaded.err().map(|e| e.diagnostics)
    );
}
