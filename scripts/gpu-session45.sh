#!/usr/bin/env bash
# Forty-fifth session's GPU steps. BUILD = a folder packed by scripts/gpu-pack.
#   OUT=dir scripts/gpu-session45.sh BUILD diag CASES [STEPS]
#       each PyTorch case once eagerly and once under graft (GRAFT_PROFILE,
#       debug log): step time, coverage, graphs built, replays, fallbacks, the
#       unloads graft saw (kinds, counts), graft's CPU time by stage; the logs
#       come back compressed as OUT/diag.tgz
#   OUT=dir [CYCLES=6] [LIBS="libgraft_base.so libgraft.so"] scripts/gpu-session45.sh BUILD scanab CASES
#       each case in one process per library, eager (passthrough) and graft
#       interleaved in blocks of 5 steps after 40 warm-up steps (as
#       gpu-session26.sh scan): graft ÷ eager, the median of the cycles'
#       ratios, per library, libraries alternating case by case
#   OUT=dir scripts/gpu-session45.sh BUILD traps|losses|diag41 ...   as gpu-session41.sh
# A table last.
B=${1:-.gpu/build}; BA=$(cd "$B" && pwd); WHAT=${2:-diag}
if [ "$WHAT" = scanab ]; then
  export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONDONTWRITEBYTECODE=1
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  O=${OUT:-/tmp}/scanab; rm -rf "$O"; mkdir -p "$O"
  for c in ${3//,/ }; do
    for lib in ${LIBS:-libgraft_base.so libgraft.so}; do
      LD_PRELOAD=$BA/src/$lib GRAFT_MODE=graph GRAFT_BENCH_SWITCH=1 GRAFT_LOG_LEVEL=warn GRAFT_SUMMARY=0 \
        timeout 150 python3 tests/gpu/workloads.py $c --interleave passthrough,graph --cycles ${CYCLES:-6} --block 5 \
        --warmup 40 --json "$O/$c@$lib.json" > "$O/$c@$lib.log" 2>&1 || echo "$c $lib: exit $? ($(tail -1 "$O/$c@$lib.log"))"
    done
  done
  python3 - "$O" ${LIBS:-libgraft_base.so libgraft.so} <<'PY'
import json, sys, glob, os, statistics as S
o, libs = sys.argv[1], sys.argv[2:]
cases = sorted({os.path.basename(f).split("@")[0] for f in glob.glob(o + "/*.json")})
print("| case | " + " | ".join(f"{l}: eager ms, graft ms, graft ÷ eager [min, max]" for l in libs) + " |")
print("|---|" + "---|" * len(libs))
for c in cases:
    row = []
    for l in libs:
        try:
            I = json.load(open(f"{o}/{c}@{l}.json"))["interleaved"]; e, g = I["passthrough"], I["graph"]
            r = [g[i] / e[i] for i in range(len(e))]
            row.append(f"{S.median(e):.3f}, {S.median(g):.3f}, **{S.median(r):.3f}** [{min(r):.2f}, {max(r):.2f}]")
        except Exception as x:
            row.append(f"({type(x).__name__})")
    print(f"| {c} | " + " | ".join(row) + " |")
PY
  exit 0
fi
if [ "$WHAT" != diag ]; then [ "$WHAT" = diag41 ] && set -- "$1" diag "${@:3}"; exec "$(dirname "$0")/gpu-session41.sh" "$@"; fi
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
O=${OUT:-/tmp}/diag; rm -rf "$O"; mkdir -p "$O"; W=tests/gpu/workloads.py; N=${4:-150}
for c in ${3//,/ }; do
  timeout 200 python3 $W $c --steps $N --json $O/$c.eager.json > $O/$c.eager.out 2>&1 || echo "$c eager: exit $?"
  LD_PRELOAD=$BA/src/libgraft.so GRAFT_PROFILE=1 GRAFT_STATS=$O/$c.stats.json GRAFT_LOG_LEVEL=debug \
    GRAFT_LOG_FILE=$O/$c.debug.txt timeout 200 python3 $W $c --steps $N --json $O/$c.graft.json > $O/$c.graft.out 2>&1 ||
    echo "$c graft: exit $?"
  echo "=== $c: log lines by kind (numbers and handles folded)"
  sed 's/^[^]]*] //; s/0x[0-9a-f]*/X/g; s/[0-9][0-9.]*/N/g' $O/$c.debug.txt | sort | uniq -c | sort -rn | head -${LINES_SHOWN:-25}
  python3 - $O $c <<'PY'
import json, sys
o, c = sys.argv[1:]
d = json.load(open(f"{o}/{c}.stats.json")); r = d["replay"]
print("stages us/step:", {k: round(v["us"] / max(1, r["ops_total"]) , 3) for k, v in d.get("cpu_time", {}).items() if v["calls"]})
print("replay:", {k: v for k, v in r.items() if k != "fallbacks"})
print("fallbacks:", sorted(r["fallbacks"].items(), key=lambda kv: -kv[1])[:8])
PY
done
python3 - $O ${3//,/ } <<'PY'
import json, sys, statistics as S
o = sys.argv[1]
print("| case | eager ms | graft ms | graft ÷ eager | through graphs | graphs built | replays |")
print("|---|---|---|---|---|---|---|")
for c in sys.argv[2:]:
    try:
        e = json.load(open(f"{o}/{c}.eager.json")); g = json.load(open(f"{o}/{c}.graft.json"))
        r = json.load(open(f"{o}/{c}.stats.json"))["replay"]
        em, gm = S.median(e["step_ms"]), S.median(g["step_ms"])
        print(f"| {c} | {em:.3f} | {gm:.3f} | {gm/em:.3f} | {r['coverage_pct']:.1f} % | {r['graphs_built']} | {r['replays']} |")
    except Exception as x:
        print(f"| {c} | ({x}) |")
PY
cd "${OUT:-/tmp}" && tar czf diag.tgz diag && rm -rf diag
