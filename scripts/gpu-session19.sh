#!/usr/bin/env bash
# Nineteenth session: stream-ordered frees put behind queued launches.
#   OUT=dir scripts/gpu-session19.sh BUILD ab [ROUNDS]
#       in-process interleaved A/B under PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync:
#       libgraft_old.so (frees wait for queued launches) against libgraft.so, mlp and gpt
#   OUT=dir scripts/gpu-session19.sh BUILD check
#       every trap; PyTorch losses bitwise under backend:cudaMallocAsync and the default allocator
#   OUT=dir scripts/gpu-session19.sh BUILD models
#       PyTorch losses bitwise: the new loader case (DataLoader workers, pin-memory thread), and
#       mlp, gpt under torch.compile(mode="reduce-overhead") (check_losses.py --mode compile)
#   OUT=dir scripts/gpu-session19.sh BUILD final
#       the last check of the final build: every trap; losses bitwise for mlp and gpt under
#       backend:cudaMallocAsync and for sidestream and loader with the default allocator
#   OUT=dir scripts/gpu-session19.sh BUILD copies
#       every trap (unaligned_copies is new), then the copy bench with aligned and misaligned
#       sources (scripts/gpu-copy-bench.sh, 3 rounds, offsets 0, 1 and 2)
# Logs tarred into $OUT/s19-PART.tgz; tables last.
B=${1:-.gpu/build}; PART=${2:-ab}; ROUNDS=${3:-3}; L=$PWD/$B/src/libgraft.so; O=/tmp/s19-$PART; rm -rf $O; mkdir -p $O
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [ "$PART" = ab ]; then
  PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync OUT=$O timeout 560 scripts/gpu-ab-interleaved.sh $B \
    libgraft_old.so libgraft.so mlp,gpt $ROUNDS 10 8 > $O/ab.txt 2>&1
  (cd /tmp && tar czf ${OUT:-/tmp}/s19-$PART.tgz s19-$PART)
  echo "=== backend:cudaMallocAsync, A/B (old: frees wait; new: frees queued) ==="; grep -E "^\|" $O/ab.txt
elif [ "$PART" = final ]; then
  timeout 220 python3 tests/gpu/check_traps.py --traps $PWD/$B/tests/gpu/traps --traps $PWD/$B/tests/gpu/traps_libs \
    --libgraft $L --timeout 30 --out $O/traps > $O/traps.txt 2>&1
  PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync timeout 100 python3 tests/gpu/check_losses.py --libgraft $L \
    --cases mlp,gpt --steps 300 --budget-s 90 --out $O/async > $O/async.txt 2>&1
  timeout $((570 - SECONDS)) python3 tests/gpu/check_losses.py --libgraft $L --cases sidestream,loader \
    --steps 300 --budget-s $((540 - SECONDS)) --out $O/default > $O/default.txt 2>&1
  (cd /tmp && tar czf ${OUT:-/tmp}/s19-$PART.tgz s19-$PART)
  echo "=== traps ==="; grep -E "PASS|FAIL" $O/traps.txt | tail -1
  grep -E "unaligned_copies|malloc_async|realloc_each" $O/traps.txt | grep -v "check_traps:"
  echo "=== losses, backend:cudaMallocAsync ==="; sed -n '/=== RESULT ===/,$p' $O/async.txt
  echo "=== losses, default allocator ==="; sed -n '/=== RESULT ===/,$p' $O/default.txt
elif [ "$PART" = copies ]; then
  # QUICK=1: only the traps with device copies and memsets
  timeout 220 python3 tests/gpu/check_traps.py --traps $PWD/$B/tests/gpu/traps --traps $PWD/$B/tests/gpu/traps_libs \
    --libgraft $L --timeout 30 --out $O/traps \
    ${QUICK:+--scenarios unaligned_copies,copy_kinds,odd_ops,memset_host,realloc_each_step,malloc_async,memset_values,batch_copy} \
    > $O/traps.txt 2>&1
  OFFS="0 1 2"; [ -n "$QUICK" ] && OFFS="0 1"
  for off in $OFFS; do
    timeout 100 scripts/gpu-copy-bench.sh $B 3 "4096 1048576 16777216 134217728" $off > $O/bench$off.txt 2>&1
  done
  [ -z "$QUICK" ] && LIB=libgraft_old.so timeout 100 scripts/gpu-copy-bench.sh $B 3 \
    "4096 1048576 16777216 134217728" 1 > $O/bench1old.txt 2>&1
  (cd /tmp && tar czf ${OUT:-/tmp}/s19-$PART.tgz s19-$PART)
  echo "=== traps ==="; grep -E "PASS|FAIL" $O/traps.txt | tail -1
  grep -E "unaligned_copies|copy_kinds|odd_ops|memset_host|realloc_each|malloc_async" $O/traps.txt | grep -v "check_traps:"
  echo "=== copy bench (us per step; graft: graft's copy kernels; graph: the driver's nodes) ==="
  cat $O/bench0.txt $O/bench1.txt $O/bench2.txt $O/bench1old.txt 2>/dev/null || true
elif [ "$PART" = models ]; then
  timeout 150 python3 tests/gpu/check_losses.py --libgraft $L --cases loader --steps 300 --budget-s 140 \
    --out $O/loader > $O/loader.txt 2>&1
  timeout $((560 - SECONDS)) python3 tests/gpu/check_losses.py --libgraft $L --mode compile --cases mlp,gpt \
    --steps 300 --budget-s $((530 - SECONDS)) --out $O/compile > $O/compile.txt 2>&1
  (cd /tmp && tar czf ${OUT:-/tmp}/s19-$PART.tgz s19-$PART)
  echo "=== loader ==="; sed -n '/=== RESULT ===/,$p' $O/loader.txt; tail -3 $O/loader.txt | grep -v RESULT
  echo "=== torch.compile reduce-overhead ==="; sed -n '/=== RESULT ===/,$p' $O/compile.txt; tail -3 $O/compile.txt
else
  timeout 200 python3 tests/gpu/check_traps.py --traps $PWD/$B/tests/gpu/traps --traps $PWD/$B/tests/gpu/traps_libs \
    --libgraft $L --timeout 30 --out $O/traps > $O/traps.txt 2>&1
  PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync timeout 200 python3 tests/gpu/check_losses.py --libgraft $L \
    --cases mlp,gpt,amp,sidestream --steps 300 --budget-s 190 --out $O/async > $O/async.txt 2>&1
  timeout $((560 - SECONDS)) python3 tests/gpu/check_losses.py --libgraft $L --cases mlp,gpt,decode,expandable \
    --steps 300 --budget-s $((540 - SECONDS)) --out $O/default > $O/default.txt 2>&1
  (cd /tmp && tar czf ${OUT:-/tmp}/s19-$PART.tgz s19-$PART)
  echo "=== traps ==="; grep -E "PASS|FAIL" $O/traps.txt | tail -1
  grep -E "malloc_async|realloc_each" $O/traps.txt | grep -v "check_traps:"
  echo "=== frees put behind queued launches (graft runs, backend:cudaMallocAsync) ==="
  grep -rho "[0-9]* stream-ordered frees\? put behind queued launches" $O/async | sort | uniq -c | head
  echo "=== losses, backend:cudaMallocAsync ==="; sed -n '/=== RESULT ===/,$p' $O/async.txt
  echo "=== losses, default allocator ==="; sed -n '/=== RESULT ===/,$p' $O/default.txt
fi
