//! The page `weft serve` shows, in a real browser: headless Chromium driven over
//! WebDriver (Debian's `chromium` and `chromium-driver`, installed by `scripts/setup`)
//! against the real binary on 127.0.0.1 with a SQLite file.
//!
//! With `WEFT_SCREENSHOTS=DIR` the test saves the runs list and a run page there (the
//! pictures in `docs/images/` are made so).

use fantoccini::{Client, ClientBuilder, Locator, key::Key};
use serde_json::{Value, json};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod support;

use support::{Env, Served};

/// How long the page may take to show what a step did.
const PATIENCE: Duration = Duration::from_secs(30);

/// A ChromeDriver process; killed when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    fn start() -> Driver {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("chromedriver does not start ({e}): scripts/setup installs Debian's chromium and chromium-driver")
            });
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "chromedriver never listened");
            std::thread::sleep(Duration::from_millis(50));
        }
        Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    /// A headless Chromium, as a fresh user with no network beyond loopback.
    async fn browser(&self) -> Client {
        let profile = tempfile::tempdir().unwrap().keep();
        let args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1280,800",
        ];
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        let caps = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium(), "args": args},
        });
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps.as_object().unwrap().clone())
            .connect(&self.url)
            .await
            .expect("a WebDriver session in headless Chromium")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn chromium() -> String {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .unwrap_or("chromium")
        .to_owned()
}

/// Evaluates `script` (a function body that returns a value) until it returns something
/// truthy, and returns that; fails with `what` after [`PATIENCE`].
async fn wait_for(c: &Client, what: &str, script: &str) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let v = c.execute(script, vec![]).await.unwrap();
        let truthy =
            !matches!(&v, Value::Null | Value::Bool(false)) && v != json!("") && v != json!(0);
        if truthy {
            return v;
        }
        if Instant::now() > deadline {
            let body = c
                .execute("return document.body.innerText", vec![])
                .await
                .unwrap();
            panic!(
                "the page never showed {what}; it shows:\n{}",
                body.as_str().unwrap_or("")
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The class of the drawn node for the block at `path`.
fn node_class(path: &str) -> String {
    format!(
        "const g = document.querySelector('g.node[data-path=\"{path}\"]'); return g ? g.getAttribute('class') : null;"
    )
}

/// The class of the drawn node for the block at `path` once it holds `state`.
fn node_in(path: &str, state: &str) -> String {
    format!(
        "const g = document.querySelector('g.node[data-path=\"{path}\"]'); const c = g && g.getAttribute('class'); return c && c.includes('{state}') ? c : null;"
    )
}

async fn screenshot(c: &Client, name: &str) {
    let Some(dir) = std::env::var_os("WEFT_SCREENSHOTS") else {
        return;
    };
    let png = c.screenshot().await.unwrap();
    std::fs::write(PathBuf::from(dir).join(name), png).unwrap();
}

fn example_text(name: &str) -> String {
    std::fs::read_to_string(support::example(name)).unwrap()
}

/// Starts the read-notes example through the API and waits for it to fail at `read`.
async fn failed_run(base: &str) -> String {
    let run: Value = reqwest::Client::new()
        .post(format!("{base}/v1/runs?wait=20"))
        .json(&json!({"source": example_text("read-notes.yaml")}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(run["status"], "failed", "{run}");
    run["run_id"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_starts_watches_approves_and_retries_runs_in_a_browser() {
    let env = Env::new();
    let served = Served::start(&env);
    let base = served.base.clone();
    let driver = Driver::start();
    let c = driver.browser().await;

    // Paste the example on the start page; it is checked, stored, and offered to start.
    c.goto(&format!("{base}/new")).await.unwrap();
    c.execute(
        "document.getElementById('source').value = arguments[0];",
        vec![json!(example_text("release-approval.yaml"))],
    )
    .await
    .unwrap();
    c.find(Locator::Css("[data-action=check]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for(
        &c,
        "the stored flow's start form",
        "return document.querySelector('[data-action=start]');",
    )
    .await;
    assert!(
        c.current_url()
            .await
            .unwrap()
            .as_str()
            .contains("/new?flow=")
    );
    let input = c.find(Locator::Id("input")).await.unwrap();
    let default_input: Value =
        serde_json::from_str(&input.prop("value").await.unwrap().unwrap()).unwrap();
    assert_eq!(
        default_input["version"], "1.4.0",
        "the flow's own input is offered"
    );
    c.find(Locator::Css("[data-action=start]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();

    // The run page: the approval block turns "waiting" as the run reaches it.
    wait_for(
        &c,
        "the run page",
        "return location.pathname.startsWith('/runs/');",
    )
    .await;
    let run_id = c
        .current_url()
        .await
        .unwrap()
        .path()
        .trim_start_matches("/runs/")
        .to_owned();
    wait_for(
        &c,
        "the review block waiting",
        &node_in("root/review", "state-waiting"),
    )
    .await;
    let draft = c.execute(&node_class("root/draft"), vec![]).await.unwrap();
    assert!(draft.as_str().unwrap().contains("state-done"), "{draft}");
    let prompt = c
        .find(Locator::Css("section.approval .prompt"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(prompt.contains("Publish these notes?"), "{prompt}");
    screenshot(&c, "run-waiting.png").await;

    // Approve from the page, with the keyboard, giving a note and a name.
    c.find(Locator::Css("section.approval textarea[name=note]"))
        .await
        .unwrap()
        .send_keys("Looks right.")
        .await
        .unwrap();
    c.find(Locator::Css("section.approval input[name=by]"))
        .await
        .unwrap()
        .send_keys("Ada")
        .await
        .unwrap();
    c.find(Locator::Css("button[data-decision=approve]"))
        .await
        .unwrap()
        .send_keys(&String::from(char::from(Key::Enter)))
        .await
        .unwrap();
    let output = wait_for(
        &c,
        "the run's output",
        "const o = document.getElementById('run-output'); return o && o.textContent;",
    )
    .await;
    let output: Value = serde_json::from_str(output.as_str().unwrap()).unwrap();
    assert_eq!(output["released"], true, "{output}");
    assert_eq!(
        c.find(Locator::Css(".run-head .badge"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "completed"
    );
    let answered = c
        .find(Locator::Css("section.answered"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        answered.contains("approve")
            && answered.contains("Ada")
            && answered.contains("Looks right."),
        "{answered}"
    );
    let taken = c
        .execute(&node_class("root/decide/approved"), vec![])
        .await
        .unwrap();
    assert!(taken.as_str().unwrap().contains("state-done"), "{taken}");
    let skipped = c
        .execute(&node_class("root/decide/otherwise"), vec![])
        .await
        .unwrap();
    assert!(
        skipped.as_str().unwrap().contains("state-not-reached"),
        "{skipped}"
    );
    screenshot(&c, "run-page.png").await;

    // A failed run: its failing step's error, and a retry that says what runs again.
    let failed = failed_run(&base).await;
    c.goto(&format!("{base}/runs/{failed}")).await.unwrap();
    let panel = c
        .find(Locator::Id("step-panel"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        panel.contains("root/read") && panel.contains("No such file"),
        "{panel}"
    );
    let read = c.execute(&node_class("root/read"), vec![]).await.unwrap();
    assert!(read.as_str().unwrap().contains("state-failed"), "{read}");
    c.find(Locator::Css("[data-open=retry-dialog]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let plan = wait_for(
        &c,
        "the retry plan",
        "const d = document.getElementById('retry-dialog'); return d && d.open && d.innerText;",
    )
    .await;
    let plan = plan.as_str().unwrap();
    assert!(
        plan.contains("1 journaled step(s) keep their result"),
        "{plan}"
    );
    assert!(
        plan.contains("root/read") && plan.contains("runs an external action"),
        "{plan}"
    );
    assert!(
        !plan.contains("calls the model"),
        "the draft is reused, not asked again: {plan}"
    );
    std::fs::write(env.path("notes.txt"), "ship it").unwrap();
    c.find(Locator::Css("[data-action=retry]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let output = wait_for(
        &c,
        "the retried run's output",
        "const o = document.getElementById('run-output'); return o && o.textContent;",
    )
    .await;
    let output: Value = serde_json::from_str(output.as_str().unwrap()).unwrap();
    assert_eq!(output["notes"], "ship it", "{output}");
    let draft = c.execute(&node_class("root/draft"), vec![]).await.unwrap();
    assert!(
        draft.as_str().unwrap().contains("state-replayed"),
        "the draft came from the journal: {draft}"
    );

    // The runs list shows both, and a phone-sized window needs no sideways scrolling
    // outside the table.
    c.goto(&format!("{base}/")).await.unwrap();
    let rows = c
        .find_all(Locator::Css("tbody#runs tr[data-run]"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    let listed = c
        .find(Locator::Id("runs"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        listed.contains("release-approval") && listed.contains("read-notes"),
        "{listed}"
    );
    assert!(
        listed.contains(&run_id[..12]) && listed.contains(&failed[..12]),
        "{listed}"
    );
    screenshot(&c, "runs.png").await;
    c.set_window_size(390, 844).await.unwrap();
    c.goto(&format!("{base}/runs/{run_id}")).await.unwrap();
    let overflow = c
        .execute(
            "return document.documentElement.scrollWidth - window.innerWidth;",
            vec![],
        )
        .await
        .unwrap();
    assert!(
        overflow.as_i64().unwrap() <= 0,
        "the run page is wider than a phone by {overflow}px"
    );

    c.close().await.unwrap();
    drop(served);
}
