#!/usr/bin/env python3
"""LangGraph's fan-out over a list held in the state: the peer of `state-fanout`.

    lg_state_fanout.py --n N [--iters 3]

The graph's input is `{"items": [0, 1, ..., N-1]}`; a router `Send`s one branch per item
of `state["items"]` (LangGraph's idiom for spec 004's `items: "{{ state.urls }}"`), each
branch returns `{"r": item}` into a list channel, and a fan-in node sums them. Prints one
JSON line in the shape of `../shared/peers/langgraph/lg_bench.py`'s records
(`per_branch_cpu_us`, `peak_rss_mb`), so `scripts/bench-peers` reads both alike.
"""

from __future__ import annotations

import operator
import os
from typing import Annotated, TypedDict

os.environ["LANGSMITH_TRACING"] = "false"
os.environ["LANGCHAIN_TRACING_V2"] = "false"

from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import Send  # noqa: E402
from lg_measure import arguments, measure, report  # noqa: E402


class FanState(TypedDict):
    items: list
    results: Annotated[list, operator.add]
    total: int


class Branch(TypedDict):
    item: int
    index: int


def build():
    def split(state: FanState) -> dict:
        return {}

    def route(state: FanState) -> list[Send]:
        return [Send("branch", {"item": x, "index": i}) for i, x in enumerate(state["items"])]

    def branch(b: Branch) -> dict:
        return {"results": [{"r": b["item"]}]}

    def join(state: FanState) -> dict:
        return {"total": sum(r["r"] for r in state["results"])}

    g = StateGraph(FanState)
    g.add_node("split", split)
    g.add_node("branch", branch)
    g.add_node("join", join)
    g.add_edge(START, "split")
    g.add_conditional_edges("split", route, ["branch"])
    g.add_edge("branch", "join")
    g.add_edge("join", END)
    return g.compile()


def main() -> None:
    args = arguments()
    graph = build()
    state = {"items": list(range(args.n)), "results": []}
    wall, cpu, out = measure(lambda: graph.invoke(state), args.iters)
    assert out["total"] == sum(range(args.n)), out["total"]
    report("state_fanout", args.n, "branch", wall, cpu)

if __name__ == "__main__":
    main()
