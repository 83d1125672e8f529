//! Dialect detection as a user meets it through `weft run FILE`: documents that fit no
//! dialect, or fit two equally well, are located errors whose hint names `--dialect`;
//! with `--dialect` the same documents load (or fail inside the dialect, not before).

/// `(document, words of the message)`: each must fail detection.
const UNDETECTABLE: &[(&str, &str)] = &[
    // Fits nothing.
    (
        "title: a shopping list\nitems: [milk, eggs]\n",
        "cannot tell which dialect",
    ),
    ("{}\n", "cannot tell which dialect"),
    ("# only a comment\nx: 1\n", "cannot tell which dialect"),
    // Both an editor graph (its connections) and a souls workflow (blocks + workflow).
    (
        "nodes: [{id: s, type: start}]\nconnections: []\nblocks: {a: {type: code, code: x}}\nworkflow: {entry: a}\n",
        "could be written in `graph` or `souls`",
    ),
    // A block-runtime root and a souls workflow at once.
    (
        "root: {type: h, children: []}\nblocks: {}\nworkflow: {entry: a}\n",
        "could be written in `blocks` or `souls`",
    ),
    // tea nodes with names beside an editor's node data and edges: tea or graph.
    (
        "nodes: [{name: a, data: {}}]\nedges: [{from: a, to: __end__}]\n",
        "could be written in `tea` or `graph`",
    ),
];

#[test]
fn undetectable_documents_are_located_errors_that_name_dialect() {
    for (i, (text, words)) in UNDETECTABLE.iter().enumerate() {
        let err = weft_dialects::load_str(text, "flow.yaml", None, None)
            .err()
            .unwrap_or_else(|| panic!("case {i} loaded:\n{text}"));
        let rendered = err.render();
        // Located where the document's top mapping starts.
        let place = rendered.split(": error:").next().unwrap_or("");
        let mut parts = place.split(':');
        assert_eq!(parts.next(), Some("flow.yaml"), "case {i}:\n{rendered}");
        assert!(
            parts.all(|n| n.parse::<u32>().is_ok_and(|n| n >= 1)),
            "case {i}: not located:\n{rendered}"
        );
        assert!(
            place.matches(':').count() == 2,
            "case {i}: not located:\n{rendered}"
        );
        assert!(rendered.contains(words), "case {i}: {rendered}");
        assert!(
            rendered.contains("--dialect"),
            "case {i}: no hint:\n{rendered}"
        );
    }
}

#[test]
fn naming_the_dialect_settles_an_ambiguous_document() {
    let text = "root: {type: h, children: [{type: passthrough, step_id: a}]}\nname: x\nblocks: {}\nworkflow: {entry: a}\n";
    assert!(weft_dialects::load_str(text, "flow.yaml", None, None).is_err());
    // Named, the document is read as that dialect, whose strict keys then speak.
    let err = weft_dialects::load_str(text, "flow.yaml", None, Some("blocks"))
        .expect_err("blocks has no `blocks` key");
    assert!(
        err.render().contains("unknown key `blocks`"),
        "{}",
        err.render()
    );
}

#[test]
fn a_non_mapping_document_says_what_a_flow_is() {
    let err = weft_dialects::load_str("- a\n- b\n", "flow.yaml", None, None)
        .err()
        .unwrap();
    assert!(err.render().contains("holds an object"), "{}", err.render());
}
