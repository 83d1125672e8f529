//! The research pipeline of `examples/library/research.rs` (spec 002's "putting it all
//! together"), run as the example runs it.

#[allow(dead_code)] // its `main` is the example's
#[path = "../../../examples/library/research.rs"]
mod research;

use serde_json::json;
use weft::Runtime;

#[tokio::test]
async fn the_research_pipeline_searches_refines_synthesizes_and_rescues() {
    let block = research::pipeline();
    let runtime = Runtime::builder().register(&block).build().unwrap();
    let run = runtime
        .run(&block, "How do durable workflows survive crashes?")
        .await
        .unwrap();
    let out = run.output.expect("completed").into_value();
    assert!(
        out["summary"].as_str().unwrap().contains("journal"),
        "{out}"
    );
    assert_eq!(out["citations"].as_array().unwrap().len(), 6);

    let run = runtime.run(&block, "search outage").await.unwrap();
    assert_eq!(
        run.output.unwrap(),
        json!({"summary": "Search is unavailable (the web index is unreachable); try again later.", "citations": []})
    );
}
