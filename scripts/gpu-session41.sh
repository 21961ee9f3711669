#!/usr/bin/env bash
# Forty-first session's GPU steps. BUILD = a folder packed by scripts/gpu-pack.
#   OUT=dir scripts/gpu-session41.sh BUILD traps [PROGRAMS]
#       check_traps.py over the trap programs (default: every one of
#       tests/gpu/trap_programs.txt), each scenario eager twice and under graft
#   OUT=dir scripts/gpu-session41.sh BUILD diag PROGRAM SCENARIOS [ENV...] (below)
#   OUT=dir scripts/gpu-session41.sh BUILD losses [CASES] [STEPS]
#       check_losses.py (issue 4's cases by default), bitwise
B=${1:-.gpu/build}; BA=$(cd "$B" && pwd); WHAT=${2:-traps}
O=${OUT:-/tmp}/s41; mkdir -p "$O"
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
case $WHAT in
  traps)
    PROGS=${3:-$(sed -n 's/^\([a-z0-9_]\+\) .*/\1/p' tests/gpu/trap_programs.txt | paste -sd,)}
    ARGS=(); for p in ${PROGS//,/ }; do ARGS+=(--traps "$BA/tests/gpu/$p"); done
    timeout ${TRAPS_BUDGET:-560} python3 tests/gpu/check_traps.py "${ARGS[@]}" --libgraft "$BA/src/libgraft.so" \
      --timeout ${TRAP_TIMEOUT:-60} --out "$O/traps" > "$O/traps.out" 2>&1
    echo "check_traps rc=$?"
    for f in "$O"/traps/*.log; do  # what the failing runs printed
      grep -q "FAIL\|rc [1-9]\|timeout" "$f" 2>/dev/null && { echo "--- $(basename "$f")"; grep -m6 "FAIL\|rc \|error" "$f"; }
    done
    sed -n '/=== RESULT ===/,$p' "$O/traps.out" ;;
  losses)
    CASES=${3:-$(python3 tests/gpu/case_lists.py issue | paste -sd,)}
    timeout ${LOSSES_BUDGET:-560} python3 tests/gpu/check_losses.py --libgraft "$BA/src/libgraft.so" --steps "${4:-300}" \
      --cases "$CASES" --timeout 100 --out "$O/cl" > "$O/cl.out" 2>&1
    echo "check_losses rc=$?"
    sed -n '/=== RESULT ===/,$p' "$O/cl.out" ;;
esac
# OUT=dir [LIBS="a.so b.so"] scripts/gpu-session41.sh BUILD diag PROGRAM SCENARIO[,SCENARIO...] [GRAFT_ENV...]
#     each scenario eagerly, then under graft (each library of LIBS in BUILD/src,
#     default libgraft.so): its output and stderr's tail
if [ "$WHAT" = diag ]; then
  P=$BA/tests/gpu/$3
  for sc in ${4//,/ }; do
    echo "=== $sc eager"; timeout 60 "$P" "$sc" 2>&1 | tail -8
    for lib in ${LIBS:-libgraft.so}; do
      echo "=== $sc graft ($lib)"
      env GRAFT_STATS=1 "${@:5}" LD_PRELOAD="$BA/src/$lib" timeout 60 "$P" "$sc" 2>&1 | tail -25
    done
  done
fi
