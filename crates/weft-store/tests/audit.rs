//! The `AuditStore` contract, held by every store: entries are numbered in the order
//! they were appended and read back newest first, a page at a time, by tenant.

use std::sync::Arc;
use weft_core::ports::{AuditEntry, AuditQuery, AuditStore, Store};

mod stores;

fn audit(store: &Arc<dyn Store>) -> &dyn AuditStore {
    store.audit().expect("every store keeps an audit log")
}

fn entry(n: i64, tenant: &str) -> AuditEntry {
    AuditEntry {
        seq: 0,
        at_ms: 1_000 + n,
        principal: "key_1".into(),
        principal_name: "ops".into(),
        tenant: tenant.into(),
        action: "POST /v1/runs".into(),
        object: format!("/v1/runs/{n}"),
        outcome: 202,
        request_id: format!("req-{n}"),
    }
}

#[tokio::test]
async fn entries_read_back_newest_first_a_page_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores::all(&dir).await {
        let log = audit(&store);
        log.append_audit(&[entry(1, "default"), entry(2, "acme")])
            .await
            .unwrap();
        log.append_audit(&[entry(3, "default")]).await.unwrap();
        let all = log
            .audit(&AuditQuery {
                limit: 10,
                ..AuditQuery::default()
            })
            .await
            .unwrap();
        let ids: Vec<&str> = all.iter().map(|e| e.request_id.as_str()).collect();
        assert_eq!(ids, ["req-3", "req-2", "req-1"], "{name}");
        assert!(all[0].seq > all[1].seq && all[1].seq > all[2].seq, "{name}");
        assert_eq!(
            all[2],
            AuditEntry {
                seq: all[2].seq,
                ..entry(1, "default")
            },
            "{name}"
        );
        let page = log
            .audit(&AuditQuery {
                limit: 1,
                before: Some(all[0].seq),
                tenant: Some("default".into()),
            })
            .await
            .unwrap();
        assert_eq!(page.len(), 1, "{name}");
        assert_eq!(
            page[0].request_id, "req-1",
            "{name}: the tenant's older entry"
        );
    }
}
