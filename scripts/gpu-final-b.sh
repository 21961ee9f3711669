#!/usr/bin/env bash
# Final measurements, part B: GPT and GEMM benchmarks (issue 4), interception
# counts vs the profiler (issue 2), the demo benchmark (issue 3), graft's CPU
# cost per op against a null driver. Output tarred into $OUT/f2.tgz.
B=${1:-.gpu/build}; L=$B/src/libgraft.so; O=/tmp/f2; mkdir -p $O
timeout 340 python3 tests/gpu/bench_torch.py --libgraft $L --cases gpt,gemm --rounds 5 --steps 150 --warmup 40 \
  --budget-s 300 --workdir $O/bench --out $O/bench_b.json 2>&1 | tail -20
timeout 120 python3 tests/gpu/profile_count.py --libgraft $L --storm $B/demo/storm --out $O/profile_count 2>&1 | tail -15
timeout 150 python3 bench/storm_bench.py --storm $B/demo/storm --libgraft $L --rounds 7 --iters 1000 --budget-s 120 \
  --workdir $O/storm --out $O/storm_bench.json 2>&1 | tail -22
(cd $B/bench && for i in 1 2 3; do for m in none passthrough graph; do
  if [ $m = none ]; then r=$(LD_LIBRARY_PATH=. ./op_cost 200 5000); else r=$(LD_LIBRARY_PATH=. LD_PRELOAD=$PWD/../src/libgraft.so GRAFT_MODE=$m GRAFT_LOG_LEVEL=warn ./op_cost 200 5000); fi
  echo "op_cost $m $r"; done; done; ./patch_cost)
cd /tmp && tar czf $OUT/f2.tgz f2
