#!/usr/bin/env bash
# Eighteenth session, verification of a build in two device calls:
#   OUT=dir scripts/gpu-session18c.sh BUILD 1   every trap, then PyTorch losses (first half of the cases)
#   OUT=dir scripts/gpu-session18c.sh BUILD 2   the other half, then mlp and amp timed interleaved under
#                                              PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
# Logs tarred into $OUT/s18c-PART.tgz; tables last.
B=${1:-.gpu/build}; PART=${2:-1}; L=$PWD/$B/src/libgraft.so; O=/tmp/s18c-$PART; rm -rf $O; mkdir -p $O
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [ "$PART" = 1 ]; then
  timeout 60 $B/tests/gpu/driver_facts > $O/driver_facts.txt 2>&1; echo "driver_facts exit $?" >> $O/driver_facts.txt
  timeout 300 python3 tests/gpu/check_traps.py --traps $PWD/$B/tests/gpu/traps --traps $PWD/$B/tests/gpu/traps_libs \
    --libgraft $L --timeout 40 --out $O/traps > $O/traps.txt 2>&1
  CASES=mlp,mlp_item,gpt,amp,sidestream,lastbatch,partgraph,gemm,cnn
  BUDGET=$((520 - SECONDS))
else
  CASES=lstm,dynamic,accum,sdpa,ddp,inductor_mlp,inductor_gpt,vit,diffusion,gan,expandable,decode
  BUDGET=390
fi
timeout $((BUDGET + 30)) python3 tests/gpu/check_losses.py --libgraft $L --cases $CASES --steps 300 \
  --budget-s $BUDGET --out $O/losses > $O/losses.txt 2>&1
if [ "$PART" = 2 ]; then
  PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync timeout 120 python3 tests/gpu/bench_interleaved.py --libgraft $L \
    --cases mlp --runs 1 --cycles 12 --block 10 > $O/async_bench.txt 2>&1
fi
(cd /tmp && tar czf ${OUT:-/tmp}/s18c-$PART.tgz s18c-$PART)
[ -f $O/driver_facts.txt ] && tail -1 $O/driver_facts.txt
[ -f $O/traps.txt ] && { echo "=== traps ==="; grep -E "PASS|FAIL" $O/traps.txt | tail -2; }
echo "=== PyTorch losses ==="; sed -n '/=== RESULT ===/,$p' $O/losses.txt
[ -f $O/async_bench.txt ] && { echo "=== backend:cudaMallocAsync, in-process ==="; grep -E "^\| (case|mlp)" $O/async_bench.txt; }
