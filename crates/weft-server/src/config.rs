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
        Ok(())
    }
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
}
