//! How a server is set up, checked before it listens.

use std::net::SocketAddr;

/// A server's settings, resolved by the caller (flags, environment) before it starts.
#[derive(Clone)]
pub struct ServerConfig {
    /// Where to listen.
    pub addr: SocketAddr,
    /// The bearer token every route but `/healthz` demands, when set.
    pub token: Option<String>,
    /// The largest request body accepted.
    pub max_body_bytes: usize,
    /// Stored with every run the server starts (what its effects depend on).
    pub run_settings: Option<serde_json::Value>,
    /// New runs that may run at once; more wait as `queued` (none: no limit).
    pub max_runs: Option<usize>,
    /// Let models answer approvals through the MCP tools at `/mcp`.
    pub allow_mcp_approvals: bool,
    /// Engines for the MCP tool `test_flow` (none: the tool is not offered).
    pub test_engines: Option<weft_mcp::TestEngines>,
    /// Browser origins (`https://app.example.com`) whose pages may call the API (CORS);
    /// none: no CORS headers, so browsers on other origins cannot.
    pub allowed_origins: Vec<String>,
}

impl ServerConfig {
    /// Listens on `addr` with no token and a 4 MiB body limit.
    pub fn new(addr: SocketAddr) -> ServerConfig {
        ServerConfig {
            addr,
            token: None,
            max_body_bytes: 4 << 20,
            run_settings: None,
            max_runs: None,
            allow_mcp_approvals: false,
            test_engines: None,
            allowed_origins: Vec::new(),
        }
    }

    /// The `Host` values `/mcp` answers: without a token only this machine's names
    /// (a page elsewhere cannot reach a loopback server by renaming itself); with a
    /// token, any.
    pub(crate) fn mcp_hosts(&self) -> Vec<String> {
        if self.token.is_some() {
            return Vec::new();
        }
        ["localhost", "127.0.0.1", "::1"]
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    /// Refuses to expose an unauthenticated API beyond this machine.
    pub fn check(&self) -> Result<(), ConfigError> {
        if !self.addr.ip().is_loopback() && self.token.is_none() {
            return Err(ConfigError::NoToken(self.addr));
        }
        if self.token.as_deref().is_some_and(|t| t.trim().is_empty()) {
            return Err(ConfigError::EmptyToken);
        }
        for origin in &self.allowed_origins {
            let parsed = axum::http::HeaderValue::from_str(origin)
                .ok()
                .filter(|_| is_origin(origin));
            if parsed.is_none() {
                return Err(ConfigError::BadOrigin(origin.clone()));
            }
            // Without a token, a page from an allowed origin could drive every run of
            // this machine's server: only this machine's own pages may.
            if self.token.is_none() && !is_loopback_origin(origin) {
                return Err(ConfigError::OriginWithoutToken(origin.clone()));
            }
        }
        Ok(())
    }
}

/// Whether `origin` is a browser origin as `Origin` headers carry it: `*` (any), or
/// `http(s)://host[:port]` with no path.
fn is_origin(origin: &str) -> bool {
    if origin == "*" {
        return true;
    }
    let rest = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"));
    rest.is_some_and(|r| !r.is_empty() && !r.contains(['/', '?', '#', ' ']))
}

/// Whether `origin`'s host is this machine (`localhost`, `127.x.x.x`, `[::1]`).
fn is_loopback_origin(origin: &str) -> bool {
    let Some((_, authority)) = origin.split_once("://") else {
        return false;
    };
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A configuration the server refuses.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    /// A non-loopback address without a token.
    #[error(
        "refusing to listen on {0} without a token: anyone who reaches it could run flows; set --token-file or WEFT_TOKEN, or listen on 127.0.0.1"
    )]
    NoToken(SocketAddr),
    /// The token is empty.
    #[error("the token is empty")]
    EmptyToken,
    /// An allowed origin that is not one.
    #[error(
        "`{0}` is not an origin: write it as a browser sends it, scheme and host (and port), e.g. https://app.example.com or http://localhost:3000; or `*` for any"
    )]
    BadOrigin(String),
    /// Another machine's origin allowed on a server without a token.
    #[error(
        "refusing to let pages from `{0}` call a server without a token: they could run any flow on this machine; set --token-file or WEFT_TOKEN (LangGraph's clients send it as x-api-key)"
    )]
    OriginWithoutToken(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_may_go_without_a_token() {
        let local = ServerConfig::new("127.0.0.1:8080".parse().unwrap());
        assert_eq!(local.check(), Ok(()));
        let open = ServerConfig::new("0.0.0.0:8080".parse().unwrap());
        assert!(matches!(open.check(), Err(ConfigError::NoToken(_))));
        let with_token = ServerConfig {
            token: Some("s3cret".into()),
            ..open
        };
        assert_eq!(with_token.check(), Ok(()));
    }

    #[test]
    fn origins_are_checked_and_other_machines_need_a_token() {
        let with = |origins: &[&str], token: Option<&str>| ServerConfig {
            allowed_origins: origins.iter().map(|o| o.to_string()).collect(),
            token: token.map(str::to_owned),
            ..ServerConfig::new("127.0.0.1:8080".parse().unwrap())
        };
        let local = [
            "http://localhost:3000",
            "http://127.0.0.1:5173",
            "http://[::1]:3000",
        ];
        assert_eq!(with(&local, None).check(), Ok(()));
        for far in ["https://app.example.com", "*"] {
            assert_eq!(
                with(&[far], None).check(),
                Err(ConfigError::OriginWithoutToken(far.into()))
            );
            assert_eq!(with(&[far], Some("t")).check(), Ok(()));
        }
        for bad in [
            "app.example.com",
            "https://app.example.com/",
            "ftp://x",
            "http://",
        ] {
            assert_eq!(
                with(&[bad], Some("t")).check(),
                Err(ConfigError::BadOrigin(bad.into()))
            );
        }
    }
}
