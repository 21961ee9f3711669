#!/usr/bin/env python3
"""Prints median us/iteration per (sync, variant) from storm --json files named
VARIANT.SYNC.ROUND.json in a folder (the GPU experiment scripts' output).
  median_table.py DIR [--hand hand] [--eager eager]"""
import collections
import glob
import json
import statistics
import sys


def main():
    folder = sys.argv[1]
    runs = collections.defaultdict(list)
    for path in glob.glob(folder + "/*.json"):
        variant, sync, _round, _ = path.split("/")[-1].split(".")
        runs[(sync, variant)].append(json.load(open(path))["us_per_iter_median"])
    for sync in ("sync", "nosync"):
        med = {v: statistics.median(x) for (s, v), x in runs.items() if s == sync}
        eager, hand = med.get("eager"), med.get("hand") or med.get("hand-new")
        for variant in sorted(med):
            line = f"{sync:6s} {variant:14s} {med[variant]:8.1f} us/iter  rounds {sorted(round(x) for x in runs[(sync, variant)])}"
            if eager and hand and variant not in ("eager",) and not variant.startswith("hand"):
                share = (eager / med[variant] - 1) / (eager / hand - 1) * 100
                line += f"  hand-share {share:5.1f}%  vs hand {med[variant] / hand:.3f}"
            print(line)


if __name__ == "__main__":
    main()
