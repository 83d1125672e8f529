"""Compares two recordings of record.py (LangGraph's `langgraph dev`, then Weft) and
prints, per call, the event sequences and the fields one side has and the other not.

    python compare.py LANGGRAPH.json WEFT.json
"""

import json
import sys

peer, weft = (json.load(open(p)) for p in sys.argv[1:3])


def fields(x, at=""):
    """Every field path of `x` (lists by their first item)."""
    if isinstance(x, dict):
        out = set()
        for k, v in x.items():
            out.add(f"{at}.{k}")
            out |= fields(v, f"{at}.{k}")
        return out
    if isinstance(x, list) and x:
        return fields(x[0], f"{at}[]")
    return set()


def events(parts):
    return [p["event"] for p in parts]


for call in peer:
    a, b = peer[call], weft.get(call)
    print(f"## {call}")
    if isinstance(a, list) and a and isinstance(a[0], dict) and "event" in a[0]:
        print("  langgraph:", " ".join(events(a)))
        print("  weft:     ", " ".join(events(b or [])))
        by_event = {}
        for side, parts in (("langgraph", a), ("weft", b or [])):
            for p in parts:
                by_event.setdefault(p["event"], {}).setdefault(side, set()).update(fields(p["data"]))
        for event, sides in by_event.items():
            only_peer = sorted(sides.get("langgraph", set()) - sides.get("weft", set()))
            only_weft = sorted(sides.get("weft", set()) - sides.get("langgraph", set()))
            if only_peer or only_weft:
                print(f"  {event}: langgraph only {only_peer[:12]}; weft only {only_weft[:12]}")
        continue
    if call == "raw_stream":
        print("  langgraph ids:", [l for l in a["lines"] if l.startswith("id:")][:3], "headers:", sorted(a["headers"]))
        print("  weft ids:     ", [l for l in b["lines"] if l.startswith("id:")][:3], "headers:", sorted(b["headers"]))
        continue
    fa, fb = fields(a), fields(b)
    status = (a.get("status"), b.get("status")) if isinstance(a, dict) and "status" in a and isinstance(a["status"], int) else None
    if status:
        print(f"  status: langgraph {status[0]}, weft {status[1]}")
    print(f"  langgraph only: {sorted(fa - fb)[:15]}")
    print(f"  weft only:      {sorted(fb - fa)[:15]}")
