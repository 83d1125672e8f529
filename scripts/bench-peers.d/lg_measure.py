"""What the peer scripts of `scripts/bench-peers` share: timing a graph's runs and
printing one record in the shape of `../shared/peers/langgraph/lg_bench.py`'s."""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import time
from importlib import metadata


def arguments() -> argparse.Namespace:
    """`--n N` (the workload's size) and `--iters K` (timed runs)."""
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--iters", type=int, default=3)
    return p.parse_args()


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measure(invoke, iters: int):
    """Runs `invoke` once to warm up (lazy initialisation, as lg_bench.py's
    first_wall_s), then `iters` times: the medians of wall and CPU seconds, and the last
    output."""
    invoke()
    walls, cpus = [], []
    out = None
    for _ in range(iters):
        c0, t0 = cpu_s(), time.perf_counter()
        out = invoke()
        walls.append(time.perf_counter() - t0)
        cpus.append(cpu_s() - c0)
    return statistics.median(walls), statistics.median(cpus), out


def report(workload: str, n: int, unit: str, wall_s: float, cpu_s_: float) -> None:
    """Prints the record `scripts/bench-peers` reads (`per_<unit>_cpu_us`, `peak_rss_mb`)."""
    print(json.dumps({
        "engine": "langgraph",
        "version": metadata.version("langgraph"),
        "workload": workload,
        "n": n,
        "wall_s": wall_s,
        f"per_{unit}_cpu_us": cpu_s_ / n * 1e6,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }))
