#!/usr/bin/env bash
# Twentieth session: the launch fast lane in one function (fewer code lines per
# op), and event queries that flush only a record graft still holds.
#   OUT=dir scripts/gpu-session20.sh BUILD ab [ROUNDS]
#       in-process interleaved A/B with match mode (MATCH=1): libgraft_old.so
#       (the nineteenth session's HEAD) against libgraft.so, mlp, gpt, mlp_item
#   OUT=dir scripts/gpu-session20.sh BUILD check
#       every trap (pool_max_size also with libgraft_old.so, which does not retry
#       cudaMallocFromPoolAsync); PyTorch losses bitwise for mlp, gpt, sidestream, loader;
#       then the loader case once more under each library with GRAFT_STATS:
#       eager ops by reason (query_in_segment is what the query change removes)
#   OUT=dir scripts/gpu-session20.sh BUILD queries
#       every trap; losses bitwise for sidestream, loader, ddp, mlp, gpt; sidestream and
#       loader once more under each library with GRAFT_STATS (queries graft answered
#       itself, eager ops by reason); then an in-process A/B of the two libraries on
#       sidestream and loader (2 rounds; NO_AB=1 leaves it out)
# Logs tarred into $OUT/s20-PART.tgz; tables last.
B=${1:-.gpu/build}; PART=${2:-ab}; ROUNDS=${3:-3}; L=$PWD/$B/src/libgraft.so; O=/tmp/s20-$PART; rm -rf $O; mkdir -p $O
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [ "$PART" = ab ]; then
  MATCH=1 OUT=$O timeout 570 scripts/gpu-ab-interleaved.sh $B libgraft_old.so libgraft.so mlp,gpt,mlp_item \
    $ROUNDS 30 5 > $O/ab.txt 2>&1
  (cd /tmp && tar czf ${OUT:-/tmp}/s20-$PART.tgz s20-$PART)
  echo "=== A/B, default allocator (old: 57571d5; new: this build) ==="; grep -E "^\|" $O/ab.txt
elif [ "$PART" = queries ]; then
  timeout 200 python3 tests/gpu/check_traps.py --traps $PWD/$B/tests/gpu/traps --traps $PWD/$B/tests/gpu/traps_libs \
    --libgraft $L --timeout 30 --out $O/traps > $O/traps.txt 2>&1
  timeout $((400 - SECONDS)) python3 tests/gpu/check_losses.py --libgraft $L --cases sidestream,loader,ddp,mlp,gpt \
    --steps 300 --budget-s $((380 - SECONDS)) --out $O/losses > $O/losses.txt 2>&1
  for c in sidestream loader; do for lib in libgraft_old.so libgraft.so; do
    [ $SECONDS -gt 460 ] && break
    LD_PRELOAD=$PWD/$B/src/$lib GRAFT_STATS=$O/$c-$lib.json timeout 60 \
      python3 tests/gpu/workloads.py $c --steps 300 > $O/$c-$lib.txt 2>&1
  done; done
  [ -z "$NO_AB" ] && [ $SECONDS -lt 470 ] && OUT=$O timeout $((575 - SECONDS)) scripts/gpu-ab-interleaved.sh $B libgraft_old.so libgraft.so \
    sidestream,loader 2 20 5 > $O/ab.txt 2>&1
  (cd /tmp && tar czf ${OUT:-/tmp}/s20-$PART.tgz s20-$PART)
  echo "=== traps ==="; grep -E "PASS|FAIL" $O/traps.txt | tail -1; grep -E "query_poll|cross_thread|event_reuse|threads|pool_max_size|stream_callback" $O/traps.txt | grep -v "check_traps:"
  echo "=== losses ==="; sed -n '/=== RESULT ===/,$p' $O/losses.txt
  echo "=== 300 steps under each library ==="
  for c in sidestream loader; do for lib in libgraft_old.so libgraft.so; do
    python3 - $O/$c-$lib.json $c $lib <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))["replay"]
    print("%s %s: %d ops, %.1f%% through graphs, %d replays, %s queries answered not ready, eager %s" % (
        sys.argv[2], sys.argv[3], r["ops_total"], r["coverage_pct"], r["replays"],
        r.get("queries_answered_not_ready", "-"), json.dumps(r.get("fallbacks", {}))))
except Exception as e:
    print(sys.argv[2], sys.argv[3], "no stats:", e)
PY
  done; done
  [ -f $O/ab.txt ] && { echo "=== A/B (old: 57571d5; new: this build) ==="; grep -E "^\|" $O/ab.txt; }
  true
else
  timeout 220 python3 tests/gpu/check_traps.py --traps $PWD/$B/tests/gpu/traps --traps $PWD/$B/tests/gpu/traps_libs \
    --libgraft $L --timeout 30 --out $O/traps > $O/traps.txt 2>&1
  timeout 60 python3 tests/gpu/check_traps.py --traps $PWD/$B/tests/gpu/traps --libgraft $PWD/$B/src/libgraft_old.so \
    --timeout 30 --scenarios pool_max_size --out $O/traps_old > $O/traps_old.txt 2>&1
  timeout $((480 - SECONDS)) python3 tests/gpu/check_losses.py --libgraft $L --cases mlp,gpt,sidestream,loader \
    --steps 300 --budget-s $((460 - SECONDS)) --out $O/losses > $O/losses.txt 2>&1
  for lib in libgraft_old.so libgraft.so; do
    [ $SECONDS -gt 540 ] && break
    LD_PRELOAD=$PWD/$B/src/$lib GRAFT_STATS=$O/loader-$lib.json timeout $((580 - SECONDS)) \
      python3 tests/gpu/workloads.py loader --steps 300 > $O/loader-$lib.txt 2>&1
  done
  (cd /tmp && tar czf ${OUT:-/tmp}/s20-$PART.tgz s20-$PART)
  echo "=== traps ==="; grep -E "PASS|FAIL" $O/traps.txt | tail -1; grep -E "pool_max_size|query_poll|pinned" $O/traps.txt | grep -v "check_traps:"
  echo "=== pool_max_size with libgraft_old.so (no retry for pool allocations) ==="; grep -E "pool_max_size|PASS|FAIL" $O/traps_old.txt | tail -3
  echo "=== losses ==="; sed -n '/=== RESULT ===/,$p' $O/losses.txt
  echo "=== loader, eager ops by reason (300 steps) ==="
  for lib in libgraft_old.so libgraft.so; do
    python3 - $O/loader-$lib.json $lib <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))["replay"]
    print("%s: %d ops, %.1f%% through graphs, %d replays, eager by reason %s" % (
        sys.argv[2], r["ops_total"], r["coverage_pct"], r["replays"], json.dumps(r.get("fallbacks", {}))))
except Exception as e:
    print(sys.argv[2], "no stats:", e)
PY
  done
fi
