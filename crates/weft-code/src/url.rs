//! Percent encoding and URL splitting with the rules of CPython's `urllib.parse`, for
//! the module Weft provides to Python blocks (see [`crate::python_modules`]).

use std::fmt::Write;

/// `quote(data, safe)`; with `plus`, `quote_plus` (spaces become `+`). Letters, digits
/// and `_.-~` are never encoded; `safe` adds ASCII characters to them. (The
/// `percent-encoding` crate wants its set of characters fixed at compile time, and `safe`
/// is the caller's.)
pub(crate) fn quote(data: &[u8], safe: &str, plus: bool) -> String {
    let mut out = String::with_capacity(data.len());
    for &b in data {
        if b.is_ascii_alphanumeric()
            || b"_.-~".contains(&b)
            || (b.is_ascii() && safe.as_bytes().contains(&b))
        {
            out.push(char::from(b));
        } else if plus && b == b' ' {
            out.push('+');
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// `unquote(text)` (invalid UTF-8 becomes U+FFFD); with `plus`, `unquote_plus`.
pub(crate) fn unquote(text: &str, plus: bool) -> String {
    let text = if plus {
        text.replace('+', " ")
    } else {
        text.to_owned()
    };
    percent_encoding::percent_decode_str(&text)
        .decode_utf8_lossy()
        .into_owned()
}

/// The five parts `urlsplit` returns.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Split {
    pub scheme: String,
    pub netloc: String,
    pub path: String,
    pub query: String,
    pub fragment: String,
}

impl Split {
    /// The parts in `SplitResult` order.
    pub(crate) fn into_parts(self) -> Vec<String> {
        vec![
            self.scheme,
            self.netloc,
            self.path,
            self.query,
            self.fragment,
        ]
    }
}

/// Schemes whose last path segment may carry `;params` (CPython's `uses_params`).
const USES_PARAMS: &[&str] = &[
    "", "ftp", "hdl", "prospero", "http", "imap", "https", "shttp", "rtsp", "rtsps", "rtspu",
    "sip", "sips", "mms", "sftp", "tel",
];

fn is_scheme_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')
}

/// `urlsplit(url, scheme, allow_fragments)`.
pub(crate) fn urlsplit(
    url: &str,
    default_scheme: &str,
    fragments: bool,
) -> Result<Split, &'static str> {
    // Leading C0 controls and spaces are dropped, and tabs and newlines anywhere, as
    // browsers (and CPython since 3.11.4) do.
    let url: String = url
        .trim_start_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\r' | '\n'))
        .collect();
    let mut scheme = default_scheme
        .trim_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\r' | '\n'))
        .collect::<String>();
    let mut rest = url.as_str();
    if let Some(i) = rest.find(':')
        && i > 0
        && rest.starts_with(|c: char| c.is_ascii_alphabetic())
        && rest[..i].chars().all(is_scheme_char)
    {
        scheme = rest[..i].to_ascii_lowercase();
        rest = &rest[i + 1..];
    }
    let mut netloc = "";
    if let Some(after) = rest.strip_prefix("//") {
        let end = after.find(['/', '?', '#']).unwrap_or(after.len());
        netloc = &after[..end];
        rest = &after[end..];
        if netloc.contains('[') != netloc.contains(']') {
            return Err("Invalid IPv6 URL");
        }
    }
    let (mut path, mut fragment) = (rest, "");
    if fragments && let Some((p, f)) = rest.split_once('#') {
        path = p;
        fragment = f;
    }
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    Ok(Split {
        scheme,
        netloc: netloc.to_owned(),
        path: path.to_owned(),
        query: query.to_owned(),
        fragment: fragment.to_owned(),
    })
}

/// `urlparse`'s six parts: `split` with `;params` cut from its last path segment.
pub(crate) fn with_params(split: Split) -> Vec<String> {
    let (path, params) = if USES_PARAMS.contains(&split.scheme.as_str()) {
        let from = split.path.rfind('/').unwrap_or(0);
        match split.path[from..].find(';') {
            Some(i) => (
                split.path[..from + i].to_owned(),
                split.path[from + i + 1..].to_owned(),
            ),
            None => (split.path.clone(), String::new()),
        }
    } else {
        (split.path.clone(), String::new())
    };
    vec![
        split.scheme,
        split.netloc,
        path,
        params,
        split.query,
        split.fragment,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected values are what CPython 3.11's urllib.parse returns for the same calls.
    #[test]
    fn quote_and_unquote_follow_cpython() {
        assert_eq!(quote(b"a b/c?d=e&f~g", "/", false), "a%20b/c%3Fd%3De%26f~g");
        assert_eq!(quote(b"a b/c", "", true), "a+b%2Fc");
        assert_eq!(quote("café".as_bytes(), "/", false), "caf%C3%A9");
        assert_eq!(unquote("caf%C3%A9+x%2", false), "café+x%2");
        assert_eq!(unquote("a+b%20c", true), "a b c");
        assert_eq!(unquote("%ff", false), "\u{fffd}");
    }

    #[test]
    fn urlsplit_follows_cpython() {
        let s = urlsplit("HTTPS://user@example.com:8080/a/b;p?q=1#frag", "", true).unwrap();
        assert_eq!(
            s.into_parts(),
            ["https", "user@example.com:8080", "/a/b;p", "q=1", "frag"]
        );
        let s = urlsplit("example.com/x?y", "http", true).unwrap();
        assert_eq!(s.into_parts(), ["http", "", "example.com/x", "y", ""]);
        let s = urlsplit("mailto:someone@example.com", "", true).unwrap();
        assert_eq!(
            s.into_parts(),
            ["mailto", "", "someone@example.com", "", ""]
        );
        let s = urlsplit("/p#a#b", "", false).unwrap();
        assert_eq!(s.into_parts(), ["", "", "/p#a#b", "", ""]);
        let s = urlsplit(" \thttp://h/\npath", "", true).unwrap();
        assert_eq!(s.into_parts(), ["http", "h", "/path", "", ""]);
        assert!(urlsplit("http://[::1/", "", true).is_err());
        let p = with_params(urlsplit("http://h/a;x/b;y?q", "", true).unwrap());
        assert_eq!(p, ["http", "h", "/a;x/b", "y", "q", ""]);
    }
}
