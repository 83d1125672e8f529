//! `weft mcp` with a real MCP client: the official Python SDK (`mcp` on PyPI, installed
//! by `scripts/setup` into its own virtual environment) holds a model's conversation
//! with the binary over stdio (`tests/mcp/conversation.py`).

mod support;

use support::Env;

/// The Python that has the `mcp` package: `$WEFT_MCP_PYTHON`, else the one
/// `scripts/setup` installs.
fn mcp_python() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("WEFT_MCP_PYTHON") {
        return p.into();
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(std::env::var("HOME").unwrap()).join(".cache"));
    cache.join("weft/mcp-client/bin/python")
}

#[test]
fn a_model_builds_runs_and_inspects_a_flow_through_the_python_sdk() {
    let python = mcp_python();
    assert!(
        python.exists(),
        "{} is missing: run scripts/setup (it installs the MCP client the tests use)",
        python.display()
    );
    let env = Env::new();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/conversation.py");
    let out = std::process::Command::new(&python)
        .args([
            script,
            env!("CARGO_BIN_EXE_weft"),
            env.path("runs.db").to_str().unwrap(),
            &support::example("release-approval.yaml"),
        ])
        .current_dir(env.path(""))
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success() && stdout.contains("conversation ok"),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
}
