//! The page's HTML as the server serves it (a real socket, a SQLite file): what each
//! address renders, signing in with a token, and the retry plan the page shows. The
//! page in a browser is tested in `weft-cli/tests/page.rs`.

mod support;

use serde_json::{Value, json};
use support::*;

/// A client that does not follow redirects and asks as a browser does.
fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn html(s: &Server, client: &reqwest::Client, path: &str) -> (u16, String) {
    let r = client
        .get(format!("{}{path}", s.base))
        .header("Accept", "text/html")
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// The `class` of the drawn node whose `data-path` is `path`.
fn node_class<'a>(page: &'a str, path: &str) -> &'a str {
    let at = page
        .find(&format!("data-path=\"{path}\""))
        .unwrap_or_else(|| panic!("no node for {path}"));
    let g = page[..at].rfind("<g ").unwrap();
    let class = &page[g..at];
    class
        .split("class=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_run_s_page_draws_its_graph_in_the_run_s_colours_with_its_approval() {
    let s = server(None).await;
    let (_, run) = s.post("/v1/runs?wait=5", json!({"source": APPROVAL})).await;
    assert_eq!(run["status"], "paused", "{run}");
    let id = run["run_id"].as_str().unwrap();
    let c = browser();
    let (status, page) = html(&s, &c, &format!("/runs/{id}")).await;
    assert_eq!(status, 200);
    assert!(
        node_class(&page, "root/draft").contains("state-done"),
        "{page}"
    );
    assert!(node_class(&page, "root/review").contains("state-waiting"));
    assert!(node_class(&page, "root/ship").contains("state-not-reached"));
    assert!(page.contains("Ship it?") && page.contains("data-decision=\"approve\""));
    assert!(
        page.contains("class=\"edge taken\""),
        "the edge into review was taken"
    );
    // The part the script swaps in is the same markup without the frame.
    let (_, part) = html(&s, &c, &format!("/runs/{id}?part=live&step=root/draft")).await;
    assert!(!part.contains("<html") && part.contains("Ship it?"));
    assert!(
        node_class(&part, "root/draft").contains("selected"),
        "?step= selects the step"
    );

    // Answered with a name, the run page says who answered (the caller the server let
    // in: on a server without a token or keys, a caller on this machine), the name they
    // typed beside it, and when.
    let (status, _) = s
        .post(
            &format!("/v1/runs/{id}/approve?wait=5"),
            json!({"decision": "approve", "note": "fine", "by": "Grace"}),
        )
        .await;
    assert_eq!(status, 200);
    let (_, done) = s.get(&format!("/v1/runs/{id}")).await;
    assert_eq!(
        done["answered"][0]["by"], "a caller on this machine",
        "{done}"
    );
    assert_eq!(done["answered"][0]["by_id"], "local", "{done}");
    assert_eq!(done["answered"][0]["by_note"], "Grace", "{done}");
    assert_eq!(done["answered"][0]["decision"], "approve");
    let (_, page) = html(&s, &c, &format!("/runs/{id}")).await;
    assert!(page.contains("Grace") && page.contains("fine"));
    assert!(node_class(&page, "root/ship").contains("state-done"));

    // The list and the inbox.
    let (_, list) = html(&s, &c, "/").await;
    assert!(list.contains(id) && list.contains("status-completed"));
    let (_, inbox) = html(&s, &c, "/approvals").await;
    assert!(inbox.contains("Nothing waits for an answer."));
    for bad in ["/?status=nonsense", "/?cursor=nonsense"] {
        let (status, page) = html(&s, &c, bad).await;
        assert_eq!(status, 400, "{bad}");
        assert!(page.contains("Bad address"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_s_retry_plan_says_what_runs_again_and_what_it_reaches() {
    let s = server(None).await;
    let flaky = "weft: 1\nname: flaky\nroot:\n  sequence:\n    - {id: ask, approval: {prompt: go?}}\n    - {id: call, handler: {name: flaky}}\n    - {id: after, transform: {output: 1}}\n";
    let (_, run) = s.post("/v1/runs?wait=5", json!({"source": flaky})).await;
    let id = run["run_id"].as_str().unwrap().to_owned();
    let (_, failed) = s
        .post(
            &format!("/v1/runs/{id}/approve?wait=5"),
            json!({"decision": "approve"}),
        )
        .await;
    assert_eq!(failed["status"], "failed", "{failed}");
    let (status, plan) = s.get(&format!("/v1/runs/{id}/retry-plan")).await;
    assert_eq!(status, 200);
    assert_eq!(plan["retryable"], true);
    let fate = |path: &str| -> Value {
        plan["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["path"] == path)
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(fate("root/ask")["fate"], "reused", "{plan}");
    assert_eq!(fate("root/call")["fate"], "runs_again");
    assert_eq!(fate("root/call")["effect"], "handler");
    assert_eq!(fate("root/call")["failed"], true);
    assert_eq!(plan["not_reached"][0]["path"], "root/after");
    let (_, page) = html(&s, &browser(), &format!("/runs/{id}")).await;
    assert!(page.contains("id=\"retry-dialog\"") && page.contains("calls a host function"));
    assert!(node_class(&page, "root/call").contains("state-failed"));
    let (status, _) = s.get("/v1/runs/nope/retry-plan").await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_token_a_browser_signs_in_once_and_its_cookie_opens_the_page_and_the_api() {
    let s = server(Some("s3cret")).await;
    let c = browser();
    let r = c
        .get(format!("{}/", s.base))
        .header("Accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303, "a browser is sent to sign in");
    assert_eq!(r.headers()["location"], "/login");
    let (status, login) = html(&s, &c, "/login").await;
    assert_eq!(status, 200);
    assert!(login.contains("type=\"password\""));
    let (status, css) = html(&s, &c, "/assets/weft.css").await;
    assert_eq!(status, 200, "assets need no sign-in");
    assert!(css.contains(".node"));

    let wrong = c
        .post(format!("{}/login", s.base))
        .form(&[("token", "guess")])
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    assert!(wrong.headers().get("set-cookie").is_none());
    let right = c
        .post(format!("{}/login", s.base))
        .form(&[("token", "s3cret")])
        .send()
        .await
        .unwrap();
    assert_eq!(right.status(), 303);
    let cookie = right.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    assert!(!cookie.contains("s3cret"), "the cookie holds no token");
    let session = cookie.split(';').next().unwrap().to_owned();
    for path in ["/", "/v1/runs"] {
        let r = c
            .get(format!("{}{path}", s.base))
            .header("Cookie", &session)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_addresses_are_html_for_the_page_and_json_for_the_api() {
    let s = server(None).await;
    let c = browser();
    let (status, page) = html(&s, &c, "/no/such/page").await;
    assert_eq!(status, 404);
    assert!(page.starts_with("<!DOCTYPE html>"));
    let (status, page) = html(&s, &c, "/runs/nope").await;
    assert_eq!(status, 404);
    assert!(page.contains("No run `nope`"));
    let (status, problem) = s.get("/v1/no/such/route").await;
    assert_eq!(
        (status, problem["title"].as_str()),
        (404, Some("not found"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_s_warnings_are_in_its_detail_and_on_its_page() {
    let s = server(None).await;
    let flow = "weft: 1\nname: climb\nroot:\n  id: climb\n  loop: {until: 'output > 100', max_iterations: 3, warn_at_max: true, body: {transform: {output: '{{ input + 1 }}'}}}\ninput: 0\n";
    let (_, run) = s.post("/v1/runs?wait=5", json!({"source": flow})).await;
    assert_eq!(run["status"], "completed", "{run}");
    let id = run["run_id"].as_str().unwrap();
    let (_, detail) = s.get(&format!("/v1/runs/{id}")).await;
    assert_eq!(
        detail["warnings"][0]["code"], "loop_bound_reached",
        "{detail}"
    );
    let (status, page) = html(&s, &browser(), &format!("/runs/{id}")).await;
    assert_eq!(status, 200);
    assert!(
        page.contains("aria-label=\"Warnings\"")
            && page.contains("the loop `climb` stopped at its bound of 3 iterations"),
        "{page}"
    );
}
