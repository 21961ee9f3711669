#!/usr/bin/env bash
# A workload as a user sees it: process-level runs of STEPS steps, each timed
# from the first timed step to a sync after the last (the GPU's work
# included; the warm-up, graft's recording and first builds, excluded),
# eager and under each variant, round-robin. A variant is a library in
# BUILD/src, optionally with options: libgraft.so:GRAFT_MIN_SEGMENT_OPS=16:...
#   OUT=dir scripts/gpu-wall.sh BUILD CASE ROUNDS STEPS VARIANT...
B=${1:-.gpu/build}; CASE=${2:-gemm}; R=${3:-4}; STEPS=${4:-600}; shift 4
BA=$(cd "$B" && pwd) || exit 2
O=${OUT:-/tmp}/wall-$CASE; mkdir -p $O; : > $O/all.txt
for r in $(seq 1 $R); do
  for v in eager "$@"; do
    IFS=: read -r lib opts <<< "$v"
    if [ $v = eager ]; then env=(); else env=(LD_PRELOAD=$BA/src/$lib GRAFT_MODE=graph GRAFT_LOG_LEVEL=warn ${opts//:/ }); fi
    env "${env[@]}" python3 tests/gpu/workloads.py $CASE --steps $STEPS --warmup 60 --json $O/g.json > /dev/null 2>&1 &&
      python3 -c "import json; d=json.load(open('$O/g.json')); print('$v', d['ms_per_step_wall'], d['ms_per_step_event'])" >> $O/all.txt
  done
done
python3 - $O/all.txt <<'PY'
import sys, statistics, collections
v = collections.OrderedDict()
for line in open(sys.argv[1]):
    k, w, e = line.split(); v.setdefault(k, []).append(float(w))
base = statistics.median(v.get("eager", [float("nan")]))
print("| variant | ms/step incl. final sync, median [runs] | eager ÷ variant |")
print("|---|---|---|")
for k, xs in v.items():
    m = statistics.median(xs)
    print("| %s | %.3f [%s] | %.3fx |" % (k, m, ", ".join("%.3f" % x for x in xs), base / m))
PY
