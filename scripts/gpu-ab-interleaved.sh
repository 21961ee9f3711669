#!/usr/bin/env bash
# A/B of libgraft builds (or settings) with the in-process interleaved
# benchmark: each run is one process timing eager (passthrough), graft and the
# floor (swallow) in rotating blocks; the variants alternate run by run.
#   scripts/gpu-ab-interleaved.sh BUILD VARIANT_A VARIANT_B CASES ROUNDS CYCLES BLOCK [VARIANT...]
# A variant is a library under BUILD/src, optionally with graft settings:
#   libgraft_b.so  or  libgraft_b.so:GRAFT_ASYNC_LAUNCH=0[,NAME=VALUE...]
# With MATCH=1 in the environment each run also times graft's match mode
# (bench_interleaved.py --match) and the table gives graft's cost split into
# work on the program's thread and launching, as shares of the gap.
# WARMUP=N: graft-mode steps before the timed cycles (default 40).
B=${1:-.gpu/build}; A=$2; Bl=$3; CASES=${4:-mlp,gpt}; ROUNDS=${5:-2}; CYCLES=${6:-100}; BLOCK=${7:-5}
VARIANTS=("$A" "$Bl" "${@:8}")
BA=$(cd "$B" && pwd) || exit 2   # absolute, whatever the caller passed
O=${OUT:-/tmp}/ab; mkdir -p $O
for r in $(seq 1 $ROUNDS); do
  for v in "${VARIANTS[@]}"; do
    lib=${v%%:*}; envs=(); [ "$v" != "$lib" ] && IFS=, read -ra envs <<< "${v#*:}"
    genv=(); for e in "${envs[@]}"; do genv+=(--graft-env "$e"); done
    tag=$(echo "$v" | tr ':=,/' '____')
    echo "== round $r $v"
    python3 tests/gpu/bench_interleaved.py --libgraft $BA/src/$lib "${genv[@]}" --cases $CASES --runs 1 \
      --cycles $CYCLES --block $BLOCK --warmup ${WARMUP:-40} ${MATCH:+--match} --out $O/$tag.r$r.json --workdir $O/w | grep '^run'
  done
done
# Summary: per variant and case, the median over rounds of each run's paired
# per-cycle medians (each round's value in brackets).
python3 - "$O" "${MATCH:-0}" "${VARIANTS[@]}" <<'PY'
import glob, json, statistics, sys
o, match, variants = sys.argv[1], sys.argv[2] == "1", sys.argv[3:]
extra = " match - floor (program thread), % of gap | graft - match (launching), % of gap |" if match else ""
print("| variant | case | gap removed | speedup eager ÷ graft | floor's speedup |" + extra)
print("|---|---|---|---|---|" + ("---|---|" if match else ""))
for v in variants:
    tag = v.replace(":", "_").replace("=", "_").replace(",", "_").replace("/", "_")
    runs = {}
    for path in sorted(glob.glob("%s/%s.r*.json" % (o, tag))):
        for case, rs in json.load(open(path))["results"].items():
            runs.setdefault(case, []).extend(rs)
    for case, rs in runs.items():
        def cell(key, fmt, scale=1):
            vals = [r[key] for r in rs if r.get(key) is not None]
            return (fmt % (scale * statistics.median(vals)) + " [" + ", ".join(fmt % (scale * v) for v in vals) + "]") if vals else "-"
        row = "| %s | %s | %s | %s | %s |" % (v, case, cell("gap", "%.0f %%", 100), cell("speedup", "%.3fx"),
                                            cell("ceiling", "%.3fx"))
        if match:
            row += " %s | %s |" % (cell("thread_share", "%.1f", 100), cell("launch_share", "%.1f", 100))
        print(row)
PY
