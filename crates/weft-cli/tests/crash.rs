//! Crash and race safety as an operator tests it: real processes killed with SIGKILL,
//! real processes racing for one approval and for one new database file.

use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

mod support;

use support::{Env, code, example, journaled_steps, line_counts, stderr, stdout_json};

/// Back-to-back effects with nothing in between: the shape that showed a crash
/// repeating completed steps when results ran ahead of the durable journal.
const STEPS: usize = 40;

fn appending_flow() -> String {
    let mut flow = String::from("weft: 1\nname: appends\nroot:\n  sequence:\n");
    for i in 0..STEPS {
        flow.push_str(&format!(
            "    - id: s{i}\n      action: {{uses: file.append, with: {{path: \"{{{{ initial.log }}}}\", content: \"s{i}\\n\"}}}}\n"
        ));
    }
    flow
}

fn start(env: &Env, flow: &Path, log: &str, durability: &str) -> Child {
    env.cmd()
        .args(["run", flow.to_str().unwrap(), "-q"])
        .args(["--input", &format!(r#"{{"log": "{log}"}}"#)])
        .env("WEFT_DURABILITY", durability)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits until `log` has its first line: the run is inside its effects.
fn wait_for_first_effect(log: &Path, child: &mut Child) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::metadata(log).map_or(true, |m| m.len() == 0) {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        assert!(
            Instant::now() < deadline,
            "the run never started its effects"
        );
        std::thread::sleep(Duration::from_micros(100));
    }
    true
}

/// The newest run: its id and the step names its journal holds.
fn newest_run(env: &Env) -> (String, String, HashSet<String>) {
    let list = env.weft(&["runs", "list", "--json", "--limit", "1"]);
    let first = String::from_utf8_lossy(&list.stdout)
        .lines()
        .next()
        .unwrap()
        .to_owned();
    let run: Value = serde_json::from_str(&first).unwrap();
    let id = run["run_id"].as_str().unwrap().to_owned();
    let journaled = journaled_steps(env, &id);
    (id, run["status"].as_str().unwrap().to_owned(), journaled)
}

/// 120 runs of 40 back-to-back file appends, each killed with SIGKILL at a random
/// moment inside its effects (a quarter with `WEFT_DURABILITY=power`), then resumed:
/// no step whose result was journaled writes again, every step writes at least once,
/// and at most the one step in flight at the kill repeats.
#[test]
fn a_run_killed_at_random_moments_repeats_no_completed_step() {
    killed_runs_repeat_no_completed_step(&Env::new(), 120);
}

/// The same on PostgreSQL, 40 runs.
#[test]
fn a_run_on_postgres_killed_at_random_moments_repeats_no_completed_step() {
    if let Some(env) = Env::on_postgres() {
        killed_runs_repeat_no_completed_step(&env, 40);
    }
}

fn killed_runs_repeat_no_completed_step(env: &Env, rounds: usize) {
    let flow = env.write("appends.yaml", &appending_flow());
    // How long the effects take uninterrupted, to spread the kills over them: the
    // shortest of three, so that one run slowed by the machine (a checkpoint's fsync)
    // does not send most kills past the end.
    let span = (0..3)
        .map(|i| {
            let log = format!("calibrate{i}.txt");
            let mut calibrate = start(env, &flow, &log, "process");
            assert!(wait_for_first_effect(&env.path(&log), &mut calibrate));
            let began = Instant::now();
            assert!(calibrate.wait().unwrap().success());
            began.elapsed().as_micros().max(1_000) as u64
        })
        .min()
        .unwrap();

    let (mut mid_flight, mut repeated, mut finished_first) = (0, 0, 0);
    for round in 0..rounds {
        let name = format!("log{round}.txt");
        let log = env.path(&name);
        let durability = if round % 4 == 3 { "power" } else { "process" };
        let mut child = start(env, &flow, &name, durability);
        if !wait_for_first_effect(&log, &mut child) {
            panic!("round {round}: the run ended before its first effect");
        }
        std::thread::sleep(Duration::from_micros(rand::random_range(0..span)));
        child.kill().unwrap();
        child.wait().unwrap();
        let before = line_counts(&log);
        let (id, status, journaled) = newest_run(env);
        if status == "completed" {
            finished_first += 1;
            continue;
        }
        mid_flight += 1;
        assert_eq!(status, "running", "round {round}");
        let o = env.weft(&["runs", "resume", &id, "-q"]);
        assert_eq!(code(&o), 0, "round {round}: {}", stderr(&o));
        let after = line_counts(&log);
        let mut repeats = Vec::new();
        for i in 0..STEPS {
            let step = format!("s{i}");
            let n = after.get(&step).copied().unwrap_or(0);
            assert!(n >= 1, "round {round}: {step} never ran: {after:?}");
            if n > 1 {
                assert!(
                    !journaled.contains(&step),
                    "round {round}: {step} was journaled before the kill and ran again ({n} times)"
                );
                assert!(
                    before.contains_key(&step),
                    "round {round}: {step} ran twice after the kill"
                );
                repeats.push(step);
            }
        }
        assert!(
            repeats.len() <= 1,
            "round {round}: more than the step in flight repeated: {repeats:?}"
        );
        repeated += repeats.len();
    }
    eprintln!(
        "{mid_flight} runs killed mid-flight ({finished_first} finished first); {repeated} in-flight steps repeated, no journaled step did"
    );
    assert!(
        mid_flight >= rounds / 2,
        "only {mid_flight} of {rounds} kills landed inside the effects"
    );
}
/// 30 runs of 20 `http.post` calls to a real endpoint, killed at random moments and
/// resumed: a request repeated by the resume carries the `Idempotency-Key` it had (the
/// one `step.idempotency_key` renders), and no two steps share a key.
#[test]
fn a_repeated_request_carries_the_key_it_had() {
    let env = Env::new();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let endpoint = runtime.block_on(weft_fakes::Endpoint::start());
    let mut flow = String::from("weft: 1\nname: posts\nroot:\n  sequence:\n");
    for i in 0..20 {
        flow.push_str(&format!(
            "    - id: p{i}\n      action: {{uses: http.post, with: {{url: \"{{{{ initial.url }}}}\", json: {{run: \"{{{{ run.id }}}}\", step: p{i}, key: \"{{{{ step.idempotency_key }}}}\"}}}}}}\n"
        ));
    }
    let flow = env.write("posts.yaml", &flow);
    let (mut resumed, mut repeated) = (0, 0);
    for round in 0..30 {
        let url = endpoint.url(&format!("round{round}"));
        let mut child = env
            .cmd()
            .args(["run", flow.to_str().unwrap(), "-q"])
            .args(["--input", &format!(r#"{{"url": "{url}"}}"#)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while !endpoint
            .posted()
            .iter()
            .any(|p| p.path == format!("round{round}"))
        {
            assert!(
                Instant::now() < deadline,
                "round {round}: no request arrived"
            );
            std::thread::sleep(Duration::from_micros(200));
        }
        std::thread::sleep(Duration::from_micros(rand::random_range(0..20_000)));
        child.kill().unwrap();
        child.wait().unwrap();
        let (id, status, _) = newest_run(&env);
        if status != "completed" {
            resumed += 1;
            let o = env.weft(&["runs", "resume", &id, "-q"]);
            assert_eq!(code(&o), 0, "round {round}: {}", stderr(&o));
        }
        let mut keys: BTreeMap<String, HashSet<String>> = BTreeMap::new();
        let mut posts = 0;
        for p in endpoint
            .posted()
            .into_iter()
            .filter(|p| p.path == format!("round{round}"))
        {
            let key = p.idempotency_key.expect("every post carries a key");
            assert_eq!(
                p.body["key"],
                key.as_str(),
                "round {round}: header and template differ"
            );
            assert_eq!(p.body["run"], id.as_str());
            posts += 1;
            keys.entry(p.body["step"].as_str().unwrap().to_owned())
                .or_default()
                .insert(key);
        }
        assert_eq!(keys.len(), 20, "round {round}: {keys:?}");
        repeated += posts - 20;
        assert!(
            keys.values().all(|k| k.len() == 1),
            "round {round}: a step's key changed: {keys:?}"
        );
        let all: HashSet<&String> = keys.values().flatten().collect();
        assert_eq!(all.len(), 20, "round {round}: two steps share a key");
    }
    eprintln!(
        "{resumed} of 30 runs were killed mid-flight and resumed; {repeated} requests repeated, each with its key"
    );
    assert!(
        resumed >= 10,
        "only {resumed} of 30 kills landed inside the requests"
    );
}

/// Two processes answer one approval at the same instant, 50 times: exactly one
/// continues the run, the other is told who answered (exit 2), and the journal holds one
/// answer. Also approve against `runs resume`.
#[test]
fn the_first_answer_to_an_approval_wins() {
    first_answer_wins(&Env::new(), 50);
}

/// The same on PostgreSQL, 20 times.
#[test]
fn the_first_answer_to_an_approval_on_postgres_wins() {
    if let Some(env) = Env::on_postgres() {
        first_answer_wins(&env, 20);
    }
}

fn first_answer_wins(env: &Env, rounds: usize) {
    let flow = example("release-approval.yaml");
    let (mut both_continued, mut rejected_wins) = (0, 0);
    for round in 0..rounds {
        let o = env.weft(&["run", &flow, "--json", "-q"]);
        assert_eq!(code(&o), 3, "{}", stderr(&o));
        let id = stdout_json(&o)["run_id"].as_str().unwrap().to_owned();
        let second: Vec<&str> = if round % 5 == 4 {
            vec!["runs", "resume", &id, "--json", "-q"]
        } else {
            vec!["approve", &id, "--reject", "--note", "no", "--json", "-q"]
        };
        let a = env
            .cmd()
            .args(["approve", &id, "--json", "-q"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let b = env
            .cmd()
            .args(&second)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
        let codes = (code(&a), code(&b));
        if round % 5 == 4 {
            // A resume that wins runs the paused run until it pauses again (exit 3); the
            // approval then answers it after, or is told the run was taken (exit 2) and
            // is given again here. A resume that loses is told (exit 2).
            assert!(
                matches!(codes, (0, 2) | (0, 3) | (2, 0) | (2, 3)),
                "round {round}: {codes:?}\n{}\n{}",
                stderr(&a),
                stderr(&b)
            );
            if codes == (2, 3) {
                assert!(stderr(&a).contains("taken first"), "{}", stderr(&a));
                let o = env.weft(&["approve", &id, "-q"]);
                assert_eq!(code(&o), 0, "round {round}: {}", stderr(&o));
            }
        } else {
            if codes == (0, 0) {
                both_continued += 1;
            }
            assert!(
                matches!(codes, (0, 2) | (2, 0)),
                "round {round}: {codes:?}\n{}\n{}",
                stderr(&a),
                stderr(&b)
            );
            let loser = if codes.0 == 2 { &a } else { &b };
            assert!(
                stderr(loser).contains("already answered"),
                "round {round}: {}",
                stderr(loser)
            );
            rejected_wins += usize::from(codes.1 == 0);
        }
        let shown = stdout_json(&env.weft(&["runs", "show", &id]));
        let answers = shown["journal"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "answer")
            .count();
        assert_eq!(answers, 1, "round {round}: {shown}");
        assert_eq!(shown["status"], "completed", "round {round}");
    }
    assert_eq!(both_continued, 0);
    eprintln!(
        "the reject won {rejected_wins} of {} races",
        rounds - rounds / 5
    );
}

/// Eight processes start runs on one new database file at the same moment, 50 times:
/// every one succeeds, and the file holds all eight runs.
#[test]
fn eight_processes_create_one_database_at_once() {
    let env = Env::new();
    let flow = env.write(
        "tiny.yaml",
        "weft: 1\nname: tiny\nroot:\n  transform: {output: \"{{ 1 + 1 }}\"}\n",
    );
    for round in 0..50 {
        let db = env.path(&format!("new{round}.db"));
        let runs: Vec<Child> = (0..8)
            .map(|_| {
                env.cmd()
                    .args([
                        "run",
                        flow.to_str().unwrap(),
                        "-q",
                        "--db",
                        db.to_str().unwrap(),
                    ])
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for r in runs {
            let o = r.wait_with_output().unwrap();
            assert_eq!(code(&o), 0, "round {round}: {}", stderr(&o));
        }
        let list = env.weft(&["runs", "list", "--json", "--db", db.to_str().unwrap()]);
        assert_eq!(
            String::from_utf8_lossy(&list.stdout).lines().count(),
            8,
            "round {round}"
        );
    }
}
