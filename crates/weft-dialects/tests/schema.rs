//! The JSON Schema in docs/ is the one the code generates, and every example obeys it,
//! so editors that complete from the schema never disagree with Weft.

use std::path::PathBuf;

// Read at run time, not `env!`: cargo does not rebuild a test when only the checkout's
// path changes, so a build cache shared by two clones would point at the other one.
fn repo() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run by cargo")).join("../..")
}

#[test]
fn the_published_schema_is_current() {
    let published: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("docs/weft.schema.json")).unwrap(),
    )
    .unwrap();
    assert!(
        published == weft_dialects::native::json_schema(),
        "docs/weft.schema.json is stale: regenerate it with `weft schema > docs/weft.schema.json`"
    );
}

#[test]
fn every_example_obeys_the_schema() {
    let validator = jsonschema::validator_for(&weft_dialects::native::json_schema()).unwrap();
    let mut seen = 0;
    for entry in std::fs::read_dir(repo().join("examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path).unwrap();
            let (doc, _) = weft_dialects::source_map::parse(&text).unwrap();
            let errors: Vec<String> = validator
                .iter_errors(&doc)
                .map(|e| format!("{}: {e}", e.instance_path()))
                .collect();
            assert!(errors.is_empty(), "{}: {errors:?}", path.display());
            seen += 1;
        }
    }
    assert!(seen >= 5, "only {seen} examples");
}

/// Each dialect's schema accepts every example written in that dialect, and refuses a
/// document with a misspelt top-level key.
#[test]
fn every_dialect_s_examples_obey_its_schema() {
    for dir in ["tea", "blocks", "graph", "souls"] {
        let dialect = weft_dialects::dialect(dir).unwrap();
        let schema = dialect.schema();
        let validator = jsonschema::validator_for(&schema)
            .unwrap_or_else(|e| panic!("{dir}: the schema does not compile: {e}"));
        let mut seen = 0;
        for entry in std::fs::read_dir(repo().join("examples").join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if !path.is_file() {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let (mut doc, _) = weft_dialects::source_map::parse(&text).unwrap();
            let errors: Vec<String> = validator
                .iter_errors(&doc)
                .map(|e| format!("{}: {e}", e.instance_path()))
                .collect();
            assert!(errors.is_empty(), "{}: {errors:?}", path.display());
            doc["nmae"] = serde_json::Value::from("typo");
            assert!(
                !validator.is_valid(&doc),
                "{}: a misspelt key passes",
                path.display()
            );
            seen += 1;
        }
        assert!(seen >= 3, "{dir}: only {seen} examples");
    }
}

/// The schemas reach inside the nodes whose kind a tag tells: a key that belongs to no
/// kind is refused there, too.
#[test]
fn dialect_schemas_check_inside_tagged_nodes() {
    use serde_json::json;
    let cases = [
        (
            "blocks",
            json!({"name": "x", "root": {"type": "h", "children": [{"type": "passthrough", "step_id": "a"}]}}),
            json!({"name": "x", "root": {"type": "h", "children": [{"type": "passthrough", "step_id": "a", "promt": "?"}]}}),
        ),
        (
            "graph",
            json!({"nodes": [{"id": "s", "type": "start", "data": {"initialInput": "hi"}}], "connections": []}),
            json!({"nodes": [{"id": "s", "type": "start", "data": {"initialInptu": "hi"}}], "connections": []}),
        ),
        (
            "souls",
            json!({"blocks": {"a": {"type": "code", "code": "def main(data):\n  return 1"}}, "workflow": {"entry": "a"}}),
            json!({"blocks": {"a": {"type": "code", "code": "x", "soul_ref": "w"}}, "workflow": {"entry": "a"}}),
        ),
    ];
    for (name, good, bad) in cases {
        let v = jsonschema::validator_for(&weft_dialects::dialect(name).unwrap().schema()).unwrap();
        let errors: Vec<String> = v.iter_errors(&good).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{name}: {errors:?}");
        assert!(!v.is_valid(&bad), "{name}: {bad}");
    }
}
