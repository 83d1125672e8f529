//! The model worker: a process (the `weft` binary started as `weft model-worker
//! <file.gguf>`) that loads the model once and answers jobs read on stdin, one JSON line
//! each: a generation, streamed as `delta` lines and ending with `done`, or an embedding,
//! answered with `vectors`; either may end with `error`.
//!
//! Inference runs here and not in Weft's own process because llama.cpp aborts the
//! whole process on some internal errors (a grammar it cannot continue, for one).

use crate::protocol::{Done, Embedded, Job, Request, WorkerLine};
use llama_cpp_2::context::params::{LlamaContextParams, LlamaPoolingType};
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use std::io::{BufRead, Write};
use std::num::NonZeroU32;

/// The line a worker writes once its model is loaded.
pub(crate) const READY: &str = r#"{"ready":true}"#;

/// Threads for inference: the machine's cores, at most 8 (more do not help a small
/// model and starve the engine).
fn threads() -> i32 {
    std::thread::available_parallelism().map_or(2, |n| n.get().min(8) as i32)
}

struct Loaded {
    backend: LlamaBackend,
    model: LlamaModel,
}

fn write_line(out: &mut impl Write, line: &WorkerLine) -> bool {
    serde_json::to_string(line)
        .ok()
        .and_then(|t| writeln!(out, "{t}").and_then(|_| out.flush()).ok())
        .is_some()
}

/// Serves requests until stdin closes. Returns the process exit code.
pub fn worker_main(path: &str) -> i32 {
    let mut backend = match LlamaBackend::init() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("weft model worker: cannot start llama.cpp: {e}");
            return 1;
        }
    };
    backend.void_logs();
    let model = match LlamaModel::load_from_file(&backend, path, &LlamaModelParams::default()) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("weft model worker: cannot load {path}: {e}");
            return 1;
        }
    };
    let loaded = Loaded { backend, model };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if writeln!(out, "{READY}").and_then(|_| out.flush()).is_err() {
        return 1;
    }
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { return 1 };
        let reply = match serde_json::from_str::<Job>(&line) {
            Ok(Job::Generate(req)) => generate(&loaded, &req, &mut |delta| {
                write_line(&mut out, &WorkerLine::Delta(delta.to_owned()))
            })
            .map(WorkerLine::Done),
            Ok(Job::Embed(job)) => embed(&loaded, &job.embed).map(WorkerLine::Vectors),
            Err(e) => Err(format!("unreadable request: {e}")),
        };
        let last = reply.unwrap_or_else(WorkerLine::Error);
        if !write_line(&mut out, &last) {
            return 1;
        }
    }
    0
}

/// Maps the conversation onto the roles the model's chat template knows.
fn chat(req: &Request) -> Result<Vec<LlamaChatMessage>, String> {
    req.messages
        .iter()
        .map(|m| {
            let (role, content) = match m.role.as_str() {
                "system" | "user" | "assistant" => (m.role.clone(), m.content.clone()),
                "tool" => ("user".to_owned(), format!("Tool result: {}", m.content)),
                other => return Err(format!("a message has the role `{other}`")),
            };
            LlamaChatMessage::new(role, content).map_err(|e| e.to_string())
        })
        .collect()
}

/// Embeds each text on its own: the mean of its tokens' hidden states, scaled to unit
/// length (so a dot product is the cosine similarity), in one context sized for the
/// longest text.
fn embed(loaded: &Loaded, texts: &[String]) -> Result<Embedded, String> {
    let model = &loaded.model;
    // Special tokens (BOS) added, none read from the text itself.
    let token_lists: Vec<_> = texts
        .iter()
        .map(|t| model.vocab().tokenize(t.as_bytes(), true, false))
        .collect();
    let longest = token_lists.iter().map(Vec::len).max().unwrap_or(0).max(1);
    if longest > model.n_ctx_train() as usize {
        return Err(format!(
            "a text ({longest} tokens) does not fit the model's context window ({} tokens)",
            model.n_ctx_train()
        ));
    }
    // A text is pooled whole, so it must fit one physical batch.
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(longest as u32 + 8))
        .with_n_batch(longest as u32)
        .with_n_ubatch(longest as u32)
        .with_n_threads(threads())
        .with_n_threads_batch(threads())
        .with_embeddings(true)
        .with_pooling_type(LlamaPoolingType::Mean);
    let mut ctx = model
        .new_context(&loaded.backend, params)
        .map_err(|e| format!("cannot create a context: {e}"))?;
    let mut batch = LlamaBatch::new(longest, 1);
    let mut vectors = Vec::with_capacity(texts.len());
    for tokens in &token_lists {
        ctx.clear_kv_cache();
        batch.clear();
        for (i, t) in tokens.iter().enumerate() {
            batch
                .add(*t, i as i32, &[0], true)
                .map_err(|e| e.to_string())?;
        }
        ctx.decode(&mut batch)
            .map_err(|e| format!("cannot read the text: {e}"))?;
        let pooled = ctx
            .embeddings_seq_ith(0)
            .map_err(|e| format!("the model gave no embedding: {e}"))?;
        let norm = pooled.iter().map(|x| x * x).sum::<f32>().sqrt();
        let scale = if norm > 0.0 { 1.0 / norm } else { 1.0 };
        vectors.push(pooled.iter().map(|x| x * scale).collect());
    }
    Ok(Embedded {
        vectors,
        input_tokens: token_lists.iter().map(|t| t.len() as u64).sum(),
    })
}

fn generate(
    loaded: &Loaded,
    req: &Request,
    on_delta: &mut dyn FnMut(&str) -> bool,
) -> Result<Done, String> {
    let model = &loaded.model;
    let vocab = model.vocab();
    let template = model
        .chat_template(None)
        .map_err(|e| format!("the model has no chat template: {e}"))?;
    let prompt = model
        .apply_chat_template(&template, &chat(req)?, true)
        .map_err(|e| format!("cannot apply the chat template: {e}"))?;
    let tokens = vocab.tokenize(prompt.as_bytes(), false, true);
    let max_new = req.max_tokens.clamp(1, 4096) as usize;
    let n_ctx = (tokens.len() + max_new + 8).min(model.n_ctx_train() as usize);
    if tokens.len() + 1 >= n_ctx {
        return Err(format!(
            "the prompt ({} tokens) does not fit the model's context window ({} tokens)",
            tokens.len(),
            model.n_ctx_train()
        ));
    }
    let n_batch = tokens.len().max(512);
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(n_ctx as u32))
        .with_n_batch(n_batch as u32)
        .with_n_threads(threads())
        .with_n_threads_batch(threads());
    let mut ctx = model
        .new_context(&loaded.backend, params)
        .map_err(|e| format!("cannot create a context: {e}"))?;
    let mut batch = LlamaBatch::new(n_batch, 1);
    let last = tokens.len() - 1;
    for (i, t) in tokens.iter().enumerate() {
        batch
            .add(*t, i as i32, &[0], i == last)
            .map_err(|e| e.to_string())?;
    }
    ctx.decode(&mut batch)
        .map_err(|e| format!("cannot read the prompt: {e}"))?;

    let mut chain = Vec::new();
    if let Some(schema) = &req.schema {
        let grammar = llama_cpp_2::json_schema_to_grammar(&schema.to_string())
            .map_err(|e| format!("the output schema cannot be turned into a grammar: {e}"))?;
        chain.push(
            LlamaSampler::grammar(model, &grammar, "root")
                .map_err(|e| format!("the output grammar does not load: {e}"))?,
        );
    }
    match req.temperature {
        Some(t) if t > 0.0 => {
            chain.push(LlamaSampler::temp(t as f32));
            chain.push(LlamaSampler::dist(req.seed));
        }
        _ => chain.push(LlamaSampler::greedy()),
    }
    // `sample` also accepts the token into every sampler of the chain; accepting it
    // again would corrupt the grammar's state (and llama.cpp aborts).
    let mut sampler = LlamaSampler::chain_simple(chain);

    let mut text = String::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut generated = 0usize;
    let mut position = tokens.len() as i32;
    while generated < max_new {
        let token = sampler.sample(&ctx, batch.n_tokens() - 1);
        if vocab.is_eog(token) {
            break;
        }
        generated += 1;
        pending.extend(vocab.token_to_piece(token, false, None));
        // A token may end inside a UTF-8 character; send only whole characters.
        let valid = match std::str::from_utf8(&pending) {
            Ok(s) => s.len(),
            Err(e) => e.valid_up_to(),
        };
        if valid > 0 {
            let piece = String::from_utf8_lossy(&pending[..valid]).into_owned();
            pending.drain(..valid);
            text.push_str(&piece);
            if !on_delta(&piece) {
                return Err("the engine stopped listening".into());
            }
        }
        batch.clear();
        batch
            .add(token, position, &[0], true)
            .map_err(|e| e.to_string())?;
        position += 1;
        ctx.decode(&mut batch)
            .map_err(|e| format!("generation failed: {e}"))?;
    }
    if !pending.is_empty() {
        let rest = String::from_utf8_lossy(&pending).into_owned();
        text.push_str(&rest);
        on_delta(&rest);
    }
    Ok(Done {
        content: text,
        input_tokens: tokens.len() as u64,
        output_tokens: generated as u64,
    })
}
