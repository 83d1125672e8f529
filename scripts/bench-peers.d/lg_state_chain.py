#!/usr/bin/env python3
"""LangGraph's chain over a state holding a list: the peer of `state-chain`.

    lg_state_chain.py --n N [--iters 3]

A chain of N nodes over `{"count": 0, "items": [0, ..., 9999]}`; each node reads the list
(`{"count": state["count"] + len(state["items"])}`), as a TEA node that reads the state
does. Prints one JSON line in the shape of `../shared/peers/langgraph/lg_bench.py`'s
records (`per_node_cpu_us`, `peak_rss_mb`), so `scripts/bench-peers` reads both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import time
from importlib import metadata
from typing import TypedDict

os.environ["LANGSMITH_TRACING"] = "false"
os.environ["LANGCHAIN_TRACING_V2"] = "false"

from langgraph.graph import END, START, StateGraph  # noqa: E402

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


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--iters", type=int, default=3)
    args = p.parse_args()
    graph = build(args.n)
    state = {"count": 0, "items": list(range(ITEMS))}
    config = {"recursion_limit": args.n + 10}
    graph.invoke(state, config)  # lazy initialisation, as lg_bench.py's first_wall_s
    walls, cpus = [], []
    for _ in range(args.iters):
        c0, t0 = cpu_s(), time.perf_counter()
        out = graph.invoke(state, config)
        walls.append(time.perf_counter() - t0)
        cpus.append(cpu_s() - c0)
    assert out["count"] == args.n * ITEMS, out["count"]
    print(json.dumps({
        "engine": "langgraph",
        "version": metadata.version("langgraph"),
        "workload": "state_chain",
        "n": args.n,
        "wall_s": statistics.median(walls),
        "per_node_cpu_us": statistics.median(cpus) / args.n * 1e6,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }))


if __name__ == "__main__":
    main()
