#!/bin/sh
# run_oracle.sh - run the equivalence oracle under graft.
#
#   tests/sim/run_oracle.sh --seed S --ops N [--threads] [--inject] [--verbose]
#   tests/sim/run_oracle.sh --no-preload --seed S --ops N     (oracle alone)
#
# Uses the build directory $GRAFT_BUILD (default: build). libgraft.so is taken from
# $GRAFT_LIB or found in the build directory. GRAFT_MODE (default graph),
# GRAFT_WARMUP (default 2) and GRAFT_LOG_LEVEL (default warn) pass through; SIM_SEED,
# SIM_STEPS and SIM_FAIL configure the simulator. All other arguments go to sim_oracle.
set -eu
build=${GRAFT_BUILD:-build}
simdir="$build/tests/sim"
preload=1
if [ "${1:-}" = "--no-preload" ]; then
  preload=0
  shift
fi
if [ ! -x "$simdir/sim_oracle" ] || [ ! -e "$simdir/libcuda.so.1" ]; then
  echo "run_oracle.sh: $simdir/sim_oracle or libcuda.so.1 missing (build with: ninja -C $build)" >&2
  exit 2
fi
if [ "$preload" = 1 ]; then
  lib=${GRAFT_LIB:-$(find "$build" -maxdepth 3 -name libgraft.so -type f 2>/dev/null | head -n 1)}
  if [ -z "$lib" ] || [ ! -e "$lib" ]; then
    echo "run_oracle.sh: libgraft.so not found under $build (set GRAFT_LIB, or use --no-preload)" >&2
    exit 2
  fi
  case "$lib" in /*) ;; *) lib="$(pwd)/$lib" ;; esac
  # GRAFT_BUILD / GRAFT_LIB are this script's own settings, not graft options.
  exec env -u GRAFT_BUILD -u GRAFT_LIB LD_LIBRARY_PATH="$simdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" LD_PRELOAD="$lib" \
    GRAFT_MODE="${GRAFT_MODE:-graph}" GRAFT_WARMUP="${GRAFT_WARMUP:-2}" GRAFT_LOG_LEVEL="${GRAFT_LOG_LEVEL:-warn}" \
    "$simdir/sim_oracle" "$@"
fi
exec env LD_LIBRARY_PATH="$simdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$simdir/sim_oracle" "$@"
