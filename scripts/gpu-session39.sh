#!/usr/bin/env bash
# Thirty-ninth session: the op that begins a run right after a replay takes
# the fast lane (Engine::armStart). BUILD/src holds libgraft.so (new) and
# libgraft_base.so (the previous session's, d97739f).
#   OUT=dir scripts/gpu-session39.sh BUILD profile [CASES] [STEPS]
#       GRAFT_PROFILE per step in steady state, base then new (gpu-profile.sh)
#   OUT=dir scripts/gpu-session39.sh BUILD losses [CASES] [STEPS]
#       check_losses.py with the new library (issue 4's cases by default)
#   OUT=dir scripts/gpu-session39.sh BUILD ab [CASES] [ROUNDS]
#       in-process interleaved A/B, base against new (gpu-ab-interleaved.sh, MATCH=1)
B=${1:-.gpu/build}; BA=$(cd "$B" && pwd); WHAT=${2:-profile}
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
case $WHAT in
  profile)
    for lib in libgraft_base.so libgraft.so; do
      echo "=== profile $lib"
      LIB=$lib scripts/gpu-profile.sh "$B" "${3:-mlp,gpt}" "${4:-100}"
    done ;;
  losses)
    CASES=${3:-$(python3 tests/gpu/case_lists.py issue | paste -sd,)}
    timeout 560 python3 tests/gpu/check_losses.py --libgraft $BA/src/libgraft.so --steps "${4:-300}" \
      --cases "$CASES" --out ${OUT:-/tmp}/s39/cl > ${OUT:-/tmp}/s39cl.out 2>&1
    echo "check_losses rc=$?"
    sed -n '/=== RESULT ===/,$p' ${OUT:-/tmp}/s39cl.out ;;
  ab)
    MATCH=1 scripts/gpu-ab-interleaved.sh "$B" libgraft_base.so libgraft.so "${3:-mlp,gpt}" "${4:-3}" 40 5 ;;
esac
