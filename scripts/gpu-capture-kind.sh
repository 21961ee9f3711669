#!/usr/bin/env bash
# Experiment (issue 3 follow-up): graft's graphs run ~36 us/iteration slower on a
# program-created blocking stream than on the legacy stream. Does the kind of
# graft's capture stream matter? libgraft.so captures on non-blocking streams;
# libgraft_capblock.so (same commit, one line changed: cuStreamCreate flags 0)
# on blocking ones. Interleaved storm runs, 3 rounds, us/iteration.
B=${1:-.gpu/build}; O=${OUT:-/tmp}/capkind; mkdir -p $O
BA=$(cd "$B" && pwd) || exit 2   # absolute, whatever the caller passed
show() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('%-40s %8.1f' % (sys.argv[2], d['us_per_iter_median']))" "$@"; }
for r in 1 2 3; do
  for sync in --nosync --sync; do
    $B/demo/storm $sync --mode graph --iters 1000 --json $O/j >/dev/null; show $O/j "r$r $sync hand(new)"
    for lib in libgraft libgraft_capblock; do
      for st in null new; do
        LD_PRELOAD=$BA/src/$lib.so GRAFT_LOG_LEVEL=warn $B/demo/storm $sync --stream $st --iters 1000 --json $O/j >/dev/null
        show $O/j "r$r $sync $lib $st"
      done
    done
  done
done
