#!/usr/bin/env bash
# Final issue-4 measurements, part A: every case's losses eager vs graft (300
# steps), and the MLP benchmarks. Output tarred into $OUT/f1.tgz.
B=${1:-.gpu/build}; L=$B/src/libgraft.so; O=/tmp/f1; mkdir -p $O
timeout 200 python3 tests/gpu/check_losses.py --libgraft $L --steps 300 --budget-s 180 --out $O/check_losses 2>&1 | tail -14
timeout 380 python3 tests/gpu/bench_torch.py --libgraft $L --cases mlp,mlp_item --rounds 5 --steps 150 --warmup 40 \
  --budget-s 330 --workdir $O/bench --out $O/bench_a.json 2>&1 | tail -26
cd /tmp && tar czf $OUT/f1.tgz f1
