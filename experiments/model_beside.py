#!/usr/bin/env python3
"""The model beside a scenario experiment: each point's measured aggregate (the median of
its repetitions, their range as its spread) against `sfclab model predict` of the same
flags, the error, and the bottleneck each names; then the median and worst error per
shape and overall, and in how many points the bottlenecks agree.

Usage: model_beside.py DIR   (DIR holds NAME.json from `sfclab scenario --json` and
NAME.model.json from `sfclab model predict --json` for each point). Writes DIR/model.csv
and prints the table.

The measured bottleneck is the last place on the path that dropped at least 0.5 % of
what was sent, summed over its repetitions and chains (whole runs: warm-up, window and
drain): the line (`tester line-rate`), a VNF's core (its input ring full: `ring-full`, at
the tester for a chain's first VNF), a licence (`licence policed-red`), the NIC's capacity
(`shared-capacity`); nothing where no place did (the tester's pace). Past it nothing more
was lost, so it set what came out, as the model's bottleneck is "the last place that
drops". The model's is the one most of its streams name at the offered load.
"""

import csv
import glob
import json
import os
import statistics
import sys
from collections import Counter


def cause_of(place):
    """A drop's place as (position on the path, limit): a VNF's input ring (the tester's
    `ring-full` is the first VNF's), then its licence, then its sends on the NIC's capacity;
    the line before them all."""
    words = place.split()
    hop = int(words[1]) if words[0] == "hop" and len(words) > 1 and words[1].isdigit() else 0
    if "licence" in place or "policed" in place:
        return (hop, 1), "licence"
    if "shared-capacity" in place or "nic-capacity" in place:
        return (hop, 2), "NIC capacity"
    if "line-rate" in place:
        return (0, 0), "line"
    if "ring-full" in place or "tx-refused" in place:
        # A hop's full ring refused what it sent to the next; the tester's, the first's.
        # Before the tester named its port's causes (2026-12-05), `tx-refused` held a
        # line's refusals too.
        return (hop + 1, 0), "VNF core"
    return None, None


def measured_limit(doc):
    """The last place on the path that dropped at least 0.5 % of what was sent, over the
    repetitions and chains: past it nothing more was lost, so it set what came out (as
    the model names it). `none` where no place did (the tester's pace)."""
    lost = Counter()
    # Whole runs' drops against the windows' frames (a little more than the window).
    sent = sum(run["aggregate"]["window"]["sent"] for run in doc["runs"])
    for run in doc["runs"]:
        for chain in run["chains"]:
            for place, n in chain["drops"].items():
                where, limit = cause_of(place)
                if where is not None:
                    lost[(where, limit)] += n
    binding = [key for key, n in lost.items() if n * 200 >= sent]
    return max(binding)[1] if binding else "none"


def predicted_limit(pred):
    names = {"line": "line", "licence": "licence", "nic_capacity": "NIC capacity", "vnf_core": "VNF core",
             "vnf_cores": "VNF core", "tester": "none", "cable": "cable"}
    kinds = Counter(names.get((s.get("bottleneck") or {}).get("kind"), "none") for s in pred["at_offered"]["streams"])
    return kinds.most_common(1)[0][0] if kinds else "none"


def main():
    out = sys.argv[1]
    rows = []
    for path in sorted(glob.glob(os.path.join(out, "*.model.json"))):
        name = os.path.basename(path)[: -len(".model.json")]
        measured_path = os.path.join(out, name + ".json")
        if not os.path.exists(measured_path):
            continue
        doc = json.load(open(measured_path))
        pred = json.load(open(path))
        m = doc["summary"]["aggregate_mpps"]
        model = pred["at_offered"]["received_pps"] / 1e6
        spread = (m["max"] - m["min"]) / m["median"] if m["median"] else 0.0
        limit = measured_limit(doc)
        rows.append({
            "point": name,
            "shape": doc["shape"],
            "measured_mpps": round(m["median"], 5),
            "spread_pct": round(spread * 100, 1),
            "model_mpps": round(model, 5),
            "error_pct": round((model / m["median"] - 1) * 100, 1) if m["median"] else float("nan"),
            "model_limit": predicted_limit(pred),
            "measured_limit": limit,
        })
    if not rows:
        sys.exit(f"{out}: no point has both NAME.json and NAME.model.json")
    with open(os.path.join(out, "model.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"{'point':34s} {'measured':>9s} {'spread':>7s} {'model':>9s} {'error':>7s}  limit (model / measured)")
    for r in rows:
        same = "" if r["model_limit"] == r["measured_limit"] else "  <- differ"
        print(f"{r['point']:34s} {r['measured_mpps']:9.4f} {r['spread_pct']:6.1f}% {r['model_mpps']:9.4f} "
              f"{r['error_pct']:+6.1f}%  {r['model_limit']} / {r['measured_limit']}{same}")
    groups = [("all", rows)] + [(s, [r for r in rows if r["shape"] == s]) for s in sorted({r["shape"] for r in rows})]
    for label, g in groups:
        errors = [abs(r["error_pct"]) for r in g]
        worst = max(g, key=lambda r: abs(r["error_pct"]))
        agree = sum(r["model_limit"] == r["measured_limit"] for r in g)
        print(f"{label}: {len(g)} points, median |error| {statistics.median(errors):.1f} %, worst "
              f"{abs(worst['error_pct']):.1f} % ({worst['point']}), bottleneck as measured in {agree} of {len(g)}")


if __name__ == "__main__":
    main()
