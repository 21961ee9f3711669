#!/usr/bin/env bash
# A/B of libgraft builds with the in-process interleaved benchmark and graft's
# match mode (bench_interleaved.py --match): per variant, eager, graft, floor
# and match, so graft's cost splits into work on the program's thread
# (match - floor) and launching (graft - match). Variants alternate run by run.
#   scripts/gpu-match-ab.sh BUILD CASES ROUNDS CYCLES BLOCK LIB...
B=${1:-.gpu/build}; CASES=${2:-mlp,mlp_item,gpt}; ROUNDS=${3:-2}; CYCLES=${4:-60}; BLOCK=${5:-5}
BA=$(cd "$B" && pwd) || exit 2
O=${OUT:-/tmp}/match-ab; mkdir -p "$O"
for r in $(seq 1 "$ROUNDS"); do
  for lib in "${@:6}"; do
    echo "== round $r $lib"
    python3 tests/gpu/bench_interleaved.py --libgraft "$BA/src/$lib" --cases "$CASES" --runs 1 --cycles "$CYCLES" \
      --block "$BLOCK" --warmup 40 --match --out "$O/$lib.r$r.json" --workdir "$O/w" | grep '^run'
  done
done
python3 - "$O" "${@:6}" <<'PY'
import glob, json, statistics, sys
o, libs = sys.argv[1], sys.argv[2:]
print("| variant | case | gap removed | eager ÷ graft | match - floor (program thread), % of gap | graft - match (launching), % of gap |")
print("|---|---|---|---|---|---|")
for lib in libs:
    runs = {}
    for path in sorted(glob.glob("%s/%s.r*.json" % (o, lib))):
        for case, rs in json.load(open(path))["results"].items():
            runs.setdefault(case, []).extend(rs)
    for case, rs in runs.items():
        def cell(key, fmt, scale=1):
            vals = [r[key] for r in rs if r.get(key) is not None]
            return (fmt % (scale * statistics.median(vals)) + " [" + ", ".join(fmt % (scale * v) for v in vals) + "]") if vals else "-"
        print("| %s | %s | %s | %s | %s | %s |" % (lib, case, cell("gap", "%.0f %%", 100), cell("speedup", "%.3fx"),
                                               cell("thread_share", "%.1f", 100), cell("launch_share", "%.1f", 100)))
PY
