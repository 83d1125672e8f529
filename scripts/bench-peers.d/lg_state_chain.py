#!/usr/bin/env python3
"""LangGraph's chain over a state holding a list: the peer of `state-chain`.

    lg_state_chain.py --n N [--iters 3]

A chain of N nodes over `{"count": 0, "items": [0, ..., 9999]}`; each node reads the list
(`{"count": state["count"] + len(state["items"])}`), as a TEA node that reads the state
does. Prints one JSON line in the shape of `../shared/peers/langgraph/lg_bench.py`'s
records (`per_node_cpu_us`, `peak_rss_mb`), so `scripts/bench-peers` reads both alike.
"""

from __future__ import annotations

import os
from typing import TypedDict

os.environ["LANGSMITH_TRACING"] = "false"
os.environ["LANGCHAIN_TRACING_V2"] = "false"

from langgraph.graph import END, START, StateGraph  # noqa: E402
from lg_measure import arguments, measure, report  # noqa: E402

ITEMS = 10_000


class ChainState(TypedDict):
    count: int
    items: list


def build(n: int):
    def node(state: ChainState) -> dict:
        return {"count": state["count"] + len(state["items"])}

    g = StateGraph(ChainState)
    previous = START
    for i in range(n):
        g.add_node(f"n{i}", node)
        g.add_edge(previous, f"n{i}")
        previous = f"n{i}"
    g.add_edge(previous, END)
    return g.compile()


def main() -> None:
    args = arguments()
    graph = build(args.n)
    state = {"count": 0, "items": list(range(ITEMS))}
    config = {"recursion_limit": args.n + 10}
    wall, cpu, out = measure(lambda: graph.invoke(state, config), args.iters)
    assert out["count"] == args.n * ITEMS, out["count"]
    report("state_chain", args.n, "node", wall, cpu)

if __name__ == "__main__":
    main()
