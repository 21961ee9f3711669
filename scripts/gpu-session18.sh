#!/usr/bin/env bash
# Eighteenth session, one device call: every CUDA C++ trap (traps and traps_libs)
# and PyTorch losses eager vs graft for CASES. Logs tarred into $OUT/s18.tgz.
#   OUT=dir scripts/gpu-session18.sh BUILD CASES BUDGET_S
B=${1:-.gpu/build}; CASES=${2:-vit,diffusion,gan,expandable,decode}; BUDGET=${3:-240}
L=$PWD/$B/src/libgraft.so; O=/tmp/s18; rm -rf $O; mkdir -p $O
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 300 python3 tests/gpu/check_traps.py --traps $PWD/$B/tests/gpu/traps --traps $PWD/$B/tests/gpu/traps_libs \
  --libgraft $L --timeout 40 --out $O/traps > $O/traps.txt 2>&1
timeout $((BUDGET + 40)) python3 tests/gpu/check_losses.py --libgraft $L --cases $CASES --steps 300 \
  --budget-s $BUDGET --out $O/losses > $O/losses.txt 2>&1
(cd /tmp && tar czf ${OUT:-/tmp}/s18.tgz s18)
echo "=== traps ==="; sed -n '/=== RESULT ===/,$p' $O/traps.txt | grep -v " EQUAL " | head -30
grep -c " EQUAL " $O/traps.txt
echo "=== PyTorch losses ==="; sed -n '/=== RESULT ===/,$p' $O/losses.txt | head -30
