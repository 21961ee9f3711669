#!/usr/bin/env bash
# src/graph/copy_kernels_ptx.inc is what scripts/gen-copy-kernels makes from
# src/graph/copy_kernels.cu (skipped, 77, without nvcc).
#   copy_kernels_current.sh SOURCE_ROOT
root=$1
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || { echo "nvcc not found: skipped"; exit 77; }
tmp=$(mktemp); trap 'rm -f "$tmp"' EXIT
"$root/scripts/gen-copy-kernels" "$tmp" || { echo "FAIL: scripts/gen-copy-kernels failed"; exit 1; }
if ! diff -q "$tmp" "$root/src/graph/copy_kernels_ptx.inc" >/dev/null; then
  echo "FAIL: src/graph/copy_kernels_ptx.inc is not what scripts/gen-copy-kernels makes from copy_kernels.cu; run it"
  diff "$tmp" "$root/src/graph/copy_kernels_ptx.inc" | head -20
  exit 1
fi
echo "ok: copy_kernels_ptx.inc is current"
