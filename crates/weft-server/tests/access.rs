//! Who may do what, walked over every access rule of every door (the `/v1` API,
//! LangGraph's and AgentFlow's doors, the page, MCP) against a real server on a SQLite
//! file: a key without a route's scope is refused with `403` naming it, a request
//! without a key (or with a revoked one) with `401`, and an approval records the key
//! that answered it, not the name the request typed. A new route is walked as soon as
//! it has a rule; one without a rule is refused to everyone.

mod support;

use serde_json::{Value, json};
use std::time::Duration;
use weft_core::ports::Scope;
use weft_server::keys::{self, NewKey};

async fn key(s: &support::Server, name: &str, scopes: &[Scope]) -> (String, String) {
    let new = NewKey {
        name: name.into(),
        tenant: "default".into(),
        scopes: scopes.to_vec(),
        expires_in: None,
    };
    let (made, secret) = keys::create(s.store.as_ref(), new).await.unwrap();
    (made.id, secret)
}

/// `method path` with `secret` as an `x-api-key` (none when `None`): status and body.
async fn call(
    s: &support::Server,
    method: &str,
    path: &str,
    secret: Option<&str>,
) -> (u16, String) {
    let method = if method == "*" { "POST" } else { method };
    let url = format!("{}{}", s.base, path.replace("{*rest}", "x"));
    let mut req = s
        .client
        .request(method.parse().unwrap(), url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body("{}");
    if let Some(secret) = secret {
        req = req.header("x-api-key", secret);
    }
    let r = tokio::time::timeout(Duration::from_secs(10), req.send())
        .await
        .expect("an answer")
        .unwrap();
    let status = r.status().as_u16();
    (status, r.text().await.unwrap_or_default())
}

/// A route's path with each `{param}` filled.
fn filled(path: &str) -> String {
    let mut out = String::new();
    let mut rest = path;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}').map_or(rest.len(), |c| open + c + 1);
        out.push_str(if rest[open..close].starts_with("{*") {
            "{*rest}"
        } else {
            "nope"
        });
        rest = &rest[close..];
    }
    out + rest
}

#[tokio::test]
async fn every_rule_refuses_a_key_without_its_scope_and_a_caller_without_a_key() {
    let s = support::server(None).await;
    // Two keys, each lacking what the other holds: every scoped route refuses one.
    const READS: &[Scope] = &[Scope::RunsRead, Scope::FlowsRead];
    const WRITES: &[Scope] = &[
        Scope::RunsWrite,
        Scope::FlowsWrite,
        Scope::ApprovalsWrite,
        Scope::SchedulesWrite,
        Scope::HooksWrite,
        Scope::AuditRead,
    ];
    let (_, reads) = key(&s, "reads", READS).await;
    let (_, writes) = key(&s, "writes", WRITES).await;
    let rules = weft_server::access_rules();
    assert!(rules.len() > 60, "every door's routes: {}", rules.len());
    let mut walked = 0;
    for (method, path, scope) in &rules {
        let path = filled(path);
        let (status, body) = call(&s, method, &path, None).await;
        assert_eq!(status, 401, "{method} {path} without a key: {body}");
        let Some(scope) = scope else { continue };
        for (secret, held) in [(&reads, READS), (&writes, WRITES)] {
            let holds = Scope::parse(scope).unwrap().granted_by(held);
            let (status, body) = call(&s, method, &path, Some(secret)).await;
            if holds {
                assert!(
                    ![401, 403].contains(&status),
                    "{method} {path} with its scope: {status} {body}"
                );
            } else {
                assert_eq!(status, 403, "{method} {path} without `{scope}`: {body}");
                assert!(
                    body.contains(&format!("`{scope}`")),
                    "{method} {path}: {body}"
                );
                walked += 1;
            }
        }
    }
    assert!(walked > 50, "{walked} refusals walked");
}

#[tokio::test]
async fn a_store_with_keys_shuts_the_loopback_door_and_a_revoked_key_is_refused() {
    let s = support::server(None).await;
    assert_eq!(
        s.get("/v1/runs").await.0,
        200,
        "no keys: this machine may call"
    );
    let (id, secret) = key(&s, "dashboard", &[Scope::RunsRead]).await;
    // What the server knew of keys (none) lasts a few seconds.
    tokio::time::sleep(keys::KEEP + Duration::from_millis(200)).await;
    assert_eq!(s.get("/v1/runs").await.0, 401);
    assert_eq!(s.get_as("/v1/runs", Some(&secret), None).await.0, 200);
    assert!(
        s.store
            .keys()
            .unwrap()
            .revoke_key(&id, keys::now_ms())
            .await
            .unwrap()
    );
    tokio::time::sleep(keys::KEEP + Duration::from_millis(200)).await;
    let (status, body) = s.get_as("/v1/runs", Some(&secret), None).await;
    assert_eq!(status, 401, "{body}");
    assert!(
        body["detail"].as_str().unwrap().contains("revoked"),
        "{body}"
    );
    // An admin's list never shows a secret or its hash.
    let (_, admin) = key(&s, "ops", &[Scope::Admin]).await;
    let (status, listed) = s.get_as("/v1/keys", Some(&admin), None).await;
    assert_eq!(status, 200);
    let text = listed.to_string();
    assert!(
        !text.contains(&secret) && !text.contains(&keys::hash_secret(&secret)),
        "{text}"
    );
}

#[tokio::test]
async fn an_approval_records_the_key_that_answered_it_not_the_name_it_typed() {
    let s = support::server(None).await;
    let (_, starter) = key(&s, "starter", &[Scope::RunsWrite, Scope::RunsRead]).await;
    let (approver_id, approver) = key(&s, "release-manager", &[Scope::ApprovalsWrite]).await;
    let started = s
        .client
        .post(format!("{}/v1/runs?wait=10", s.base))
        .header("x-api-key", &starter)
        .json(&json!({"source": support::APPROVAL}))
        .send()
        .await
        .unwrap();
    let started: Value = started.json().await.unwrap();
    assert_eq!(started["status"], "paused", "{started}");
    let id = started["run_id"].as_str().unwrap();
    // Starting a run does not let a key answer one.
    let refused = s
        .client
        .post(format!("{}/v1/runs/{id}/approve", s.base))
        .header("x-api-key", &starter)
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 403);
    let answered = s
        .client
        .post(format!("{}/v1/runs/{id}/approve?wait=10", s.base))
        .header("x-api-key", &approver)
        .json(&json!({"decision": "approve", "by": "The CEO"}))
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status().as_u16(), 200);
    let (_, detail) = s
        .get_as(&format!("/v1/runs/{id}"), Some(&starter), None)
        .await;
    let a = &detail["answered"][0];
    assert_eq!(a["by"], "release-manager", "{detail}");
    assert_eq!(a["by_id"], approver_id.as_str());
    assert_eq!(a["by_note"], "The CEO");
}

/// docs/security.md's table of every route's scope is the server's own rules.
#[test]
fn the_security_document_lists_every_rule() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/security.md"
    ))
    .unwrap_or_default();
    let rows: Vec<String> = weft_server::access_rules()
        .into_iter()
        .map(|(method, path, scope)| {
            let method = if method == "*" {
                "any".to_owned()
            } else {
                method
            };
            format!(
                "| {method} | `{path}` | {} |",
                scope.map_or("any caller let in".to_owned(), |s| format!("`{s}`"))
            )
        })
        .collect();
    let missing: Vec<&String> = rows.iter().filter(|r| !doc.contains(r.as_str())).collect();
    assert!(
        missing.is_empty(),
        "docs/security.md lacks these rows:\n{}",
        rows.join("\n")
    );
}

/// Every request that changed something, and every refused one, is in the audit log
/// with who asked, what, and what the server answered; the answer names the request.
#[tokio::test]
async fn the_audit_log_keeps_changes_and_refusals_with_who_and_what() {
    let s = support::server(None).await;
    let (starter_id, starter) = key(&s, "starter", &[Scope::RunsWrite]).await;
    let (_, auditor) = key(&s, "auditor", &[Scope::AuditRead]).await;
    let started = s
        .client
        .post(format!("{}/v1/runs?wait=10", s.base))
        .header("x-api-key", &starter)
        .header("x-request-id", "req-start-1")
        .json(&json!({"source": "weft: 1\nname: one\nroot: {transform: {output: 1}}\n"}))
        .send()
        .await
        .unwrap();
    assert_eq!(started.headers()["x-request-id"], "req-start-1");
    assert_eq!(started.status().as_u16(), 200);
    let (refused, _) = call(&s, "GET", "/v1/runs", Some(&starter)).await;
    assert_eq!(refused, 403);
    let (anonymous, _) = call(&s, "POST", "/v1/runs", None).await;
    assert_eq!(anonymous, 401);
    // Reads are not logged.
    assert_eq!(s.get_as("/v1/audit", Some(&auditor), None).await.0, 200);
    // The writer appends a moment later.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, log) = s.get_as("/v1/audit?limit=10", Some(&auditor), None).await;
    assert_eq!(status, 200, "{log}");
    let entries = log["entries"].as_array().unwrap();
    let find = |action: &str, outcome: u64| {
        entries
            .iter()
            .find(|e| e["action"] == action && e["outcome"] == outcome)
            .unwrap_or_else(|| panic!("no {action} -> {outcome} in {log}"))
    };
    let start = find("POST /v1/runs", 200);
    assert_eq!(start["principal"], starter_id.as_str());
    assert_eq!(start["principal_name"], "starter");
    assert_eq!(start["request_id"], "req-start-1");
    assert_eq!(find("GET /v1/runs", 403)["principal"], starter_id.as_str());
    assert_eq!(find("POST /v1/runs", 401)["principal"], "anonymous");
    assert!(
        !entries.iter().any(|e| e["action"] == "GET /v1/audit"),
        "{log}"
    );
    assert!(
        entries
            .windows(2)
            .all(|w| w[0]["seq"].as_i64() > w[1]["seq"].as_i64())
    );
}
