#!/usr/bin/env bash
# Final GPU measurements, part B or C (one device call each, < 10 min): the
# PyTorch benchmark (issue 4) for the cases given (default mlp,mlp_item; part C:
# gpt,gemm). Output tarred into $OUT/fb.tgz; the table prints last.
B=${1:-.gpu/build}; CASES=${2:-mlp,mlp_item}; L=$PWD/$B/src/libgraft.so; O=/tmp/fb; mkdir -p $O
export PYTHONUNBUFFERED=1
timeout 575 python3 tests/gpu/bench_torch.py --libgraft $L --cases $CASES --rounds 5 --steps 150 --warmup 40 \
  --budget-s 470 --workdir $O/bench --out $O/bench.json > $O/bench.txt 2>&1
(cd /tmp && tar czf $OUT/fb.tgz fb)
sed -n '/=== RESULT ===/,$p' $O/bench.txt
