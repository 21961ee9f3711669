#!/usr/bin/env bash
# Twenty-sixth session.
#   OUT=dir [CASES=moe] [STEPS=260] [ROUNDS=2] [VARIANTS="eager passthrough graph graph:ENV=V ..."]
#       scripts/gpu-session26.sh BUILD steps
#       one process per variant, rounds interleaved; every step's time (workloads.py --json
#       step_ms), graft's exit report with GRAFT_PROFILE=1: the median step over the steps'
#       thirds, graft's own CPU time by stage per step and the replay counters
#   OUT=dir [CYCLES=8] [SCAN_BUDGET=s] scripts/gpu-session26.sh BUILD scan CASES
#       each case in one process, eager (passthrough) and graft interleaved in blocks of 5
#       steps (workloads.py --interleave passthrough,graph): graft's step time over eager's,
#       paired by cycle, to find cases graft slows down (noise between processes cancels)
#   OUT=dir [CASE=fno] [STEPS=40] scripts/gpu-session26.sh BUILD unload
#       one run under graft with GRAFT_PROFILE and the debug log: how often the program
#       unloaded code, which kernels graft runs eagerly as reloaded code, graft's CPU time
#       by stage and the replay counters
#   OUT=dir scripts/gpu-session26.sh BUILD traps|losses [LIST]     as gpu-session25.sh
# Tables last.
B=${1:-.gpu/build}; PART=${2:-steps}; O=${OUT:-/tmp}/s26-$PART; rm -rf $O; mkdir -p $O
BA=$(cd "$B" && pwd)
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
W=tests/gpu/workloads.py
if [ "$PART" = traps ] || [ "$PART" = losses ]; then
  OUT=${OUT:-/tmp} exec scripts/gpu-session25.sh "$B" "$PART" "$3"
elif [ "$PART" = unload ]; then
  c=${CASE:-fno}
  LD_PRELOAD=$BA/src/libgraft.so GRAFT_MODE=graph GRAFT_PROFILE=1 GRAFT_STATS=$O/$c.stats.json GRAFT_LOG_LEVEL=debug \
    GRAFT_LOG_FILE=$O/$c.debug.txt timeout 200 python3 $W $c --steps ${STEPS:-40} --warmup 5 | tail -1
  echo "unloads: $(grep -c 'the program unloads' $O/$c.debug.txt)"
  grep "the program unloads\|when loaded again" $O/$c.debug.txt | sed 's/0x[0-9a-f]*/X/g; s/[0-9]\+ /N /g' | sort | uniq -c |
    sort -rn | head -8
  python3 -c "
import json; d=json.load(open('$O/$c.stats.json'))
print('stages (calls, us):', {k: (v['calls'], round(v['us'])) for k, v in d['cpu_time'].items() if v['calls']})
print('replay:', d['replay'])"
elif [ "$PART" = scan ]; then
  t0=$(date +%s)
  for c in ${3//,/ }; do
    if [ $(( $(date +%s) - t0 )) -gt ${SCAN_BUDGET:-100000} ]; then echo "$c: skipped (SCAN_BUDGET)"; continue; fi
    LD_PRELOAD=$BA/src/libgraft.so GRAFT_MODE=graph GRAFT_BENCH_SWITCH=1 GRAFT_LOG_LEVEL=warn GRAFT_SUMMARY=0 \
      timeout 120 python3 $W $c --interleave passthrough,graph --cycles ${CYCLES:-8} --block 5 --warmup 40 \
      --json $O/$c.json > $O/$c.log 2>&1 || echo "$c: exit $? ($(tail -1 $O/$c.log))"
  done
  python3 - $O <<'PY'
import json, sys, glob, os, statistics as S
print("| case | eager ms/step | graft ms/step | graft ÷ eager, paired median | per cycle (min, max) |")
print("|---|---|---|---|---|")
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    I = json.load(open(f))["interleaved"]; e, g = I["passthrough"], I["graph"]
    r = [g[i] / e[i] for i in range(len(e))]
    print("| %s | %.3f | %.3f | %.3f | %.3f, %.3f |" % (os.path.basename(f)[:-5], S.median(e), S.median(g), S.median(r), min(r), max(r)))
PY
elif [ "$PART" = steps ]; then
  STEPS=${STEPS:-260}
  for r in $(seq 1 ${ROUNDS:-2}); do
    for c in $(echo ${CASES:-moe} | tr , " "); do
      for v in ${VARIANTS:-eager passthrough graph}; do
        name=$(echo $v | tr "=,:" "---")
        mode=${v%%:*}; envs=""; [ "$mode" != "$v" ] && envs="${v#*:}" && envs="${envs//,/ }"
        pre="LD_PRELOAD=$BA/src/libgraft.so GRAFT_MODE=$mode GRAFT_PROFILE=1 GRAFT_STATS=$O/$c.$name.r$r.stats.json"
        [ "$mode" = eager ] && pre=""
        env $pre $envs GRAFT_LOG_LEVEL=warn GRAFT_SUMMARY=0 timeout 300 python3 $W $c --steps $STEPS --warmup 10 \
          --json $O/$c.$name.r$r.json 2>&1 | tail -1
      done
    done
  done
  python3 - $O <<'PY'
import json, sys, glob, os, statistics as S
O = sys.argv[1]
rows = {}
for f in sorted(glob.glob(O + "/*.r*.json")):
    if f.endswith(".stats.json"):
        continue
    base = os.path.basename(f)[:-5]
    key, rnd = base.rsplit(".r", 1)
    d = json.load(open(f)); t = d["step_ms"]; n = len(t)
    thirds = [S.median(t[i * n // 3:(i + 1) * n // 3]) for i in range(3)]
    st = {}
    sf = f[:-5] + ".stats.json"
    if os.path.exists(sf):
        st = json.load(open(sf))
    rows.setdefault(key, []).append((d["ms_per_step_median"], thirds, st, n))
print("| case.variant | ms/step (rounds) | first third | second | last | coverage | graphs built | dropped | replays | fallbacks |")
print("|---|---|---|---|---|---|---|---|---|---|")
for key, rs in rows.items():
    med = [r[0] for r in rs]
    th = [S.median(r[1][i] for r in rs) for i in range(3)]
    rp = (rs[-1][2] or {}).get("replay", {})
    print("| %s | %s | %.3f | %.3f | %.3f | %s | %s | %s | %s | %s |" % (
        key, ", ".join("%.3f" % m for m in med), th[0], th[1], th[2], "%.1f %%" % rp["coverage_pct"] if rp else "-",
        rp.get("graphs_built", "-"), rp.get("graphs_dropped_mismatching", "-"), rp.get("replays", "-"),
        json.dumps(rp.get("fallbacks", {}))[:120] if rp else "-"))
print()
print("graft's CPU time by stage, us per timed step (GRAFT_PROFILE; all steps incl. warm-up / timed steps):")
for key, rs in rows.items():
    st, n = rs[-1][2], rs[-1][3]
    ct = st.get("cpu_time") if st else None
    if not ct:
        continue
    parts = ["%s %.0f (%d calls)" % (k, v["us"] / n, v["calls"] // n) for k, v in ct.items() if v["us"] / n >= 1]
    tot = sum(v["us"] for v in ct.values()) / n
    ops = st["replay"]["ops_total"] / n
    print("%s: total %.0f us/step over %.0f ops/step: %s" % (key, tot, ops, "; ".join(parts)))
PY
fi
