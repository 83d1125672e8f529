//! Weft's tables in PostgreSQL: all in the schema `weft`, created and migrated when a
//! store connects, under an advisory lock so that workers starting together create them
//! once.
//!
//! A run's row also carries its lease (see [`super::leases`]): `lease_epoch`, the
//! fencing number every claim raises, `lease_expires_ms`, and `ready_ms`, since when a
//! queued run has waited (workers take the longest-waiting first). A journal entry
//! records the lease it was written under (`epoch`, none when unfenced) and when, so
//! an operator can tell which holder of a run committed what.
//!
//! JSON is kept as `text`, not `jsonb`: `jsonb` reorders object keys, and a run's output
//! must read back in the order it was written. Ids are `COLLATE "C"` so that PostgreSQL
//! orders and pages them by bytes, as the other stores do.

use super::pg_err;
use deadpool_postgres::{Client, Transaction};
use weft_core::ports::StoreError;

/// The schema version this Weft writes; a database at a higher one is refused.
pub(super) const SCHEMA_VERSION: i64 = 2;

/// The advisory lock key that serializes schema creation (any constant of Weft's own).
const SCHEMA_LOCK: i64 = 0x5745_4654_0001;

const SCHEMA: &str = r#"
CREATE SCHEMA IF NOT EXISTS weft;
CREATE TABLE IF NOT EXISTS weft.meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS weft.flows (hash text PRIMARY KEY, ir text NOT NULL);
CREATE TABLE IF NOT EXISTS weft.runs (
    id text COLLATE "C" PRIMARY KEY, flow_hash text NOT NULL, flow_name text NOT NULL,
    source text, source_hash text, dialect text, input text NOT NULL,
    status text NOT NULL, output text, state text, error text, waiting text,
    usage text NOT NULL, owner text, created_ms bigint NOT NULL, updated_ms bigint NOT NULL,
    scopes text, view text, settings text, retries integer NOT NULL DEFAULT 0,
    flow_id text, wake_ms bigint,
    lease_epoch bigint NOT NULL DEFAULT 0, lease_expires_ms bigint, ready_ms bigint);
CREATE INDEX IF NOT EXISTS runs_by_time ON weft.runs (created_ms DESC, id DESC);
CREATE INDEX IF NOT EXISTS runs_by_status ON weft.runs (status, created_ms DESC, id DESC);
CREATE INDEX IF NOT EXISTS runs_ready ON weft.runs (ready_ms, id) WHERE status = 'queued';
CREATE INDEX IF NOT EXISTS runs_leased ON weft.runs (lease_expires_ms) WHERE status = 'running';
CREATE TABLE IF NOT EXISTS weft.sources (
    id text COLLATE "C" PRIMARY KEY, name text NOT NULL, dialect text NOT NULL,
    text text NOT NULL, created_ms bigint NOT NULL);
CREATE INDEX IF NOT EXISTS sources_by_time ON weft.sources (created_ms DESC, id DESC);
CREATE TABLE IF NOT EXISTS weft.flow_versions (
    name text COLLATE "C" NOT NULL, version integer NOT NULL, flow_id text NOT NULL,
    created_ms bigint NOT NULL, PRIMARY KEY (name, version));
CREATE TABLE IF NOT EXISTS weft.scoped (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS weft.journal (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, run_id text COLLATE "C" NOT NULL,
    key text NOT NULL, kind text NOT NULL, value text NOT NULL,
    epoch bigint, written_ms bigint NOT NULL
        DEFAULT (extract(epoch FROM clock_timestamp()) * 1000)::bigint);
CREATE INDEX IF NOT EXISTS journal_by_run ON weft.journal (run_id, id);
CREATE TABLE IF NOT EXISTS weft.events (
    run_id text COLLATE "C" NOT NULL, seq bigint NOT NULL, at_ms bigint NOT NULL,
    body text NOT NULL, PRIMARY KEY (run_id, seq));
CREATE TABLE IF NOT EXISTS weft.schedules (id text COLLATE "C" PRIMARY KEY, doc text NOT NULL);
CREATE TABLE IF NOT EXISTS weft.hooks (name text COLLATE "C" PRIMARY KEY, doc text NOT NULL);
CREATE TABLE IF NOT EXISTS weft.firings (
    schedule_id text COLLATE "C" NOT NULL, fire_ms bigint NOT NULL, outcome text NOT NULL,
    run_id text, missed integer NOT NULL, at_ms bigint NOT NULL, error text,
    PRIMARY KEY (schedule_id, fire_ms));
CREATE TABLE IF NOT EXISTS weft.threads (
    id text COLLATE "C" PRIMARY KEY, metadata text NOT NULL, created_ms bigint NOT NULL,
    updated_ms bigint NOT NULL, runs bigint NOT NULL, last_run text, state text);
CREATE INDEX IF NOT EXISTS threads_by_time ON weft.threads (created_ms DESC, id DESC);
CREATE TABLE IF NOT EXISTS weft.thread_runs (
    thread_id text COLLATE "C" NOT NULL, n bigint NOT NULL, run_id text NOT NULL,
    PRIMARY KEY (thread_id, n));
CREATE TABLE IF NOT EXISTS weft.api_keys (
    id text COLLATE "C" PRIMARY KEY, name text NOT NULL, tenant text NOT NULL,
    scopes text NOT NULL, hash text NOT NULL UNIQUE, created_ms bigint NOT NULL,
    last_used_ms bigint, expires_ms bigint, revoked_ms bigint);
CREATE TABLE IF NOT EXISTS weft.audit (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, at_ms bigint NOT NULL,
    principal text NOT NULL, principal_name text NOT NULL, tenant text NOT NULL,
    action text NOT NULL, object text NOT NULL, outcome integer NOT NULL,
    request_id text NOT NULL);
"#;

/// Indexes on columns a migration may have added, made once the migrations ran.
const LATE_SCHEMA: &str =
    "CREATE INDEX IF NOT EXISTS runs_waking ON weft.runs (wake_ms) WHERE status = 'paused';";

/// What each schema version adds to the one before, by the version it leads to.
const MIGRATIONS: &[(i64, &str)] = &[(
    2,
    "ALTER TABLE weft.runs ADD COLUMN IF NOT EXISTS wake_ms bigint;",
)];

/// Creates Weft's schema, or checks and upgrades the one there; `shown` names the
/// database in errors.
pub(super) async fn prepare(client: &mut Client, shown: &str) -> Result<(), StoreError> {
    let tx = client
        .transaction()
        .await
        .map_err(|e| pg_err("schema", e))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .await
        .map_err(|e| pg_err("schema lock", e))?;
    let found = existing_version(&tx, shown).await?;
    if let Some(v) = found
        && v > SCHEMA_VERSION
    {
        return Err(StoreError::TooNew(format!(
            "{shown} was written by a newer Weft (schema {v}; this one reads up to {SCHEMA_VERSION}): upgrade Weft to use it, or choose another database with --db or WEFT_DB"
        )));
    }
    tx.batch_execute(SCHEMA)
        .await
        .map_err(|e| pg_err("creating Weft's tables", e))?;
    let from = found.unwrap_or(SCHEMA_VERSION);
    for (_, sql) in MIGRATIONS.iter().filter(|(to, _)| *to > from) {
        tx.batch_execute(sql)
            .await
            .map_err(|e| pg_err("upgrading Weft's tables", e))?;
    }
    tx.batch_execute(LATE_SCHEMA)
        .await
        .map_err(|e| pg_err("creating Weft's indexes", e))?;
    tx.execute(
        "INSERT INTO weft.meta (key, value) VALUES ('schema_version', $1)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        &[&SCHEMA_VERSION.to_string()],
    )
    .await
    .map_err(|e| pg_err("schema version", e))?;
    tx.commit().await.map_err(|e| pg_err("schema commit", e))
}

/// The schema version recorded in `weft.meta`; `None` when there is no `weft` schema.
/// A `weft` schema without Weft's `meta` table belongs to something else.
async fn existing_version(tx: &Transaction<'_>, shown: &str) -> Result<Option<i64>, StoreError> {
    let row = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'weft'),
                    to_regclass('weft.meta') IS NOT NULL",
            &[],
        )
        .await
        .map_err(|e| pg_err("schema", e))?;
    let (schema, meta): (bool, bool) = (row.get(0), row.get(1));
    if !schema {
        return Ok(None);
    }
    if !meta {
        return Err(StoreError::Unusable(format!(
            "{shown} has a schema `weft` that is not Weft's (it has no table weft.meta); Weft leaves it alone: choose another database with --db or WEFT_DB"
        )));
    }
    let value: Option<String> = tx
        .query_opt(
            "SELECT value FROM weft.meta WHERE key = 'schema_version'",
            &[],
        )
        .await
        .map_err(|e| pg_err("schema version", e))?
        .map(|r| r.get(0));
    match value {
        None => Ok(None),
        Some(v) => v.parse().map(Some).map_err(|_| {
            StoreError::Corrupt(format!(
                "{shown}: weft.meta holds the schema version `{v}`, which is not a number"
            ))
        }),
    }
}
