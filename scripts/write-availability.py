#!/usr/bin/env python3
"""What each fault of a fault-test run cost writers (docs/RELIABILITY.md):
for every fault in a history written by `xarchive-faults` (history.ndjson),
the writes (put, delete) that started while it held and how many were
refused (503) or got no answer, and how long after the heal writes were
still refused (the end of the last refused write that started after the heal,
at any domain, before the first accepted one).

  python3 scripts/write-availability.py RUN_DIR/history.ndjson
"""
import json
import statistics
import sys
from collections import defaultdict

ops, faults = [], []
with open(sys.argv[1], encoding="utf-8") as history:
    for line in history:
        event = json.loads(line)
        if event.get("type") == "op" and event.get("kind") in ("put", "delete"):
            ops.append(event)
        elif event.get("type") == "fault":
            faults.append(event)
ops.sort(key=lambda o: o["start_us"])


def refused(op):
    return op["outcome"].get("status") == 503


def unanswered(op):
    return op["outcome"].get("result") not in ("ok", "http")


by_kind = defaultdict(lambda: {"n": 0, "writes": 0, "refused": 0, "unanswered": 0, "after": []})
for fault in faults:
    start, healed = fault["start_us"], fault["healed_us"]
    during = [o for o in ops if start <= o["start_us"] < healed]
    row = by_kind[fault["kind"]]
    row["n"] += 1
    row["writes"] += len(during)
    row["refused"] += sum(map(refused, during))
    row["unanswered"] += sum(map(unanswered, during))
    # Refused after the heal: until the first accepted write that started after it.
    after = [o for o in ops if o["start_us"] >= healed]
    first_ok = next((o for o in after if o["outcome"].get("result") == "ok"), None)
    limit = first_ok["start_us"] if first_ok else float("inf")
    late = [o["end_us"] for o in after if refused(o) and o["start_us"] < limit]
    row["after"].append((max(late) - healed) / 1e6 if late else 0.0)

print(f"{'fault':24} {'count':>5} {'writes':>7} {'refused':>12} {'no answer':>10} "
      f"{'refused after heal, s (median / max)':>38}")
for kind, row in sorted(by_kind.items()):
    share = row["refused"] / row["writes"] if row["writes"] else 0.0
    after = row["after"]
    print(f"{kind:24} {row['n']:>5} {row['writes']:>7} {row['refused']:>6} ({share:4.0%}) "
          f"{row['unanswered']:>10} {statistics.median(after):>24.2f} / {max(after):.2f}")
