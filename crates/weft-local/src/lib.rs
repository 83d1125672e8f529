//! # weft-local
//!
//! Owns the `local/` provider: a GGUF model run by llama.cpp (through `llama-cpp-2`),
//! so that Weft works with no network and no API key. The default model is
//! SmolLM2-135M-Instruct (Q4_1), fetched by `scripts/fetch-model`.
//!
//! Inference runs in a worker process (the `weft` binary started as
//! `weft model-worker <file.gguf>`, see [`worker_main`]): llama.cpp aborts its process on
//! some internal errors, and that must never be Weft's. The worker loads the model once
//! and serves one generation at a time; answers stream back as deltas. Greedy sampling
//! (the default) is deterministic; an `output_schema` constrains sampling with a grammar
//! made from the schema.
//!
//! This crate is the only one that builds llama.cpp (a C++ build of a few minutes); the
//! CLI includes it through its default `local` feature. Must not depend on the engine.

mod client;
pub mod protocol;
mod tools;
mod worker;

pub use client::{LocalModel, ModelCommand, model_path};
pub use worker::worker_main;
