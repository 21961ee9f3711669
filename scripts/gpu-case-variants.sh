#!/usr/bin/env bash
# Diagnostic: one workload eager and under graft with several GRAFT_* settings,
# ROUNDS interleaved rounds; prints ms/step and each graft run's replay summary.
#   OUT=dir scripts/gpu-case-variants.sh BUILD CASE STEPS ROUNDS "ENV1" "ENV2" ...
# ENVn: space-separated GRAFT_* assignments ("-" for the defaults).
B=${1:-.gpu/build}; C=$2; S=${3:-200}; R=${4:-2}; shift 4
L=$PWD/$B/src/libgraft.so; W=tests/gpu/workloads.py; O=${OUT:-/tmp}/variants; mkdir -p $O
export PYTHONUNBUFFERED=1
for r in $(seq 1 $R); do
  python3 $W $C --steps $S --warmup 50 --losses $O/$C.eager.$r.losses > $O/$C.eager.$r.out 2>&1
  echo "round $r eager: $(grep -o 'ms/step=[0-9.]*' $O/$C.eager.$r.out)"
  v=0
  for e in "$@"; do
    v=$((v + 1)); envs=(); [ "$e" != - ] && envs=($e)
    env "${envs[@]}" LD_PRELOAD=$L GRAFT_STATS=$O/$C.v$v.$r.json GRAFT_LOG_FILE=$O/$C.v$v.$r.log \
      timeout 300 python3 $W $C --steps $S --warmup 50 --losses $O/$C.v$v.$r.losses > $O/$C.v$v.$r.out 2>&1
    eq=$(cmp -s $O/$C.eager.$r.losses $O/$C.v$v.$r.losses && echo EQUAL || echo DIFF)
    echo "round $r [$e]: $(grep -o 'ms/step=[0-9.]*' $O/$C.v$v.$r.out) $eq $(python3 -c "
import json; r = json.load(open('$O/$C.v$v.$r.json'))['replay']
print('cover %.1f%% replays %d graphs %d fallbacks %s' % (r['coverage_pct'], r['replays'], r['graphs_built'], r['fallbacks']))" 2>&1)"
  done
done
