#!/usr/bin/env bash
# Eighteenth session, second call: graft's copy kernels. The copy benchmark
# (scripts/gpu-copy-bench.sh), then every trap, with logs in $OUT/s18b.tgz.
#   OUT=dir scripts/gpu-session18b.sh BUILD
B=${1:-.gpu/build}; L=$PWD/$B/src/libgraft.so; O=/tmp/s18b; rm -rf $O; mkdir -p $O
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 150 scripts/gpu-copy-bench.sh $B 3 > $O/copy_bench.txt 2>&1
timeout 330 python3 tests/gpu/check_traps.py --traps $PWD/$B/tests/gpu/traps --traps $PWD/$B/tests/gpu/traps_libs \
  --libgraft $L --timeout 40 --out $O/traps > $O/traps.txt 2>&1
(cd /tmp && tar czf ${OUT:-/tmp}/s18b.tgz s18b)
echo "=== traps ==="; sed -n '/=== RESULT ===/,$p' $O/traps.txt | grep -E "PASS|FAIL|DIFF|malloc_async|realloc|memset|copy_kinds|odd_ops|vmm|batch"
echo "=== copy bench (us per step) ==="; cat $O/copy_bench.txt
