// sim_review4_copies: red-team checks of copies, memsets and default streams
// (review of src/graph/copy_kernels.{h,cc}, src/graph/op_codec.cc,
// src/graph/per_thread_streams.{h,cc} and the copy/memset encoders of
// src/hook/interpose.cc). One mode per suspected divergence from eager
// behaviour; every mode passes without graft (the simulated driver's own
// answers), and a mode that also passes under graft is a regression check:
//   sim_review4_copies --mode MODE [--steps N] [--expect-graphs]
//
// pts-join-legacy  a loop on the thread's per-thread default stream (a
//                  memset, a device copy, kernels); after them the legacy
//                  stream runs a kernel that waits for the host (sim_gate);
//                  the host polls cuStreamQuery of its per-thread stream, then
//                  opens the gate. Eagerly the per-thread stream never waits
//                  for legacy work issued after its own: the query turns
//                  ready. (graft's join records its proxy's `exit` event on
//                  a blocking stream, which completes only after earlier
//                  legacy work, and makes the per-thread stream wait on it.)
// async-past-end   a 64-byte cuMemAllocAsync temporary every step, memset,
//                  copied out, freed; on irregular steps the memset and the
//                  copy name 72 bytes: refused (range past the allocation's
//                  end). Run also with GRAFT_POOL=1 (graft's pool serves the
//                  block from a larger mapping).
// memset-pinned-switch  a 1-D and a 2-D 32-bit memset whose destination is
//                  device memory, and on irregular steps pinned host memory;
//                  kernels read what they wrote. (Regression check.)
// odd-copies       copies and memsets at odd addresses and sizes whose
//                  addresses move inside their allocations every step, with
//                  an overlapping copy on irregular steps; every byte checked.
//                  (Regression check.)
// pitch-variants   a 2-D memset whose pitch alternates between two values
//                  (two variants of the step) and whose destination moves.
//                  (Regression check.)
// mixed-defaults   one step on the legacy stream, the per-thread stream, a
//                  blocking and a non-blocking stream ordered only by implicit
//                  synchronization, copies and memsets among the kernels; the
//                  non-blocking stream waits for the host, which first
//                  synchronizes the legacy stream. (Regression check.)
//
// Exit 0: every code and value as the driver gives them; 1: a divergence;
// 3 with --expect-graphs: no kernel ran from a graph (path not taken).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"

namespace {

using namespace simtest::modes;

bool irregular(int step, uint64_t salt) { return irregularStep(step, salt, 10, 7); }


void launchGate(const simtest::DriverApi& cu, CUfunction gate, CUdeviceptr flag, uint64_t it, CUstream s) {
  uint64_t unused = 0;
  void* args[] = {&flag, &unused, &it};
  SIM_CHECK(cu.cuLaunchKernel(gate, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
}

// ------------------------------------------------------------------ modes

// pts-join-legacy: one thread's loop on its per-thread default stream (the
// per-thread table, NULL stream): a memset, a device copy and kernels. After
// them the legacy stream (the plain table, NULL) runs a kernel that waits for
// the host (a sim_gate: a kernel spinning on mapped memory; eagerly it also
// waits for the per-thread work before it). The host then polls
// cuStreamQuery of its per-thread stream until it is ready, reads the result,
// and only then opens the gate. Eagerly the per-thread stream's work never
// waits for legacy work issued after it, so the query turns ready.
void ptsJoinLegacy(const simtest::Driver& drv, CUfunction add, CUfunction gate, int steps) {
  const simtest::DriverApi& pt = drv.perThread;
  const simtest::DriverApi& cu = drv.plain;
  const CUdeviceptr a = simtest::zeroedBuffer(cu), x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu),
                    flag = simtest::zeroedBuffer(cu);
  int stuck = 0;
  for (int i = 1; i <= steps; ++i) {
    SIM_CHECK(pt.cuMemsetD32Async(a, uint32_t(i), 2, nullptr));  // a = i in both words
    SIM_CHECK(pt.cuMemcpyDtoDAsync(y, a, 8, nullptr));           // y = a
    SIM_CHECK(simtest::launchAdd(pt, add, x, y, 1, nullptr));   // x = y + 1
    for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(pt, add, x, x, 1, nullptr));
    const uint64_t want = (uint64_t(uint32_t(i)) | uint64_t(uint32_t(i)) << 32) + 4;
    launchGate(cu, gate, flag, uint64_t(i), nullptr);  // legacy: waits for the host
    CUresult r = CUDA_ERROR_NOT_READY;
    for (int polls = 0; polls < 1000 && r == CUDA_ERROR_NOT_READY; ++polls) r = pt.cuStreamQuery(nullptr);
    if (r != CUDA_SUCCESS) ++stuck;
    expectCode(r, CUDA_SUCCESS,
               "cuStreamQuery of the per-thread stream (its work issued before the legacy kernel that waits for "
               "the host), polled 1000 times",
               i);
    if (r == CUDA_SUCCESS) expectValue(peek(x), want, "x (the per-thread stream was ready)", i);
    *reinterpret_cast<volatile uint64_t*>(flag) = uint64_t(i);  // open the gate
    SIM_CHECK(cu.cuCtxSynchronize());
    expectValue(readWord(cu, x), want, "x", i);
  }
  if (stuck) std::printf("sim_review4_copies: %s: %d steps never saw the per-thread stream ready\n", g_mode, stuck);
}

// memset-pinned-switch: a one-stream loop with a 1-D and a 2-D 32-bit memset
// whose destination is device memory, and on irregular steps pinned host
// memory (cuMemAllocHost) of the same size instead; kernels read what they
// wrote. Pinned memory is a legal memset target; graft's copy kernel form
// does not reach it.
void memsetPinnedSwitch(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr dev = simtest::zeroedBuffer(cu, 256), x = simtest::zeroedBuffer(cu),
                    y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu);
  void* host = nullptr;
  SIM_CHECK(cu.cuMemAllocHost(&host, 256));
  std::memset(host, 0, 256);
  const CUdeviceptr pinned = reinterpret_cast<CUdeviceptr>(host);
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    const bool odd = irregular(i, 2);
    g_provoked += odd;
    const CUdeviceptr t = odd ? pinned : dev;
    for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 3;
    SIM_CHECK(cu.cuMemsetD32Async(t, uint32_t(i), 2, s));                    // t[0] = i | i << 32
    SIM_CHECK(cu.cuMemsetD2D32Async(t + 64, 32, uint32_t(i) + 7u, 2, 3, s));  // rows at t+64, t+96, t+128
    SIM_CHECK(simtest::launchAdd(cu, add, y, t, 0, s));                      // y = t[0]
    SIM_CHECK(simtest::launchAdd(cu, add, z, t + 128, 1, s));                // z = row 2 + 1
    for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 3;
    SIM_CHECK(cu.cuStreamSynchronize(s));
    const uint64_t w = uint64_t(uint32_t(i)) | uint64_t(uint32_t(i)) << 32;
    const uint64_t v = uint64_t(uint32_t(i) + 7u) | uint64_t(uint32_t(i) + 7u) << 32;
    expectValue(peek(y), w, "y", i);
    expectValue(peek(z), v + 1, "z", i);
    expectValue(peek(t + 96), v, "row 1 of the 2-D memset", i);
    expectValue(peek(x), hx, "x", i);
  }
}

// odd-copies: copies and memsets at odd addresses and sizes whose addresses
// move inside their allocations every step (sizes fixed: patched, not
// mismatched): a 37-byte device copy from src + (i % 29) to dst + (i % 13),
// a D8 memset of 11 bytes at an odd offset, a D16 memset of 5 elements at an
// even offset that moves, a 2-D D8 memset of 3 rows of 7 bytes, pitch 9, at a
// moving odd address, and a 3-byte copy inside one allocation (disjoint
// ranges); on irregular steps the 37-byte copy's ranges overlap (one
// allocation; its bytes are not checked: the result is undefined). Every
// other byte of the destination buffers is checked every step against a
// host model.
void oddCopies(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  constexpr size_t kBytes = 256;
  const CUdeviceptr src = simtest::zeroedBuffer(cu, kBytes), dst = simtest::zeroedBuffer(cu, kBytes),
                    set = simtest::zeroedBuffer(cu, kBytes), x = simtest::zeroedBuffer(cu);
  uint8_t hsrc[kBytes], hdst[kBytes] = {}, hset[kBytes] = {};
  for (size_t k = 0; k < kBytes; ++k) hsrc[k] = uint8_t(k * 7 + 3);
  SIM_CHECK(cu.cuMemcpyHtoD(src, hsrc, kBytes));
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    const bool overlap = irregular(i, 4);
    g_provoked += overlap;
    for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 3;
    const size_t so = size_t(i % 29), dof = size_t(i % 13);
    // 37 bytes: src + so -> dst + dof, or (overlap) dst + dof -> dst + dof + 5.
    if (overlap) {
      SIM_CHECK(cu.cuMemcpyDtoDAsync(dst + 100 + dof, dst + 95 + dof, 37, s));
    } else {
      SIM_CHECK(cu.cuMemcpyDtoDAsync(dst + dof, src + so, 37, s));
      std::memcpy(hdst + dof, hsrc + so, 37);
    }
    // D8: 11 bytes at an odd offset.
    const size_t o8 = 1 + 2 * size_t(i % 17);
    SIM_CHECK(cu.cuMemsetD8Async(set + o8, uint8_t(i * 5 + 1), 11, s));
    std::memset(hset + o8, uint8_t(i * 5 + 1), 11);
    // D16: 5 elements at an even offset that moves (not a multiple of 4).
    const size_t o16 = 64 + 2 * size_t(i % 9);
    const uint16_t v16 = uint16_t(0x1234 + i * 77);
    SIM_CHECK(cu.cuMemsetD16Async(set + o16, v16, 5, s));
    for (int k = 0; k < 5; ++k) std::memcpy(hset + o16 + 2 * k, &v16, 2);
    // 2-D D8: 3 rows of 7 bytes, pitch 9, at a moving odd address.
    const size_t o2 = 129 + 2 * size_t(i % 11);
    SIM_CHECK(cu.cuMemsetD2D8Async(set + o2, 9, uint8_t(0xa0 + i % 50), 7, 3, s));
    for (int r = 0; r < 3; ++r) std::memset(hset + o2 + 9 * r, uint8_t(0xa0 + i % 50), 7);
    // 3 bytes inside one allocation (disjoint): set + o8 -> set + 200 + i % 7.
    const size_t o3 = 200 + size_t(i % 7);
    SIM_CHECK(cu.cuMemcpyAsync(set + o3, set + o8 + 2, 3, s));
    std::memcpy(hset + o3, hset + o8 + 2, 3);
    for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 3;
    SIM_CHECK(cu.cuStreamSynchronize(s));
    uint8_t got[kBytes];
    std::memcpy(got, reinterpret_cast<const void*>(set), kBytes);
    for (size_t k = 0; k < kBytes; ++k) {
      if (got[k] != hset[k]) {
        char what[64];
        std::snprintf(what, sizeof what, "set[%zu]", k);
        expectValue(got[k], hset[k], what, i);
        break;
      }
    }
    std::memcpy(got, reinterpret_cast<const void*>(dst), kBytes);
    if (overlap) std::memcpy(hdst + 100, got + 100, 50);  // undefined bytes: taken as they are
    for (size_t k = 0; k < kBytes; ++k) {
      if (got[k] != hdst[k]) {
        char what[64];
        std::snprintf(what, sizeof what, "dst[%zu]", k);
        expectValue(got[k], hdst[k], what, i);
        break;
      }
    }
    expectValue(peek(x), hx, "x", i);
  }
}

// pitch-variants: a 2-D 32-bit memset whose pitch alternates between two
// values from one phase of 8 steps to the next (two variants of the step)
// and whose destination moves; a kernel reads its last row.
void pitchVariants(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr buf = simtest::zeroedBuffer(cu, 1024), x = simtest::zeroedBuffer(cu),
                    y = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    const size_t pitch = (i / 8) % 2 ? 48 : 16;
    const CUdeviceptr d = buf + 8 * size_t(i % 5);
    for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 3;
    SIM_CHECK(cu.cuMemsetD2D32Async(d, pitch, uint32_t(i), 2, 4, s));
    SIM_CHECK(simtest::launchAdd(cu, add, y, d + 3 * pitch, 0, s));  // y = last row
    for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 3;
    SIM_CHECK(cu.cuStreamSynchronize(s));
    expectValue(peek(y), uint64_t(uint32_t(i)) | uint64_t(uint32_t(i)) << 32, "y", i);
    expectValue(peek(x), hx, "x", i);
  }
}

// async-past-end: a loop that allocates a 64-byte temporary with
// cuMemAllocAsync every step, fills it (a memset), copies it out and frees
// it; on irregular steps the memset and the copy name 8 bytes more than the
// block (72): the driver refuses both (CUDA_ERROR_INVALID_VALUE, range past
// the allocation's end). Meant for GRAFT_POOL=1 too.
void asyncPastEnd(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr out = simtest::zeroedBuffer(cu, 128), x = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    const bool odd = irregular(i, 5);
    g_provoked += odd;
    CUdeviceptr t = 0;
    SIM_CHECK(cu.cuMemAllocAsync(&t, 64, s));
    for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 3;
    expectCode(cu.cuMemsetD32Async(t, uint32_t(i), odd ? 18 : 16, s), odd ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS,
               odd ? "cuMemsetD32Async of 72 bytes into a 64-byte block" : "cuMemsetD32Async", i);
    if (odd) SIM_CHECK(cu.cuMemsetD32Async(t, uint32_t(i), 16, s));
    expectCode(cu.cuMemcpyDtoDAsync(out, t, odd ? 72 : 64, s), odd ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS,
               odd ? "cuMemcpyDtoDAsync of 72 bytes from a 64-byte block" : "cuMemcpyDtoDAsync", i);
    if (odd) SIM_CHECK(cu.cuMemcpyDtoDAsync(out, t, 64, s));
    SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 1;
    SIM_CHECK(cu.cuMemFreeAsync(t, s));
    if (i % 5 == 4 || i == steps - 1) {
      SIM_CHECK(cu.cuStreamSynchronize(s));
      expectValue(peek(out + 56), uint64_t(uint32_t(i)) | uint64_t(uint32_t(i)) << 32, "out[7]", i);
      expectValue(peek(x), hx, "x", i);
    }
  }
}

// mixed-defaults: one step on the legacy stream, the thread's per-thread
// stream, a blocking stream b and a non-blocking stream n, ordered only by
// the legacy stream's implicit synchronization: legacy x += 1 and a memset of
// m; per-thread y = x (a copy, after the legacy work) and y += 1; b z = x (a
// copy, after the legacy work); legacy w = y (a copy, after the per-thread
// and b work); n runs a kernel that waits for the host, then g += 1. The host
// synchronizes the legacy stream, reads w, z and m, then opens n's gate.
void mixedDefaults(const simtest::Driver& drv, CUfunction add, CUfunction gate, int steps) {
  const simtest::DriverApi& pt = drv.perThread;
  const simtest::DriverApi& cu = drv.plain;
  CUstream b, n;
  SIM_CHECK(cu.cuStreamCreate(&b, CU_STREAM_DEFAULT));
  SIM_CHECK(cu.cuStreamCreate(&n, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu),
                    w = simtest::zeroedBuffer(cu), m = simtest::zeroedBuffer(cu), g = simtest::zeroedBuffer(cu),
                    flag = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hg = 0;
  for (int i = 1; i <= steps; ++i) {
    SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, nullptr));  // legacy
    SIM_CHECK(cu.cuMemsetD32Async(m, uint32_t(i), 2, nullptr));
    hx += 1;
    SIM_CHECK(pt.cuMemcpyDtoDAsync(y, x, 8, nullptr));          // per-thread
    SIM_CHECK(simtest::launchAdd(pt, add, y, y, 1, nullptr));
    SIM_CHECK(cu.cuMemcpyAsync(z, x, 8, b));                     // blocking
    SIM_CHECK(cu.cuMemcpyDtoDAsync(w, y, 8, nullptr));           // legacy
    launchGate(cu, gate, flag, uint64_t(i), n);                  // non-blocking
    SIM_CHECK(simtest::launchAdd(cu, add, g, g, 1, n));
    hg += 1;
    SIM_CHECK(cu.cuStreamSynchronize(nullptr));
    expectValue(peek(w), hx + 1, "w", i);
    expectValue(peek(z), hx, "z", i);
    expectValue(peek(m), uint64_t(uint32_t(i)) | uint64_t(uint32_t(i)) << 32, "m", i);
    *reinterpret_cast<volatile uint64_t*>(flag) = uint64_t(i);
    SIM_CHECK(cu.cuStreamSynchronize(n));
    expectValue(peek(g), hg, "g", i);
  }
  SIM_CHECK(cu.cuCtxSynchronize());
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review4_copies", 120);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  const bool expectGraphs = args.expectGraphs;
  simtest::Driver drv;
  CUcontext ctx = nullptr;
  if (int rc = simtest::startProgram("sim_review4_copies", &drv, &ctx)) return rc;
  const simtest::DriverApi& cu = drv.plain;
  CUfunction add = simtest::libraryKernel3("sim_add_review4");
  CUfunction gate = simtest::libraryKernel3("sim_gate_review4");
  if (mode == "pts-join-legacy") ptsJoinLegacy(drv, add, gate, steps);
  else if (mode == "memset-pinned-switch") memsetPinnedSwitch(cu, add, steps);
  else if (mode == "odd-copies") oddCopies(cu, add, steps);
  else if (mode == "pitch-variants") pitchVariants(cu, add, steps);
  else if (mode == "async-past-end") asyncPastEnd(cu, add, steps);
  else if (mode == "mixed-defaults") mixedDefaults(drv, add, gate, steps);
  else {
    std::printf("usage: sim_review4_copies --mode pts-join-legacy|async-past-end|memset-pinned-switch|odd-copies|"
                "pitch-variants|mixed-defaults [--steps N] [--expect-graphs]\n");
    return 2;
  }
  return report(steps, expectGraphs);
}
