//! Documents that must not load: each error names its line, says what is wrong and
//! hints at the fix (exit 2 from `weft run`, checked in `tests/cli.rs`).

/// A graph file: one node per line from line 3, then the connections, one per line.
fn doc(nodes: &[&str], connections: &[&str]) -> String {
    format!(
        "{{\n\"nodes\": [\n{}\n],\n\"connections\": [\n{}\n]\n}}\n",
        nodes.join(",\n"),
        connections.join(",\n")
    )
}

const S: &str = r#"{"id": "s", "type": "start", "data": {"initialInput": "hi"}}"#;
const A: &str = r#"{"id": "a", "type": "agent", "data": {"model": "gpt-4o-mini"}}"#;
const B: &str = r#"{"id": "b", "type": "agent", "data": {"model": "gpt-4o-mini"}}"#;
const LEAD: &str = r#"{"id": "lead", "type": "agent", "data": {"tools": {"subagents": true}}}"#;
const E: &str = r#"{"id": "end", "type": "end", "data": {}}"#;
const IF: &str = r#"{"id": "check", "type": "if", "data": {"conditions": [{"operator": "contains", "value": "y"}]}}"#;
const GATE: &str = r#"{"id": "gate", "type": "approval", "data": {}}"#;

fn cases() -> Vec<(String, u32, &'static str, &'static str)> {
    vec![
        // 1. An unknown node type.
        (
            doc(&[S, r#"{"id": "a", "type": "agnet", "data": {}}"#], &[]),
            4,
            "unknown node type `agnet`",
            "did you mean `agent`?",
        ),
        // 2. A misspelt node key.
        (
            doc(&[S, r#"{"id": "a", "type": "agent", "dat": {}}"#], &[]),
            4,
            "unknown key `dat`",
            "did you mean `data`?",
        ),
        // 3. A misspelt agent field.
        (
            doc(
                &[
                    S,
                    r#"{"id": "a", "type": "agent", "data": {"userPromt": "x"}}"#,
                ],
                &[r#"{"source": "s", "target": "a"}"#],
            ),
            4,
            "unknown key `userPromt`",
            "did you mean `userPrompt`?",
        ),
        // 4. No start node.
        (doc(&[A], &[]), 2, "no start node", "initialInput"),
        // 5. Two start nodes.
        (
            doc(&[S, r#"{"id": "s2", "type": "start", "data": {}}"#], &[]),
            4,
            "more than one start node",
            "exactly once",
        ),
        // 6. A connection to a node that does not exist.
        (
            doc(&[S, E], &[r#"{"source": "s", "target": "edn"}"#]),
            7,
            "no node has the id `edn`",
            "did you mean `end`?",
        ),
        // 7. An if handle past its conditions.
        (
            doc(
                &[S, IF, E],
                &[
                    r#"{"source": "s", "target": "check"}"#,
                    r#"{"source": "check", "target": "end", "sourceHandle": "condition-3"}"#,
                ],
            ),
            9,
            "has no handle `condition-3`",
            "condition-0, false",
        ),
        // 8. A misspelt approval decision.
        (
            doc(
                &[S, GATE, E],
                &[
                    r#"{"source": "s", "target": "gate"}"#,
                    r#"{"source": "gate", "target": "end", "sourceHandle": "approved"}"#,
                ],
            ),
            9,
            "not `approved`",
            "did you mean `approve`?",
        ),
        // 9. An edge out of an end node.
        (
            doc(
                &[S, E, A],
                &[
                    r#"{"source": "s", "target": "end"}"#,
                    r#"{"source": "end", "target": "a"}"#,
                ],
            ),
            9,
            "nothing follows it",
            "connect the next step",
        ),
        // 10. An unknown if operator.
        (
            doc(
                &[
                    S,
                    r#"{"id": "check", "type": "if", "data": {"conditions": [{"operator": "equals", "value": "y"}]}}"#,
                ],
                &[],
            ),
            4,
            "unknown operator `equals`",
            "did you mean `equal`?",
        ),
        // 11. A subagent edge to a node that is not an agent.
        (
            doc(
                &[S, LEAD, E],
                &[r#"{"source": "lead", "target": "end", "sourceHandle": "subagent"}"#],
            ),
            8,
            "joins two agent nodes",
            "both agent nodes",
        ),
        // 12. A subagent edge from an agent without tools.subagents.
        (
            doc(
                &[S, A, B],
                &[r#"{"source": "a", "target": "b", "sourceHandle": "subagent"}"#],
            ),
            8,
            "does not have tools.subagents enabled",
            "\"subagents\": true",
        ),
        // 13. An agent that is its own subagent.
        (
            doc(
                &[S, LEAD],
                &[r#"{"source": "lead", "target": "lead", "sourceHandle": "subagent"}"#],
            ),
            7,
            "its own subagent",
            "no self-reference",
        ),
        // 14. A subagent with two parents.
        (
            doc(
                &[
                    S,
                    LEAD,
                    r#"{"id": "lead2", "type": "agent", "data": {"tools": {"subagents": true}}}"#,
                    A,
                ],
                &[
                    r#"{"source": "lead", "target": "a", "sourceHandle": "subagent"}"#,
                    r#"{"source": "lead2", "target": "a", "sourceHandle": "subagent"}"#,
                ],
            ),
            10,
            "already has a subagent parent",
            "at most one subagent parent",
        ),
        // 15. A subagent that is also on an execution edge.
        (
            doc(
                &[S, LEAD, A],
                &[
                    r#"{"source": "lead", "target": "a", "sourceHandle": "subagent"}"#,
                    r#"{"source": "s", "target": "a"}"#,
                ],
            ),
            9,
            "cannot be on an execution edge",
            "Subagent targets do not appear",
        ),
        // 16. Subagent edges that form a cycle.
        (
            doc(
                &[
                    S,
                    r#"{"id": "x", "type": "agent", "data": {"tools": {"subagents": true}}}"#,
                    r#"{"id": "y", "type": "agent", "data": {"tools": {"subagents": true}}}"#,
                ],
                &[
                    r#"{"source": "x", "target": "y", "sourceHandle": "subagent"}"#,
                    r#"{"source": "y", "target": "x", "sourceHandle": "subagent"}"#,
                ],
            ),
            5,
            "form a cycle",
            "no cycles",
        ),
        // 17. Two nodes with one id.
        (
            doc(&[S, A, r#"{"id": "a", "type": "end", "data": {}}"#], &[]),
            5,
            "two nodes have the id `a`",
            "",
        ),
        // 18. An id that cannot key the state.
        (
            doc(
                &[S, r#"{"id": "step.one", "type": "end", "data": {}}"#],
                &[],
            ),
            4,
            "is not a name",
            "letters, digits",
        ),
        // 19. An execution edge into a handle other than input.
        (
            doc(
                &[S, E],
                &[r#"{"source": "s", "target": "end", "targetHandle": "output"}"#],
            ),
            7,
            "enters a node at `input`",
            "leave targetHandle out",
        ),
        // 20. An if node without conditions.
        (
            doc(&[S, r#"{"id": "check", "type": "if", "data": {}}"#], &[]),
            4,
            "needs `conditions`",
            "\"operator\"",
        ),
        // 21. An agent edge leaving by a handle agents do not have.
        (
            doc(
                &[S, A, E],
                &[
                    r#"{"source": "s", "target": "a"}"#,
                    r#"{"source": "a", "target": "end", "sourceHandle": "out"}"#,
                ],
            ),
            9,
            "leave by `output`, not `out`",
            "\"subagent\"",
        ),
        // 22. A misspelt top-level key.
        (
            "{\n\"nodes\": [],\n\"connectoins\": []\n}\n"
                .replace("\"nodes\": []", &format!("\"nodes\": [{S}]")),
            3,
            "unknown key `connectoins`",
            "did you mean `connections`?",
        ),
    ]
}

#[test]
fn invalid_documents_give_located_errors_with_hints() {
    let cases = cases();
    let borrowed: Vec<(&str, u32, &str, &str)> = cases
        .iter()
        .map(|(t, l, m, h)| (t.as_str(), *l, *m, *h))
        .collect();
    super::support::assert_invalid("graph", &borrowed);
}
