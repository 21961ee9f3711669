#!/usr/bin/env bash
# Twenty-first session: the fast lane's memory asked for at once (prefetches),
# the expected op's shape copied into the engine's lines, ordered calls counted
# without a locked add, the hook's per-op globals in one line.
#   OUT=dir scripts/gpu-session21.sh BUILD opcost [ROUNDS]
#       bench/op_cost against the null driver on this host's CPU (no GPU used):
#       libgraft_old.so (HEAD before the change) against the LIBS (default
#       libgraft.so), rounds interleaved; ns per launch inside the calls with
#       the program evicting graft's lines between launches (--thrash 1024 KB
#       by lines, --code 32 KB), and in a tight loop
#   OUT=dir scripts/gpu-session21.sh BUILD ab [ROUNDS]
#       in-process interleaved A/B with match mode (MATCH=1): libgraft_old.so
#       against libgraft.so, mlp, gpt, mlp_item
#   OUT=dir scripts/gpu-session21.sh BUILD check
#       every trap; PyTorch losses bitwise for mlp, gpt, sidestream, loader, amp
#   OUT=dir scripts/gpu-session21.sh BUILD polls
#       every trap; losses bitwise for sidestream, loader, ddp, mlp, gpt, amp; then
#       sidestream and loader twice more under each library (libgraft_old.so: HEAD
#       before the poll change) with GRAFT_STATS: queries graft answered itself,
#       eager ops by reason, coverage (CASES=... and REPS=N change the cases and the count)
# Logs tarred into $OUT/s21-PART.tgz; tables last.
B=${1:-.gpu/build}; PART=${2:-opcost}; ROUNDS=${3:-3}; L=$PWD/$B/src/libgraft.so; O=/tmp/s21-$PART; rm -rf $O; mkdir -p $O
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
lscpu | grep -E "Model name|^CPU\(s\)|L2 cache|L3 cache" | tr -s ' '
if [ "$PART" = opcost ]; then
  BA=$(cd "$B" && pwd)
  LIBS=(libgraft_old.so ${LIBS:-libgraft.so})
  declare -A v
  run() {  # LIB ARGS...: calls ns per op
    (cd "$BA/bench" && LD_LIBRARY_PATH=. LD_PRELOAD=$BA/src/$1 GRAFT_LOG_LEVEL=warn GRAFT_SUMMARY=0 \
       taskset -c 3,4 ./op_cost 200 "${@:2}" --calls | sed -n 's/^calls_ns_per_op=//p')
  }
  for r in $(seq 1 $ROUNDS); do
    for variant in cold tight; do
      for l in "${LIBS[@]}"; do
        if [ $variant = cold ]; then x=$(run $l 100 --vary --distinct --thrash 1024 --stride 64 --code 32)
        else x=$(run $l 5000 --vary --distinct); fi
        v[$l,$variant]+="$x "; echo "round $r $variant $l $x" | tee -a $O/opcost.txt
      done
    done
  done
  (cd /tmp && tar czf ${OUT:-/tmp}/s21-$PART.tgz s21-$PART)
  echo "| library | ns per launch, evicted (--thrash 1024:64 --code 32) | ns per launch, tight loop |"
  echo "|---|---|---|"
  for l in "${LIBS[@]}"; do
    python3 - "$l" "${v[$l,cold]}" "${v[$l,tight]}" <<'PY'
import statistics, sys
l, cols = sys.argv[1], [[float(x) for x in c.split()] for c in sys.argv[2:]]
print("| %s | %s |" % (l, " | ".join("%.0f [%s]" % (statistics.median(c), ", ".join("%.0f" % x for x in c)) for c in cols)))
PY
  done
elif [ "$PART" = ab ]; then
  MATCH=1 OUT=$O timeout 570 scripts/gpu-ab-interleaved.sh $B libgraft_old.so libgraft.so mlp,gpt,mlp_item \
    $ROUNDS 30 5 > $O/ab.txt 2>&1
  (cd /tmp && tar czf ${OUT:-/tmp}/s21-$PART.tgz s21-$PART)
  echo "=== A/B (old: HEAD before the change; new: this build) ==="; grep -E "^\|" $O/ab.txt
elif [ "$PART" = polls ]; then
  timeout 200 python3 tests/gpu/check_traps.py --traps $PWD/$B/tests/gpu/traps --traps $PWD/$B/tests/gpu/traps_libs \
    --libgraft $L --timeout 30 --out $O/traps > $O/traps.txt 2>&1
  timeout $((420 - SECONDS)) python3 tests/gpu/check_losses.py --libgraft $L --cases ${CASES:-sidestream,loader,ddp,mlp,gpt,amp} \
    --steps 300 --budget-s $((400 - SECONDS)) --out $O/losses > $O/losses.txt 2>&1
  for rep in $(seq 1 ${REPS:-2}); do for c in sidestream loader; do for lib in libgraft_old.so libgraft.so; do
    [ $SECONDS -gt 540 ] && break
    LD_PRELOAD=$PWD/$B/src/$lib GRAFT_STATS=$O/$c-$lib-$rep.json timeout 40 \
      python3 tests/gpu/workloads.py $c --steps 300 > $O/$c-$lib-$rep.txt 2>&1
  done; done; done
  (cd /tmp && tar czf ${OUT:-/tmp}/s21-$PART.tgz s21-$PART)
  echo "=== traps ==="; grep -E "PASS|FAIL" $O/traps.txt | tail -3
  echo "=== losses ==="; sed -n '/=== RESULT ===/,$p' $O/losses.txt
  echo "=== 300 steps under each library ==="
  echo "| case | library | run | through graphs | queries answered not ready | query_in_segment | replays |"
  echo "|---|---|---|---|---|---|---|"
  for rep in $(seq 1 ${REPS:-2}); do for c in sidestream loader; do for lib in libgraft_old.so libgraft.so; do
    python3 - $O/$c-$lib-$rep.json $c $lib $rep <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))["replay"]
    print("| %s | %s | %s | %.1f %% | %s | %s | %d |" % (sys.argv[2], sys.argv[3], sys.argv[4], r["coverage_pct"],
          r.get("queries_answered_not_ready", "-"), r.get("fallbacks", {}).get("query_in_segment", 0), r["replays"]))
except Exception as e:
    print("|", sys.argv[2], "|", sys.argv[3], "|", sys.argv[4], "| no stats:", e, "| | | |")
PY
  done; done; done
else
  timeout 220 python3 tests/gpu/check_traps.py --traps $PWD/$B/tests/gpu/traps --traps $PWD/$B/tests/gpu/traps_libs \
    --libgraft $L --timeout 30 --out $O/traps > $O/traps.txt 2>&1
  timeout $((560 - SECONDS)) python3 tests/gpu/check_losses.py --libgraft $L --cases mlp,gpt,sidestream,loader,amp \
    --steps 300 --budget-s $((540 - SECONDS)) --out $O/losses > $O/losses.txt 2>&1
  (cd /tmp && tar czf ${OUT:-/tmp}/s21-$PART.tgz s21-$PART)
  echo "=== traps ==="; grep -E "PASS|FAIL" $O/traps.txt | tail -3
  echo "=== losses ==="; sed -n '/=== RESULT ===/,$p' $O/losses.txt
fi
