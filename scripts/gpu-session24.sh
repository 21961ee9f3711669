#!/usr/bin/env bash
# Twenty-fourth session: where a cuDNN LSTM's steps lose their graphs.
#   OUT=dir scripts/gpu-session24.sh BUILD trace [CASE] [STEPS]
#       workloads.py CASE (default lstm) eager and under libgraft.so with
#       GRAFT_LOG_LEVEL=trace (one line per eager op and per replay), losses
#       bitwise; the log and the exit report are gzipped into $OUT
#   OUT=dir scripts/gpu-session24.sh BUILD time [CASES] [RUNS]
#       tests/gpu/bench_interleaved.py --match: eager, graft, match mode and the
#       floor in rotating blocks of one process per run (CASES default lstm)
#   OUT=dir [VARIANTS="lib[:NAME=V,...] ..."] scripts/gpu-session24.sh BUILD ab [CASES] [ROUNDS] [STEPS]
#       workloads.py CASES eager and under each variant, one process each,
#       interleaved rounds, ms/step medians, losses bitwise, coverage
#   OUT=dir scripts/gpu-session24.sh BUILD losses [CASES]
#       tests/gpu/check_losses.py under libgraft.so, 300 steps, losses bitwise,
#       coverage (CASES default: every one-GPU case but the inductor ones)
#   OUT=dir scripts/gpu-session24.sh BUILD traps
#       every trap (traps, traps_libs, traps_per_thread) under libgraft.so
#   OUT=dir scripts/gpu-session24.sh BUILD record [CASES] [STEPS]
#       each workloads.py case under libgraft.so building nothing
#       (GRAFT_WARMUP=1000 GRAFT_DORMANT_AFTER_OPS=0) with the trace log on:
#       its op order ($OUT/CASE.trace.gz, the `token` lines) for
#       tests/sim/sim_trace_replay
# Tables last.
B=${1:-.gpu/build}; PART=${2:-trace}; O=/tmp/s24-$PART; rm -rf $O; mkdir -p $O
BA=$(cd "$B" && pwd)
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
W=tests/gpu/workloads.py
if [ "$PART" = trace ]; then
  C=${3:-lstm}; S=${4:-60}
  timeout 300 python3 $W $C --steps $S --losses $O/eager.losses > $O/eager.out 2>&1
  LD_PRELOAD=$BA/src/libgraft.so GRAFT_LOG_LEVEL=trace GRAFT_LOG_FILE=$O/$C.log GRAFT_STATS=$O/$C.json \
    timeout 300 python3 $W $C --steps $S --losses $O/graft.losses > $O/graft.out 2>&1
  rc=$?
  tail -2 $O/eager.out $O/graft.out
  [ -n "${OUT:-}" ] && gzip -c $O/$C.log > $OUT/$C.log.gz && cp $O/$C.json $OUT/
  echo "| case | rc | losses | coverage | replays | fallbacks |"
  echo "|---|---|---|---|---|---|"
  echo "| $C | $rc | $(cmp -s $O/eager.losses $O/graft.losses && echo EQUAL || echo DIFFERS) | $(python3 -c "import json;r=json.load(open('$O/$C.json'))['replay'];print(r['coverage_pct'],'|',r['replays'],'|',r['fallbacks'])")|"
elif [ "$PART" = time ]; then
  python3 tests/gpu/bench_interleaved.py --libgraft $BA/src/libgraft.so --cases ${3:-lstm} --runs ${4:-2} \
    --cycles 30 --block 5 --warmup 40 --match --out $O/interleaved.json --workdir $O/runs 2>&1 | tail -25
elif [ "$PART" = ab ]; then
  CASES=${3:-lstm}; ROUNDS=${4:-3}; STEPS=${5:-300}
  read -ra VS <<< "${VARIANTS:-libgraft_old.so libgraft.so}"
  for c in ${CASES//,/ }; do
    for r in $(seq 1 $ROUNDS); do
      for v in eager "${VS[@]}"; do
        lib=${v%%:*} envs=()
        [ "$v" != "$lib" ] && IFS=, read -ra envs <<< "${v#*:}"
        pre=(); [ $v != eager ] && pre=(env LD_PRELOAD=$BA/src/$lib GRAFT_LOG_LEVEL=warn GRAFT_STATS=$O/stats.json "${envs[@]}")
        out=$("${pre[@]}" timeout 300 python3 $W $c --steps $STEPS --losses $O/$c.$v.losses 2>&1 | tail -1)
        ms=$(echo "$out" | sed -n 's/.*ms\/step=\([0-9.]*\).*/\1/p')
        cov=-; [ $v != eager ] && cov=$(python3 -c "import json; print(json.load(open('$O/stats.json'))['replay']['coverage_pct'])" 2>/dev/null)
        same=$(cmp -s $O/$c.eager.losses $O/$c.$v.losses && echo EQUAL || echo DIFFERS)
        echo "$c round $r $v ${ms:-?} $same $cov" | tee -a $O/ab.txt
      done
    done
  done
  python3 - $O/ab.txt <<'PY'
import collections, statistics, sys
rows = collections.OrderedDict()
for line in open(sys.argv[1]):
    c, _, r, v, ms, same, cov = line.split()
    rows.setdefault((c, v), []).append((ms, same, cov))
print("| case | variant | ms/step median [rounds] | eager ÷ variant | losses | through graphs |")
print("|---|---|---|---|---|---|")
for (c, v), xs in rows.items():
    ms = [float(m) for m, _, _ in xs if m != "?"]
    e = [float(m) for m, _, _ in rows[(c, "eager")] if m != "?"]
    med = statistics.median(ms) if ms else float("nan")
    ratio = statistics.median(e) / med if ms and e else float("nan")
    print(f"| {c} | {v} | {med:.3f} [{', '.join(m for m, _, _ in xs)}] | {ratio:.3f}× | "
          f"{'/'.join(sorted(set(s for _, s, _ in xs)))} | {xs[-1][2]} |")
PY
elif [ "$PART" = losses ]; then
  CASES=${3:-mlp,mlp_item,gpt,amp,sidestream,lastbatch,partgraph,gemm,cnn,lstm,dynamic,accum,sdpa,ddp,vit,diffusion,gan,expandable,decode,loader,serve}
  python3 tests/gpu/check_losses.py --libgraft $BA/src/libgraft.so --cases $CASES --steps 300 --out $O/losses \
    | sed -n '/=== RESULT ===/,$p'
elif [ "$PART" = traps ]; then
  python3 tests/gpu/check_traps.py --traps $BA/tests/gpu/traps --traps $BA/tests/gpu/traps_libs \
    --traps $BA/tests/gpu/traps_per_thread --libgraft $BA/src/libgraft.so --out $O/traps | sed -n '/=== RESULT ===/,$p'
elif [ "$PART" = record ]; then
  for c in ${3//,/ }; do
    LD_PRELOAD=$BA/src/libgraft.so GRAFT_WARMUP=1000 GRAFT_DORMANT_AFTER_OPS=0 GRAFT_LOG_LEVEL=trace \
      GRAFT_LOG_FILE=$O/$c.log timeout 300 python3 $W $c --steps ${4:-40} --warmup 2 > $O/$c.out 2>&1
    echo "$c rc=$? $(tail -1 $O/$c.out | cut -c1-80) ops=$(grep -c token $O/$c.log)"
    grep token $O/$c.log | gzip -c > ${OUT:-/tmp}/$c.trace.gz
  done
fi
