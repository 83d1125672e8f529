//! The `KeyStore` contract, held by every store: keys read back as written (their
//! scopes in order), are found by the hash of their secret only, a clash of id or hash
//! is a conflict, and revoking or using a key is recorded.

use std::sync::Arc;
use weft_core::ports::{ApiKey, KeyStore, Scope, Store, StoreError};

mod stores;

fn keys(store: &Arc<dyn Store>) -> &dyn KeyStore {
    store.keys().expect("every store keeps keys")
}

fn key(id: &str, hash: &str, created_ms: i64) -> ApiKey {
    ApiKey {
        id: id.into(),
        name: format!("{id}'s name"),
        tenant: "default".into(),
        scopes: vec![Scope::RunsRead, Scope::ApprovalsWrite],
        hash: hash.into(),
        created_ms,
        last_used_ms: None,
        expires_ms: Some(9_000),
        revoked_ms: None,
    }
}

#[tokio::test]
async fn keys_read_back_by_their_hash_and_a_clash_is_a_conflict() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        let k = keys(&store);
        assert!(k.keys().await.unwrap().is_empty(), "{name}");
        let first = key("k1", "aa11", 20);
        k.put_key(&first).await.unwrap();
        k.put_key(&key("k0", "bb22", 10)).await.unwrap();
        assert_eq!(
            k.key_by_hash("aa11").await.unwrap(),
            Some(first.clone()),
            "{name}"
        );
        assert_eq!(
            k.key_by_hash("k1").await.unwrap(),
            None,
            "{name}: an id is not a secret"
        );
        let listed: Vec<String> = k.keys().await.unwrap().into_iter().map(|k| k.id).collect();
        assert_eq!(listed, ["k0", "k1"], "{name}: oldest first");
        for clash in [key("k1", "cc33", 30), key("k2", "aa11", 30)] {
            assert!(
                matches!(k.put_key(&clash).await, Err(StoreError::Conflict(_))),
                "{name}: {clash:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_revoked_key_stays_revoked_as_of_its_first_revocation() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        let k = keys(&store);
        k.put_key(&key("k1", "aa11", 20)).await.unwrap();
        k.touch_key("k1", 50).await.unwrap();
        assert!(k.revoke_key("k1", 100).await.unwrap(), "{name}");
        assert!(k.revoke_key("k1", 200).await.unwrap(), "{name}");
        assert!(!k.revoke_key("nobody", 200).await.unwrap(), "{name}");
        let back = k.key_by_hash("aa11").await.unwrap().unwrap();
        assert_eq!(
            (back.last_used_ms, back.revoked_ms),
            (Some(50), Some(100)),
            "{name}"
        );
        assert!(!back.usable_at(60), "{name}: revoked");
        let fresh = key("k2", "bb22", 20);
        assert!(
            fresh.usable_at(8_999) && !fresh.usable_at(9_000),
            "{name}: expiry"
        );
    }
}
