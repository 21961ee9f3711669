#!/usr/bin/env bash
# Thirty-eighth session, one call: issue 4's cases as scripts of their own
# (tests/gpu/training/).
#   1. each case's script (eager, STEPS steps) against the single-file
#      workloads.py it came from (OLD, eager): the losses must be bitwise equal,
#      so the split changed no loop;
#   2. check_losses.py on the issue's cases (which now runs each case's own
#      script, as the meson tests gpu_mlp ... gpu_gemm do), 300 steps;
#   3. bench_interleaved.py on mlp through its script (a short run: the
#      --interleave path works from a case script).
#   OUT=dir scripts/gpu-session38.sh BUILD OLD_WORKLOADS [STEPS]
B=${1:-.gpu/build}; BA=$(cd "$B" && pwd); OLD=${2:-.gpu/oldw/workloads.py}; STEPS=${3:-60}
O=${OUT:-/tmp}/s38; rm -rf $O; mkdir -p $O
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
CASES=$(python3 tests/gpu/case_lists.py issue | tr '\n' ' ')
declare -A SPLIT
for c in $CASES; do
  python3 $OLD $c --steps $STEPS --losses $O/$c.old.losses > $O/$c.old.out 2>&1
  python3 tests/gpu/training/$c.py --steps $STEPS --losses $O/$c.new.losses > $O/$c.new.out 2>&1
  if cmp -s $O/$c.old.losses $O/$c.new.losses && [ -s $O/$c.new.losses ]; then SPLIT[$c]=EQUAL; else SPLIT[$c]=DIFFERS; tail -3 $O/$c.new.out; fi
done
timeout 420 python3 tests/gpu/check_losses.py --libgraft $BA/src/libgraft.so --steps 300 \
  --cases $(echo $CASES | tr ' ' ',') --out $O/cl > $O/check_losses.out 2>&1
echo "check_losses rc=$?"
sed -n '/=== RESULT ===/,$p' $O/check_losses.out
python3 -c "
import json; r=json.load(open('$O/cl/check_losses.json'))['results']
for x in r[:2]: print('ran:', ' '.join(x['graft']['cmd'][1:3]), '...')"
timeout 120 python3 tests/gpu/bench_interleaved.py --libgraft $BA/src/libgraft.so --cases mlp --runs 1 \
  --cycles 8 --block 5 > $O/bench.out 2>&1
echo "bench_interleaved rc=$?"; tail -6 $O/bench.out
echo
echo "| case | script vs single-file workloads.py, eager, $STEPS steps |"
echo "|---|---|"
for c in $CASES; do echo "| $c | ${SPLIT[$c]} |"; done
