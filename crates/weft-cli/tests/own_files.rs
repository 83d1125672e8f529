//! A flow never reaches Weft's own files, and its requests go only where the network
//! policy lets them: `weft serve` started the way an operator starts it — in a folder
//! that holds its database and token, with no `--files` — and flows that try to read
//! the token and overwrite the database by name, by `../`, through a symbolic link and a
//! hard link planted in the files directory, through every door that runs a flow's text
//! (`/v1/runs`, MCP's `run_flow` and `test_flow`, a flow saved over MCP and run through
//! the LangGraph door). Every attempt is refused, the token appears in no output or
//! event, and after a restart every run is there.

mod support;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{Env, listening_on};

const TOKEN: &str = "tok-7f3a9c-never-leaks";

/// What each attempt does: read or write a path, from the files directory.
const ATTEMPTS: &[(&str, &str, &str)] = &[
    ("token by name", "r", "token"),
    ("token by ../", "r", "../token"),
    ("token by symlink", "r", "token_link"),
    ("token by hard link", "r", "token_hard"),
    ("token by absolute path", "r", "TOKEN_ABS"),
    ("database by ../", "w", "../weft.db"),
    ("database by symlink", "w", "db_link"),
    ("database by hard link", "w", "db_hard"),
    ("wal by ../", "w", "../weft.db-wal"),
];

/// A Python step that tries every attempt and says how each ended.
fn hostile_flow(token_abs: &Path) -> String {
    let attempts: Vec<String> = ATTEMPTS
        .iter()
        .map(|(what, mode, path)| {
            let path = if *path == "TOKEN_ABS" {
                token_abs.display().to_string()
            } else {
                (*path).to_owned()
            };
            format!("[\"{what}\", \"{mode}\", \"{path}\"]")
        })
        .collect();
    format!(
        r#"weft: 1
name: hostile
root:
  code:
    language: python
    entry: main
    args: {{}}
    source: |
      def main():
          out = {{}}
          for what, mode, path in [{}]:
              try:
                  if mode == "r":
                      out[what] = "read: " + open(path).read()
                  else:
                      f = open(path, "w")
                      f.write("x")
                      out[what] = "wrote"
              except Exception as e:
                  out[what] = "refused: " + str(e)
          return out
"#,
        attempts.join(", ")
    )
}

/// A `file.write` action over the database's hard link: the run fails, the file stays.
const WRITE_ACTION: &str = "weft: 1\nname: clobber\nroot:\n  action: {uses: file.write, with: {path: db_hard, content: gone}}\n";

/// The operator's folder: the database (SQLite) and the token, and a files directory
/// the server makes beside them, where links to both are planted before the flows run.
struct Operator {
    dir: tempfile::TempDir,
    /// `--db`: `weft.db` in the folder, or a PostgreSQL database.
    db: String,
}

impl Operator {
    fn new(db: Option<String>) -> Operator {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), format!("{TOKEN}\n")).unwrap();
        Operator {
            db: db.unwrap_or_else(|| "weft.db".into()),
            dir,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn sqlite(&self) -> bool {
        !self.db.starts_with("postgres")
    }

    /// The files directory the server chose: beside the database, or in the data
    /// directory for PostgreSQL (`XDG_DATA_HOME` is the folder here).
    fn files(&self) -> PathBuf {
        if self.sqlite() {
            self.path("files")
        } else {
            self.path("weft/files")
        }
    }

    fn weft(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_weft"));
        c.current_dir(self.dir.path())
            .env_remove("WEFT_FILES")
            .env_remove("WEFT_DB")
            .env_remove("WEFT_TOKEN")
            .env_remove("WEFT_MODEL")
            .env("XDG_DATA_HOME", self.dir.path())
            .stdin(Stdio::null());
        c
    }

    /// `weft serve --db DB --token-file token`, no `--files`.
    fn serve(&self, extra: &[&str]) -> support::Served {
        let mut child = self
            .weft()
            .args(["serve", "--addr", "127.0.0.1:0", "--db", &self.db])
            .args(["--token-file", "token"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let base = listening_on(&mut child);
        support::Served { child, base }
    }

    /// Links to the token and the database planted in the files directory, as someone
    /// with a shell on the host (or an earlier bug) might leave them.
    fn plant_links(&self) {
        let files = self.files();
        assert!(files.is_dir(), "the server made its files directory");
        std::os::unix::fs::symlink(self.path("token"), files.join("token_link")).unwrap();
        std::fs::hard_link(self.path("token"), files.join("token_hard")).unwrap();
        if self.sqlite() {
            std::os::unix::fs::symlink(self.path("weft.db"), files.join("db_link")).unwrap();
            std::fs::hard_link(self.path("weft.db"), files.join("db_hard")).unwrap();
        }
    }
}

fn client() -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap()
}

/// Checks one hostile run's output: every attempt refused, nothing read. On PostgreSQL
/// no database file exists to link to, so those two attempts write ordinary files.
fn assert_refused(door: &str, out: &Value, sqlite: bool) {
    for (what, _, path) in ATTEMPTS {
        if !sqlite && path.starts_with("db_") {
            continue;
        }
        let said = out[*what]
            .as_str()
            .unwrap_or_else(|| panic!("{door}: {what}: {out}"));
        assert!(said.starts_with("refused: "), "{door}: {what}: {said}");
    }
    let by_hard_link = out["token by hard link"].as_str().unwrap();
    assert!(
        by_hard_link.contains("Weft's own files"),
        "{door}: {by_hard_link}"
    );
}

/// Starts a run of the flow `source` through `/v1/runs`, waits for it to end, and
/// returns its id and record.
async fn run_text(client: &reqwest::Client, base: &str, source: &str) -> (String, Value) {
    let r: Value = support::post_json(
        client,
        &format!("{base}/v1/runs"),
        &json!({ "source": source }),
    )
    .await;
    let id = r["run_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_owned();
    let run = ended(client, base, &id).await;
    (id, run)
}

/// Waits for run `id` to end and returns its record.
async fn ended(client: &reqwest::Client, base: &str, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let run = support::get_run(client, base, id).await;
        if !matches!(
            run["status"].as_str(),
            Some("running" | "queued" | "pending")
        ) {
            return run;
        }
        assert!(Instant::now() < deadline, "run {id} never ended: {run}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One MCP tool call over `/mcp` (stateless JSON answers); the tool's structured
/// result, or its text parsed as JSON.
async fn mcp_call(client: &reqwest::Client, base: &str, tool: &str, args: Value) -> Value {
    let answer: Value = client
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": tool, "arguments": args}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let result = &answer["result"];
    if let Some(s) = result.get("structuredContent") {
        return s.clone();
    }
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"));
    serde_json::from_str(text).unwrap_or_else(|_| json!(text))
}

fn flows_never_reach_the_servers_files(op: &Operator) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = client();
    let server = op.serve(&[]);
    op.plant_links();
    let base = server.base.clone();
    let flow = hostile_flow(&op.path("token"));
    let mut run_ids: Vec<String> = Vec::new();
    let mut seen = String::new();
    runtime.block_on(async {
        // /v1/runs with the flow's text.
        let (id, run) = run_text(&client, &base, &flow).await;
        assert_eq!(run["status"], "completed", "{run}");
        assert_refused("/v1/runs", &run["output"], op.sqlite());
        seen.push_str(&run.to_string());
        run_ids.push(id.clone());
        let events = client
            .get(format!("{base}/v1/runs/{id}/events"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        seen.push_str(&events);

        // A file action over the database's hard link.
        if op.sqlite() {
            let (id, run) = run_text(&client, &base, WRITE_ACTION).await;
            assert_eq!(run["status"], "failed", "{run}");
            assert!(run.to_string().contains("Weft's own files"), "{run}");
            run_ids.push(id);
        }

        // MCP: run_flow with the text, then test_flow (reads only, answers no model).
        for tool in ["run_flow", "test_flow"] {
            let args = json!({"source": flow, "wait_seconds": 30});
            let ran = mcp_call(&client, &base, tool, args).await;
            assert_refused(tool, &ran["output"], op.sqlite());
            seen.push_str(&ran.to_string());
            if tool == "run_flow" {
                let id = ran["run_id"].as_str().unwrap_or_else(|| panic!("{ran}"));
                run_ids.push(id.to_owned());
            }
        }

        // Saved over MCP, the flow is an assistant; run it through the LangGraph door.
        let saved = mcp_call(
            &client,
            &base,
            "save_flow",
            json!({"name": "hostile", "source": flow}),
        )
        .await;
        assert!(saved.to_string().contains("hostile"), "{saved}");
        let waited: Value = client
            .post(format!("{base}/runs/wait"))
            .header("x-api-key", TOKEN)
            .json(&json!({"assistant_id": "hostile", "input": {}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        seen.push_str(&waited.to_string());
        let output = if waited.get("token by name").is_some() {
            waited.clone()
        } else {
            waited["output"].clone()
        };
        assert_refused("LangGraph /runs/wait", &output, op.sqlite());
    });
    assert!(!seen.contains(TOKEN), "the token leaked: {seen}");
    assert_eq!(
        std::fs::read_to_string(op.path("token")).unwrap().trim(),
        TOKEN
    );
    // After a restart (SIGKILL, then a new server), every run is still there.
    server.kill();
    if op.sqlite() {
        let db = std::fs::read(op.path("weft.db")).unwrap();
        assert!(
            db.starts_with(b"SQLite format 3\0"),
            "the database was overwritten"
        );
    }
    let server = op.serve(&[]);
    let listed: Value = runtime.block_on(support::get_json(
        &client,
        &format!("{}/v1/runs?limit=100", server.base),
    ));
    let listed = listed.to_string();
    for id in &run_ids {
        assert!(
            listed.contains(id.as_str()),
            "run {id} is gone after a restart: {listed}"
        );
    }
}

#[test]
fn flows_on_a_sqlite_server_never_reach_its_token_or_database() {
    flows_never_reach_the_servers_files(&Operator::new(None));
}

#[test]
fn flows_on_a_postgres_server_never_reach_its_token() {
    if let Some(env) = Env::on_postgres() {
        flows_never_reach_the_servers_files(&Operator::new(Some(env.db.clone())));
    }
}

/// `--files` naming a directory that holds the database or the token is refused at
/// start, naming both.
#[test]
fn a_files_directory_holding_the_database_is_refused_at_start() {
    let op = Operator::new(None);
    let elsewhere = tempfile::tempdir().unwrap();
    let other_db = elsewhere.path().join("weft.db").display().to_string();
    for (args, held) in [
        (vec!["--db", "weft.db", "--files", "."], "weft.db"),
        (vec!["--db", other_db.as_str(), "--files", "."], "token"),
    ] {
        let out = op
            .weft()
            .args(["serve", "--addr", "127.0.0.1:0", "--token-file", "token"])
            .args(&args)
            .output()
            .unwrap();
        let said = support::stderr(&out);
        assert_eq!(support::code(&out), 2, "{args:?}: {said}");
        assert!(
            said.contains(held) && said.contains("files directory"),
            "{said}"
        );
    }
    let out = op
        .weft()
        .args(["worker", "--db", "weft.db", "--files", "."])
        .output()
        .unwrap();
    assert_eq!(support::code(&out), 2, "{}", support::stderr(&out));
}

/// An HTTP server on `addr` that answers `/ok` with `fine`, and `/hop` with a redirect
/// to `hop_to`; it counts the requests it was sent.
fn http_server(
    addr: &str,
    hop_to: Option<String>,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{BufRead, Write};
    let listener = std::net::TcpListener::bind(addr).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
            let mut first = String::new();
            let _ = reader.read_line(&mut first);
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let answer = match (first.contains("/hop"), &hop_to) {
                (true, Some(to)) => format!(
                    "HTTP/1.1 302 Found\r\nLocation: {to}/ok\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                ),
                _ => "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\nfine"
                    .to_owned(),
            };
            let _ = (&stream).write_all(answer.as_bytes());
        }
    });
    (url, hits)
}

/// `--deny-net 127.0.0.2` on a server: a request to 127.0.0.1 goes, one to 127.0.0.2 is
/// refused before it is sent, so is a redirect from the first to the second, and so is
/// the cloud metadata address, which a server refuses unless allowed.
#[test]
fn a_server_s_flows_reach_only_what_the_network_policy_allows() {
    let (denied, denied_hits) = http_server("127.0.0.2:0", None);
    let (allowed, _) = http_server("127.0.0.1:0", Some(denied.clone()));
    let op = Operator::new(None);
    let server = op.serve(&["--deny-net", "127.0.0.2"]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = client();
    let get = |url: String| {
        format!(
            "weft: 1\nname: fetch\nroot:\n  action: {{uses: http.get, with: {{url: \"{url}\"}}}}\n"
        )
    };
    let cases = [
        (format!("{allowed}/ok"), None),
        (format!("{denied}/ok"), Some("--deny-net 127.0.0.2")),
        (format!("{allowed}/hop"), Some("--deny-net 127.0.0.2")),
        (
            "http://169.254.169.254/latest/meta-data/".to_owned(),
            Some("cloud metadata"),
        ),
    ];
    runtime.block_on(async {
        for (url, refusal) in cases {
            let (_, run) = run_text(&client, &server.base, &get(url.clone())).await;
            match refusal {
                None => {
                    assert_eq!(run["status"], "completed", "{url}: {run}");
                    assert_eq!(run["output"]["body"], "fine", "{url}: {run}");
                }
                Some(why) => {
                    assert_eq!(run["status"], "failed", "{url}: {run}");
                    let said = run.to_string();
                    assert!(
                        said.contains("network policy") && said.contains(why),
                        "{url}: {said}"
                    );
                }
            }
        }
    });
    assert_eq!(
        denied_hits.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "a request reached the denied address"
    );
}
