//! Webhook requests: who may start a hook's run, and which deliveries are the same.
//!
//! An HMAC hook takes a `Weft-Signature: t=<unix seconds>,v1=<hex>` header, where the
//! hex is HMAC-SHA256 over `<t>.<body>` keyed by the hook's secret (the scheme Stripe
//! uses): the timestamp binds the signature to a moment, so a captured request replayed
//! after [`REPLAY_WINDOW_S`] is refused, and one replayed within it names the run the
//! first delivery started. Signatures are compared in constant time. A bearer hook
//! takes `Authorization: Bearer <secret>` instead.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;
use weft_core::ports::{Hook, HookAuth};

/// How far a signature's timestamp may be from now, either way, in seconds.
pub const REPLAY_WINDOW_S: i64 = 300;

/// The header that carries an HMAC hook's signature.
pub const SIGNATURE_HEADER: &str = "weft-signature";

/// Why a delivery is refused (answered `401`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    /// No signature or token where the hook needs one.
    #[error("{0}")]
    Missing(String),
    /// The signature or token does not match the hook's secret.
    #[error("the signature does not match this hook's secret")]
    Mismatch,
    /// The signature's timestamp is outside the replay window.
    #[error(
        "the signature is {0} s from now, beyond the {REPLAY_WINDOW_S} s window: a replayed or delayed delivery"
    )]
    Stale(i64),
}

/// What a delivery proved: for an HMAC hook, its signature (which names a replay of it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The hex signature, for HMAC hooks.
    pub signature: Option<String>,
}

/// The `Weft-Signature` value for `body` sent at `t` (Unix seconds) to a hook with
/// `secret`: what senders compute.
pub fn sign(secret: &str, t: i64, body: &[u8]) -> String {
    format!("t={t},v1={}", hex::encode(mac(secret, t, body)))
}

fn mac(secret: &str, t: i64, body: &[u8]) -> Vec<u8> {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.finalize().into_bytes().to_vec()
}

/// Checks a delivery of `body` to `hook` at `now_s` (Unix seconds), given its
/// signature header and its bearer token (each when sent).
pub fn verify(
    hook: &Hook,
    signature: Option<&str>,
    bearer: Option<&str>,
    body: &[u8],
    now_s: i64,
) -> Result<Verified, Rejected> {
    match hook.auth {
        HookAuth::Bearer => {
            let token = bearer.ok_or_else(|| {
                Rejected::Missing("this hook takes `Authorization: Bearer <secret>`".into())
            })?;
            if bool::from(token.as_bytes().ct_eq(hook.secret.as_bytes())) {
                Ok(Verified { signature: None })
            } else {
                Err(Rejected::Mismatch)
            }
        }
        HookAuth::Hmac => {
            let header = signature.ok_or_else(|| {
                Rejected::Missing(
                    "this hook takes a `Weft-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of \"<t>.<body>\">` header".into(),
                )
            })?;
            let (t, given) = parse_signature(header)?;
            let expected = mac(&hook.secret, t, body);
            let matches = given
                .iter()
                .any(|g| bool::from(g.as_slice().ct_eq(&expected)));
            if !matches {
                return Err(Rejected::Mismatch);
            }
            if (now_s - t).abs() > REPLAY_WINDOW_S {
                return Err(Rejected::Stale(now_s - t));
            }
            Ok(Verified {
                signature: Some(hex::encode(expected)),
            })
        }
    }
}

/// The timestamp and the `v1` signatures (a sender rotating secrets may send several).
fn parse_signature(header: &str) -> Result<(i64, Vec<Vec<u8>>), Rejected> {
    let malformed = || {
        Rejected::Missing(format!(
            "{} is not a signature: write `t=<unix seconds>,v1=<hex>`",
            crate::quoted(header)
        ))
    };
    let mut t = None;
    let mut given = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => t = Some(v.parse::<i64>().map_err(|_| malformed())?),
            Some(("v1", v)) => given.push(hex::decode(v).map_err(|_| malformed())?),
            _ => {}
        }
    }
    match (t, given.is_empty()) {
        (Some(t), false) => Ok((t, given)),
        _ => Err(malformed()),
    }
}

/// The run id a delivery to hook `name` starts, when it can be told from others: by
/// its `Idempotency-Key`, else by the hook's dedupe field in the body, else (HMAC) by
/// its signature; the same delivery again names the same run.
pub fn delivery_run_id(
    name: &str,
    idempotency_key: Option<&str>,
    dedupe_value: Option<&str>,
    verified: &Verified,
) -> Option<String> {
    let (kind, key) = match (idempotency_key, dedupe_value, &verified.signature) {
        (Some(k), _, _) => ("key", k),
        (None, Some(v), _) => ("field", v),
        (None, None, Some(s)) => ("signature", s.as_str()),
        (None, None, None) => return None,
    };
    let hash = weft_core::hash::content_hash(format!("hook\0{name}\0{kind}\0{key}").as_bytes());
    Some(format!("hook-{}", &hash[..32]))
}

/// The text of the dotted `path` in a JSON body (a string as is, anything else as
/// JSON), for deduplication.
pub fn dedupe_value(body: &serde_json::Value, path: &str) -> Option<String> {
    let found = path
        .split('.')
        .try_fold(body, |v, segment| v.get(segment))?;
    match found {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(auth: HookAuth) -> Hook {
        Hook {
            name: "gh".into(),
            flow: "f".into(),
            version: None,
            secret: "s3cret".into(),
            auth,
            dedupe_field: None,
            created_ms: 0,
        }
    }

    #[test]
    fn a_signature_made_with_the_secret_passes_and_any_change_fails() {
        let h = hook(HookAuth::Hmac);
        let body = br#"{"a":1}"#;
        let header = sign("s3cret", 1_000, body);
        let ok = verify(&h, Some(&header), None, body, 1_010).unwrap();
        assert!(ok.signature.is_some());
        assert_eq!(
            verify(&h, Some(&header), None, br#"{"a":2}"#, 1_010),
            Err(Rejected::Mismatch)
        );
        let other_key = sign("guess", 1_000, body);
        assert_eq!(
            verify(&h, Some(&other_key), None, body, 1_010),
            Err(Rejected::Mismatch)
        );
        let moved = header.replace("t=1000", "t=1001");
        assert_eq!(
            verify(&h, Some(&moved), None, body, 1_010),
            Err(Rejected::Mismatch)
        );
        assert!(matches!(
            verify(&h, None, None, body, 1_010),
            Err(Rejected::Missing(_))
        ));
        assert!(matches!(
            verify(&h, Some("v1=zz"), None, body, 1_010),
            Err(Rejected::Missing(_))
        ));
    }

    #[test]
    fn an_old_signature_is_refused_and_rotated_secrets_are_accepted() {
        let h = hook(HookAuth::Hmac);
        let header = sign("s3cret", 1_000, b"x");
        assert_eq!(
            verify(&h, Some(&header), None, b"x", 1_000 + REPLAY_WINDOW_S + 1),
            Err(Rejected::Stale(REPLAY_WINDOW_S + 1))
        );
        let old = sign("old", 1_000, b"x");
        let both = format!("{header},{}", old.split(',').nth(1).unwrap());
        assert!(verify(&h, Some(&both), None, b"x", 1_000).is_ok());
    }

    #[test]
    fn a_bearer_hook_takes_its_secret_only() {
        let h = hook(HookAuth::Bearer);
        assert!(verify(&h, None, Some("s3cret"), b"", 0).is_ok());
        assert_eq!(
            verify(&h, None, Some("s3cre"), b"", 0),
            Err(Rejected::Mismatch)
        );
        assert!(matches!(
            verify(&h, None, None, b"", 0),
            Err(Rejected::Missing(_))
        ));
    }

    #[test]
    fn the_same_delivery_names_the_same_run() {
        let v = Verified {
            signature: Some("ab".into()),
        };
        let by_key = delivery_run_id("gh", Some("k1"), Some("x"), &v);
        assert_eq!(by_key, delivery_run_id("gh", Some("k1"), None, &v));
        assert_ne!(by_key, delivery_run_id("other", Some("k1"), None, &v));
        assert_ne!(by_key, delivery_run_id("gh", None, Some("k1"), &v));
        let none = Verified { signature: None };
        assert_eq!(delivery_run_id("gh", None, None, &none), None);
        let body = serde_json::json!({"delivery": {"id": 7}, "name": "x"});
        assert_eq!(dedupe_value(&body, "delivery.id").as_deref(), Some("7"));
        assert_eq!(dedupe_value(&body, "name").as_deref(), Some("x"));
        assert_eq!(dedupe_value(&body, "missing"), None);
    }
}
