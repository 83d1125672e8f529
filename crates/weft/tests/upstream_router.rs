//! flow-state-dev's own router suite (`packages/core/test/router.test.ts`, commit
//! 179b466) and its handler suite (`packages/core/test/handler.test.ts`, commit
//! 3da9090), case by case: each test is named after the upstream case it ports. Cases
//! not ported are listed with their reasons in `docs/library.md`.

use serde_json::{Value, json};
use weft::prelude::*;
use weft::testing::{TestHarness, TestRun};

async fn run(block: impl Into<Block>, input: Value) -> TestRun {
    TestHarness::new().run(block, input).await
}

/// A handler answering `answer` whatever its input.
fn says(name: &str, answer: &'static str) -> Block {
    handler(name).execute(move |_: Value, _ctx| async move { Ok(answer) })
}

// ---- handler builder ---------------------------------------------------------------

#[tokio::test]
async fn handler_builder_builds_a_handler_block_definition() {
    let hello = handler("hello").execute(|input: String, _ctx| async move {
        Ok(json!({"message": format!("hi {input}")}))
    });
    assert_eq!(hello.kind(), Kind::Handler);
    assert_eq!(
        run(hello, json!("team")).await.output(),
        &json!({"message": "hi team"})
    );
}

// ---- router builder ----------------------------------------------------------------

#[tokio::test]
async fn router_builder_executes_selected_route() {
    let block = || {
        router("route")
            .routes([says("low", "low"), says("high", "high")])
            .select(|v: i64, _state: Value| if v < 10 { "low" } else { "high" }.to_owned())
    };
    assert_eq!(run(block(), json!(3)).await.output(), "low");
    assert_eq!(run(block(), json!(20)).await.output(), "high");
}

#[tokio::test]
async fn router_builder_throws_when_selected_route_is_not_in_declared_candidates() {
    let block = router("route-validation")
        .routes([says("in-routes", "ok")])
        .select(|_: Value, _state: Value| "rogue".to_owned());
    let r = run(block, json!(1)).await;
    let e = r.error().expect("an undeclared route fails");
    assert!(e.message.contains("rogue"), "{}", e.message);
    assert!(
        e.message.contains("in-routes"),
        "names the routes: {}",
        e.message
    );
}

// ---- utility.keyedRouter: a router whose selector reads a key -----------------------

/// `keyedRouter({blocks, fallback?, select: input => input.which})`: keys map to route
/// names in the selector; an unknown key takes the fallback when there is one.
fn keyed_router(
    name: &str,
    routes: Vec<Block>,
    keys: &[(&'static str, &'static str)],
    fallback: Option<&'static str>,
) -> Block {
    let keys = keys.to_vec();
    router(name)
        .routes(routes)
        .select(move |input: Value, _state: Value| {
            let which = input["which"].as_str().unwrap_or_default();
            keys.iter()
                .find(|(k, _)| *k == which)
                .map(|(_, route)| *route)
                .or(fallback)
                .unwrap_or(which)
                .to_owned()
        })
}

#[tokio::test]
async fn utility_keyed_router_dispatches_to_the_block_keyed_by_select() {
    let block = || {
        keyed_router(
            "by-name",
            vec![says("alpha", "A"), says("beta", "B")],
            &[("alpha", "alpha"), ("beta", "beta")],
            None,
        )
    };
    assert_eq!(run(block(), json!({"which": "alpha"})).await.output(), "A");
    assert_eq!(run(block(), json!({"which": "beta"})).await.output(), "B");
}

#[tokio::test]
async fn utility_keyed_router_allows_two_keys_to_alias_the_same_block() {
    let block = || {
        keyed_router(
            "aliased",
            vec![says("shared", "S")],
            &[("alice", "shared"), ("bob", "shared")],
            None,
        )
    };
    assert_eq!(run(block(), json!({"which": "alice"})).await.output(), "S");
    assert_eq!(run(block(), json!({"which": "bob"})).await.output(), "S");
}

#[tokio::test]
async fn utility_keyed_router_throws_with_the_registered_key_list_when_no_match_and_no_fallback() {
    let block = keyed_router(
        "missing-key",
        vec![says("alpha", "A"), says("beta", "B")],
        &[("alpha", "alpha"), ("beta", "beta")],
        None,
    );
    let r = run(block, json!({"which": "gamma"})).await;
    let e = r.error().expect("an unknown key fails");
    for name in ["gamma", "alpha", "beta"] {
        assert!(e.message.contains(name), "{}", e.message);
    }
}

#[tokio::test]
async fn utility_keyed_router_uses_fallback_when_select_returns_an_unregistered_key() {
    let block = || {
        keyed_router(
            "with-fallback",
            vec![says("alpha", "A"), says("otherwise", "X")],
            &[("alpha", "alpha")],
            Some("otherwise"),
        )
    };
    assert_eq!(run(block(), json!({"which": "alpha"})).await.output(), "A");
    assert_eq!(
        run(block(), json!({"which": "anything-else"}))
            .await
            .output(),
        "X"
    );
}
