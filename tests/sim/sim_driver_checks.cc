// sim_driver_checks: calls whose outcome only the driver decides, made in a
// loop graft replays, on irregular steps: every return code and value must
// be what the simulated driver gives eagerly (the program knows each code
// and keeps a host copy of every value). One mode per divergence found on a
// real GPU (tests/gpu/traps_edge.cu, fixed in 115473b and 97e575d;
// tests/gpu/traps_driver2.cu and traps_threads2.cu, fixed in b0e0eb1):
//   sim_driver_checks --mode MODE [--steps N] [--expect-graphs]
//
// params-extra   cuLaunchKernel / cuLaunchKernelEx given kernelParams and an
//                `extra` list too (empty, or a buffer with other values) on
//                irregular steps, where the other steps make the same launch
//                with kernelParams only: the driver refuses it
//                (CUDA_ERROR_INVALID_VALUE) and it has no effect. A tool that
//                holds it as the launch its graph expects returns success and
//                runs it.
// empty-ops      every step a copy into device 1's memory (a copy node in a
//                graph: graft's copy kernels serve device 0's memory only)
//                and a 32-bit memset of it, each followed at once by an empty
//                op of the same kind (0 bytes; 0 elements) whose addresses and
//                value change every step; kernels read what the real ops
//                wrote. A capture adds no node for an empty op: a tool that
//                takes the node before it as the empty op's node and patches
//                it redirects the real copy or memset (wrong values).
// unaligned-memset  cuMemsetD32Async 2 bytes off 4-byte alignment and
//                cuMemsetD16Async at an odd address on irregular steps, at the
//                place of the aligned ones: refused (CUDA_ERROR_INVALID_VALUE).
// bad-free       cuMemFreeAsync of a pointer into a stream-ordered block, and
//                of pinned host memory, on irregular steps, while the step's
//                kernels using the block are held: refused
//                (CUDA_ERROR_INVALID_VALUE), where a free held back returns
//                success.
// pageable-copy  cuMemcpyDtoDAsync from pageable host memory on irregular
//                steps, at the place of a copy from device memory: refused
//                (CUDA_ERROR_INVALID_VALUE), the target left alone.
// noop-query     every step, after a context synchronize, waits on events
//                never recorded (no-ops) on a created stream and the legacy
//                stream, then the step's kernels; on irregular steps the host
//                asks cuStreamQuery of both streams between the waits and the
//                kernels: nothing is pending, CUDA_SUCCESS. A tool that holds
//                the waits and answers for streams it holds work on says
//                CUDA_ERROR_NOT_READY.
// pool-stats     every step a stream-ordered block of the device's pool is
//                written, read and freed with kernels held around it, then a
//                second one; on irregular steps the pool's used memory
//                (CU_MEMPOOL_ATTR_USED_MEM_CURRENT, and USED_MEM_HIGH after a
//                reset at the step's start) is read right after each free:
//                the driver counts a block free at its free's call (0 in use
//                after each free; the high watermark that block's size). A
//                free held back past held work leaves it counted.
// primary-retain driver API only, no other reference to the primary
//                context: three rounds of retain it, load a module, allocate,
//                create two streams and two events, run a two-stream loop and
//                release it (its last reference: the context ends with
//                everything in it; the memory is freed by hand first, so the
//                next round gets the same addresses). The simulator hands the
//                next round the same context, stream, event, function and
//                memory handles, as a real driver may: a tool that replays a
//                graph of the ended context crashes (the simulator aborts).
//
// malformed-launch  launches the driver refuses for their configuration only,
//                on irregular steps at the place of a valid launch:
//                cuLaunchKernelEx with numAttrs 1 and attrs NULL, and
//                cuLaunchKernel with an `extra` buffer whose
//                CU_LAUNCH_PARAM_BUFFER_SIZE pointer is NULL, or whose size is
//                not the kernel's parameter size (4096, where the buffer ends
//                at a page that cannot be read, or 8 bytes less):
//                refused (CUDA_ERROR_INVALID_VALUE), no effect. A tool that
//                reads the configuration before the driver checked it
//                dereferences NULL, or holds the launch and returns success.
// sticky-error   once, on an irregular step, the step's last kernel reads an
//                address that is no memory (the simulator's illegal-address
//                fault: a sticky error); the step's synchronize reports
//                CUDA_ERROR_ILLEGAL_ADDRESS, and ten more steps of the same
//                calls (launches, an event record, a wait, a synchronize) each
//                return it. A tool that goes on holding launches returns
//                success for them.
// other-context-query  kernels on the legacy stream of the program's
//                context; on irregular steps, between them, the host makes a
//                second context current (cuCtxPushCurrent) and asks
//                cuStreamQuery of NULL and CU_STREAM_LEGACY: that context's
//                default stream, idle (CUDA_SUCCESS); on other irregular steps
//                with no context current (cuCtxSetCurrent(NULL)): the
//                driver's CUDA_ERROR_INVALID_CONTEXT. A tool that answers for
//                the legacy stream it holds work on says CUDA_ERROR_NOT_READY.
// captured-event-wait  every step a cross-stream wait on the step's record;
//                on irregular steps the program first captures a kernel and a
//                record of a second event on a third stream (relaxed mode, the
//                graph thrown away), and the wait names that event: last
//                recorded in a capture, refused outside it
//                (CUDA_ERROR_CAPTURED_EVENT; the wait on the step's record
//                follows). A tool that holds the wait in its graph, with the
//                event patched, returns success.
// range-past-end cuMemcpyDtoDAsync of 64 bytes and cuMemsetD32Async of 16
//                words whose start moves every step inside 256-byte buffers;
//                on irregular steps the range ends 8 bytes past the
//                allocation's end: refused (CUDA_ERROR_INVALID_VALUE), the
//                target left alone. A tool that checks only the start holds
//                them and returns success.
//
// --expect-graphs: also exit 3 (the path under test was not taken) unless
// some kernels ran from graphs. Exit 1 on a wrong code or value.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"

namespace {

using namespace simtest::modes;

bool irregular(int step, uint64_t salt) { return irregularStep(step, salt, 8, 9); }

// Synchronizes `s` and compares the 8 bytes at `p` with `want`.
void checkWord(const simtest::DriverApi& cu, CUstream s, CUdeviceptr p, uint64_t want, const char* what, int step) {
  SIM_CHECK(cu.cuStreamSynchronize(s));
  expectValue(readWord(cu, p), want, what, step);
}

CUresult launch3(const simtest::DriverApi& cu, CUfunction f, CUdeviceptr to, CUdeviceptr from, uint64_t add,
                 CUstream s, void** extra = nullptr) {
  void* args[] = {&to, &from, &add};
  return cu.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, extra);
}

// ------------------------------------------------------------------ modes

void paramsExtra(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0, hz = 0;
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, 1, s));  // y = x + 1
    hy = hx + 1;
    // The odd `extra` lists: empty, or a buffer naming other buffers and values.
    uint64_t other[3] = {x, y, 1000 + uint64_t(i)};
    size_t otherSize = sizeof other;
    void* emptyExtra[] = {CU_LAUNCH_PARAM_END};
    void* bufferExtra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, other, CU_LAUNCH_PARAM_BUFFER_SIZE, &otherSize,
                           CU_LAUNCH_PARAM_END};
    // z = y + i, through cuLaunchKernel; with an `extra` list too: refused.
    const bool both2 = irregular(i, 1);
    void** extra2 = both2 ? (i % 2 ? emptyExtra : bufferExtra) : nullptr;
    expectCode(launch3(cu, add, z, y, uint64_t(i), s, extra2), both2 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS,
               both2 ? "cuLaunchKernel with kernelParams and extra" : "cuLaunchKernel", i);
    if (!both2) hz = hy + uint64_t(i);
    // x = z + 3, through cuLaunchKernelEx; likewise.
    const bool both3 = irregular(i, 2);
    void** extra3 = both3 ? (i % 2 ? bufferExtra : emptyExtra) : nullptr;
    CUlaunchConfig cfg = {};
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = s;
    CUdeviceptr to = x, from = z;
    uint64_t k = 3;
    void* args[] = {&to, &from, &k};
    expectCode(cu.cuLaunchKernelEx(&cfg, add, args, extra3), both3 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS,
               both3 ? "cuLaunchKernelEx with kernelParams and extra" : "cuLaunchKernelEx", i);
    if (!both3) hx = hz + 3;
    g_provoked += both2 + both3;
    // y = x + 5, with an `extra` buffer only (valid).
    uint64_t buf[3] = {y, x, 5};
    size_t bufSize = sizeof buf;
    void* extra4[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &bufSize, CU_LAUNCH_PARAM_END};
    SIM_CHECK(cu.cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, nullptr, extra4));
    hy = hx + 5;
    SIM_CHECK(simtest::launchAdd(cu, add, x, y, 1, s));  // x = y + 1
    hx = hy + 1;
    if (i % 10 == 9 || i == steps - 1) {
      checkWord(cu, s, x, hx, "x", i);
      checkWord(cu, s, z, hz, "z", i);
    }
  }
}

void emptyOps(const simtest::Driver& drv, CUcontext ctx0, CUfunction add, int steps) {
  const simtest::DriverApi& cu = drv.plain;
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  // Device 1's memory, which the copy and the memset write.
  CUdevice dev1 = 0;
  CUcontext ctx1 = nullptr;
  SIM_CHECK(cu.cuDeviceGet(&dev1, 1));
  SIM_CHECK(cu.cuDevicePrimaryCtxRetain(&ctx1, dev1));
  SIM_CHECK(cu.cuCtxSetCurrent(ctx1));
  const CUdeviceptr far = simtest::zeroedBuffer(cu, 256);
  SIM_CHECK(cu.cuCtxSetCurrent(ctx0));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), src = simtest::zeroedBuffer(cu);
  constexpr size_t kZ = 4096;  // what the empty ops name: must stay zero
  const CUdeviceptr z[3] = {simtest::zeroedBuffer(cu, kZ), simtest::zeroedBuffer(cu, kZ),
                            simtest::zeroedBuffer(cu, kZ)};
  const CUdeviceptr w = simtest::zeroedBuffer(cu);  // a chain of kernels between the pieces
  uint64_t hx = 0, hy = 0, hw = 0;
  auto chain = [&](int n) {
    for (int k = 0; k < n; ++k) SIM_CHECK(simtest::launchAdd(cu, add, w, w, 1, s));
    hw += uint64_t(n);
  };
  for (int i = 0; i < steps; ++i) {
    chain(4);
    SIM_CHECK(simtest::launchAdd(cu, add, src, x, uint64_t(i) + 1, s));  // src = x + i + 1
    const uint64_t hsrc = hx + uint64_t(i) + 1;
    expectCode(cu.cuMemcpyDtoDAsync(far, src, 64, s), CUDA_SUCCESS, "cuMemcpyDtoDAsync", i);  // far = src
    expectCode(cu.cuMemcpyDtoDAsync(z[i % 3] + 64 + 8 * (i % 5), z[(i + 1) % 3] + 128 + 16 * (i % 7), 0, s),
               CUDA_SUCCESS, "empty cuMemcpyDtoDAsync", i);
    SIM_CHECK(simtest::launchAdd(cu, add, y, far, 1, s));  // y = far + 1
    hy = hsrc + 1;
    chain(3);
    const uint32_t v = uint32_t(i) * 2654435761u + 17u;
    expectCode(cu.cuMemsetD32Async(far + 128, v, 16, s), CUDA_SUCCESS, "cuMemsetD32Async", i);
    expectCode(cu.cuMemsetD32Async(z[(i + 2) % 3] + 32 + 4 * (i % 9), uint32_t(i) * 40503u + 5u, 0, s),
               CUDA_SUCCESS, "empty cuMemsetD32Async", i);
    SIM_CHECK(simtest::launchAdd(cu, add, x, far + 128, 0, s));  // x = the memset's first two words
    hx = uint64_t(v) | uint64_t(v) << 32;
    chain(3);
    ++g_provoked;
    if (i % 10 == 9 || i == steps - 1) {
      checkWord(cu, s, y, hy, "y (what the copy brought)", i);
      checkWord(cu, s, x, hx, "x (what the memset wrote)", i);
      checkWord(cu, s, w, hw, "w", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  std::vector<uint8_t> host(kZ);
  for (int k = 0; k < 3; ++k) {
    SIM_CHECK(cu.cuMemcpyDtoH(host.data(), z[k], kZ));
    size_t nonzero = 0;
    for (uint8_t b : host) nonzero += b != 0;
    expectValue(nonzero, 0, "bytes an empty op named and something wrote", steps);
  }
}

void unalignedMemset(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  constexpr size_t kBytes = 4096;
  const CUdeviceptr m = simtest::zeroedBuffer(cu, kBytes), x = simtest::zeroedBuffer(cu);
  std::vector<uint8_t> hm(kBytes, 0);
  uint64_t hx = 0;
  auto word = [&](size_t off) {
    uint64_t w;
    std::memcpy(&w, hm.data() + off, 8);
    return w;
  };
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 1;
    // 32-bit: 4-byte aligned, or 2 bytes off.
    const bool off32 = irregular(i, 3);
    const uint32_t v32 = 0x9e3779b9u * uint32_t(i + 1);
    const size_t at32 = 256 + (off32 ? 2 : 0);
    expectCode(cu.cuMemsetD32Async(m + at32, v32, 16, s), off32 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS,
               off32 ? "cuMemsetD32Async 2 bytes off" : "cuMemsetD32Async", i);
    if (!off32)
      for (size_t k = 0; k < 16; ++k) std::memcpy(hm.data() + at32 + 4 * k, &v32, 4);
    SIM_CHECK(simtest::launchAdd(cu, add, x, m + 256, hx, s));  // x = m[256..264) + hx
    hx = word(256) + hx;
    // 16-bit: 2-byte aligned, or at an odd address.
    const bool off16 = irregular(i, 4);
    const uint16_t v16 = uint16_t(i * 31 + 7);
    const size_t at16 = 1024 + (off16 ? 1 : 0);
    expectCode(cu.cuMemsetD16Async(m + at16, v16, 20, s), off16 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS,
               off16 ? "cuMemsetD16Async at an odd address" : "cuMemsetD16Async", i);
    if (!off16)
      for (size_t k = 0; k < 20; ++k) std::memcpy(hm.data() + at16 + 2 * k, &v16, 2);
    SIM_CHECK(simtest::launchAdd(cu, add, x, m + 1024, hx, s));  // x = m[1024..1032) + hx
    hx = word(1024) + hx;
    g_provoked += off32 + off16;
    if (i % 10 == 9 || i == steps - 1) checkWord(cu, s, x, hx, "x", i);
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  std::vector<uint8_t> got(kBytes);
  SIM_CHECK(cu.cuMemcpyDtoH(got.data(), m, kBytes));
  size_t differ = 0;
  for (size_t k = 0; k < kBytes; ++k) differ += got[k] != hm[k];
  expectValue(differ, 0, "bytes of the memsets' buffer that differ", steps);
}

void badFree(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  void* pinned = nullptr;  // only ever handed to a refused free
  SIM_CHECK(cu.cuMemAllocHost(&pinned, 4096));
  uint64_t hx = 0, hy = 0;
  for (int i = 0; i < steps; ++i) {
    CUdeviceptr q = 0;
    SIM_CHECK(cu.cuMemAllocAsync(&q, 256, s));
    SIM_CHECK(simtest::launchAdd(cu, add, q, x, uint64_t(i), s));  // q = x + i
    SIM_CHECK(simtest::launchAdd(cu, add, y, q, 1, s));            // y = q + 1
    hy = hx + uint64_t(i) + 1;
    if (irregular(i, 5)) {
      expectCode(cu.cuMemFreeAsync(q + 16, s), CUDA_ERROR_INVALID_VALUE, "cuMemFreeAsync of a pointer into a block",
                 i);
      ++g_provoked;
    }
    if (irregular(i, 6)) {
      expectCode(cu.cuMemFreeAsync(reinterpret_cast<CUdeviceptr>(pinned), s), CUDA_ERROR_INVALID_VALUE,
                 "cuMemFreeAsync of pinned host memory", i);
      ++g_provoked;
    }
    expectCode(cu.cuMemFreeAsync(q, s), CUDA_SUCCESS, "cuMemFreeAsync", i);
    SIM_CHECK(simtest::launchAdd(cu, add, x, y, 2, s));  // x = y + 2
    hx = hy + 2;
    if (i % 10 == 9 || i == steps - 1) checkWord(cu, s, x, hx, "x", i);
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  SimCounters c{};
  simCounters(&c);
  expectValue(c.freesAsyncRun, uint64_t(steps), "stream-ordered frees that ran", steps);
}

void pageableCopy(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), a = simtest::zeroedBuffer(cu), t = simtest::zeroedBuffer(cu);
  std::vector<uint64_t> pageable(8, 0);
  for (size_t k = 0; k < pageable.size(); ++k) pageable[k] = 1000000 + k;
  uint64_t hx = 0, ha = 0, ht = 0;
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(simtest::launchAdd(cu, add, a, x, uint64_t(i), s));  // a = x + i
    ha = hx + uint64_t(i);
    // t = a (8 words), or from pageable memory: refused, t left alone.
    const bool bad = irregular(i, 7);
    const CUdeviceptr from = bad ? reinterpret_cast<CUdeviceptr>(pageable.data()) : a;
    expectCode(cu.cuMemcpyDtoDAsync(t, from, 64, s), bad ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS,
               bad ? "cuMemcpyDtoDAsync from pageable memory" : "cuMemcpyDtoDAsync", i);
    if (!bad) ht = ha;
    g_provoked += bad;
    SIM_CHECK(simtest::launchAdd(cu, add, x, t, 3, s));  // x = t + 3
    hx = ht + 3;
    if (i % 10 == 9 || i == steps - 1) checkWord(cu, s, x, hx, "x", i);
  }
}

void noopQuery(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUevent never1, never2;
  SIM_CHECK(cu.cuEventCreate(&never1, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&never2, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), c = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0, hc = 0;
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(cu.cuStreamWaitEvent(s, never1, 0));
    SIM_CHECK(cu.cuStreamWaitEvent(s, never2, 0));
    SIM_CHECK(cu.cuStreamWaitEvent(nullptr, never1, 0));
    if (irregular(i, 8)) {
      expectCode(cu.cuStreamQuery(s), CUDA_SUCCESS, "cuStreamQuery of a stream with only no-op waits", i);
      expectCode(cu.cuStreamQuery(nullptr), CUDA_SUCCESS, "cuStreamQuery of the legacy stream with a no-op wait",
                 i);
      ++g_provoked;
    }
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, uint64_t(i), s));
    SIM_CHECK(simtest::launchAdd(cu, add, x, y, 1, s));
    SIM_CHECK(simtest::launchAdd(cu, add, c, c, 2, nullptr));  // the legacy stream: its own buffer
    hy = hx + uint64_t(i), hx = hy + 1, hc += 2;
    SIM_CHECK(cu.cuCtxSynchronize());  // both streams idle before the next step's waits
    if (i % 10 == 9 || i == steps - 1) {
      expectValue(readWord(cu, x), hx, "x", i);
      expectValue(readWord(cu, c), hc, "c", i);
    }
  }
}

void poolStats(const simtest::Driver& drv, const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUresult (*getAttr)(CUmemoryPool, CUmemPool_attribute, void*) = nullptr;
  CUresult (*setAttr)(CUmemoryPool, CUmemPool_attribute, void*) = nullptr;
  if (!simtest::lookupProc(drv, "cuMemPoolGetAttribute", &getAttr) ||
      !simtest::lookupProc(drv, "cuMemPoolSetAttribute", &setAttr)) {
    ++g_wrong;
    return;
  }
  CUmemoryPool pool = nullptr;
  SIM_CHECK(cu.cuDeviceGetDefaultMemPool(&pool, 0));
  auto attr = [&](CUmemPool_attribute a) {
    cuuint64_t v = ~cuuint64_t(0);
    SIM_CHECK(getAttr(pool, a, &v));
    return uint64_t(v);
  };
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  constexpr size_t kA = 4096, kB = 8192;
  uint64_t hx = 0, hy = 0;
  for (int i = 0; i < steps; ++i) {
    const bool reads = irregular(i, 9);
    if (reads) {
      cuuint64_t zero = 0;
      SIM_CHECK(setAttr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));  // the watermark from here
    }
    CUdeviceptr a = 0, b = 0;
    SIM_CHECK(cu.cuMemAllocAsync(&a, kA, s));
    SIM_CHECK(simtest::launchAdd(cu, add, a, x, uint64_t(i), s));  // a = x + i
    SIM_CHECK(simtest::launchAdd(cu, add, y, a, 1, s));            // y = a + 1
    SIM_CHECK(cu.cuMemFreeAsync(a, s));
    if (reads) {
      expectValue(attr(CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0, "the pool's used memory after the first free", i);
      expectValue(attr(CU_MEMPOOL_ATTR_USED_MEM_HIGH), kA, "the pool's used-memory high watermark after it", i);
    }
    SIM_CHECK(cu.cuMemAllocAsync(&b, kB, s));
    SIM_CHECK(simtest::launchAdd(cu, add, b, y, 2, s));  // b = y + 2
    SIM_CHECK(simtest::launchAdd(cu, add, x, b, 3, s));  // x = b + 3
    SIM_CHECK(cu.cuMemFreeAsync(b, s));
    if (reads) {
      expectValue(attr(CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0, "the pool's used memory after the second free", i);
      expectValue(attr(CU_MEMPOOL_ATTR_USED_MEM_HIGH), kB, "the pool's used-memory high watermark after it", i);
      ++g_provoked;
    }
    hy = hx + uint64_t(i) + 1, hx = hy + 2 + 3;
    if (i % 10 == 9 || i == steps - 1) checkWord(cu, s, x, hx, "x", i);
  }
}

void primaryRetain(const simtest::Driver& drv, int steps) {
  const simtest::DriverApi& cu = drv.plain;
  decltype(&::cuModuleLoadData) moduleLoad = nullptr;
  decltype(&::cuModuleGetFunction) moduleGet = nullptr;
  decltype(&::cuDevicePrimaryCtxGetState) getState = nullptr;
  if (!simtest::lookupProc(drv, "cuModuleLoadData", &moduleLoad) ||
      !simtest::lookupProc(drv, "cuModuleGetFunction", &moduleGet) ||
      !simtest::lookupProc(drv, "cuDevicePrimaryCtxGetState", &getState)) {
    ++g_wrong;
    return;
  }
  SIM_CHECK(cu.cuInit(0));
  CUdevice dev = 0;
  SIM_CHECK(cu.cuDeviceGet(&dev, 0));
  CUcontext first = nullptr;
  CUstream firstStreams[2] = {};
  CUfunction firstFunction = nullptr;
  for (int round = 0; round < 3; ++round) {
    CUcontext ctx = nullptr;
    SIM_CHECK(cu.cuDevicePrimaryCtxRetain(&ctx, dev));
    SIM_CHECK(cu.cuCtxSetCurrent(ctx));
    CUmodule module = nullptr;
    CUfunction add = nullptr;
    SIM_CHECK(moduleLoad(&module, "sim-image: sim_add_round(8,8,8)"));
    SIM_CHECK(moduleGet(&add, module, "sim_add_round"));
    const CUdeviceptr a = simtest::zeroedBuffer(cu), b = simtest::zeroedBuffer(cu), c = simtest::zeroedBuffer(cu);
    CUstream s1 = nullptr, s2 = nullptr;
    SIM_CHECK(cu.cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    SIM_CHECK(cu.cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CUevent e1 = nullptr, e2 = nullptr;
    SIM_CHECK(cu.cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
    SIM_CHECK(cu.cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
    if (round == 0) {
      first = ctx, firstStreams[0] = s1, firstStreams[1] = s2, firstFunction = add;
    } else if (ctx != first || s1 != firstStreams[0] || s2 != firstStreams[1] || add != firstFunction) {
      // Not a failure of the tool: the handles this mode means to reuse were not.
      std::printf("sim_driver_checks: %s: round %d got other handles than round 0 (the simulator should give "
                  "the same)\n", g_mode, round);
      ++g_wrong;
    }
    uint64_t ha = 0, hb = 0, hc = 0;
    for (int i = 0; i < steps; ++i) {
      SIM_CHECK(launch3(cu, add, b, a, uint64_t(i), s1));  // b = a + i, after s2's last step (e2)
      SIM_CHECK(cu.cuEventRecord(e1, s1));
      SIM_CHECK(cu.cuStreamWaitEvent(s2, e1, 0));
      SIM_CHECK(launch3(cu, add, c, b, 1, s2));  // c = b + 1
      SIM_CHECK(launch3(cu, add, a, c, 2, s2));  // a = c + 2
      SIM_CHECK(cu.cuEventRecord(e2, s2));
      SIM_CHECK(cu.cuStreamWaitEvent(s1, e2, 0));
      hb = ha + uint64_t(i), hc = hb + 1, ha = hc + 2;
      if (i % 20 == 19) checkWord(cu, s1, a, ha, "a", round * 1000 + i);
    }
    SIM_CHECK(cu.cuCtxSynchronize());
    expectValue(readWord(cu, a), ha, "a at the round's end", round * 1000 + steps);
    for (CUdeviceptr p : {a, b, c}) SIM_CHECK(cu.cuMemFree(p));  // the next round gets the same addresses
    SIM_CHECK(cu.cuCtxSetCurrent(nullptr));
    SIM_CHECK(cu.cuDevicePrimaryCtxRelease(dev));  // the last reference: the context ends
    unsigned flags = 0;
    int active = -1;
    SIM_CHECK(getState(dev, &flags, &active));
    expectValue(uint64_t(active), 0, "the primary context's state after its last release", round);
    ++g_provoked;
  }
}

void malformedLaunch(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu),
                    w = simtest::zeroedBuffer(cu);
  // A parameter buffer at the end of a readable page, the next one not
  // readable: what reads past its 24 bytes faults.
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  void* pages = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (pages == MAP_FAILED || mprotect(static_cast<char*>(pages) + page, page, PROT_NONE)) {
    ++g_wrong;
    return;
  }
  uint64_t* const edge = reinterpret_cast<uint64_t*>(static_cast<char*>(pages) + page - 3 * 8);
  uint64_t hx = 0, hy = 0, hz = 0, hw = 0;
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, 1, s));  // y = x + 1
    hy = hx + 1;
    // z = y + i through cuLaunchKernelEx; or with one attribute counted and none given.
    // One odd launch on an irregular step (about one in nine), in turn.
    const int odd = irregular(i, 10) ? i % 3 : -1;
    const bool noAttrs = odd == 0;
    CUlaunchConfig cfg = {};
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = s;
    cfg.attrs = nullptr;
    cfg.numAttrs = noAttrs ? 1 : 0;
    CUdeviceptr to = z, from = y;
    uint64_t k = uint64_t(i);
    void* args[] = {&to, &from, &k};
    expectCode(cu.cuLaunchKernelEx(&cfg, add, args, nullptr), noAttrs ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS,
               noAttrs ? "cuLaunchKernelEx with numAttrs 1 and attrs NULL" : "cuLaunchKernelEx", i);
    if (!noAttrs) hz = hy + uint64_t(i);
    // w = z + 2 through an `extra` buffer; or with a NULL size pointer.
    const bool noSize = odd == 1;
    uint64_t buf1[3] = {w, z, 2};
    size_t size1 = sizeof buf1;
    void* extra1[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf1, CU_LAUNCH_PARAM_BUFFER_SIZE, noSize ? nullptr : &size1,
                      CU_LAUNCH_PARAM_END};
    expectCode(cu.cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, nullptr, extra1),
               noSize ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS,
               noSize ? "cuLaunchKernel with a NULL CU_LAUNCH_PARAM_BUFFER_SIZE" : "cuLaunchKernel (extra)", i);
    if (!noSize) hw = hz + 2;
    // x = w + 3 through an `extra` buffer that ends where readable memory
    // ends; or claiming a size other than the kernel's: 4096 bytes (past the
    // readable page), or 8 bytes less.
    const bool badSize = odd == 2;
    uint64_t* buf2 = edge;
    buf2[0] = x, buf2[1] = w, buf2[2] = 3;
    size_t size2 = badSize ? (i % 2 ? 4096 : 2 * 8) : 3 * 8;
    void* extra2[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf2, CU_LAUNCH_PARAM_BUFFER_SIZE, &size2, CU_LAUNCH_PARAM_END};
    expectCode(cu.cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, nullptr, extra2),
               badSize ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS,
               badSize ? "cuLaunchKernel with a buffer size not the kernel's" : "cuLaunchKernel (extra)", i);
    if (!badSize) hx = hw + 3;
    g_provoked += noAttrs + noSize + badSize;
    if (i % 10 == 9 || i == steps - 1) {
      checkWord(cu, s, x, hx, "x", i);
      checkWord(cu, s, z, hz, "z", i);
    }
  }
}

void stickyError(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s, s2;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CUevent e;
  SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), c = simtest::zeroedBuffer(cu);
  const CUdeviceptr nowhere = 0x1000;  // no memory: a kernel reading it faults
  uint64_t hx = 0, hy = 0;
  int faultAt = -1;
  for (int i = 0; i < steps; ++i) {
    if (faultAt < 0 && i >= steps / 3 && irregular(i, 13)) faultAt = i;
    const bool after = faultAt >= 0 && i > faultAt;
    const CUresult want = after ? CUDA_ERROR_ILLEGAL_ADDRESS : CUDA_SUCCESS;
    expectCode(simtest::launchAdd(cu, add, y, x, uint64_t(i), s), want, "cuLaunchKernel", i);  // y = x + i
    expectCode(cu.cuEventRecord(e, s), want, "cuEventRecord", i);
    expectCode(cu.cuStreamWaitEvent(s2, e, 0), want, "cuStreamWaitEvent", i);
    expectCode(simtest::launchAdd(cu, add, c, c, 1, s2), want, "cuLaunchKernel", i);
    // x = y + 1; on the fault's step from no memory.
    expectCode(simtest::launchAdd(cu, add, x, i == faultAt ? nowhere : y, 1, s), want, "cuLaunchKernel", i);
    expectCode(cu.cuStreamSynchronize(s), faultAt >= 0 ? CUDA_ERROR_ILLEGAL_ADDRESS : CUDA_SUCCESS,
               i == faultAt ? "cuStreamSynchronize after the faulting kernel" : "cuStreamSynchronize", i);
    expectCode(cu.cuStreamSynchronize(s2), faultAt >= 0 ? CUDA_ERROR_ILLEGAL_ADDRESS : CUDA_SUCCESS,
               "cuStreamSynchronize", i);
    if (faultAt < 0) {
      hy = hx + uint64_t(i), hx = hy + 1;
      if (i % 10 == 9) expectValue(readWord(cu, x), hx, "x", i);
    } else {
      ++g_provoked;
      if (i == faultAt + 10) break;
    }
  }
  if (faultAt < 0) {
    std::printf("sim_driver_checks: %s: no step faulted (too few steps)\n", g_mode);
    ++g_wrong;
  }
}

void otherContextQuery(const simtest::Driver& drv, CUcontext ctx, CUfunction add, int steps) {
  const simtest::DriverApi& cu = drv.plain;
  CUresult (*ctxCreate)(CUcontext*, CUctxCreateParams*, unsigned, CUdevice) = nullptr;
  decltype(&::cuCtxPushCurrent) ctxPush = nullptr;
  decltype(&::cuCtxPopCurrent) ctxPop = nullptr;
  if (!simtest::lookupProc(drv, "cuCtxCreate", &ctxCreate) || !simtest::lookupProc(drv, "cuCtxPushCurrent", &ctxPush) ||
      !simtest::lookupProc(drv, "cuCtxPopCurrent", &ctxPop)) {
    ++g_wrong;
    return;
  }
  CUcontext other = nullptr, popped = nullptr;
  SIM_CHECK(ctxCreate(&other, nullptr, 0, 0));  // current now
  SIM_CHECK(ctxPop(&popped));
  SIM_CHECK(cu.cuCtxSetCurrent(ctx));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), c = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0, hc = 0;
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, uint64_t(i), nullptr));  // y = x + i, legacy stream
    SIM_CHECK(simtest::launchAdd(cu, add, x, y, 1, nullptr));            // x = y + 1
    // One query at a time, each followed by a launch (two in a row would be
    // a poll, where a tool issues what it holds).
    CUstream legacy = i % 2 ? CU_STREAM_LEGACY : nullptr;
    if (irregular(i, 14)) {
      SIM_CHECK(ctxPush(other));
      expectCode(cu.cuStreamQuery(legacy), CUDA_SUCCESS,
                 i % 2 ? "cuStreamQuery(CU_STREAM_LEGACY) in another context" : "cuStreamQuery(NULL) in another context",
                 i);
      SIM_CHECK(ctxPop(&popped));
      expectValue(popped == other, 1, "the context popped is the one pushed", i);
      ++g_provoked;
    }
    SIM_CHECK(simtest::launchAdd(cu, add, x, x, 2, nullptr));  // x += 2
    if (irregular(i, 15)) {
      SIM_CHECK(cu.cuCtxSetCurrent(nullptr));
      expectCode(cu.cuStreamQuery(legacy), CUDA_ERROR_INVALID_CONTEXT,
                 i % 2 ? "cuStreamQuery(CU_STREAM_LEGACY) with no context current"
                       : "cuStreamQuery(NULL) with no context current",
                 i);
      SIM_CHECK(cu.cuCtxSetCurrent(ctx));
      ++g_provoked;
    }
    SIM_CHECK(simtest::launchAdd(cu, add, c, c, 1, nullptr));  // c += 1
    hc += 1;
    hy = hx + uint64_t(i), hx = hy + 1 + 2;
    if (i % 10 == 9 || i == steps - 1) {
      checkWord(cu, nullptr, x, hx, "x", i);
      expectValue(readWord(cu, c), hc, "c", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
}

void capturedEventWait(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s, s2, s3;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&s3, CU_STREAM_NON_BLOCKING));
  CUevent eStep, eCap, eBack;
  SIM_CHECK(cu.cuEventCreate(&eStep, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&eCap, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&eBack, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0;
  for (int i = 0; i < steps; ++i) {
    const bool captured = irregular(i, 16);
    if (captured) {  // a kernel and a record of eCap, captured and thrown away
      SIM_CHECK(cu.cuStreamBeginCapture(s3, CU_STREAM_CAPTURE_MODE_RELAXED));
      SIM_CHECK(simtest::launchAdd(cu, add, z, z, 1, s3));
      SIM_CHECK(cu.cuEventRecord(eCap, s3));
      CUgraph g = nullptr;
      SIM_CHECK(cu.cuStreamEndCapture(s3, &g));
      SIM_CHECK(cu.cuGraphDestroy(g));
    }
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, uint64_t(i), s));  // y = x + i
    SIM_CHECK(cu.cuEventRecord(eStep, s));
    // The wait after the synchronize names a record made before it: the
    // step's own, or on capture steps eCap (y is complete either way).
    SIM_CHECK(cu.cuStreamSynchronize(s));
    if (captured) {
      expectCode(cu.cuStreamWaitEvent(s2, eCap, 0), CUDA_ERROR_CAPTURED_EVENT,
                 "cuStreamWaitEvent on an event last recorded in a capture", i);
      ++g_provoked;
    } else {
      SIM_CHECK(cu.cuStreamWaitEvent(s2, eStep, 0));
    }
    SIM_CHECK(simtest::launchAdd(cu, add, x, y, 1, s2));  // x = y + 1
    SIM_CHECK(cu.cuEventRecord(eBack, s2));
    SIM_CHECK(cu.cuStreamWaitEvent(s, eBack, 0));
    hy = hx + uint64_t(i), hx = hy + 1;
    if (i % 10 == 9 || i == steps - 1) checkWord(cu, s, x, hx, "x", i);
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(readWord(cu, z), 0, "z (written only by captured kernels)", steps);
}

void rangePastEnd(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  constexpr size_t kBytes = 256, kWords = kBytes / 8;
  const CUdeviceptr x = simtest::zeroedBuffer(cu), p = simtest::zeroedBuffer(cu, kBytes),
                    t = simtest::zeroedBuffer(cu, kBytes), q = simtest::zeroedBuffer(cu, kBytes);
  std::vector<uint64_t> hp(kWords, 0), ht(kWords, 0), hq(kWords, 0);
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    // p[off] = x + i; t[off, off + 64) = p[off, off + 64) (past the end: refused); x = t[off] + 3.
    const bool pastCopy = irregular(i, 17);
    const size_t off = pastCopy ? kBytes - 64 + 8 : 8 * size_t(i % 16);
    SIM_CHECK(simtest::launchAdd(cu, add, p + off, x, uint64_t(i), s));
    hp[off / 8] = hx + uint64_t(i);
    expectCode(cu.cuMemcpyDtoDAsync(t + off, p + off, 64, s), pastCopy ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS,
               pastCopy ? "cuMemcpyDtoDAsync past its allocation's end" : "cuMemcpyDtoDAsync", i);
    if (!pastCopy)
      for (size_t k = 0; k < 8; ++k) ht[off / 8 + k] = hp[off / 8 + k];
    SIM_CHECK(simtest::launchAdd(cu, add, x, t + off, 3, s));
    hx = ht[off / 8] + 3;
    // q[off2, off2 + 64) = v (16 words; past the end: refused); x = q[off2] + x.
    const bool pastSet = irregular(i, 18);
    const size_t off2 = pastSet ? kBytes - 64 + 8 : 8 * size_t((i * 5) % 16);
    const uint32_t v = uint32_t(i) * 2654435761u + 1u;
    expectCode(cu.cuMemsetD32Async(q + off2, v, 16, s), pastSet ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS,
               pastSet ? "cuMemsetD32Async past its allocation's end" : "cuMemsetD32Async", i);
    if (!pastSet)
      for (size_t k = 0; k < 8; ++k) hq[off2 / 8 + k] = uint64_t(v) | uint64_t(v) << 32;
    SIM_CHECK(simtest::launchAdd(cu, add, x, q + off2, hx, s));
    hx = hq[off2 / 8] + hx;
    g_provoked += pastCopy + pastSet;
    if (i % 10 == 9 || i == steps - 1) checkWord(cu, s, x, hx, "x", i);
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  std::vector<uint64_t> got(kWords);
  size_t differ = 0;
  for (auto [buf, want] : {std::pair{t, &ht}, std::pair{q, &hq}}) {
    SIM_CHECK(cu.cuMemcpyDtoH(got.data(), buf, kBytes));
    for (size_t k = 0; k < kWords; ++k) differ += got[k] != (*want)[k];
  }
  expectValue(differ, 0, "words of the copy's and the memset's targets that differ", steps);
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_driver_checks", 200);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  const bool expectGraphs = args.expectGraphs;
  simtest::Driver drv;
  const bool ownContext = mode != "primary-retain";
  CUcontext ctx = nullptr;
  if (int rc = simtest::startProgram("sim_driver_checks", &drv, ownContext ? &ctx : nullptr)) return rc;
  const simtest::DriverApi& cu = drv.plain;
  CUfunction add = ownContext ? simtest::libraryKernel3("sim_add_driver_checks") : nullptr;
  if (mode == "params-extra") paramsExtra(cu, add, steps);
  else if (mode == "empty-ops") emptyOps(drv, ctx, add, steps);
  else if (mode == "unaligned-memset") unalignedMemset(cu, add, steps);
  else if (mode == "bad-free") badFree(cu, add, steps);
  else if (mode == "pageable-copy") pageableCopy(cu, add, steps);
  else if (mode == "noop-query") noopQuery(cu, add, steps);
  else if (mode == "pool-stats") poolStats(drv, cu, add, steps);
  else if (mode == "primary-retain") primaryRetain(drv, steps / 2);
  else if (mode == "malformed-launch") malformedLaunch(cu, add, steps);
  else if (mode == "sticky-error") stickyError(cu, add, steps);
  else if (mode == "other-context-query") otherContextQuery(drv, ctx, add, steps);
  else if (mode == "captured-event-wait") capturedEventWait(cu, add, steps);
  else if (mode == "range-past-end") rangePastEnd(cu, add, steps);
  else {
    std::printf("usage: sim_driver_checks --mode params-extra|empty-ops|unaligned-memset|bad-free|pageable-copy|"
                "noop-query|pool-stats|primary-retain|malformed-launch|sticky-error|other-context-query|"
                "captured-event-wait|range-past-end [--steps N] [--expect-graphs]\n");
    return 2;
  }
  return report(steps, expectGraphs);
}
