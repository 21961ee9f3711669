#!/usr/bin/env bash
# Forty-sixth session's GPU steps. BUILD = a folder packed by scripts/gpu-pack.
#   OUT=dir scripts/gpu-session46.sh BUILD record CASES [STEPS]
#       each PyTorch case's op order (graft's trace log, nothing built), compacted
#       by tests/sim/compact_trace.py into OUT/CASE.trace.gz
#   OUT=dir [LIBS="libgraft_base.so libgraft.so"] [ROUNDS=2] scripts/gpu-session46.sh BUILD ab CASES [STEPS]
#       each case STEPS steps (300) in one process per mode, eager and under each
#       library, ROUNDS rounds with the order rotating: ms/step (median of the
#       step times for loops that sync, else the whole loop), the ms spent in
#       each half, and graft's CPU time by stage (GRAFT_PROFILE), coverage,
#       graphs built, replays and ops issued again after mismatches
#   OUT=dir scripts/gpu-session46.sh BUILD traps|losses|diag|scanab ...   as gpu-session45.sh
# A table last.
B=${1:-.gpu/build}; BA=$(cd "$B" && pwd); WHAT=${2:-ab}
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONDONTWRITEBYTECODE=1
W=tests/gpu/workloads.py
case "$WHAT" in
record)
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  O=${OUT:-/tmp}/rec; mkdir -p "$O"
  for c in ${3//,/ }; do
    LD_PRELOAD=$BA/src/libgraft.so GRAFT_WARMUP=1000 GRAFT_DORMANT_AFTER_OPS=0 GRAFT_LOG_LEVEL=trace \
      GRAFT_LOG_FILE=$O/$c.log timeout 300 python3 $W $c --steps ${4:-300} --warmup 2 > $O/$c.out 2>&1
    echo "$c rc=$? $(tail -1 $O/$c.out | cut -c1-80) ops=$(grep -c token $O/$c.log)"
    grep token $O/$c.log > $O/$c.tokens && python3 tests/sim/compact_trace.py $O/$c.tokens ${OUT:-/tmp}/$c.trace.gz
  done
  rm -rf "$O";;
ab)
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  O=${OUT:-/tmp}/ab; rm -rf "$O"; mkdir -p "$O"; N=${4:-300}
  LIBS=${LIBS:-libgraft_base.so libgraft.so}
  for c in ${3//,/ }; do
    for r in $(seq 1 ${ROUNDS:-2}); do
      modes="eager $LIBS"; [ $((r % 2)) = 0 ] && modes="$(echo $modes | tr ' ' '\n' | tac | tr '\n' ' ')"
      for m in $modes; do
        if [ $m = eager ]; then
          timeout 200 python3 $W $c --steps $N --json $O/$c.$m.$r.json > $O/$c.$m.$r.out 2>&1 || echo "$c $m: exit $?"
        else
          LD_PRELOAD=$BA/src/$m GRAFT_PROFILE=1 GRAFT_STATS=$O/$c.$m.$r.stats.json GRAFT_LOG_LEVEL=warn \
            timeout 200 python3 $W $c --steps $N --json $O/$c.$m.$r.json > $O/$c.$m.$r.out 2>&1 || echo "$c $m: exit $?"
        fi
      done
    done
  done
  python3 - $O "${3//,/ }" eager $LIBS <<'PY'
import json, sys, glob, statistics as S
o, cases, modes = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
print("| case | mode | ms/step (rounds) | first half ms | second half ms | through graphs | graphs built | replays | mismatch ops | build ms | record ms | top stages ms |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for c in cases:
    for m in modes:
        runs = sorted(glob.glob(f"{o}/{c}.{m}.*.json"))
        runs = [f for f in runs if not f.endswith(".stats.json")]
        ms, h1, h2, st = [], [], [], None
        for f in runs:
            d = json.load(open(f)); t = d["step_ms"]; ms.append(d["ms_per_step_median"])
            h1.append(sum(t[:len(t)//2])); h2.append(sum(t[len(t)//2:]))
            try: st = json.load(open(f.replace(".json", ".stats.json")))
            except Exception: pass
        if not ms: print(f"| {c} | {m} | (none) |"); continue
        row = f"| {c} | {m} | {S.median(ms):.3f} ({', '.join(f'{x:.3f}' for x in ms)}) | {S.median(h1):.0f} | {S.median(h2):.0f} |"
        if st:
            r = st["replay"]; ct = st.get("cpu_time", {})
            g = lambda k: ct.get(k, {}).get("us", 0) / 1e3
            top = sorted(((k, v["us"] / 1e3) for k, v in ct.items() if v.get("calls")), key=lambda kv: -kv[1])[:4]
            row += f" {r['coverage_pct']:.1f} % | {r['graphs_built']} | {r['replays']} | {r['fallbacks'].get('mismatch', 0)} | {g('build'):.0f} | {g('record'):.0f} | {', '.join(f'{k} {v:.0f}' for k, v in top)} |"
        else:
            row += " | | | | | | |"
        print(row)
PY
  cd "${OUT:-/tmp}" && tar czf ab.tgz ab && rm -rf ab;;
*) exec "$(dirname "$0")/gpu-session45.sh" "$@";;
esac
