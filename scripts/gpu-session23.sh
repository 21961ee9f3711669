#!/usr/bin/env bash
# Twenty-third session: libtorch C++ programs under graft, and threads that
# launch at the same time (graft rests instead of recording every op).
#   OUT=dir scripts/gpu-session23.sh BUILD libtorch [ROUNDS]
#       tests/gpu/check_libtorch.py: every libtorch_train case eager and under
#       libgraft.so, losses bitwise, then ROUNDS timing rounds of eager, graft
#       and the floor; the built program is left in $OUT/libtorch_train
#   OUT=dir [VARIANTS="eager lib[:NAME=V,...] ..."] scripts/gpu-session23.sh BUILD threads [ROUNDS] [STEPS]
#       libtorch_train threads (two training threads at once): eager,
#       libgraft_old.so and libgraft.so (or VARIANTS) in interleaved rounds, ms/step
#   OUT=dir scripts/gpu-session23.sh BUILD check [CASES]
#       PyTorch losses bitwise (check_losses.py, default CASES
#       mlp,gpt,sidestream,gan,ddp) and the traps where threads launch
#       (threads, cross_thread_event, capture_other_thread, pt_threads) under
#       libgraft.so, with coverage; threads and pt_threads also with 3000
#       iterations
#   OUT=dir scripts/gpu-session23.sh BUILD twogpu [CASES]
#       on a machine with two GPUs: the two_devices and two_contexts traps (not
#       when CASES is given) and
#       PyTorch CASES (default pipeline2,ddp,ddp2: the MLP split over both GPUs,
#       DDP in one process, DDP over both GPUs), losses bitwise, under libgraft.so
#   OUT=dir scripts/gpu-session23.sh BUILD traps
#       every trap under libgraft.so (300 iterations), then the traps where
#       threads launch at once with 3000 iterations (long enough for graft to
#       rest for them)
#   OUT=dir scripts/gpu-session23.sh BUILD serve [ROUNDS] [CASES]
#       workloads.py CASES (default serve) eager, under libgraft_old.so and
#       libgraft.so, interleaved rounds of one process each, ms/step
# Tables last.
B=${1:-.gpu/build}; PART=${2:-libtorch}; O=/tmp/s23-$PART; rm -rf $O; mkdir -p $O
BA=$(cd "$B" && pwd)
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
lscpu | grep -E "Model name" | tr -s ' '
bin() {  # the libtorch program: carried in BUILD, else built here
  if [ -x "$BA/tests/gpu/libtorch_train" ]; then echo "$BA/tests/gpu/libtorch_train"; return; fi
  python3 tests/gpu/check_libtorch.py --libgraft "$BA/src/libgraft.so" --build-dir /tmp/s23-bin --cases mlp --steps 5 \
    --warmup 0 --out /tmp/s23-probe > /tmp/s23-probe.txt 2>&1 || { cat /tmp/s23-probe.txt >&2; exit 1; }
  echo /tmp/s23-bin/libtorch_train
}
if [ "$PART" = libtorch ]; then
  BIN=$(bin); [ -n "${OUT:-}" ] && cp "$BIN" "$OUT/"
  python3 tests/gpu/check_libtorch.py --libgraft "$BA/src/libgraft.so" --bin "$BIN" --out $O --rounds "${3:-3}" | sed -n '/=== RESULT ===/,$p'
elif [ "$PART" = threads ]; then
  BIN=$(bin); ROUNDS=${3:-3}; STEPS=${4:-300}
  read -ra VS <<< "${VARIANTS:-eager libgraft_old.so libgraft.so}"
  for r in $(seq 1 $ROUNDS); do
    for v in "${VS[@]}"; do
      lib=${v%%:*} envs=()
      [ "$v" != "$lib" ] && IFS=, read -ra envs <<< "${v#*:}"
      pre=(); [ $v != eager ] && pre=(env LD_PRELOAD=$BA/src/$lib GRAFT_LOG_LEVEL=warn GRAFT_STATS=$O/stats.json "${envs[@]}")
      x=$("${pre[@]}" "$BIN" threads --steps $STEPS --warmup 30 --losses $O/$v.losses | sed -n 's/.*steps, \([0-9.]*\) ms.*/\1/p')
      cov=-; [ $v != eager ] && cov=$(python3 -c "import json; d=json.load(open('$O/stats.json'))['replay']; print(d['coverage_pct'], d.get('fallbacks', {}).get('threads_interleave', 0))")
      same=$(cmp -s $O/eager.losses $O/$v.losses && echo EQUAL || echo DIFFERS)
      echo "round $r $v $x $same $cov" | tee -a $O/threads.txt
    done
  done
  python3 - $O/threads.txt <<'PY'
import collections, statistics, sys
runs = collections.OrderedDict()
for line in open(sys.argv[1]):
    _, r, v, ms, same, *cov = line.split()
    runs.setdefault(v, []).append((float(ms), same, " ".join(cov)))
eager = statistics.median(m for m, _, _ in runs["eager"])
print("| variant | ms/step, median [rounds] | eager / variant | losses | coverage %, threads_interleave ops |")
print("|---|---|---|---|---|")
for v, xs in runs.items():
    med = statistics.median(m for m, _, _ in xs)
    print("| %s | %.3f [%s] | %.2fx | %s | %s |" % (v, med, ", ".join("%.3f" % m for m, _, _ in xs), eager / med,
          "/".join(sorted(set(s for _, s, _ in xs))), "; ".join(c for _, _, c in xs)))
PY
elif [ "$PART" = twogpu ]; then
  nvidia-smi -L
  [ "${3:-}" ] || python3 tests/gpu/check_traps.py --traps $BA/tests/gpu/traps --libgraft $BA/src/libgraft.so \
    --scenarios two_devices,two_contexts --out $O/traps | sed -n '/=== RESULT ===/,$p'
  python3 tests/gpu/check_losses.py --libgraft $BA/src/libgraft.so --cases ${3:-pipeline2,ddp,ddp2} --steps 300 --out $O/losses \
    | sed -n '/=== RESULT ===/,$p'
  grep -h "fallback\|could not\|warn" $O/losses/pipeline2.graftlog.txt 2>/dev/null | sort | uniq -c | sort -rn | head -12
elif [ "$PART" = check ]; then
  CASES=${3:-mlp,gpt,sidestream,gan,ddp}
  python3 tests/gpu/check_traps.py --traps $BA/tests/gpu/traps --traps $BA/tests/gpu/traps_per_thread \
    --libgraft $BA/src/libgraft.so --scenarios threads,pt_threads --iters 3000 --out $O/long | sed -n '/=== RESULT ===/,$p'
  python3 tests/gpu/check_traps.py --traps $BA/tests/gpu/traps --traps $BA/tests/gpu/traps_per_thread \
    --libgraft $BA/src/libgraft.so --scenarios threads,cross_thread_event,capture_other_thread,pt_threads,pt_loop \
    --out $O/traps | sed -n '/=== RESULT ===/,$p'
  python3 tests/gpu/check_losses.py --libgraft $BA/src/libgraft.so --cases $CASES --steps 300 --out $O/losses \
    | sed -n '/=== RESULT ===/,$p'
fi
if [ "$PART" = serve ]; then
  # OUT=dir scripts/gpu-session23.sh BUILD serve [ROUNDS] [CASES]: eager, libgraft_old.so and libgraft.so
  # in interleaved rounds, one process each (workloads.py, 300 steps), ms/step median of each run
  for r in $(seq 1 ${3:-4}); do
    for c in $(echo ${4:-serve} | tr , ' '); do
      for v in eager libgraft_old.so libgraft.so; do
        pre=(); [ $v != eager ] && pre=(env LD_PRELOAD=$BA/src/$v GRAFT_LOG_LEVEL=warn GRAFT_MODE=graph)
        "${pre[@]}" python3 tests/gpu/workloads.py $c --steps 300 --json $O/r.json > /dev/null 2>&1
        echo "$c $v $(python3 -c "import json; print(json.load(open('$O/r.json'))['ms_per_step_median'])")" | tee -a $O/serve.txt
      done
    done
  done
  python3 - $O/serve.txt <<'PY'
import collections, statistics, sys
runs = collections.OrderedDict()
for line in open(sys.argv[1]):
    c, v, ms = line.split()
    runs.setdefault((c, v), []).append(float(ms))
print("| case | variant | ms/step, median [rounds] | eager / variant |")
print("|---|---|---|---|")
for (c, v), xs in runs.items():
    e = statistics.median(runs[(c, "eager")])
    print("| %s | %s | %.3f [%s] | %.2fx |" % (c, v, statistics.median(xs), ", ".join("%.3f" % x for x in xs), e / statistics.median(xs)))
PY
fi
if [ "$PART" = traps ]; then
  python3 tests/gpu/check_traps.py --traps $BA/tests/gpu/traps --traps $BA/tests/gpu/traps_libs \
    --traps $BA/tests/gpu/traps_per_thread --libgraft $BA/src/libgraft.so --out $O/all | sed -n '/=== RESULT ===/,$p' \
    | awk 'NR <= 3 || /FAIL|DIFF|PASS|threads|per_thread|pt_/'
  python3 tests/gpu/check_traps.py --traps $BA/tests/gpu/traps --traps $BA/tests/gpu/traps_per_thread \
    --libgraft $BA/src/libgraft.so --scenarios threads,pt_threads,cross_thread_event,capture_other_thread \
    --iters 3000 --out $O/long | sed -n '/=== RESULT ===/,$p'
fi
