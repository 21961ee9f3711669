// sim_freed_copies: a loop whose copies and memsets name memory it frees and
// allocates again every step, as cudaMallocAsync/cudaFreeAsync loops,
// cudaMalloc/cudaFree loops and PyTorch's cudaMallocAsync backend do. The
// driver refuses to instantiate a graph whose memcpy or memset node names
// freed memory, and to update such a node once its memory is freed (measured
// on an H100); the simulator does the same.
//   sim_freed_copies (--async | --sync) [--expect-graphs]
// Each step: t = alloc (stream-ordered with --async, cuMemAlloc with --sync);
// memset t (1-D, then a 2-D memset of part of it); a kernel reading t; copy
// x -> y and t -> z; free t (cuMemFreeAsync, or cuMemFree: a barrier); y and
// all of z are read back every step and checked (exit 1 on a wrong value).
// --expect-graphs asks that at least 60 % of the executed copies, memsets and
// kernels came from graphs.
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "sim_api.h"
#include "sim_driver_loader.h"

int main(int argc, char** argv) {
  bool async = false, sync = false, expectGraphs = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--async") == 0) async = true;
    else if (std::strcmp(argv[i], "--sync") == 0) sync = true;
    else if (std::strcmp(argv[i], "--expect-graphs") == 0) expectGraphs = true;
    else async = sync = true;  // usage error below
  }
  if (async == sync) {
    std::printf("usage: sim_freed_copies (--async | --sync) [--expect-graphs]\n");
    return 2;
  }
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_freed_copies", &drv, &ctx)) return rc;
  auto& cu = drv.plain;
  CUfunction add = simtest::libraryKernel3("sim_add_freed");
  CUstream s;
  cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu, 1024);
  uint64_t hx = 0;
  for (uint64_t i = 1; i <= 200; ++i) {
    // Sizes alternate, so the addresses move.
    const size_t bytes = (i % 2) ? 256 : 1024;
    CUdeviceptr t = 0;
    SIM_CHECK(async ? cu.cuMemAllocAsync(&t, bytes, s) : cu.cuMemAlloc(&t, bytes));
    SIM_CHECK(cu.cuMemsetD8Async(t, uint8_t(i), bytes, s));
    // Rows of 16 bytes, 32 apart: the first 8 bytes stay i's, then 4 rows of
    // 32-bit words: t's first word is i * 0x01010101, its 8 bytes below i's.
    SIM_CHECK(cu.cuMemsetD2D32Async(t + 8, 32, uint32_t(i), 2, 4, s));
    SIM_CHECK(simtest::launchAdd(cu, add, x, t, 1, s));  // x = *t + 1 (t's first 8 bytes)
    SIM_CHECK(cu.cuMemcpyAsync(y, x, 8, s));
    SIM_CHECK(cu.cuMemcpyAsync(z, t, bytes, s));
    SIM_CHECK(async ? cu.cuMemFreeAsync(t, s) : cu.cuMemFree(t));
    uint64_t got = 0;
    uint8_t zs[1024];
    SIM_CHECK(cu.cuStreamSynchronize(s));
    SIM_CHECK(cu.cuMemcpyDtoH(&got, y, 8));
    SIM_CHECK(cu.cuMemcpyDtoH(zs, z, bytes));
    hx = uint64_t(uint8_t(i)) * 0x0101010101010101ull + 1;
    if (got != hx) {
      std::printf("sim_freed_copies: step %llu: y = %#llx, expected %#llx\n", (unsigned long long)i,
                  (unsigned long long)got, (unsigned long long)hx);
      return 1;
    }
    for (size_t b = 0; b < bytes; ++b) {
      // Bytes 8 + 32 r + [0, 8) for r < 4 hold the 2-D memset's words, the rest the 1-D memset's byte.
      const size_t off = b >= 8 ? (b - 8) % 32 : 32;
      const bool word = b >= 8 && (b - 8) / 32 < 4 && off < 8;
      const uint8_t want = word ? uint8_t(uint32_t(i) >> (8 * (off % 4))) : uint8_t(i);
      if (zs[b] != want) {
        std::printf("sim_freed_copies: step %llu: byte %zu of t = %#x, expected %#x\n", (unsigned long long)i, b,
                    zs[b], want);
        return 1;
      }
    }
  }
  cu.cuCtxSynchronize();
  SimCounters c{};
  simCounters(&c);
  std::printf("sim_freed_copies: every value right; effects from graphs %llu, eager %llu\n",
              (unsigned long long)c.effectsGraph, (unsigned long long)c.effectsEager);
  if (simtest::failedCalls()) return 1;
  return expectGraphs && simtest::tooFewFromGraphs("sim_freed_copies", c, 60) ? 1 : 0;
}
