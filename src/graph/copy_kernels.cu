// graft's copy and memset kernels (src/graph/copy_kernels.h says where they are
// used). This file is the source of copy_kernels_ptx.inc: scripts/gen-copy-kernels
// compiles it to PTX; graft itself needs no CUDA compiler.
//
// Both kernels are grid-stride loops whose work depends on the pointer values
// they get at run time (graft patches those at every replay), so they handle
// any alignment: a few head bytes up to the destination's 16-, 8- or 4-byte
// boundary, then whole words, then the tail bytes. A source at another offset
// than the destination is read as aligned 4-byte words, two per word written;
// the first and last word written are copied byte by byte where those reads
// would reach outside the source (no read leaves it: memory checkers such as
// compute-sanitizer stay quiet).
#include <stdint.h>

extern "C" __global__ void graft_copy(uint8_t* dst, const uint8_t* src, uint64_t bytes) {
  const uint64_t tid = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  const uint64_t d = uint64_t(dst), s = uint64_t(src);
  const uint64_t align = ((d ^ s) & 15) == 0 ? 16 : ((d ^ s) & 7) == 0 ? 8 : 4;
  const uint64_t head = min(bytes, (align - (d & (align - 1))) & (align - 1));
  for (uint64_t i = tid; i < head; i += stride) dst[i] = src[i];
  uint8_t* const bd = dst + head;
  const uint8_t* const bs = src + head;
  const uint64_t rest = bytes - head;
  uint64_t done;
  if (align == 16) {
    const uint64_t n = rest >> 4;
    for (uint64_t i = tid; i < n; i += stride) reinterpret_cast<uint4*>(bd)[i] = reinterpret_cast<const uint4*>(bs)[i];
    done = n << 4;
  } else if (align == 8) {
    const uint64_t n = rest >> 3;
    for (uint64_t i = tid; i < n; i += stride) reinterpret_cast<uint2*>(bd)[i] = reinterpret_cast<const uint2*>(bs)[i];
    done = n << 3;
  } else if ((uint64_t(bs) & 3) == 0) {
    const uint64_t n = rest >> 2;
    for (uint64_t i = tid; i < n; i += stride)
      reinterpret_cast<uint32_t*>(bd)[i] = reinterpret_cast<const uint32_t*>(bs)[i];
    done = n << 2;
  } else {
    // Word i written reads source words i and i + 1 (of `words`, r bytes
    // before bs): word 0 starts inside the source when r <= head, the last
    // word n ends inside it when r + (rest & 3) >= 4.
    const uint64_t r = uint64_t(bs) & 3;
    const uint32_t shift = 8 * uint32_t(r);
    const uint32_t* const words = reinterpret_cast<const uint32_t*>(uint64_t(bs) - r);
    const uint64_t n = rest >> 2;
    const uint64_t first = r > head ? 1 : 0;
    const uint64_t end = max(first, r + (rest & 3) >= 4 || n == 0 ? n : n - 1);
    for (uint64_t i = first + tid; i < end; i += stride)
      reinterpret_cast<uint32_t*>(bd)[i] = __funnelshift_r(words[i], words[i + 1], shift);
    for (uint64_t i = tid; i < 4 * min(first, n); i += stride) bd[i] = bs[i];
    for (uint64_t i = 4 * end + tid; i < 4 * n; i += stride) bd[i] = bs[i];
    done = n << 2;
  }
  for (uint64_t i = done + tid; i < rest; i += stride) bd[i] = bs[i];
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
    // The row starts element-aligned (the driver requires it) and the pattern
    // repeats every 4 bytes: byte j of the row is byte j % 4 of the pattern.
    const uint64_t head = min(rowBytes, (16 - (uint64_t(p) & 15)) & 15);
    for (uint64_t i = tid; i < head; i += stride) p[i] = uint8_t(pattern >> (8 * (i & 3)));
    const uint32_t word = __funnelshift_r(pattern, pattern, 8 * uint32_t(head & 3));  // from row byte `head` on
    const uint64_t n = (rowBytes - head) >> 4;
    const uint4 v = make_uint4(word, word, word, word);
    for (uint64_t i = tid; i < n; i += stride) reinterpret_cast<uint4*>(p + head)[i] = v;
    for (uint64_t i = head + (n << 4) + tid; i < rowBytes; i += stride) p[i] = uint8_t(pattern >> (8 * (i & 3)));
  }
}
