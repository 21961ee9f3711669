#!/usr/bin/env bash
# src/graph/copy_kernels_ptx.inc is what scripts/gen-copy-kernels makes from
# src/graph/copy_kernels.cu, and its PTX (lowered to ISA 7.0 for sm_52)
# assembles. Skipped (77) without nvcc, or with an nvcc of another release
# than the one that generated the file (its PTX may differ in form).
#   copy_kernels_current.sh SOURCE_ROOT
root=$1
inc=$root/src/graph/copy_kernels_ptx.inc
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$nvcc" ] || { echo "nvcc not found: skipped"; exit 77; }
have=$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
made=$(sed -n '1s/.*(nvcc \([0-9.]*\)).*/\1/p' "$inc")
[ "$have" = "$made" ] || { echo "nvcc $have here, the file was made with nvcc $made: skipped"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
NVCC=$nvcc "$root/scripts/gen-copy-kernels" "$tmp/k.inc" || { echo "FAIL: scripts/gen-copy-kernels failed"; exit 1; }
if ! diff -q "$tmp/k.inc" "$inc" >/dev/null; then
  echo "FAIL: src/graph/copy_kernels_ptx.inc is not what scripts/gen-copy-kernels makes from copy_kernels.cu; run it"
  diff "$tmp/k.inc" "$inc" | head -20
  exit 1
fi
ptxas=$(dirname "$nvcc")/ptxas
sed -n '3,$p' "$inc" | sed '$d' > "$tmp/k.ptx"
for arch in sm_75 sm_90; do
  "$ptxas" -arch=$arch "$tmp/k.ptx" -o "$tmp/k.cubin" || { echo "FAIL: ptxas -arch=$arch rejects the PTX"; exit 1; }
done
echo "ok: copy_kernels_ptx.inc is current and assembles for sm_75 and sm_90"
