//! Record and replay of model calls: run a flow once against a real provider with
//! `WEFT_CASSETTE=calls.json WEFT_CASSETTE_MODE=record`, then forever offline with the
//! same file (`replay`, the default mode). A call is matched by a hash of the model id
//! and the whole request; identical requests are answered in the order they were
//! recorded. Errors are recorded too, so a replay takes the same error routes.
//!
//! The file is rewritten whole (to a temporary file, then renamed) after every recorded
//! call, so it is valid whenever the process stops.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use weft_core::hash::content_hash;
use weft_core::ports::{
    DeltaSink, EmbedRequest, EmbedResponse, Model, ModelRequest, ModelResponse,
};
use weft_core::{BlockError, ErrorKind};

/// Whether calls go out and are written down, or are answered from the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CassetteMode {
    /// Call the provider and append each call to the file.
    Record,
    /// Answer from the file; a call it does not hold is an error.
    Replay,
}

impl CassetteMode {
    /// `record` or `replay`.
    pub fn parse(s: &str) -> Result<CassetteMode, String> {
        match s {
            "record" => Ok(CassetteMode::Record),
            "replay" => Ok(CassetteMode::Replay),
            other => Err(format!(
                "unknown cassette mode `{other}` (use record or replay)"
            )),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Interaction {
    key: String,
    model: String,
    /// A chat's `ModelRequest` or an embedding's `EmbedRequest`, as sent.
    request: serde_json::Value,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    deltas: Vec<String>,
    #[serde(flatten)]
    outcome: Outcome,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Outcome {
    Response(ModelResponse),
    Vectors(EmbedResponse),
    Error { kind: String, message: String },
}

impl Outcome {
    fn of<T: Clone>(result: &Result<T, BlockError>, answer: fn(T) -> Outcome) -> Outcome {
        match result {
            Ok(r) => answer(r.clone()),
            Err(e) => Outcome::Error {
                kind: e.kind.as_str().to_owned(),
                message: e.message.clone(),
            },
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Tape {
    weft_cassette: u32,
    interactions: Vec<Interaction>,
}

/// A cassette file shared by every model of the process.
pub struct Cassette {
    path: PathBuf,
    mode: CassetteMode,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    tape: Tape,
    /// Replay: how many answers of each key were served.
    served: HashMap<String, usize>,
}

impl Cassette {
    /// Opens `path` (a missing file is an empty cassette when recording).
    pub fn open(path: &Path, mode: CassetteMode) -> Result<Arc<Cassette>, String> {
        let tape = match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str::<Tape>(&text)
                .map_err(|e| format!("{}: not a Weft cassette: {e}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && mode == CassetteMode::Record => {
                Tape {
                    weft_cassette: 1,
                    interactions: Vec::new(),
                }
            }
            Err(e) => return Err(format!("{}: cannot read the cassette: {e}", path.display())),
        };
        Ok(Arc::new(Cassette {
            path: path.to_owned(),
            mode,
            state: Mutex::new(State {
                tape,
                served: HashMap::new(),
            }),
        }))
    }

    /// Its mode.
    pub fn mode(&self) -> CassetteMode {
        self.mode
    }

    fn key(model: &str, request: &impl Serialize) -> String {
        let text = serde_json::to_string(&(model, request)).unwrap_or_default();
        content_hash(text.as_bytes())[..32].to_owned()
    }

    fn replay(&self, key: &str) -> Option<Interaction> {
        let mut state = self.state.lock().expect("cassette lock");
        let n = state.served.get(key).copied().unwrap_or(0);
        let matching: Vec<&Interaction> = state
            .tape
            .interactions
            .iter()
            .filter(|i| i.key == key)
            .collect();
        // Past the last recording of a request, the last answer repeats.
        let found = matching.get(n).or(matching.last()).map(|i| (*i).clone())?;
        state.served.insert(key.to_owned(), n + 1);
        Some(found)
    }

    fn record(&self, interaction: Interaction) -> Result<(), String> {
        let mut state = self.state.lock().expect("cassette lock");
        state.tape.interactions.push(interaction);
        let text = serde_json::to_string_pretty(&state.tape).map_err(|e| e.to_string())?;
        let tmp = self.path.with_extension("tmp");
        std::fs::write(&tmp, text)
            .and_then(|_| std::fs::rename(&tmp, &self.path))
            .map_err(|e| format!("{}: cannot write the cassette: {e}", self.path.display()))
    }
}

/// A model whose calls go through a cassette.
pub struct Taped {
    /// The real model (absent when replaying: no key or network needed).
    pub inner: Option<Arc<dyn Model>>,
    /// `provider/model` (or the flow's alias), part of each call's key.
    pub id: String,
    /// The cassette.
    pub cassette: Arc<Cassette>,
}

#[async_trait]
impl Model for Taped {
    fn provider(&self) -> &str {
        crate::split_model_id(&self.id).0
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<ModelResponse, BlockError> {
        let key = Cassette::key(&self.id, request);
        match (self.cassette.mode, &self.inner) {
            (CassetteMode::Replay, _) => {
                let found = self.replay(&key)?;
                for d in &found.deltas {
                    on_delta(d);
                }
                match found.outcome {
                    Outcome::Response(r) => Ok(r),
                    Outcome::Error { kind, message } => {
                        Err(BlockError::new(ErrorKind::parse(&kind), message))
                    }
                    Outcome::Vectors(_) => Err(self.mismatch("embedding", "chat")),
                }
            }
            (CassetteMode::Record, None) => Err(self.nothing_to_record()),
            (CassetteMode::Record, Some(inner)) => {
                let deltas = Mutex::new(Vec::new());
                let capture = |d: &str| {
                    deltas.lock().expect("delta lock").push(d.to_owned());
                    on_delta(d);
                };
                let result = inner.complete(request, &capture).await;
                let outcome = Outcome::of(&result, Outcome::Response);
                let deltas = deltas.into_inner().expect("delta lock");
                self.record(key, request, deltas, outcome)?;
                result
            }
        }
    }

    async fn embed(&self, request: &EmbedRequest) -> Result<EmbedResponse, BlockError> {
        let key = Cassette::key(&self.id, request);
        match (self.cassette.mode, &self.inner) {
            (CassetteMode::Replay, _) => match self.replay(&key)?.outcome {
                Outcome::Vectors(r) => Ok(r),
                Outcome::Error { kind, message } => {
                    Err(BlockError::new(ErrorKind::parse(&kind), message))
                }
                Outcome::Response(_) => Err(self.mismatch("chat", "embedding")),
            },
            (CassetteMode::Record, None) => Err(self.nothing_to_record()),
            (CassetteMode::Record, Some(inner)) => {
                let result = inner.embed(request).await;
                let outcome = Outcome::of(&result, Outcome::Vectors);
                self.record(key, request, Vec::new(), outcome)?;
                result
            }
        }
    }
}

impl Taped {
    /// The recorded answer to the call `key`, or the error that none is recorded.
    fn replay(&self, key: &str) -> Result<Interaction, BlockError> {
        self.cassette.replay(key).ok_or_else(|| {
            BlockError::new(
                ErrorKind::Config,
                format!(
                    "the cassette {} holds no answer for this call to `{}` (record it with WEFT_CASSETTE_MODE=record)",
                    self.cassette.path.display(),
                    self.id
                ),
            )
        })
    }

    fn record(
        &self,
        key: String,
        request: &impl Serialize,
        deltas: Vec<String>,
        outcome: Outcome,
    ) -> Result<(), BlockError> {
        let request = serde_json::to_value(request)
            .map_err(|e| BlockError::new(ErrorKind::Store, e.to_string()))?;
        self.cassette
            .record(Interaction {
                key,
                model: self.id.clone(),
                request,
                deltas,
                outcome,
            })
            .map_err(|e| BlockError::new(ErrorKind::Store, e))
    }

    fn nothing_to_record(&self) -> BlockError {
        BlockError::new(
            ErrorKind::Config,
            format!("no model `{}` to record", self.id),
        )
    }

    /// A recorded answer of the other sort than the call (the same request hash for a
    /// chat and an embedding: a corrupted or hand-edited file).
    fn mismatch(&self, recorded: &str, asked: &str) -> BlockError {
        BlockError::new(
            ErrorKind::Config,
            format!(
                "the cassette {} holds an answer of a {recorded} call where this {asked} call to `{}` was expected (record it again)",
                self.cassette.path.display(),
                self.id
            ),
        )
    }
}
