//! The memory store's API keys.

use super::{MemoryStore, poisoned};
use crate::key_row::key_exists;
use async_trait::async_trait;
use weft_core::ports::{ApiKey, KeyStore, StoreError};

#[async_trait]
impl KeyStore for MemoryStore {
    async fn put_key(&self, key: &ApiKey) -> Result<(), StoreError> {
        let mut keys = self.keys.lock().map_err(|_| poisoned())?;
        if keys.iter().any(|k| k.id == key.id || k.hash == key.hash) {
            return Err(key_exists(key));
        }
        keys.push(key.clone());
        Ok(())
    }
    async fn key_by_hash(&self, hash: &str) -> Result<Option<ApiKey>, StoreError> {
        let keys = self.keys.lock().map_err(|_| poisoned())?;
        Ok(keys.iter().find(|k| k.hash == hash).cloned())
    }
    async fn keys(&self) -> Result<Vec<ApiKey>, StoreError> {
        let mut keys = self.keys.lock().map_err(|_| poisoned())?.clone();
        keys.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
        Ok(keys)
    }
    async fn revoke_key(&self, id: &str, now_ms: i64) -> Result<bool, StoreError> {
        let mut keys = self.keys.lock().map_err(|_| poisoned())?;
        Ok(match keys.iter_mut().find(|k| k.id == id) {
            Some(k) => {
                k.revoked_ms.get_or_insert(now_ms);
                true
            }
            None => false,
        })
    }
    async fn touch_key(&self, id: &str, now_ms: i64) -> Result<(), StoreError> {
        let mut keys = self.keys.lock().map_err(|_| poisoned())?;
        if let Some(k) = keys.iter_mut().find(|k| k.id == id) {
            k.last_used_ms = Some(now_ms);
        }
        Ok(())
    }
}
