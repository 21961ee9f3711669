#!/usr/bin/env bash
# Experiment: storm under graft with different piece sizes (GRAFT_SEGMENT_OPS),
# interleaved with eager and the hand graph, sync and no-sync; prints medians.
B=${1:-.gpu/build}; S=$B/demo/storm; L=$B/src/libgraft.so; O=${OUT:-/tmp}/pieces; mkdir -p $O
PIN=${PIN:-taskset -c 3}
for r in 1 2 3; do
  for sync in sync nosync; do
    a=""; [ $sync = nosync ] && a=--nosync
    $PIN $S --iters 1500 $a --json $O/eager.$sync.$r.json >/dev/null 2>&1
    $PIN $S --iters 1500 $a --mode graph --json $O/hand.$sync.$r.json >/dev/null 2>&1
    for p in 0 8 16 32 64 128 1024; do
      LD_PRELOAD=$L GRAFT_SEGMENT_OPS=$p GRAFT_LOG_LEVEL=warn $PIN $S --iters 1500 $a --json $O/graft$p.$sync.$r.json >/dev/null 2>&1
    done
  done
done
python3 - $O <<'PY'
import json, glob, statistics, sys, collections
d = collections.defaultdict(list)
for f in glob.glob(sys.argv[1] + "/*.json"):
    name, sync, r, _ = f.split("/")[-1].split(".")
    d[(sync, name)].append(json.load(open(f))["us_per_iter_median"])
for sync in ("sync", "nosync"):
    e = statistics.median(d[(sync, "eager")]); h = statistics.median(d[(sync, "hand")])
    print(f"{sync}: eager {e:.1f} hand {h:.1f}  rounds eager {sorted(round(x) for x in d[(sync,'eager')])}")
    for p in (0, 8, 16, 32, 64, 128, 1024):
        g = statistics.median(d[(sync, f"graft{p}")])
        print(f"  GRAFT_SEGMENT_OPS={p:5d}: {g:7.1f} us/iter  hand-share {(e/g-1)/(e/h-1)*100:5.1f}%  vs hand {g/h:.3f}")
PY
