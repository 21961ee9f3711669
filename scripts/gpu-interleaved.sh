#!/usr/bin/env bash
# Issue 4's speed targets, timed interleaved in one process per run (graft's
# benchmark switch, tests/gpu/bench_interleaved.py): eager (passthrough), graft
# and the launch-free floor (swallow) in rotating blocks of a few steps.
#   scripts/gpu-interleaved.sh BUILD CASES RUNS CYCLES BLOCK [--match]
# --match also times graft's match mode (see bench_interleaved.py).
B=${1:-.gpu/build}; CASES=${2:-mlp,mlp_item,gpt}; RUNS=${3:-5}; CYCLES=${4:-150}; BLOCK=${5:-5}; EXTRA=${6:-}
BA=$(cd "$B" && pwd) || exit 2   # absolute, whatever the caller passed
O=${OUT:-/tmp}/interleaved; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 tests/gpu/bench_interleaved.py --libgraft $BA/src/libgraft.so --cases $CASES --runs $RUNS \
  --cycles $CYCLES --block $BLOCK --warmup 40 $EXTRA --out $O/interleaved.$(echo $CASES | tr , _).json --workdir $O/runs
