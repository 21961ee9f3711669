#!/usr/bin/env bash
# Short re-check of a new libgraft on the GPU: PyTorch losses eager vs graft
# (coverage and replays next to the previous run's) and the no-argument demo.
B=${1:-.gpu/build}; L=$PWD/$B/src/libgraft.so; O=/tmp/rc; mkdir -p $O
export PYTHONUNBUFFERED=1
GRAFT_BUILD_DIR=$PWD/$B timeout 60 scripts/graft > $O/graft_demo.txt 2>&1
timeout 230 python3 tests/gpu/check_losses.py --libgraft $L --cases ${2:-gpt,sidestream,amp,partgraph,mlp_item} \
  --steps 300 --budget-s 210 --out $O/check_losses > $O/check_losses.txt 2>&1
(cd /tmp && tar czf $OUT/rc.tgz rc)
cat $O/graft_demo.txt; sed -n '/=== RESULT ===/,$p' $O/check_losses.txt
