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
