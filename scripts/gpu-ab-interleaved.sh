#!/usr/bin/env bash
# A/B of two libgraft builds with the in-process interleaved benchmark: each
# run is one process timing eager (passthrough), graft and the floor (swallow)
# in rotating blocks; the builds alternate run by run.
#   scripts/gpu-ab-interleaved.sh BUILD LIB_A LIB_B CASES ROUNDS CYCLES BLOCK
B=${1:-.gpu/build}; A=$2; Bl=$3; CASES=${4:-mlp,gpt}; ROUNDS=${5:-2}; CYCLES=${6:-100}; BLOCK=${7:-5}
BA=$(cd "$B" && pwd) || exit 2   # absolute, whatever the caller passed
O=${OUT:-/tmp}/ab; mkdir -p $O
for r in $(seq 1 $ROUNDS); do
  for lib in $A $Bl; do
    echo "== round $r $lib"
    python3 tests/gpu/bench_interleaved.py --libgraft $BA/src/$lib --cases $CASES --runs 1 \
      --cycles $CYCLES --block $BLOCK --warmup 40 --out $O/$lib.r$r.json --workdir $O/w | grep '^run'
  done
done
# Summary: per build and case, the median over rounds of each run's paired
# per-cycle medians (each round's value in brackets).
python3 - "$O" "$A" "$Bl" <<'PY'
import glob, json, statistics, sys
o, libs = sys.argv[1], sys.argv[2:]
print("| build | case | gap removed | speedup eager ÷ graft | floor's speedup |")
print("|---|---|---|---|---|")
for lib in libs:
    runs = {}
    for path in sorted(glob.glob("%s/%s.r*.json" % (o, lib))):
        for case, rs in json.load(open(path))["results"].items():
            runs.setdefault(case, []).extend(rs)
    for case, rs in runs.items():
        def cell(key, fmt, scale=1):
            vals = [r[key] for r in rs if r.get(key) is not None]
            return (fmt % (scale * statistics.median(vals)) + " [" + ", ".join(fmt % (scale * v) for v in vals) + "]") if vals else "-"
        print("| %s | %s | %s | %s | %s |" % (lib, case, cell("gap", "%.0f %%", 100), cell("speedup", "%.3fx"),
                                             cell("ceiling", "%.3fx")))
PY
