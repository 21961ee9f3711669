#!/usr/bin/env bash
# Twenty-ninth session.
#   OUT=dir [CASES=encpad,gnn] [LIBS="libgraft_old.so libgraft.so"] [STEPS=300] [ROUNDS=1]
#       scripts/gpu-session29.sh BUILD learn
#       each case eagerly and under each library (one process each, rounds
#       interleaved) with GRAFT_PROFILE=1: ms/step (median, first and last
#       third), share through graphs, ops counted in rests, and graft's own
#       CPU time per step (all stages, all steps): what learning costs a
#       program graft cannot graph, and when it rests
#   OUT=dir scripts/gpu-session29.sh BUILD traps|newcases ...   as gpu-session27.sh
# Tables last.
B=${1:-.gpu/build}; PART=${2:-learn}; O=${OUT:-/tmp}/s29-$PART; rm -rf $O; mkdir -p $O
BA=$(cd "$B" && pwd)
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
W=tests/gpu/workloads.py
if [ "$PART" = traps ] || [ "$PART" = newcases ] || [ "$PART" = verify ]; then
  shift 2; OUT=${OUT:-/tmp} exec scripts/gpu-session27.sh "$B" "$PART" "$@"
elif [ "$PART" = learn ]; then
  STEPS=${STEPS:-300}
  for r in $(seq 1 ${ROUNDS:-1}); do
    for c in $(echo ${CASES:-encpad,gnn} | tr , " "); do
      for v in eager ${LIBS:-libgraft_old.so libgraft.so}; do
        pre=""
        [ "$v" != eager ] && pre="LD_PRELOAD=$BA/src/$v GRAFT_MODE=graph GRAFT_PROFILE=1 GRAFT_STATS=$O/$c.$v.r$r.stats.json"
        env $pre GRAFT_LOG_LEVEL=warn GRAFT_SUMMARY=0 timeout 300 python3 $W $c --steps $STEPS --warmup 10 \
          --json $O/$c.$v.r$r.json > $O/$c.$v.r$r.log 2>&1 || echo "$c $v r$r: exit $? ($(tail -1 $O/$c.$v.r$r.log))"
      done
    done
  done
  python3 - $O <<'PY'
import json, sys, glob, os, statistics as S
O = sys.argv[1]
print("| case | variant | round | ms/step | first third | last third | through graphs | ops in rests | graft's CPU µs/step |")
print("|---|---|---|---|---|---|---|---|---|")
for f in sorted(glob.glob(O + "/*.r*.json")):
    if f.endswith(".stats.json"):
        continue
    case, rest = os.path.basename(f)[:-5].split(".", 1)
    var, rnd = rest.rsplit(".r", 1)
    d = json.load(open(f)); t = d["step_ms"]; n = len(t)
    sf = f[:-5] + ".stats.json"
    cov = dormant = cpu = "-"
    if os.path.exists(sf):
        st = json.load(open(sf)); rp = st["replay"]
        cov = "%.1f %%" % rp["coverage_pct"]
        dormant = str(rp["fallbacks"].get("dormant", 0))
        ct = st.get("cpu_time") or {}
        cpu = "%.0f" % (sum(v["us"] for v in ct.values()) / n)
    print("| %s | %s | %s | %.3f | %.3f | %.3f | %s | %s | %s |" % (
        case, var, rnd, d["ms_per_step_median"], S.median(t[:n // 3]), S.median(t[-n // 3:]), cov, dormant, cpu))
PY
fi
