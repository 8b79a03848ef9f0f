#!/usr/bin/env python3
"""Summarises `ncu --csv --page details` output (scripts/gpu-tests.sh, stage
ncu): one row per kernel and launch shape with its launches, mean time, DRAM
bytes read per second, DRAM and SM throughput (% of peak), achieved and
theoretical occupancy and registers per thread; then each kernel's share of
the window's kernel time.

    python3 scripts/ncu-summary.py ncu.csv
"""
import csv
import re
import sys
from collections import defaultdict

WANTED = {
    "Duration": "duration",
    "gpu__time_duration.sum": "duration",
    "dram__bytes_read.sum": "dram_read",
    "DRAM Throughput": "dram_pct",
    "Compute (SM) Throughput": "sm_pct",
    "Achieved Occupancy": "occupancy",
    "Theoretical Occupancy": "theoretical",
    "Registers Per Thread": "registers",
}
TO_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6,
         "second": 1e9, "s": 1e9}
TO_BYTES = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6,
            "GB": 1e9}


def number(text):
    return float(text.replace(",", ""))


def main(path):
    launches = defaultdict(dict)  # (id) -> metrics
    shape = {}
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]
    for row in csv.DictReader(lines):
        metric = row.get("Metric Name", "")
        key = WANTED.get(metric)
        if key is None and "issue_stalled_" in metric:
            key = "stall " + metric.split("issue_stalled_")[1].split("_per_")[0]
        if key is None:
            continue
        try:
            value = number(row["Metric Value"])
        except ValueError:
            continue
        unit = row.get("Metric Unit", "")
        if key == "duration":
            value *= TO_NS.get(unit, 1.0)
        elif key == "dram_read":
            value *= TO_BYTES.get(unit, 1.0)
        name = re.sub(r"\(.*", "", row["Kernel Name"])
        launches[row["ID"]][key] = value
        shape[row["ID"]] = (name, row.get("Grid Size", ""), row.get("Block Size", ""))
    groups = defaultdict(list)
    for lid, metrics in launches.items():
        groups[shape[lid]].append(metrics)
    total = sum(m.get("duration", 0.0) for ms in groups.values() for m in ms)
    print(f"{'kernel':34} {'grid':>16} {'block':>12} {'n':>4} {'us':>8} {'GB/s':>7} "
          f"{'dram%':>6} {'sm%':>5} {'occ%':>5} {'theo%':>5} {'regs':>4} {'share':>6}")
    rows = []
    for (name, grid, block), ms in groups.items():
        mean = lambda k: sum(m.get(k, 0.0) for m in ms) / len(ms)
        dur = mean("duration")
        gbs = mean("dram_read") / dur if dur else 0.0
        share = sum(m.get("duration", 0.0) for m in ms) / total if total else 0.0
        rows.append((share, name, grid, block, len(ms), dur / 1e3, gbs, mean("dram_pct"),
                     mean("sm_pct"), mean("occupancy"), mean("theoretical"), mean("registers")))
    for share, name, grid, block, n, us, gbs, dram, sm, occ, theo, regs in sorted(rows, reverse=True):
        print(f"{name[:34]:34} {grid:>16} {block:>12} {n:4d} {us:8.2f} {gbs:7.0f} {dram:6.1f} "
              f"{sm:5.1f} {occ:5.1f} {theo:5.1f} {regs:4.0f} {100 * share:5.1f}%")
    print(f"kernel time in the window: {total / 1e3:.1f} us over {len(launches)} launches")
    # Where the warps wait (cycles per issued instruction), the largest first.
    stalls = []
    for (name, grid, block), ms in groups.items():
        keys = sorted({k for m in ms for k in m if k.startswith("stall ")})
        if not keys:
            continue
        mean = {k: sum(m.get(k, 0.0) for m in ms) / len(ms) for k in keys}
        top = sorted(mean.items(), key=lambda kv: -kv[1])[:4]
        share = sum(m.get("duration", 0.0) for m in ms) / total if total else 0.0
        stalls.append((share, name, grid, ", ".join(f"{k[6:]} {v:.1f}" for k, v in top)))
    if stalls:
        print("\nwarp stalls (cycles per issued instruction), by share of time:")
        for share, name, grid, text in sorted(stalls, reverse=True):
            print(f"{name[:34]:34} {grid:>16}  {text}")


if __name__ == "__main__":
    main(sys.argv[1])
