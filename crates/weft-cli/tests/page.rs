//! The page `weft serve` shows, in a real browser: headless Chromium driven over
//! WebDriver (Debian's `chromium` and `chromium-driver`, installed by `scripts/setup`)
//! against the real binary on 127.0.0.1 with a SQLite file.
//!
//! With `WEFT_SCREENSHOTS=DIR` the test saves the runs list and a run page there (the
//! pictures in `docs/images/` are made so).

use fantoccini::{Locator, key::Key};
use serde_json::{Value, json};
use std::time::Duration;

mod support;

use support::browser::{Driver, Page};
use support::{Env, Served};
use weft_core::ports::{RunRecord, RunStatus, Store};
use weft_store::{Durability, SqliteStore};

/// The run's record is written a moment after its pause event: a page loaded between the
/// two has the journal's pause and the record from before it. Made here by holding the
/// paused run's record back by hand in the server's own SQLite file, then letting it go.
async fn a_page_that_reads_the_record_before_it_follows_the_journal(
    page: &Page,
    env: &Env,
    base: &str,
    run_id: &str,
) {
    let store = SqliteStore::open(env.db_file(), Durability::Process).unwrap();
    let paused = store.get_run(run_id).await.unwrap().unwrap();
    let lagging = RunRecord {
        status: RunStatus::Running,
        waiting: None,
        ..paused.clone()
    };
    store.update_run(&lagging).await.unwrap();
    page.open(&format!("{base}/runs/{run_id}")).await;
    assert_eq!(page.text(".run-head .badge").await, "running");
    store.update_run(&paused).await.unwrap();
    page.wait_for(
        "the approval's question once the record caught up",
        "const p = document.querySelector('section.approval .prompt'); return p && p.innerText;",
    )
    .await;
}

impl Page {
    /// The class of the drawn node for the block at `path`.
    async fn node_class(&self, path: &str) -> String {
        let script = format!(
            "const g = document.querySelector('g.node[data-path=\"{path}\"]'); return g && g.getAttribute('class');"
        );
        let class = self.c.execute(&script, vec![]).await.unwrap();
        class.as_str().unwrap_or_default().to_owned()
    }

    /// Waits until the node for `path` is in `state`.
    async fn wait_for_node(&self, path: &str, state: &str) {
        let script = format!(
            "const g = document.querySelector('g.node[data-path=\"{path}\"]'); const c = g && g.getAttribute('class'); return c && c.includes('{state}');"
        );
        self.wait_for(&format!("{path} in {state}"), &script).await;
    }

    /// The run's output, once the page shows it.
    async fn output(&self) -> Value {
        let text = self
            .wait_for(
                "the run's output",
                "const o = document.getElementById('run-output'); return o && o.textContent;",
            )
            .await;
        let text = text.as_str().unwrap();
        serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
    }
}

fn example_text(name: &str) -> String {
    std::fs::read_to_string(support::example(name)).unwrap()
}

/// Starts a run of `source` through the API (with `?wait=20` when `wait`): the answer.
async fn start_run(base: &str, source: &str, wait: bool) -> Value {
    let query = if wait { "?wait=20" } else { "" };
    support::post_json(
        &reqwest::Client::new(),
        &format!("{base}/v1/runs{query}"),
        &json!({ "source": source }),
    )
    .await
}

/// What the streaming model says, a word every 150 ms.
const STREAMED: &str = "Tea is an aromatic drink made by steeping cured leaves in hot water.";

/// A flow whose model streams its reply slowly.
fn streaming_flow() -> String {
    format!(
        "weft: 1\nname: streaming\nmodels:\n  slow: {{provider: scripted, rules: [{{reply: \"{STREAMED}\", stream_delay_ms: 150}}]}}\nroot: {{id: say, llm: {{model: slow, prompt: tea}}}}\n"
    )
}

/// A `blocks` flow whose loop iterates over a field the block before does not declare.
const FLAWED_BLOCKS: &str = "name: words\nroot:\n  type: h\n  children:\n    - step_id: split\n      type: code\n      input_schema: {fields: [{name: text, type: string}]}\n      code: \"return {'words': text.split()}\"\n      output_schema: {fields: [{name: words, type: array}]}\n    - type: loop\n      arrayField: wordz\n      children: [{step_id: each, type: passthrough}]\n";

/// A native flow whose loop condition reads a state key nothing writes.
const WARNED_NATIVE: &str = "weft: 1\nname: count\nstate: {count: 0}\nroot:\n  loop:\n    max_iterations: 5\n    while: \"state.cuont < 3\"\n    body: {transform: {output: 1}, set: {count: \"{{ state.count + 1 }}\"}}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_starts_watches_approves_and_retries_runs_in_a_browser() {
    if support::left_out_of_fast_profile("Chromium") {
        return;
    }
    let env = Env::new();
    let served = Served::start(&env);
    let base = served.base.clone();
    let driver = Driver::start();
    let page = Page {
        c: driver.browser().await,
    };

    // A flow whose loop reads a field the block before does not produce is refused on
    // the page, at its line, with the field it meant; one whose condition reads a state
    // key nothing writes is stored with its warning shown, and the author goes on.
    page.open(&format!("{base}/new")).await;
    for (flow, class, words) in [
        (FLAWED_BLOCKS, "error", "did you mean `words`?"),
        (WARNED_NATIVE, "warning", "did you mean `count`?"),
    ] {
        page.c
            .execute(
                "document.getElementById('diagnostics').textContent = ''; document.getElementById('source').value = arguments[0];",
                vec![json!(flow)],
            )
            .await
            .unwrap();
        page.click("[data-action=check]").await;
        let shown = page
            .wait_for(
                "the flow's diagnostics",
                &format!("const d = document.querySelector('#diagnostics li.diagnostic.{class}'); return d && d.innerText;"),
            )
            .await;
        assert!(shown.as_str().unwrap().contains(words), "{shown}");
    }
    page.click("[data-action=continue]").await;
    page.wait_for(
        "the warned flow's start form",
        "return location.search.startsWith('?flow=') && document.getElementById('input') !== null;",
    )
    .await;

    // Paste the example on the start page; it is checked, stored, and offered to start.
    page.open(&format!("{base}/new")).await;
    page.c
        .execute(
            "document.getElementById('source').value = arguments[0];",
            vec![json!(example_text("release-approval.yaml"))],
        )
        .await
        .unwrap();
    page.click("[data-action=check]").await;
    let input = page
        .wait_for(
            "the stored flow's start form",
            "const i = document.getElementById('input'); return location.search.startsWith('?flow=') && i && i.value;",
        )
        .await;
    let input: Value = serde_json::from_str(input.as_str().unwrap()).unwrap();
    assert_eq!(input["version"], "1.4.0", "the flow's own input is offered");
    page.click("[data-action=start]").await;

    // The run page: the approval block turns "waiting" as the run reaches it.
    let path = page
        .wait_for(
            "the run page",
            "return location.pathname.startsWith('/runs/') && location.pathname;",
        )
        .await;
    let run_id = path
        .as_str()
        .unwrap()
        .trim_start_matches("/runs/")
        .to_owned();
    page.wait_for_node("root/review", "state-waiting").await;
    assert!(page.node_class("root/draft").await.contains("state-done"));
    // The node turns waiting on the journal's approval event; the question follows when
    // the run itself is marked paused, a redraw later.
    let prompt = page
        .wait_for(
            "the approval's question",
            "const p = document.querySelector('section.approval .prompt'); return p && p.innerText;",
        )
        .await;
    let prompt = prompt.as_str().unwrap();
    assert!(prompt.contains("Publish these notes?"), "{prompt}");
    page.screenshot("run-waiting.png").await;
    a_page_that_reads_the_record_before_it_follows_the_journal(&page, &env, &base, &run_id).await;

    // Approve from the page, with the keyboard, giving a note and a name.
    page.type_into("section.approval textarea[name=note]", "Looks right.")
        .await;
    page.type_into("section.approval input[name=by]", "Ada")
        .await;
    let enter = String::from(char::from(Key::Enter));
    page.type_into("button[data-decision=approve]", &enter)
        .await;
    let output = page.output().await;
    assert_eq!(output["released"], true, "{output}");
    assert_eq!(page.text(".run-head .badge").await, "completed");
    let answered = page.text("section.answered").await;
    assert!(
        answered.contains("approve")
            && answered.contains("Ada")
            && answered.contains("Looks right."),
        "{answered}"
    );
    assert!(
        page.node_class("root/decide/approved")
            .await
            .contains("state-done")
    );
    assert!(
        page.node_class("root/decide/otherwise")
            .await
            .contains("state-not-reached")
    );
    page.screenshot("run-page.png").await;

    // A failed run: its failing step's error, and a retry that says what runs again.
    let failed = start_run(&base, &example_text("read-notes.yaml"), true).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    let failed = failed["run_id"].as_str().unwrap().to_owned();
    page.open(&format!("{base}/runs/{failed}")).await;
    let panel = page.text("#step-panel").await;
    assert!(
        panel.contains("root/read") && panel.contains("No such file"),
        "{panel}"
    );
    assert!(page.node_class("root/read").await.contains("state-failed"));
    page.click("[data-open=retry-dialog]").await;
    let plan = page
        .wait_for(
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
    page.click("[data-action=retry]").await;
    let output = page.output().await;
    assert_eq!(output["notes"], "ship it", "{output}");
    let draft = page.node_class("root/draft").await;
    assert!(
        draft.contains("state-replayed"),
        "the draft came from the journal: {draft}"
    );

    // A model step's text shows in its panel as it streams, before the step ends.
    let streaming = start_run(&base, &streaming_flow(), false).await;
    let streaming = streaming["run_id"].as_str().unwrap();
    page.open(&format!("{base}/runs/{streaming}")).await;
    let partial = page
        .wait_for(
            "the model's text while it streams",
            "const p = document.querySelector('pre[data-stream]'); return !document.getElementById('run-output') && p && p.textContent;",
        )
        .await;
    // Deltas are live only: the panel shows the text from the moment the page opened.
    let partial = partial.as_str().unwrap();
    assert!(
        STREAMED.ends_with(partial) || STREAMED.contains(partial),
        "{partial:?}"
    );
    assert!(partial.len() < STREAMED.len(), "{partial:?}");
    assert_eq!(page.output().await, STREAMED);

    // The runs list shows them all, and a phone-sized window needs no sideways
    // scrolling outside the table.
    page.open(&format!("{base}/")).await;
    let rows = page
        .c
        .find_all(Locator::Css("tbody#runs tr[data-run]"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 3);
    let listed = page.text("#runs").await;
    for shown in [
        "release-approval",
        "read-notes",
        "streaming",
        &run_id[..12],
        &failed[..12],
    ] {
        assert!(listed.contains(shown), "{shown} in {listed}");
    }
    page.screenshot("runs.png").await;
    page.c.set_window_size(390, 844).await.unwrap();
    page.open(&format!("{base}/runs/{run_id}")).await;
    let overflow = page
        .c
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

    page.c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_follows_a_schedule_s_firings_to_their_runs() {
    if support::left_out_of_fast_profile("Chromium") {
        return;
    }
    let env = Env::new();
    let flow = env.write(
        "tick.yaml",
        "weft: 1\nname: tick\nroot: {transform: {output: 'tick {{ input.n }}'}}\n",
    );
    let flow = flow.display().to_string();
    let args = ["schedules", "add", flow.as_str(), "--cron", "* * * * * *"];
    let added = env.weft(&[&args[..], &["--input", r#"{"n": 1}"#]].concat());
    assert_eq!(support::code(&added), 0, "{}", support::stderr(&added));
    let weekly = env.weft(&[
        "schedules",
        "add",
        "tick",
        "--cron",
        "0 9 * * MON",
        "--tz",
        "Europe/Paris",
        "--id",
        "weekly",
    ]);
    assert_eq!(support::code(&weekly), 0, "{}", support::stderr(&weekly));
    let served = Served::start(&env);
    let driver = Driver::start();
    let page = Page {
        c: driver.browser().await,
    };
    page.open(&format!("{}/schedules", served.base)).await;
    let next = page
        .wait_for(
            "the weekly schedule's next fire times",
            "return [...document.querySelectorAll('#schedule-weekly ol.next time')].map(t => t.textContent);",
        )
        .await;
    let next = next.as_array().unwrap();
    assert_eq!(next.len(), 5, "{next:?}");
    // As people read them: the weekday, date and time in the schedule's zone, how far
    // off, and the viewer's own time (the browser here runs in UTC, not Paris).
    for t in next {
        let t = t.as_str().unwrap();
        assert!(t.starts_with("Mon ") && t.contains(", 09:00 CE"), "{t}");
        assert!(t.contains("(in ") && t.contains("; your time "), "{t}");
    }
    // The every-second schedule has fired by the time the page is read again.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    page.open(&format!("{}/schedules", served.base)).await;
    page.wait_for(
        "a firing linked to its run",
        "return document.querySelector('#schedule-tick table.firings a[href^=\"/runs/\"]');",
    )
    .await;
    page.click("#schedule-tick table.firings a[href^=\"/runs/\"]")
        .await;
    assert_eq!(page.output().await, json!("tick 1"));
    page.c.close().await.unwrap();
}
