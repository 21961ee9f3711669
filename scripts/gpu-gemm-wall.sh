#!/usr/bin/env bash
# The GPU-bound case (gemm) as a user sees it: process-level runs of STEPS
# steps, each timed from the first timed step to a sync after the last (the
# GPU's work included), eager and under each library, round-robin.
#   OUT=dir scripts/gpu-gemm-wall.sh BUILD ROUNDS STEPS LIB...
B=${1:-.gpu/build}; R=${2:-4}; STEPS=${3:-600}; shift 3
BA=$(cd "$B" && pwd) || exit 2
O=${OUT:-/tmp}/gemm-wall; mkdir -p $O; : > $O/all.txt
for r in $(seq 1 $R); do
  for v in eager "$@"; do
    if [ $v = eager ]; then env=(); else env=(LD_PRELOAD=$BA/src/$v GRAFT_MODE=graph GRAFT_LOG_LEVEL=warn); fi
    env "${env[@]}" python3 tests/gpu/workloads.py gemm --steps $STEPS --warmup 60 --json $O/g.json > /dev/null 2>&1 &&
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
