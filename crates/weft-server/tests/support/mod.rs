//! A real server on 127.0.0.1 over a SQLite file, and a reqwest client for it.
#![allow(dead_code)]

use serde_json::{Value, json};
use std::sync::Arc;
use weft_server::{ServerConfig, router};

pub const APPROVAL: &str = "weft: 1\nname: gate\nroot:\n  sequence:\n    - {id: draft, transform: {output: 'v1'}}\n    - {id: review, approval: {prompt: 'Ship it?'}}\n    - {id: ship, transform: {output: '{{ input.decision }}'}}\n";

/// Fails its first call, then answers: a service that was down for a moment.
pub struct Flaky(std::sync::atomic::AtomicUsize);

#[async_trait::async_trait]
impl weft_core::ports::Native for Flaky {
    async fn call(
        &self,
        _: weft_core::ports::NativeCall,
    ) -> Result<weft_core::ports::NativeOutput, weft_core::BlockError> {
        if self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            Err(weft_core::BlockError::new(
                weft_core::ErrorKind::Handler,
                "down",
            ))
        } else {
            Ok(weft_core::ports::NativeOutput::from(json!("up")))
        }
    }
}

/// Takes 100 ms and counts how many of its calls run at once, at most.
#[derive(Default)]
pub struct Slow {
    pub now: std::sync::atomic::AtomicUsize,
    pub peak: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl weft_core::ports::Native for Slow {
    async fn call(
        &self,
        _: weft_core::ports::NativeCall,
    ) -> Result<weft_core::ports::NativeOutput, weft_core::BlockError> {
        use std::sync::atomic::Ordering::SeqCst;
        let now = self.now.fetch_add(1, SeqCst) + 1;
        self.peak.fetch_max(now, SeqCst);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        self.now.fetch_sub(1, SeqCst);
        Ok(weft_core::ports::NativeOutput::from(json!("slept")))
    }
}

pub struct Server {
    pub base: String,
    pub client: reqwest::Client,
    /// The server's store, for a test to make keys in or read back.
    pub store: Arc<dyn weft_core::ports::Store>,
    pub _dir: tempfile::TempDir,
}

pub async fn server(token: Option<&str>) -> Server {
    server_with(token, None, Arc::new(Slow::default())).await
}

pub async fn server_with(token: Option<&str>, max_runs: Option<usize>, slow: Arc<Slow>) -> Server {
    server_configured(slow, |c| {
        c.token = token.map(str::to_owned);
        c.max_runs = max_runs;
    })
    .await
}

/// A server whose configuration `configure` finishes (a 64 KiB body limit first).
pub async fn server_configured(
    slow: Arc<Slow>,
    configure: impl FnOnce(&mut ServerConfig),
) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let store =
        weft_store::SqliteStore::open(dir.path().join("runs.db"), weft_store::Durability::Process)
            .unwrap();
    let store: Arc<dyn weft_core::ports::Store> = Arc::new(store);
    let engine = weft_engine::Engine::builder(store.clone())
        .handler("flaky", Arc::new(Flaky(Default::default())))
        .handler("slow", slow)
        .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut config = ServerConfig {
        max_body_bytes: 64 << 10,
        ..ServerConfig::new(addr)
    };
    configure(&mut config);
    let app = router(engine, &config);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Server {
        base: format!("http://{addr}"),
        client: reqwest::Client::new(),
        store,
        _dir: dir,
    }
}

impl Server {
    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .client
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.get_as(path, None, None).await
    }

    /// `GET path` with a bearer `token` and a `Host` header of its own, when given.
    pub async fn get_as(
        &self,
        path: &str,
        token: Option<&str>,
        host: Option<&str>,
    ) -> (u16, Value) {
        let mut req = self.client.get(format!("{}{path}", self.base));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(h) = host {
            req = req.header("Host", h);
        }
        let r = req.send().await.unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    /// Reads SSE events from `path` until `stop` says so or the stream ends.
    pub async fn events(
        &self,
        path: &str,
        last_event_id: Option<u64>,
        mut stop: impl FnMut(&Sse) -> bool,
    ) -> Vec<Sse> {
        use futures::StreamExt;
        let mut req = self.client.get(format!("{}{path}", self.base));
        if let Some(id) = last_event_id {
            req = req.header("Last-Event-ID", id.to_string());
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert!(
            r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        let mut body = r.bytes_stream();
        let (mut buffer, mut out) = (String::new(), Vec::new());
        while let Some(chunk) = body.next().await {
            buffer.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            while let Some(end) = buffer.find("\n\n") {
                let block: String = buffer.drain(..end + 2).collect();
                let Some(e) = Sse::parse(&block) else {
                    continue;
                };
                let done = stop(&e);
                out.push(e);
                if done {
                    return out;
                }
            }
        }
        out
    }
}

/// One server-sent event.
#[derive(Debug, Clone, PartialEq)]
pub struct Sse {
    pub id: Option<u64>,
    pub event: String,
    pub data: Value,
}

impl Sse {
    pub fn parse(block: &str) -> Option<Sse> {
        let (mut id, mut event, mut data) = (None, String::new(), None);
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("id:") {
                id = v.trim().parse().ok();
            } else if let Some(v) = line.strip_prefix("event:") {
                event = v.trim().to_owned();
            } else if let Some(v) = line.strip_prefix("data:") {
                data = serde_json::from_str(v.trim()).ok();
            }
        }
        Some(Sse {
            id,
            event,
            data: data?,
        })
    }
}
