#!/usr/bin/env bash
# Experiment: where graft uploads its graphs (a: at build on its capture stream,
# b: at first launch on the launch stream, c: never), interleaved, legacy vs created stream.
B=${1:-.gpu/build}; S=$B/demo/storm; O=${OUT:-/tmp}/upload; mkdir -p $O
for r in 1 2 3; do
  for sync in sync nosync; do
    a=""; [ $sync = nosync ] && a=--nosync
    for st in null new; do
      for v in a b c; do
        LD_PRELOAD=$B/src/libgraft_$v.so GRAFT_LOG_LEVEL=warn $S --iters 1500 $a --stream $st --json $O/graft$v-$st.$sync.$r.json >/dev/null 2>&1
      done
    done
    $S --iters 1500 $a --mode graph --json $O/hand-new.$sync.$r.json >/dev/null 2>&1
  done
done
python3 bench/median_table.py $O
