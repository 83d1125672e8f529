//! Opening the database a command names: a SQLite file, or a PostgreSQL database that
//! many processes share, which is also the work queue workers take runs from.

use crate::cli::DbArgs;
use crate::commands::Failure;
use crate::settings::{Database, Settings};
use std::sync::Arc;
use std::time::Duration;
use weft_core::ports::{Store, WorkQueue};
use weft_store::{PostgresStore, SqliteStore};

/// An open database.
pub(crate) struct Opened {
    /// Where runs are kept.
    pub(crate) store: Arc<dyn Store>,
    /// Where workers find runs to drive: only on a database processes share.
    pub(crate) queue: Option<Arc<dyn WorkQueue>>,
}

/// Opens the database `--db` or `WEFT_DB` names; on PostgreSQL, the runs this process
/// drives are leased for `lease` at a time.
pub(crate) async fn open(
    db: &DbArgs,
    settings: &Settings,
    lease: Duration,
) -> Result<Opened, Failure> {
    let invalid = |e: weft_core::ports::StoreError| Failure::invalid(format!("error: {e}"));
    match settings.db(db.db.as_deref()) {
        Database::File(path) => {
            let store = SqliteStore::open(path, settings.durability).map_err(invalid)?;
            Ok(Opened {
                store: Arc::new(store),
                queue: None,
            })
        }
        Database::Postgres(url) => {
            let store = Arc::new(
                PostgresStore::connect_with_lease(&url, lease)
                    .await
                    .map_err(invalid)?,
            );
            Ok(Opened {
                store: store.clone(),
                queue: Some(store),
            })
        }
    }
}
