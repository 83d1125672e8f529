//! The API's one route table: the router is built from it and so is the OpenAPI
//! document served at `/v1/openapi.json`, so the two cannot disagree.

use crate::access::Need;
use crate::{App, audit_api, events, flows, hooks, keys_api, metrics, runs, schedules};
use axum::Router;
use axum::routing::{MethodRouter, delete, get, post};
use serde_json::{Map, Value, json};
use weft_core::ports::Scope;

/// One route: what clients read about it, and what serves it.
pub(crate) struct Route {
    pub(crate) method: &'static str,
    pub(crate) path: &'static str,
    /// What its caller needs ([`crate::access`]); a public route checks its own
    /// credentials and needs no principal.
    pub(crate) need: Need,
    summary: &'static str,
    /// The JSON Schema of its request body, when it takes one.
    body: Option<schemars::Schema>,
    /// Its answers: status and what each means.
    responses: &'static [(u16, &'static str)],
    /// Query parameters: name and meaning.
    query: &'static [(&'static str, &'static str)],
    handler: MethodRouter<App>,
}

const PROBLEM: (u16, &str) = (400, "a problem object (application/problem+json)");
const NOT_FOUND: (u16, &str) = (404, "no such run");
const NO_FLOW: (u16, &str) = (404, "no such flow");
const NO_SCHEDULE: (u16, &str) = (404, "no such schedule");
const PAGING: [(&str, &str); 2] = [
    ("limit", "at most this many (default 50, at most 1000)"),
    (
        "cursor",
        "the next_cursor of the previous page: the items after it",
    ),
];
const WAIT: (&str, &str) = (
    "wait",
    "seconds to wait for the run to end or pause (at most 300)",
);

/// Every route but `/healthz` and `/v1/openapi.json` itself.
pub(crate) fn routes() -> Vec<Route> {
    vec![
        Route {
            method: "post",
            path: "/v1/flows",
            need: Need::Scope(Scope::FlowsWrite),
            summary: "Check a flow's text in any dialect and store it; its id is the content hash of its dialect and text",
            body: Some(schemars::schema_for!(flows::NewFlow)),
            responses: &[
                (
                    201,
                    "stored: {flow_id, name, dialect, diagnostics (warnings), graph {nodes, edges}}",
                ),
                (200, "stored already: the same object"),
                (
                    400,
                    "an invalid flow: a problem object with its diagnostics",
                ),
                (413, "the body is too large"),
            ],
            query: &[],
            handler: post(flows::create),
        },
        Route {
            method: "get",
            path: "/v1/flows",
            need: Need::Scope(Scope::FlowsRead),
            summary: "List stored flows, newest first",
            body: None,
            responses: &[
                (
                    200,
                    "{flows: [{flow_id, name, dialect, created_ms}], next_cursor}",
                ),
                PROBLEM,
            ],
            query: &PAGING,
            handler: get(flows::list),
        },
        Route {
            method: "get",
            path: "/v1/flows/{id}",
            need: Need::Scope(Scope::FlowsRead),
            summary: "A stored flow: its text, dialect, and graph as nodes and edges to draw",
            body: None,
            responses: &[
                (
                    200,
                    "{flow_id, name, dialect, created_ms, source, graph, diagnostics}",
                ),
                NO_FLOW,
            ],
            query: &[],
            handler: get(flows::show),
        },
        Route {
            method: "post",
            path: "/v1/runs",
            need: Need::Scope(Scope::RunsWrite),
            summary: "Start a run of a stored flow (flow_id) or of a flow's text (source) in any dialect; stored before the answer",
            body: Some(schemars::schema_for!(runs::NewRun)),
            responses: &[
                (202, "accepted: {run_id, status}"),
                (
                    200,
                    "with ?wait, the run ended or paused: weft run --json's object; or an Idempotency-Key's existing run",
                ),
                PROBLEM,
                (413, "the body is too large"),
                NO_FLOW,
                (
                    422,
                    "the Idempotency-Key started a run with another flow or input",
                ),
            ],
            query: &[WAIT],
            handler: post(runs::create),
        },
        Route {
            method: "get",
            path: "/v1/runs",
            need: Need::Scope(Scope::RunsRead),
            summary: "List runs, newest first",
            body: None,
            responses: &[
                (
                    200,
                    "{runs: [{run_id, flow, flow_id, dialect, status, created_ms, updated_ms}], next_cursor}",
                ),
                PROBLEM,
            ],
            query: &[("status", "only runs in this status"), PAGING[0], PAGING[1]],
            handler: get(runs::list),
        },
        Route {
            method: "get",
            path: "/v1/runs/{id}",
            need: Need::Scope(Scope::RunsRead),
            summary: "A run: status, input, output, state, error, waiting approvals, usage, each step with its status, timings, input and output, and the journal",
            body: None,
            responses: &[(200, "the run"), NOT_FOUND],
            query: &[],
            handler: get(runs::show),
        },
        Route {
            method: "get",
            path: "/v1/runs/{id}/events",
            need: Need::Scope(Scope::RunsRead),
            summary: "The run's events as Server-Sent Events: stored ones from Last-Event-ID or ?after, then live, until the run's last event",
            body: None,
            responses: &[(200, "text/event-stream"), NOT_FOUND, PROBLEM],
            query: &[
                ("after", "start after this seq"),
                (
                    "view",
                    "`dialect`: the flow's dialect's event names and shapes",
                ),
            ],
            handler: get(events::stream),
        },
        Route {
            method: "post",
            path: "/v1/runs/{id}/approve",
            need: Need::Scope(Scope::ApprovalsWrite),
            summary: "Answer the run's approval and continue it; the first answer wins",
            body: Some(schemars::schema_for!(runs::Answer)),
            responses: &[
                (202, "accepted"),
                (200, "with ?wait, the run ended or paused"),
                NOT_FOUND,
                (409, "already answered, or not paused"),
                PROBLEM,
            ],
            query: &[WAIT],
            handler: post(runs::approve),
        },
        Route {
            method: "post",
            path: "/v1/runs/{id}/resume",
            need: Need::Scope(Scope::RunsWrite),
            summary: "Continue a paused run, or one whose process died",
            body: None,
            responses: &[
                (202, "accepted"),
                (200, "with ?wait, the run ended or paused"),
                NOT_FOUND,
                (409, "its process is alive, or it has ended"),
            ],
            query: &[WAIT],
            handler: post(runs::resume),
        },
        Route {
            method: "post",
            path: "/v1/runs/{id}/retry",
            need: Need::Scope(Scope::RunsWrite),
            summary: "Run a failed or cancelled run again from the steps that failed",
            body: None,
            responses: &[
                (202, "accepted"),
                (200, "with ?wait, the run ended or paused"),
                NOT_FOUND,
                (409, "it did not fail"),
            ],
            query: &[WAIT],
            handler: post(runs::retry),
        },
        Route {
            method: "get",
            path: "/v1/runs/{id}/retry-plan",
            need: Need::Scope(Scope::RunsRead),
            summary: "What retrying the run would do: each step it reached reused from the journal or run again, what each reaches (a model, an action, a host function, code), and the blocks it never reached",
            body: None,
            responses: &[(200, "{run_id, retryable, steps, not_reached}"), NOT_FOUND],
            query: &[],
            handler: get(runs::retry_plan),
        },
        Route {
            method: "post",
            path: "/v1/runs/{id}/cancel",
            need: Need::Scope(Scope::RunsWrite),
            summary: "Cancel a running or paused run",
            body: None,
            responses: &[(200, "the run's summary"), NOT_FOUND, (409, "it has ended")],
            query: &[],
            handler: post(runs::cancel),
        },
        Route {
            method: "post",
            path: "/v1/schedules",
            need: Need::Scope(Scope::SchedulesWrite),
            summary: "Schedule a stored flow on a cron expression in a time zone, with overlap and catch-up policies",
            body: Some(schemars::schema_for!(weft_triggers::manage::NewSchedule)),
            responses: &[
                (201, "the schedule, with its next five fire times (`next`)"),
                PROBLEM,
                (409, "a schedule with that id exists"),
            ],
            query: &[],
            handler: post(schedules::create),
        },
        Route {
            method: "get",
            path: "/v1/schedules",
            need: Need::Scope(Scope::FlowsRead),
            summary: "List schedules, each with its next fire times and latest firings",
            body: None,
            responses: &[(
                200,
                "{schedules: [{id, flow, cron, tz, ..., next, firings}]}",
            )],
            query: &[],
            handler: get(schedules::list),
        },
        Route {
            method: "get",
            path: "/v1/schedules/{id}",
            need: Need::Scope(Scope::FlowsRead),
            summary: "A schedule: its next five fire times and its last 50 firings, each with its run",
            body: None,
            responses: &[
                (200, "{id, flow, cron, tz, ..., next, firings}"),
                NO_SCHEDULE,
            ],
            query: &[],
            handler: get(schedules::show),
        },
        Route {
            method: "delete",
            path: "/v1/schedules/{id}",
            need: Need::Scope(Scope::SchedulesWrite),
            summary: "Delete a schedule and its firings (their runs stay)",
            body: None,
            responses: &[(204, "deleted"), NO_SCHEDULE],
            query: &[],
            handler: delete(schedules::delete),
        },
        Route {
            method: "post",
            path: "/v1/schedules/{id}/pause",
            need: Need::Scope(Scope::SchedulesWrite),
            summary: "Pause a schedule: it fires nothing until resumed",
            body: None,
            responses: &[(200, "the schedule"), NO_SCHEDULE],
            query: &[],
            handler: post(schedules::pause),
        },
        Route {
            method: "post",
            path: "/v1/schedules/{id}/resume",
            need: Need::Scope(Scope::SchedulesWrite),
            summary: "Resume a schedule from now (what it slept through is not missed)",
            body: None,
            responses: &[(200, "the schedule"), NO_SCHEDULE],
            query: &[],
            handler: post(schedules::resume),
        },
        Route {
            method: "post",
            path: "/v1/schedules/{id}/trigger",
            need: Need::Scope(Scope::SchedulesWrite),
            summary: "Start a schedule's flow now, out of schedule (a `triggered` firing)",
            body: None,
            responses: &[(202, "{run_id, firing}"), NO_SCHEDULE, PROBLEM],
            query: &[],
            handler: post(schedules::trigger),
        },
        Route {
            method: "post",
            path: "/v1/hooks",
            need: Need::Scope(Scope::HooksWrite),
            summary: "Create a webhook that starts runs of a stored flow; its secret is shown once",
            body: Some(schemars::schema_for!(weft_triggers::manage::NewHook)),
            responses: &[
                (201, "{name, flow, auth, url, secret}"),
                PROBLEM,
                (409, "a webhook with that name exists"),
            ],
            query: &[],
            handler: post(hooks::create),
        },
        Route {
            method: "get",
            path: "/v1/hooks",
            need: Need::Scope(Scope::FlowsRead),
            summary: "List webhooks (without their secrets)",
            body: None,
            responses: &[(200, "{hooks: [{name, flow, auth, url}]}")],
            query: &[],
            handler: get(hooks::list),
        },
        Route {
            method: "delete",
            path: "/v1/hooks/{name}",
            need: Need::Scope(Scope::HooksWrite),
            summary: "Delete a webhook",
            body: None,
            responses: &[(204, "deleted"), (404, "no such webhook")],
            query: &[],
            handler: delete(hooks::delete),
        },
        Route {
            method: "get",
            path: "/metrics",
            need: Need::Scope(Scope::RunsRead),
            summary: "Runs by status, journaled steps, model tokens and cost, queue depth, open event streams (OpenMetrics text)",
            body: None,
            responses: &[(200, "application/openmetrics-text")],
            query: &[],
            handler: get(metrics::render),
        },
        Route {
            method: "get",
            path: "/v1/audit",
            need: Need::Scope(Scope::AuditRead),
            summary: "The tenant's audit log, newest first: every request that changed something and every refused one (time, principal, action, object, outcome, request id)",
            body: None,
            responses: &[
                (
                    200,
                    "{entries: [{seq, at_ms, principal, principal_name, tenant, action, object, outcome, request_id}], next_before}",
                ),
                PROBLEM,
            ],
            query: &[
                ("limit", "at most this many (default 50, at most 1000)"),
                (
                    "before",
                    "the next_before of the previous page: the entries before it",
                ),
            ],
            handler: get(audit_api::list),
        },
        Route {
            method: "post",
            path: "/v1/keys",
            need: Need::Scope(Scope::Admin),
            summary: "Make an API key of this tenant: its secret is in the answer, once, and nowhere else",
            body: Some(schemars::schema_for!(keys_api::NewKeyBody)),
            responses: &[
                (
                    201,
                    "{id, name, tenant, scopes, created_ms, expires_ms, ..., secret}",
                ),
                PROBLEM,
            ],
            query: &[],
            handler: post(keys_api::create),
        },
        Route {
            method: "get",
            path: "/v1/keys",
            need: Need::Scope(Scope::Admin),
            summary: "The tenant's API keys (never their secrets)",
            body: None,
            responses: &[(
                200,
                "{keys: [{id, name, tenant, scopes, created_ms, last_used_ms, expires_ms, revoked_ms, usable}]}",
            )],
            query: &[],
            handler: get(keys_api::list),
        },
        Route {
            method: "delete",
            path: "/v1/keys/{id}",
            need: Need::Scope(Scope::Admin),
            summary: "Revoke an API key: every server refuses it within seconds",
            body: None,
            responses: &[(200, "{id, revoked: true}"), (404, "no such key")],
            query: &[],
            handler: delete(keys_api::revoke),
        },
    ]
}

/// Routes the server's token does not guard: each checks its own credentials.
pub(crate) fn public_routes() -> Vec<Route> {
    vec![Route {
        method: "post",
        path: "/v1/hooks/{name}",
        need: Need::Caller,
        summary: "Deliver to a webhook: starts a run of its flow with the body (JSON, or form/text as a string) as input. Authenticated by the hook's own `Weft-Signature` (HMAC-SHA256 of `<t>.<body>`) or bearer secret, not the server's token",
        body: None,
        responses: &[
            (202, "accepted: {run_id, status}"),
            (
                200,
                "with ?wait, the run ended or paused: weft run --json's object; or a repeated delivery (same Idempotency-Key, dedupe field or signature): {run_id, status, duplicate: true}",
            ),
            (401, "a missing, wrong or stale signature or token"),
            (404, "no such webhook"),
            (413, "the body is too large"),
            (422, "the hook's flow is not stored or not valid now"),
        ],
        query: &[WAIT],
        handler: post(hooks::deliver),
    }]
}

/// The access rule of each of `routes`: `(method, path, need)`.
pub(crate) fn rules(routes: &[Route]) -> Vec<(&'static str, &'static str, Need)> {
    routes.iter().map(|r| (r.method, r.path, r.need)).collect()
}

/// A router serving `routes`.
pub(crate) fn router(routes: Vec<Route>) -> Router<App> {
    routes
        .into_iter()
        .fold(Router::new(), |r, route| r.route(route.path, route.handler))
}

/// The OpenAPI 3.1 document describing `routes` (behind the token) and `public`.
pub(crate) fn openapi(routes: &[Route], public: &[Route]) -> Value {
    let mut paths = Map::new();
    for (route, open) in routes
        .iter()
        .map(|r| (r, false))
        .chain(public.iter().map(|r| (r, true)))
    {
        let mut op = json!({
            "summary": route.summary,
            "responses": route.responses.iter().map(|(status, what)| {
                (status.to_string(), json!({"description": what}))
            }).collect::<Map<_, _>>(),
        });
        let mut parameters: Vec<Value> = route
            .query
            .iter()
            .map(|(name, what)| json!({"name": name, "in": "query", "description": what, "schema": {"type": "string"}}))
            .collect();
        if route.path.contains("{id}") {
            let what = if route.path.starts_with("/v1/flows") {
                "the flow id"
            } else if route.path.starts_with("/v1/schedules") {
                "the schedule id"
            } else if route.path.starts_with("/v1/keys") {
                "the key id"
            } else {
                "the run id"
            };
            parameters.push(json!({"name": "id", "in": "path", "required": true, "description": what, "schema": {"type": "string"}}));
        }
        if route.path.contains("{name}") {
            parameters.push(json!({"name": "name", "in": "path", "required": true, "description": "the webhook's name", "schema": {"type": "string"}}));
        }
        if open {
            op["security"] = json!([]);
        } else if let Need::Scope(scope) = route.need {
            op["x-weft-scope"] = json!(scope.as_str());
        }
        if !parameters.is_empty() {
            op["parameters"] = Value::Array(parameters);
        }
        if let Some(schema) = &route.body {
            op["requestBody"] =
                json!({"required": true, "content": {"application/json": {"schema": schema}}});
        }
        let entry = paths
            .entry(route.path)
            .or_insert_with(|| Value::Object(Map::new()));
        entry[route.method] = op;
    }
    json!({
        "openapi": "3.1.0",
        "info": {"title": "Weft", "version": env!("CARGO_PKG_VERSION"), "description": "docs/server.md"},
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "paths": paths,
    })
}
