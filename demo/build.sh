#!/usr/bin/env bash
# Builds demo/storm with nvcc directly (no meson needed).
#   demo/build.sh OUTDIR        -> OUTDIR/storm
# Env: NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc), NVCC_FLAGS (extra flags).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-}"
if [[ -z "$out" ]]; then
  echo "usage: demo/build.sh OUTDIR" >&2
  exit 2
fi
nvcc="${NVCC:-}"
if [[ -z "$nvcc" ]]; then
  if command -v nvcc >/dev/null 2>&1; then nvcc="$(command -v nvcc)"
  elif [[ -x /usr/local/cuda/bin/nvcc ]]; then nvcc=/usr/local/cuda/bin/nvcc
  else echo "demo/build.sh: nvcc not found (set NVCC=/path/to/nvcc)" >&2; exit 1
  fi
fi
mkdir -p "$out"
# Default runtime flags (static cudart), sm_90 SASS + compute_90 PTX.
# shellcheck disable=SC2086
"$nvcc" -O2 -std=c++17 -lineinfo \
  -gencode 'arch=compute_90,code=[sm_90,compute_90]' \
  ${NVCC_FLAGS:-} -o "$out/storm" "$here/storm.cu"
echo "built $out/storm"
