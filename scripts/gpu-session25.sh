#!/usr/bin/env bash
# Twenty-fifth session: limits and kernel attributes around replayed work, new traps.
#   OUT=dir scripts/gpu-session25.sh BUILD traps [PROGRAMS]
#       check_traps.py over the trap programs (default: all of
#       tests/gpu/trap_programs.txt) under libgraft.so
#   OUT=dir scripts/gpu-session25.sh BUILD losses [CASES]
#       check_losses.py under libgraft.so, 300 steps, losses bitwise, coverage,
#       and the report's count of setting calls (cuFuncSetAttribute,
#       cuKernelSetAttribute) and barriers per case
#   OUT=dir [VARIANTS="lib[:NAME=V,...] ..."] [ROUNDS=N] [CASES=a,b] scripts/gpu-session25.sh BUILD sync
#       workloads.py --interleave eager/floor/match/graft per variant, one
#       process each, rounds interleaved; the time inside loss.item() per mode
#   OUT=dir [CASES=a,b] scripts/gpu-session25.sh BUILD rtlayer
#       bench/runtime_swallow.c (built here with gcc) before libgraft.so:
#       eager, graft's floor (launches dropped at the driver), the floor with
#       the CUDA runtime's launch entries dropped too, and graft, interleaved
# Tables last.
B=${1:-.gpu/build}; PART=${2:-traps}; O=/tmp/s25-$PART; rm -rf $O; mkdir -p $O
BA=$(cd "$B" && pwd)
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
W=tests/gpu/workloads.py
if [ "$PART" = traps ]; then
  args=()
  for p in ${3//,/ }; do args+=(--traps $BA/tests/gpu/$p); done
  [ ${#args[@]} = 0 ] && for p in $(sed -n 's/^\([a-z0-9_]\+\) .*/\1/p' tests/gpu/trap_programs.txt); do args+=(--traps $BA/tests/gpu/$p); done
  python3 tests/gpu/check_traps.py "${args[@]}" --libgraft $BA/src/libgraft.so --out $O/traps | sed -n '/=== RESULT ===/,$p'
elif [ "$PART" = losses ]; then
  CASES=${3:-mlp,gpt,sdpa,cnn,inductor_gpt}
  python3 tests/gpu/check_losses.py --libgraft $BA/src/libgraft.so --cases $CASES --steps 300 --out $O/losses \
    | sed -n '/=== RESULT ===/,$p'
  echo "| case | setting calls | barrier calls |"
  echo "|---|---|---|"
  for c in ${CASES//,/ }; do
    python3 -c "import json,sys; r=json.load(open('$O/losses/$c.graft.stats.json'))['ops']['by_class']; print('| $c |', r.get('setting', 0), '|', r.get('barrier', 0), '|')" 2>/dev/null || echo "| $c | ? | ? |"
  done
elif [ "$PART" = rtlayer ]; then
  gcc -O2 -shared -fPIC -o $O/runtime_swallow.so bench/runtime_swallow.c -ldl || exit 1
  TL=$(python3 -c "import torch,os;print(os.path.join(os.path.dirname(torch.__file__),'lib'))")
  echo "libtorch_cuda.so imports: $(nm -D --undefined-only $TL/libtorch_cuda.so | grep -io '[_a-z]*cudaLaunch[a-z_]*' | sort -u | tr '\n' ' ')"
  for c in $(echo ${CASES:-mlp,gpt,mlp_item} | tr , ' '); do
    LD_PRELOAD=$O/runtime_swallow.so:$BA/src/libgraft.so GRAFT_MODE=graph GRAFT_BENCH_SWITCH=1 GRAFT_LOG_LEVEL=warn \
      GRAFT_SUMMARY=0 timeout 300 python3 $W $c --interleave passthrough,swallow,rtswallow,graph --cycles 30 --block 5 \
      --warmup 40 --json $O/$c.json 2>&1 | tail -2
  done
  python3 - $O <<'PY'
import json, sys, glob, os, statistics as S
print("| case | eager ms | floor (driver) | floor (runtime too) | graft | runtime's share of the gap | graft's share removed (driver floor) | (runtime floor) |")
print("|---|---|---|---|---|---|---|---|")
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    I = json.load(open(f))["interleaved"]
    e, d, r, g = (I[k] for k in ("passthrough", "swallow", "rtswallow", "graph"))
    n = len(e)
    share = lambda a, b, fl: 100 * S.median([(a[i] - b[i]) / (e[i] - fl[i]) for i in range(n)])
    print("| %s | %.3f | %.3f | %.3f | %.3f | %.0f %% | %.0f %% | %.0f %% |" % (
        os.path.basename(f)[:-5], S.median(e), S.median(d), S.median(r), S.median(g), share(d, r, d), share(e, g, d),
        share(e, g, r)))
PY
elif [ "$PART" = sync ]; then
  J=$O/json; mkdir -p $J
  for r in $(seq 1 ${ROUNDS:-3}); do
    for c in $(echo ${CASES:-mlp_item} | tr , " "); do
      for v in ${VARIANTS:-libgraft.so}; do
        lib=${v%%:*}; envs=""; [ "$lib" != "$v" ] && envs="${v#*:}" && envs="${envs//,/ }"
        env $envs LD_PRELOAD=$BA/src/$lib GRAFT_MODE=graph GRAFT_BENCH_SWITCH=1 GRAFT_LOG_LEVEL=warn GRAFT_SUMMARY=0 \
          timeout 300 python3 $W $c --interleave passthrough,swallow,match,graph --cycles 24 --block 5 --warmup 40 \
          --json $J/$c.$(echo $v | tr "=,:" "---").r$r.json 2>&1 | tail -1
      done
    done
  done
  python3 - $J <<'PY'
import json, sys, glob, os, statistics as S
print("| run | eager ms (in item) | floor | match | graft | gap removed | program thread | launching | eager ÷ graft |")
print("|---|---|---|---|---|---|---|---|---|")
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    d = json.load(open(f)); I = d["interleaved"]; R = d.get("interleaved_record_ms", {})
    e, fl, m, g = (I[k] for k in ("passthrough", "swallow", "match", "graph"))
    n = len(e)
    share = lambda a, b: 100 * S.median([(a[i] - b[i]) / (e[i] - fl[i]) for i in range(n)])
    r = lambda k: S.median(R[k]) if k in R else float("nan")
    print("| %s | %.3f (%.3f) | %.3f (%.3f) | %.3f (%.3f) | %.3f (%.3f) | %.0f %% | %.0f %% | %.0f %% | %.3f |" % (
        os.path.basename(f)[:-5], S.median(e), r("passthrough"), S.median(fl), r("swallow"), S.median(m), r("match"),
        S.median(g), r("graph"), share(e, g), share(m, fl), share(g, m), S.median(e) / S.median(g)))
PY
fi
