#!/usr/bin/env bash
# Final GPU measurements, part A (one device call, < 10 min):
#   the demo benchmark (issue 3) and pass-through overhead (issue 2), the
#   no-argument scripts/graft demo, graft's CPU cost per op against a null
#   driver, the cost of a graph node update, interception counts vs the
#   profiler (issue 2), and every PyTorch case's losses eager vs graft (issue 4).
# Output tarred into $OUT/fa.tgz; the tables print last.
B=${1:-.gpu/build}; L=$PWD/$B/src/libgraft.so; O=/tmp/fa; mkdir -p $O
export PYTHONUNBUFFERED=1
timeout 150 python3 bench/storm_bench.py --storm $B/demo/storm --libgraft $L --rounds 8 --iters 1000 --budget-s 140 \
  --workdir $O/storm --out $O/storm_bench.json > $O/storm_bench.txt 2>&1
GRAFT_BUILD_DIR=$PWD/$B timeout 60 scripts/graft > $O/graft_demo.txt 2>&1
(cd $B/bench && for i in 1 2 3; do for m in none passthrough graph; do
  if [ $m = none ]; then r=$(LD_LIBRARY_PATH=. ./op_cost 200 5000); else r=$(LD_LIBRARY_PATH=. LD_PRELOAD=$L GRAFT_MODE=$m GRAFT_LOG_LEVEL=warn ./op_cost 200 5000); fi
  echo "op_cost $m $r"; done; done; ./patch_cost) > $O/op_cost.txt 2>&1
timeout 100 python3 tests/gpu/profile_count.py --libgraft $L --storm $B/demo/storm --out $O/profile_count > $O/profile_count.txt 2>&1
timeout 260 python3 tests/gpu/check_losses.py --libgraft $L --steps 300 --budget-s 240 --out $O/check_losses > $O/check_losses.txt 2>&1
(cd /tmp && tar czf $OUT/fa.tgz fa)
tail -3 $O/op_cost.txt; cat $O/op_cost.txt | grep op_cost
tail -8 $O/graft_demo.txt; tail -14 $O/profile_count.txt; tail -14 $O/check_losses.txt
sed -n '/=== RESULT ===/,$p' $O/storm_bench.txt
