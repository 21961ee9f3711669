#!/usr/bin/env bash
# graft's own CPU time per PyTorch step, by stage (GRAFT_PROFILE=1), for the
# next attempt at issue 4's per-op cost. Prints one table per case.
#   scripts/gpu-profile.sh [BUILD] [CASES] [STEPS]
B=${1:-.gpu/build}; CASES=${2:-mlp,gpt}; STEPS=${3:-300}
BA=$(cd "$B" && pwd) || exit 2
O=${OUT:-/tmp}/profile; mkdir -p "$O"
for c in ${CASES//,/ }; do
  LD_PRELOAD=$BA/src/libgraft.so GRAFT_MODE=graph GRAFT_PROFILE=1 GRAFT_STATS=$O/$c.json GRAFT_LOG_LEVEL=warn \
    CUBLAS_WORKSPACE_CONFIG=:4096:8 python3 tests/gpu/workloads.py "$c" --steps "$STEPS" --warmup 40 | tail -n 1
  python3 - "$O/$c.json" "$c" "$STEPS" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); steps = int(sys.argv[3])
cpu = r.get("cpu_time") or {}
print("%s: %d stream-ordered ops, %s replays over %d steps" % (sys.argv[2], r["replay"]["ops_total"],
      r["replay"]["replays"], steps))
print("| stage | calls/step | us/call | us/step |")
print("|---|---|---|---|")
total = 0.0
for name, v in cpu.items():
    total += v["us"] / steps
    print("| %s | %.1f | %.3f | %.1f |" % (name, v["calls"] / steps, v["us_per_call"], v["us"] / steps))
print("| all of graft's timed work | | | %.1f |" % total)
patched = r.get("kernels_patched") or []
if patched:
    print("node updates per step by kernel: " + ", ".join("%s %.1f" % (k["name"][:60], k["count"] / steps)
                                                      for k in patched[:10]))
PY
done
