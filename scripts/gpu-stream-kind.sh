#!/usr/bin/env bash
# Why is graft slower on a program-created (blocking) stream than on the legacy
# stream? Interleaved storm runs without sync: hand graph; graft on the legacy
# stream; graft on a created stream with automatic pieces and with one piece.
B=${1:-.gpu/build}; L=$PWD/$B/src/libgraft.so; O=/tmp/sk; mkdir -p $O
show() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('%-34s %8.1f' % (sys.argv[2], d['us_per_iter_median']))" "$@"; }
for r in 1 2 3; do
  for sync in --nosync --sync; do
    $B/demo/storm $sync --mode graph --iters 1000 --json $O/j >/dev/null; show $O/j "r$r $sync hand"
    LD_PRELOAD=$L GRAFT_LOG_LEVEL=warn $B/demo/storm $sync --iters 1000 --json $O/j >/dev/null; show $O/j "r$r $sync graft legacy"
    LD_PRELOAD=$L GRAFT_LOG_LEVEL=warn $B/demo/storm $sync --stream new --iters 1000 --json $O/j >/dev/null; show $O/j "r$r $sync graft new"
    LD_PRELOAD=$L GRAFT_LOG_LEVEL=warn GRAFT_SEGMENT_OPS=1024 $B/demo/storm $sync --stream new --iters 1000 --json $O/j >/dev/null; show $O/j "r$r $sync graft new 1-piece"
    LD_PRELOAD=$L GRAFT_LOG_LEVEL=warn GRAFT_SEGMENT_OPS=1024 $B/demo/storm $sync --iters 1000 --json $O/j >/dev/null; show $O/j "r$r $sync graft legacy 1-piece"
  done
done
