//! Who may do what, as data: every route of every door names the scope it needs, and
//! one middleware checks it after the caller is known ([`crate::auth`]). The `/v1`
//! routes carry their need in the API's route table ([`crate::api::Route`]); the other
//! doors' routes are listed here. A route that no rule names is refused (fail closed),
//! so a route added without a rule cannot be reached by accident; a test walks every
//! door's routes to find one.
//!
//! A principal that lacks the scope gets `403` naming it. (Another tenant's object will
//! be `404`, exactly as a missing one, once objects belong to tenants.)

use crate::auth::Principal;
use crate::problem::Problem;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::sync::Arc;
use weft_core::ports::Scope;

/// What a route needs of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// Any caller the server let in.
    Caller,
    /// A principal that holds this scope (or `admin`).
    Scope(Scope),
}

use Need::{Caller, Scope as Needs};

/// The LangGraph door's routes (`/assistants`, `/threads`, `/runs`, `/info`). Answering
/// an approval through a run's `command.resume` needs `approvals:write` as well, which
/// the run's handler checks (it depends on the body).
const LANGGRAPH: &[(&str, &str, Need)] = &[
    ("GET", "/info", Caller),
    ("POST", "/assistants/search", Needs(Scope::FlowsRead)),
    ("GET", "/assistants/{id}", Needs(Scope::FlowsRead)),
    ("GET", "/assistants/{id}/graph", Needs(Scope::FlowsRead)),
    ("GET", "/assistants/{id}/schemas", Needs(Scope::FlowsRead)),
    ("POST", "/runs", Needs(Scope::RunsWrite)),
    ("POST", "/runs/wait", Needs(Scope::RunsWrite)),
    ("POST", "/runs/stream", Needs(Scope::RunsWrite)),
    ("POST", "/threads", Needs(Scope::RunsWrite)),
    ("POST", "/threads/search", Needs(Scope::RunsRead)),
    ("GET", "/threads/{thread_id}", Needs(Scope::RunsRead)),
    ("PATCH", "/threads/{thread_id}", Needs(Scope::RunsWrite)),
    ("DELETE", "/threads/{thread_id}", Needs(Scope::RunsWrite)),
    ("GET", "/threads/{thread_id}/state", Needs(Scope::RunsRead)),
    (
        "POST",
        "/threads/{thread_id}/state",
        Needs(Scope::RunsWrite),
    ),
    (
        "POST",
        "/threads/{thread_id}/state/checkpoint",
        Needs(Scope::RunsRead),
    ),
    (
        "GET",
        "/threads/{thread_id}/state/{checkpoint_id}",
        Needs(Scope::RunsRead),
    ),
    (
        "POST",
        "/threads/{thread_id}/history",
        Needs(Scope::RunsRead),
    ),
    ("POST", "/threads/{thread_id}/runs", Needs(Scope::RunsWrite)),
    ("GET", "/threads/{thread_id}/runs", Needs(Scope::RunsRead)),
    (
        "POST",
        "/threads/{thread_id}/runs/wait",
        Needs(Scope::RunsWrite),
    ),
    (
        "POST",
        "/threads/{thread_id}/runs/stream",
        Needs(Scope::RunsWrite),
    ),
    (
        "GET",
        "/threads/{thread_id}/runs/{run_id}",
        Needs(Scope::RunsRead),
    ),
    (
        "GET",
        "/threads/{thread_id}/runs/{run_id}/join",
        Needs(Scope::RunsRead),
    ),
    (
        "GET",
        "/threads/{thread_id}/runs/{run_id}/stream",
        Needs(Scope::RunsRead),
    ),
    (
        "POST",
        "/threads/{thread_id}/runs/{run_id}/cancel",
        Needs(Scope::RunsWrite),
    ),
];

/// AgentFlow's door (`/api/*`).
const AGENTFLOW: &[(&str, &str, Need)] = &[
    ("POST", "/api/run", Needs(Scope::RunsWrite)),
    ("POST", "/api/run-stream", Needs(Scope::RunsWrite)),
    ("POST", "/api/resume", Needs(Scope::ApprovalsWrite)),
    ("POST", "/api/resume-stream", Needs(Scope::ApprovalsWrite)),
    ("GET", "/api/run/{run_id}", Needs(Scope::RunsRead)),
    ("GET", "/api/config", Caller),
    ("GET", "/api/default-workflow", Caller),
];

/// The page's addresses (it shows runs, flows and schedules; every change it makes
/// goes through the API's routes), and MCP, whose tools do not check scopes one by one
/// yet: only `admin` reaches them.
const PAGE_AND_MCP: &[(&str, &str, Need)] = &[
    ("GET", "/", Needs(Scope::RunsRead)),
    ("GET", "/runs/{id}", Needs(Scope::RunsRead)),
    ("GET", "/approvals", Needs(Scope::RunsRead)),
    ("GET", "/flows", Needs(Scope::FlowsRead)),
    ("GET", "/schedules", Needs(Scope::FlowsRead)),
    ("GET", "/new", Needs(Scope::FlowsRead)),
    ("GET", "/v1/openapi.json", Caller),
    ("*", "/mcp", Needs(Scope::Admin)),
];

/// The rules and the audit log the access check writes to.
pub(crate) struct Guard {
    pub(crate) rules: Rules,
    pub(crate) audit: crate::audit::Auditor,
}

/// Whether a route with this need changes something (its requests are audited).
fn writes(need: Need) -> bool {
    matches!(need, Need::Scope(scope) if !matches!(scope, Scope::FlowsRead | Scope::RunsRead | Scope::AuditRead))
}

/// Every route's need: by path template, then method (`*` for any), so that a request
/// is looked up without building a key.
#[derive(Debug, Default)]
pub(crate) struct Rules(HashMap<String, Vec<(String, Need)>>);

impl Rules {
    /// The rules of the `/v1` routes (`(method, path, need)`) and of every other door.
    pub(crate) fn new(v1: impl IntoIterator<Item = (&'static str, &'static str, Need)>) -> Rules {
        let mut rules: HashMap<String, Vec<(String, Need)>> = HashMap::new();
        let doors = [LANGGRAPH, AGENTFLOW, PAGE_AND_MCP];
        for (method, path, need) in v1.into_iter().chain(doors.into_iter().flatten().copied()) {
            let methods = rules.entry(path.to_owned()).or_default();
            let method = method.to_ascii_uppercase();
            match methods.iter_mut().find(|(m, _)| *m == method) {
                Some(rule) => rule.1 = need,
                None => methods.push((method, need)),
            }
        }
        Rules(rules)
    }

    /// Every rule, sorted by path then method: `(method, path, scope)`.
    pub(crate) fn listed(&self) -> Vec<(String, String, Option<&'static str>)> {
        let mut rules: Vec<_> = self
            .0
            .iter()
            .flat_map(|(path, methods)| {
                methods.iter().map(move |(method, need)| {
                    let scope = match need {
                        Need::Caller => None,
                        Need::Scope(s) => Some(s.as_str()),
                    };
                    (method.clone(), path.clone(), scope)
                })
            })
            .collect();
        rules.sort_by(|a, b| (&a.1, &a.0).cmp(&(&b.1, &b.0)));
        rules
    }

    /// What a request for `path` (a route's template) with `method` needs; `None`
    /// when no rule names the route.
    pub(crate) fn need(&self, method: &Method, path: &str) -> Option<Need> {
        let methods = self.0.get(path)?;
        let rule = |m: &str| methods.iter().find(|(r, _)| r == m).map(|(_, need)| *need);
        rule(method.as_str()).or_else(|| rule("*"))
    }
}

/// Lets a request through when its principal holds what its route needs; `403`
/// naming the scope otherwise, and for a route that no rule names. A refusal, and
/// every request to a route that changes something, goes into the audit log.
pub(crate) async fn check(
    State(guard): State<Arc<Guard>>,
    request: Request,
    next: Next,
) -> Response {
    let extensions = request.extensions();
    // No route matched (an unknown path, or a path inside a nested service that only
    // serves its own root): nothing may be reached there, so it is absent.
    let Some(path) = extensions.get::<MatchedPath>() else {
        return crate::not_found(request.uri().clone()).await;
    };
    let Some(principal) = extensions.get::<Principal>() else {
        return Problem::new(StatusCode::UNAUTHORIZED, "unauthorized").into_response();
    };
    let need = guard.rules.need(request.method(), path.as_str());
    let refusal = match need {
        None => Some(
            Problem::new(StatusCode::FORBIDDEN, "forbidden").detail(format!(
                "{} {} has no access rule, so no one may call it; this is a bug of Weft's",
                request.method(),
                path.as_str()
            )),
        ),
        Some(Need::Scope(scope)) if !principal.holds(scope) => Some(missing(principal, scope)),
        Some(_) => None,
    };
    // Only what the audit log keeps is copied out of the request: reads pass through.
    let audited = (refusal.is_some() || need.is_some_and(writes)).then(|| {
        (
            crate::audit::Said::of(&request, path.as_str()),
            principal.clone(),
        )
    });
    let Some((said, principal)) = audited else {
        return next.run(request).await;
    };
    if let Some(refusal) = refusal {
        let entry = said.entry(Some(&principal), StatusCode::FORBIDDEN);
        guard.audit.record(entry).await;
        return refusal.into_response();
    }
    let response = next.run(request).await;
    guard
        .audit
        .record(said.entry(Some(&principal), response.status()))
        .await;
    response
}

/// The refusal of a principal that lacks `scope`.
pub(crate) fn missing(principal: &Principal, scope: Scope) -> Problem {
    Problem::new(StatusCode::FORBIDDEN, "forbidden").detail(format!(
        "{} may not do this: it needs the scope `{}` (it holds {})",
        principal.described(),
        scope.as_str(),
        principal.scopes_listed()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_route_is_found_by_its_method_or_any_method_and_an_unknown_one_by_none() {
        let rules = Rules::new([("get", "/v1/runs", Needs(Scope::RunsRead))]);
        assert_eq!(
            rules.need(&Method::GET, "/v1/runs"),
            Some(Needs(Scope::RunsRead))
        );
        assert_eq!(rules.need(&Method::POST, "/v1/runs"), None);
        assert_eq!(
            rules.need(&Method::DELETE, "/mcp"),
            Some(Needs(Scope::Admin))
        );
        assert_eq!(
            rules.need(&Method::POST, "/threads/{thread_id}/runs"),
            Some(Needs(Scope::RunsWrite))
        );
    }

    #[tokio::test]
    async fn a_route_that_no_rule_names_is_refused_to_everyone() {
        use axum::routing::get;
        let rules = Arc::new(Rules::new([("GET", "/known", Needs(Scope::RunsRead))]));
        let admin = Principal {
            id: "token".into(),
            name: "the server's token".into(),
            tenant: "default".into(),
            scopes: vec![Scope::Admin],
        };
        let guard = Arc::new(Guard {
            rules: Arc::into_inner(rules).unwrap(),
            audit: crate::audit::Auditor::new(Arc::new(weft_store::MemoryStore::new())),
        });
        let app = axum::Router::new()
            .route("/known", get(|| async { "known" }))
            .route("/forgotten", get(|| async { "forgotten" }))
            .layer(axum::middleware::from_fn_with_state(guard, check))
            .layer(axum::Extension(admin));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let status = |path: &'static str| {
            let url = format!("{base}{path}");
            async move { reqwest::get(url).await.unwrap().status().as_u16() }
        };
        assert_eq!(status("/known").await, 200);
        assert_eq!(status("/forgotten").await, 403, "even an admin");
    }

    #[test]
    fn no_door_names_a_route_twice() {
        let mut seen = std::collections::HashSet::new();
        for (method, path, _) in [LANGGRAPH, AGENTFLOW, PAGE_AND_MCP].into_iter().flatten() {
            assert!(seen.insert((method, path)), "{method} {path} twice");
        }
    }
}
