//! Spec 002's "putting it all together" research pipeline, built with Weft's Rust
//! library API and run on Weft's engine with a scripted model (no network, no key):
//! parallel search across three sources, refinement until confidence is high,
//! background analytics, synthesis by a generator, a conditional reviewer
//! notification, and recovery from a search error.
//!
//!   cargo run -p weft --example research -- "How do durable workflows survive crashes?"
//!   cargo run -p weft --example research -- "search outage"     # the rescue path
//!   cargo run -p weft --example research -- --yaml              # the flow as native YAML

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use weft::ir::ModelDef;
use weft::prelude::*;

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Query {
    text: String,
    terms: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Research {
    findings: Vec<String>,
    citations: Vec<String>,
    confidence: f64,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct Report {
    summary: String,
    citations: Vec<String>,
}

/// A search over a small in-memory corpus: the documents that share a term with the
/// query, as `source: document` lines.
fn search(source: &'static str, corpus: &'static [&'static str]) -> Block {
    handler(format!("search-{source}")).execute(move |q: Query, _ctx| async move {
        if source == "web" && q.terms.iter().any(|t| t == "outage") {
            return Err(BlockError::kind("search", "the web index is unreachable"));
        }
        Ok(corpus
            .iter()
            .filter(|d| {
                q.terms
                    .iter()
                    .any(|t| d.to_lowercase().contains(t.as_str()))
            })
            .map(|d| format!("{source}: {d}"))
            .collect::<Vec<_>>())
    })
}

/// The research agent (the tests run it too).
pub fn pipeline() -> Block {
    let parse_query = handler("parse-query").execute(|text: String, _ctx| async move {
        let terms = text
            .to_lowercase()
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.len() > 3)
            .map(str::to_owned)
            .collect();
        Ok(Query { text, terms })
    });
    let merge_and_rank =
        handler("merge-and-rank").execute(|hits: serde_json::Value, _ctx| async move {
            let mut findings: Vec<String> = ["web", "docs", "memory"]
                .iter()
                .flat_map(|s| hits[s].as_array().cloned().unwrap_or_default())
                .filter_map(|h| h.as_str().map(str::to_owned))
                .collect();
            findings.sort();
            findings.dedup();
            let citations = findings
                .iter()
                .map(|f| f.split(':').next().unwrap_or("").to_owned())
                .collect();
            let confidence = (findings.len() as f64 / 10.0).min(1.0);
            Ok(Research {
                findings,
                citations,
                confidence,
            })
        });
    let refine_results = handler("refine-results").execute(|mut r: Research, _ctx| async move {
        // Each pass follows one more reference and is surer of the result.
        r.citations
            .push(format!("reference-{}", r.citations.len() + 1));
        r.confidence = (r.confidence + 0.25).min(1.0);
        Ok(r)
    });
    let log_analytics = handler("log-analytics").execute(|r: Research, _ctx| async move {
        eprintln!(
            "analytics: {} findings, confidence {:.2}",
            r.findings.len(),
            r.confidence
        );
        Ok(())
    });
    let synthesize = generator("synthesize")
        .model("research-model")
        .prompt("You write a short research summary with its citations.")
        .user("Findings: {{ input.findings | join('; ') }}\nCitations: {{ input.citations | join(', ') }}")
        .output::<Report>()
        .agent_type(AgentType::Primary);
    let notify_reviewer =
        handler("notify-reviewer").execute(|r: serde_json::Value, _ctx| async move {
            eprintln!(
                "reviewer notified: {} citations",
                r["citations"].as_array().map_or(0, Vec::len)
            );
            Ok(())
        });
    let fallback_search =
        handler("fallback-search").execute(|failed: serde_json::Value, _ctx| async move {
            Ok(Report {
                summary: format!(
                    "Search is unavailable ({}); try again later.",
                    failed["error"]["message"].as_str().unwrap_or("unknown")
                ),
                citations: Vec::new(),
            })
        });

    sequencer("research-agent")
        .then(parse_query)
        .tap_fn(|q: &Query| eprintln!("searching for: {}", q.terms.join(", ")))
        .parallel([
            ("web", Entry::from(search("web", &["Durable execution replays a journal after a crash", "Workflows survive restarts by checkpointing"]))),
            ("docs", Entry::from(search("docs", &["Weft journals every effectful step", "A crash loses no completed step"]))),
            ("memory", Entry::from(search("memory", &["Last week we discussed durable workflows"]))),
        ])
        .then(merge_and_rank)
        .do_until(|r: Research| r.confidence > 0.9, refine_results)
        .work(log_analytics)
        .then(synthesize)
        .tap_if(|r: Report| r.citations.len() > 5, notify_reviewer)
        .rescue([RescueCase::when([ErrorKind::Other("search".into())], fallback_search)])
        .build()
        .model(
            "research-model",
            serde_json::from_value::<ModelDef>(json!({
                "provider": "scripted",
                "rules": [{
                    "when": "Findings:",
                    "json": {
                        "summary": "Durable workflows journal each completed step and replay the journal after a crash, so no finished work is repeated or lost.",
                        "citations": ["docs", "web", "memory", "reference-4", "reference-5", "reference-6"]
                    }
                }]
            }))
            .expect("a model definition"),
        )
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let arg = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "How do durable workflows survive crashes?".into());
    let block = pipeline();
    if arg == "--yaml" {
        print!("{}", block.to_yaml()?);
        return Ok(());
    }
    let runtime = Runtime::builder().register(&block).build()?;
    let run = runtime.run(&block, &arg).await?;
    match run.output {
        Some(output) => println!("{}", serde_json::to_string_pretty(&output)?),
        None => return Err(format!("the run {:?}: {:?}", run.status, run.error).into()),
    }
    Ok(())
}
