//! A `weft serve` as the command line reaches it (`--server URL`), so a person at a
//! terminal and a page see one set of runs. A flow's text travels to the server;
//! progress comes back as the run's event stream; results and exit codes are the ones
//! a local run gives.

use futures::StreamExt;
use serde_json::{Value, json};
use std::path::Path;
use weft_core::Diagnostic;
use weft_core::event::{Event, EventKind};
use weft_core::ports::EventSink;
use weft_engine::RunResult;

/// A server and how to reach it.
pub(crate) struct Remote {
    base: String,
    token: Option<String>,
    client: reqwest::Client,
}

/// Why a remote run could not be reported: what to print (exit code 2).
pub(crate) struct RemoteError(pub(crate) String);

impl Remote {
    pub(crate) fn new(base: &str, token: Option<String>) -> Remote {
        Remote {
            base: base.trim_end_matches('/').to_owned(),
            token,
            client: reqwest::Client::new(),
        }
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let req = self.client.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    /// Starts a run of the flow in `file` and follows it to its end or pause, showing
    /// each event to `sink`.
    pub(crate) async fn run(
        &self,
        file: &Path,
        input: Option<Value>,
        dialect: Option<&str>,
        sink: Option<&dyn EventSink>,
    ) -> Result<RunResult, RemoteError> {
        let shown = file.display().to_string();
        let source = std::fs::read_to_string(file)
            .map_err(|e| RemoteError(format!("error: cannot read {shown}: {e}")))?;
        let body = json!({"source": source, "input": input, "dialect": dialect, "name": shown});
        let created = self
            .call(
                self.request(reqwest::Method::POST, "/v1/runs").json(&body),
                &shown,
            )
            .await?;
        let run_id = created["run_id"]
            .as_str()
            .ok_or_else(|| {
                RemoteError(format!(
                    "error: the server answered without a run id: {created}"
                ))
            })?
            .to_owned();
        self.follow(&run_id, None, sink).await?;
        self.result(&run_id).await
    }

    /// Asks the server to continue run `id` (`action`: `approve`, `resume` or `retry`,
    /// with `body`) and follows it to its end or next pause, showing each new event to
    /// `sink`.
    pub(crate) async fn continue_run(
        &self,
        id: &str,
        action: &str,
        body: Value,
        sink: Option<&dyn EventSink>,
    ) -> Result<RunResult, RemoteError> {
        let before = self.get(&format!("/v1/runs/{id}")).await?;
        // The id may be a prefix: the server's answer names the run in full.
        let id = before["run_id"].as_str().unwrap_or(id).to_owned();
        let seen = before["last_event"].as_u64();
        self.post(&format!("/v1/runs/{id}/{action}"), body).await?;
        self.follow(&id, seen, sink).await?;
        self.result(&id).await
    }

    /// `GET path`'s JSON.
    pub(crate) async fn get(&self, path: &str) -> Result<Value, RemoteError> {
        self.call(self.request(reqwest::Method::GET, path), path)
            .await
    }

    /// `POST path` with `body`'s JSON.
    pub(crate) async fn post(&self, path: &str, body: Value) -> Result<Value, RemoteError> {
        self.call(self.request(reqwest::Method::POST, path).json(&body), path)
            .await
    }

    /// Where run `id` stands, as `weft run` reports it.
    async fn result(&self, id: &str) -> Result<RunResult, RemoteError> {
        let run = self.get(&format!("/v1/runs/{id}")).await?;
        serde_json::from_value(run)
            .map_err(|e| RemoteError(format!("error: the server's run {id} is not a run: {e}")))
    }

    /// Reads the run's event stream (after event `after`) until its last event or a
    /// pause.
    async fn follow(
        &self,
        run_id: &str,
        after: Option<u64>,
        sink: Option<&dyn EventSink>,
    ) -> Result<(), RemoteError> {
        let path = match after {
            Some(seq) => format!("/v1/runs/{run_id}/events?after={seq}"),
            None => format!("/v1/runs/{run_id}/events"),
        };
        let response = self
            .request(reqwest::Method::GET, &path)
            .send()
            .await
            .map_err(|e| unreachable_server(&self.base, e))?;
        let mut body = response.bytes_stream();
        let mut text = String::new();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| unreachable_server(&self.base, e))?;
            text.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = text.find("\n\n") {
                let block: String = text.drain(..end + 2).collect();
                let Some(event) = parse_event(&block) else {
                    continue;
                };
                if let Some(s) = sink {
                    s.emit(&event);
                }
                if matches!(event.kind, EventKind::RunPaused { .. }) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Sends `req`; a problem object becomes the message to print, with an invalid
    /// flow's diagnostics located in `file`.
    async fn call(&self, req: reqwest::RequestBuilder, file: &str) -> Result<Value, RemoteError> {
        let response = req
            .send()
            .await
            .map_err(|e| unreachable_server(&self.base, e))?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(body);
        }
        let diagnostics: Vec<Diagnostic> = body
            .get("diagnostics")
            .and_then(|d| serde_json::from_value(d.clone()).ok())
            .unwrap_or_default();
        if !diagnostics.is_empty() {
            let lines: Vec<String> = diagnostics.iter().map(|d| d.render(file)).collect();
            return Err(RemoteError(lines.join("\n")));
        }
        Err(RemoteError(format!(
            "error: the server answered {status}: {}",
            body["detail"]
                .as_str()
                .or(body["title"].as_str())
                .unwrap_or("no detail")
        )))
    }
}

fn unreachable_server(base: &str, e: reqwest::Error) -> RemoteError {
    RemoteError(format!(
        "error: cannot reach the server at {base}: {e}\n  hint: start one with `weft serve`, or check --server"
    ))
}

/// One SSE block's `data:` as an event.
fn parse_event(block: &str) -> Option<Event> {
    let data = block.lines().find_map(|l| l.strip_prefix("data:"))?;
    serde_json::from_str(data.trim()).ok()
}
