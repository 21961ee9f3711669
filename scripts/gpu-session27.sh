#!/usr/bin/env bash
# Twenty-seventh session.
#   OUT=dir scripts/gpu-session27.sh BUILD verify [CASES]
#       driver_facts (with the observation of a CUkernel handle given to
#       cuFunc{Get,Set}Attribute), then check_losses.py over CASES (300 steps,
#       losses bitwise, coverage), with each case's graphs built, replays and
#       fallback reasons from graft's report
#   OUT=dir scripts/gpu-session27.sh BUILD traps [PROGRAMS]   as gpu-session25.sh
#   OUT=dir scripts/gpu-session27.sh BUILD newcases CASES      check_losses.py over new cases
#   OUT=dir [LIBS="libgraft.so libgraft_fix.so"] scripts/gpu-session27.sh BUILD trapdiff PROGRAM SCENARIO
#       one trap scenario (300 iterations) eagerly and under each library: the
#       lines that differ from eager's, and each run's fallbacks
# Tables last.
B=${1:-.gpu/build}; PART=${2:-verify}; O=${OUT:-/tmp}/s27-$PART; rm -rf $O; mkdir -p $O
BA=$(cd "$B" && pwd)
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [ "$PART" = traps ]; then
  OUT=${OUT:-/tmp} exec scripts/gpu-session25.sh "$B" traps "$3"
elif [ "$PART" = trapdiff ]; then
  P=$BA/tests/gpu/$3; S=$4
  timeout 60 $P $S --iters 300 > $O/eager.txt 2>&1; echo "eager exit $?"
  for l in ${LIBS:-libgraft.so}; do
    LD_PRELOAD=$BA/src/$l GRAFT_MODE=graph GRAFT_LOG_LEVEL=debug GRAFT_LOG_FILE=$O/$l.log GRAFT_STATS=$O/$l.stats.json \
      timeout 60 $P $S --iters 300 > $O/$l.txt 2>&1; echo "$l exit $?"
    echo "--- $l: lines differing from eager (eager < > graft)"; diff $O/eager.txt $O/$l.txt | head -12
    python3 -c "import json; r=json.load(open('$O/$l.stats.json'))['replay']; print('coverage', r['coverage_pct'], 'graphs', r['graphs_built'], 'fallbacks', r['fallbacks'])"
    grep -i 'cluster attribute\|attribute [0-9]* set' $O/$l.log | sed 's/0x[0-9a-f]*/X/g' | sort | uniq -c | head -5
  done
elif [ "$PART" = verify ] || [ "$PART" = newcases ]; then
  [ "$PART" = verify ] && { $BA/tests/gpu/driver_facts | tail -4; echo "driver_facts exit $?"; }
  CASES=${3:-fno,cnn,sdpa,inductor_gpt,gpt,mlp_item}
  timeout ${BUDGET:-560} python3 tests/gpu/check_losses.py --libgraft $BA/src/${LIB:-libgraft.so} --cases $CASES --steps 300 \
    --out $O/losses > $O/losses.log 2>&1; echo "check_losses exit $?"
  grep -v '^\s*$' $O/losses.log | grep -i 'error\|traceback' | head -5
  sed -n '/=== RESULT ===/,$p' $O/losses.log
  echo "| case | graphs built | replays | fallbacks (ops) |"
  echo "|---|---|---|---|"
  for c in ${CASES//,/ }; do
    python3 -c "
import json; r=json.load(open('$O/losses/$c.graft.stats.json'))['replay']
print('| $c |', r.get('graphs_built'), '|', r.get('replays'), '|', json.dumps(r.get('fallbacks', {}))[:200], '|')" 2>/dev/null ||
      echo "| $c | ? | ? | ? |"
  done
fi
