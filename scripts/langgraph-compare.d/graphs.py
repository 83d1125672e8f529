"""The test flows of crates/weft-cli/tests/langgraph as LangGraph graphs, for
scripts/langgraph-compare: the same names, nodes and answers, so the two servers'
streams can be compared part by part."""

import time
from typing import Annotated, TypedDict

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt


class Chat(TypedDict):
    messages: Annotated[list, add_messages]


def answer(state: Chat):
    last = state["messages"][-1].content
    text = "It is sunny." if "weather" in last else "Hello from Weft."
    model = GenericFakeChatModel(messages=iter([AIMessage(content=text)]))
    return {"messages": [model.invoke(state["messages"])]}


chat = StateGraph(Chat).add_node("answer", answer).add_edge(START, "answer").add_edge("answer", END).compile()


class Release(TypedDict, total=False):
    version: str
    changes: list
    draft: str
    released: bool
    notes: str


def draft(state: Release):
    return {"draft": "Weft 1.4.0 brings a faster journal and graph joins."}


def review(state: Release):
    decision = interrupt(f"Publish these notes? {state['draft']}")
    return {"released": decision == "approve", "notes": state["draft"]}


release = (
    StateGraph(Release)
    .add_node("draft", draft)
    .add_node("review", review)
    .add_edge(START, "draft")
    .add_edge("draft", "review")
    .add_edge("review", END)
    .compile()
)


class Slow(TypedDict, total=False):
    one: str
    two: str
    three: str


def step(name):
    def run(state: Slow):
        time.sleep(0.3)
        return {name: "done"}

    return run


slow = StateGraph(Slow)
for name in ["one", "two", "three"]:
    slow.add_node(name, step(name))
slow = slow.add_edge(START, "one").add_edge("one", "two").add_edge("two", "three").add_edge("three", END).compile()
