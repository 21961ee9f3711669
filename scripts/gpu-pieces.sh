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
python3 bench/median_table.py $O
