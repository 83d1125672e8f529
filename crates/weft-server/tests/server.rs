//! The API over a real socket: a server on 127.0.0.1, reqwest as the client, a SQLite
//! file as the store.

mod support;

use serde_json::{Value, json};
use std::sync::Arc;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_pauses_is_approved_over_the_api_and_its_stream_follows_to_the_end() {
    let s = server(None).await;
    let (status, created) = s.post("/v1/runs", json!({"source": APPROVAL})).await;
    assert_eq!(status, 202, "{created}");
    let id = created["run_id"].as_str().unwrap().to_owned();
    let events = format!("/v1/runs/{id}/events");
    let until_pause = s.events(&events, None, |e| e.event == "run_paused").await;
    assert_eq!(until_pause.first().unwrap().event, "run_started");
    // Another client watches while the approval arrives; a second answer loses.
    let watcher = {
        let (base, events, store) = (s.base.clone(), events.clone(), s.store.clone());
        tokio::spawn(async move {
            let s2 = Server {
                base,
                client: reqwest::Client::new(),
                store,
                _dir: tempfile::tempdir().unwrap(),
            };
            s2.events(&events, None, |_| false).await
        })
    };
    let approve = format!("/v1/runs/{id}/approve?wait=10");
    let (a, b) = tokio::join!(
        s.post(&approve, json!({"decision": "approve"})),
        s.post(&approve, json!({"decision": "reject", "note": "no"})),
    );
    let mut codes = [a.0, b.0];
    codes.sort();
    assert_eq!(codes, [200, 409], "{a:?} {b:?}");
    let (winner, loser) = if a.0 == 200 { (a.1, b.1) } else { (b.1, a.1) };
    assert_eq!(winner["status"], "completed");
    assert_eq!(loser["title"], "already answered", "{loser}");
    let all = watcher.await.unwrap();
    assert_eq!(
        all.last().unwrap().event,
        "run_completed",
        "the stream ends with the run"
    );
    let ids: Vec<u64> = all.iter().filter_map(|e| e.id).collect();
    assert_eq!(
        ids,
        (0..all.len() as u64).collect::<Vec<_>>(),
        "no gap, no repeat"
    );
    let (status, shown) = s.get(&format!("/v1/runs/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(shown["status"], "completed");
    assert_eq!(
        shown["journal"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["kind"] == "answer")
            .count(),
        1
    );
    let approval = shown["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == "approval")
        .expect("the approval is a step");
    assert_eq!(approval["status"], "completed");
    assert!(approval["ended_ms"].as_u64() >= approval["started_ms"].as_u64());
    let (_, listed) = s.get("/v1/runs?status=completed").await;
    assert_eq!(listed["runs"][0]["run_id"], id.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reconnects_gets_every_event_once() {
    let s = server(None).await;
    let (status, done) = s
        .post("/v1/runs?wait=10", json!({"source": APPROVAL}))
        .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["status"], "paused");
    let id = done["run_id"].as_str().unwrap().to_owned();
    let (status, _) = s
        .post(
            &format!("/v1/runs/{id}/approve?wait=10"),
            json!({"decision": "approve"}),
        )
        .await;
    assert_eq!(status, 200);
    let events = format!("/v1/runs/{id}/events");
    let whole = s.events(&events, None, |_| false).await;
    assert!(whole.len() > 6, "{whole:?}");
    // Read half, drop the connection, reconnect from the last id seen.
    let half = whole.len() / 2;
    let mut n = 0;
    let first = s
        .events(&events, None, |_| {
            n += 1;
            n == half
        })
        .await;
    let rest = s.events(&events, first.last().unwrap().id, |_| false).await;
    let joined: Vec<Sse> = first.into_iter().chain(rest).collect();
    assert_eq!(joined, whole);
    // `?after=` does the same; `?view=dialect` is refused for nothing but a bad name.
    let tail = s
        .events(&format!("{events}?after=2"), None, |_| false)
        .await;
    assert_eq!(tail, whole[3..]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_problem_objects_and_the_server_keeps_serving() {
    let s = server(None).await;
    let (status, p) = s
        .post(
            "/v1/runs",
            json!({"source": "weft: 1\nname: x\nroot:\n  sequnce: []\n"}),
        )
        .await;
    assert_eq!(status, 400, "{p}");
    assert_eq!(p["title"], "invalid flow");
    let d = &p["diagnostics"][0];
    assert_eq!(
        (d["loc"]["line"].as_u64(), d["loc"]["col"].is_u64()),
        (Some(4), true),
        "{p}"
    );
    assert!(p["detail"].as_str().unwrap().contains("sequnce"), "{p}");
    let (status, p) = s.post("/v1/runs", json!({"sorce": "x"})).await;
    assert_eq!(
        (status, p["title"].as_str()),
        (422, Some("invalid request")),
        "{p}"
    );
    let (status, p) = s.get("/v1/runs/nope").await;
    assert_eq!((status, p["title"].as_str()), (404, Some("no such run")));
    let (status, _) = s.get("/v1/runs/nope/events").await;
    assert_eq!(status, 404);
    let (status, p) = s.get("/v1/nothing").await;
    assert_eq!((status, p["title"].as_str()), (404, Some("not found")));
    // A query string that does not parse is a problem object naming the parameter.
    let (status, p) = s.get("/v1/runs?status=sleeping").await;
    assert_eq!(
        (status, p["title"].as_str()),
        (400, Some("invalid request")),
        "{p}"
    );
    let (status, p) = s
        .post("/v1/runs?wait=5s", json!({"source": APPROVAL}))
        .await;
    assert_eq!(
        (status, p["title"].as_str()),
        (400, Some("invalid query")),
        "{p}"
    );
    assert!(p["detail"].as_str().unwrap().contains("wait"), "{p}");
    let big = "x".repeat(100 << 10);
    let (status, _) = s.post("/v1/runs", json!({"source": big})).await;
    assert_eq!(status, 413);
    let r = s
        .client
        .post(format!("{}/v1/runs", s.base))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(r.headers()["content-type"], "application/problem+json");
    let (status, _) = s.post("/v1/runs?wait=5", json!({"source": APPROVAL})).await;
    assert_eq!(status, 200, "still serving");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_token_every_route_but_healthz_demands_it() {
    let s = server(Some("s3cret")).await;
    let health = s
        .client
        .get(format!("{}/healthz", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let (status, p) = s.get("/v1/runs").await;
    assert_eq!((status, p["title"].as_str()), (401, Some("unauthorized")));
    let (wrong, _) = s.get_as("/v1/runs", Some("s3cre"), None).await;
    assert_eq!(wrong, 401);
    let (right, _) = s.get_as("/v1/runs", Some("s3cret"), None).await;
    assert_eq!(right, 200);
    // With a token, any name reaches it (the token is the guard).
    let (renamed, _) = s
        .get_as("/v1/runs", Some("s3cret"), Some("weft.example:8080"))
        .await;
    assert_eq!(renamed, 200);
}

/// Without a token, a request that names another host (a page that pointed its own name
/// at 127.0.0.1) is refused on every route, `/mcp` included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_only_this_machine_s_names_are_answered() {
    let s = server(None).await;
    for path in ["/v1/runs", "/mcp", "/metrics"] {
        let (status, p) = s.get_as(path, None, Some("evil.example")).await;
        assert_eq!(status, 403, "{path}");
        assert_eq!(p["title"], "forbidden host", "{path}");
    }
    let (local, _) = s.get_as("/v1/runs", None, Some("localhost:1234")).await;
    assert_eq!(local, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_runs_are_retried_and_paused_runs_resumed_over_the_api() {
    let s = server(None).await;
    let flaky = "weft: 1\nname: flaky\nroot:\n  sequence:\n    - {id: once, transform: {output: 1}}\n    - {id: call, handler: {name: flaky}}\n";
    let (status, failed) = s.post("/v1/runs?wait=10", json!({"source": flaky})).await;
    assert_eq!(
        (status, failed["status"].as_str()),
        (200, Some("failed")),
        "{failed}"
    );
    let id = failed["run_id"].as_str().unwrap().to_owned();
    let (status, done) = s
        .post(&format!("/v1/runs/{id}/retry?wait=10"), json!({}))
        .await;
    assert_eq!(
        (status, done["status"].as_str()),
        (200, Some("completed")),
        "{done}"
    );
    assert_eq!(done["output"], "up");
    let (status, p) = s.post(&format!("/v1/runs/{id}/retry"), json!({})).await;
    assert_eq!(
        (status, p["title"].as_str()),
        (409, Some("not allowed now")),
        "{p}"
    );
    let (status, p) = s.post(&format!("/v1/runs/{id}/resume"), json!({})).await;
    assert_eq!(status, 409, "{p}");

    let (_, paused) = s
        .post("/v1/runs?wait=10", json!({"source": APPROVAL}))
        .await;
    let id = paused["run_id"].as_str().unwrap().to_owned();
    let (status, again) = s
        .post(&format!("/v1/runs/{id}/resume?wait=10"), json!({}))
        .await;
    assert_eq!(
        (status, again["status"].as_str()),
        (200, Some("paused")),
        "{again}"
    );
    assert_eq!(again["waiting"][0]["key"], "root/review");
    let (status, p) = s.post("/v1/runs/nope/resume", json!({})).await;
    assert_eq!((status, p["title"].as_str()), (404, Some("no such run")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_idempotency_key_starts_one_run() {
    let s = server(None).await;
    let post = |key: &'static str, input: Value| {
        let (client, base) = (s.client.clone(), s.base.clone());
        async move {
            let r = client
                .post(format!("{base}/v1/runs"))
                .header("Idempotency-Key", key)
                .json(&json!({"source": APPROVAL, "input": input}))
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    // Ten at the same moment, then one later: one run.
    let tries = futures::future::join_all((0..10).map(|_| post("order-17", json!({"n": 1})))).await;
    let later = post("order-17", json!({"n": 1})).await;
    let ids: std::collections::HashSet<&str> = tries
        .iter()
        .chain([&later])
        .map(|(status, v)| {
            assert!(matches!(status, 200 | 202), "{status} {v}");
            v["run_id"].as_str().unwrap()
        })
        .collect();
    assert_eq!(ids.len(), 1, "{tries:?}");
    let (_, listed) = s.get("/v1/runs").await;
    assert_eq!(listed["runs"].as_array().unwrap().len(), 1);
    let (status, p) = post("order-17", json!({"n": 2})).await;
    assert_eq!(
        (status, p["title"].as_str()),
        (422, Some("idempotency key reused")),
        "{p}"
    );
    let (status, _) = post("order-18", json!({"n": 2})).await;
    assert_eq!(status, 202);
    let r = s
        .client
        .post(format!("{}/v1/runs", s.base))
        .header("Idempotency-Key", "k".repeat(300))
        .json(&json!({"source": APPROVAL}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_runs_steps_and_open_streams() {
    let s = server(None).await;
    let (_, paused) = s
        .post("/v1/runs?wait=10", json!({"source": APPROVAL}))
        .await;
    let id = paused["run_id"].as_str().unwrap().to_owned();
    let flaky = "weft: 1\nname: f\nroot: {handler: {name: flaky}}\n";
    let (_, failed) = s.post("/v1/runs?wait=10", json!({"source": flaky})).await;
    assert_eq!(failed["status"], "failed");
    // A watcher of the paused run keeps its stream open.
    let stream = s
        .client
        .get(format!("{}/v1/runs/{id}/events", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let metrics = |s: &Server| {
        let (client, base) = (s.client.clone(), s.base.clone());
        async move {
            let r = client.get(format!("{base}/metrics")).send().await.unwrap();
            assert!(
                r.headers()["content-type"]
                    .to_str()
                    .unwrap()
                    .contains("openmetrics")
            );
            r.text().await.unwrap()
        }
    };
    let text = metrics(&s).await;
    for line in [
        "weft_runs{status=\"paused\"} 1",
        "weft_runs{status=\"failed\"} 1",
        "weft_sse_subscribers 1",
        "weft_queue_depth 0",
        "# EOF",
    ] {
        assert!(text.lines().any(|l| l == line), "no `{line}` in\n{text}");
    }
    drop(stream);
    let (status, _) = s
        .post(
            &format!("/v1/runs/{id}/approve?wait=10"),
            json!({"decision": "approve"}),
        )
        .await;
    assert_eq!(status, 200);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let text = metrics(&s).await;
        if text.lines().any(|l| l == "weft_sse_subscribers 0") {
            assert!(
                text.lines()
                    .any(|l| l == "weft_runs{status=\"completed\"} 1"),
                "{text}"
            );
            assert!(text.lines().any(|l| l.starts_with("weft_steps ")), "{text}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the closed stream is still counted:\n{text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The OpenAPI document lists every route, and every route it lists answers (a missing
/// route would fall through to the `not found` problem or a 405).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_matches_the_routes() {
    let s = server(None).await;
    let (_, run) = s
        .post("/v1/runs?wait=10", json!({"source": APPROVAL}))
        .await;
    let id = run["run_id"].as_str().unwrap();
    let (status, doc) = s.get("/v1/openapi.json").await;
    assert_eq!(status, 200);
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().unwrap();
    let mut checked = 0;
    for (path, ops) in paths {
        for (method, op) in ops.as_object().unwrap() {
            assert!(op["summary"].is_string(), "{method} {path}");
            let url = format!(
                "{}{}",
                s.base,
                path.replace("{id}", id).replace("{name}", "nobody")
            );
            let req = match method.as_str() {
                "get" => s.client.get(&url),
                "post" => s.client.post(&url).json(&json!({})),
                "delete" => s.client.delete(&url),
                other => panic!("{other} {path}"),
            };
            // Streams are only opened: their status says the route exists.
            let r = req.send().await.unwrap();
            let status = r.status().as_u16();
            assert_ne!(status, 405, "{method} {path}");
            if status == 404 {
                let p: Value = r.json().await.unwrap();
                assert_ne!(p["title"], "not found", "{method} {path} is not routed");
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 28, "{paths:?}");
    assert!(paths["/v1/runs"]["post"]["requestBody"]["content"]["application/json"]["schema"]["properties"]["source"].is_object());
    let (status, p) = s.get("/v1/nothing").await;
    assert_eq!((status, p["title"].as_str()), (404, Some("not found")));
}

/// 500 runs posted at once all complete, each with its own events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_runs_posted_at_once_all_complete() {
    let s = server(None).await;
    let flow = "weft: 1\nname: five\nroot:\n  sequence:\n    - {id: a, transform: {output: '{{ input.n }}'}}\n    - {id: b, transform: {output: '{{ input + 1 }}'}}\n    - {id: c, transform: {output: '{{ input * 2 }}'}}\n    - {id: d, transform: {output: '{{ input - 1 }}'}}\n    - {id: e, transform: {output: {n: '{{ input }}'}}}\n";
    let started = std::time::Instant::now();
    let answers = futures::future::join_all((0..500).map(|n| {
        let (client, base) = (s.client.clone(), s.base.clone());
        async move {
            let r = client
                .post(format!("{base}/v1/runs?wait=60"))
                .json(&json!({"source": flow, "input": {"n": n}}))
                .send()
                .await
                .unwrap();
            (n, r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    }))
    .await;
    for (n, status, v) in &answers {
        assert_eq!(
            (*status, v["status"].as_str()),
            (200, Some("completed")),
            "{v}"
        );
        assert_eq!(v["output"]["n"], json!((n + 1) * 2 - 1));
    }
    eprintln!("500 runs through the API in {:?}", started.elapsed());
    let (_, listed) = s.get("/v1/runs?status=completed&limit=1000").await;
    assert_eq!(listed["runs"].as_array().unwrap().len(), 500);
    let id = answers[0].2["run_id"].as_str().unwrap();
    let (status, _) = s.get(&format!("/v1/runs/{id}")).await;
    assert_eq!(status, 200);
}

/// With `--max-runs 2`, six runs posted at once: two run, four wait as `queued` (and
/// `/metrics` says so), at most two handlers ever run at once, and all six complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_beyond_the_limit_wait_as_queued() {
    let slow = Arc::new(Slow::default());
    let s = server_with(None, Some(2), slow.clone()).await;
    let flow = "weft: 1\nname: slow\nroot: {handler: {name: slow}}\n";
    let mut statuses = Vec::new();
    let mut ids = Vec::new();
    for _ in 0..6 {
        let (status, v) = s.post("/v1/runs", json!({"source": flow})).await;
        assert_eq!(status, 202, "{v}");
        statuses.push(v["status"].as_str().unwrap().to_owned());
        ids.push(v["run_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(
        statuses.iter().filter(|s| *s == "queued").count(),
        4,
        "{statuses:?}"
    );
    let (_, queued) = s.get("/v1/runs?status=queued").await;
    assert!(!queued["runs"].as_array().unwrap().is_empty());
    let metrics = s
        .client
        .get(format!("{}/metrics", s.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("weft_queue_depth ") && l != "weft_queue_depth 0"),
        "{metrics}"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    for id in &ids {
        loop {
            let (_, v) = s.get(&format!("/v1/runs/{id}")).await;
            if v["status"] == "completed" {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{v}");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    assert_eq!(slow.peak.load(std::sync::atomic::Ordering::SeqCst), 2);
    // A queued run's events start with its start.
    let all = s
        .events(&format!("/v1/runs/{}/events", ids[5]), None, |_| false)
        .await;
    assert_eq!(all.first().unwrap().event, "run_started");
    assert_eq!(all.last().unwrap().event, "run_completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_from_an_allowed_origin_may_call_the_api_and_read_where_a_run_is() {
    let s = server_configured(Arc::new(Slow::default()), |c| {
        c.token = Some("s3cret".into());
        c.allowed_origins = vec!["https://chat.example.com".into()];
    })
    .await;
    let preflight = s
        .client
        .request(reqwest::Method::OPTIONS, format!("{}/threads", s.base))
        .header("origin", "https://chat.example.com")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "x-api-key, content-type")
        .send()
        .await
        .unwrap();
    // Answered before the token is asked for: a preflight carries none.
    assert_eq!(preflight.status(), 200);
    let allowed = |r: &reqwest::Response, h: &str| {
        r.headers()
            .get(h)
            .map(|v| v.to_str().unwrap().to_ascii_lowercase())
    };
    assert_eq!(
        allowed(&preflight, "access-control-allow-origin").as_deref(),
        Some("https://chat.example.com")
    );
    let asked = allowed(&preflight, "access-control-allow-headers").unwrap();
    assert!(
        asked.contains("x-api-key") && asked.contains("content-type"),
        "{asked}"
    );
    let created = s
        .client
        .post(format!("{}/threads", s.base))
        .header("origin", "https://chat.example.com")
        .header("x-api-key", "s3cret")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 200);
    let exposed = allowed(&created, "access-control-expose-headers").unwrap();
    assert!(
        exposed.contains("content-location") && exposed.contains("location"),
        "{exposed}"
    );
    // Another origin gets no CORS headers, so its browser keeps the answer from it.
    let other = s
        .client
        .get(format!("{}/healthz", s.base))
        .header("origin", "https://evil.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(allowed(&other, "access-control-allow-origin"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_allowed_origins_no_cors_headers_are_sent() {
    let s = server(None).await;
    let r = s
        .client
        .get(format!("{}/healthz", s.base))
        .header("origin", "https://chat.example.com")
        .send()
        .await
        .unwrap();
    assert!(r.headers().get("access-control-allow-origin").is_none());
}
