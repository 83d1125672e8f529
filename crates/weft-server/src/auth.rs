//! Who is calling: the server's token (an `admin` of tenant `default`, as a bearer
//! token or, for the page in a browser, as the session cookie `/login` sets), or an API
//! key from the store (`weft keys create`: its tenant and scopes), sent as a bearer
//! token or as LangGraph's `x-api-key`. The caller becomes the request's [`Principal`],
//! which [`crate::access`] checks against the route and an approval records.
//!
//! With neither a token nor any key in the store, only requests that name this machine
//! as their `Host` get in (as `local`, an admin), so that a web page elsewhere cannot
//! reach a loopback server by pointing its own name at 127.0.0.1 (DNS rebinding). Once
//! the store holds a key, every request needs a key or the token, loopback or not.
//!
//! The cookie holds a hash of the token, never the token, and is `HttpOnly` and
//! `SameSite=Strict`: no other site's page can send it, so the API's JSON routes need
//! no CSRF token.

use crate::keys::KeyCache;
use crate::problem::Problem;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use subtle::ConstantTimeEq;
use weft_core::ports::Scope;

/// The session cookie's name.
const COOKIE: &str = "weft_session";

/// The tenant of the server's token and of a server without one.
pub(crate) const DEFAULT_TENANT: &str = "default";

/// Who a request comes from, as the server authenticated it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Principal {
    /// Stable: a key's id, `token`, or `local`.
    pub(crate) id: String,
    /// For people: a key's name, or what the id says.
    pub(crate) name: String,
    /// The tenant whose objects it reaches.
    pub(crate) tenant: String,
    /// What it may do there.
    pub(crate) scopes: Vec<Scope>,
}

impl Principal {
    /// The holder of the server's token.
    fn token() -> Principal {
        Principal::admin("token", "the server's token")
    }

    /// A caller on this machine of a server without a token or keys.
    fn local() -> Principal {
        Principal::admin("local", "a caller on this machine")
    }

    fn admin(id: &str, name: &str) -> Principal {
        Principal {
            id: id.to_owned(),
            name: name.to_owned(),
            tenant: DEFAULT_TENANT.to_owned(),
            scopes: vec![Scope::Admin],
        }
    }

    /// The holder of API key `key`.
    pub(crate) fn of_key(key: &weft_core::ports::ApiKey) -> Principal {
        Principal {
            id: key.id.clone(),
            name: key.name.clone(),
            tenant: key.tenant.clone(),
            scopes: key.scopes.clone(),
        }
    }

    /// Whether it holds `scope` (or `admin`).
    pub(crate) fn holds(&self, scope: Scope) -> bool {
        scope.granted_by(&self.scopes)
    }

    /// `key NAME (ID)`, as refusals name it.
    pub(crate) fn described(&self) -> String {
        match self.id.as_str() {
            "token" | "local" => self.name.clone(),
            id => format!("key `{}` ({id})", self.name),
        }
    }

    /// Its scopes, for a refusal.
    pub(crate) fn scopes_listed(&self) -> String {
        let names: Vec<&str> = self.scopes.iter().map(|s| s.as_str()).collect();
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    }

    /// Signs an approval's `answer` with this principal: `by` is its name and `by_id`
    /// its id, whatever the request said; a name the request gave (`said`) is kept
    /// beside them as `by_note`, a display note and never the identity.
    pub(crate) fn sign(&self, answer: &mut serde_json::Value, said: Option<&str>) {
        answer["by"] = serde_json::Value::String(self.name.clone());
        answer["by_id"] = serde_json::Value::String(self.id.clone());
        match said.map(str::trim).filter(|s| !s.is_empty()) {
            Some(said) => answer["by_note"] = serde_json::Value::String(said.to_owned()),
            None => {
                if let Some(m) = answer.as_object_mut() {
                    m.remove("by_note");
                }
            }
        }
    }
}

/// What a server with a token accepts: the token, and the session cookie derived from it.
pub(crate) struct Credentials {
    token: String,
    session: String,
}

impl Credentials {
    pub(crate) fn new(token: Option<&str>) -> Option<Credentials> {
        token.map(|t| Credentials {
            token: t.to_owned(),
            session: session_of(t),
        })
    }

    fn accepts_cookie(&self, headers: &HeaderMap) -> bool {
        cookie(headers, COOKIE).is_some_and(|given| same(given, &self.session))
    }
}

/// How the server tells who is calling: its token, and the store's keys.
pub(crate) struct Gate {
    pub(crate) token: Option<Credentials>,
    pub(crate) keys: Arc<KeyCache>,
    /// Where refusals are recorded.
    pub(crate) audit: crate::audit::Auditor,
}

/// What a request presents as its credential: a bearer token, or LangGraph's
/// `x-api-key`.
fn presented(headers: &HeaderMap) -> Option<&str> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer);
    bearer.or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
}

/// The session value for `token`: a hash, so the browser never holds the token itself.
fn session_of(token: &str) -> String {
    hex::encode(Sha256::digest(format!("weft-session\0{token}")))
}

fn same(given: &str, expected: &str) -> bool {
    bool::from(given.as_bytes().ct_eq(expected.as_bytes()))
}

/// The value of cookie `name` in the request's `Cookie` headers.
fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
}

/// Why a request was not let in.
enum Refusal {
    /// It presented nothing, or something that is neither the token nor a key.
    Unknown,
    /// Its key was revoked or has expired: who it was.
    Unusable(Box<Principal>),
    /// Without a token or keys: its `Host` is not this machine's.
    ForeignHost,
    /// The store could not be asked about its key.
    Store(weft_core::ports::StoreError),
}

/// Who `request` comes from.
async fn principal_of(gate: &Gate, headers: &HeaderMap) -> Result<Principal, Refusal> {
    let given = presented(headers);
    if let Some(credentials) = &gate.token {
        let token_given = given.is_some_and(|g| same(g, &credentials.token));
        if token_given || (given.is_none() && credentials.accepts_cookie(headers)) {
            return Ok(Principal::token());
        }
    }
    let guarded = gate.token.is_some() || gate.keys.any().await.map_err(Refusal::Store)?;
    if !guarded {
        // Neither a token nor keys: what a client sends is not asked for (LangGraph's
        // clients send `x-api-key` whenever their environment names one), and only
        // this machine's names get in.
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
        return if host.is_none_or(is_loopback_host) {
            Ok(Principal::local())
        } else {
            Err(Refusal::ForeignHost)
        };
    }
    let Some(secret) = given else {
        return Err(Refusal::Unknown);
    };
    match gate.keys.find(secret).await.map_err(Refusal::Store)? {
        Some(key) if key.usable_at(crate::keys::now_ms()) => {
            gate.keys.used(&key);
            Ok(Principal::of_key(&key))
        }
        Some(key) => Err(Refusal::Unusable(Box::new(Principal::of_key(&key)))),
        None => Err(Refusal::Unknown),
    }
}

/// Lets a request in as the principal it authenticates as (the server's token, an API
/// key, or, on a server with neither, a caller on this machine); a browser asking for a
/// page without credentials is sent to `/login`.
pub(crate) async fn authenticate(
    State(gate): State<Arc<Gate>>,
    mut request: Request,
    next: Next,
) -> Response {
    let id = crate::audit::request_id(&request);
    request
        .extensions_mut()
        .insert(crate::audit::RequestId(id.clone()));
    let principal = principal_of(&gate, request.headers()).await;
    let mut response = match principal {
        Ok(principal) => {
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        Err(refusal) => {
            let route = request
                .extensions()
                .get::<axum::extract::MatchedPath>()
                .map(|p| p.as_str().to_owned())
                .unwrap_or_default();
            let said = crate::audit::Said::of(&request, &route);
            // A revoked or expired key still says who tried.
            let who = match &refusal {
                Refusal::Unusable(principal) => Some((**principal).clone()),
                _ => None,
            };
            let response = refused(refusal, &request);
            if matches!(
                response.status(),
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN
            ) {
                gate.audit
                    .record(said.entry(who.as_ref(), response.status()))
                    .await;
            }
            response
        }
    };
    crate::audit::tag(&mut response, &id);
    response
}

/// The answer to a request that was not let in.
fn refused(refusal: Refusal, request: &Request) -> Response {
    match refusal {
        Refusal::ForeignHost => Problem::new(StatusCode::FORBIDDEN, "forbidden host")
            .detail("without a token or keys this server answers only requests to localhost, 127.0.0.1 or [::1]; start it with --token-file, or make a key with `weft keys create`, to be reached by another name")
            .into_response(),
        Refusal::Store(e) => Problem::from(weft_engine::EngineError::from(e)).into_response(),
        _ if wants_page(request) => Redirect::to("/login").into_response(),
        Refusal::Unusable(_) => Problem::new(StatusCode::UNAUTHORIZED, "unauthorized")
            .detail("this key was revoked or has expired; ask for a new one (`weft keys create`)")
            .into_response(),
        Refusal::Unknown => Problem::new(StatusCode::UNAUTHORIZED, "unauthorized")
            .detail("this server needs `Authorization: Bearer <token or API key>` (or `x-api-key: <key>`; in a browser, signing in at /login)")
            .into_response(),
    }
}

/// Whether a request is a browser's for one of the page's addresses.
fn wants_page(request: &Request) -> bool {
    request.method() == axum::http::Method::GET
        && weft_web::is_page_path(request.uri().path())
        && request
            .headers()
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.contains("text/html"))
}

/// `POST /login`'s form.
#[derive(serde::Deserialize)]
pub(crate) struct Login {
    token: String,
}

/// `GET /login`: the sign-in form (a server without a token needs none: on to the runs).
pub(crate) async fn login_form(State(gate): State<Arc<Gate>>) -> Response {
    let keys_only = gate.token.is_none() && gate.keys.any().await.unwrap_or(true);
    match (&gate.token, keys_only) {
        (Some(_), _) => weft_web::login(None),
        // A browser is signed in with the server's token; keys are for the API.
        (None, true) => weft_web::login(Some(
            "This server takes API keys on its API only; start it with --token-file to sign in here.",
        )),
        (None, false) => Redirect::to("/").into_response(),
    }
}

/// `POST /login`: the token, given once, becomes the session cookie.
pub(crate) async fn login(
    State(gate): State<Arc<Gate>>,
    headers: HeaderMap,
    axum::Form(form): axum::Form<Login>,
) -> Response {
    let Some(credentials) = &gate.token else {
        return login_form(State(gate.clone())).await;
    };
    if !same(form.token.trim(), &credentials.token) {
        return weft_web::login(Some("That is not this server's token."));
    }
    let https = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|p| p.eq_ignore_ascii_case("https"));
    let cookie = format!(
        "{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict{}",
        credentials.session,
        if https { "; Secure" } else { "" }
    );
    ([(header::SET_COOKIE, cookie)], Redirect::to("/")).into_response()
}

/// Whether a `Host` value (with or without its port) names this machine.
fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The credentials of an `Authorization` value with the `Bearer` scheme (whose name
/// ignores case, RFC 9110).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

#[cfg(test)]
mod tests {
    use axum::http::{HeaderMap, HeaderValue, header};

    #[test]
    fn the_session_cookie_is_a_hash_of_the_token_and_is_found_among_others() {
        let creds = super::Credentials::new(Some("s3cret")).unwrap();
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("a=1; weft_session={}; b=2", creds.session)).unwrap(),
        );
        assert!(creds.accepts_cookie(&h));
        assert_ne!(creds.session, "s3cret");
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("weft_session=s3cret"),
        );
        assert!(
            !creds.accepts_cookie(&h),
            "the token itself is not a session"
        );
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer s3cret"),
        );
        assert_eq!(super::presented(&h), Some("s3cret"));
    }

    #[test]
    fn the_scheme_ignores_case() {
        assert_eq!(super::bearer("Bearer abc"), Some("abc"));
        assert_eq!(super::bearer("bearer abc"), Some("abc"));
        assert_eq!(super::bearer("Basic abc"), None);
        assert_eq!(super::bearer("Bearer"), None);
    }

    #[test]
    fn loopback_hosts_are_this_machine_s_names_only() {
        for ok in [
            "localhost",
            "LOCALHOST:8080",
            "127.0.0.1:8080",
            "127.3.4.5",
            "[::1]:80",
            "[::1]",
        ] {
            assert!(super::is_loopback_host(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "10.0.0.1:80",
            "[::2]:80",
            "",
        ] {
            assert!(!super::is_loopback_host(bad), "{bad}");
        }
    }
}
