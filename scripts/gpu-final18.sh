#!/usr/bin/env bash
# Eighteenth session, last call (short): every trap, and gpt under
# backend:cudaMallocAsync plus decode with the default allocator, bitwise.
B=${1:-.gpu/build}; L=$PWD/$B/src/libgraft.so; O=/tmp/s18f; rm -rf $O; mkdir -p $O
export PYTHONUNBUFFERED=1
timeout 190 python3 tests/gpu/check_traps.py --traps $PWD/$B/tests/gpu/traps --traps $PWD/$B/tests/gpu/traps_libs \
  --libgraft $L --timeout 30 --out $O/traps > $O/traps.txt 2>&1
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync timeout 70 python3 tests/gpu/check_losses.py --libgraft $L --cases gpt \
  --steps 300 --budget-s 60 --out $O/async > $O/async.txt 2>&1
timeout 45 python3 tests/gpu/check_losses.py --libgraft $L --cases decode --steps 300 --budget-s 40 --out $O/default \
  > $O/default.txt 2>&1
(cd /tmp && tar czf ${OUT:-/tmp}/s18f.tgz s18f)
grep -E "PASS|FAIL" $O/traps.txt | tail -1
grep -E "malloc_async|realloc_each|memset_host|copy_kinds|odd_ops|cublas_gemm" $O/traps.txt | grep -v "check_traps:" 
sed -n '/=== RESULT ===/,$p' $O/async.txt | tail -3; sed -n '/=== RESULT ===/,$p' $O/default.txt | tail -3
