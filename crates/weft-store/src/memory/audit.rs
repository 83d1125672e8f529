//! The memory store's audit log.

use super::{MemoryStore, poisoned};
use async_trait::async_trait;
use weft_core::ports::{AuditEntry, AuditQuery, AuditStore, StoreError};

#[async_trait]
impl AuditStore for MemoryStore {
    async fn append_audit(&self, entries: &[AuditEntry]) -> Result<(), StoreError> {
        let mut log = self.audit.lock().map_err(|_| poisoned())?;
        for e in entries {
            let seq = log.last().map_or(1, |last: &AuditEntry| last.seq + 1);
            log.push(AuditEntry { seq, ..e.clone() });
        }
        Ok(())
    }
    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditEntry>, StoreError> {
        let log = self.audit.lock().map_err(|_| poisoned())?;
        Ok(log
            .iter()
            .rev()
            .filter(|e| query.before.is_none_or(|b| e.seq < b))
            .filter(|e| query.tenant.as_ref().is_none_or(|t| *t == e.tenant))
            .take(query.limit)
            .cloned()
            .collect())
    }
}
