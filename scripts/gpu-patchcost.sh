#!/usr/bin/env bash
# Experiment: the driver's cost of exec-graph kernel node updates, and graft's
# segments and patches in the GPT workload.
B=${1:-.gpu/build}; O=${OUT:-/tmp}/pc; mkdir -p $O
$B/bench/patch_cost
LD_PRELOAD=$B/src/libgraft.so GRAFT_LOG_LEVEL=debug GRAFT_LOG_FILE=$O/gpt.log GRAFT_STATS=$O/gpt.json \
  timeout 120 python3 tests/gpu/workloads.py gpt --steps 150 > $O/gpt.out 2>&1
tail -1 $O/gpt.out
timeout 120 python3 tests/gpu/workloads.py gpt --steps 150 | tail -1
LD_PRELOAD=$B/src/libgraft.so GRAFT_MODE=swallow timeout 120 python3 tests/gpu/workloads.py gpt --steps 150 | tail -1
cd $OUT && tar czf pc.tgz pc && rm -rf pc
