// sim_review9_memops: the ninth red-team round's review of stream-ordered
// memory operations and unusual memory kinds inside replayed steps: the copy
// and memset encoders and rangeOf/freeHandlingOf of src/hook/interpose.cc,
// the op encoding of src/graph/op_codec.cc, graft's copy kernels
// (src/graph/copy_kernels.{h,cc}) and the driver-node updates of
// src/graph/graph_executor.cc. Every step is a loop body long enough to be
// graphed; every return code and value must be the simulated driver's,
// eagerly and under graft:
//   sim_review9_memops --mode MODE[-pts|-legacy] [--steps N] [--expect-graphs]
// A suffix runs the step on the per-thread default stream (the _ptsz
// functions, NULL) or on the legacy default stream instead of a created
// non-blocking stream.
//
// (Each "FAILS under graft" below is what graft did when the mode was written;
// tests/sim/meson.build registers what holds now: all pass but queries-held,
// a documented limit.)
//
// memset-widths  all six async memsets (D8, D16, D32, D2D8, D2D16, D2D32) on
//                device memory, plus a D2D32 of one row whose pitch (3) is
//                ignored, a D2D8 of one row with pitch 0 and a D16 ending
//                exactly at the buffer's end (its size cycles over 4): odd
//                addresses and pitches, addresses and values (high bits set)
//                changing every step; every byte checked every step, and a
//                kernel read. (Regression check; passes with -pts, -legacy.)
// memset-host    the same memsets of pinned (cuMemAllocHost) and registered
//                (cuMemHostRegister) memory, values changing every step.
//                Every value right, but exit 3 with --expect-graphs: they are
//                driver memset nodes (graft's kernels take device memory
//                only), the simulator refuses to update a memset node naming
//                host memory, and the first refused update disables the
//                segment for good (0 % through graphs; as sim_review6_patching
//                pinned-memset: a known limit, performance only).
// memset-host-fixed  the same with fixed addresses and values; the host
//                scribbles over the memory between steps, so every replay
//                must write it again (driver memset nodes never updated).
//                (Regression check.)
// mapped-host    mapped pinned memory (cuMemHostAlloc DEVICEMAP|WRITECOMBINED,
//                cuMemHostGetDevicePointer) whose host contents change between
//                steps: a kernel reads it, a memset and a kernel write it, a
//                cuMemcpyAsync reads it to device memory (host memory: eager)
//                and another writes device memory back into it. (Regression.)
// copy-kind-switch  one cuMemcpyAsync call site whose source is, by phases of
//                5 steps, device, pinned, registered or pageable memory, and
//                whose destination is, by phases of 7 steps, device, pinned or
//                pageable memory (unified addressing decides at run time).
//                (Regression check; also -pts, -legacy.)
// copy-size-varies  a device copy and a D8 memset whose byte counts and
//                addresses change every step (random), the same kernels
//                around them; every byte checked. Values right; exit 3 with
//                --expect-graphs: the byte count is part of an op's shape
//                (op_codec.cc CopyShape/SetShape), so no step ever repeats
//                and graft never graphs even the kernels around them
//                (performance only; the copy kernel takes the byte count as
//                a parameter and could be patched instead).
// copy-size-cycle  the same with sizes cycling through three values (three
//                variants). (Regression check.)
// copy-alias     cuMemcpyDtoDAsync and cuMemcpyAsync whose source is their
//                destination (moving every step: the bytes must stay as they
//                are), and a copy overlapping itself in the first 12 steps
//                (the graph keeps the driver's memcpy node) and disjoint
//                afterwards (that node patched). (Regression check.)
// queries-held   cuPointerGetAttribute (RANGE_START_ADDR, RANGE_SIZE,
//                MEMPOOL_HANDLE, MEMORY_TYPE) and cuMemGetAddressRange on a
//                stream-ordered block, a cuMemAlloc buffer and pinned memory
//                between held ops: as eagerly. On irregular steps, right after
//                the block's cuMemFreeAsync, its MEMPOOL_HANDLE: the
//                simulated driver clears it at the free's call (as it drops
//                the pool's used memory then). FAILS under graft: the handle
//                still reads the pool's (graft defers the free past the held
//                ops, interpose.cc freeAsync -> Engine::deferFree), with and
//                without the launch thread. (Simulator-modelled: what the
//                real driver answers for a block whose free is pending is not
//                measured; low severity.) With GRAFT_POOL=1 RANGE_SIZE and
//                cuMemGetAddressRange read the pool's 2 MiB mapping and
//                MEMPOOL_HANDLE reads null from the first step (README
//                documents cuMemGetAddressRange only).
// memset-flag-spin[-values]  a step of 35 ops whose last is a memset of
//                pinned memory that the host waits for without any CUDA call
//                (a completion flag, as cuStreamWriteValue32 is used; the
//                program sets SIM_ASYNC_US=100; 3 s limit per step); plain:
//                the same value every step, cleared by the host; -values: the
//                step's number. (Regression check: the idle flush issues the
//                held memset; also -pts.)
// free-attr[-failure]  a stream-ordered block allocated, memset, read by a
//                kernel into the step's slot and freed with cuMemFreeAsync
//                while those ops are held. -failure: on irregular steps the
//                driver's next cuPointerGetAttributes fails
//                (simInjectFailure armed right before the free, cleared
//                after it; the program never calls that function, so eagerly
//                nothing changes). FAILS under graft (also -pts, -legacy,
//                GRAFT_ASYNC_LAUNCH=0; passes with GRAFT_POOL=1): graft's own
//                attribute query failing makes interpose.cc freeHandlingOf
//                (:655-657) answer FreeHandling::Now, so freeAsync (:667-674)
//                forwards the free to the driver at once, ahead of the held
//                memset and kernel that use the block: they run on freed
//                memory (sticky CUDA_ERROR_ILLEGAL_ADDRESS from graft_memset,
//                every later call fails). DESIGN.md §2.7: a failure of
//                graft's own driver call must mean falling back, never a
//                looser order. free-attr (no injection) passes.
// legacy-flags[-failure]  a step on the legacy stream and a blocking stream
//                ordered only by implicit synchronization, through memsets and
//                copies (legacy x += 1, memset; b copies x to z and adds 1;
//                legacy copies z to w). -failure: the driver's first
//                cuStreamGetFlags fails (injected before the loop; the
//                program never calls it). FAILS under graft (w and z one
//                behind every step): GraphExecutor::isBlocking
//                (graph_executor.cc:268-279) takes the failed query for "not
//                blocking" and caches it, so the graph built for the step
//                leaves out the implicit legacy/blocking edges. legacy-flags
//                (no injection) passes.
//
// Not simulated, so not tried: cuStreamWaitValue32/64, cuStreamWriteValue32/64,
// cuStreamBatchMemOp, cuMemcpyPeerAsync, cuMemAllocManaged, cuMemPrefetchAsync,
// cuMemAdvise (the simulated driver has none of them; graft classifies the
// first five and cuMemPrefetchAsync as ordered ops issued eagerly at their
// position, cuMemcpyPeerAsync as an unsupported copy issued eagerly outside
// the engine lock, cuMemAllocManaged as a forwarded allocation, and leaves
// cuMemAdvise unwrapped). memset-flag-spin stands in for a write-value flag.
//
// Exit 0: every code and value as the driver gives them; 1: a divergence;
// 3 with --expect-graphs: no kernel ran from a graph (path not taken).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"

namespace {

using namespace simtest::modes;

bool irregular(int step, uint64_t salt) { return irregularStep(step, salt, 10, 7); }
uint64_t mix(int step, uint64_t salt) { return simMix64(uint64_t(step) * 0x9e3779b97f4a7c15ull + salt * 0x51ed27u); }

template <typename F>
F proc(const simtest::Driver& d, const char* name) {
  F f = nullptr;
  if (!simtest::lookupProc(d, name, &f)) std::exit(2);
  return f;
}

struct Kit {
  simtest::Driver* drv = nullptr;
  const simtest::DriverApi* cu = nullptr;
  CUcontext ctx = nullptr;
  CUfunction add = nullptr;
  CUdeviceptr zero = 0;  // 64 zero bytes
  decltype(&::cuMemsetD2D16Async) memsetD2D16Async = nullptr;
  void add3(CUdeviceptr to, CUdeviceptr from, uint64_t k, CUstream s) const {
    SIM_CHECK(simtest::launchAdd(*cu, add, to, from, k, s));
  }
  void chain(CUdeviceptr w, int n, CUstream s, uint64_t* hw) const {
    for (int j = 0; j < n; ++j) add3(w, w, 1, s);
    if (hw) *hw += uint64_t(n);
  }
};

// Mode suffix "-pts": the step's stream is the per-thread default stream
// (the _ptsz functions, NULL); "-legacy": the legacy default stream (NULL).
bool g_defaultStream = false;
CUstream newStream(const simtest::DriverApi& cu) {
  CUstream s = nullptr;
  if (g_defaultStream) return nullptr;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  return s;
}
[[maybe_unused]] CUevent newEvent(const simtest::DriverApi& cu) {
  CUevent e = nullptr;
  SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  return e;
}

uint64_t twoWords(uint32_t v) { return uint64_t(v) | (uint64_t(v) << 32); }

// Compares `n` bytes at `got` (any memory: the simulator's device memory is
// host memory) with the host model; reports the first difference.
void expectBytes(const void* got, const uint8_t* want, size_t n, const char* what, int step) {
  const auto* g = static_cast<const uint8_t*>(got);
  for (size_t k = 0; k < n; ++k) {
    if (g[k] != want[k]) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "%s[%zu]", what, k);
      expectValue(g[k], want[k], buf, step);
      return;
    }
  }
}

constexpr size_t kSixBytes = 768;  // the memsets' buffer (the last one ends at its end)

// Host model of the six stream-ordered memsets.
void model1D(uint8_t* base, size_t off, uint32_t v, unsigned elem, size_t n) {
  for (size_t k = 0; k < n; ++k) std::memcpy(base + off + k * elem, &v, elem);  // little endian: low bytes
}
void model2D(uint8_t* base, size_t off, size_t pitch, uint32_t v, unsigned elem, size_t w, size_t h) {
  for (size_t r = 0; r < h; ++r) model1D(base, off + r * pitch, v, elem, w);
}

// The six async memsets of one step at `buf` (device or host memory),
// addresses and values from `i` unless `fixed`; the model follows. Returns
// the offset of a word the step's kernel reads.
void sixMemsets(const Kit& k, CUdeviceptr buf, uint8_t* model, int i, bool fixed, CUstream s) {
  auto& cu = *k.cu;
  const int j = fixed ? 3 : i;
  // D8: 13 bytes at an odd offset.
  {
    const size_t off = 1 + size_t(j * 7 % 50);
    const uint8_t v = uint8_t(j * 31 + 0x80);
    SIM_CHECK(cu.cuMemsetD8Async(buf + off, v, 13, s));
    model1D(model, off, v, 1, 13);
  }
  // D16: 9 elements at an even offset that is not a multiple of 4 every other step.
  {
    const size_t off = 64 + 2 * size_t(j % 23);
    const uint16_t v = uint16_t(0xfff0 + j * 13);
    SIM_CHECK(cu.cuMemsetD16Async(buf + off, v, 9, s));
    model1D(model, off, v, 2, 9);
  }
  // D32: 7 elements at a moving 4-byte-aligned offset, high bit set.
  {
    const size_t off = 160 + 4 * size_t(j % 19);
    const uint32_t v = 0x80000000u ^ (uint32_t(j) * 0x9e3779b9u);
    SIM_CHECK(cu.cuMemsetD32Async(buf + off, v, 7, s));
    model1D(model, off, v, 4, 7);
  }
  // D2D8: 4 rows of 5 bytes, pitch 11 (odd), at a moving odd or even offset.
  {
    const size_t off = 300 + size_t(j % 13);
    const uint8_t v = uint8_t(0xc0 + j);
    SIM_CHECK(cu.cuMemsetD2D8Async(buf + off, 11, v, 5, 4, s));
    model2D(model, off, 11, v, 1, 5, 4);
  }
  // D2D16: 3 rows of 6 elements (12 bytes), pitch 14 (not a multiple of 4).
  {
    const size_t off = 400 + 2 * size_t(j % 11);
    const uint16_t v = uint16_t(j * 0x0101 + 0x8001);
    SIM_CHECK(k.memsetD2D16Async(buf + off, 14, v, 6, 3, s));
    model2D(model, off, 14, v, 2, 6, 3);
  }
  // D2D32: 5 rows of 4 elements, pitch 20.
  {
    const size_t off = 500 + 4 * size_t(j % 9);
    const uint32_t v = ~uint32_t(j);
    SIM_CHECK(cu.cuMemsetD2D32Async(buf + off, 20, v, 4, 5, s));
    model2D(model, off, 20, v, 4, 4, 5);
  }
  // D2D32 of one row: the pitch (3, not a multiple of 4) is ignored.
  {
    const size_t off = 640 + 4 * size_t(j % 5);
    const uint32_t v = 0x01020304u * uint32_t(j + 1);
    SIM_CHECK(cu.cuMemsetD2D32Async(buf + off, 3, v, 6, 1, s));
    model1D(model, off, v, 4, 6);
  }
  // D16 ending exactly at the buffer's end (its size moves: a new shape every
  // step of a cycle of 4).
  {
    const size_t n = 1 + size_t(j % 4);
    const size_t off = kSixBytes - 2 * n;
    const uint16_t v = uint16_t(0x4321 + j);
    SIM_CHECK(cu.cuMemsetD16Async(buf + off, v, n, s));
    model1D(model, off, v, 2, n);
  }
  // D2D8 of one row, pitch 0.
  {
    const size_t off = 700 + size_t(j % 17);
    const uint8_t v = uint8_t(0x11 * (j % 15) + 1);
    SIM_CHECK(cu.cuMemsetD2D8Async(buf + off, 0, v, 9, 1, s));
    model1D(model, off, v, 1, 9);
  }
}

// ------------------------------------------------------------------ modes

// memset-widths: the six async memsets on device memory, addresses and
// values changing every step; every byte checked every step.
void memsetWidths(const Kit& k, int steps) {
  auto& cu = *k.cu;
  const CUstream s = newStream(cu);
  const CUdeviceptr buf = simtest::zeroedBuffer(cu, kSixBytes), x = simtest::zeroedBuffer(cu),
                    y = simtest::zeroedBuffer(cu);
  std::vector<uint8_t> model(kSixBytes, 0);
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    k.chain(x, 3, s, &hx);
    sixMemsets(k, buf, model.data(), i, false, s);
    k.add3(y, buf + 160 + 4 * size_t(i % 19), 1, s);  // y = the D32 memset's first two words + 1
    k.chain(x, 3, s, &hx);
    SIM_CHECK(cu.cuStreamSynchronize(s));
    expectBytes(reinterpret_cast<const void*>(buf), model.data(), kSixBytes, "buf", i);
    uint64_t w;
    std::memcpy(&w, model.data() + 160 + 4 * size_t(i % 19), 8);
    expectValue(peek(y), w + 1, "y (a kernel read of the D32 memset)", i);
    expectValue(peek(x), hx, "x", i);
  }
}

alignas(4096) uint8_t g_reg[4096];
alignas(4096) uint8_t g_page[4096];

// memset-host[-fixed]: the six async memsets on pinned memory (cuMemAllocHost)
// and on registered memory (cuMemHostRegister); `fixed`: the same addresses
// and values every step (the host scribbles over them between steps, so every
// replay must write them again), else they change every step.
void memsetHost(const Kit& k, int steps, bool fixed) {
  auto& cu = *k.cu;
  const CUstream s = newStream(cu);
  void* pinnedHost = nullptr;
  SIM_CHECK(cu.cuMemAllocHost(&pinnedHost, kSixBytes));
  std::memset(pinnedHost, 0, kSixBytes);
  std::memset(g_reg, 0, sizeof g_reg);
  SIM_CHECK(cu.cuMemHostRegister(g_reg, sizeof g_reg, 0));
  const CUdeviceptr pinned = reinterpret_cast<CUdeviceptr>(pinnedHost), reg = reinterpret_cast<CUdeviceptr>(g_reg);
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu);
  std::vector<uint8_t> m1(kSixBytes, 0), m2(kSixBytes, 0);
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    k.chain(x, 3, s, &hx);
    sixMemsets(k, pinned, m1.data(), i, fixed, s);
    k.chain(x, 2, s, &hx);
    sixMemsets(k, reg, m2.data(), i, fixed, s);
    const size_t at = 160 + 4 * size_t((fixed ? 3 : i) % 19);
    k.add3(y, pinned + at, 1, s);
    k.add3(z, reg + at, 2, s);
    k.chain(x, 3, s, &hx);
    SIM_CHECK(cu.cuStreamSynchronize(s));
    expectBytes(pinnedHost, m1.data(), kSixBytes, "pinned", i);
    expectBytes(g_reg, m2.data(), kSixBytes, "registered", i);
    uint64_t w1, w2;
    std::memcpy(&w1, m1.data() + at, 8);
    std::memcpy(&w2, m2.data() + at, 8);
    expectValue(peek(y), w1 + 1, "y (a kernel read of pinned memory)", i);
    expectValue(peek(z), w2 + 2, "z (a kernel read of registered memory)", i);
    expectValue(peek(x), hx, "x", i);
    if (fixed) {  // the host overwrites what the memsets wrote; the next step writes it again
      std::memset(pinnedHost, 0x5a ^ i, kSixBytes);
      std::memset(g_reg, 0xa5 ^ i, kSixBytes);
      std::memset(m1.data(), 0x5a ^ i, kSixBytes);
      std::memset(m2.data(), 0xa5 ^ i, kSixBytes);
    }
  }
  SIM_CHECK(cu.cuMemHostUnregister(g_reg));
}

// mapped-host: mapped pinned memory (cuMemHostAlloc DEVICEMAP, named by the
// pointer cuMemHostGetDevicePointer gives) whose host contents the program
// changes between steps: a kernel reads it, a fixed memset writes part of it,
// a copy reads it to device memory and one writes device memory back into it.
void mappedHost(const Kit& k, int steps) {
  auto& cu = *k.cu;
  auto getDevicePointer = proc<decltype(&::cuMemHostGetDevicePointer)>(*k.drv, "cuMemHostGetDevicePointer");
  const CUstream s = newStream(cu);
  void* h = nullptr;
  SIM_CHECK(cu.cuMemHostAlloc(&h, 512, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED));
  std::memset(h, 0, 512);
  CUdeviceptr dp = 0;
  SIM_CHECK(getDevicePointer(&dp, h, 0));
  auto* hw = static_cast<uint64_t*>(h);
  const CUdeviceptr x = simtest::zeroedBuffer(cu), d = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    hw[0] = uint64_t(i) * 5 + 1;   // a kernel's input
    hw[1] = uint64_t(i) * 7 + 3;   // a copy's source
    hw[8] = 0;                     // a memset's target: scribbled by the host each step
    k.chain(x, 3, s, &hx);
    k.add3(y, dp, 1, s);                                   // y = 5i + 2
    SIM_CHECK(cu.cuMemsetD32Async(dp + 64, 0x3c3c3c3c, 2, s));  // hw[8]
    SIM_CHECK(cu.cuMemcpyAsync(d, dp + 8, 8, s));           // d = 7i + 3 (host memory: eager)
    k.add3(d, d, 4, s);                                     // d = 7i + 7
    k.chain(x, 2, s, &hx);
    SIM_CHECK(cu.cuMemcpyAsync(dp + 128, d, 8, s));         // hw[16] = 7i + 7
    k.add3(dp + 136, y, 10, s);                             // hw[17] = 5i + 12 (a kernel writes mapped memory)
    k.chain(x, 3, s, &hx);
    SIM_CHECK(cu.cuStreamSynchronize(s));
    expectValue(peek(y), uint64_t(i) * 5 + 2, "y (a kernel read of mapped memory)", i);
    expectValue(hw[8], twoWords(0x3c3c3c3c), "the memset of mapped memory", i);
    expectValue(hw[16], uint64_t(i) * 7 + 7, "the copy back into mapped memory", i);
    expectValue(hw[17], uint64_t(i) * 5 + 12, "a kernel's write of mapped memory", i);
    expectValue(peek(x), hx, "x", i);
  }
  SIM_CHECK(cu.cuMemFreeHost(h));
}

// copy-kind-switch: one cuMemcpyAsync call site whose source is, by phases
// of 5 steps, device, pinned, registered or pageable host memory, and whose
// destination is, by phases of 7 steps, device, pinned or pageable memory
// (unified addressing decides the kind at run time); kernels around it.
void copyKindSwitch(const Kit& k, int steps) {
  auto& cu = *k.cu;
  const CUstream s = newStream(cu);
  void* pinnedHost = nullptr;
  SIM_CHECK(cu.cuMemAllocHost(&pinnedHost, 256));
  std::memset(pinnedHost, 0, 256);
  std::memset(g_reg, 0, sizeof g_reg);
  std::memset(g_page, 0, sizeof g_page);
  SIM_CHECK(cu.cuMemHostRegister(g_reg, sizeof g_reg, 0));
  const CUdeviceptr dev = simtest::zeroedBuffer(cu, 256), x = simtest::zeroedBuffer(cu),
                    y = simtest::zeroedBuffer(cu);
  const CUdeviceptr pinned = reinterpret_cast<CUdeviceptr>(pinnedHost), reg = reinterpret_cast<CUdeviceptr>(g_reg),
                    page = reinterpret_cast<CUdeviceptr>(g_page);
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    const int sk = (i / 5) % 4, dk = (i / 7) % 3;
    const CUdeviceptr src = (sk == 0 ? dev : sk == 1 ? pinned : sk == 2 ? reg : page) + 8;
    const CUdeviceptr dst = (dk == 0 ? dev + 128 : dk == 1 ? pinned + 128 : page + 128) + 16 * size_t(i % 3);
    const uint64_t v = uint64_t(i) * 11 + 5;
    if (sk != 0) {  // host memory: written by the host before the step
      poke(src, v);
      poke(src + 8, ~v);
    }
    k.chain(x, 3, s, &hx);
    if (sk == 0) {
      k.add3(src, k.zero, v, s);
      k.add3(src + 8, k.zero, ~v, s);
    }
    SIM_CHECK(cu.cuMemcpyAsync(dst, src, 16, s));
    k.add3(y, dk == 2 ? dev + 64 : dst + 8, 1, s);  // (a kernel cannot read pageable memory)
    k.chain(x, 3, s, &hx);
    SIM_CHECK(cu.cuStreamSynchronize(s));
    if (dk != 2) expectValue(peek(y), ~v + 1, "y (a kernel read of the copy's destination)", i);
    expectValue(peek(dst), v, "the copy's first word", i);
    expectValue(peek(dst + 8), ~v, "the copy's second word", i);
    expectValue(peek(x), hx, "x", i);
  }
  SIM_CHECK(cu.cuMemHostUnregister(g_reg));
}

// copy-size-varies: a device copy and a D8 memset whose byte counts (and
// addresses) change every step, with the same kernels around them; every
// byte of the destination checked every step.
// copy-size-cycle: the same with sizes cycling through three values.
void copySizes(const Kit& k, int steps, bool cycle) {
  auto& cu = *k.cu;
  const CUstream s = newStream(cu);
  constexpr size_t kBytes = 4096;
  const CUdeviceptr src = simtest::zeroedBuffer(cu, kBytes), dst = simtest::zeroedBuffer(cu, kBytes),
                    x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  std::vector<uint8_t> hsrc(kBytes), hdst(kBytes, 0);
  for (size_t b = 0; b < kBytes; ++b) hsrc[b] = uint8_t(b * 13 + 7);
  SIM_CHECK(cu.cuMemcpyHtoD(src, hsrc.data(), kBytes));
  uint64_t hx = 0;
  static const size_t kCycle[3] = {24, 40, 8};
  for (int i = 0; i < steps; ++i) {
    const size_t n = cycle ? kCycle[i % 3] : 1 + size_t(mix(i, 1) % 1500);
    const size_t so = size_t(mix(i, 2) % 64), dof = size_t(mix(i, 3) % 64);
    const size_t m = cycle ? kCycle[(i + 1) % 3] * 3 : 1 + size_t(mix(i, 4) % 900);
    const size_t mo = 2048 + size_t(mix(i, 5) % 128);
    k.chain(x, 3, s, &hx);
    k.add3(src + 1600, k.zero, uint64_t(i), s);  // the source changes every step
    uint64_t iv = uint64_t(i);
    std::memcpy(hsrc.data() + 1600, &iv, 8);
    SIM_CHECK(cu.cuMemcpyDtoDAsync(dst + dof, src + so, n, s));
    std::memcpy(hdst.data() + dof, hsrc.data() + so, n);
    SIM_CHECK(cu.cuMemsetD8Async(dst + mo, uint8_t(i), m, s));
    std::memset(hdst.data() + mo, uint8_t(i), m);
    k.add3(y, dst + dof, 0, s);
    k.chain(x, 3, s, &hx);
    SIM_CHECK(cu.cuStreamSynchronize(s));
    expectBytes(reinterpret_cast<const void*>(dst), hdst.data(), kBytes, "dst", i);
    uint64_t w;
    std::memcpy(&w, hdst.data() + dof, 8);
    expectValue(peek(y), w, "y (a kernel read of the copy)", i);
    expectValue(peek(x), hx, "x", i);
  }
}

// copy-alias: device copies whose source is their destination
// (cuMemcpyDtoDAsync and cuMemcpyAsync with src == dst, moving every step),
// which leave the bytes as they are whatever order a copy takes them in;
// and a copy at one call site that partially overlaps itself in the first
// 12 steps (its graph gets the driver's memcpy node; those bytes are not
// checked) and is disjoint afterwards (that node then patched).
void copyAlias(const Kit& k, int steps) {
  auto& cu = *k.cu;
  const CUstream s = newStream(cu);
  constexpr size_t kBytes = 1024;
  const CUdeviceptr p = simtest::zeroedBuffer(cu, kBytes), q = simtest::zeroedBuffer(cu, kBytes),
                    x = simtest::zeroedBuffer(cu);
  std::vector<uint8_t> hp(kBytes), hq(kBytes);
  for (size_t b = 0; b < kBytes; ++b) hp[b] = uint8_t(b * 5 + 1), hq[b] = uint8_t(b * 3 + 2);
  SIM_CHECK(cu.cuMemcpyHtoD(p, hp.data(), kBytes));
  SIM_CHECK(cu.cuMemcpyHtoD(q, hq.data(), kBytes));
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    const bool overlap = i < 12;
    k.chain(x, 3, s, &hx);
    const size_t o = size_t(i % 37);
    SIM_CHECK(cu.cuMemcpyDtoDAsync(p + o, p + o, 100, s));
    SIM_CHECK(cu.cuMemcpyAsync(p + 300 + o, p + 300 + o, 33, s));
    k.chain(x, 2, s, &hx);
    // q[512 + a .. + 64) <- q[b .. + 64): overlapping while `overlap`.
    const size_t a = size_t(i % 16), b = overlap ? 512 + a + 8 : size_t(i % 40);
    SIM_CHECK(cu.cuMemcpyDtoDAsync(q + 512 + a, q + b, 64, s));
    k.chain(x, 3, s, &hx);
    SIM_CHECK(cu.cuStreamSynchronize(s));
    expectBytes(reinterpret_cast<const void*>(p), hp.data(), kBytes, "p (self copies)", i);
    if (overlap) {
      std::memcpy(hq.data(), reinterpret_cast<const void*>(q), kBytes);  // undefined bytes: as they are
    } else {
      std::memmove(hq.data() + 512 + a, hq.data() + b, 64);
      expectBytes(reinterpret_cast<const void*>(q), hq.data(), kBytes, "q", i);
    }
    expectValue(peek(x), hx, "x", i);
  }
}

// queries-held: pointer and range queries between held ops (graft does
// not intercept cuPointerGetAttribute, cuMemGetAddressRange or cuMemGetInfo):
// a stream-ordered block allocated in the step, a cuMemAlloc buffer and
// pinned memory, each asked about in the middle of the step; after the
// block's cuMemFreeAsync (the ops before it still held), its
// CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, which the simulated driver clears at
// the free's call (as it drops the pool's used memory then).
void queriesHeld(const Kit& k, int steps) {
  auto& cu = *k.cu;
  auto getRange = proc<decltype(&::cuMemGetAddressRange)>(*k.drv, "cuMemGetAddressRange");
  const CUstream s = newStream(cu);
  CUmemoryPool pool = nullptr;
  SIM_CHECK(cu.cuDeviceGetDefaultMemPool(&pool, 0));
  const CUdeviceptr buf = simtest::zeroedBuffer(cu, 200), x = simtest::zeroedBuffer(cu),
                    results = simtest::zeroedBuffer(cu, 8 * size_t(steps));
  void* h = nullptr;
  SIM_CHECK(cu.cuMemAllocHost(&h, 96));
  const CUdeviceptr pinned = reinterpret_cast<CUdeviceptr>(h);
  uint64_t hx = 0;
  auto attr = [&](CUpointer_attribute a, CUdeviceptr p, CUresult* r) {
    uint64_t v = 0;
    *r = cu.cuPointerGetAttribute(&v, a, p);
    return v;
  };
  for (int i = 0; i < steps; ++i) {
    CUdeviceptr t = 0;
    SIM_CHECK(cu.cuMemAllocAsync(&t, 136, s));
    k.chain(x, 3, s, &hx);
    SIM_CHECK(cu.cuMemsetD32Async(t, uint32_t(i), 34, s));
    k.add3(results + 8 * uint64_t(i), t + 64, 1, s);
    CUresult r;
    // Live memory, with ops held before and after.
    expectValue(attr(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, t + 100, &r), t, "RANGE_START_ADDR of the block", i);
    expectValue(attr(CU_POINTER_ATTRIBUTE_RANGE_SIZE, t + 100, &r), 136, "RANGE_SIZE of the block", i);
    expectValue(attr(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, t, &r), uint64_t(pool), "MEMPOOL_HANDLE of the block", i);
    expectValue(attr(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, pinned + 8, &r) & 0xffffffff, CU_MEMORYTYPE_HOST,
                "MEMORY_TYPE of pinned memory", i);
    CUdeviceptr base = 0;
    size_t size = 0;
    expectCode(getRange(&base, &size, buf + 150), CUDA_SUCCESS, "cuMemGetAddressRange of a cuMemAlloc buffer", i);
    expectValue(base, buf, "its base", i);
    expectValue(size, 200, "its size", i);
    expectCode(getRange(&base, &size, t + 7), CUDA_SUCCESS, "cuMemGetAddressRange of the block", i);
    expectValue(size, 136, "the block's size", i);
    expectCode(getRange(&base, &size, pinned), CUDA_ERROR_NOT_FOUND, "cuMemGetAddressRange of pinned memory", i);
    k.chain(x, 2, s, &hx);
    SIM_CHECK(cu.cuMemFreeAsync(t, s));
    if (irregular(i, 3)) {
      ++g_provoked;
      expectValue(attr(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, t, &r), 0,
                  "MEMPOOL_HANDLE of the block right after its cuMemFreeAsync", i);
    }
    k.chain(x, 3, s, &hx);
    if (i % 10 == 9) SIM_CHECK(cu.cuStreamSynchronize(s));
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  for (int i = 0; i < steps; ++i)
    expectValue(peek(results + 8 * uint64_t(i)), twoWords(uint32_t(i)) + 1, "a step's slot", i);
  expectValue(peek(x), hx, "x", steps);
}

// memset-flag-spin[-values]: the step's last op is a memset of pinned host
// memory that the host waits for without any CUDA call (a completion flag,
// the way cuStreamWriteValue32 is used; SIM_ASYNC_US=100 lets the
// simulated GPU run meanwhile; 3 s limit per step). Plain: the flag's value
// is the same every step and the host clears it before the step (a driver
// memset node never updated: graphed, issued by the idle flush). -values:
// the flag's value is the step's number (the simulator refuses to update a
// memset node naming host memory, so the graph launch fails on graft's
// launch thread while the host spins).
void memsetFlagSpin(const Kit& k, int steps, bool values) {
  auto& cu = *k.cu;
  const CUstream s = newStream(cu);
  void* h = nullptr;
  SIM_CHECK(cu.cuMemAllocHost(&h, 64));
  std::memset(h, 0, 64);
  const CUdeviceptr flag = reinterpret_cast<CUdeviceptr>(h), x = simtest::zeroedBuffer(cu),
                    y = simtest::zeroedBuffer(cu, 8 * size_t(steps));
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    const uint32_t v = values ? uint32_t(i) + 1 : 0x77u;
    if (!values) poke(flag, 0);
    k.chain(x, 30, s, &hx);  // a step of 35 ops: graphed one step at a time
    k.add3(y + 8 * uint64_t(i), x, 0, s);
    k.chain(x, 3, s, &hx);
    SIM_CHECK(cu.cuMemsetD32Async(flag, v, 2, s));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (peek(flag) != twoWords(v) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    expectValue(peek(flag), twoWords(v), "the flag, waited for 3 s without a CUDA call", i);
    expectValue(peek(x), hx, "x once the flag arrived", i);
    expectValue(peek(y + 8 * uint64_t(i)), hx - 3, "the step's slot once the flag arrived", i);
  }
  SIM_CHECK(cu.cuCtxSynchronize());
}

// free-attr-failure: each step a stream-ordered block is allocated,
// memset, read by a kernel into the step's slot and freed (cuMemFreeAsync)
// while those ops are held; on irregular steps the driver's next
// cuPointerGetAttributes fails (simInjectFailure, armed right before the
// free and cleared after it: the program never calls that function, so
// eagerly nothing changes; under graft it is the call freeHandlingOf makes).
void freeAttrFailure(const Kit& k, int steps, bool inject) {
  auto& cu = *k.cu;
  const CUstream s = newStream(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu), results = simtest::zeroedBuffer(cu, 8 * size_t(steps));
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    CUdeviceptr t = 0;
    SIM_CHECK(cu.cuMemAllocAsync(&t, 64, s));
    k.chain(x, 3, s, &hx);
    SIM_CHECK(cu.cuMemsetD32Async(t, uint32_t(i) + 1, 16, s));
    k.add3(results + 8 * uint64_t(i), t + 32, 0, s);
    k.chain(x, 3, s, &hx);
    const bool odd = inject && irregular(i, 11);
    g_provoked += odd;
    if (odd) simInjectFailure("cuPointerGetAttributes", 1, CUDA_ERROR_INVALID_VALUE);
    SIM_CHECK(cu.cuMemFreeAsync(t, s));
    if (odd) simClearFailures();
    k.chain(x, 2, s, &hx);
    if (i % 10 == 9) SIM_CHECK(cu.cuStreamSynchronize(s));
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  for (int i = 0; i < steps; ++i)
    expectValue(peek(results + 8 * uint64_t(i)), twoWords(uint32_t(i) + 1), "a step's slot", i);
  expectValue(peek(x), hx, "x", steps);
}

// legacy-flags-failure: a step on the legacy stream and a blocking stream
// b ordered only by the legacy stream's implicit synchronization, through
// memsets and copies: legacy x += 1 and a memset of m; b copies x to z
// (after the legacy work) and adds 1; legacy copies z to w (after b's work).
// The driver's first cuStreamGetFlags fails (simInjectFailure before the
// loop; the program never calls it, so eagerly nothing changes; under graft
// it is GraphExecutor::isBlocking's call when the step's graph is built).
void legacyFlagsFailure(const Kit& k, int steps, bool inject) {
  auto& cu = *k.cu;
  CUstream b = nullptr;
  SIM_CHECK(cu.cuStreamCreate(&b, CU_STREAM_DEFAULT));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu),
                    m = simtest::zeroedBuffer(cu), v = simtest::zeroedBuffer(cu);
  if (inject) {
    simInjectFailure("cuStreamGetFlags", 1, CUDA_ERROR_INVALID_VALUE);
    ++g_provoked;
  }
  uint64_t hx = 0, hv = 0;
  for (int i = 1; i <= steps; ++i) {
    k.chain(v, 3, nullptr, &hv);
    k.add3(x, x, 1, nullptr);  // legacy
    SIM_CHECK(cu.cuMemsetD32Async(m, uint32_t(i), 2, nullptr));
    hx += 1;
    SIM_CHECK(cu.cuMemcpyAsync(z, x, 8, b));  // blocking stream: after the legacy work
    k.add3(z, z, 1, b);
    SIM_CHECK(cu.cuMemcpyDtoDAsync(w, z, 8, nullptr));  // legacy: after b's work
    k.chain(v, 3, nullptr, &hv);
    SIM_CHECK(cu.cuStreamSynchronize(nullptr));
    expectValue(peek(w), hx + 1, "w (legacy copy of b's result)", i);
    expectValue(peek(z), hx + 1, "z (b's copy of the legacy result, + 1)", i);
    expectValue(peek(m), twoWords(uint32_t(i)), "m", i);
  }
  simClearFailures();
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(v), hv, "v", steps);
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review9_memops", 120);
  std::string mode = args.mode;
  const int steps = args.steps;
  if (mode.rfind("memset-flag-spin", 0) == 0) setenv("SIM_ASYNC_US", "100", 0);  // the GPU runs while the host spins
  simtest::Driver drv;
  Kit k;
  if (int rc = simtest::startProgram("sim_review9_memops", &drv, &k.ctx)) return rc;
  k.drv = &drv;
  k.cu = &drv.plain;
  k.add = simtest::libraryKernel3("sim_add_review9");
  k.zero = simtest::zeroedBuffer(drv.plain);
  cuuint64_t flags = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
  auto strip = [&mode](const std::string& suffix) {
    if (mode.size() <= suffix.size() || mode.compare(mode.size() - suffix.size(), suffix.size(), suffix)) return false;
    mode.resize(mode.size() - suffix.size());
    return true;
  };
  if (strip("-pts")) {
    g_defaultStream = true;
    k.cu = &drv.perThread;
    flags = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  } else if (strip("-legacy")) {
    g_defaultStream = true;
  }
  {
    void* p = nullptr;
    CUdriverProcAddressQueryResult q{};
    if (drv.getProcAddress("cuMemsetD2D16Async", &p, 13000, flags, &q) != CUDA_SUCCESS || !p) return 2;
    k.memsetD2D16Async = reinterpret_cast<decltype(&::cuMemsetD2D16Async)>(p);
  }
  if (mode == "memset-widths") memsetWidths(k, steps);
  else if (mode == "memset-host") memsetHost(k, steps, false);
  else if (mode == "memset-host-fixed") memsetHost(k, steps, true);
  else if (mode == "mapped-host") mappedHost(k, steps);
  else if (mode == "copy-kind-switch") copyKindSwitch(k, steps);
  else if (mode == "copy-size-varies") copySizes(k, steps, false);
  else if (mode == "copy-size-cycle") copySizes(k, steps, true);
  else if (mode == "copy-alias") copyAlias(k, steps);
  else if (mode == "queries-held") queriesHeld(k, steps);
  else if (mode == "free-attr" || mode == "free-attr-failure") freeAttrFailure(k, steps, mode != "free-attr");
  else if (mode == "legacy-flags" || mode == "legacy-flags-failure")
    legacyFlagsFailure(k, steps, mode != "legacy-flags");
  else if (mode == "memset-flag-spin") memsetFlagSpin(k, steps, false);
  else if (mode == "memset-flag-spin-values") memsetFlagSpin(k, steps, true);
  else {
    std::printf("usage: sim_review9_memops --mode memset-widths|memset-host|memset-host-fixed|mapped-host|"
                "copy-kind-switch|copy-size-varies|copy-size-cycle|copy-alias|queries-held|memset-flag-spin|"
                "memset-flag-spin-values|free-attr|free-attr-failure|legacy-flags|legacy-flags-failure "
                "[-pts|-legacy] [--steps N] [--expect-graphs]\n");
    return 2;
  }
  return report(steps, args.expectGraphs);
}
