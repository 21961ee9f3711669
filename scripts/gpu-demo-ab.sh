#!/usr/bin/env bash
# The demo (storm, a device-to-host read every iteration) under several
# libgraft builds, interleaved, with eager and the hand-written graph:
#   scripts/gpu-demo-ab.sh BUILD ROUNDS LIB...   (libraries under BUILD/src)
B=${1:-.gpu/build}; R=${2:-3}; shift 2
BA=$(cd "$B" && pwd) || exit 2
O=${OUT:-/tmp}/demo-ab; mkdir -p $O
for r in $(seq 1 $R); do
  for v in eager hand "$@"; do
    case $v in
      eager) $BA/demo/storm --iters 2000 --json $O/s.json >/dev/null ;;
      hand) $BA/demo/storm --mode graph --iters 2000 --json $O/s.json >/dev/null ;;
      *) LD_PRELOAD=$BA/src/$v GRAFT_LOG_LEVEL=warn $BA/demo/storm --iters 2000 --json $O/s.json >/dev/null ;;
    esac
    python3 -c "import json,sys; d=json.load(open('$O/s.json')); print('$v', d['us_per_iter_median'])" >> $O/all.txt
  done
done
python3 - $O/all.txt <<'PY'
import sys, statistics, collections
v = collections.OrderedDict()
for line in open(sys.argv[1]):
    k, x = line.split(); v.setdefault(k, []).append(float(x))
print("| demo variant | us/iteration, median [runs] |")
print("|---|---|")
for k, xs in v.items():
    print("| %s | %.1f [%s] |" % (k, statistics.median(xs), ", ".join("%.1f" % x for x in xs)))
PY
