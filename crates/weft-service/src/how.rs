//! What a front end may say about a run it starts, and the engine's run options built
//! from it: in this one place.

use crate::Checked;
use weft_core::ports::Scopes;
use weft_engine::RunOptions;

/// How a front end starts a run, beyond its flow and input.
#[derive(Debug, Clone, Default)]
pub struct How {
    /// Use this run id (one an idempotency key names) instead of a new one.
    pub run_id: Option<String>,
    /// The file the flow was read from, as the run records it.
    pub file: Option<String>,
    /// The session, user and project the run belongs to.
    pub scopes: Scopes,
    /// Settings stored with the run instead of the front end's own (a door that adds
    /// what it must read back about the run).
    pub settings: Option<serde_json::Value>,
}

impl How {
    /// The engine's options for a run of `checked` (of a flow without text when
    /// `None`), with `default_settings` unless this says otherwise.
    pub(crate) fn options(
        self,
        checked: Option<&Checked>,
        default_settings: Option<&serde_json::Value>,
    ) -> RunOptions {
        let loaded = checked.map(Checked::loaded);
        RunOptions {
            source: self.file,
            source_hash: loaded.map(|l| l.source_hash.clone()),
            dialect: loaded.map(|l| l.dialect.to_owned()),
            run_id: self.run_id,
            scopes: self.scopes,
            view: loaded.and_then(|l| l.events.to_stored()),
            settings: self.settings.or_else(|| default_settings.cloned()),
            flow_source: loaded.map(weft_dialects::Loaded::flow_source),
        }
    }
}
