"""The benchmark's five-step flow as a LangGraph graph, for `langgraph dev`.

Each node stands for one call to an offline scripted model (Weft's side uses
`provider: scripted`): it appends a fixed reply, so both servers do the same work per
step and the comparison measures the servers, not a model.
"""
from typing import TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    n: int
    replies: list


def scripted(name):
    async def node(state: State):
        return {"replies": (state.get("replies") or []) + [f"{name} {state.get('n')}: ok"]}

    return node


builder = StateGraph(State)
names = ["a", "b", "c", "d", "e"]
for name in names:
    builder.add_node(name, scripted(name))
builder.add_edge(START, "a")
for first, second in zip(names, names[1:]):
    builder.add_edge(first, second)
builder.add_edge("e", END)
graph = builder.compile()
