"""LangGraph's own `RemoteGraph` (package `langgraph`) against `weft serve`'s LangGraph
door: how LangGraph users call a deployed graph like a local one, and compose it into
their own graphs.

    python remote_graph.py BASE_URL TOKEN

Each scenario asserts what RemoteGraph gives back; the last line is `remote graph ok`.
"""

import operator
import sys
import uuid
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.pregel.remote import RemoteGraph
from langgraph.types import Command
from langgraph_sdk.errors import NotFoundError

BASE, TOKEN = sys.argv[1], sys.argv[2]


def thread():
    """A config naming a new thread (RemoteGraph creates it on first use)."""
    return {"configurable": {"thread_id": str(uuid.uuid4())}}


def human(text):
    return {"messages": [{"type": "human", "content": text}]}


def invoke_stream_state_and_history():
    chat = RemoteGraph("chat", url=BASE, api_key=TOKEN)
    config = thread()
    out = chat.invoke(human("what is the weather?"), config)
    assert out["messages"][-1]["content"] == "It is sunny.", out
    # The latest state, read through POST /threads/{id}/state/checkpoint.
    state = chat.get_state(config)
    assert state.values["messages"][-1]["content"] == "It is sunny.", state
    assert state.next == () and state.tasks == (), state
    first = state.config["configurable"]["checkpoint_id"]
    assert state.config["configurable"]["thread_id"] == config["configurable"]["thread_id"], state
    # A second turn on the same thread, streamed.
    chunks = list(chat.stream(human("hello"), config, stream_mode="values"))
    assert chunks and chunks[-1]["messages"][-1]["content"] == "Hello from Weft.", chunks
    assert len(chunks[-1]["messages"]) == 4, chunks[-1]
    history = list(chat.get_state_history(config))
    assert len(history) == 2, history
    newest, oldest = history
    assert newest.parent_config["configurable"]["checkpoint_id"] == first, newest
    assert oldest.config["configurable"]["checkpoint_id"] == first, oldest
    assert oldest.parent_config is None, oldest
    # The state at an earlier checkpoint, and the history before it.
    at_first = chat.get_state({"configurable": {**config["configurable"], "checkpoint_id": first}})
    assert len(at_first.values["messages"]) == 2, at_first
    before = list(chat.get_state_history(config, before=newest.config))
    assert [s.config["configurable"]["checkpoint_id"] for s in before] == [first], before
    limited = list(chat.get_state_history(config, limit=1))
    assert len(limited) == 1 and limited[0].config == newest.config, limited
    # A checkpoint of another thread is not this thread's.
    for elsewhere in [str(uuid.uuid4()), thread()["configurable"]["thread_id"]]:
        try:
            chat.get_state({"configurable": {"thread_id": elsewhere, "checkpoint_id": first}})
            raise AssertionError("another thread's checkpoint was found")
        except NotFoundError:
            pass
    try:
        chat.get_state({"configurable": {**config["configurable"], "checkpoint_id": "no-such"}})
        raise AssertionError("a checkpoint that does not exist was found")
    except NotFoundError:
        pass


class Outer(TypedDict):
    messages: Annotated[list, operator.add]
    asked: int


def as_a_node_of_a_local_graph():
    chat = RemoteGraph("chat", url=BASE, api_key=TOKEN)

    def count(state):
        return {"asked": state.get("asked", 0) + 1}

    local = StateGraph(Outer)
    local.add_node("count", count)
    local.add_node("chat", chat)
    local.add_edge(START, "count")
    local.add_edge("count", "chat")
    local.add_edge("chat", END)
    app = local.compile()
    out = app.invoke({"messages": [{"type": "human", "content": "weather?"}], "asked": 0})
    assert out["asked"] == 1, out
    assert any(m.get("content") == "It is sunny." for m in out["messages"] if isinstance(m, dict)) or any(
        getattr(m, "content", None) == "It is sunny." for m in out["messages"]
    ), out


def interrupt_and_resume():
    release = RemoteGraph("release-approval", url=BASE, api_key=TOKEN)
    config = thread()
    paused = release.invoke({"version": "2.0", "changes": ["x"]}, config)
    assert "__interrupt__" in paused, paused
    state = release.get_state(config)
    assert state.next and state.interrupts, state
    question = state.interrupts[0].value
    assert "Publish these notes?" in str(question), question
    done = release.invoke(Command(resume="approve"), config)
    assert done.get("released") is True and done.get("version") == "2.0", done
    after = release.get_state(config)
    assert after.next == () and not after.interrupts, after


invoke_stream_state_and_history()
as_a_node_of_a_local_graph()
interrupt_and_resume()
print("remote graph ok")
