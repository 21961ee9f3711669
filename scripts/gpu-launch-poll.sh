#!/usr/bin/env bash
# What the launch thread's idle polling (GRAFT_LAUNCH_POLL_US) costs and saves:
# for each CASE, GRAFT_LAUNCH_POLL_US=50 (default) and =0 alternate ROUNDS
# times; each run prints ms/step, the run's wall time, and the launch thread's
# CPU time and deep sleeps from the exit report.
#   scripts/gpu-launch-poll.sh BUILD CASES ROUNDS STEPS
B=${1:-.gpu/build}; CASES=${2:-mlp,mlp_item}; ROUNDS=${3:-2}; STEPS=${4:-300}
BA=$(cd "$B" && pwd) || exit 2
O=${OUT:-/tmp}/launch_poll; mkdir -p "$O"
printf "| case | poll us | round | ms/step | loop s | launch thread cpu s | share of the loop | sleeps until woken |\n|---|---|---|---|---|---|---|---|\n"
for c in ${CASES//,/ }; do
  for r in $(seq 1 "$ROUNDS"); do
    for poll in 50 0; do
      j=$O/$c.$poll.$r
      LD_PRELOAD=$BA/src/libgraft.so GRAFT_MODE=graph GRAFT_LAUNCH_POLL_US=$poll GRAFT_STATS=$j.stats.json \
        GRAFT_LOG_LEVEL=warn python3 tests/gpu/workloads.py "$c" --steps "$STEPS" --warmup 40 --json $j.json \
        > $j.log 2>&1
      python3 - "$j" "$c" "$poll" "$r" "$STEPS" <<'PY'
import json, sys
j, c, poll, r, steps = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
w, s = json.load(open(j + ".json")), json.load(open(j + ".stats.json"))
lt = s.get("launch_thread", {})
loop = w["ms_per_step_median"] * steps / 1000  # the training loop, warm-up included, roughly
print("| %s | %s | %s | %.3f | %.2f | %.3f | %.0f %% | %s |" % (c, poll, r, w["ms_per_step_median"], loop,
      lt.get("cpu_s", 0), 100 * lt.get("cpu_s", 0) / loop, lt.get("sleeps_until_woken")))
PY
    done
  done
done
