//! Scoped state (spec 002, "The block context"): session, user and project documents
//! kept in the store across runs, partial state schemas, and declared resources.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use weft::prelude::*;
use weft::testing::TestHarness;

fn scopes(session: &str, user: &str) -> Scopes {
    Scopes {
        session: Some(session.into()),
        user: Some(user.into()),
        project: Some("p".into()),
    }
}

#[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
struct Counter {
    count: i64,
    mode: String,
}

fn counter() -> Block {
    // 002: "sessionStateSchema: z.object({ count: z.number().default(0) })";
    // "await ctx.session.incState({ count: 1 })".
    handler("counter")
        .session_state::<Counter>()
        .execute(|input: String, ctx: Ctx| async move {
            let session = ctx.session()?;
            let before: Counter = session.state_as().await?;
            session.inc_state("count", 1.0).await?;
            ctx.user()?.inc_state("visits", 1.0).await?;
            if input == "plan" {
                session.patch_state(json!({"mode": "plan"})).await?;
            }
            Ok(json!({"seen": before.count, "mode": before.mode}))
        })
}

#[tokio::test]
async fn session_state_carries_across_two_runs_of_one_session() {
    let h = TestHarness::new().scopes(scopes("s1", "ada"));
    let first = h.run(counter(), "plan").await;
    assert_eq!(
        first.output(),
        &json!({"seen": 0, "mode": ""}),
        "defaults from the schema"
    );
    let second = h.run(counter(), "chat").await;
    assert_eq!(second.output(), &json!({"seen": 1, "mode": "plan"}));
    // Another session of the same user starts fresh; the user's state is shared.
    let other = h.clone().scopes(scopes("s2", "ada"));
    assert_eq!(other.run(counter(), "chat").await.output()["seen"], 0);
    let store = h.store();
    assert_eq!(
        store.scoped_state("session/s1").await.unwrap(),
        Some(json!({"count": 2, "mode": "plan"}))
    );
    assert_eq!(
        store.scoped_state("user/ada").await.unwrap(),
        Some(json!({"visits": 3}))
    );
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Plan {
    steps: Vec<String>,
    status: String,
}

#[tokio::test]
async fn declared_resources_start_from_their_defaults_and_read_only_ones_refuse_changes() {
    // 002: "blocks can declare their resource dependencies"; defineResource({stateSchema,
    // writable: true}); "await ctx.session.resources.plan.patchState({ status: "active" })".
    let manager = handler("plan-manager")
        .session_resource("plan", define_resource::<Plan>(true))
        .project_resource("rules", define_resource::<Plan>(false))
        .execute(|_: Value, ctx: Ctx| async move {
            let plan = ctx.session()?.resource("plan")?;
            let before = plan.state().await?;
            let after = plan.patch_state(json!({"status": "active"})).await?;
            let refused = ctx
                .project()?
                .resource("rules")?
                .patch_state(json!({"status": "x"}))
                .await
                .unwrap_err()
                .message;
            let undeclared = match ctx.session()?.resource("notes") {
                Err(e) => e.message,
                Ok(_) => "declared".into(),
            };
            Ok(json!({"before": before, "after": after, "refused": refused, "undeclared": undeclared}))
        });
    let run = TestHarness::new()
        .scopes(scopes("s", "u"))
        .run(manager, json!(null))
        .await;
    let out = run.output();
    assert_eq!(out["before"], json!({"steps": [], "status": ""}));
    assert_eq!(out["after"], json!({"steps": [], "status": "active"}));
    assert!(
        out["refused"]
            .as_str()
            .unwrap()
            .contains("read-only resource"),
        "{out}"
    );
    assert!(
        out["undeclared"]
            .as_str()
            .unwrap()
            .contains("no resource `notes`"),
        "{out}"
    );
}

#[tokio::test]
async fn a_run_without_a_session_says_so() {
    let run = TestHarness::new().run(counter(), "chat").await;
    let e = run.error().unwrap();
    assert_eq!(e.kind, ErrorKind::Config);
    assert!(
        e.message.contains("the run belongs to no session"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn concurrent_handlers_of_one_session_lose_no_increment() {
    let bump = handler("bump").execute(|_: Value, ctx: Ctx| async move {
        ctx.session()?.inc_state("hits", 1.0).await?;
        Ok(())
    });
    let fan = sequencer("fan").for_each(bump, None);
    let h = TestHarness::new().scopes(scopes("busy", "u"));
    h.run(fan, json!(vec![0; 50])).await.output();
    assert_eq!(
        h.store().scoped_state("session/busy").await.unwrap(),
        Some(json!({"hits": 50}))
    );
}
