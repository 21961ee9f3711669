#!/usr/bin/env bash
# Re-check of a new libgraft on the GPU: PyTorch losses eager vs graft over 300
# steps (coverage, replays, patches, fallbacks) and the no-argument demo.
#   scripts/gpu-recheck.sh BUILD [CASES] [BUDGET_S]
B=${1:-.gpu/build}; L=$PWD/$B/src/libgraft.so; O=/tmp/rc; mkdir -p $O
CASES=${2:-mlp,mlp_item,gpt,amp,sidestream,lastbatch,partgraph,gemm}; BUDGET=${3:-210}
export PYTHONUNBUFFERED=1
GRAFT_BUILD_DIR=$PWD/$B timeout 60 scripts/graft > $O/graft_demo.txt 2>&1
timeout $((BUDGET + 20)) python3 tests/gpu/check_losses.py --libgraft $L --cases $CASES \
  --steps 300 --budget-s $BUDGET --out $O/check_losses > $O/check_losses.txt 2>&1
(cd /tmp && tar czf $OUT/rc.tgz rc)
cat $O/graft_demo.txt; sed -n '/=== RESULT ===/,$p' $O/check_losses.txt
