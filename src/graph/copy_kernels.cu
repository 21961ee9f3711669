// graft's copy and memset kernels (src/graph/copy_kernels.h says where they are
// used). This file is the source of copy_kernels_ptx.inc: scripts/gen-copy-kernels
// compiles it to PTX; graft itself needs no CUDA compiler.
//
// Both kernels are grid-stride loops whose work depends on the pointer values
// they get at run time (graft patches those at every replay), so they handle
// any alignment: 16-byte accesses where both ends allow, else 4-byte, else bytes.
#include <stdint.h>

extern "C" __global__ void graft_copy(uint8_t* dst, const uint8_t* src, uint64_t bytes) {
  const uint64_t tid = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  const uint64_t both = uint64_t(dst) | uint64_t(src);
  uint64_t done = 0;
  if ((both & 15) == 0) {
    const uint64_t n = bytes >> 4;
    for (uint64_t i = tid; i < n; i += stride) reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
    done = n << 4;
  } else if ((both & 3) == 0) {
    const uint64_t n = bytes >> 2;
    for (uint64_t i = tid; i < n; i += stride)
      reinterpret_cast<uint32_t*>(dst)[i] = reinterpret_cast<const uint32_t*>(src)[i];
    done = n << 2;
  }
  for (uint64_t i = done + tid; i < bytes; i += stride) dst[i] = src[i];
}

// `height` rows of `width` elements of `elementSize` bytes (1, 2 or 4), rows
// `pitch` bytes apart, each element set to the low `elementSize` bytes of
// `value`. Rows go to blockIdx.y (stepping by gridDim.y), a row's bytes to the
// threads of blockIdx.x.
extern "C" __global__ void graft_memset(uint8_t* dst, uint64_t pitch, uint64_t width, uint64_t height,
                                        uint32_t value, uint32_t elementSize) {
  const uint32_t pattern = elementSize == 1 ? (value & 0xffu) * 0x01010101u
                           : elementSize == 2 ? (value & 0xffffu) * 0x00010001u
                                              : value;
  const uint64_t rowBytes = width * elementSize;
  const uint64_t tid = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t row = blockIdx.y; row < height; row += gridDim.y) {
    uint8_t* p = dst + row * pitch;
    uint64_t done = 0;
    if ((uint64_t(p) & 15) == 0) {
      const uint64_t n = rowBytes >> 4;
      const uint4 v = make_uint4(pattern, pattern, pattern, pattern);
      for (uint64_t i = tid; i < n; i += stride) reinterpret_cast<uint4*>(p)[i] = v;
      done = n << 4;
    } else if ((uint64_t(p) & 3) == 0) {
      const uint64_t n = rowBytes >> 2;
      for (uint64_t i = tid; i < n; i += stride) reinterpret_cast<uint32_t*>(p)[i] = pattern;
      done = n << 2;
    }
    // The row starts element-aligned (the driver requires it) and the pattern
    // repeats every 4 bytes: byte j of the row is byte j % 4 of the pattern.
    for (uint64_t i = done + tid; i < rowBytes; i += stride) p[i] = uint8_t(pattern >> (8 * (i & 3)));
  }
}
