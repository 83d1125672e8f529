//! Schedules, webhooks and `wait` timers as an operator meets them: `weft schedules` and
//! `weft hooks` on the database, `weft serve` processes that fire and serve them, and
//! servers stopped and killed along the way.

mod support;

use serde_json::{Value, json};
use std::collections::HashSet;
use std::time::Duration;
use support::*;

const HELLO: &str = "weft: 1\nname: hello\nroot: {transform: {output: 'hello {{ input.name }}'}}\n";

fn served_pair(env: &Env) -> (Served, Served) {
    (Served::start(env), Served::start(env))
}

fn add_schedule(env: &Env, args: &[&str]) {
    let flow = env.write("hello.yaml", HELLO);
    let flow = flow.display().to_string();
    let mut all = vec!["schedules", "add", flow.as_str(), "--cron", "* * * * * *"];
    all.extend_from_slice(args);
    let out = env.weft(&all);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

/// The firings of schedule `id`, oldest first.
fn firings(env: &Env, id: &str) -> Vec<Value> {
    let shown = stdout_json(&env.weft(&["schedules", "show", id]));
    let mut f = shown["firings"].as_array().unwrap().clone();
    f.reverse();
    f
}

fn runs_of(env: &Env) -> Vec<Value> {
    let out = env.weft(&["runs", "list", "--limit", "1000", "--json"]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn two_servers_on_one_sqlite_file_start_each_firing_once() {
    two_servers_start_each_firing_once(Env::new());
}

#[test]
fn two_servers_on_one_postgres_database_start_each_firing_once() {
    if let Some(env) = Env::on_postgres() {
        two_servers_start_each_firing_once(env);
    }
}

fn two_servers_start_each_firing_once(env: Env) {
    add_schedule(
        &env,
        &["--overlap", "queue", "--input", r#"{"name": "cron"}"#],
    );
    let pair = served_pair(&env);
    std::thread::sleep(Duration::from_secs(10));
    drop(pair);
    let f = firings(&env, "hello");
    let times: Vec<i64> = f.iter().map(|f| f["fire_ms"].as_i64().unwrap()).collect();
    assert!(
        (8..=12).contains(&times.len()),
        "{} firings in 10 s: {f:?}",
        times.len()
    );
    assert_eq!(
        times.iter().collect::<HashSet<_>>().len(),
        times.len(),
        "a fire time twice"
    );
    assert!(
        times.windows(2).all(|w| w[1] - w[0] == 1_000),
        "a second skipped: {times:?}"
    );
    let run_ids: Vec<&str> = f.iter().filter_map(|f| f["run_id"].as_str()).collect();
    assert_eq!(run_ids.iter().collect::<HashSet<_>>().len(), run_ids.len());
    let started = f.iter().filter(|f| f["outcome"] == "started").count();
    assert_eq!(started, run_ids.len(), "{f:?}");
    assert!(
        started + 2 >= f.len(),
        "at most the last firings wait: {f:?}"
    );
    // Every run was started by one firing, and none twice.
    let runs = runs_of(&env);
    assert_eq!(runs.len(), started, "{runs:?}");
    let done: Vec<&Value> = runs.iter().filter(|r| r["status"] == "completed").collect();
    assert!(done.len() + 2 >= runs.len(), "{runs:?}");
}

#[test]
fn a_server_down_for_five_seconds_catches_up_as_each_schedule_says() {
    let env = Env::new();
    add_schedule(
        &env,
        &["--id", "last", "--catch-up", "last", "--overlap", "queue"],
    );
    add_schedule(
        &env,
        &["--id", "all", "--catch-up", "all", "--overlap", "queue"],
    );
    add_schedule(
        &env,
        &["--id", "none", "--catch-up", "none", "--overlap", "queue"],
    );
    let first = Served::start(&env);
    std::thread::sleep(Duration::from_millis(2_500));
    first.kill();
    std::thread::sleep(Duration::from_secs(5));
    let second = Served::start(&env);
    std::thread::sleep(Duration::from_millis(1_500));
    drop(second);

    // `all`: every second in the gap has its firing and run.
    let all = firings(&env, "all");
    let times: Vec<i64> = all.iter().map(|f| f["fire_ms"].as_i64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[1] - w[0] == 1_000), "{times:?}");
    assert!(times.len() >= 8, "{times:?}");
    // `last`: one firing stands for the gap, started, counting what it stands for.
    let last = firings(&env, "last");
    let gap = last
        .windows(2)
        .find(|w| w[1]["fire_ms"].as_i64().unwrap() - w[0]["fire_ms"].as_i64().unwrap() > 1_000);
    let [before, caught] = gap.expect("a gap in the firings of `last`") else {
        unreachable!()
    };
    let skipped =
        (caught["fire_ms"].as_i64().unwrap() - before["fire_ms"].as_i64().unwrap()) / 1_000 - 1;
    assert_eq!(caught["missed"].as_i64().unwrap(), skipped, "{last:?}");
    assert!(caught["run_id"].is_string(), "{caught}");
    // `none`: the gap is one firing recorded missed, with no run.
    let none = firings(&env, "none");
    let missed: Vec<&Value> = none.iter().filter(|f| f["outcome"] == "missed").collect();
    assert_eq!(missed.len(), 1, "{none:?}");
    assert!(missed[0]["run_id"].is_null());
    assert!(missed[0]["missed"].as_i64().unwrap() >= 3, "{none:?}");
}

fn post_hook(base: &str, name: &str, body: &[u8], headers: &[(&str, String)]) -> (u16, Value) {
    let client = reqwest::blocking::Client::new();
    let mut req = client
        .post(format!("{base}/v1/hooks/{name}"))
        .body(body.to_vec());
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    let res = req.send().unwrap();
    let status = res.status().as_u16();
    (status, res.json().unwrap_or(Value::Null))
}

fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[test]
fn webhooks_check_signatures_deduplicate_and_start_runs() {
    let env = Env::new();
    let flow = env.write("hello.yaml", HELLO).display().to_string();
    let out = env.weft(&[
        "schedules",
        "add",
        &flow,
        "--cron",
        "0 0 1 1 *",
        "--id",
        "unused",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let secret = "a-shared-secret-of-some-length";
    let out = env.weft(&["hooks", "add", "signed", "hello", "--secret", secret]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(stdout_json(&out)["secret"], json!(secret));
    let out = env.weft(&[
        "hooks", "add", "token", "hello", "--auth", "bearer", "--secret", secret,
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let served = Served::start(&env);
    let base = &served.base;
    let body = br#"{"name": "hook"}"#;
    let json_type = ("content-type", "application/json".to_owned());

    // A good signature: accepted, and with ?wait the run's output.
    let signed = weft_triggers::hooks::sign(secret, now_s(), body);
    let client = reqwest::blocking::Client::new();
    let res = client
        .post(format!("{base}/v1/hooks/signed?wait=10"))
        .header("content-type", "application/json")
        .header("weft-signature", &signed)
        .body(body.to_vec())
        .send()
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let first: Value = res.json().unwrap();
    assert_eq!(first["output"], json!("hello hook"), "{first}");
    // The same delivery again (a replay within the window): the first run's id.
    let (status, again) = post_hook(
        base,
        "signed",
        body,
        &[json_type.clone(), ("weft-signature", signed.clone())],
    );
    assert_eq!(
        (status, again["run_id"].clone()),
        (200, first["run_id"].clone()),
        "{again}"
    );
    assert_eq!(again["duplicate"], json!(true));
    // A bad signature, a stale one, none: 401 and no run.
    let runs_before = runs_of(&env).len();
    let forged = weft_triggers::hooks::sign("not-the-secret-at-all", now_s(), body);
    let stale = weft_triggers::hooks::sign(secret, now_s() - 3_600, body);
    for headers in [
        vec![json_type.clone(), ("weft-signature", forged)],
        vec![json_type.clone(), ("weft-signature", stale)],
        vec![json_type.clone()],
    ] {
        let (status, problem) = post_hook(base, "signed", body, &headers);
        assert_eq!(status, 401, "{problem}");
        assert!(problem["detail"].is_string(), "{problem}");
    }
    assert_eq!(
        runs_of(&env).len(),
        runs_before,
        "a refused delivery started a run"
    );
    // A body over the server's limit: 413.
    let huge = vec![b'x'; 5 << 20];
    let (status, _) = post_hook(
        base,
        "signed",
        &huge,
        &[(
            "weft-signature",
            weft_triggers::hooks::sign(secret, now_s(), &huge),
        )],
    );
    assert_eq!(status, 413);
    // A bearer hook with a form body: the text is the input; an Idempotency-Key dedupes.
    let auth = ("authorization", format!("Bearer {secret}"));
    let key = ("idempotency-key", "delivery-1".to_owned());
    let form = (
        "content-type",
        "application/x-www-form-urlencoded".to_owned(),
    );
    let (status, accepted) = post_hook(
        base,
        "token",
        b"name=form",
        &[auth.clone(), key.clone(), form.clone()],
    );
    assert_eq!(status, 202, "{accepted}");
    let (status, repeated) = post_hook(base, "token", b"name=form", &[auth.clone(), key, form]);
    assert_eq!(
        (status, &repeated["run_id"]),
        (200, &accepted["run_id"]),
        "{repeated}"
    );
    let (status, _) = post_hook(
        base,
        "token",
        b"{}",
        &[("authorization", "Bearer wrong".into())],
    );
    assert_eq!(status, 401);
    let (status, _) = post_hook(base, "nobody", b"{}", &[auth]);
    assert_eq!(status, 404);
    // The rejections are counted.
    let metrics = client
        .get(format!("{base}/metrics"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(
        metrics.contains("weft_webhook_rejections_total 4"),
        "{metrics}"
    );
}

#[test]
fn a_waiting_run_whose_server_is_killed_finishes_on_time_after_a_restart() {
    let env = Env::new();
    let flow = "weft: 1\nname: sleeper\nroot:\n  sequence:\n    - {id: nap, wait: {for: 3s}}\n    - {transform: {output: rested}}\n";
    let served = Served::start(&env);
    let client = reqwest::blocking::Client::new();
    let started: Value = client
        .post(format!("{}/v1/runs?wait=1", served.base))
        .json(&json!({"source": flow}))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(started["status"], json!("paused"), "{started}");
    let id = started["run_id"].as_str().unwrap().to_owned();
    let wake = started["waiting"][0]["wake_ms"].as_i64().unwrap();
    served.kill();
    std::thread::sleep(Duration::from_millis(1_000));
    let again = Served::start(&env);
    let base = &again.base;
    let finished = loop {
        let run: Value = client
            .get(format!("{base}/v1/runs/{id}"))
            .send()
            .unwrap()
            .json()
            .unwrap();
        if ["completed", "failed", "cancelled"].contains(&run["status"].as_str().unwrap_or("")) {
            break run;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(again);
    assert_eq!(finished["status"], json!("completed"), "{finished}");
    assert_eq!(finished["output"], json!("rested"));
    let ended = finished["updated_ms"].as_i64().unwrap();
    assert!(ended >= wake, "ended {} ms early", wake - ended);
    assert!(ended - wake < 2_000, "ended {} ms late", ended - wake);
}
