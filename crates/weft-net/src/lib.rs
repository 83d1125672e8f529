//! # weft-net
//!
//! Owns where a flow's outbound requests may go: one [`NetPolicy`] of allowed and
//! denied hosts and address ranges (`--allow-net`, `--deny-net`) that every HTTP client
//! a run uses is built with ([`NetPolicy::client`]) — the `http.*` actions, the tools
//! built on them, and model providers at the base URL a flow names. A name is checked
//! by its rules and again by every address it resolves to, at connection time, and
//! every redirect is checked as a new request, so neither DNS nor a redirect leads
//! around the policy. A server's policy refuses link-local and cloud metadata
//! addresses unless an allow rule names them.
//!
//! It must not depend on anything of Weft's: it is a leaf the actions and the model
//! providers use.

mod rule;

use rule::{Rule, canonical};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// The addresses a server refuses unless allowed: IPv4 link-local (where every major
/// cloud's instance metadata service answers) and AWS's IPv6 metadata address.
const METADATA: &[&str] = &["169.254.0.0/16", "fd00:ec2::254/128"];

/// How many redirects a request follows (reqwest's own default).
const MAX_REDIRECTS: usize = 10;

/// Why a request may not go where it was sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the network policy refuses {target}: {why}")]
pub struct Denied {
    /// The host or address refused.
    pub target: String,
    /// Which rule refused it, for a person.
    pub why: String,
}

/// Where requests may go.
#[derive(Debug, Clone, Default)]
pub struct NetPolicy {
    allow: Vec<Rule>,
    deny: Vec<Rule>,
    guarded: Vec<Rule>,
}

impl NetPolicy {
    /// No rules: every host and address may be reached (`weft run` without flags).
    pub fn open() -> NetPolicy {
        NetPolicy::default()
    }

    /// The policy `--allow-net` and `--deny-net` give; with `server`, link-local and
    /// metadata addresses are refused too unless an allow entry holds them. A deny
    /// entry wins over an allow entry; with any allow entry, only what they hold may
    /// be reached.
    pub fn new(allow: &[String], deny: &[String], server: bool) -> Result<NetPolicy, String> {
        let read = |flag: &str, entries: &[String]| {
            entries
                .iter()
                .flat_map(|e| e.split(','))
                .map(|e| Rule::parse(e).map_err(|why| format!("{flag} {e}: {why}")))
                .collect::<Result<Vec<Rule>, String>>()
        };
        let guarded = if server {
            METADATA
                .iter()
                .map(|m| Rule::parse(m).expect("a valid range"))
                .collect()
        } else {
            Vec::new()
        };
        Ok(NetPolicy {
            allow: read("--allow-net", allow)?,
            deny: read("--deny-net", deny)?,
            guarded,
        })
    }

    /// Whether a request to `url` may be sent, judged by its host as written: a name
    /// by the name rules, an address by every rule. Names are judged again by their
    /// addresses when the client resolves them.
    pub fn check_url(&self, url: &reqwest::Url) -> Result<(), Denied> {
        let Some(host) = url.host_str() else {
            return Ok(());
        };
        match host.trim_matches(['[', ']']).parse::<IpAddr>() {
            Ok(ip) => self.check_addr(&ip.to_string(), ip),
            Err(_) => self.check_name(host),
        }
    }

    /// The name rules alone: denied by name, or not among the allowed names when only
    /// names are allowed.
    fn check_name(&self, name: &str) -> Result<(), Denied> {
        if let Some(rule) = self.deny.iter().find(|r| r.holds_name(name)) {
            return Err(denied(name, format!("--deny-net {rule}")));
        }
        let allows_addresses = self.allow.iter().any(|r| matches!(r, Rule::Net(_)));
        if !self.allow.is_empty() && !allows_addresses && !self.allowed_name(name) {
            return Err(denied(name, not_allowed(&self.allow)));
        }
        Ok(())
    }

    /// Whether a connection to `ip`, which `host` names, may be made.
    pub fn check_addr(&self, host: &str, ip: IpAddr) -> Result<(), Denied> {
        let ip = canonical(ip);
        let target = if host == ip.to_string() {
            ip.to_string()
        } else {
            format!("{host} ({ip})")
        };
        if let Some(rule) = self
            .deny
            .iter()
            .find(|r| r.holds_addr(ip) || r.holds_name(host))
        {
            return Err(denied(&target, format!("--deny-net {rule}")));
        }
        let allowed_addr = self.allow.iter().any(|r| r.holds_addr(ip));
        if !self.allow.is_empty() && !allowed_addr && !self.allowed_name(host) {
            return Err(denied(&target, not_allowed(&self.allow)));
        }
        // Only an allowed address or range lifts the guard: an allowed name whose DNS
        // answer is a metadata address must not reach it.
        if let Some(rule) = self.guarded.iter().find(|r| r.holds_addr(ip))
            && !allowed_addr
        {
            return Err(denied(
                &target,
                format!(
                    "{rule} is link-local or a cloud metadata address, refused on a server unless an --allow-net address or range holds it"
                ),
            ));
        }
        Ok(())
    }

    fn allowed_name(&self, host: &str) -> bool {
        self.allow.iter().any(|r| r.holds_name(host))
    }

    /// An HTTP client builder whose every connection and redirect this policy checks.
    pub fn client(self: &Arc<Self>) -> reqwest::ClientBuilder {
        let redirects = self.clone();
        reqwest::Client::builder()
            .dns_resolver(Arc::new(Resolver(self.clone())))
            .redirect(reqwest::redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() >= MAX_REDIRECTS {
                    return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
                }
                match redirects.check_url(attempt.url()) {
                    Ok(()) => attempt.follow(),
                    Err(e) => attempt.error(e),
                }
            }))
    }
}

fn denied(target: &str, why: String) -> Denied {
    Denied {
        target: target.to_owned(),
        why,
    }
}

fn not_allowed(allow: &[Rule]) -> String {
    let listed: Vec<String> = allow.iter().map(Rule::to_string).collect();
    format!("not in --allow-net {}", listed.join(","))
}

/// Resolves names with the system's resolver, then refuses the whole name when any
/// address it gave is refused (a name that resolves to one allowed and one refused
/// address must not be reachable by chance of order).
struct Resolver(Arc<NetPolicy>);

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.0.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            policy.check_name(&host)?;
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            for a in &addrs {
                policy.check_addr(&host, a.ip())?;
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The policy's refusal, when that is what stopped the request `e` (at resolution or
/// at a redirect, where reqwest wraps it).
pub fn denial(e: &reqwest::Error) -> Option<&Denied> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(cause) = source {
        if let Some(d) = cause.downcast_ref::<Denied>() {
            return Some(d);
        }
        source = cause.source();
    }
    None
}

/// Where a reqwest error came from, told as a person reads it: the policy's refusal
/// when that is what stopped the request, else each cause in turn.
pub fn explain(e: &reqwest::Error) -> String {
    if let Some(d) = denial(e) {
        return d.to_string();
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(u: &str) -> reqwest::Url {
        reqwest::Url::parse(u).unwrap()
    }

    fn policy(allow: &[&str], deny: &[&str], server: bool) -> NetPolicy {
        let own = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        NetPolicy::new(&own(allow), &own(deny), server).unwrap()
    }

    #[test]
    fn a_server_refuses_metadata_addresses_unless_allowed() {
        let server = policy(&[], &[], true);
        let e = server
            .check_url(&url("http://169.254.169.254/latest"))
            .unwrap_err();
        assert!(e.why.contains("metadata"), "{e}");
        assert!(server.check_url(&url("http://[fd00:ec2::254]/")).is_err());
        assert!(
            server
                .check_url(&url("http://[::ffff:169.254.169.254]/"))
                .is_err()
        );
        assert!(server.check_url(&url("http://127.0.0.1:8080/")).is_ok());
        let allowed = policy(&["169.254.169.254"], &[], true);
        assert!(allowed.check_url(&url("http://169.254.169.254/")).is_ok());
        assert!(
            policy(&[], &[], false)
                .check_url(&url("http://169.254.169.254/"))
                .is_ok()
        );
    }

    #[test]
    fn deny_wins_and_an_allow_list_holds_everything_else_out() {
        let p = policy(&["127.0.0.0/8", "api.example.com"], &["127.0.0.2"], true);
        assert!(p.check_url(&url("http://127.0.0.1/")).is_ok());
        let e = p.check_url(&url("http://127.0.0.2/")).unwrap_err();
        assert_eq!(e.why, "--deny-net 127.0.0.2");
        assert!(p.check_url(&url("http://10.0.0.1/")).is_err());
        // A name is judged by its addresses once resolved.
        let ip = "127.0.0.2".parse().unwrap();
        assert!(p.check_addr("api.example.com", ip).is_err());
        assert!(
            p.check_addr("api.example.com", "10.1.1.1".parse().unwrap())
                .is_ok()
        );
        let named = policy(&["api.example.com"], &[], true);
        let metadata = "169.254.169.254".parse().unwrap();
        assert!(
            named.check_addr("api.example.com", metadata).is_err(),
            "DNS to metadata"
        );
        let names = policy(&["*.example.com"], &[], false);
        assert!(names.check_url(&url("https://a.example.com/")).is_ok());
        assert!(names.check_url(&url("https://example.org/")).is_err());
        assert!(NetPolicy::new(&["nonsense!".into()], &[], false).is_err());
    }
}
