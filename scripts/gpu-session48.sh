#!/usr/bin/env bash
# Forty-eighth session's GPU steps. BUILD = a folder packed by scripts/gpu-pack
# (libgraft_base.so: the library before this session's changes).
#   OUT=dir scripts/gpu-session48.sh BUILD check [PROGRAMS] [CASES] [STEPS]
#       check_traps.py over PROGRAMS (default traps_r31,traps_driver2), then
#       gpu-session46.sh's ab of eager, the base and the new library over
#       CASES (fno) for STEPS steps (150), one round: graft's stages per step
#   OUT=dir scripts/gpu-session48.sh BUILD cost [CASES] [STEPS] [RUNS]
#       where the program's thread spends graft's time: gpu-profile.sh over
#       CASES (mlp,gpt) for STEPS and 3×STEPS steps (every stage, the new
#       `intercept` one included), then bench_interleaved.py --match over
#       CASES, RUNS runs (1): eager, graft, floor and match ms per step, so
#       match − floor (graft's cost on the program's thread) stands beside
#       the sum of its timed stages
#   OUT=dir scripts/gpu-session48.sh BUILD traps|losses|ab|diag|scanab|hang ...   as gpu-session47.sh
# A table last.
B=${1:-.gpu/build}; BA=$(cd "$B" && pwd); WHAT=${2:-check}
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONDONTWRITEBYTECODE=1
case "$WHAT" in
check)
  S=$(dirname "$0")
  TRAPS_BUDGET=${TRAPS_BUDGET:-240} OUT=${OUT:-/tmp} "$S/gpu-session40.sh" "$B" traps "${3:-traps_r31,traps_driver2}"
  OUT=${OUT:-/tmp} LIBS="libgraft_base.so libgraft.so" ROUNDS=1 "$S/gpu-session46.sh" "$B" ab "${4:-fno}" "${5:-150}";;
cost)
  S=$(dirname "$0"); C=${3:-mlp,gpt}; N=${4:-100}
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  OUT=${OUT:-/tmp} "$S/gpu-profile.sh" "$B" "$C" "$N" 2>&1 | grep -v "^node updates per step"
  O=${OUT:-/tmp}/cost; mkdir -p "$O"
  timeout ${COST_BUDGET:-300} python3 tests/gpu/bench_interleaved.py --libgraft "$BA/src/libgraft.so" --cases "$C" \
    --runs ${5:-1} --cycles 40 --block 5 --warmup 40 --match --out "$O/match.json" --workdir "$O/w" > "$O/match.txt" 2>&1
  echo "bench_interleaved rc=$?"
  sed -n '/^interleaved in-process/,$p' "$O/match.txt";;
*) exec "$(dirname "$0")/gpu-session47.sh" "$@";;
esac
