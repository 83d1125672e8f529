//! The audit log in PostgreSQL: a row per entry in `weft.audit`, numbered as appended.

use super::{PostgresStore, pg_err};
use async_trait::async_trait;
use tokio_postgres::Row;
use weft_core::ports::{AuditEntry, AuditQuery, AuditStore, StoreError};

const COLUMNS: &str =
    "seq, at_ms, principal, principal_name, tenant, action, object, outcome, request_id";

fn entry_from_row(r: &Row) -> Result<AuditEntry, StoreError> {
    let column = super::unreadable("an audit entry");
    let outcome: i32 = r.try_get("outcome").map_err(column)?;
    Ok(AuditEntry {
        seq: r.try_get("seq").map_err(column)?,
        at_ms: r.try_get("at_ms").map_err(column)?,
        principal: r.try_get("principal").map_err(column)?,
        principal_name: r.try_get("principal_name").map_err(column)?,
        tenant: r.try_get("tenant").map_err(column)?,
        action: r.try_get("action").map_err(column)?,
        object: r.try_get("object").map_err(column)?,
        outcome: u16::try_from(outcome)
            .map_err(|_| StoreError::Corrupt(format!("an audit entry's status is {outcome}")))?,
        request_id: r.try_get("request_id").map_err(column)?,
    })
}

#[async_trait]
impl AuditStore for PostgresStore {
    async fn append_audit(&self, entries: &[AuditEntry]) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| pg_err("audit", e))?;
        let stmt = tx
            .prepare_cached(
                "INSERT INTO weft.audit (at_ms, principal, principal_name, tenant, action, object, outcome, request_id)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            )
            .await
            .map_err(|e| pg_err("audit", e))?;
        for e in entries {
            tx.execute(
                &stmt,
                &[
                    &e.at_ms,
                    &e.principal,
                    &e.principal_name,
                    &e.tenant,
                    &e.action,
                    &e.object,
                    &i32::from(e.outcome),
                    &e.request_id,
                ],
            )
            .await
            .map_err(|e| pg_err("audit", e))?;
        }
        tx.commit().await.map_err(|e| pg_err("audit", e))
    }
    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError> {
        let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
        self.client()
            .await?
            .query(
                &format!(
                    "SELECT {COLUMNS} FROM weft.audit
                     WHERE ($1::bigint IS NULL OR seq < $1) AND ($2::text IS NULL OR tenant = $2)
                     ORDER BY seq DESC LIMIT $3"
                ),
                &[&query.before, &query.tenant, &limit],
            )
            .await
            .map_err(|e| pg_err("audit", e))?
            .iter()
            .map(entry_from_row)
            .collect()
    }
}
