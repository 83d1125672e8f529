//! runsight's own files (issue 23): a project's tool files and built-in tools, providers,
//! child workflows with an `interface`, declared inputs from every root, the loop's
//! `__loop__` record, the assertion types and fields of its reference, and its `eval:`
//! section. Each test cites the runsight documentation page it follows.

use super::{answering, run_in, tool_result, user_message};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use weft_fakes::{FakeServer, Reply, Wire};

/// A runsight project in a temporary directory: `custom/<kind>/<id>.yaml` files, and
/// the workflows directory its workflows run from.
struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new() -> Project {
        let p = Project {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(p.workflows()).unwrap();
        p
    }

    fn workflows(&self) -> PathBuf {
        self.dir.path().join("custom/workflows")
    }

    fn write(&self, rel: &str, text: &str) -> &Project {
        let path = self.dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        self
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
}

/// A server that calls `tool` with `args` once, then answers with the tool's result.
async fn calling(tool: &'static str, args: Value) -> FakeServer {
    FakeServer::start_with(
        Wire::OpenAi,
        std::time::Duration::ZERO,
        move |r| match tool_result(r) {
            Some(result) => Reply::text(format!("done: {result}")),
            None => Reply::tool_call(tool, args.clone()),
        },
    )
    .await
}

fn load_in(text: &str, dir: &Path) -> Result<weft_dialects::Loaded, String> {
    weft_dialects::load_str(text, "flow.yaml", Some(dir), Some("souls")).map_err(|e| e.render())
}

const SOUL: &str = "souls:\n  agent:\n    system_prompt: You act.\n    provider: openai\n    model_name: gpt-4o-mini\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_io_writes_and_reads_files_in_the_files_directory() {
    // tools/built-in-tools.md: `file_io` reads and writes files within a sandboxed base
    // directory; a write answers "Written N bytes to PATH".
    let project = Project::new();
    let server = calling(
        "file_io",
        json!({"action": "write", "path": "out/note.md", "content": "# Note"}),
    )
    .await;
    let text = format!(
        "tools: [file_io]\n{SOUL}    tools: [file_io]\nblocks:\n  a:\n    type: linear\n    soul_ref: agent\nworkflow:\n  name: w\n  entry: a\n"
    );
    let ran = run_in(&text, json!("Write"), Some(&server), &project.workflows()).await;
    assert_eq!(
        ran.output(),
        &json!("done: Written 6 bytes to out/note.md"),
        "{:?}",
        ran.result.error
    );
    assert_eq!(
        std::fs::read_to_string(project.workflows().join("out/note.md")).unwrap(),
        "# Note"
    );
    let offered = &server.received()[0].body["tools"][0]["function"];
    assert_eq!(offered["name"], "file_io");
    assert_eq!(
        offered["parameters"]["properties"]["action"]["enum"],
        json!(["read", "write"])
    );

    // Reading back, and a path out of the directory refused to the model, not the run.
    let server = calling("file_io", json!({"action": "read", "path": "out/note.md"})).await;
    let ran = run_in(&text, json!("Read"), Some(&server), &project.workflows()).await;
    assert_eq!(ran.output(), &json!("done: # Note"));
    let server = calling("file_io", json!({"action": "read", "path": "../../x"})).await;
    let ran = run_in(&text, json!("Read"), Some(&server), &project.workflows()).await;
    let out = ran.output().as_str().unwrap().to_owned();
    assert!(
        out.contains("error:") && out.contains("`..` leaves"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_s_python_tool_runs_in_the_sandbox() {
    // tools/custom-tools.md: custom/tools/<id>.yaml, `executor: python`, `def main(args)`,
    // inline `code` or a `code_file` beside the YAML.
    let project = Project::new();
    project
        .write(
            "custom/tools/shout.yaml",
            "version: \"1.0\"\nid: shout\nkind: tool\ntype: custom\nexecutor: python\nname: shout\ndescription: Upper-cases a text.\nparameters:\n  type: object\n  properties: {text: {type: string}}\n  required: [text]\ncode_file: shout.py\n",
        )
        .write(
            "custom/tools/shout.py",
            "def main(args):\n    return {\"loud\": args[\"text\"].upper()}\n",
        );
    let server = calling("shout", json!({"text": "hey"})).await;
    let text = format!(
        "tools: [shout]\n{SOUL}    tools: [shout]\nblocks:\n  a:\n    type: linear\n    soul_ref: agent\nworkflow:\n  name: w\n  entry: a\n"
    );
    let ran = run_in(&text, json!("Shout"), Some(&server), &project.workflows()).await;
    assert_eq!(ran.output(), &json!("done: {\"loud\":\"HEY\"}"));
    assert_eq!(
        server.received()[0].body["tools"][0]["function"]["description"],
        "Upper-cases a text."
    );

    // An id the project does not have, and a file whose id disagrees, are load errors.
    let e = load_in(&text.replace("shout", "whisper"), &project.workflows()).unwrap_err();
    assert!(
        e.contains("no tool `whisper`") && e.contains("custom/tools/whisper.yaml"),
        "{e}"
    );
    project.write(
        "custom/tools/other.yaml",
        "id: else\nkind: tool\ntype: custom\nexecutor: python\nname: x\ndescription: x\ncode: \"def main(args):\\n    return 1\\n\"\n",
    );
    let e = load_in(&text.replace("shout", "other"), &project.workflows()).unwrap_err();
    assert!(e.contains("says its id is `else`"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_tool_fills_its_template_from_the_arguments_and_secrets() {
    // tools/custom-tools.md: `executor: request`, `{{ param }}` from the arguments,
    // `${ENV_VAR}` for secrets (Weft's secrets: WEFT_SECRET_<VAR>), `response_path`.
    let api =
        super::support::http_server(r#"{"data": {"echo": "$BODY", "line": "$REQUEST"}}"#).await;
    let project = Project::new();
    project.write(
        "custom/tools/notify.yaml",
        &format!(
            "version: \"1.0\"\nid: notify\nkind: tool\ntype: custom\nexecutor: request\nname: notify\ndescription: Sends a message.\nparameters:\n  type: object\n  properties: {{message: {{type: string}}}}\n  required: [message]\ntimeout_seconds: 5\nrequest:\n  method: PUT\n  url: \"{api}/hooks?key=${{API_KEY}}\"\n  headers: {{Content-Type: application/json}}\n  body_template: '{{\"text\": \"{{{{ message }}}}\"}}'\n  response_path: data\n"
        ),
    );
    let server = calling("notify", json!({"message": "shipped"})).await;
    let text = format!(
        "tools: [notify]\n{SOUL}    tools: [notify]\nblocks:\n  a:\n    type: linear\n    soul_ref: agent\nworkflow:\n  name: w\n  entry: a\n"
    );
    let ran = run_in(&text, json!("Notify"), Some(&server), &project.workflows()).await;
    let out = ran.output().as_str().unwrap().to_owned();
    assert!(out.starts_with("done: {"), "{out}");
    let answer: Value = serde_json::from_str(&out["done: ".len()..]).unwrap();
    assert_eq!(answer["echo"], "{\"text\": \"shipped\"}");
    assert_eq!(answer["line"], "PUT /hooks?key=s3cret HTTP/1.1");

    // A variable that is not among the secrets is named in the tool's answer.
    let unset = text.clone();
    project.write(
        "custom/tools/notify.yaml",
        &std::fs::read_to_string(project.path("custom/tools/notify.yaml"))
            .unwrap()
            .replace("${API_KEY}", "${HOOK_TOKEN}"),
    );
    let server = calling("notify", json!({"message": "shipped"})).await;
    let ran = run_in(&unset, json!("Notify"), Some(&server), &project.workflows()).await;
    let out = ran.output().as_str().unwrap().to_owned();
    assert!(
        out.contains("${HOOK_TOKEN}") && out.contains("WEFT_SECRET_HOOK_TOKEN"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delegate_picks_the_block_s_exit() {
    // tools/built-in-tools.md: the soul calls `delegate` with {port, task}; the port is
    // the block's exit_handle, routed by conditional_transitions; the port parameter is
    // an enum of the block's exits.
    let server = FakeServer::start_with(Wire::OpenAi, std::time::Duration::ZERO, |r| {
        let user = user_message(r);
        if user.contains("Route") {
            match tool_result(r) {
                Some(_) => Reply::text("routed"),
                None => {
                    Reply::tool_call("delegate", json!({"port": "technical", "task": "fix it"}))
                }
            }
        } else {
            Reply::text(format!("handled: {}", user.lines().next().unwrap_or("")))
        }
    })
    .await;
    let project = Project::new();
    let text = format!(
        "tools: [delegate]\n{SOUL}    tools: [delegate]\n  helper:\n    system_prompt: You help.\n    provider: openai\n    model_name: gpt-4o-mini\nblocks:\n  triage:\n    type: linear\n    soul_ref: agent\n    exits:\n      - {{id: billing, label: Billing}}\n      - {{id: technical, label: Technical}}\n  billing:\n    type: linear\n    soul_ref: helper\n  technical:\n    type: code\n    code: |\n      def main(data):\n          return \"technical team\"\nworkflow:\n  name: w\n  entry: triage\n  conditional_transitions:\n    - {{from: triage, billing: billing, technical: technical}}\n"
    );
    let ran = run_in(
        &text,
        json!("Route this: my VPN fails"),
        Some(&server),
        &project.workflows(),
    )
    .await;
    assert_eq!(
        ran.output(),
        &json!("technical team"),
        "{:?}",
        ran.result.error
    );
    let state = &ran.state;
    assert_eq!(state["results"]["triage"], "routed");
    let delegate = &server.received()[0].body["tools"][0]["function"];
    assert_eq!(
        delegate["parameters"]["properties"]["port"]["enum"],
        json!(["billing", "technical"])
    );

    // A soul that may delegate from a block without exits is a load error, as in runsight.
    let no_exits = text.replace(
        "    exits:\n      - {id: billing, label: Billing}\n      - {id: technical, label: Technical}\n",
        "",
    );
    let e = load_in(&no_exits, &project.workflows()).unwrap_err();
    assert!(
        e.contains("uses the delegate tool, but `triage` has no exits"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soul_s_undeclared_tool_is_a_warning_and_not_offered() {
    // runsight's parser offers a soul only the tools its workflow declares, and warns.
    let project = Project::new();
    let text = format!(
        "{SOUL}    tools: [http]\nblocks:\n  a:\n    type: linear\n    soul_ref: agent\nworkflow:\n  name: w\n  entry: a\n"
    );
    let loaded = load_in(&text, &project.workflows()).unwrap();
    let warned = loaded
        .warnings
        .iter()
        .map(|d| d.message.clone())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(warned.contains("`http` is not declared"), "{warned}");
    let server = answering(|_, _| "ok".into()).await;
    let ran = run_in(&text, json!("Go"), Some(&server), &project.workflows()).await;
    assert_eq!(ran.output(), &json!("ok"));
    assert!(server.received()[0].body.get("tools").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_provider_sends_its_souls_to_its_endpoint() {
    // configuration/providers.md: custom/providers/<id>.yaml with `type`, `base_url` and
    // `api_key: ${VAR}`; a soul's `provider` names it.
    let server = answering(|_, _| "from the project's provider".into()).await;
    let project = Project::new();
    project.write(
        "custom/providers/local-vllm.yaml",
        &format!(
            "id: local-vllm\nkind: provider\nname: vLLM\ntype: custom\napi_key: ${{OPENAI_API_KEY}}\nbase_url: {}\nis_active: true\n",
            server.base_url()
        ),
    );
    let text = "souls:\n  agent:\n    system_prompt: You act.\n    provider: local-vllm\n    model_name: qwen-7b\nblocks:\n  a:\n    type: linear\n    soul_ref: agent\nworkflow:\n  name: w\n  entry: a\n";
    // No OPENAI_BASE_URL: only the provider file says where the server is.
    let events = std::sync::Arc::new(weft_engine::CollectingSink::new());
    let env: super::support::Env =
        std::sync::Arc::new(|k: &str| k.ends_with("_API_KEY").then(|| "sk-test".to_owned()));
    let engine = super::support::engine(&project.workflows(), events, env);
    let prepared = super::support::load(text, &project.workflows(), "souls");
    let result = engine
        .start(
            prepared,
            Some(json!("Go")),
            weft_engine::RunOptions::default(),
        )
        .await
        .unwrap()
        .end()
        .await
        .unwrap();
    assert_eq!(
        result.output.map(|o| o.to_value()),
        Some(json!("from the project's provider")),
        "{:?}",
        result.error
    );
    assert_eq!(server.received()[0].body["model"], "qwen-7b");

    // A provider type Weft cannot reach is a load error naming the file.
    project.write(
        "custom/providers/local-vllm.yaml",
        "id: local-vllm\nkind: provider\nname: x\ntype: aws_bedrock\n",
    );
    let e = load_in(text, &project.workflows()).unwrap_err();
    assert!(
        e.contains("cannot reach a provider of type `aws_bedrock`"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_workflow_s_interface_maps_inputs_and_outputs() {
    // workflows/sub-workflows.md: the child declares `interface: {inputs: [{name,
    // target}], outputs: [{name, source}]}`; the parent's `inputs` map interface names to
    // its state paths and its `outputs` its state paths to interface names; the child is
    // found by id in the project's custom/workflows/.
    let project = Project::new();
    project.write(
        "custom/workflows/summarizer.yaml",
        "version: \"1.0\"\nid: summarizer\nkind: workflow\ninterface:\n  inputs:\n    - {name: topic, target: shared_memory.topic, type: string, required: true}\n    - {name: max_words, target: shared_memory.max_words, required: false, default: 500}\n  outputs:\n    - {name: summary, source: results.summarize}\nblocks:\n  summarize:\n    type: code\n    code: |\n      def main(data):\n          sm = data[\"shared_memory\"]\n          return {\"about\": sm[\"topic\"], \"limit\": sm[\"max_words\"], \"keys\": sorted(sm)}\nworkflow:\n  name: Summarizer\n  entry: summarize\n",
    );
    let parent = "version: \"1.0\"\nblocks:\n  gather:\n    type: code\n    code: |\n      def main(data):\n          return \"tides\"\n  run_summary:\n    type: workflow\n    workflow_ref: summarizer\n    inputs:\n      topic: results.gather\n    outputs:\n      results.final_summary: summary\n    depends: gather\nworkflow:\n  name: Parent\n  entry: gather\n";
    let dir = project.path("custom/workflows/parent");
    std::fs::create_dir_all(&dir).unwrap();
    let ran = run_in(parent, json!("Summarize"), None, &dir).await;
    ran.output();
    let state = &ran.state;
    assert_eq!(
        state["results"]["final_summary"],
        json!({"about": "tides", "limit": 500, "keys": ["max_words", "topic"]})
    );

    // A name the interface does not have, and a required input not given, are errors.
    let e = load_in(
        &parent.replace("topic: results.gather", "subject: results.gather"),
        &dir,
    )
    .unwrap_err();
    assert!(e.contains("has no input `subject`"), "{e}");
    assert!(e.contains("needs the input `topic`"), "{e}");
    let e = load_in(&parent.replace(": summary", ": summry"), &dir).unwrap_err();
    assert!(
        e.contains("has no output `summry`") && e.contains("summary"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inputs_read_every_root_and_a_code_block_gets_its_declared_inputs() {
    // workflows/context-governance.mdx: `from:` a block (`draft.summary`), `results.`,
    // `shared_memory.`, `metadata.` and `workflow.` (the run's input); runsight hands a
    // code block its declared inputs as `data` (spec 001 says the run state: a block
    // without inputs still gets that).
    let project = Project::new();
    let text = "blocks:\n  draft:\n    type: code\n    code: |\n      def main(data):\n          return {\"summary\": \"short\", \"all\": sorted(data)}\n  review:\n    type: code\n    depends: draft\n    inputs:\n      summary: {from: draft.summary}\n      whole: {from: results.draft}\n      flag: {from: shared_memory.flags.safe}\n      branch: {from: metadata.runtime.branch}\n      request: {from: workflow.instruction}\n      missing: {from: shared_memory.nothing}\n    code: |\n      def main(data):\n          return data\nworkflow:\n  name: w\n  entry: draft\n";
    let task = json!({"instruction": "Check", "shared_memory": {"flags": {"safe": true}}, "metadata": {"runtime": {"branch": "main"}}});
    let ran = run_in(text, task, None, &project.workflows()).await;
    let mut out = ran.output().clone();
    // runsight keeps a result as text: a whole result reaches a block as its JSON.
    let whole = out["whole"]
        .as_str()
        .expect("the whole result as JSON text")
        .to_owned();
    assert_eq!(
        serde_json::from_str::<Value>(&whole).unwrap(),
        json!({"summary": "short", "all": ["metadata", "results", "shared_memory"]})
    );
    out["whole"] = Value::Null;
    assert_eq!(
        out,
        json!({
            "summary": "short",
            "whole": null,
            "flag": true,
            "branch": "main",
            "request": "Check",
            "missing": null,
        })
    );
}

/// runsight's GUI starter template, in miniature: a loop of a draft and a gate, then a
/// code block that reads the loop's record from `shared_memory.__loop__review_loop`.
fn starter() -> String {
    "souls:\n  researcher:\n    system_prompt: You research.\n    provider: openai\n    model_name: gpt-4o-mini\n  reviewer:\n    system_prompt: You review.\n    provider: openai\n    model_name: gpt-4o-mini\nblocks:\n  draft_report:\n    type: linear\n    soul_ref: researcher\n  quality_gate:\n    type: gate\n    soul_ref: reviewer\n    eval_key: draft_report\n    pass: check_review_status\n    fail: draft_report\n  review_loop:\n    type: loop\n    inner_block_refs: [draft_report, quality_gate]\n    max_rounds: 2\n    break_on_exit: pass\n    retry_on_exit: fail\n  check_review_status:\n    type: code\n    inputs:\n      loop_status: {from: shared_memory.__loop__review_loop}\n    code: |\n      def main(data):\n          meta = data.get(\"loop_status\", {}) or {}\n          reason = str(meta.get(\"break_reason\", \"\"))\n          passed = \"pass\" in reason\n          return {\"status\": \"pass\" if passed else \"fail\", \"rounds\": meta.get(\"rounds_completed\"), \"exit_handle\": \"pass\" if passed else \"fail\"}\n  finish_success:\n    type: code\n    code: |\n      def main(data):\n          return \"success\"\n  finish_error:\n    type: code\n    code: |\n      def main(data):\n          return \"error\"\nworkflow:\n  name: starter\n  entry: review_loop\n  transitions:\n    - {from: review_loop, to: check_review_status}\n  conditional_transitions:\n    - {from: check_review_status, pass: finish_success, fail: finish_error, default: finish_error}\n".to_owned()
}

/// Runs the miniature starter template with a reviewer that answers `verdict`.
async fn run_starter(verdict: &'static str) -> super::Ran {
    let project = Project::new();
    let server = answering(move |m, _| {
        if m.contains("Review the content") {
            verdict.into()
        } else {
            "A draft.".into()
        }
    })
    .await;
    run_in(
        &starter(),
        json!("Research tea"),
        Some(&server),
        &project.workflows(),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_starter_template_takes_its_pass_branch_when_the_gate_passes() {
    // The issue: the GUI's starter template took its failure branch when the review
    // passed; runsight's loop leaves {rounds_completed, broke_early, break_reason} in
    // shared_memory.__loop__<id>. The gate's pass/fail shorthand inside the loop is not a
    // second copy of its blocks.
    let ran = run_starter("PASS").await;
    assert_eq!(ran.output(), &json!("success"), "{:?}", ran.result.error);
    assert_eq!(
        ran.state["shared_memory"]["__loop__review_loop"],
        json!({"rounds_completed": 1, "broke_early": true, "break_reason": "exit_handle 'pass' matched break_on_exit"})
    );

    let ran = run_starter("FAIL: vague").await;
    assert_eq!(ran.output(), &json!("error"));
    let record = &ran.state["shared_memory"]["__loop__review_loop"];
    assert_eq!(record["rounds_completed"], 2);
    assert_eq!(record["break_reason"], "max_rounds reached");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_s_assertion_types_check_the_output() {
    // reference/assertion-reference.md: is-json and contains-json (with a schema),
    // levenshtein, bleu, rouge-n (threshold), cost and latency, `transform:
    // json_path:$...`, `weight` and `metric`, `config: {mode: json}`.
    let project = Project::new();
    let block = |returns: &str, checks: &str| {
        format!(
            "blocks:\n  a:\n    type: code\n    code: |\n      def main(data):\n          return {returns}\n    assertions:\n{checks}workflow:\n  name: w\n  entry: a\n"
        )
    };
    let holds = [
        (
            "'Result: {\"status\": \"ok\"} end'",
            "      - {type: contains-json, value: {type: object, required: [status]}, weight: 2, metric: shape}\n      - {type: not-is-json}\n",
        ),
        (
            "{\"status\": \"active\", \"n\": 4}",
            "      - {type: is-json}\n      - {type: contains, value: active, transform: \"json_path:$.status\"}\n      - {type: equals, value: '{\"n\": 4, \"status\": \"active\"}', config: {mode: json}}\n",
        ),
        (
            "'the cat sat on the mat'",
            "      - {type: levenshtein, value: the cat sat on a mat, threshold: 3}\n      - {type: bleu, value: the cat sat on the mat, threshold: 0.9}\n      - {type: rouge-n, value: the cat sat on the mat today}\n",
        ),
        (
            "'fast'",
            "      - {type: cost, threshold: 0.01}\n      - {type: latency, threshold: 60000}\n",
        ),
    ];
    for (returns, checks) in holds {
        let ran = run_in(
            &block(returns, checks),
            json!("Go"),
            None,
            &project.workflows(),
        )
        .await;
        ran.output();
        let warned = super::conformance::assertion_warnings(&ran);
        assert!(warned.is_empty(), "{checks}: {warned:?}");
    }
    let fails = [
        (
            "'no json here'",
            "      - {type: contains-json}\n",
            "contains-json",
        ),
        (
            "'{\"status\": 1}'",
            "      - {type: is-json, value: {type: object, required: [title]}}\n",
            "is-json",
        ),
        (
            "'a dog'",
            "      - {type: levenshtein, value: the cat sat on the mat}\n",
            "levenshtein",
        ),
        (
            "'slow'",
            "      - {type: latency, threshold: 0}\n",
            "latency",
        ),
        (
            "{\"status\": \"gone\"}",
            "      - {type: equals, value: active, transform: \"json_path:$.status\"}\n",
            "equals",
        ),
    ];
    // One that does not hold is recorded as a warning; the run goes on (runsight
    // scores a block's assertions, it does not stop the run).
    for (returns, checks, kind) in fails {
        let ran = run_in(
            &block(returns, checks),
            json!("Go"),
            None,
            &project.workflows(),
        )
        .await;
        ran.output();
        let warned = super::conformance::assertion_warnings(&ran);
        assert!(
            warned.len() == 1 && warned[0].contains(&format!("`{kind}`")),
            "{kind}: {warned:?}"
        );
    }
    // Bad values are load errors at their line.
    let e = load_in(
        &block(
            "1",
            "      - {type: bleu, value: x, threshold: 0.2, config: {mode: xml}}\n",
        ),
        &project.workflows(),
    )
    .unwrap_err();
    assert!(
        e.contains("flow.yaml:8:") && e.contains("no mode `xml`"),
        "{e}"
    );
    let e = load_in(
        &block(
            "1",
            "      - {type: contains, value: x, transform: \"jmespath:a\"}\n",
        ),
        &project.workflows(),
    )
    .unwrap_err();
    assert!(e.contains("json_path:$.a.b"), "{e}");
    let e = load_in(
        &block("1", "      - {type: contains, value: x, threshold: 3}\n"),
        &project.workflows(),
    )
    .unwrap_err();
    assert!(e.contains("takes no threshold"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eval_section_is_checked_and_said_not_to_run() {
    // evaluation/eval-test-harness.md: `eval: {threshold, cases: [{id, inputs,
    // fixtures, expected}]}`; case ids are unique, blocks exist, assertions are known.
    let project = Project::new();
    let text = |eval: &str| {
        format!(
            "blocks:\n  analyze:\n    type: code\n    code: |\n      def main(data):\n          return \"analysis\"\nworkflow:\n  name: w\n  entry: analyze\neval:\n{eval}"
        )
    };
    let good = text(
        "  threshold: 0.8\n  cases:\n    - id: basic\n      inputs: {task_instruction: Research}\n      fixtures: {analyze: An analysis.}\n      expected:\n        analyze:\n          - {type: contains, value: analysis, weight: 2}\n",
    );
    let loaded = load_in(&good, &project.workflows()).unwrap();
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.message.contains("1 case(s) are checked, not run")),
        "{:?}",
        loaded.warnings
    );
    let ran = run_in(&good, json!("Go"), None, &project.workflows()).await;
    assert_eq!(ran.output(), &json!("analysis"));

    let bad = text(
        "  threshold: 2\n  cases:\n    - id: a\n      fixtures: {analyse: x}\n    - id: a\n      expected:\n        analyze:\n          - {type: containz, value: x}\n",
    );
    let e = load_in(&bad, &project.workflows()).unwrap_err();
    for want in [
        "threshold is a score from 0 to 1",
        "`analyse` is not a block",
        "two eval cases are named `a`",
        "unknown assertion type `containz`",
    ] {
        assert!(e.contains(want), "{want} in:\n{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_s_python_assertion_checks_the_output() {
    // evaluation/custom-assertions.md: custom/assertions/<id>.yaml names a Python file
    // whose get_assert(output, context) returns a bool, a score or {pass, score,
    // reason}; `config` arrives as context["config"], checked against `params`.
    let project = Project::new();
    project
        .write(
            "custom/assertions/tone_check.yaml",
            "version: \"1.0\"\nid: tone_check\nkind: assertion\nname: Tone Check\ndescription: Starts with a prefix.\nreturns: grading_result\nsource: tone_check.py\nparams:\n  type: object\n  properties: {prefix: {type: string}}\n  required: [prefix]\n",
        )
        .write(
            "custom/assertions/tone_check.py",
            "def get_assert(output, context):\n    config = context.get(\"config\", {})\n    return {\"pass\": output.startswith(config.get(\"prefix\", \"\")), \"score\": 0.9, \"reason\": \"prefix\"}\n",
        );
    let text = |prefix: &str| {
        format!(
            "blocks:\n  a:\n    type: code\n    code: |\n      def main(data):\n          return \"calm response\"\n    assertions:\n      - type: custom:tone_check\n        config: {{prefix: {prefix}}}\nworkflow:\n  name: w\n  entry: a\n"
        )
    };
    let ran = run_in(&text("calm"), json!("Go"), None, &project.workflows()).await;
    assert_eq!(ran.output(), &json!("calm response"));
    assert!(super::conformance::assertion_warnings(&ran).is_empty());
    let ran = run_in(&text("angry"), json!("Go"), None, &project.workflows()).await;
    assert_eq!(ran.output(), &json!("calm response"));
    let warned = super::conformance::assertion_warnings(&ran);
    assert!(
        warned.len() == 1 && warned[0].contains("custom:tone_check"),
        "{warned:?}"
    );

    // A config that does not fit the params, and an assertion the project lacks.
    let e = load_in(
        &text("calm").replace("{prefix: calm}", "{prefx: calm}"),
        &project.workflows(),
    )
    .unwrap_err();
    assert!(e.contains("does not fit its params"), "{e}");
    let e = load_in(
        &text("calm").replace("tone_check", "tone"),
        &project.workflows(),
    )
    .unwrap_err();
    assert!(e.contains("no assertion `custom:tone`"), "{e}");
}
