//! A headless Chromium driven over WebDriver (Debian's `chromium` and `chromium-driver`,
//! installed by `scripts/setup`), for the tests of pages: Weft's own and AgentFlow's
//! editor.

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a page may take to show what a step did.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A ChromeDriver process; killed when dropped.
pub struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    pub fn start() -> Driver {
        let port = super::free_port();
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("chromedriver does not start ({e}): scripts/setup installs Debian's chromium and chromium-driver")
            });
        super::await_listening(port, "chromedriver", Duration::from_secs(20));
        Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    /// A headless Chromium, as a fresh user with no network beyond loopback.
    pub async fn browser(&self) -> Client {
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

/// A browser tab on the page, with the few things the test does to it.
pub struct Page {
    pub c: Client,
}

impl Page {
    pub async fn open(&self, url: &str) {
        self.c.goto(url).await.unwrap();
    }

    /// Evaluates `script` (a function body that returns a value) until it returns
    /// something truthy, and returns that; fails with `what` after [`PATIENCE`].
    pub async fn wait_for(&self, what: &str, script: &str) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let v = self.c.execute(script, vec![]).await.unwrap();
            let truthy =
                !matches!(&v, Value::Null | Value::Bool(false)) && v != json!("") && v != json!(0);
            if truthy {
                return v;
            }
            if Instant::now() > deadline {
                panic!(
                    "the page never showed {what}; it shows:\n{}",
                    self.text("body").await
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn click(&self, css: &str) {
        self.c
            .find(Locator::Css(css))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
    }

    /// Types `keys` into the element `css` selects (a button takes Enter).
    pub async fn type_into(&self, css: &str, keys: &str) {
        let element = self.c.find(Locator::Css(css)).await.unwrap();
        element.send_keys(keys).await.unwrap();
    }

    /// The text of the element `css` selects, read in one step (the script may redraw
    /// the run's part at any moment, which a find-then-read would race).
    pub async fn text(&self, css: &str) -> String {
        let text = self
            .c
            .execute(
                "const e = document.querySelector(arguments[0]); return e ? e.innerText : null;",
                vec![json!(css)],
            )
            .await
            .unwrap();
        text.as_str()
            .unwrap_or_else(|| panic!("nothing matches {css}"))
            .to_owned()
    }

    pub async fn screenshot(&self, name: &str) {
        let Some(dir) = std::env::var_os("WEFT_SCREENSHOTS") else {
            return;
        };
        let png = self.c.screenshot().await.unwrap();
        std::fs::write(PathBuf::from(dir).join(name), png).unwrap();
    }
}
