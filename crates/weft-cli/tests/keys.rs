//! `weft keys` as an operator uses it, with the real binary on a SQLite file and on
//! PostgreSQL: a key's secret is printed once, alone on the last line; lists never show
//! it; bad scopes and tenants keys cannot have yet are refused with exit code 2; and
//! `weft serve` on that database demands a key, lets in what its scopes allow, and
//! refuses a revoked key; `weft audit` shows the refusals.

mod support;

use support::{Env, Served, code, stderr};

fn status(base: &str, path: &str, key: Option<&str>) -> u16 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut req = reqwest::Client::new().get(format!("{base}{path}"));
        if let Some(key) = key {
            req = req.header("x-api-key", key);
        }
        req.send().await.unwrap().status().as_u16()
    })
}

fn keys_round_trip(env: &Env) {
    let made = env.weft(&[
        "keys",
        "create",
        "--scope",
        "runs:read",
        "--name",
        "dashboard",
    ]);
    assert_eq!(code(&made), 0, "{}", stderr(&made));
    let out = String::from_utf8_lossy(&made.stdout).into_owned();
    let secret = out.lines().last().unwrap().to_owned();
    assert!(
        secret.starts_with("weft_") && !secret.contains(' '),
        "{out}"
    );
    assert!(out.lines().next().unwrap().contains("dashboard"), "{out}");

    let listed = env.weft(&["keys", "list", "--json"]);
    let text = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(
        text.contains("\"runs:read\"") && !text.contains(&secret),
        "{text}"
    );
    let id = serde_json::from_str::<serde_json::Value>(text.lines().next().unwrap()).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();

    for (args, says) in [
        (
            vec!["keys", "create", "--scope", "runs:rread"],
            "not a scope",
        ),
        (
            vec!["keys", "create", "--tenant", "acme", "--scope", "admin"],
            "tenant `acme`",
        ),
        (vec!["keys", "revoke", "key_nope"], "no key with id"),
    ] {
        let refused = env.weft(&args);
        assert_eq!(code(&refused), 2, "{args:?}");
        assert!(
            stderr(&refused).contains(says),
            "{args:?}: {}",
            stderr(&refused)
        );
    }

    let served = Served::start(env);
    let base = &served.base;
    assert_eq!(
        status(base, "/v1/runs", None),
        401,
        "a database with keys demands one"
    );
    assert_eq!(status(base, "/v1/runs", Some(&secret)), 200);
    assert_eq!(
        status(base, "/v1/flows", Some(&secret)),
        403,
        "flows:read is not held"
    );
    assert_eq!(status(base, "/healthz", None), 200);
    assert_eq!(code(&env.weft(&["keys", "revoke", &id])), 0);
    std::thread::sleep(weft_server::keys::KEEP + std::time::Duration::from_millis(300));
    assert_eq!(status(base, "/v1/runs", Some(&secret)), 401, "revoked");

    // Each refusal is in the audit log, newest first, with who asked and what (the
    // server's writer appends a moment after it answers).
    std::thread::sleep(std::time::Duration::from_millis(500));
    let audit = env.weft(&["audit", "--json"]);
    assert_eq!(code(&audit), 0, "{}", stderr(&audit));
    let entries: Vec<serde_json::Value> = String::from_utf8_lossy(&audit.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let refused_flows = entries
        .iter()
        .find(|e| e["action"] == "GET /v1/flows" && e["outcome"] == 403)
        .unwrap_or_else(|| panic!("{entries:?}"));
    assert_eq!(refused_flows["principal"], id.as_str());
    assert!(
        entries
            .iter()
            .any(|e| e["principal"] == "anonymous" && e["outcome"] == 401)
    );
    assert!(
        entries
            .windows(2)
            .all(|w| w[0]["seq"].as_i64() > w[1]["seq"].as_i64())
    );
}

#[test]
fn an_operator_makes_lists_and_revokes_keys_on_sqlite() {
    keys_round_trip(&Env::new());
}

#[test]
fn an_operator_makes_lists_and_revokes_keys_on_postgres() {
    if let Some(env) = Env::on_postgres() {
        keys_round_trip(&env);
    }
}
