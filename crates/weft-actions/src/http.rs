//! `http.get`, `http.post` and `http.request` (any method, named by `with.method`): one
//! request, a bounded answer.
//!
//! The result is `{status, headers, body}`, with `body` parsed when the server says it is
//! JSON and text otherwise. A status of 400 or more is an error (kind `rate_limit` for
//! 429, `action` otherwise) carrying the status and the start of the body, so retry
//! policies and error routes can act on it. `http.post` sends the step's idempotency
//! key as `Idempotency-Key` unless the block's `headers` set one.

use super::{as_text, str_param};
use async_trait::async_trait;
use std::time::Duration;
use weft_core::ports::{Native, NativeCall, NativeOutput};
use weft_core::{BlockError, ErrorKind, Value};

/// The largest body read; a bigger answer is an error rather than unbounded memory.
const MAX_BODY: usize = 16 << 20;
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// The header that carries the step's idempotency key, unless `headers` sets it.
const IDEMPOTENCY_KEY: &str = "Idempotency-Key";
/// The methods `http.request` sends.
const METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"];

/// Whether the `headers` object names `name` (header names ignore case).
fn has_header(headers: Option<&Value>, name: &str) -> bool {
    headers
        .and_then(Value::as_object)
        .is_some_and(|h| h.keys().any(|k| k.eq_ignore_ascii_case(name)))
}

/// Which requests an HTTP action sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verb {
    Get,
    Post,
    /// The method the block names in `with.method`.
    Named,
}

/// The HTTP client the HTTP actions share, made when one first runs (building it reads
/// the machine's CA certificates, hundreds of files, which a run without HTTP should
/// not pay for at start-up), and the network policy it is built with.
#[derive(Clone)]
pub(crate) struct SharedClient {
    client: std::sync::Arc<std::sync::OnceLock<reqwest::Client>>,
    net: std::sync::Arc<weft_net::NetPolicy>,
}

impl SharedClient {
    pub(crate) fn new(net: std::sync::Arc<weft_net::NetPolicy>) -> SharedClient {
        SharedClient {
            client: Default::default(),
            net,
        }
    }

    /// The client, built on first use; one that cannot be built is a config error.
    fn get(&self) -> Result<&reqwest::Client, BlockError> {
        if let Some(c) = self.client.get() {
            return Ok(c);
        }
        let built = self.net.client().build().map_err(|e| {
            fail(
                ErrorKind::Config,
                format!("cannot set up the HTTP client: {e}"),
            )
        })?;
        Ok(self.client.get_or_init(|| built))
    }
}

/// An HTTP action.
pub(crate) struct Http {
    client: SharedClient,
    verb: Verb,
}

impl Http {
    pub(crate) fn new(client: SharedClient, verb: Verb) -> Http {
        Http { client, verb }
    }

    fn name(&self) -> &'static str {
        match self.verb {
            Verb::Get => "http.get",
            Verb::Post => "http.post",
            Verb::Named => "http.request",
        }
    }

    /// The method this call sends.
    fn method(&self, call: &NativeCall) -> Result<reqwest::Method, BlockError> {
        let named = match self.verb {
            Verb::Get => return Ok(reqwest::Method::GET),
            Verb::Post => return Ok(reqwest::Method::POST),
            Verb::Named => call
                .config
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or("GET"),
        };
        let upper = named.to_ascii_uppercase();
        if !METHODS.contains(&upper.as_str()) {
            return Err(fail(
                ErrorKind::Input,
                format!(
                    "http.request: `{named}` is not a method it sends ({})",
                    METHODS.join(", ")
                ),
            ));
        }
        Ok(reqwest::Method::from_bytes(upper.as_bytes()).expect("a listed method"))
    }
}

fn fail(kind: ErrorKind, message: String) -> BlockError {
    BlockError::new(kind, message)
}

#[async_trait]
impl Native for Http {
    async fn call(&self, call: NativeCall) -> Result<NativeOutput, BlockError> {
        let name = self.name();
        let url = str_param(&call, "url")?;
        let mut parsed = reqwest::Url::parse(url).map_err(|e| {
            fail(
                ErrorKind::Input,
                format!("{name}: `{url}` is not a URL: {e}"),
            )
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(fail(
                ErrorKind::Input,
                format!(
                    "{name}: only http and https URLs are fetched, not `{}`",
                    parsed.scheme()
                ),
            ));
        }
        if let Some(p) = call.config.get("params") {
            let p = p
                .as_object()
                .ok_or_else(|| fail(ErrorKind::Input, format!("{name}: params is an object")))?;
            let mut query = parsed.query_pairs_mut();
            for (k, v) in p {
                query.append_pair(k, &as_text(v));
            }
        }
        self.client
            .net
            .check_url(&parsed)
            .map_err(|d| fail(ErrorKind::Config, format!("{name} {url}: {d}")))?;
        let method = self.method(&call)?;
        let sends_body = !matches!(method, reqwest::Method::GET | reqwest::Method::HEAD);
        let mut req = self.client.get()?.request(method, parsed);
        let timeout = match call.config.get("timeout_ms") {
            Some(v) => Duration::from_millis(v.as_u64().ok_or_else(|| {
                fail(
                    ErrorKind::Input,
                    format!("{name}: timeout_ms is a whole number"),
                )
            })?),
            None => DEFAULT_TIMEOUT,
        };
        req = req.timeout(timeout);
        if let Some(h) = call.config.get("headers") {
            let h = h.as_object().ok_or_else(|| {
                fail(
                    ErrorKind::Input,
                    format!("{name}: headers is an object of strings"),
                )
            })?;
            for (k, v) in h {
                req = req.header(k.as_str(), as_text(v).into_owned());
            }
        }
        if sends_body {
            // A crash may repeat this request on resume; with the key a service that
            // deduplicates answers the repeat without acting twice.
            if !has_header(call.config.get("headers"), IDEMPOTENCY_KEY) {
                req = req.header(IDEMPOTENCY_KEY, &call.idempotency_key);
            }
            match (call.config.get("json"), call.config.get("body")) {
                (Some(j), _) => {
                    req = req
                        .header(reqwest::header::CONTENT_TYPE, "application/json")
                        .body(j.to_string());
                }
                (None, Some(Value::String(s))) => req = req.body(s.clone()),
                (None, Some(other)) => {
                    req = req
                        .header(reqwest::header::CONTENT_TYPE, "application/json")
                        .body(other.to_string());
                }
                (None, None) => {}
            }
        } else if call.config.get("json").is_some() || call.config.get("body").is_some() {
            return Err(fail(
                ErrorKind::Input,
                format!("{name}: a GET sends no body; use http.post, or `params` for the query"),
            ));
        }
        let mut resp = req.send().await.map_err(|e| {
            let kind = if e.is_timeout() {
                ErrorKind::Timeout
            } else if weft_net::denial(&e).is_some() {
                ErrorKind::Config
            } else {
                ErrorKind::Action
            };
            fail(kind, format!("{name} {url}: {}", weft_net::explain(&e)))
        })?;
        let status = resp.status().as_u16();
        let mut headers = serde_json::Map::new();
        for (k, v) in resp.headers() {
            if let Ok(v) = v.to_str() {
                headers.insert(k.as_str().to_owned(), Value::from(v));
            }
        }
        let is_json = headers
            .get("content-type")
            .and_then(Value::as_str)
            .is_some_and(|c| c.contains("json"));
        let mut bytes = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| fail(ErrorKind::Action, format!("{name} {url}: {e}")))?
        {
            if bytes.len() + chunk.len() > MAX_BODY {
                return Err(fail(
                    ErrorKind::Action,
                    format!(
                        "{name} {url}: the answer is larger than {} MiB",
                        MAX_BODY >> 20
                    ),
                ));
            }
            bytes.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if status >= 400 {
            let kind = if status == 429 {
                ErrorKind::RateLimit
            } else {
                ErrorKind::Action
            };
            let start: String = text.chars().take(300).collect();
            return Err(
                fail(kind, format!("{name} {url}: status {status}: {start}"))
                    .with_detail(serde_json::json!({"status": status})),
            );
        }
        let body = if is_json {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        } else {
            Value::String(text)
        };
        Ok(NativeOutput::from(serde_json::json!({
            "status": status,
            "headers": headers,
            "body": body,
        })))
    }
}
