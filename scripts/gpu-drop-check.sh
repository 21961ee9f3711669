#!/usr/bin/env bash
# Segments that mismatch more often than they replay are dropped: losses of the
# workloads with mismatches (eager vs graft, bitwise), then the LSTM as a user
# sees it, eager and under two builds (scripts/gpu-wall.sh).
#   OUT=dir scripts/gpu-drop-check.sh BUILD LIB_BEFORE LIB_AFTER [CASES] [ROUNDS]
B=${1:-.gpu/build}; A=${2:-libgraft_final.so}; Bl=${3:-libgraft.so}; CASES=${4:-lstm,lastbatch,cnn,amp,sidestream,accum}; R=${5:-3}
BA=$(cd "$B" && pwd) || exit 2
O=/tmp/drop; rm -rf $O; mkdir -p $O
export PYTHONUNBUFFERED=1
timeout 250 python3 tests/gpu/check_losses.py --libgraft $BA/src/$Bl --cases $CASES --steps 300 --timeout 100 \
  --budget-s 200 --out $O/losses > $O/losses.txt 2>&1
OUT=$O timeout 150 scripts/gpu-wall.sh $B lstm $R 300 $A $Bl > $O/wall.txt 2>&1
(cd /tmp && tar czf ${OUT:-/tmp}/drop.tgz drop)
sed -n '/=== RESULT ===/,$p' $O/losses.txt
grep -h "graphs dropped\|dropped (its" $O/losses/*.graftlog.txt | cut -c1-200 | head -8
cat $O/wall.txt
