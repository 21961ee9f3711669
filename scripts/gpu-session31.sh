#!/usr/bin/env bash
# Thirty-first session.
#   OUT=dir scripts/gpu-session31.sh BUILD traps PROGRAMS [TIMEOUT]
#       driver_facts, then check_traps.py over the named trap programs
#       (gpu-session30.sh traps)
#   OUT=dir scripts/gpu-session31.sh BUILD losses CASES [LLMC]
#       llm.c eager and under graft (gpu-llmc.sh, when LLMC is given), then
#       gpt and mlp under PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (losses
#       bitwise, and the exit report's stream-ordered frees put behind queued
#       launches), then check_losses.py over CASES
B=${1:-.gpu/build}; PART=${2:-traps}; O=${OUT:-/tmp}/s31-$PART; rm -rf $O; mkdir -p $O
BA=$(cd "$B" && pwd)
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
if [ "$PART" = traps ]; then
  $BA/tests/gpu/driver_facts > $O/driver_facts.txt 2>&1; echo "driver_facts exit $?"
  grep -E "mempool|free_async|driver_facts:" $O/driver_facts.txt
  shift 2; OUT=$O exec scripts/gpu-session30.sh "$B" traps "$@"
elif [ "$PART" = losses ]; then
  [ -n "${4:-}" ] && OUT=$O bash scripts/gpu-llmc.sh "$B" "$4" 300 | tail -8
  PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync timeout 150 python3 tests/gpu/check_losses.py --libgraft $BA/src/libgraft.so \
    --cases gpt,mlp --steps 300 --out $O/async > $O/async.log 2>&1; echo "cudaMallocAsync check_losses exit $?"
  sed -n '/=== RESULT ===/,$p' $O/async.log
  for c in gpt mlp; do
    python3 -c "
import json; j=json.load(open('$O/async/$c.graft.stats.json')); r=j['replay']
print('cudaMallocAsync $c: through graphs %.1f %%, replays %d, frees put behind queued launches %s, free' % (r['coverage_pct'],
      r['replays'], j.get('launch_thread', {}).get('frees_queued')), j['ops']['by_class'].get('free'))" 2>/dev/null ||
      echo "cudaMallocAsync $c: no report"
  done
  OUT=$O BUDGET=${BUDGET:-300} scripts/gpu-session27.sh "$B" newcases "$3"
fi
