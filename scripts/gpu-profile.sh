#!/usr/bin/env bash
# graft's own CPU time per PyTorch step in steady state, by stage
# (GRAFT_PROFILE=1). Each case runs twice, for STEPS and 3×STEPS steps after
# the same warm-up; the table is the difference divided by 2×STEPS, so
# one-time work (resolving kernels, building graphs) drops out.
#   scripts/gpu-profile.sh [BUILD] [CASES] [STEPS]
# LIB=NAME profiles BUILD/src/NAME instead of libgraft.so.
B=${1:-.gpu/build}; CASES=${2:-mlp,gpt}; STEPS=${3:-100}; LIB=${LIB:-libgraft.so}
BA=$(cd "$B" && pwd) || exit 2
O=${OUT:-/tmp}/profile/${LIB%.so}; mkdir -p "$O"
for c in ${CASES//,/ }; do
  for n in $STEPS $((3 * STEPS)); do
    LD_PRELOAD=$BA/src/$LIB GRAFT_MODE=graph GRAFT_PROFILE=1 GRAFT_STATS=$O/$c.$n.json GRAFT_LOG_LEVEL=warn \
      CUBLAS_WORKSPACE_CONFIG=:4096:8 python3 tests/gpu/workloads.py "$c" --steps "$n" --warmup 40 | tail -n 1
  done
  python3 - "$O/$c.$STEPS.json" "$O/$c.$((3 * STEPS)).json" "$c" "$((2 * STEPS))" <<'PY'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])); steps = int(sys.argv[4])
ca, cb = a.get("cpu_time") or {}, b.get("cpu_time") or {}
d = lambda key: (b["replay"][key] - a["replay"][key]) / steps
print("%s, steady state (difference of two runs, per step): %.1f stream-ordered ops, %.2f replays, %.1f node "
      "updates" % (sys.argv[3], d("ops_total"), d("replays"), d("patches")))
ka, kb = a["ops"]["by_class"], b["ops"]["by_class"]
print("intercepted calls per step by class: " + ", ".join(
    "%s %.1f" % (k, (v - ka.get(k, 0)) / steps) for k, v in kb.items() if v - ka.get(k, 0)))
if "ops_fast_lane" in b["replay"]:
    print("fast lane: %.1f ops/step (%.0f %% of stream-ordered ops)" % (
        d("ops_fast_lane"), 100 * d("ops_fast_lane") / max(d("ops_total"), 1e-9)))
print("| stage | calls/step | us/call | us/step |")
print("|---|---|---|---|")
total = 0.0
for name, v in cb.items():
    u = v.get("us", 0) - ca.get(name, {}).get("us", 0)
    n = v.get("calls", 0) - ca.get(name, {}).get("calls", 0)
    total += u / steps
    print("| %s | %.1f | %.3f | %.1f |" % (name, n / steps, u / n if n else 0, u / steps))
print("| all of graft's timed work | | | %.1f |" % total)
pa = {k["name"]: k["count"] for k in a.get("kernels_patched") or []}
pb = sorted(((k["count"] - pa.get(k["name"], 0), k["name"]) for k in b.get("kernels_patched") or []), reverse=True)
if pb:
    print("node updates per step by kernel: " + ", ".join("%s %.1f" % (name[:70], n / steps) for n, name in pb[:10]))
PY
done
