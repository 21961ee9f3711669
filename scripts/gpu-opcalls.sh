#!/usr/bin/env bash
# graft's time inside each intercepted launch (bench/op_cost --calls, null
# driver, replay steady state) for two builds side by side, with the program's
# caches and TLB disturbed between launches (--thrash KB --stride B), as an
# interpreter does: what a fast-lane launch costs in place, not in a tight loop.
#   scripts/gpu-opcalls.sh BUILD LIB_A LIB_B [ROUNDS] [ITERS]
B=${1:-.gpu/build}; A=${2:-libgraft_a.so}; Bl=${3:-libgraft.so}; ROUNDS=${4:-3}; ITERS=${5:-100}
cd "$B/bench" || exit 2
for r in $(seq 1 $ROUNDS); do
  for cfg in "0 64" "256 64" "1024 4160"; do
    set -- $cfg
    line="round $r thrash ${1}K stride $2:"
    for lib in "$A" "$Bl"; do
      v=$(LD_LIBRARY_PATH=. LD_PRELOAD=../src/$lib GRAFT_LOG_LEVEL=warn ./op_cost 200 $ITERS --vary --calls \
            --thrash $1 --stride $2 | sed -n 's/calls_ns_per_op=//p')
      line="$line $lib=$v"
    done
    n=$(LD_LIBRARY_PATH=. ./op_cost 200 $ITERS --vary --calls --thrash $1 --stride $2 | sed -n 's/calls_ns_per_op=//p')
    echo "$line no-graft=$n"
  done
done
