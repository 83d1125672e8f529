//! `/v1/flows` and paging over a real socket: flows in two dialects are checked, stored,
//! listed, drawn and run by id.

mod support;

use serde_json::{Value, json};
use support::*;

const GATE: &str = "weft: 1\nname: gate\ninput: {n: 1}\nroot:\n  sequence:\n    - {id: draft, transform: {output: '{{ input.n + 1 }}'}}\n    - id: each\n      map:\n        items: '{{ [1, 2] }}'\n        body: {transform: {output: '{{ item }}'}}\n";

fn release_gate() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/graph/release-gate.json"
    );
    std::fs::read_to_string(path).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_is_stored_once_drawn_and_run_by_its_id() {
    let s = server(None).await;
    let (status, stored) = s.post("/v1/flows", json!({"source": GATE})).await;
    assert_eq!(status, 201, "{stored}");
    let id = stored["flow_id"].as_str().unwrap().to_owned();
    assert_eq!(id.len(), 32);
    assert_eq!(
        (stored["name"].as_str(), stored["dialect"].as_str()),
        (Some("gate"), Some("native"))
    );
    let paths: Vec<&str> = stored["graph"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["path"].as_str())
        .collect();
    assert_eq!(paths, ["root/draft", "root/each", "root/each/[*]"]);
    assert!(!stored["graph"]["edges"].as_array().unwrap().is_empty());

    // The same text again is the same flow.
    let (status, again) = s.post("/v1/flows", json!({"source": GATE})).await;
    assert_eq!(
        (status, again["flow_id"].as_str()),
        (200, Some(id.as_str()))
    );

    let (status, shown) = s.get(&format!("/v1/flows/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(shown["source"], GATE);
    assert_eq!(shown["graph"], stored["graph"]);

    let (status, run) = s
        .post(
            "/v1/runs?wait=10",
            json!({"flow_id": id, "input": {"n": 41}}),
        )
        .await;
    assert_eq!(
        (status, run["status"].as_str()),
        (200, Some("completed")),
        "{run}"
    );
    assert_eq!(run["output"], json!([1, 2]));
    let run_id = run["run_id"].as_str().unwrap();
    let (_, detail) = s.get(&format!("/v1/runs/{run_id}")).await;
    assert_eq!(detail["flow_id"], id.as_str());
    let draft = &detail["steps"][1];
    assert_eq!(
        (draft["path"].as_str(), &draft["input"], &draft["output"]),
        (Some("root/draft"), &json!({"n": 41}), &json!(42))
    );
    // A run started from the text links to the same stored flow.
    let (_, run) = s.post("/v1/runs?wait=10", json!({"source": GATE})).await;
    let (_, listed) = s.get("/v1/runs").await;
    assert_eq!(listed["runs"][0]["run_id"], run["run_id"]);
    assert_eq!(listed["runs"][0]["flow_id"], id.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visual_editor_graph_is_stored_in_its_own_dialect() {
    let s = server(None).await;
    let text = release_gate();
    let (status, stored) = s.post("/v1/flows", json!({"source": text})).await;
    assert_eq!(status, 201, "{stored}");
    assert_eq!(stored["dialect"], "graph");
    let id = stored["flow_id"].as_str().unwrap();
    let (_, shown) = s.get(&format!("/v1/flows/{id}")).await;
    assert_eq!(shown["source"], text.as_str());
    let kinds: Vec<&str> = shown["graph"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"approval"), "{kinds:?}");
    // The run pauses at the approval, as it does from the command line.
    let (status, run) = s.post("/v1/runs?wait=10", json!({"flow_id": id})).await;
    assert_eq!(
        (status, run["status"].as_str()),
        (200, Some("paused")),
        "{run}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_flows_and_bad_run_requests_are_problems_with_locations() {
    let s = server(None).await;
    let (status, p) = s
        .post(
            "/v1/flows",
            json!({"source": "weft: 1\nname: bad\nroot:\n  sequense: []\n"}),
        )
        .await;
    assert_eq!(
        (status, p["title"].as_str()),
        (400, Some("invalid flow")),
        "{p}"
    );
    let d = &p["diagnostics"][0];
    assert_eq!(d["loc"]["line"], 4, "{p}");
    assert!(d["hint"].as_str().unwrap_or("").contains("sequence"), "{p}");

    let (status, p) = s.get("/v1/flows/0123456789abcdef").await;
    assert_eq!((status, p["title"].as_str()), (404, Some("no such flow")));
    let (status, p) = s
        .post("/v1/runs", json!({"flow_id": "0123456789abcdef"}))
        .await;
    assert_eq!((status, p["title"].as_str()), (404, Some("no such flow")));
    for body in [
        json!({}),
        json!({"flow_id": "x", "source": GATE}),
        json!({"flow_id": "x", "dialect": "native"}),
    ] {
        let (status, p) = s.post("/v1/runs", body.clone()).await;
        assert_eq!(
            (status, p["title"].as_str()),
            (400, Some("invalid request")),
            "{body}"
        );
    }
    let (status, p) = s.get("/v1/flows?cursor=nonsense").await;
    assert_eq!(
        (status, p["title"].as_str()),
        (400, Some("invalid request"))
    );
    let (status, _) = s.get("/healthz").await;
    assert_eq!(status, 200, "still serving");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_page_with_cursors_to_the_end() {
    let s = server(None).await;
    let mut flow_ids = Vec::new();
    let mut run_ids = Vec::new();
    for i in 0..7 {
        let text = format!("weft: 1\nname: f{i}\nroot: {{transform: {{output: {i}}}}}\n");
        let (_, f) = s.post("/v1/flows", json!({"source": text})).await;
        flow_ids.push(f["flow_id"].as_str().unwrap().to_owned());
        let (_, r) = s
            .post("/v1/runs?wait=10", json!({"flow_id": f["flow_id"]}))
            .await;
        run_ids.push(r["run_id"].as_str().unwrap().to_owned());
    }
    for (list, key, id_key, ids) in [
        ("/v1/flows", "flows", "flow_id", &flow_ids),
        ("/v1/runs", "runs", "run_id", &run_ids),
    ] {
        let mut seen: Vec<String> = Vec::new();
        let mut cursor: Option<String> = None;
        let mut pages = 0;
        loop {
            let url = match &cursor {
                Some(c) => format!("{list}?limit=3&cursor={c}"),
                None => format!("{list}?limit=3"),
            };
            let (status, page) = s.get(&url).await;
            assert_eq!(status, 200, "{page}");
            pages += 1;
            seen.extend(
                page[key]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x[id_key].as_str().unwrap().to_owned()),
            );
            match &page["next_cursor"] {
                Value::String(c) => cursor = Some(c.clone()),
                Value::Null => break,
                other => panic!("{other}"),
            }
        }
        let mut expected = ids.clone();
        expected.reverse();
        assert_eq!(seen, expected, "{list}: newest first, each once");
        assert_eq!(pages, 3, "{list}: 3 + 3 + 1");
    }
}

/// A flow posted to `/v1/flows` is stored the one way every door stores flows: a flow
/// with a name is the next version of that name, which LangGraph's clients find as an
/// assistant; a name in the request is the name it is saved under.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_posted_flow_with_a_name_is_the_next_version_and_an_assistant() {
    let s = server(None).await;
    let (status, first) = s.post("/v1/flows", json!({"source": GATE})).await;
    assert_eq!(
        (status, first["version"].as_u64()),
        (201, Some(1)),
        "{first}"
    );
    let (_, again) = s.post("/v1/flows", json!({"source": GATE})).await;
    assert_eq!(
        again["version"], 1,
        "the same text is the same version: {again}"
    );
    let changed = GATE.replace("input.n + 1", "input.n + 2");
    let (_, second) = s.post("/v1/flows", json!({"source": changed})).await;
    assert_eq!(second["version"], 2, "{second}");
    let (status, found) = s
        .post("/assistants/search", json!({"graph_id": "gate"}))
        .await;
    assert_eq!(status, 200, "{found}");
    let ids: Vec<&str> = found
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["graph_id"].as_str())
        .collect();
    assert!(ids.contains(&"gate"), "{found}");
    // A name in the request is the name it is saved under, as MCP's save_flow does.
    let (_, saved) = s
        .post(
            "/v1/flows",
            json!({"source": release_gate(), "name": "gate-editor"}),
        )
        .await;
    assert_eq!(
        (saved["name"].as_str(), saved["version"].as_u64()),
        (Some("gate-editor"), Some(1)),
        "{saved}"
    );
}
