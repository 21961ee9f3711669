#!/usr/bin/env bash
# Twenty-second session: the fast lane's code lines asked for at once
# (software prefetch of graft's code at the launch wrapper's entry).
#   OUT=dir VARIANTS="lib[:NAME=V,...] ..." scripts/gpu-session22.sh BUILD opcost [ROUNDS]
#       bench/op_cost against the null driver on this host's CPU (no GPU used),
#       variants interleaved by round; ns per launch inside the calls, with the
#       program evicting graft's lines between launches and in a tight loop
#   OUT=dir VARIANTS=... scripts/gpu-session22.sh BUILD ab [ROUNDS] [CASES]
#       in-process interleaved A/B with match mode (scripts/gpu-ab-interleaved.sh)
#   OUT=dir scripts/gpu-session22.sh BUILD demo [ROUNDS]
#       demo/storm and demo/storm_per_thread (built with --default-stream
#       per-thread), with and without the device-to-host read every iteration,
#       eager and under libgraft_old.so and libgraft.so, and the hand-written
#       graph, rounds interleaved: us/iteration, and whether each run's loss and
#       parameter checksum equal eager's
#   OUT=dir scripts/gpu-session22.sh BUILD check
#       every trap (traps, traps_libs, traps_per_thread) under libgraft.so; the
#       per-thread traps (traps_per_thread, per_thread_stream) under
#       libgraft_old.so too; PyTorch losses bitwise for CASES (default mlp,gpt)
# Tables last.
B=${1:-.gpu/build}; PART=${2:-opcost}; ROUNDS=${3:-3}; CASES=${4:-mlp,gpt}; O=/tmp/s22-$PART; rm -rf $O; mkdir -p $O
export PYTHONUNBUFFERED=1
read -ra VS <<< "${VARIANTS:-libgraft.so}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
lscpu | grep -E "Model name|^CPU\(s\)|L2 cache|L3 cache" | tr -s ' '
if [ "$PART" = opcost ]; then
  BA=$(cd "$B" && pwd)
  declare -A v
  run() {  # VARIANT ARGS...: calls ns per op
    local lib=${1%%:*} envs=()
    [ "$1" != "$lib" ] && IFS=, read -ra envs <<< "${1#*:}"
    (cd "$BA/bench" && env "${envs[@]}" LD_LIBRARY_PATH=. LD_PRELOAD=$BA/src/$lib GRAFT_LOG_LEVEL=warn GRAFT_SUMMARY=0 \
       taskset -c 3,4 ./op_cost 200 "${@:2}" --calls | sed -n 's/^calls_ns_per_op=//p')
  }
  for r in $(seq 1 $ROUNDS); do
    for variant in cold code tight; do
      for l in "${VS[@]}"; do
        case $variant in
          cold) x=$(run $l 100 --vary --distinct --thrash 1024 --stride 64 --code 32) ;;
          code) x=$(run $l 100 --vary --distinct --code 32) ;;
          tight) x=$(run $l 5000 --vary --distinct) ;;
        esac
        v[$l,$variant]+="$x "; echo "round $r $variant $l $x" | tee -a $O/opcost.txt
      done
    done
  done
  echo "| variant | evicted (--thrash 1024:64 --code 32) | code evicted (--code 32) | tight loop |"
  echo "|---|---|---|---|"
  for l in "${VS[@]}"; do
    python3 - "$l" "${v[$l,cold]}" "${v[$l,code]}" "${v[$l,tight]}" <<'PY'
import statistics, sys
l, cols = sys.argv[1], [[float(x) for x in c.split()] for c in sys.argv[2:]]
print("| %s | %s |" % (l[:40], " | ".join("%.0f [%s]" % (statistics.median(c), ", ".join("%.0f" % x for x in c)) for c in cols)))
PY
  done
elif [ "$PART" = demo ]; then
  BA=$(cd "$B" && pwd)
  for r in $(seq 1 $ROUNDS); do
    for sync in "" --nosync; do
      for prog in storm storm_per_thread; do
        for lib in eager libgraft_old.so libgraft.so; do
          pre=(); [ $lib != eager ] && pre=(env LD_PRELOAD=$BA/src/$lib GRAFT_LOG_LEVEL=warn GRAFT_SUMMARY=0)
          "${pre[@]}" $BA/demo/$prog --iters 2000 $sync --json $O/s.json > /dev/null 2>$O/err.txt || cat $O/err.txt
          python3 -c "import json; d=json.load(open('$O/s.json')); print('$prog${sync:+ nosync}', '$lib', d['us_per_iter_median'], d['loss_final_hex'] + d['params_checksum_hex'])" | tee -a $O/demo.txt
        done
      done
      $BA/demo/storm --mode graph --iters 2000 $sync --json $O/s.json > /dev/null
      python3 -c "import json; d=json.load(open('$O/s.json')); print('storm${sync:+ nosync}', 'hand-graph', d['us_per_iter_median'], d['loss_final_hex'] + d['params_checksum_hex'])" | tee -a $O/demo.txt
    done
  done
  python3 - $O/demo.txt <<'PY'
import collections, statistics, sys
runs = collections.OrderedDict(); sums = {}
for line in open(sys.argv[1]):
    *prog, lib, us, digest = line.split()
    prog = " ".join(prog)
    runs.setdefault((prog, lib), []).append(float(us))
    sums.setdefault((prog.split()[0], prog), {}).setdefault(lib, set()).add(digest)
print("| program | variant | us/iteration, median [rounds] | eager / variant | loss and checksum |")
print("|---|---|---|---|---|")
for (prog, lib), xs in runs.items():
    eager = statistics.median(runs[(prog, "eager")]) if (prog, "eager") in runs else None
    ref = sums[(prog.split()[0], prog)].get("eager", set())
    same = "-" if lib == "hand-graph" else ("equal to eager" if sums[(prog.split()[0], prog)][lib] == ref and len(ref) == 1 else "DIFFER")
    print("| %s | %s | %.1f [%s] | %s | %s |" % (prog, lib, statistics.median(xs), ", ".join("%.1f" % x for x in xs),
          "%.2fx" % (eager / statistics.median(xs)) if eager else "-", same))
PY
elif [ "$PART" = check ]; then
  T=$PWD/$B/tests/gpu
  timeout 330 python3 tests/gpu/check_traps.py --traps $T/traps --traps $T/traps_libs --traps $T/traps_per_thread \
    --libgraft $PWD/$B/src/libgraft.so --timeout 30 --out $O/traps > $O/traps.txt 2>&1
  timeout 100 python3 tests/gpu/check_traps.py --traps $T/traps_per_thread --traps $T/traps --scenarios \
    pt_loop,pt_sync_copies,pt_query_alloc,pt_program_capture,pt_threads,per_thread_stream \
    --libgraft $PWD/$B/src/libgraft_old.so --timeout 30 --out $O/traps_old > $O/traps_old.txt 2>&1
  [ $SECONDS -lt 420 ] && timeout $((560 - SECONDS)) python3 tests/gpu/check_losses.py --libgraft $PWD/$B/src/libgraft.so \
    --cases ${CASES:-mlp,gpt} --steps 300 --budget-s $((540 - SECONDS)) --out $O/losses > $O/losses.txt 2>&1
  (cd /tmp && tar czf ${OUT:-/tmp}/s22-$PART.tgz s22-$PART)
  echo "=== traps, libgraft_old.so (per-thread ones) ==="; sed -n '/=== RESULT ===/,$p' $O/traps_old.txt
  echo "=== losses ==="; sed -n '/=== RESULT ===/,$p' $O/losses.txt
  echo "=== traps, libgraft.so ==="; sed -n '/=== RESULT ===/,$p' $O/traps.txt
elif [ "$PART" = ab ]; then
  MATCH=1 OUT=$O timeout 560 scripts/gpu-ab-interleaved.sh $B "${VS[@]:0:2}" $CASES $ROUNDS 30 5 "${VS[@]:2}" > $O/ab.txt 2>&1
  echo "=== A/B ==="; grep -E "^\|" $O/ab.txt
fi
