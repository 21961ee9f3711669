#!/usr/bin/env bash
# GPU check of graft's event and stream bookkeeping around replays: the driver
# facts the launch plans rely on (tests/gpu/driver_facts.cu), every CUDA C++
# trap with BUILD's libgraft, the gated_* traps also with BASE's libgraft (the
# build before the change, to show the traps can fail; "-" skips it), then
# PyTorch losses eager vs graft for CASES.
#   OUT=dir scripts/gpu-gated.sh BUILD BASE [CASES] [BUDGET_S]
B=${1:-.gpu/build}; BASE=${2:-.gpu/base}; CASES=${3:-sidestream,gpt,amp,mlp}; BUDGET=${4:-150}
T=$PWD/$B/tests/gpu/traps; O=${OUT:-/tmp}/gated; mkdir -p $O
export PYTHONUNBUFFERED=1
timeout 60 $B/tests/gpu/driver_facts > $O/driver_facts.txt 2>&1; echo "driver_facts exit $?" >> $O/driver_facts.txt
timeout 480 python3 tests/gpu/check_traps.py --traps $T --libgraft $PWD/$B/src/libgraft.so --timeout 60 \
  --out $O/traps > $O/traps.txt 2>&1
if [ "$BASE" != - ]; then
  GATED=$($T --list | grep '^gated_' | paste -sd,)
  timeout 200 python3 tests/gpu/check_traps.py --traps $T --libgraft $PWD/$BASE/src/libgraft.so --timeout 50 \
    --iters 50 --scenarios $GATED --out $O/traps_base > $O/traps_base.txt 2>&1
fi
timeout $((BUDGET + 30)) python3 tests/gpu/check_losses.py --libgraft $PWD/$B/src/libgraft.so --cases $CASES \
  --steps 300 --budget-s $BUDGET --out $O/check_losses > $O/check_losses.txt 2>&1
echo "=== driver facts ==="; cat $O/driver_facts.txt
echo "=== traps, $B ==="; tail -45 $O/traps.txt
[ "$BASE" != - ] && { echo "=== gated traps, $BASE ==="; tail -12 $O/traps_base.txt; }
echo "=== PyTorch losses, $B ==="; sed -n '/=== RESULT ===/,$p' $O/check_losses.txt
