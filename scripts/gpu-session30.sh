#!/usr/bin/env bash
# Thirtieth session.
#   OUT=dir scripts/gpu-session30.sh BUILD traps PROGRAMS [TIMEOUT]
#       check_traps.py over the named trap programs (comma-separated) under
#       libgraft.so; every log under $OUT/traps (so a run cut short still
#       brings back what finished), the result table last
#   OUT=dir scripts/gpu-session30.sh BUILD newcases CASES     as gpu-session27.sh
B=${1:-.gpu/build}; PART=${2:-traps}; O=${OUT:-/tmp}/s30-$PART; rm -rf $O; mkdir -p $O
BA=$(cd "$B" && pwd)
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [ "$PART" = traps ]; then
  args=()
  for p in ${3//,/ }; do args+=(--traps $BA/tests/gpu/$p); done
  python3 tests/gpu/check_traps.py "${args[@]}" --libgraft $BA/src/libgraft.so --timeout ${4:-60} ${SCEN:+--scenarios $SCEN} --out $O \
    > $O/check_traps.log 2>&1
  echo "check_traps exit $?"
  # What the failing runs printed (the logs may be too many to bring back).
  for f in $O/*.log; do
    [ "$f" = $O/check_traps.log ] && continue
    grep -q "FAIL\|rc [1-9]\|timeout" $f && { echo "--- $(basename $f)"; grep -m6 "FAIL\|SKIP\|rc \|error" $f; }
  done
  sed -n '/=== RESULT ===/,$p' $O/check_traps.log
elif [ "$PART" = newcases ]; then
  shift 2; OUT=${OUT:-/tmp} exec scripts/gpu-session27.sh "$B" newcases "$@"
fi
