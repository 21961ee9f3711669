#!/usr/bin/env bash
# Diagnostic: a few PyTorch workloads eager and under graft (trace log), losses
# compared bitwise; everything tarred into $OUT/t.tgz.
W=tests/gpu/workloads.py; L=${LIBGRAFT:-.gpu/build/src/libgraft.so}; O=$OUT/t; mkdir -p $O
for c in ${CASES:-mlp_item mlp gpt}; do
  timeout 120 python3 $W $c --steps ${STEPS:-60} --losses $O/$c.eager > $O/$c.eager.out 2>&1
  LD_PRELOAD=$L GRAFT_LOG_LEVEL=${LEVEL:-trace} GRAFT_LOG_FILE=$O/$c.log GRAFT_STATS=$O/$c.json \
    timeout 120 python3 $W $c --steps ${STEPS:-60} --losses $O/$c.graft > $O/$c.graft.out 2>&1
  echo "$c rc=$? equal=$(cmp -s $O/$c.eager $O/$c.graft && echo yes || echo NO) $(python3 -c "import json;r=json.load(open('$O/$c.json'))['replay'];print(r['coverage_pct'],r['replays'],r['fallbacks'])" 2>&1)"
  tail -1 $O/$c.eager.out; tail -1 $O/$c.graft.out
done
cd $OUT && tar czf t.tgz t && rm -rf t
