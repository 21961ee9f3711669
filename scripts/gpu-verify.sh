#!/usr/bin/env bash
# GPU correctness check of a build, one device call (< 10 min on an H100):
# driver facts, every CUDA C++ trap, and PyTorch losses eager vs graft for
# every workload (the and the others), bitwise. Logs tarred into
# $OUT/verify.tgz; the result tables print last.
#   OUT=dir scripts/gpu-verify.sh BUILD [CASES] [BUDGET_S]
B=${1:-.gpu/build}; CASES=${2:-$(python3 tests/gpu/case_lists.py all | paste -sd" " -)}; BUDGET=${3:-300}
CASES=$(echo $CASES | tr ' ' ,)
L=$PWD/$B/src/libgraft.so; T="--traps $PWD/$B/tests/gpu/traps --traps $PWD/$B/tests/gpu/traps_libs --traps $PWD/$B/tests/gpu/traps_more"; O=/tmp/verify; rm -rf $O; mkdir -p $O
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 60 $B/tests/gpu/driver_facts > $O/driver_facts.txt 2>&1; echo "driver_facts exit $?" >> $O/driver_facts.txt
timeout 420 python3 tests/gpu/check_traps.py $T --libgraft $L --timeout 40 --out $O/traps > $O/traps.txt 2>&1
timeout $((BUDGET + 40)) python3 tests/gpu/check_losses.py --libgraft $L --cases $CASES --steps 300 \
  --budget-s $BUDGET --out $O/losses > $O/losses.txt 2>&1
(cd /tmp && tar czf ${OUT:-/tmp}/verify.tgz verify)
tail -3 $O/driver_facts.txt
echo "=== traps ==="; grep -E "PASS|FAIL|DIFF|ERROR" $O/traps.txt | tail -5
echo "=== PyTorch losses ==="; sed -n '/=== RESULT ===/,$p' $O/losses.txt | head -20
