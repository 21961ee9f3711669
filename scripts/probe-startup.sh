#!/usr/bin/env bash
# Where a short PyTorch process's time goes, with and without graft: the
# program (scripts/probe_startup.py) prints the seconds since its process
# started (from /proc/self/stat) at each stage; this script adds the exit
# (the process's wall time from fork to exit). Variants as in
# gpu-short-programs.sh: eager, loaded (GRAFT_DISABLE=1), pass
# (GRAFT_MODE=passthrough), graft; R rounds, the order rotating each round.
#   OUT=dir scripts/probe-startup.sh BUILD [R] [VARIANTS]
B=${1:-.gpu/build}; R=${2:-6}; VARIANTS=${3:-eager loaded pass graft}
BA=$(cd "$B" && pwd) || exit 2; LIB=$BA/src/libgraft.so
ALL=${OUT:-/tmp}/startup-all.txt; : > $ALL
python3 scripts/probe_startup.py > /dev/null 2>&1  # warm files and the driver's caches
for r in $(seq 1 $R); do
  read -r -a vs <<< "$VARIANTS"; n=${#vs[@]}
  for k in $(seq 0 $((n - 1))); do
    v=${vs[$(( (k + r) % n ))]}
    lib=$LIB; [[ $v == *@* ]] && lib=$BA/src/${v#*@}
    case ${v%@*} in
      eager) env=();;
      loaded) env=(LD_PRELOAD=$lib GRAFT_DISABLE=1);;
      pass) env=(LD_PRELOAD=$lib GRAFT_MODE=passthrough);;
      graft) env=(LD_PRELOAD=$lib GRAFT_MODE=graph);;
    esac
    t0=$(date +%s%N)
    line=$(env "${env[@]}" python3 scripts/probe_startup.py 2>/dev/null | tail -1)
    echo "$v $line exit=$(( ($(date +%s%N) - t0) / 1000000 ))" >> $ALL
  done
done
python3 - $ALL "$VARIANTS" <<'PY'
import sys, statistics, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split(); v = f[0]
    rows[v].append({k: float(x) for k, x in (t.split("=") for t in f[1:])})
vs = sys.argv[2].split()
stages = list(rows[vs[0]][0].keys()) if rows[vs[0]] else []
print("| variant | " + " | ".join(stages) + " |")
print("|---|" + "---|" * len(stages))
for v in vs:
    cells = []
    for s in stages:
        xs = [r[s] for r in rows[v] if s in r]
        cells.append("%.0f [%s]" % (statistics.median(xs), ", ".join("%.0f" % x for x in xs)) if xs else "-")
    print("| %s | %s |" % (v, " | ".join(cells)))
print("(ms since the process started, median [rounds]; exit: fork to exit, measured outside)")
PY
