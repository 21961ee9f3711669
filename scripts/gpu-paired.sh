#!/usr/bin/env bash
# Many short interleaved rounds, for effects smaller than the lent machines'
# noise: storm eager vs pass-through (issue 2's overhead; 30 rounds) and
# eager/graft/floor on mlp_item and gpt (issue 4; 8 rounds). Tables print last;
# raw output in $OUT/paired.tgz.
B=${1:-.gpu/build}; L=$PWD/$B/src/libgraft.so; O=/tmp/paired; mkdir -p $O
export PYTHONUNBUFFERED=1
timeout 150 python3 bench/storm_bench.py --storm $B/demo/storm --libgraft $L --variants eager,passthrough \
  --rounds 30 --iters 300 --warmup 50 --budget-s 130 --workdir $O/storm --out $O/storm.json > $O/storm.txt 2>&1
timeout 380 python3 tests/gpu/bench_torch.py --libgraft $L --cases mlp_item,gpt --modes eager,graft,floor \
  --rounds 8 --steps 150 --warmup 40 --budget-s 340 --workdir $O/bench --out $O/bench.json > $O/bench.txt 2>&1
(cd /tmp && tar czf $OUT/paired.tgz paired)
sed -n '/=== RESULT ===/,$p' $O/storm.txt $O/bench.txt
