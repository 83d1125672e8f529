//! What the binary's integration tests share: a scratch directory with its own database,
//! and readers for a finished process.

#![allow(dead_code)] // each test file uses its own part

pub mod browser;

use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A scratch directory, the files directory of every command run through it, and its
/// database: `runs.db` in a private directory beside it (a server refuses a files
/// directory that holds its database or token), or a fresh PostgreSQL database.
pub struct Env {
    pub dir: tempfile::TempDir,
    /// Where the database file, tokens and keys are kept: never the files directory.
    pub private: tempfile::TempDir,
    /// What `WEFT_DB` names.
    pub db: String,
}

impl Env {
    pub fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let private = tempfile::tempdir().unwrap();
        let db = private.path().join("runs.db").display().to_string();
        Env { dir, private, db }
    }

    /// The SQLite database file (for an `Env` made by [`Env::new`]).
    pub fn db_file(&self) -> PathBuf {
        PathBuf::from(&self.db)
    }

    /// Writes `text` to `name` in the private directory (a token, a key).
    pub fn write_private(&self, name: &str, text: &str) -> PathBuf {
        let p = self.private.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// An `Env` whose database is a new one on the cluster `WEFT_TEST_POSTGRES` names
    /// (`scripts/test` starts one); `None`, with a note, when none is named outside CI.
    pub fn on_postgres() -> Option<Env> {
        if left_out_of_fast_profile("PostgreSQL") {
            return None;
        }
        let Ok(admin) = std::env::var("WEFT_TEST_POSTGRES") else {
            assert!(
                std::env::var_os("CI").is_none(),
                "WEFT_TEST_POSTGRES is not set: CI runs these tests on PostgreSQL too (scripts/test starts a cluster)"
            );
            eprintln!(
                "note: WEFT_TEST_POSTGRES is not set, skipping the PostgreSQL case (run scripts/test)"
            );
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let name = format!(
            "weft_cli_{}_{}",
            std::process::id(),
            dir.path()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .to_lowercase()
                .replace(|c: char| !c.is_ascii_alphanumeric(), "")
        );
        let created = Command::new("psql")
            .args([admin.as_str(), "-qc", &format!("CREATE DATABASE {name}")])
            .output()
            .expect("psql runs");
        assert!(created.status.success(), "{}", stderr(&created));
        let base = admin.rsplit_once('/').expect("a URL with a database").0;
        Some(Env {
            dir,
            private: tempfile::tempdir().unwrap(),
            db: format!("{base}/{name}"),
        })
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    pub fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_weft"));
        c.env("WEFT_DB", &self.db)
            .env("WEFT_FILES", self.dir.path())
            .env_remove("WEFT_MODEL")
            .env_remove("WEFT_SERVER")
            .env_remove("WEFT_TOKEN")
            .stdin(Stdio::null());
        c
    }

    pub fn weft(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }
}

/// Run `id` as `GET /v1/runs/{id}` of the server at `base` answers it.
pub async fn get_run(client: &reqwest::Client, base: &str, id: &str) -> Value {
    get_json(client, &format!("{base}/v1/runs/{id}")).await
}

/// The JSON a `GET` of `url` answers.
pub async fn get_json(client: &reqwest::Client, url: &str) -> Value {
    client.get(url).send().await.unwrap().json().await.unwrap()
}

/// The JSON a `POST` of `body` as JSON to `url` answers.
pub async fn post_json(client: &reqwest::Client, url: &str, body: &Value) -> Value {
    client
        .post(url)
        .json(body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Where `scripts/setup` installs the clients the tests drive the binary with
/// (`${XDG_CACHE_HOME:-~/.cache}/weft`).
pub fn client_cache() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache"))
        .join("weft")
}

/// `path`, one of the clients `scripts/setup` installs (a clear failure when missing).
/// Whether the fast test profile (`scripts/test --fast`: `WEFT_TEST_FAST` set) leaves
/// out a test that needs `what` (a browser, PostgreSQL, Node, a Python client), saying
/// so: the edit loop runs everything else, the full suite runs it all.
pub fn left_out_of_fast_profile(what: &str) -> bool {
    if std::env::var_os("WEFT_TEST_FAST").is_none() {
        return false;
    }
    eprintln!("note: the fast test profile leaves out what needs {what} (scripts/test runs it)");
    true
}

pub fn installed_client(path: PathBuf) -> PathBuf {
    assert!(
        path.exists(),
        "{} is missing: run scripts/setup (it installs the clients the tests use)",
        path.display()
    );
    path
}

/// Checks that a client (`what`) ended well and printed `ok_line`; shows what it
/// printed otherwise.
pub fn assert_client_ok(what: &str, out: &Output, ok_line: &str) {
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success() && stdout.contains(ok_line),
        "{what}: stdout:\n{stdout}\nstderr:\n{stderr}"
    );
}

/// What `sql` prints on the database at `url`, one row a line, columns split by `|`
/// (psql unaligned, tuples only); panics with psql's error when it fails.
pub fn psql(url: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args([url, "-XtAc", sql])
        .output()
        .expect("psql runs");
    assert!(out.status.success(), "{sql}: {}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

pub fn code(o: &Output) -> i32 {
    o.status.code().expect("weft was killed by a signal")
}

pub fn stdout_json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn example(name: &str) -> String {
    // Read at run time: a build cache shared by two clones keeps the other path in `env!`.
    Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("run by cargo"))
        .join("../../examples")
        .join(name)
        .display()
        .to_string()
}

/// The last segment of each step key whose result run `id`'s journal holds (`s3` for
/// `root/s3`), read with `weft runs show`.
pub fn journaled_steps(env: &Env, id: &str) -> HashSet<String> {
    let shown = stdout_json(&env.weft(&["runs", "show", id]));
    shown["journal"]
        .as_array()
        .expect("runs show prints the journal")
        .iter()
        .filter(|e| e["kind"] == "result")
        .filter_map(|e| e["key"].as_str()?.rsplit('/').next().map(str::to_owned))
        .collect()
}

/// How many times each line occurs in the file at `path` (none when it is missing).
pub fn line_counts(path: &Path) -> BTreeMap<String, usize> {
    let mut seen = BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap_or_default().lines() {
        *seen.entry(line.to_owned()).or_insert(0) += 1;
    }
    seen
}

/// The base URL a `weft serve` child says it listens on (its stderr must be piped);
/// what it says afterwards is drained, so it never blocks on a full pipe.
pub fn listening_on(child: &mut std::process::Child) -> String {
    use std::io::BufRead;
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let base = loop {
        let line = lines
            .next()
            .expect("weft serve ended before listening")
            .unwrap();
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_owned();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    base
}

/// A port of 127.0.0.1 nobody listens on now, for a child server to take.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until something listens on 127.0.0.1:`port`; fails naming `what` after
/// `within`.
pub fn await_listening(port: u16, what: &str, within: std::time::Duration) {
    let deadline = std::time::Instant::now() + within;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} never listened"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The status of a bare `POST path` (no token, empty body) to `base`.
pub fn post_status(base: &str, path: &str) -> u16 {
    use std::io::{Read, Write};
    let authority = base.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(authority).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}

/// A `weft serve` process and its address; killed when dropped.
pub struct Served {
    pub child: std::process::Child,
    pub base: String,
}

impl Served {
    /// Starts `weft serve` on a free port and waits until it listens.
    pub fn start(env: &Env) -> Served {
        Served::start_with(env, &[])
    }

    /// [`Served::start`] with these environment variables set too (a provider's base
    /// URL and key, say).
    pub fn start_with(env: &Env, vars: &[(&str, &str)]) -> Served {
        Served::start_args(env, vars, &[])
    }

    /// [`Served::start_with`], with these arguments after `serve --addr 127.0.0.1:0`
    /// (`--token-file`, `--flow`, ...).
    pub fn start_args(env: &Env, vars: &[(&str, &str)], args: &[&str]) -> Served {
        let mut child = env
            .cmd()
            .args(["serve", "--addr", "127.0.0.1:0"])
            .args(args)
            .envs(vars.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let base = listening_on(&mut child);
        Served { child, base }
    }

    /// SIGKILL: no chance to clean up, exactly like a crash.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
