//! The Edge Agent's actions that Weft does not run. Most need a service or a library
//! that is not part of a workflow runtime (Mem0, LlamaIndex, Neo4j, a vector store,
//! TEA's agent-to-agent bus, ...). TEA itself looks an action up only when its node runs,
//! so its files load wherever the action is missing; Weft does the same for these names:
//! the file validates with a warning, and a run that reaches the node fails saying what
//! the action needs. A name TEA does not have either stays an error with a did-you-mean.

/// Families of TEA actions by name prefix, with what each needs that Weft does not have.
/// A prefix ends with `.` (a family) or is a whole name.
const FAMILIES: &[(&str, &str)] = &[
    (
        "a2a.",
        "TEA's agent-to-agent message bus between running TEA agents",
    ),
    (
        "academic.",
        "the arXiv, PubMed and Crossref search APIs (call them with `http.get`)",
    ),
    (
        "agent.",
        "TEA's multi-agent runtime (CrewAI delegation; Weft runs `agent.dispatch`, `agent.parallel`, `agent.sequential` and `agent.coordinate`)",
    ),
    ("auth.", "TEA's authentication providers (Firebase, JWT)"),
    ("bmad.", "TEA's BMad story parser"),
    ("cache.", "TEA's long-term-memory cache"),
    ("catalog.", "TEA's DuckLake data catalog"),
    (
        "checkpoint.",
        "TEA's checkpoint files (Weft journals every step; `weft runs resume` continues a run)",
    ),
    (
        "code.sandbox",
        "TEA's persistent RestrictedPython sessions (Weft runs each `code.execute` on its own)",
    ),
    ("context.", "TEA's long-term-memory context assembly"),
    ("data.", "TEA's tabular data store"),
    (
        "embedding.",
        "TEA's vector store (Weft's `llm.embed` gives the vectors)",
    ),
    (
        "error.",
        "TEA's error-state helpers (in Weft a failed node fails the run with its error)",
    ),
    ("firestore.", "Google Cloud Firestore"),
    ("git.", "running git commands (Weft runs no shell commands)"),
    (
        "github.",
        "GitHub's API with TEA's credentials (call it with `http.request`)",
    ),
    ("graph.", "TEA's graph database (CozoDB, Kuzu or Neo4j)"),
    ("http.respond", "TEA's HTTP server mode"),
    ("learn.textgrad.", "the TextGrad library"),
    ("textgrad.", "the TextGrad library"),
    ("llamaextract.", "LlamaIndex's LlamaExtract cloud service"),
    (
        "llm.retry",
        "TEA's model retry wrapper (Weft retries a block by its `retry` policy)",
    ),
    (
        "llm.similarity",
        "TEA's similarity search over embeddings (Weft's `llm.embed` gives the vectors)",
    ),
    ("markdown.", "TEA's Markdown parser"),
    ("memory.mem0.", "the Mem0 memory service"),
    (
        "memory.",
        "TEA's long-term memory backends (SQLite, DuckDB, cloud storage)",
    ),
    ("neo4j.", "a Neo4j database"),
    ("notify", "desktop notifications"),
    (
        "obs.",
        "TEA's observability log (Weft journals every run: `weft runs show`)",
    ),
    (
        "opik.",
        "the Opik service (Weft exports OpenTelemetry traces: `--otel`)",
    ),
    (
        "plan.",
        "TEA's built-in planner (decompose, execute and replan a task with a model)",
    ),
    ("rag.llamaindex.", "the LlamaIndex library and its indexes"),
    ("ratelimit.", "TEA's rate limiter"),
    ("reason.dspy.", "the DSPy library"),
    (
        "reason.",
        "TEA's built-in reasoning patterns (ReAct, decomposition; Weft runs `reason.cot` and `reason.self_correct`)",
    ),
    (
        "reflection.",
        "TEA's reflection loop (generate, evaluate, correct)",
    ),
    (
        "schema.",
        "TEA's JSON Schema loader (schemas from files, URLs and Git references, deep-merged)",
    ),
    (
        "secrets.",
        "TEA's secret backends (Weft's code and templates read `secrets.NAME`)",
    ),
    ("semtools.", "the SemTools command-line search"),
    ("session.", "TEA's session store"),
    ("storage.", "TEA's cloud storage (fsspec)"),
    ("text.", "TEA's citation formatter"),
    (
        "trace.",
        "TEA's tracer (Weft journals every step and exports OpenTelemetry traces)",
    ),
    (
        "validate.",
        "TEA's schema-guided extraction prompts (Weft runs `validate.extraction`)",
    ),
    (
        "vector.",
        "TEA's vector store (Weft's `llm.embed` gives the vectors)",
    ),
    (
        "web.",
        "web scraping and search services (Firecrawl, ScrapeGraphAI, Perplexity)",
    ),
];

/// What TEA action `uses` needs that Weft does not have, when `uses` is one of TEA's
/// actions (also in its legacy `actions.NAME` spelling).
pub(super) fn needs(uses: &str) -> Option<&'static str> {
    let name = legacy_name(uses).unwrap_or_else(|| uses.to_owned());
    FAMILIES
        .iter()
        .find(|(prefix, _)| {
            if prefix.ends_with('.') {
                name.starts_with(prefix) && name.len() > prefix.len()
            } else {
                name == *prefix
            }
        })
        .map(|(_, need)| *need)
}

/// `actions.a2a_send` is TEA's older spelling of `a2a.send`: the family is the part
/// before the first `_`.
fn legacy_name(uses: &str) -> Option<String> {
    let rest = uses.strip_prefix("actions.")?;
    Some(match rest.split_once('_') {
        Some((family, action)) => format!("{family}.{action}"),
        None => rest.to_owned(),
    })
}

/// The message of a node whose TEA action Weft does not run.
pub(super) fn message(uses: &str, need: &str) -> String {
    format!("`{uses}` is an action of The Edge Agent that needs {need}; Weft does not have it")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tea_s_own_actions_are_known_by_family_and_by_their_legacy_names() {
        assert!(needs("memory.mem0.add").unwrap().contains("Mem0"));
        assert!(needs("memory.grep").unwrap().contains("long-term memory"));
        assert!(needs("reason.dspy.cot").unwrap().contains("DSPy"));
        assert!(needs("reason.react").unwrap().contains("reasoning"));
        assert!(
            needs("actions.a2a_send")
                .unwrap()
                .contains("agent-to-agent")
        );
        assert!(needs("notify").is_some());
    }

    #[test]
    fn names_tea_does_not_have_either_are_not_foreign() {
        for name in [
            "state.set",
            "core.switch",
            "llm.embedding",
            "notify.me",
            "plan.",
            "web",
        ] {
            assert_eq!(needs(name), None, "{name}");
        }
    }
}
