#!/usr/bin/env bash
# Experiment: storm eager / graft / hand on the legacy stream vs a created stream.
B=${1:-.gpu/build}; S=$B/demo/storm; L=$B/src/libgraft.so; O=${OUT:-/tmp}/streams; mkdir -p $O
for r in 1 2 3; do
  for sync in sync nosync; do
    a=""; [ $sync = nosync ] && a=--nosync
    for st in null new; do
      $S --iters 1500 $a --stream $st --json $O/eager-$st.$sync.$r.json >/dev/null 2>&1
      LD_PRELOAD=$L GRAFT_LOG_LEVEL=warn GRAFT_STATS=$O/stats-$st-$sync-$r.js $S --iters 1500 $a --stream $st --json $O/graft-$st.$sync.$r.json >/dev/null 2>&1
    done
    $S --iters 1500 $a --mode graph --json $O/hand-new.$sync.$r.json >/dev/null 2>&1
  done
done
python3 - $O <<'PY'
import json, glob, statistics, sys, collections
d = collections.defaultdict(list)
for f in glob.glob(sys.argv[1] + "/*.json"):
    name, sync, r, _ = f.split("/")[-1].split(".")
    d[(sync, name)].append(json.load(open(f))["us_per_iter_median"])
for k in sorted(d): print(k, round(statistics.median(d[k]), 1), sorted(round(x) for x in d[k]))
for f in sorted(glob.glob(sys.argv[1] + "/stats-*-1.js")):
    r = json.load(open(f))["replay"]; print(f.split("/")[-1], r["replays"], r["graphs_built"], r["fallbacks"])
PY
