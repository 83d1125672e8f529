"""Makes the same calls through langgraph-sdk to a server and records what comes back:
each stream's parts (event name and data), each answer, each error's status and body.

    python record.py BASE_URL OUT.json [API_KEY]
"""

import asyncio
import json
import sys

import httpx
from langgraph_sdk import get_client

BASE, OUT = sys.argv[1], sys.argv[2]
KEY = sys.argv[3] if len(sys.argv) > 3 else None


def human(text):
    return {"messages": [{"type": "human", "content": text}]}


async def parts(stream):
    return [{"event": p.event, "data": p.data} async for p in stream]


async def status_of(call):
    try:
        await call
        return {"status": 200}
    except httpx.HTTPStatusError as e:
        return {"status": e.response.status_code, "body": e.response.json()}


async def raw_stream(base, path, body):
    """The stream's SSE lines and headers, as sent."""
    headers = {"Accept": "text/event-stream", **({"x-api-key": KEY} if KEY else {})}
    async with httpx.AsyncClient(base_url=base, timeout=30) as h:
        async with h.stream("POST", path, json=body, headers=headers) as r:
            lines = [line async for line in r.aiter_lines()]
            kept = {k: v for k, v in r.headers.items() if k in ("content-type", "location", "content-location")}
            return {"headers": kept, "lines": lines}


async def main():
    c = get_client(url=BASE, api_key=KEY)
    out = {}
    t = await c.threads.create(metadata={"user": "ada"})
    out["thread_created"] = t
    tid = t["thread_id"]
    modes = ["values", "updates", "messages-tuple", "events", "debug"]
    out["stream_all_modes"] = await parts(c.runs.stream(tid, "chat", input=human("what's the weather?"), stream_mode=modes))
    out["wait_second"] = await c.runs.wait(tid, "chat", input=human("hi"))
    out["thread_after"] = await c.threads.get(tid)
    out["state"] = await c.threads.get_state(tid)
    out["history"] = await c.threads.get_history(tid)
    out["runs"] = await c.runs.list(tid)
    t2 = (await c.threads.create())["thread_id"]
    out["raw_stream"] = await raw_stream(BASE, f"/threads/{t2}/runs/stream", {"assistant_id": "chat", "input": human("hi"), "stream_mode": ["values", "updates"]})
    t3 = (await c.threads.create())["thread_id"]
    out["stream_interrupt"] = await parts(c.runs.stream(t3, "release-approval", input={"version": "2.0", "changes": ["x"]}, stream_mode=["values", "updates"]))
    out["thread_interrupted"] = await c.threads.get(t3)
    out["state_interrupted"] = await c.threads.get_state(t3)
    out["stream_resume"] = await parts(c.runs.stream(t3, "release-approval", command={"resume": "approve"}, stream_mode=["values", "updates"]))
    t4 = (await c.threads.create())["thread_id"]
    run = await c.runs.create(t4, "slow", input={})
    out["run_created"] = run
    out["busy_second_run"] = await status_of(c.runs.create(t4, "slow", input={}))
    await c.runs.cancel(t4, run["run_id"])
    await asyncio.sleep(0.5)
    out["run_cancelled"] = await c.runs.get(t4, run["run_id"])
    out["unknown_assistant"] = await status_of(c.assistants.get("nope"))
    out["unknown_thread"] = await status_of(c.threads.get("00000000-0000-0000-0000-000000000000"))
    out["bad_stream_mode"] = await status_of(c.runs.create(t4, "chat", input=human("x"), stream_mode="nonsense"))
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1, default=str)


asyncio.run(main())
