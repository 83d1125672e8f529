//! `weft serve` as an operator runs it: the real binary on 127.0.0.1, a real HTTP
//! client, a SQLite file or a PostgreSQL database, and a SIGKILL in the middle of fifty
//! runs.

use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

mod support;

use support::{Env, Served, journaled_steps, line_counts};

const STEPS: usize = 10;

/// Ten steps, each an append to the run's own log and a short sleep.
fn slow_flow() -> String {
    let mut flow = String::from("weft: 1\nname: slow\nroot:\n  sequence:\n");
    for i in 0..STEPS {
        flow.push_str(&format!(
            "    - id: s{i}\n      action: {{uses: file.append, with: {{path: \"{{{{ initial.log }}}}\", content: \"s{i}\\n\"}}}}\n    - id: w{i}\n      action: {{uses: time.sleep, with: {{ms: 40}}}}\n"
        ));
    }
    flow
}

/// Reads a run's whole event stream (it ends with the run), from `after` on.
async fn events(
    client: &reqwest::Client,
    base: &str,
    id: &str,
    after: Option<u64>,
) -> Vec<(u64, String)> {
    let mut req = client.get(format!("{base}/v1/runs/{id}/events"));
    if let Some(a) = after {
        req = req.header("Last-Event-ID", a.to_string());
    }
    let mut body = req.send().await.unwrap().bytes_stream();
    let (mut text, mut out) = (String::new(), Vec::new());
    while let Some(chunk) = body.next().await {
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            let id = block
                .lines()
                .find_map(|l| l.strip_prefix("id:"))
                .map(|v| v.trim().parse().unwrap());
            let kind = block
                .lines()
                .find_map(|l| l.strip_prefix("event:"))
                .map(|v| v.trim().to_owned());
            if let (Some(id), Some(kind)) = (id, kind) {
                out.push((id, kind));
            }
        }
    }
    out
}

/// Fifty runs accepted, the server killed with SIGKILL while they run, then started
/// again: every accepted run completes, no journaled step writes twice (at most the one
/// in flight at the kill does), and each run's event stream, read across the crash and
/// resumed from its middle, has every event once, numbered without a gap.
#[test]
fn a_killed_server_finishes_every_accepted_run_on_restart() {
    killed_server_finishes_every_accepted_run(&Env::new());
}

/// The same with the runs in PostgreSQL.
#[test]
fn a_killed_server_on_postgres_finishes_every_accepted_run_on_restart() {
    if let Some(env) = Env::on_postgres() {
        killed_server_finishes_every_accepted_run(&env);
    }
}

fn killed_server_finishes_every_accepted_run(env: &Env) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = reqwest::Client::new();
    let flow = slow_flow();
    let server = Served::start(env);
    let base = server.base.clone();
    let ids: Vec<String> = runtime.block_on(async {
        let mut ids = Vec::new();
        for i in 0..50 {
            let r = client
                .post(format!("{base}/v1/runs"))
                .json(&json!({"source": flow, "input": {"log": format!("log{i}.txt")}}))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 202);
            let v: Value = r.json().await.unwrap();
            ids.push(v["run_id"].as_str().unwrap().to_owned());
        }
        ids
    });
    // Inside the runs: some steps done, most to come. Waited for, not timed: on a loaded
    // machine a worker may take more than a fixed moment to start the first runs.
    let started = Instant::now();
    while (0..50).all(|i| line_counts(&env.path(&format!("log{i}.txt"))).is_empty()) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no run started a step"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(50));
    server.kill();
    let before: Vec<HashSet<String>> = ids.iter().map(|id| journaled_steps(env, id)).collect();
    let logs_before: Vec<BTreeMap<String, usize>> = (0..50)
        .map(|i| line_counts(&env.path(&format!("log{i}.txt"))))
        .collect();
    assert!(
        before.iter().any(|j| j.len() < STEPS),
        "the kill came after every run had finished"
    );

    let server = Served::start(env);
    let base = server.base.clone();
    let deadline = Instant::now() + Duration::from_secs(120);
    runtime.block_on(async {
        for id in &ids {
            loop {
                let v = support::get_run(&client, &base, id).await;
                if v["status"] == "completed" {
                    break;
                }
                assert!(v["status"] == "running", "run {id}: {v}");
                assert!(
                    Instant::now() < deadline,
                    "run {id} never completed after the restart"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    });
    let mut repeated = 0;
    for (i, journal) in before.iter().enumerate() {
        let after = line_counts(&env.path(&format!("log{i}.txt")));
        let mut repeats = Vec::new();
        for s in 0..STEPS {
            let step = format!("s{s}");
            let n = after.get(&step).copied().unwrap_or(0);
            assert!(n >= 1, "run {i}: {step} never ran");
            if n > 1 {
                assert!(
                    !journal.contains(&step),
                    "run {i}: {step} was journaled and ran again"
                );
                assert!(
                    logs_before[i].contains_key(&step),
                    "run {i}: {step} ran twice after the restart"
                );
                repeats.push(step);
            }
        }
        assert!(repeats.len() <= 1, "run {i}: {repeats:?}");
        repeated += repeats.len();
    }
    eprintln!("{repeated} in-flight steps of 50 runs repeated after the restart");

    // Interrupted: started (a step journaled) and not finished. A run with nothing
    // journaled may not have started at all (on PostgreSQL, runs wait queued for the
    // server's worker), and then it starts afresh, not resumes.
    let interrupted: Vec<&String> = ids
        .iter()
        .zip(&before)
        .filter(|(_, j)| !j.is_empty() && j.len() < STEPS)
        .map(|(id, _)| id)
        .collect();
    eprintln!(
        "{} of 50 runs were interrupted by the kill",
        interrupted.len()
    );
    assert!(
        !interrupted.is_empty(),
        "the kill interrupted no run mid-way"
    );
    runtime.block_on(async {
        for id in interrupted.iter().take(5) {
            let whole = events(&client, &base, id, None).await;
            let seqs: Vec<u64> = whole.iter().map(|e| e.0).collect();
            assert_eq!(
                seqs,
                (0..whole.len() as u64).collect::<Vec<_>>(),
                "run {id}"
            );
            assert_eq!(whole.last().unwrap().1, "run_completed");
            assert!(
                whole.iter().any(|e| e.1 == "run_resumed"),
                "run {id} was not resumed: {whole:?}"
            );
            let middle = whole.len() as u64 / 2;
            let rest = events(&client, &base, id, Some(middle)).await;
            assert_eq!(rest, whole[middle as usize + 1..]);
        }
    });
}

/// `weft run --server` gives what a local run gives: the output, the exit code, located
/// errors; and the run is in the server's database for every other command.
#[test]
fn run_on_a_server_reports_like_a_local_run() {
    let env = Env::new();
    let server = Served::start(&env);
    let on_server = |args: &[&str]| {
        let mut all = vec!["run", "--server", server.base.as_str()];
        all.extend(args);
        env.weft(&all)
    };
    let hello = support::example("hello.yaml");
    let remote = on_server(&[&hello, "-q"]);
    let local = env.weft(&["run", &hello, "-q"]);
    assert_eq!(support::code(&remote), 0, "{}", support::stderr(&remote));
    assert_eq!(support::stdout_json(&remote), support::stdout_json(&local));

    let paused = on_server(&[&support::example("release-approval.yaml"), "--json", "-q"]);
    assert_eq!(support::code(&paused), 3, "{}", support::stderr(&paused));
    let id = support::stdout_json(&paused)["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The terminal's `weft approve` continues the server's run.
    let approved = env.weft(&["approve", &id, "-q"]);
    assert_eq!(
        support::code(&approved),
        0,
        "{}",
        support::stderr(&approved)
    );

    let bad = env.write("bad.yaml", "weft: 1\nname: x\nroot:\n  sequnce: []\n");
    let o = on_server(&[bad.to_str().unwrap()]);
    assert_eq!(support::code(&o), 2);
    assert!(
        support::stderr(&o).contains("bad.yaml:4:3: error: unknown key `sequnce`"),
        "{}",
        support::stderr(&o)
    );
    let o = env.weft(&[
        "run",
        "--server",
        "http://127.0.0.1:9",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(support::code(&o), 2);
    assert!(
        support::stderr(&o).contains("cannot reach the server"),
        "{}",
        support::stderr(&o)
    );
}

/// `weft runs … --server` and `weft approve --server` act on the server's runs from a
/// terminal whose own database knows none of them.
#[test]
fn runs_commands_act_on_a_server_s_runs() {
    let env = Env::new();
    let server = Served::start(&env);
    let elsewhere = Env::new();
    let base = server.base.as_str();
    let start_paused = || {
        let o = elsewhere.weft(&[
            "run",
            "--server",
            base,
            &support::example("release-approval.yaml"),
            "--json",
            "-q",
        ]);
        assert_eq!(support::code(&o), 3, "{}", support::stderr(&o));
        support::stdout_json(&o)["run_id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let first = start_paused();

    let o = elsewhere.weft(&["runs", "list", "--json", "--server", base]);
    assert_eq!(support::code(&o), 0, "{}", support::stderr(&o));
    let listed: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(listed[0]["run_id"], first.as_str());
    assert_eq!(listed[0]["status"], "paused");
    let local = elsewhere.weft(&["runs", "list", "--json"]);
    assert!(
        local.stdout.is_empty(),
        "the terminal's own database has no runs"
    );

    // A prefix names the run, as it does locally.
    let o = elsewhere.weft(&["runs", "show", &first[..8], "--server", base]);
    let shown = support::stdout_json(&o);
    assert_eq!(shown["status"], "paused");
    assert!(
        shown["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["status"] == "waiting")
    );

    let o = elsewhere.weft(&["approve", &first[..8], "--server", base, "--json", "-q"]);
    assert_eq!(support::code(&o), 0, "{}", support::stderr(&o));
    assert_eq!(support::stdout_json(&o)["status"], "completed");

    let second = start_paused();
    let o = elsewhere.weft(&[
        "runs", "resume", &second, "--input", "approve", "--server", base, "-q",
    ]);
    assert_eq!(support::code(&o), 0, "{}", support::stderr(&o));

    let third = start_paused();
    let o = elsewhere.weft(&["runs", "cancel", &third, "--server", base]);
    assert_eq!(support::code(&o), 0, "{}", support::stderr(&o));
    let o = elsewhere.weft(&["runs", "show", &third, "--server", base]);
    assert_eq!(support::stdout_json(&o)["status"], "cancelled");

    let o = elsewhere.weft(&["runs", "retry", &third, "--allow-changed", "--server", base]);
    assert_eq!(support::code(&o), 2);
    assert!(support::stderr(&o).contains("--allow-changed cannot be used with --server"));
    let o = elsewhere.weft(&["runs", "show", "0000dead", "--server", base]);
    assert_eq!(support::code(&o), 2);
    assert!(
        support::stderr(&o).contains("404"),
        "{}",
        support::stderr(&o)
    );
}
