"""A model's conversation with Weft's MCP server, driven by the official Python MCP SDK.

    python conversation.py stdio WEFT_BINARY DB_PATH APPROVAL_FLOW_PATH
    python conversation.py http  URL         TOKEN   APPROVAL_FLOW_PATH

over stdio (`weft mcp`, started by the SDK) or streamable HTTP (`/mcp` on `weft serve`).

Builds spec 000's example (an `h` container with a `code` block in a `loop`) from an
empty document by `edit_flow` patches, fixing a deliberate mistake from the
diagnostics; runs it; sees a run pause at an approval and `answer_approval` refuse;
then sends hostile arguments to every tool. Exits non-zero at the first surprise.
"""
import asyncio
import json
import sys

import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

TOOLS = {
    "describe_format", "validate_flow", "save_flow", "get_flow", "list_flows", "edit_flow",
    "test_flow", "run_flow", "get_run", "list_runs", "cancel_run", "retry_run", "answer_approval",
    "schedule_flow", "list_schedules", "change_schedule",
}

# Two model calls and a file write: test_flow answers the first, asks the local model
# for the second, and denies the write.
TESTED = """weft: 1
name: tested
root:
  sequence:
    - {id: classify, llm: {model: openai/gpt-4o, prompt: "Classify: {{ input.text }}"}}
    - {id: reword, llm: {prompt: "Say in two words: {{ input }}"}}
    - {id: save, action: {uses: file.write, with: {path: out.txt, content: "{{ input }}"}}}
"""


def body(result):
    """The tool result's JSON (structured content, else its text)."""
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


def check(condition, what, detail=None):
    if not condition:
        print(f"FAILED: {what}: {json.dumps(detail)[:2000]}", file=sys.stderr)
        sys.exit(1)


def flow_patch(code_type):
    """Patches that build the flow from an empty document; `code_type` is the inner
    block's type (the mistake is `cod`)."""
    return [
        {"op": "add", "path": "/name", "value": "people"},
        {"op": "add", "path": "/root", "value": {"type": "h", "children": []}},
        {"op": "add", "path": "/root/children/-", "value": {
            "type": "loop", "arrayField": "people", "children": [{
                "step_id": "describe", "type": code_type,
                "input_schema": {"fields": [{"name": "people", "type": "object"}]},
                "code": "return {'full_name': people['first'] + ' ' + people['last']}",
            }],
        }},
    ]


async def conversation(session, approval_source):
    tools = await session.list_tools()
    check({t.name for t in tools.tools} == TOOLS, "the tool list", [t.name for t in tools.tools])
    for t in tools.tools:
        check(t.description and t.input_schema.get("type") == "object", f"{t.name} schema", t.input_schema)

    dialects = body(await session.call_tool("describe_format", {}))
    check("blocks" in [d["dialect"] for d in dialects["dialects"]], "dialects", dialects)
    blocks = body(await session.call_tool("describe_format", {"dialect": "blocks"}))
    check("loop" in blocks["reference"] and blocks["schema"], "the blocks reference", list(blocks))

    # The mistake: the diagnostics say where and what to write instead.
    wrong = await session.call_tool("edit_flow", {"name": "people", "patch": flow_patch("cod"), "dialect": "blocks"})
    check(wrong.is_error, "an invalid edit is refused", body(wrong))
    diags = body(wrong)["diagnostics"]
    check(any("/root/children/0/children/0" in d["pointer"] and d.get("loc") for d in diags), "located diagnostics", diags)
    check(any("code" in (d.get("hint") or "") for d in diags), "a hint naming `code`", diags)
    listed = body(await session.call_tool("list_flows", {}))
    check(listed["flows"] == [], "nothing saved by a refused edit", listed)

    fixed = await session.call_tool("edit_flow", {"name": "people", "patch": flow_patch("code"), "dialect": "blocks"})
    check(not fixed.is_error and body(fixed)["version"] == 1, "the fixed edit saves version 1", body(fixed))
    structure = body(await session.call_tool("get_flow", {"name": "people", "view": "structure"}))
    check(structure["document"]["root"]["type"] == "h" and structure["graph"]["nodes"], "the structure", structure)
    # A small patch: a new version, the YAML written back.
    renamed = await session.call_tool("edit_flow", {"name": "people", "patch": [
        {"op": "add", "path": "/description", "value": "Full names of people"}]})
    check(body(renamed)["version"] == 2 and "description: Full names" in body(renamed)["source"], "version 2", body(renamed))
    missing = await session.call_tool("edit_flow", {"name": "people", "patch": [
        {"op": "replace", "path": "/root/children/7/type", "value": "v"}]})
    check(missing.is_error and "patch" in body(missing)["error"], "a patch on a missing path", body(missing))

    run = body(await session.call_tool("run_flow", {
        "name": "people", "wait_seconds": 60,
        "input": {"people": [{"first": "Ada", "last": "Lovelace"}, {"first": "Alan", "last": "Turing"}]},
    }))
    check(run["status"] == "completed", "the run completes", run)
    check("Ada Lovelace" in json.dumps(run["output"]), "the output", run)
    got = body(await session.call_tool("get_run", {"run_id": run["run_id"]}))
    check(got["status"] == "completed" and got["events"], "get_run with events", got)
    after = body(await session.call_tool("get_run", {"run_id": run["run_id"], "after_event": got["next_after"]}))
    check(after["events"] == [], "no events after the last", after)

    tested = body(await session.call_tool("test_flow", {
        "source": TESTED, "input": {"text": "my card was charged twice"},
        "answers": {"classify": "billing"}, "wait_seconds": 120,
    }))
    check(tested["status"] == "failed", "the test run stops at the denied write", tested)
    check("denied in a test run" in json.dumps(tested["error"]), "the write is denied", tested)
    steps = {s["path"]: s for s in tested["steps"]}
    check(steps["root/classify"]["output"] == "billing", "the answered block", steps)
    check(steps["root/reword"]["status"] == "completed", "the local model answered", steps)
    check(tested["answered_blocks"] == ["classify"] and tested["local_model_blocks"] == ["reword"], "who answered", tested)
    runs = body(await session.call_tool("list_runs", {}))
    check(all(r["flow"] != "tested" for r in runs["runs"]), "a test run is not stored", runs)

    resources = await session.list_resources()
    uris = {str(r.uri) for r in resources.resources}
    check({"weft://dialects/blocks/reference", "weft://flows/people", f"weft://runs/{run['run_id']}"} <= uris, "resources", sorted(uris))
    saved = await session.read_resource("weft://flows/people")
    check("arrayField: people" in saved.contents[0].text, "a saved flow as a resource", saved.contents[0].text)

    paused = body(await session.call_tool("run_flow", {"source": approval_source, "wait_seconds": 30}))
    check(paused["status"] == "paused", "the approval flow pauses", paused)
    seen = body(await session.call_tool("get_run", {"run_id": paused["run_id"]}))
    check(seen["waiting"] and seen["waiting"][0]["prompt"], "the waiting approval", seen)
    refused = await session.call_tool("answer_approval", {"run_id": paused["run_id"], "decision": "approve"})
    check(refused.is_error and "weft approve" in body(refused)["hint"], "a model may not approve", body(refused))
    runs = body(await session.call_tool("list_runs", {"status": "paused"}))
    check(runs["runs"][0]["run_id"] == paused["run_id"], "list_runs", runs)
    cancelled = body(await session.call_tool("cancel_run", {"run_id": paused["run_id"]}))
    check(cancelled["status"] == "cancelled", "cancel_run", cancelled)

    # A waiting call with a progress token: a notification per step, in order, counting
    # toward the flow's ten steps, each naming its step.
    seen_progress = []

    async def on_progress(progress, total, message):
        seen_progress.append((progress, total, message))

    steps = "".join(f"    - {{id: s{i}, transform: {{output: {i}}}}}\n" for i in range(1, 11))
    ten = body(await session.call_tool(
        "run_flow", {"source": f"weft: 1\nname: ten\nroot:\n  sequence:\n{steps}", "wait_seconds": 60},
        progress_callback=on_progress,
    ))
    check(ten["status"] == "completed", "the ten-step run completes", ten)
    for _ in range(50):
        if len(seen_progress) >= 10:
            break
        await asyncio.sleep(0.05)
    check([p for p, _, _ in seen_progress] == list(range(1, 11)), "progress in order", seen_progress)
    check(all(t == 10 for _, t, _ in seen_progress), "progress toward ten steps", seen_progress)
    check(seen_progress[0][2] == "root/s1", "progress names the step", seen_progress)


# Every tool with missing, wrongly typed and oversized arguments: each a tool error.
HOSTILE = [
    ("describe_format", {"dialect": "nope"}),
    ("describe_format", {"dialect": 7}),
    ("validate_flow", {}),
    ("validate_flow", {"source": 123}),
    ("validate_flow", {"source": "x" * (2 << 20)}),
    ("validate_flow", {"source": "weft: 1\nname: x\nroot: {", "extra": True}),
    ("save_flow", {"name": "../etc", "source": "weft: 1"}),
    ("save_flow", {"name": "ok", "source": "weft: 1\nname: x\nroot: {sequense: []}\n"}),
    ("get_flow", {"name": "missing"}),
    ("get_flow", {"name": "people", "view": "pictures"}),
    ("list_flows", {"unexpected": 1}),
    ("edit_flow", {"name": "people", "patch": "not a list"}),
    ("edit_flow", {"name": "people", "patch": [{"op": "explode", "path": "/"}]}),
    ("test_flow", {}),
    ("test_flow", {"source": "weft: 1\nname: t\nroot: {passthrough: {}}\n", "answers": {"nobody": "x"}}),
    ("run_flow", {}),
    ("run_flow", {"name": "people", "source": "weft: 1"}),
    ("run_flow", {"name": "missing"}),
    ("get_run", {"run_id": "0000dead"}),
    ("get_run", {"run_id": ["a"]}),
    ("list_runs", {"status": "sleeping"}),
    ("cancel_run", {}),
    ("retry_run", {"run_id": "0000dead"}),
    ("answer_approval", {"run_id": "x"}),
]


WRONG_TYPE = {"string": 7, "integer": "seven", "number": "seven", "boolean": "yes", "array": "x", "object": "x"}
OVERSIZED = "x" * (2 << 20)


def generated(tools):
    """For every tool, from its own input schema: no arguments (when some are
    required), each argument wrongly typed, and each text argument 2 MiB long."""
    cases = []
    for t in tools:
        schema = t.input_schema
        props = schema.get("properties", {})
        if schema.get("required"):
            cases.append((t.name, {}))
        for prop, spec in props.items():
            kinds = spec.get("type", "object")
            kind = kinds[0] if isinstance(kinds, list) else kinds
            if kind in WRONG_TYPE:
                cases.append((t.name, {prop: WRONG_TYPE[kind]}))
            if kind == "string":
                cases.append((t.name, {prop: OVERSIZED}))
    return cases


async def hostile(session):
    tools = (await session.list_tools()).tools
    cases = HOSTILE + generated(tools)
    for name, arguments in cases:
        r = await session.call_tool(name, arguments)
        check(r.is_error, f"{name} {str(arguments)[:80]} is a tool error", body(r))
        check(body(r)["error"], f"{name} says why", body(r))
        check(len(json.dumps(body(r))) < 20_000, f"{name}: the error does not echo 2 MiB back", len(json.dumps(body(r))))
    check(len(cases) > 60, "the hostile table covers every tool", len(cases))
    # A tool that does not exist is a protocol error (-32602) naming the tools there are.
    try:
        await session.call_tool("no_such_tool", {})
        check(False, "an unknown tool is refused", None)
    except Exception as e:
        error = getattr(e, "error", None)
        check(getattr(error, "code", None) == -32602, "an unknown tool is -32602", repr(e))
        check("run_flow" in json.dumps(getattr(error, "data", None)), "the error names the tools", repr(e))
    tools = await session.list_tools()
    check(len(tools.tools) == len(TOOLS), "still serving after hostile input")


async def converse(read, write, approval_source):
    async with ClientSession(read, write) as session:
        await session.initialize()
        await conversation(session, approval_source)
        await hostile(session)


async def main():
    transport, where, secret, approval_path = sys.argv[1:5]
    approval_source = open(approval_path).read()
    if transport == "stdio":
        params = StdioServerParameters(command=where, args=["mcp", "--db", secret])
        async with stdio_client(params) as (read, write):
            await converse(read, write, approval_source)
    else:
        headers = {"Authorization": f"Bearer {secret}"}
        async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
            async with streamable_http_client(where, http_client=http) as (read, write):
                await converse(read, write, approval_source)
    print("conversation ok")


if __name__ == "__main__":
    asyncio.run(main())
