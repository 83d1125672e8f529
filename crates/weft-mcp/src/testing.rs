//! `test_flow`: a run with no side effects, for a model checking its own work. The host's
//! test engine keeps the run in memory and denies writes; here each `llm` block's model
//! is replaced before the run: a scripted model that gives the block's answer, or the
//! offline local model. No call reaches a paid or remote provider.

use crate::WeftMcp;
use crate::args::{self, TestFlow};
use crate::failure::Failure;
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;
use std::time::Duration;
use weft_core::Flow;
use weft_core::ir::{Block, BlockKind, ModelDef};

/// The model unanswered blocks ask.
const LOCAL_MODEL: &str = "local/smollm2";
/// How long a test run may take unless `wait_seconds` says otherwise.
const DEFAULT_WAIT: Duration = Duration::from_secs(60);

/// Which blocks got an answer, and which ask the local model.
#[derive(Default)]
struct Answered {
    answered: BTreeSet<String>,
    local: BTreeSet<String>,
}

pub(crate) async fn test(mcp: &WeftMcp, a: TestFlow) -> Result<Value, Failure> {
    let Some(engines) = &mcp.options.test_engines else {
        return Err(Failure::new("test_flow is not offered by this server")
            .hint("validate_flow checks a flow without running it; run_flow runs it for real"));
    };
    let text = args::source(&a.source)?;
    let loaded = weft_dialects::load_str(text, "flow", None, a.dialect.as_deref())
        .map_err(|e| Failure::invalid_flow(e.diagnostics))?;
    let mut flow = weft_core::Flow::clone(&loaded.flow);
    let mut seen = Answered::default();
    answer_models(&mut flow, &a.answers, &mut seen);
    let unused: Vec<&String> = a
        .answers
        .keys()
        .filter(|k| !seen.answered.contains(*k))
        .collect();
    if !unused.is_empty() {
        return Err(Failure::new(format!(
            "no llm block has the id of these answers: {}",
            unused.iter().map(|k| crate::failure::quoted(k)).collect::<Vec<_>>().join(", ")
        ))
        .hint("answers are keyed by each llm block's id (or step_id); get_flow view=structure shows them"));
    }
    let engine = engines();
    let answered = weft_dialects::Loaded {
        flow: std::sync::Arc::new(flow),
        ..loaded
    };
    let service = weft_service::Service::new(engine.clone(), None);
    let checked = service.prepare(answered).map_err(Failure::invalid_flow)?;
    let run = service
        .start(&checked, a.input, weft_service::How::default())
        .await?
        .underway;
    let run_id = run.run_id().to_owned();
    let wait = args::wait(a.wait_seconds).unwrap_or(DEFAULT_WAIT);
    let result = match run.within(wait).await {
        Some(ended) => ended?,
        None => {
            let _ = engine.cancel(&run_id).await;
            return Err(Failure::new(format!(
                "the test run did not end or pause within {} s, and was cancelled",
                wait.as_secs_f64()
            ))
            .hint("give wait_seconds (at most 300), or answer slow llm blocks in `answers`"));
        }
    };
    let detail = weft_engine::inspect::run_detail(engine.store().as_ref(), &run_id).await?;
    let mut shown = result.to_json();
    shown["steps"] = json!(detail.map(|d| d.steps).unwrap_or_default());
    shown["answered_blocks"] = json!(seen.answered);
    shown["local_model_blocks"] = json!(seen.local);
    Ok(shown)
}

/// Points every `llm` block of `flow` and its sub-flows at a scripted model giving its
/// answer (when `answers` has its id) or at the local model.
fn answer_models(flow: &mut Flow, answers: &Map<String, Value>, seen: &mut Answered) {
    let mut models = Vec::new();
    flow.root.visit_mut(&mut |b: &mut Block| {
        let (Some(id), BlockKind::Llm(llm)) = (b.id.clone(), &mut b.kind) else {
            if let BlockKind::Llm(llm) = &mut b.kind {
                llm.model = Some(LOCAL_MODEL.to_owned());
            }
            return;
        };
        match answers.get(&id) {
            Some(answer) => {
                let alias = format!("test-answer-{id}");
                models.push((alias.clone(), scripted(answer)));
                llm.model = Some(alias);
                seen.answered.insert(id);
            }
            None => {
                llm.model = Some(LOCAL_MODEL.to_owned());
                seen.local.insert(id);
            }
        }
    });
    flow.models.extend(models);
    for sub in flow.flows.values_mut() {
        answer_models(sub, answers, seen);
    }
}

/// A scripted model that answers every call with `answer` (JSON written as text).
fn scripted(answer: &Value) -> ModelDef {
    let reply = match answer {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut options = indexmap::IndexMap::new();
    options.insert("rules".to_owned(), json!([{"reply": reply}]));
    ModelDef {
        provider: "scripted".into(),
        model: None,
        options,
    }
}
