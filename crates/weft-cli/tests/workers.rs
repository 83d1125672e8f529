//! Many workers on one PostgreSQL database, as an operator runs them, under the
//! failures they meet: workers killed with SIGKILL and started again, a worker stopped
//! with SIGSTOP past its lease and continued after its runs were taken over, the
//! workers' database connections terminated, and the database restarted. The test
//! starts a cluster of its own (scripts/postgres), since it restarts it.

use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod support;

use support::Env;

/// A throwaway cluster of this test's own.
struct Cluster {
    url: String,
    dir: String,
}

impl Cluster {
    /// Starts one, when PostgreSQL is there to test with (`WEFT_TEST_POSTGRES` names the
    /// shared test cluster); `None`, with a note, when not, outside CI.
    fn start() -> Option<Cluster> {
        Env::on_postgres()?;
        let out = Command::new(script())
            .arg("start")
            .output()
            .expect("scripts/postgres runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let var = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("export {name}=")))
                .unwrap()
                .to_owned()
        };
        Some(Cluster {
            url: var("WEFT_TEST_POSTGRES"),
            dir: var("WEFT_TEST_POSTGRES_DIR"),
        })
    }

    fn restart(&self) {
        let out = Command::new(script())
            .arg("restart")
            .env("WEFT_TEST_POSTGRES_DIR", &self.dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// What `sql` prints, one row a line, columns split by `|`.
    fn query(&self, sql: &str) -> String {
        support::psql(&self.url, sql)
    }

    fn count(&self, sql: &str) -> i64 {
        self.query(sql).parse().unwrap()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(script())
            .arg("stop")
            .env("WEFT_TEST_POSTGRES_DIR", &self.dir)
            .output();
    }
}

fn script() -> std::path::PathBuf {
    std::path::Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").unwrap())
        .join("../../scripts/postgres")
}

/// Worker number `n`, a `weft worker` on `db`, its messages in `worker{n}.log`.
fn worker(env: &Env, db: &str, n: usize) -> Child {
    let log = std::fs::File::create(env.path(&format!("worker{n}.log"))).unwrap();
    env.cmd()
        .args(["worker", "--concurrency", "4", "--lease", "1s", "--db", db])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {}", child.id());
}

const RUNS: usize = 1000;
const STEPS: usize = 5;

/// The worker stopped with SIGSTOP: the leases it held, and when it was continued
/// (the database's clock), once all of them had been taken over.
struct Stopped {
    worker: usize,
    held: Vec<(String, i64)>,
    continued_at: Option<i64>,
}

/// The failures inflicted on the workers and the database, on a schedule.
struct Failures<'a> {
    cluster: &'a Cluster,
    env: &'a Env,
    workers: Vec<Child>,
    started: Instant,
    next_kill: Duration,
    killed: usize,
    spawned: usize,
    stopped: Option<Stopped>,
    cut_off: bool,
    restarted: bool,
}

impl<'a> Failures<'a> {
    fn start(cluster: &'a Cluster, env: &'a Env, workers: usize) -> Failures<'a> {
        Failures {
            cluster,
            env,
            workers: (0..workers).map(|i| worker(env, &cluster.url, i)).collect(),
            started: Instant::now(),
            next_kill: Duration::from_millis(1500),
            killed: 0,
            spawned: workers,
            stopped: None,
            cut_off: false,
            restarted: false,
        }
    }

    /// Inflicts what is due now.
    fn inflict(&mut self) {
        let t = self.started.elapsed();
        if self.stopped.is_none() && t > Duration::from_secs(2) {
            self.stop_one();
        }
        self.continue_stopped_once_taken_over();
        if t > self.next_kill {
            // SIGKILL a worker other than the stopped one, and start another.
            let victim = 1 + rand::random_range(0..self.workers.len() - 1);
            self.workers[victim].kill().unwrap();
            self.workers[victim].wait().unwrap();
            self.workers[victim] = worker(self.env, &self.cluster.url, self.spawned);
            self.spawned += 1;
            self.killed += 1;
            self.next_kill += Duration::from_millis(1500);
        }
        if !self.cut_off && t > Duration::from_secs(5) {
            self.cluster.query(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                 WHERE application_name = 'weft' AND pid <> pg_backend_pid()",
            );
            self.cut_off = true;
        }
        if !self.restarted && t > Duration::from_secs(8) {
            self.cluster.restart();
            self.restarted = true;
        }
    }

    /// Stops worker 0 while it drives runs, remembering the leases it holds.
    fn stop_one(&mut self) {
        signal(&self.workers[0], "-STOP");
        let pid = self.workers[0].id();
        let held = self
            .cluster
            .query(&format!(
                "SELECT id, lease_epoch FROM weft.runs WHERE owner LIKE 'pid:{pid}@%' AND status = 'running'"
            ))
            .lines()
            .map(|l| {
                let (id, epoch) = l.split_once('|').unwrap();
                (id.to_owned(), epoch.parse().unwrap())
            })
            .collect();
        self.stopped = Some(Stopped {
            worker: 0,
            held,
            continued_at: None,
        });
    }

    /// Continues the stopped worker once every run it held has moved on.
    fn continue_stopped_once_taken_over(&mut self) {
        let Some(stopped) = &mut self.stopped else {
            return;
        };
        if stopped.continued_at.is_some() {
            return;
        }
        let taken = stopped.held.iter().all(|(id, epoch)| {
            self.cluster.count(&format!(
                "SELECT count(*) FROM weft.runs WHERE id = '{id}' AND (lease_epoch > {epoch} OR status <> 'running')"
            )) == 1
        });
        if taken {
            stopped.continued_at = Some(
                self.cluster
                    .count("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint"),
            );
            signal(&self.workers[stopped.worker], "-CONT");
        }
    }
}

impl Drop for Failures<'_> {
    fn drop(&mut self) {
        for w in &mut self.workers {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

/// A flow of five `http.post` steps to `url`, each sending its idempotency key.
fn posting_flow(url: &str) -> String {
    let mut flow = String::from("weft: 1\nname: posts\nroot:\n  sequence:\n");
    for i in 0..STEPS {
        flow.push_str(&format!(
            "    - id: p{i}\n      action: {{uses: http.post, with: {{url: \"{url}\", json: {{run: \"{{{{ run.id }}}}\", step: p{i}, key: \"{{{{ step.idempotency_key }}}}\"}}}}}}\n"
        ));
    }
    flow
}

/// Queues `RUNS` runs of `flow` through the API server at `base`; their ids.
fn queue_runs(runtime: &tokio::runtime::Runtime, base: &str, flow: &str) -> Vec<String> {
    let client = reqwest::Client::new();
    runtime.block_on(async {
        let mut ids = Vec::new();
        for _ in 0..RUNS {
            let r = client
                .post(format!("{base}/v1/runs"))
                .json(&json!({"source": flow}))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 202);
            let v: Value = r.json().await.unwrap();
            ids.push(v["run_id"].as_str().unwrap().to_owned());
        }
        ids
    })
}

/// Every request of a step carried one key, its own, and every step made one; how
/// many requests were repeats.
fn check_effects(posted: &[weft_fakes::Posted]) -> usize {
    let mut keys: BTreeMap<(String, String), HashSet<String>> = BTreeMap::new();
    for p in posted {
        let key = p.idempotency_key.clone().expect("every post carries a key");
        assert_eq!(p.body["key"], key.as_str());
        keys.entry((
            p.body["run"].as_str().unwrap().to_owned(),
            p.body["step"].as_str().unwrap().to_owned(),
        ))
        .or_default()
        .insert(key);
    }
    assert_eq!(keys.len(), RUNS * STEPS, "a step never reached the service");
    assert!(keys.values().all(|k| k.len() == 1), "a step's key changed");
    let distinct: HashSet<&String> = keys.values().flatten().collect();
    assert_eq!(distinct.len(), RUNS * STEPS, "two steps share a key");
    posted.len() - RUNS * STEPS
}

/// Every run of `ids` completed and none other exists; each step's result was
/// committed once.
fn check_runs(cluster: &Cluster, ids: &[String]) {
    assert_eq!(
        cluster.query("SELECT status, count(*) FROM weft.runs GROUP BY status"),
        format!("completed|{RUNS}")
    );
    let stored: HashSet<String> = cluster
        .query("SELECT id FROM weft.runs")
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(stored, ids.iter().cloned().collect());
    assert_eq!(
        cluster.query(
            "SELECT run_id, key, count(*) FROM weft.journal WHERE kind = 'result'
             GROUP BY run_id, key HAVING count(*) > 1"
        ),
        "",
        "a step's result was committed twice"
    );
    assert_eq!(
        cluster.count("SELECT count(*) FROM weft.journal WHERE kind = 'result'"),
        (RUNS * STEPS) as i64
    );
}

/// The stopped worker committed nothing under the leases it lost.
fn check_stopped(cluster: &Cluster, stopped: &Stopped) {
    assert!(!stopped.held.is_empty(), "the stopped worker held no run");
    let continued_at = stopped
        .continued_at
        .expect("its runs were never taken over");
    for (id, epoch) in &stopped.held {
        assert_eq!(
            cluster.count(&format!(
                "SELECT count(*) FROM weft.journal WHERE run_id = '{id}' AND epoch = {epoch} AND written_ms >= {continued_at}"
            )),
            0,
            "the stopped worker committed to run {id} after it was continued"
        );
    }
}

/// 1,000 runs of five `http.post` steps, queued through `weft serve --role api` and
/// driven by four workers while the failures above happen: every run completes, no
/// step's result is committed twice, every repeated request carries the key of its
/// first attempt, and the stopped worker commits nothing once its runs are taken over.
#[test]
fn workers_killed_stopped_and_cut_off_lose_no_run_and_commit_no_step_twice() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let env = Env::new();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let endpoint = runtime.block_on(weft_fakes::Endpoint::answering_after(
        Duration::from_millis(80),
    ));
    let mut api = env
        .cmd()
        .args(["serve", "--role", "api", "--addr", "127.0.0.1:0"])
        .args(["--db", &cluster.url])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let base = support::listening_on(&mut api);
    let ids = queue_runs(&runtime, &base, &posting_flow(&endpoint.url("effects")));

    // Every run is queued before the first worker starts, so the failures land while
    // the workers drive them.
    let mut failures = Failures::start(&cluster, &env, 4);
    while cluster.count("SELECT count(*) FROM weft.runs WHERE status = 'completed'") < RUNS as i64 {
        assert!(
            failures.started.elapsed() < Duration::from_secs(300),
            "runs did not complete: {}\nstill running (id, owner, epoch, lease left in ms): {}",
            cluster.query("SELECT status, count(*) FROM weft.runs GROUP BY status"),
            cluster.query(
                "SELECT id, owner, lease_epoch,
                        lease_expires_ms - (extract(epoch FROM clock_timestamp()) * 1000)::bigint
                 FROM weft.runs WHERE status = 'running'"
            )
        );
        let failed = cluster
            .query("SELECT id, error FROM weft.runs WHERE status IN ('failed', 'cancelled')");
        assert!(failed.is_empty(), "runs failed: {failed}");
        failures.inflict();
        std::thread::sleep(Duration::from_millis(100));
    }
    let elapsed = failures.started.elapsed();

    check_runs(&cluster, &ids);
    let repeats = check_effects(&endpoint.posted());
    let stopped = failures.stopped.take().expect("a worker was stopped");
    check_stopped(&cluster, &stopped);
    eprintln!(
        "{RUNS} runs in {elapsed:.1?}: {} workers killed, 1 stopped ({} of its runs taken over), connections cut, database restarted; {} runs changed hands, {repeats} requests repeated, each with its key",
        failures.killed,
        stopped.held.len(),
        cluster.count("SELECT count(*) FROM weft.runs WHERE lease_epoch > 1"),
    );
    drop(failures);
    let _ = api.kill();
    let _ = api.wait();
}

/// `weft serve --role api` on `db`, and its address.
fn api_node(env: &Env, db: &str) -> (Child, String) {
    let mut api = env
        .cmd()
        .args([
            "serve",
            "--role",
            "api",
            "--addr",
            "127.0.0.1:0",
            "--db",
            db,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let base = support::listening_on(&mut api);
    (api, base)
}

/// `POST url` with `body`: the status and the JSON answer.
async fn post(client: &reqwest::Client, url: String, body: Value) -> (u16, Value) {
    let r = client.post(url).json(&body).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

/// Waits for run `id` to stand in `status`, reading it through the API at `base`.
async fn until_status(client: &reqwest::Client, base: &str, id: &str, status: &str) -> Value {
    let since = Instant::now();
    loop {
        let run = support::get_run(client, base, id).await;
        if run["status"] == status {
            return run;
        }
        assert!(
            since.elapsed() < Duration::from_secs(60),
            "run {id} never became {status}: {run}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A run paused at an approval whose only worker died: two API nodes answer it at the
/// same moment, one wins, and the run waits `queued` (no process holds it) until a
/// worker starts; it fails on a missing file there, and a retry through the other API
/// node is driven by a worker too. The answer is journaled once and announced once,
/// and the run's log has no gap or repeat across the hand-overs.
#[test]
fn approvals_and_retries_on_api_nodes_are_driven_by_workers_started_later() {
    let Some(env) = Env::on_postgres() else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = reqwest::Client::new();
    let (mut api_a, a) = api_node(&env, &env.db);
    let (mut api_b, b) = api_node(&env, &env.db);
    let mut first = worker(&env, &env.db, 1);
    let flow = "weft: 1\nname: handover\nroot:\n  sequence:\n    - id: review\n      approval: {prompt: \"Go on?\"}\n    - id: read\n      action: {uses: file.read, with: {path: ready.txt}}\n";
    runtime.block_on(async {
        let (status, paused) = post(
            &client,
            format!("{a}/v1/runs?wait=30"),
            json!({"source": flow}),
        )
        .await;
        assert_eq!(
            (status, paused["status"].as_str()),
            (200, Some("paused")),
            "{paused}"
        );
        let id = paused["run_id"].as_str().unwrap().to_owned();
        first.kill().unwrap();
        first.wait().unwrap();

        let approve = json!({"decision": "approve", "by": "test"});
        let (one, other) = tokio::join!(
            post(
                &client,
                format!("{a}/v1/runs/{id}/approve"),
                approve.clone()
            ),
            post(&client, format!("{b}/v1/runs/{id}/approve"), approve),
        );
        let mut statuses = [one.0, other.0];
        statuses.sort_unstable();
        assert_eq!(statuses, [202, 409], "{one:?} {other:?}");
        let won = if one.0 == 202 { &one.1 } else { &other.1 };
        assert_eq!(won["status"], "queued", "{won}");
        let lost = if one.0 == 409 { &one.1 } else { &other.1 };
        assert_eq!(lost["title"], "already answered", "{lost}");

        // No worker runs: the answered run waits, held by nobody.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let waiting = until_status(&client, &b, &id, "queued").await;
        assert!(waiting["owner"].is_null(), "{waiting}");

        let mut second = worker(&env, &env.db, 2);
        let failed = until_status(&client, &a, &id, "failed").await;
        assert!(
            failed["error"].to_string().contains("ready.txt"),
            "{failed}"
        );

        std::fs::write(env.path("ready.txt"), "ready").unwrap();
        let (status, done) = post(
            &client,
            format!("{b}/v1/runs/{id}/retry?wait=30"),
            json!({}),
        )
        .await;
        assert_eq!(
            (status, done["status"].as_str()),
            (200, Some("completed")),
            "{done}"
        );
        assert_eq!(done["output"], "ready", "{done}");
        second.kill().unwrap();
        second.wait().unwrap();
        check_handed_over_log(&env.db, &id);
    });
    let _ = (api_a.kill(), api_b.kill());
    let _ = (api_a.wait(), api_b.wait());
}

/// Run `id`'s stored events and journal: events numbered without a gap or a repeat,
/// the answer journaled and announced once, the run resumed by a worker after the
/// answer and after the retry.
fn check_handed_over_log(db: &str, id: &str) {
    let query = |sql: &str| support::psql(db, sql);
    let rows = query(&format!(
        "SELECT seq, body FROM weft.events WHERE run_id = '{id}' ORDER BY seq"
    ));
    let events: Vec<(u64, Value)> = rows
        .lines()
        .map(|l| {
            let (seq, body) = l.split_once('|').unwrap();
            (seq.parse().unwrap(), serde_json::from_str(body).unwrap())
        })
        .collect();
    let seqs: Vec<u64> = events.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>(), "{rows}");
    let kinds: Vec<&str> = events
        .iter()
        .map(|(_, e)| e["type"].as_str().unwrap())
        .collect();
    let count = |k: &str| kinds.iter().filter(|&&x| x == k).count();
    assert_eq!(count("approval_answered"), 1, "{kinds:?}");
    assert_eq!(count("run_started"), 1, "{kinds:?}");
    assert_eq!(count("run_resumed"), 2, "{kinds:?}");
    assert_eq!(
        query(&format!(
            "SELECT count(*) FROM weft.journal WHERE run_id = '{id}' AND kind = 'answer'"
        )),
        "1"
    );
}
