"""LangGraph's Python client (`langgraph-sdk`) against `weft serve`'s LangGraph door.

    python client.py BASE_URL TOKEN

Each scenario asserts what the client receives; the last line is `langgraph ok`.
"""

import asyncio
import sys
import uuid

import httpx
from langgraph_sdk import get_client

BASE, TOKEN = sys.argv[1], sys.argv[2]
# Threads made by this conversation carry this, so a search finds only them.
MARK = str(uuid.uuid4())


async def refused(status, call):
    """Awaits `call`, which must fail with HTTP `status` and a JSON `detail`."""
    try:
        await call
    except httpx.HTTPStatusError as e:
        assert e.response.status_code == status, (status, e.response.status_code, e.response.text)
        assert e.response.json()["detail"], e.response.text
        return
    raise AssertionError(f"expected HTTP {status}")


def human(text):
    return {"messages": [{"type": "human", "content": text}]}


async def assistants(c):
    found = {a["assistant_id"] for a in await c.assistants.search()}
    assert {"chat", "slow", "release-approval"} <= found, found
    graph = await c.assistants.get_graph("chat")
    assert graph["nodes"], graph
    await refused(404, c.assistants.get("nope"))


async def stream_every_mode(c):
    t = await c.threads.create(metadata={"user": "ada", "mark": MARK})
    assert t["status"] == "idle" and t["values"] == {}, t
    modes = ["values", "updates", "messages-tuple", "events", "debug"]
    parts = [p async for p in c.runs.stream(t["thread_id"], "chat", input=human("what's the weather?"), stream_mode=modes)]
    events = [p.event for p in parts]
    assert events[0] == "metadata" and parts[0].data["run_id"], parts[0]
    assert set(events) == {"metadata", "values", "updates", "messages", "events", "debug"}, events
    values = [p.data for p in parts if p.event == "values"]
    # Messages come back as LangChain message dicts, each with an id.
    first = values[0]["messages"]
    assert [(m["type"], m["content"]) for m in first] == [("human", "what's the weather?")], first
    assert first[0]["id"] and first[0]["additional_kwargs"] == {}, first
    assert [m["type"] for m in values[-1]["messages"]] == ["human", "ai"], values[-1]
    updates = [p.data for p in parts if p.event == "updates"]
    assert updates[0] == {"answer": "It is sunny."}, updates
    # The model's answer as it streamed: chunks whose text adds up to the answer.
    chunks = [p.data for p in parts if p.event == "messages"]
    assert all(m["type"] == "AIMessageChunk" for m, _ in chunks), chunks
    assert "".join(m["content"] for m, _ in chunks) == "It is sunny.", chunks
    assert {meta["langgraph_node"] for _, meta in chunks} == {"answer"}, chunks
    chain = [(p.data["event"], p.data["name"]) for p in parts if p.event == "events"]
    steps = [e for e in chain if e[0] != "on_chat_model_stream"]
    assert steps == [
        ("on_chain_start", "chat"),
        ("on_chain_start", "answer"), ("on_chain_end", "answer"),
        ("on_chain_start", "reply"), ("on_chain_end", "reply"),
        ("on_chain_end", "chat"),
    ], chain
    # The model's tokens come inside its step, after it started.
    streamed = [i for i, e in enumerate(chain) if e == ("on_chat_model_stream", "answer")]
    assert streamed and chain.index(("on_chain_start", "answer")) < streamed[0], chain
    assert streamed[-1] < chain.index(("on_chain_end", "answer")), chain
    debug = [p.data["type"] for p in parts if p.event == "debug"]
    assert debug[0] == "checkpoint" and "task" in debug and "task_result" in debug, debug
    return t["thread_id"]


async def second_run_and_history(c, thread_id):
    values = await c.runs.wait(thread_id, "chat", input=human("hi"))
    texts = [m["content"] for m in values["messages"]]
    assert texts == ["what's the weather?", "It is sunny.", "hi", "Hello from Weft."], texts
    state = await c.threads.get_state(thread_id)
    assert state["values"] == values and state["next"] == [], state
    history = await c.threads.get_history(thread_id)
    assert len(history) == 2, history
    assert history[0]["parent_checkpoint"]["checkpoint_id"] == history[1]["checkpoint"]["checkpoint_id"]
    assert len(history[1]["values"]["messages"]) == 2, history[1]
    runs = await c.runs.list(thread_id)
    assert [r["status"] for r in runs] == ["success", "success"], runs
    assert (await c.threads.get(thread_id))["status"] == "idle"
    assert len(await c.threads.search(metadata={"mark": MARK})) == 1
    # A thread names the graph its runs run, as Agent Chat UI lists a graph's threads.
    listed = await c.threads.search(metadata={"graph_id": "chat", "mark": MARK})
    assert [t["thread_id"] for t in listed] == [thread_id], listed
    # A run from an earlier checkpoint starts from that run's values (editing or
    # regenerating an earlier message); from the head, as any run does.
    head, first = history[0]["checkpoint"], history[1]["checkpoint"]
    forked = await c.runs.wait(thread_id, "chat", input=human("again"), checkpoint=first)
    texts = [m["content"] for m in forked["messages"]]
    assert texts == ["what's the weather?", "It is sunny.", "again", "Hello from Weft."], forked
    latest = (await c.threads.get_history(thread_id, limit=1))[0]["checkpoint"]
    assert latest != head, latest
    on_head = await c.runs.wait(thread_id, "chat", input=human("hi"), checkpoint=latest)
    assert len(on_head["messages"]) == 6, on_head
    await refused(404, c.runs.wait(thread_id, "chat", input=human("x"), checkpoint={"checkpoint_id": "nope", "checkpoint_ns": ""}))


async def messages_mode(c):
    """LangGraph's `messages` mode: each model message's metadata once, then the message
    so far as it streams (or whole, when the model did not stream)."""
    t = (await c.threads.create())["thread_id"]
    parts = [p async for p in c.runs.stream(t, "chat", input=human("what's the weather?"), stream_mode="messages")]
    events = [p.event for p in parts]
    assert events[0] == "metadata" and events[1] == "messages/metadata", events
    assert set(events[2:]) <= {"messages/partial", "messages/complete"} and len(events) > 2, events
    last = parts[-1].data[0]
    assert last["content"] == "It is sunny." and last["id"] in parts[1].data, parts
    assert parts[1].data[last["id"]]["metadata"]["langgraph_node"] == "answer", parts[1].data


async def modes_weft_does_not_send(c):
    """LangGraph's modes Weft's events do not carry are accepted and send nothing."""
    t = (await c.threads.create())["thread_id"]
    parts = [p async for p in c.runs.stream(t, "chat", input=human("hi"), stream_mode=["tasks", "checkpoints", "values"])]
    assert {p.event for p in parts} == {"metadata", "values"}, parts
    quiet = [p async for p in c.runs.stream(t, "chat", input=human("hi"), stream_mode=["tasks"])]
    assert [p.event for p in quiet] == ["metadata"], quiet


async def write_state(c):
    """update_state between runs: the written values stand, and the next run starts from them."""
    t = (await c.threads.create())["thread_id"]
    await c.runs.wait(t, "chat", input=human("hi"))
    written = await c.threads.update_state(t, {"messages": [{"type": "human", "content": "remember: blue"}], "topic": "colours"})
    assert written["checkpoint"]["checkpoint_id"], written
    state = await c.threads.get_state(t)
    texts = [m["content"] for m in state["values"]["messages"]]
    assert state["values"]["topic"] == "colours" and texts == ["hi", "Hello from Weft.", "remember: blue"], state
    history = await c.threads.get_history(t)
    assert [h["metadata"]["source"] for h in history] == ["update", "loop"], history
    done = await c.runs.wait(t, "chat", input=human("what's the weather?"))
    texts = [m["content"] for m in done["messages"]]
    assert texts == ["hi", "Hello from Weft.", "remember: blue", "what's the weather?", "It is sunny."], done
    assert done["topic"] == "colours", done
    run = await c.runs.create(t, "slow", input={})
    await refused(409, c.threads.update_state(t, {"topic": "too soon"}))
    await c.runs.cancel(t, run["run_id"])


async def interrupt_and_resume(c):
    t = await c.threads.create()
    parts = [p async for p in c.runs.stream(t["thread_id"], "release-approval", input={"version": "2.0", "changes": ["x"]}, stream_mode=["values", "updates"])]
    # As LangGraph pauses: the interrupt as an update, then the values with it.
    paused, last = parts[-2], parts[-1]
    assert paused.event == "updates" and "__interrupt__" in paused.data, parts
    assert last.event == "values" and last.data["__interrupt__"] == paused.data["__interrupt__"], parts
    question = paused.data["__interrupt__"][0]["value"]
    assert question.startswith("Publish these notes?"), question
    thread = await c.threads.get(t["thread_id"])
    assert thread["status"] == "interrupted" and thread["interrupts"], thread
    state = await c.threads.get_state(t["thread_id"])
    assert state["interrupts"][0]["value"] == question and state["tasks"], state
    resumed = [p async for p in c.runs.stream(t["thread_id"], "release-approval", command={"resume": "approve"}, stream_mode=["values", "updates"])]
    # As LangGraph resumes: the values at the pause, the steps after it (not those the
    # journal replays), the values at the end.
    assert [p.event for p in resumed] == ["metadata", "values", "updates", "values"], resumed
    assert "draft" in resumed[1].data and "__interrupt__" not in resumed[1].data, resumed[1]
    assert resumed[-1].data["released"] is True and resumed[-1].data["version"] == "2.0", resumed
    assert (await c.threads.get(t["thread_id"]))["status"] == "idle"
    await refused(409, c.runs.wait(t["thread_id"], "release-approval", command={"resume": "approve"}))


async def rejoin_after_dropping(c):
    t = await c.threads.create()
    seen, last_id, run_id = [], None, None
    stream = c.runs.stream(t["thread_id"], "slow", input={}, stream_mode=["updates", "values"])
    async for p in stream:
        if p.event == "metadata":
            run_id = p.data["run_id"]
        seen.append(p)
        if p.event == "updates":
            break
    await stream.aclose()
    assert seen[-1].data == {"one": "done"}, seen
    # The id of the last part read: the client keeps it as the stream's last event id.
    raw = c.http.client
    async with raw.stream("GET", f"/threads/{t['thread_id']}/runs/{run_id}/stream", headers={"Accept": "text/event-stream"}) as r:
        ids = [line[4:] async for line in r.aiter_lines() if line.startswith("id: ")]
    first_update = ids[1]
    rest = [p async for p in c.runs.join_stream(t["thread_id"], run_id, last_event_id=first_update)]
    updates = [p.data for p in rest if p.event == "updates"]
    assert updates == [{"two": "done"}, {"three": "done"}], rest
    assert rest[-1].event == "values", rest


async def cancel_and_multitask(c):
    t = await c.threads.create()
    run = await c.runs.create(t["thread_id"], "slow", input={})
    assert run["status"] in ("pending", "running"), run
    await refused(409, c.runs.create(t["thread_id"], "slow", input={}, multitask_strategy="reject"))
    await c.runs.cancel(t["thread_id"], run["run_id"])
    assert (await c.runs.get(t["thread_id"], run["run_id"]))["status"] == "interrupted"
    first = await c.runs.create(t["thread_id"], "slow", input={})
    second = await c.runs.create(t["thread_id"], "chat", input=human("hi"), multitask_strategy="interrupt")
    done = await c.runs.join(t["thread_id"], second["run_id"])
    assert done["messages"][-1]["content"] == "Hello from Weft.", done
    assert (await c.runs.get(t["thread_id"], first["run_id"]))["status"] == "interrupted"


async def enqueue(c):
    """LangGraph's default strategy: a second run waits for the first, then starts from
    the values it left."""
    t = (await c.threads.create())["thread_id"]
    first = await c.runs.create(t, "slow", input={"topic": "x"})
    second = await c.runs.create(t, "chat", input=human("hi"))
    assert second["status"] == "pending", second
    dropped = await c.runs.create(t, "chat", input=human("never"))
    await c.runs.cancel(t, dropped["run_id"])
    # A queued run cancelled before its turn ends, for whoever follows it.
    assert (await c.runs.get(t, dropped["run_id"]))["status"] == "interrupted"
    ended = [p async for p in c.runs.join_stream(t, dropped["run_id"])]
    assert [p.event for p in ended] == ["metadata"], ended
    listed = [r["run_id"] for r in await c.runs.list(t)]
    assert second["run_id"] in listed and dropped["run_id"] not in listed, listed
    parts = [p async for p in c.runs.join_stream(t, second["run_id"], stream_mode=["values"])]
    assert parts[0].event == "metadata" and parts[0].data["run_id"] == second["run_id"], parts
    done = parts[-1].data
    # What the first run was given and made (a native flow's text output is `output`).
    assert done["topic"] == "x" and done["output"] == "done", done
    assert [m["content"] for m in done["messages"]] == ["hi", "Hello from Weft."], done
    runs = await c.runs.list(t)
    assert [r["run_id"] for r in runs] == [second["run_id"], first["run_id"]], runs
    assert [r["status"] for r in runs] == ["success", "success"], runs


async def without_a_thread(c):
    """Stateless runs: a thread is made for each, and dropped once it ends unless kept."""
    values = await c.runs.wait(None, "chat", input=human("hi"))
    assert values["messages"][-1]["content"] == "Hello from Weft.", values
    parts = [p async for p in c.runs.stream(None, "chat", input=human("what's the weather?"), stream_mode="updates")]
    assert [p.event for p in parts] == ["metadata", "updates", "updates"], parts
    kept = await c.runs.create(None, "chat", input=human("hi"), on_completion="keep")
    done = await c.runs.join(kept["thread_id"], kept["run_id"])
    assert done["messages"][-1]["content"] == "Hello from Weft.", done
    assert (await c.threads.get(kept["thread_id"]))["status"] == "idle"
    await refused(422, c.runs.wait(None, "chat", input=human("hi"), on_completion="sometimes"))


async def refusals(c):
    t = await c.threads.create()
    for bad in [dict(stream_mode="nonsense"), dict(interrupt_before=["x"]), dict(multitask_strategy="sometimes")]:
        await refused(422, c.runs.create(t["thread_id"], "chat", input=human("hi"), **bad))
    await refused(404, c.runs.create("no-such-thread", "chat", input=human("hi")))
    await refused(404, c.runs.create(t["thread_id"], "no-such-assistant", input=human("hi")))
    # A body that is not JSON: a JSON error, and the server goes on serving.
    r = await c.http.client.post(f"/threads/{t['thread_id']}/runs", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code in (400, 422) and r.json()["detail"], r.text
    made = await c.runs.wait(f"made-{MARK}", "chat", input=human("hi"), if_not_exists="create")
    assert made["messages"][-1]["content"] == "Hello from Weft.", made


async def main():
    c = get_client(url=BASE, api_key=TOKEN)
    await refused(401, get_client(url=BASE, api_key="wrong").threads.create())
    await assistants(c)
    thread_id = await stream_every_mode(c)
    await second_run_and_history(c, thread_id)
    await write_state(c)
    await modes_weft_does_not_send(c)
    await messages_mode(c)
    await interrupt_and_resume(c)
    await rejoin_after_dropping(c)
    await cancel_and_multitask(c)
    await enqueue(c)
    await without_a_thread(c)
    await refusals(c)
    print("langgraph ok")


asyncio.run(main())
