#!/usr/bin/env bash
# Forty-first session's GPU steps. BUILD = a folder packed by scripts/gpu-pack.
#   OUT=dir scripts/gpu-session41.sh BUILD traps [PROGRAMS]
#   OUT=dir scripts/gpu-session41.sh BUILD losses [CASES] [STEPS]
#       as scripts/gpu-session40.sh (check_traps.py, check_losses.py)
#   OUT=dir [LIBS="a.so b.so"] scripts/gpu-session41.sh BUILD diag PROGRAM SCENARIO[,SCENARIO...] [GRAFT_ENV...]
#       each scenario eagerly, then under graft (each library of LIBS in
#       BUILD/src, default libgraft.so): its output and stderr's tail
B=${1:-.gpu/build}; BA=$(cd "$B" && pwd); WHAT=${2:-traps}
if [ "$WHAT" != diag ]; then exec "$(dirname "$0")/gpu-session40.sh" "$@"; fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
P=$BA/tests/gpu/$3
for sc in ${4//,/ }; do
  echo "=== $sc eager"; timeout 60 "$P" "$sc" 2>&1 | tail -8
  for lib in ${LIBS:-libgraft.so}; do
    echo "=== $sc graft ($lib)"
    env GRAFT_STATS=1 "${@:5}" LD_PRELOAD="$BA/src/$lib" timeout 60 "$P" "$sc" 2>&1 | tail -25
  done
done
