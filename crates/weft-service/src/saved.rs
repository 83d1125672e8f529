//! Flows the store keeps, checked again as this version of Weft reads them: by id (a
//! flow's text stored by any door) or by name and version.

use crate::{Checked, Service};
use weft_core::Diagnostic;
use weft_core::ports::{FlowSource, FlowVersion, StoreError};

/// Why a stored flow cannot be run.
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    /// No flow's text has this id.
    #[error("no flow with id `{0}`")]
    NoSuchId(String),
    /// No flow has this name (or this version).
    #[error("no stored flow `{name}` ({})", .version.map_or("any version".to_owned(), |v| format!("version {v}")))]
    NoSuchName {
        /// The name asked for.
        name: String,
        /// The version asked for, if one was.
        version: Option<u32>,
    },
    /// A version names a text the store no longer has.
    #[error("the text of flow `{name}` version {version} is missing")]
    TextMissing {
        /// The flow's name.
        name: String,
        /// Its version.
        version: u32,
    },
    /// The stored text no longer loads or validates (a newer Weft may read it
    /// differently): its problems, located.
    #[error("the stored flow is not valid now")]
    Invalid(Vec<Diagnostic>),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A named version of a flow, and its text checked.
pub struct Saved {
    /// The version.
    pub version: FlowVersion,
    /// Its text as stored.
    pub source: FlowSource,
    /// Its text checked now.
    pub checked: Checked,
}

impl Service {
    /// The stored flow `id`, checked again.
    pub async fn stored(&self, id: &str) -> Result<Checked, FlowError> {
        let source = self
            .store()
            .get_source(id)
            .await?
            .ok_or_else(|| FlowError::NoSuchId(id.to_owned()))?;
        self.check_source(&source).map_err(FlowError::Invalid)
    }

    /// Version `version` (the latest when `None`) of the flow named `name`, checked
    /// again.
    pub async fn saved(&self, name: &str, version: Option<u32>) -> Result<Saved, FlowError> {
        let store = self.store();
        let found =
            store
                .flow_version(name, version)
                .await?
                .ok_or_else(|| FlowError::NoSuchName {
                    name: name.to_owned(),
                    version,
                })?;
        let source =
            store
                .get_source(&found.flow_id)
                .await?
                .ok_or_else(|| FlowError::TextMissing {
                    name: name.to_owned(),
                    version: found.version,
                })?;
        let checked = self.check_source(&source).map_err(FlowError::Invalid)?;
        Ok(Saved {
            version: found,
            source,
            checked,
        })
    }

    /// A stored text, checked in the dialect it was stored as and shown by its name.
    pub fn check_source(&self, source: &FlowSource) -> Result<Checked, Vec<Diagnostic>> {
        self.check(&source.text, Some(&source.dialect), Some(&source.name))
    }
}
