//! One entry of `--allow-net` or `--deny-net`: a host name (`api.example.com`), every
//! name under a domain (`*.example.com`), an address (`127.0.0.1`, `::1`) or a range
//! (`10.0.0.0/8`, `fd00::/8`).

use ipnet::IpNet;
use std::net::IpAddr;

/// A host name, a domain's names, or addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Rule {
    /// Exactly this name (lower case, no trailing dot).
    Host(String),
    /// Every name under this domain (`*.example.com` holds `a.example.com`, not
    /// `example.com`).
    Domain(String),
    /// Every address in this range (a single address is a /32 or /128).
    Net(IpNet),
}

impl Rule {
    /// Reads one entry; the error says what it expected.
    pub(crate) fn parse(text: &str) -> Result<Rule, String> {
        let t = text.trim();
        if t.is_empty() {
            return Err("an empty entry".into());
        }
        if let Ok(net) = t.parse::<IpNet>() {
            return Ok(Rule::Net(net.trunc()));
        }
        if let Ok(ip) = t.trim_matches(['[', ']']).parse::<IpAddr>() {
            return Ok(Rule::Net(IpNet::from(ip)));
        }
        let name = normal_name(t);
        if let Some(domain) = name.strip_prefix("*.") {
            return valid_name(domain).map(|d| Rule::Domain(d.to_owned()));
        }
        valid_name(&name).map(|n| Rule::Host(n.to_owned()))
    }

    /// Whether the rule holds the host named `host` (as the URL names it).
    pub(crate) fn holds_name(&self, host: &str) -> bool {
        let host = normal_name(host);
        match self {
            Rule::Host(h) => *h == host,
            Rule::Domain(d) => host
                .strip_suffix(d.as_str())
                .is_some_and(|rest| rest.ends_with('.')),
            Rule::Net(_) => false,
        }
    }

    /// Whether the rule holds the address `ip`.
    pub(crate) fn holds_addr(&self, ip: IpAddr) -> bool {
        match self {
            Rule::Net(net) => net.contains(&canonical(ip)),
            Rule::Host(_) | Rule::Domain(_) => false,
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rule::Host(h) => f.write_str(h),
            Rule::Domain(d) => write!(f, "*.{d}"),
            Rule::Net(n) if n.prefix_len() == n.max_prefix_len() => write!(f, "{}", n.addr()),
            Rule::Net(n) => write!(f, "{n}"),
        }
    }
}

/// An IPv4 address written as IPv6 (`::ffff:169.254.169.254`) is the IPv4 address: a
/// rule about one holds the other.
pub(crate) fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn normal_name(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

fn valid_name(name: &str) -> Result<&str, String> {
    let ok = !name.is_empty()
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        });
    if ok {
        Ok(name)
    } else {
        Err(format!(
            "`{name}` is not a host name, `*.domain`, an address or a CIDR range"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_read_as_names_domains_addresses_and_ranges() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let r = Rule::parse("API.Example.com.").unwrap();
        assert!(r.holds_name("api.example.com"));
        assert!(!r.holds_name("x.api.example.com"));
        let d = Rule::parse("*.example.com").unwrap();
        assert!(d.holds_name("a.b.example.com"));
        assert!(!d.holds_name("example.com"));
        assert!(!d.holds_name("badexample.com"));
        let n = Rule::parse("169.254.0.0/16").unwrap();
        assert!(n.holds_addr(ip("169.254.169.254")));
        assert!(
            n.holds_addr(ip("::ffff:169.254.169.254")),
            "IPv4 written as IPv6"
        );
        assert!(!n.holds_addr(ip("169.255.0.1")));
        let one = Rule::parse("[::1]").unwrap();
        assert!(one.holds_addr(ip("::1")));
        assert_eq!(one.to_string(), "::1");
        for bad in ["", "a b", "exa$mple.com", "*.", "1.2.3.4/40"] {
            assert!(Rule::parse(bad).is_err(), "{bad}");
        }
    }
}
