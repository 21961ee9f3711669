#!/usr/bin/env bash
# A/B of two libgraft builds with the in-process interleaved benchmark: each
# run is one process timing eager (passthrough), graft and the floor (swallow)
# in rotating blocks; the builds alternate run by run.
#   scripts/gpu-ab-interleaved.sh BUILD LIB_A LIB_B CASES ROUNDS CYCLES BLOCK
B=${1:-.gpu/build}; A=$2; Bl=$3; CASES=${4:-mlp,gpt}; ROUNDS=${5:-2}; CYCLES=${6:-100}; BLOCK=${7:-5}
BA=$(cd "$B" && pwd) || exit 2   # absolute, whatever the caller passed
O=${OUT:-/tmp}/ab; mkdir -p $O
for r in $(seq 1 $ROUNDS); do
  for lib in $A $Bl; do
    echo "== round $r $lib"
    python3 tests/gpu/bench_interleaved.py --libgraft $BA/src/$lib --cases $CASES --runs 1 \
      --cycles $CYCLES --block $BLOCK --warmup 40 --out $O/$lib.r$r.json --workdir $O/w | grep '^run'
  done
done
