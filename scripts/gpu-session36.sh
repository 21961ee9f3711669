#!/usr/bin/env bash
# Thirty-sixth session: the change (queries of a loop that feeds what it waits
# for reach the driver) and HEAD on the GPU, in one call.
#   OUT=dir scripts/gpu-session36.sh BUILD [TRAP_PROGRAMS|none] [CASES|none]
# driver_facts and check_traps.py over the trap programs (gpu-session31.sh
# traps), traps_r13's feed_until_idle eager and under graft, then
# check_losses.py over CASES with each case's exit-report query counts.
B=${1:-.gpu/build}; BA=$(cd "$B" && pwd); O=${OUT:-/tmp}/s36; rm -rf $O; mkdir -p $O
PROGRAMS=${2:-traps_r13}
CASES=${3:-gpt,mlp_item,sidestream,amp,lastbatch,partgraph,profwin}
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
[ "$PROGRAMS" != none ] && { OUT=$O scripts/gpu-session31.sh "$B" traps "$PROGRAMS" 60 > $O/traps.txt 2>&1; echo "traps exit $?"; }
start=$(date +%s.%N)
$BA/tests/gpu/traps_r13 feed_until_idle > $O/feed_eager.txt 2>&1; t1=$(date +%s.%N)
LD_PRELOAD=$BA/src/libgraft.so GRAFT_LOG_LEVEL=warn GRAFT_STATS=$O/feed.stats.json \
  $BA/tests/gpu/traps_r13 feed_until_idle > $O/feed_graft.txt 2>&1; t2=$(date +%s.%N)
feed=$(cmp -s $O/feed_eager.txt $O/feed_graft.txt && echo EQUAL || echo DIFFERS)
[ "$CASES" != none ] && { timeout 300 python3 tests/gpu/check_losses.py --libgraft $BA/src/libgraft.so --cases "$CASES" \
  --steps 300 --out $O/losses --timeout 120 > $O/losses.txt 2>&1; echo "check_losses exit $?"; }
tar czf $OUT/s36.tgz -C $(dirname $O) $(basename $O) 2>/dev/null
tail -4 $O/traps.txt 2>/dev/null
sed -n '/=== RESULT ===/,$p' $O/losses.txt 2>/dev/null
echo "| case | through graphs | queries answered by graft | queries issuing held work for progress |"
echo "|---|---|---|---|"
for f in $O/losses/*.graft.stats.json $O/feed.stats.json; do
  [ -f "$f" ] && python3 -c "
import json, os; r=json.load(open('$f'))['replay']
print('| %s | %.1f %% | %d | %d |' % (os.path.basename('$f').split('.')[0], r['coverage_pct'],
      r['queries_answered_not_ready'], r.get('queries_issued_for_progress', -1)))"
done
echo "feed_until_idle: $feed | eager $(tail -1 $O/feed_eager.txt) in $(python3 -c "print(round($t1-$start,2))") s | graft $(tail -1 $O/feed_graft.txt) in $(python3 -c "print(round($t2-$t1,2))") s"
grep "loops that did not end" $O/feed_eager.txt | tail -1 | sed 's/^/eager /'; grep "loops that did not end" $O/feed_graft.txt | tail -1 | sed 's/^/graft /'
