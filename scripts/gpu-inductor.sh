#!/usr/bin/env bash
# torch.compile's default mode (Inductor: Triton kernels issued by Triton's own
# launcher) under graft, one device call: losses eager vs graft, bitwise, then
# eager / graft / floor timed interleaved in-process.
#   OUT=dir scripts/gpu-inductor.sh BUILD [CASES] [RUNS] [CYCLES]
B=${1:-.gpu/build}; CASES=${2:-inductor_mlp,inductor_gpt}; RUNS=${3:-3}; CYCLES=${4:-40}
L=$PWD/$B/src/libgraft.so; O=/tmp/inductor; rm -rf $O; mkdir -p $O
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 420 python3 tests/gpu/check_losses.py --libgraft $L --cases $CASES --steps 300 --timeout 200 \
  --out $O/losses > $O/losses.txt 2>&1
echo "check_losses exit $?" >> $O/losses.txt
if [ "$RUNS" -gt 0 ]; then
  timeout 240 python3 tests/gpu/bench_interleaved.py --libgraft $L --cases $CASES --runs $RUNS \
    --cycles $CYCLES --block 5 --warmup 40 --match --out $O/interleaved.json --workdir $O/runs > $O/interleaved.txt 2>&1
fi
(cd /tmp && tar czf ${OUT:-/tmp}/inductor.tgz inductor)
grep -h "first replay\|fallback\|summary\|coverage" $O/losses/*.graftlog.txt 2>/dev/null | head -30
echo "=== PyTorch losses ==="; sed -n '/=== RESULT ===/,$p' $O/losses.txt | head -20; tail -2 $O/losses.txt
echo "=== interleaved ==="; tail -12 $O/interleaved.txt 2>/dev/null
