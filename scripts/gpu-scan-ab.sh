#!/usr/bin/env bash
# Twenty-seventh session: libgraft_old.so against libgraft.so (BUILD .gpu/build) on cases graft cannot
# graph (dynamic, gnn), each in one process with eager and graft interleaved in 5-step blocks
# (workloads.py --interleave passthrough,graph), 2 rounds. OUT=dir scripts/gpu-scan-ab.sh
# for each round, case and library: workloads.py --interleave passthrough,graph (in-process), graft ÷ eager per cycle
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
B=$PWD/.gpu/build; O=$OUT/scan2; mkdir -p $O
for r in 1 2; do for c in dynamic gnn; do for l in libgraft_old.so libgraft.so; do
  LD_PRELOAD=$B/src/$l GRAFT_MODE=graph GRAFT_BENCH_SWITCH=1 GRAFT_LOG_LEVEL=warn GRAFT_SUMMARY=0 \
    timeout 60 python3 tests/gpu/workloads.py $c --interleave passthrough,graph --cycles 8 --block 5 --warmup 40 \
    --json $O/$c.$l.r$r.json > $O/$c.$l.r$r.log 2>&1 || echo "$c $l: exit $?"
done; done; done
python3 - $O <<'PY'
import json, sys, glob, os, statistics as S
print("| case | library | round | eager ms | graft ms | graft ÷ eager, paired median |")
print("|---|---|---|---|---|---|")
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    I = json.load(open(f))["interleaved"]; e, g = I["passthrough"], I["graph"]
    c, l, r = os.path.basename(f)[:-5].split(".", 1)[0], os.path.basename(f).split(".")[1], f.split(".r")[-1][:-5]
    print("| %s | %s | %s | %.3f | %.3f | %.3f |" % (c, l, r, S.median(e), S.median(g), S.median([g[i]/e[i] for i in range(len(e))])))
PY
