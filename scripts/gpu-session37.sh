#!/usr/bin/env bash
# Thirty-seventh session, one call: traps_r13's feed_until_idle (now also a new
# event per round) eager and under graft, with the most rounds a loop took per
# target (stderr, timing, not compared), then the GPU-bound case as a user sees
# it (gpu-wall.sh gemm, eager against graft).
#   OUT=dir scripts/gpu-session37.sh BUILD [ITERS] [WALL_ROUNDS]
B=${1:-.gpu/build}; BA=$(cd "$B" && pwd); ITERS=${2:-400}; WR=${3:-3}
O=${OUT:-/tmp}/s37; rm -rf $O; mkdir -p $O
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for r in 1 2; do
  for v in eager graft; do
    t0=$(date +%s.%N)
    if [ $v = eager ]; then
      $BA/tests/gpu/traps_r13 feed_until_idle --iters $ITERS > $O/feed_$v.$r.out 2> $O/feed_$v.$r.err
    else
      LD_PRELOAD=$BA/src/libgraft.so GRAFT_LOG_LEVEL=warn GRAFT_STATS=$O/feed.$r.stats.json \
        $BA/tests/gpu/traps_r13 feed_until_idle --iters $ITERS > $O/feed_$v.$r.out 2> $O/feed_$v.$r.err
    fi
    echo "$v round $r: $(python3 -c "print('%.2f s' % ($(date +%s.%N) - $t0))"); $(grep -h 'most rounds' $O/feed_$v.$r.err); $(grep -h 'did not end' $O/feed_$v.$r.out | tail -1)"
  done
  cmp -s $O/feed_eager.$r.out $O/feed_graft.$r.out && echo "round $r: EQUAL" || echo "round $r: DIFFERS"
  python3 -c "
import json; r=json.load(open('$O/feed.$r.stats.json'))['replay']
print('graft: %.1f %% through graphs, %d queries answered by graft, %d issued held work for progress' % (
  r['coverage_pct'], r['queries_answered_not_ready'], r.get('queries_issued_for_progress', -1)))"
done
[ "$WR" != 0 ] && OUT=$O scripts/gpu-wall.sh "$B" gemm $WR 800 libgraft.so 2>&1 | tail -8
