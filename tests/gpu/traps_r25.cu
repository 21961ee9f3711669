// traps_r25 (helper-written): a twenty-fifth red-team round of odd but legal CUDA C++
// patterns in the style of traps_r23.cu and traps_r21.cu (trap_common.cuh,
// trap_helpers.cuh, trap_mirror.cuh), aimed at what a tool that holds launches
// back, captures the repeating ones into graphs of its own, patches their
// parameters and answers some calls itself could get wrong: context-wide event
// records and waits (cuCtxRecordEvent, cuCtxWaitEvent) between two contexts,
// the CUDA 13 cuCtxSynchronize_v2 that names the context it synchronizes,
// device printf whose lines the driver flushes at synchronizations, launches
// and stream callbacks (the order of device and host lines on stdout), tiles
// of a sparse CUDA array remapped in stream order (cuMemMapArrayAsync) between
// kernels that read it through a texture, 2-D and 3-D copies whose memory
// types are CU_MEMORYTYPE_UNIFIED over pageable, pinned, managed and device
// memory, synchronous copies and memsets that the driver makes fully
// synchronous (targets in managed or pinned memory, the SYNC_MEMOPS pointer
// attribute and context flag), and the driver's error log. Each scenario is
// deterministic in eager (integer kernels, every cross-stream or
// cross-context access ordered by a stream, an event, a context-wide event, a
// stream memory wait, the legacy stream's implicit synchronization or a
// synchronous call), prints digests of its buffers and of the codes the host
// saw, and checks its results against a host mirror of its kernels (a FAIL line
// and exit 1 on a mismatch); check_traps.py requires the same output under
// graft. A scenario whose feature this machine lacks prints a SKIP line and
// stops.
//
//   ctx_event_barriers    the primary context's kernels on two non-blocking
//                         streams and the legacy stream write zero-copy
//                         (portable mapped) buffers; cuCtxRecordEvent(primary)
//                         captures them; a second context's stream waits on
//                         that event and, with cuStreamWaitValue32, on a gate
//                         word a primary kernel issued AFTER the record writes,
//                         reads the buffers and writes its own;
//                         cuCtxRecordEvent(second) and cuCtxWaitEvent(primary)
//                         order every later primary launch after it. The host
//                         reads the primary's buffers after synchronizing the
//                         context-wide event on some steps, and the second's
//                         after its event every step. What graft may get wrong:
//                         a context-wide record passed to the driver before
//                         the launches it holds (they are not in the event: the
//                         reader sees old data); a context-wide wait passed to
//                         the driver before held launches issued ahead of it
//                         (they then wait for work that waits for them: the
//                         host opens the gate itself after 2 s and says so).
//   ctx_sync_v2           two contexts, each with a non-blocking stream and its
//                         legacy stream, launch a library kernel into quarters
//                         of a zero-copy buffer; the host synchronizes ONE
//                         context with cuCtxSynchronize_v2 (CUDA 13; called
//                         directly and through cuGetProcAddress("cuCtxSynchronize",
//                         13000)), naming the other context, the current one or
//                         NULL, and at once reads that context's quarters with
//                         no CUDA call. What graft may get wrong: the v2 entry
//                         point not hooked (held launches not issued), or its
//                         hook synchronizing the current context instead of the
//                         one named.
//   printf_sync_points    device printf in two kernels a step (two streams
//                         joined by events), a host line after each of six
//                         documented flush points in turn (cudaStreamSynchronize,
//                         cudaEventSynchronize on a blocking-sync event,
//                         cudaDeviceSynchronize, cuCtxSynchronize,
//                         cuStreamSynchronize, cuEventSynchronize) and steps
//                         with none. The driver prints the device lines at
//                         the synchronization, so they come before the host's
//                         line. What graft may get wrong: a synchronization it
//                         answers without the driver's (or through a call that
//                         does not flush) moves device lines after host lines.
//   printf_launch_flush   (eager order of flush points the guide documents but
//                         the suite never relied on) in turn: a printing
//                         kernel that then writes a mapped flag, the host
//                         polling the flag with no CUDA call, then launching
//                         another kernel (the guide: the buffer is flushed at
//                         the start of a launch) and printing a host line; a
//                         printing kernel followed by cudaStreamAddCallback
//                         (flushed before the callback runs) whose callback
//                         prints; the same with cudaLaunchHostFunc. What graft
//                         may get wrong: a launch it holds does not reach the
//                         driver, so nothing is flushed there; a callback issued
//                         another way than the program's.
//   sparse_tile_remap     (a SKIP line without sparse arrays) a sparse 2-tile
//                         CUDA array backed by a tile pool of four slots, read
//                         through a texture object by a kernel before and after
//                         cuMemMapArrayAsync unmaps both tiles and maps them
//                         onto other slots (every step, on one stream), a
//                         device-to-array cuMemcpy2DAsync into the mapped
//                         slots every third step. What graft may get wrong: a
//                         remap passed to the driver ahead of the held kernel
//                         before it (which then reads the new slots).
//   unified_type_copies   cuMemcpy2DAsync and cuMemcpy3DAsync with
//                         CU_MEMORYTYPE_UNIFIED on both sides and
//                         cudaMemcpy2DAsync with cudaMemcpyDefault, between a
//                         pitched device buffer and pageable, pinned or managed
//                         memory that changes at one call site; pageable
//                         sources are scribbled right after the call, pageable
//                         destinations read right after it (and a 1-D
//                         cuMemcpyAsync to pageable memory). What graft may get
//                         wrong: a UNIFIED pointer taken for device memory,
//                         held and copied later (by a kernel of its own).
//   sync_memset_host_visible  kernels on a blocking stream write managed and
//                         pinned memory, then a synchronous cudaMemset or
//                         cuMemsetD32 into managed or pinned memory (the driver
//                         documents those as fully synchronous; the legacy
//                         stream orders them after the kernels): the host reads
//                         the memset's target and the kernels' output right
//                         after the call, with no synchronize. What graft may
//                         get wrong: such a memset held (as memsets of device
//                         memory, which return early, may be), or passed on
//                         ahead of the kernels it holds.
//   sync_memops_flag      (whether the driver honours the SYNC_MEMOPS pointer
//                         attribute and context flag for device-to-device
//                         copies and device memsets: unsure) synchronous
//                         cudaMemcpy / cuMemcpyDtoD and cudaMemset /
//                         cuMemsetD32 of 4 MiB on buffers with
//                         CU_POINTER_ATTRIBUTE_SYNC_MEMOPS set, then on others
//                         in a context with CU_CTX_SYNC_MEMOPS set by
//                         cuCtxSetFlags (and cleared again), each followed at
//                         once by a kernel on a non-blocking stream that reads
//                         the target (no event). What graft may get wrong: a
//                         synchronous operation it holds as asynchronous
//                         because it does not know the attribute or the flag.
//   driver_logs           (eager determinism of the driver's log: unsure) a
//                         callback from cuLogsRegisterCallback counts the
//                         driver's error messages and cuLogsDumpToMemory reads
//                         them at checkpoints (digits and hex numbers left out
//                         of the digests), while a loop makes calls the driver
//                         refuses on irregular steps (a launch of 2048 threads,
//                         a misaligned 32-bit memset, a free of an inner
//                         pointer). What graft may get wrong: calls of its own
//                         that fail (their messages show up in the program's
//                         log), or refusals it answers itself (no message).
//
//   traps_r25 NAME [--iters N]     one scenario (see kScenarios)
//   traps_r25 --list               the scenario names
//
// Linked to libcuda (-lcuda: contexts, context-wide events, sparse arrays,
// driver copies, logs); no device-side launches:
//   nvcc -O2 -std=c++17 -lineinfo -gencode arch=compute_90,code=[sm_90,compute_90]
//        -Xcompiler=-Wall,-Wextra,-Werror -I tests/gpu -o traps_r25 traps_r25.cu -lcuda
#include <cudaTypedefs.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "trap_mirror.cuh"

namespace {

// ---------------------------------------------------------------- shared helpers


// FAIL and exit 1 where host-visible memory differs from its mirror (no line
// otherwise).
void expectHost(const char* what, int at, const uint32_t* got, const uint32_t* want, size_t words) {
  for (size_t k = 0; k < words; ++k) {
    if (got[k] != want[k]) {
      std::printf("FAIL %s at step %d: word %zu is %x, the host mirror says %x\n", what, at, k, got[k], want[k]);
      std::exit(1);
    }
  }
}
// The same, then the mirror's digest.
void checkHost(const char* what, int at, const uint32_t* got, const std::vector<uint32_t>& want) {
  expectHost(what, at, got, want.data(), want.size());
  print(what, at, hostDigest(want.data(), want.size() * 4));
}

// The PTX kernel trapInc (trap_common.cuh) from a context-independent
// library: dst[k] = rotl(dst[k], 3) + src[(k * 11 + 5) % n] + v.
CUkernel incKernel() {
  static CUlibrary lib = nullptr;
  static CUkernel kernel = nullptr;
  if (!kernel) {
    CKD(cuLibraryLoadData(&lib, kIncPtx, nullptr, nullptr, 0, nullptr, nullptr, 0));
    CKD(cuLibraryGetKernel(&kernel, lib, "trapInc"));
  }
  return kernel;
}
// Loads the library kernel into the current context now (lazy loading would
// otherwise do it at the first launch).
void preloadInc() {
  CUfunction f = nullptr;
  CKD(cuKernelGetFunction(&f, incKernel()));
  int threads = 0;
  CKD(cuFuncGetAttribute(&threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
}
void launchInc(CUstream s, CUdeviceptr dst, CUdeviceptr src, int n, uint32_t v) {
  void* params[] = {&dst, &src, &n, &v};
  CKD(cuLaunchKernel(reinterpret_cast<CUfunction>(incKernel()), unsigned(n / kBlock), 1, 1, kBlock, 1, 1, 0, s,
                     params, nullptr));
}
void incHost(uint32_t* dst, const uint32_t* src, int n, uint32_t v) {
  for (int k = 0; k < n; ++k) dst[k] = rotl(dst[k], 3) + src[(k * 11 + 5) % n] + v;
}

// The primary context (current) and a second context on its device.
struct TwoContexts {
  CUcontext primary = nullptr, second = nullptr;
  CUdevice device = 0;
};
TwoContexts makeTwoContexts() {
  CK(cudaFree(nullptr));
  TwoContexts t;
  CKD(cuCtxGetCurrent(&t.primary));
  CKD(cuCtxGetDevice(&t.device));
  CKD(cuCtxCreate(&t.second, nullptr, 0, t.device));  // current now
  CKD(cuCtxSetCurrent(t.primary));
  return t;
}

// Portable mapped pinned memory (every context can use it).
uint32_t* portableMapped(size_t words) {
  void* p = nullptr;
  CKD(cuMemHostAlloc(&p, words * 4, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
  std::memset(p, 0, words * 4);
  return static_cast<uint32_t*>(p);
}
// Whether `host` has its own address as device pointer in context c.
bool sameAddressIn(CUcontext c, const void* host) {
  CKD(cuCtxPushCurrent(c));
  CUdeviceptr d = 0;
  CKD(cuMemHostGetDevicePointer(&d, const_cast<void*>(host), 0));
  CUcontext popped = nullptr;
  CKD(cuCtxPopCurrent(&popped));
  return d == dptr(host);
}

void pushCtx(CUcontext c) { CKD(cuCtxPushCurrent(c)); }
void popCtx() {
  CUcontext popped = nullptr;
  CKD(cuCtxPopCurrent(&popped));
}

// ---------------------------------------------------------------- ctx_event_barriers

// Every word stirred; thread 0 then raises the gate (after a system fence).
__global__ void gateStir(uint32_t* x, int n, uint32_t salt, uint32_t* gate, uint32_t value) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) x[k] = rotl(x[k], 9) ^ hash32(uint32_t(k) ^ salt);
  if (k == 0) {
    __threadfence_system();
    *reinterpret_cast<volatile uint32_t*>(gate) = value;
  }
}
void gateStirHost(std::vector<uint32_t>& x, uint32_t salt) {
  for (size_t k = 0; k < x.size(); ++k) x[k] = rotl(x[k], 9) ^ hash32(uint32_t(k) ^ salt);
}

// What a tool could get wrong: cuCtxRecordEvent captures ALL the work the
// context has at the call, cuCtxWaitEvent makes all LATER work of a context
// wait. A tool that passes the record to the driver while it still holds the
// primary's launches leaves them out of the event (the second context reads
// old buffers); one that passes the wait on before issuing launches it holds
// makes them wait too, and the gate kernel among them then waits for the
// second context, which waits for the gate.
// Eagerly deterministic: the second context reads the primary's buffers only
// after the context-wide record, the primary reads and rewrites the shared
// buffers only after the context-wide wait on the second's record; the gate is
// written by a kernel issued before the wait, so nothing waits for itself.
void ctxEventBarriers() {
  const TwoContexts t = makeTwoContexts();
  const CUcontext P = t.primary, C2 = t.second;
  uint32_t *outP = portableMapped(kS), *outQ = portableMapped(kS), *outR = portableMapped(kS);
  uint32_t *outC = portableMapped(kS), *gate = portableMapped(16);
  std::vector<uint32_t> hP = hostPattern(25101), hQ = hostPattern(25102), hR = hostPattern(25103);
  std::vector<uint32_t> hC = hostPattern(25104), hx = hostPattern(25105);
  std::memcpy(outP, hP.data(), kS * 4);
  std::memcpy(outQ, hQ.data(), kS * 4);
  std::memcpy(outR, hR.data(), kS * 4);
  std::memcpy(outC, hC.data(), kS * 4);
  const void* shared[] = {outP, outQ, outR, outC, gate};
  for (const void* p : shared) {
    if (!sameAddressIn(C2, p) || !sameAddressIn(P, p)) {
      std::printf("SKIP portable mapped memory has another device address in a context\n");
      return;
    }
  }
  CUevent eP = nullptr, e2 = nullptr;
  CKD(cuEventCreate(&eP, CU_EVENT_DISABLE_TIMING));
  CUstream c2s = nullptr;
  pushCtx(C2);
  CKD(cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
  CKD(cuStreamCreate(&c2s, CU_STREAM_NON_BLOCKING));
  preloadInc();
  popCtx();
  preloadInc();
  // Each call once on idle contexts: does the driver take them here?
  const CUresult probeRecord = cuCtxRecordEvent(P, eP);
  const CUresult probeRecord2 = cuCtxRecordEvent(C2, e2);
  const CUresult probeWait = probeRecord2 == CUDA_SUCCESS ? cuCtxWaitEvent(P, e2) : probeRecord2;
  const CUresult probeWait2 = probeRecord == CUDA_SUCCESS ? cuCtxWaitEvent(C2, eP) : probeRecord;
  std::printf("ctx_event_barriers: cuCtxRecordEvent %d %d, cuCtxWaitEvent %d %d\n", int(probeRecord),
              int(probeRecord2), int(probeWait), int(probeWait2));
  if (probeRecord != CUDA_SUCCESS || probeRecord2 != CUDA_SUCCESS || probeWait != CUDA_SUCCESS ||
      probeWait2 != CUDA_SUCCESS) {
    std::printf("SKIP context-wide event records or waits unavailable\n");
    return;
  }
  cudaStream_t sA = nonBlockingStream(), sB = nonBlockingStream();
  uint32_t* x = deviceBuffer(25105, kS);
  preload(mix);
  preload(gateStir);
  CK(cudaDeviceSynchronize());
  Digest codes;
  int rescues = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 25110u);
    // The primary context: three streams read the second's output of the step
    // before and write the buffers the second reads.
    mix<<<kSGrid, kBlock, 0, sA>>>(x, outC, kS, salt);
    mix<<<kSGrid, kBlock, 0, sA>>>(outP, x, kS, salt ^ 1u);
    mix<<<kSGrid, kBlock, 0, sB>>>(outQ, outC, kS, salt ^ 2u);
    mix<<<kSGrid, kBlock, 0, 0>>>(outR, outC, kS, salt ^ 3u);
    CKL();
    mixHost(hx, hC, kS, salt);
    mixHost(hP, hx, kS, salt ^ 1u);
    mixHost(hQ, hC, kS, salt ^ 2u);
    mixHost(hR, hC, kS, salt ^ 3u);
    CUresult r = cuCtxRecordEvent(P, eP);
    addCode(codes, int(r));
    if (r != CUDA_SUCCESS) {
      std::printf("step %d: cuCtxRecordEvent(primary) returned %d\n", i, int(r));
      CK(cudaDeviceSynchronize());  // the second context's reads stay ordered
    }
    if (i % 4 == 1) {  // the host waits on the context-wide record and reads what it covers
      CKD(cuEventSynchronize(eP));
      expectHost("outP_at_record", i, outP, hP.data(), kS);
      expectHost("outQ_at_record", i, outQ, hQ.data(), kS);
      expectHost("outR_at_record", i, outR, hR.data(), kS);
    }
    // Issued after the record (not in it), before the wait below.
    gateStir<<<kSGrid, kBlock, 0, sA>>>(x, kS, salt ^ 4u, gate, uint32_t(i + 1));
    CKL();
    gateStirHost(hx, salt ^ 4u);
    // The second context: after the primary's record and the gate.
    pushCtx(C2);
    CKD(cuStreamWaitEvent(c2s, eP, 0));
    CKD(cuStreamWaitValue32(c2s, dptr(gate), cuuint32_t(i + 1), CU_STREAM_WAIT_VALUE_GEQ));
    const uint32_t v = salt ^ 0x5a5a5a5au;
    launchInc(c2s, dptr(outC), dptr(outP), kS, v);
    launchInc(c2s, dptr(outC), dptr(outQ), kS, v + 1u);
    launchInc(c2s, dptr(outC), dptr(outR), kS, v + 2u);
    incHost(hC.data(), hP.data(), kS, v);
    incHost(hC.data(), hQ.data(), kS, v + 1u);
    incHost(hC.data(), hR.data(), kS, v + 2u);
    r = cuCtxRecordEvent(C2, e2);
    addCode(codes, int(r));
    if (r != CUDA_SUCCESS) {
      std::printf("step %d: cuCtxRecordEvent(second) returned %d\n", i, int(r));
      CKD(cuCtxSynchronize());
    }
    popCtx();
    r = cuCtxWaitEvent(P, e2);
    addCode(codes, int(r));
    if (r != CUDA_SUCCESS) {
      std::printf("step %d: cuCtxWaitEvent(primary) returned %d\n", i, int(r));
      pushCtx(C2);
      CKD(cuCtxSynchronize());
      popCtx();
    }
    // The host waits for the second context's record, opening the gate itself
    // after 2 s (eagerly never).
    pushCtx(C2);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    for (;;) {
      const CUresult q = cuEventQuery(e2);
      if (q == CUDA_SUCCESS) break;
      if (q != CUDA_ERROR_NOT_READY) CKD(q);
      if (std::chrono::steady_clock::now() > deadline) {
        ++rescues;
        std::printf("step %d: the second context still waited after 2 s; the host opened the gate\n", i);
        __atomic_store_n(gate, uint32_t(i + 1), __ATOMIC_RELEASE);
        CKD(cuEventSynchronize(e2));
        break;
      }
      std::this_thread::yield();
    }
    popCtx();
    expectHost("outC_at_record", i, outC, hC.data(), kS);
    if (rescues >= 2) {
      std::printf("FAIL ctx_event_barriers: the host had to open the gate %d times\n", rescues);
      std::exit(1);
    }
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      pushCtx(C2);
      CKD(cuCtxSynchronize());
      popCtx();
      checkMirror("ctx_x", i, x, hx);
      checkHost("ctx_outP", i, outP, hP);
      checkHost("ctx_outQ", i, outQ, hQ);
      checkHost("ctx_outR", i, outR, hR);
      checkHost("ctx_outC", i, outC, hC);
      print("ctx_codes", i, codes.h);
    }
  }
  CK(cudaDeviceSynchronize());
  pushCtx(C2);
  CKD(cuCtxSynchronize());
  CKD(cuStreamDestroy(c2s));
  CKD(cuEventDestroy(e2));
  popCtx();
  CKD(cuCtxDestroy(C2));
  CKD(cuCtxSetCurrent(P));
  CKD(cuEventDestroy(eP));
  print("ctx_rescues", 0, uint64_t(rescues));
}

// ---------------------------------------------------------------- ctx_sync_v2

using CtxSyncV2 = CUresult(CUDAAPI*)(CUcontext);

// What a tool could get wrong: cuCtxSynchronize_v2 names the context it waits
// for, which need not be the current one. A tool that does not hook it leaves
// the launches it holds unissued; one whose hook synchronizes the current
// context (or hands its v1 hook out for the v2 ABI) leaves the named
// context's launches unissued. The host reads that context's quarters of a
// zero-copy buffer right after the call, with no other CUDA call.
// Eagerly deterministic: each quarter is written by one stream of one
// context; the host reads only the quarters of the context it synchronized.
void ctxSyncV2() {
  const TwoContexts t = makeTwoContexts();
  const CUcontext ctx[2] = {t.primary, t.second};
  void* viaProcRaw = nullptr;
  CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  const CUresult lookup = cuGetProcAddress("cuCtxSynchronize", &viaProcRaw, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &found);
  const auto viaProc = lookup == CUDA_SUCCESS ? reinterpret_cast<CtxSyncV2>(viaProcRaw) : nullptr;
  std::printf("ctx_sync_v2: cuGetProcAddress(cuCtxSynchronize, 13000) code %d, symbol %d, found %d\n", int(lookup),
              int(found), viaProc != nullptr);
  const CUresult probe = cuCtxSynchronize_v2(nullptr);
  std::printf("ctx_sync_v2: cuCtxSynchronize_v2(NULL) on an idle context: %d\n", int(probe));
  if (probe != CUDA_SUCCESS) {
    std::printf("SKIP cuCtxSynchronize_v2 unavailable\n");
    CKD(cuCtxDestroy(ctx[1]));
    CKD(cuCtxSetCurrent(ctx[0]));
    return;
  }
  uint32_t* out = portableMapped(4 * kS);
  uint32_t* in = portableMapped(4 * kS);
  std::vector<uint32_t> hout = hostPattern(25201, 4 * kS), hin = hostPattern(25202, 4 * kS);
  std::memcpy(out, hout.data(), hout.size() * 4);
  std::memcpy(in, hin.data(), hin.size() * 4);
  for (int c = 0; c < 2; ++c) {
    if (!sameAddressIn(ctx[c], out) || !sameAddressIn(ctx[c], in)) {
      std::printf("SKIP portable mapped memory has another device address in a context\n");
      return;
    }
  }
  CUstream streams[2] = {nullptr, nullptr};
  for (int c = 0; c < 2; ++c) {
    CKD(cuCtxSetCurrent(ctx[c]));
    CKD(cuStreamCreate(&streams[c], CU_STREAM_NON_BLOCKING));
    preloadInc();
  }
  CKD(cuCtxSetCurrent(ctx[0]));
  // Quarter q: 0 the primary's stream, 1 the primary's legacy stream, 2 the
  // second context's stream, 3 its legacy stream.
  auto quarter = [&](int q) { return dptr(out + size_t(q) * kS); };
  auto source = [&](int q) { return dptr(in + size_t(q) * kS); };
  auto launchQuarter = [&](int q, uint32_t v) {
    launchInc(q % 2 ? nullptr : streams[q / 2], quarter(q), source(q), kS, v);
    incHost(hout.data() + size_t(q) * kS, hin.data() + size_t(q) * kS, kS, v);
  };
  Digest codes;
  const char* const how[4] = {"the other context", "NULL (the current one)", "the other context",
                              "the current context by name"};
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 25210u);
    for (int c = 0; c < 2; ++c) {
      CKD(cuCtxSetCurrent(ctx[c]));
      launchQuarter(2 * c, salt);
      launchQuarter(2 * c + 1, salt ^ 1u);
      launchQuarter(2 * c, salt ^ 2u);
    }
    // The second context is current now.
    int mode = i % 4;
    if (irregular(i, 2520, 6)) mode = (mode + 2) % 4;
    const CtxSyncV2 sync2 = (i / 2) % 2 && viaProc ? viaProc : &cuCtxSynchronize_v2;
    int synced = 0;
    CUresult r = CUDA_SUCCESS;
    switch (mode) {
      case 0:  // the second context current, the primary named
        r = sync2(ctx[0]);
        synced = 0;
        break;
      case 1:  // the second context current, NULL
        r = sync2(nullptr);
        synced = 1;
        break;
      case 2:  // the primary current, the second named
        CKD(cuCtxSetCurrent(ctx[0]));
        r = sync2(ctx[1]);
        synced = 1;
        break;
      default:  // the primary current and named
        CKD(cuCtxSetCurrent(ctx[0]));
        r = sync2(ctx[0]);
        synced = 0;
        break;
    }
    addCode(codes, int(r));
    if (r != CUDA_SUCCESS) std::printf("step %d: cuCtxSynchronize_v2(%s) returned %d\n", i, how[mode], int(r));
    for (int q = 2 * synced; q < 2 * synced + 2; ++q) {
      expectHost(synced ? "quarter_of_second_context" : "quarter_of_primary_context", i, out + size_t(q) * kS,
                 hout.data() + size_t(q) * kS, kS);
    }
    if (at(i)) {
      for (int c = 1; c >= 0; --c) {
        CKD(cuCtxSetCurrent(ctx[c]));
        CKD(cuCtxSynchronize());
      }
      checkHost("ctx_sync_out", i, out, hout);
      print("ctx_sync_codes", i, codes.h);
    }
  }
  for (int c = 1; c >= 0; --c) {
    CKD(cuCtxSetCurrent(ctx[c]));
    CKD(cuCtxSynchronize());
    CKD(cuStreamDestroy(streams[c]));
  }
  CKD(cuCtxDestroy(ctx[1]));
  CKD(cuCtxSetCurrent(ctx[0]));
}

// ---------------------------------------------------------------- printf_sync_points

// One thread prints two words of the buffer it was given.
__global__ void printProbe(const uint32_t* buf, int n, int step, int tag) {
  if (blockIdx.x == 0 && threadIdx.x == 0)
    printf("device %c step %d: %08x %08x\n", tag, step, buf[(step * 37) % n], buf[(step * 101 + 7) % n]);
}

// What a tool could get wrong: the driver prints what kernels wrote with
// printf when the host synchronizes (the programming guide lists
// cudaDeviceSynchronize, cuCtxSynchronize, cudaStreamSynchronize,
// cuStreamSynchronize, cudaEventSynchronize and cuEventSynchronize), so every
// device line of a step comes before the host's line after the step's
// synchronization. A tool that answers a synchronization itself, or waits
// through a call that does not flush, prints the device lines later, after
// the host's.
// Eagerly deterministic: all printing kernels run in one order (two streams
// joined by events both ways); the host prints only after a synchronization
// that covers every printing kernel issued so far (the join is before it);
// stdout is flushed before every synchronization.
void printfSyncPoints() {
  cudaStream_t A = nonBlockingStream(), B = nonBlockingStream();
  cudaEvent_t ab = untimedEvent(), ba = untimedEvent(), endSpin = untimedEvent(), endBlock = nullptr;
  CK(cudaEventCreateWithFlags(&endBlock, cudaEventBlockingSync | cudaEventDisableTiming));
  uint32_t *x = deviceBuffer(25301, kS), *y = deviceBuffer(25302, kS);
  std::vector<uint32_t> hx = hostPattern(25301), hy = hostPattern(25302);
  preload(mix);
  preload(printProbe);
  CK(cudaDeviceSynchronize());
  const char* const names[7] = {"cudaStreamSynchronize", "cudaEventSynchronize (blocking-sync event)",
                                "cudaDeviceSynchronize", "cuCtxSynchronize", "cuStreamSynchronize",
                                "cuEventSynchronize", "nothing"};
  std::fflush(stdout);
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 25310u);
    mix<<<kSGrid, kBlock, 0, A>>>(x, y, kS, salt);
    printProbe<<<1, 32, 0, A>>>(x, kS, i, 'A');
    CK(cudaEventRecord(ab, A));
    CK(cudaStreamWaitEvent(B, ab, 0));
    mix<<<kSGrid, kBlock, 0, B>>>(y, x, kS, salt ^ 1u);
    printProbe<<<1, 32, 0, B>>>(y, kS, i, 'B');
    CK(cudaEventRecord(ba, B));
    CK(cudaStreamWaitEvent(A, ba, 0));
    mix<<<kSGrid, kBlock, 0, A>>>(x, y, kS, salt ^ 2u);
    CKL();
    mixHost(hx, hy, kS, salt);
    mixHost(hy, hx, kS, salt ^ 1u);
    mixHost(hx, hy, kS, salt ^ 2u);
    int kind = i % 7;
    if (irregular(i, 2530, 5)) kind = (kind + 3) % 7;
    if (at(i)) kind = 2;
    std::fflush(stdout);
    switch (kind) {
      case 0: CK(cudaStreamSynchronize(A)); break;
      case 1:
        CK(cudaEventRecord(endBlock, A));
        CK(cudaEventSynchronize(endBlock));
        break;
      case 2: CK(cudaDeviceSynchronize()); break;
      case 3: CKD(cuCtxSynchronize()); break;
      case 4: CKD(cuStreamSynchronize(cu(A))); break;
      case 5:
        CK(cudaEventRecord(endSpin, A));
        CKD(cuEventSynchronize(reinterpret_cast<CUevent>(endSpin)));
        break;
      default: break;  // the lines come out at a later step's synchronization
    }
    if (kind != 6) {
      std::printf("host step %d: after %s, mirror %08x %08x\n", i, names[kind], hx[size_t(i * 37) % kS],
                  hy[size_t(i * 101 + 7) % kS]);
      std::fflush(stdout);
    }
    if (at(i)) {
      checkMirror("printf_x", i, x, hx);
      checkMirror("printf_y", i, y, hy);
      std::fflush(stdout);
    }
  }
  CK(cudaDeviceSynchronize());
  std::fflush(stdout);
}

// ---------------------------------------------------------------- printf_launch_flush

// Prints, then raises the flag the host polls.
__global__ void printAndFlag(const uint32_t* buf, int n, int step, uint32_t* flag) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    printf("device step %d: %08x, flag next\n", step, buf[(step * 13) % n]);
    __threadfence_system();
    *reinterpret_cast<volatile uint32_t*>(flag) = uint32_t(step + 1);
  }
}

struct CallbackNote {
  std::atomic<int> done{0};
  int step = 0;
};
void CUDART_CB noteStreamCallback(cudaStream_t, cudaError_t status, void* p) {
  auto* note = static_cast<CallbackNote*>(p);
  std::printf("stream callback step %d: status %d\n", note->step, int(status));
  std::fflush(stdout);
  note->done.store(note->step + 1);
}
void CUDART_CB noteHostFunc(void* p) {
  auto* note = static_cast<CallbackNote*>(p);
  std::printf("host function step %d\n", note->step);
  std::fflush(stdout);
  note->done.store(note->step + 1);
}

// Polls `done()` with no CUDA call for up to 5 s; false (and a line) if it
// never came.
template <typename F>
bool hostWait(int step, const char* what, F done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::printf("host step %d: %s never came\n", step, what);
      return false;
    }
    std::this_thread::yield();
  }
  return true;
}

// What a tool could get wrong: the programming guide says the device printf
// buffer is also flushed at the start of a kernel launch and before a stream
// callback (cudaStreamAddCallback) runs. A launch a tool holds reaches the
// driver later, so the device line the launch would have flushed comes out
// after the host's line; a callback the tool issues through another entry
// point may run before the driver flushed.
// Eagerly deterministic: the host launches only after the printing kernel
// raised its flag (its line is in the buffer), prints nothing while a
// callback may run, and waits for the callback to end before it synchronizes.
// Unsure: which of these flush points the driver keeps (the order is fixed
// either way).
void printfLaunchFlush() {
  cudaStream_t A = nonBlockingStream();
  uint32_t *x = deviceBuffer(25401, kS), *y = deviceBuffer(25402, kS);
  std::vector<uint32_t> hx = hostPattern(25401), hy = hostPattern(25402);
  Mapped flag = mappedBuffer(16, 0);
  CallbackNote note;
  preload(mix);
  preload(printAndFlag);
  preload(printProbe);
  CK(cudaDeviceSynchronize());
  std::fflush(stdout);
  int missed = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 25410u);
    mix<<<kSGrid, kBlock, 0, A>>>(x, y, kS, salt);
    CKL();
    mixHost(hx, hy, kS, salt);
    int kind = i % 3;
    if (irregular(i, 2540, 7)) kind = (kind + 1) % 3;
    std::fflush(stdout);
    if (kind == 0) {
      printAndFlag<<<1, 32, 0, A>>>(x, kS, i, flag.dev);
      CKL();
      if (!hostWait(i, "the device's flag",
                    [&] { return __atomic_load_n(&flag.host[0], __ATOMIC_ACQUIRE) == uint32_t(i + 1); })) {
        ++missed;
        CK(cudaStreamSynchronize(A));
      }
      mix<<<kSGrid, kBlock, 0, A>>>(y, x, kS, salt ^ 1u);  // the launch that flushes
      CKL();
      mixHost(hy, hx, kS, salt ^ 1u);
      std::printf("host step %d: launched after the device's flag\n", i);
      std::fflush(stdout);
    } else {
      printProbe<<<1, 32, 0, A>>>(x, kS, i, kind == 1 ? 'C' : 'H');
      CKL();
      note.step = i;
      if (kind == 1)
        CK(cudaStreamAddCallback(A, noteStreamCallback, &note, 0));
      else
        CK(cudaLaunchHostFunc(A, noteHostFunc, &note));
      if (!hostWait(i, "the callback", [&] { return note.done.load() == i + 1; })) ++missed;
    }
    CK(cudaStreamSynchronize(A));
    std::printf("host step %d: synchronized\n", i);
    std::fflush(stdout);
    if (missed >= 3) {
      std::printf("FAIL printf_launch_flush: %d waits timed out\n", missed);
      std::exit(1);
    }
    if (at(i)) {
      checkMirror("launch_flush_x", i, x, hx);
      checkMirror("launch_flush_y", i, y, hy);
      std::fflush(stdout);
    }
  }
  CK(cudaDeviceSynchronize());
  std::fflush(stdout);
  CK(cudaFreeHost(flag.host));
}

// ---------------------------------------------------------------- sparse_tile_remap

__global__ void sparseFold(uint32_t* acc, cudaTextureObject_t tex, int w, int h, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < w * h) {
    const int x = k % w, y = k / w;
    const uint32_t v = tex2D<uint32_t>(tex, float(x) + 0.5f, float(y) + 0.5f);
    acc[k] = rotl(acc[k], 7) ^ (v + salt + uint32_t(k));
  }
}
__global__ void patchGen(uint32_t* p, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) p[k] = hash32(uint32_t(k) * 3u + salt);
}

// The host's copy of the tile pool's four slots and which slot each of the
// array's two tiles (side by side) is mapped onto.
struct SparseView {
  int tw = 0, th = 0;
  std::vector<uint32_t> slot[4];
  int map[2] = {0, 0};
  uint32_t& at(int x, int y) { return slot[map[x / tw]][size_t(y) * size_t(tw) + size_t(x % tw)]; }
  std::vector<uint32_t> image() {
    std::vector<uint32_t> img(size_t(2 * tw) * size_t(th));
    for (int y = 0; y < th; ++y)
      for (int x = 0; x < 2 * tw; ++x) img[size_t(y) * size_t(2 * tw) + size_t(x)] = at(x, y);
    return img;
  }
};
void sparseFoldHost(std::vector<uint32_t>& acc, SparseView& v, uint32_t salt) {
  const int w = 2 * v.tw;
  for (size_t k = 0; k < acc.size(); ++k)
    acc[k] = rotl(acc[k], 7) ^ (v.at(int(k) % w, int(k) / w) + salt + uint32_t(k));
}


// What a tool could get wrong: cuMemMapArrayAsync changes, in stream order,
// which physical memory a sparse array's tiles read; the kernel before it must
// see the old slots and the one after it the new ones. Passed to the driver
// ahead of a kernel the tool holds, the remap is in effect when that kernel
// runs. Device-to-array copies (which only the driver can do) write through
// the current mapping.
// Eagerly deterministic: one stream orders every kernel, remap and copy; the
// host reads only after synchronizing it; no tile is read while unmapped;
// tile 0 only ever maps slots 0 and 1, tile 1 slots 2 and 3.
void sparseTileRemap() {
  CK(cudaFree(nullptr));
  CUdevice dev = 0;
  CKD(cuCtxGetDevice(&dev));
  int sparse = 0;
  CKD(cuDeviceGetAttribute(&sparse, CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED, dev));
  print("sparse_arrays", 0, uint64_t(sparse));
  if (!sparse) {
    std::printf("SKIP no sparse CUDA arrays\n");
    return;
  }
  CUDA_ARRAY3D_DESCRIPTOR ad = {};
  ad.Width = 1024;
  ad.Height = 1024;
  ad.Depth = 0;
  ad.Format = CU_AD_FORMAT_UNSIGNED_INT32;
  ad.NumChannels = 1;
  ad.Flags = CUDA_ARRAY3D_SPARSE;
  CUarray probe = nullptr;
  CUresult r = cuArray3DCreate(&probe, &ad);
  CUDA_ARRAY_SPARSE_PROPERTIES sp = {};
  if (r == CUDA_SUCCESS) {
    r = cuArrayGetSparseProperties(&sp, probe);
    CKD(cuArrayDestroy(probe));
  }
  std::printf("sparse tile: code %d, %u x %u x %u elements\n", int(r), sp.tileExtent.width, sp.tileExtent.height,
              sp.tileExtent.depth);
  if (r != CUDA_SUCCESS || sp.tileExtent.width < 33 || sp.tileExtent.height < 1 || sp.tileExtent.depth > 1 ||
      sp.tileExtent.width > 1024 || sp.tileExtent.height > 1024) {
    std::printf("SKIP no usable sparse 2-D array of 32-bit words\n");
    return;
  }
  SparseView view;
  view.tw = int(sp.tileExtent.width);
  view.th = int(sp.tileExtent.height);
  const int W = 2 * view.tw, H = view.th;
  const size_t tileBytes = size_t(view.tw) * size_t(view.th) * 4;
  for (auto& sl : view.slot) sl.assign(tileBytes / 4, 0u);
  ad.Width = size_t(W);
  ad.Height = size_t(H);
  CUarray arr = nullptr;
  CKD(cuArray3DCreate(&arr, &ad));
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = int(dev);
  prop.allocFlags.usage = CU_MEM_CREATE_USAGE_TILE_POOL;
  size_t gran = 0;
  r = cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  CUmemGenericAllocationHandle pool = 0;
  size_t poolBytes = 0;
  if (r == CUDA_SUCCESS && gran > 0) {
    poolBytes = (4 * tileBytes + gran - 1) / gran * gran;
    r = cuMemCreate(&pool, poolBytes, &prop, 0);
  }
  std::printf("sparse tile pool: code %d\n", int(r));
  if (r != CUDA_SUCCESS) {
    CKD(cuArrayDestroy(arr));
    std::printf("SKIP no tile pool memory\n");
    return;
  }
  cudaStream_t s = nonBlockingStream();
  auto info = [&](int tile, int slotIndex) {  // slotIndex < 0: unmap
    CUarrayMapInfo m;
    std::memset(&m, 0, sizeof m);
    m.resourceType = CU_RESOURCE_TYPE_ARRAY;
    m.resource.array = arr;
    m.subresourceType = CU_ARRAY_SPARSE_SUBRESOURCE_TYPE_SPARSE_LEVEL;
    m.subresource.sparseLevel.offsetX = unsigned(tile * view.tw);
    m.subresource.sparseLevel.extentWidth = unsigned(view.tw);
    m.subresource.sparseLevel.extentHeight = unsigned(view.th);
    m.subresource.sparseLevel.extentDepth = 1;
    m.memOperationType = slotIndex < 0 ? CU_MEM_OPERATION_TYPE_UNMAP : CU_MEM_OPERATION_TYPE_MAP;
    m.memHandleType = CU_MEM_HANDLE_TYPE_GENERIC;
    m.memHandle.memHandle = slotIndex < 0 ? 0 : pool;
    m.offset = slotIndex < 0 ? 0 : (unsigned long long)(slotIndex) * tileBytes;
    m.deviceBitMask = 1u << unsigned(dev);
    return m;
  };
  auto mapBoth = [&](int s0, int s1) {
    CUarrayMapInfo m[2] = {info(0, s0), info(1, s1)};
    return cuMemMapArrayAsync(m, 2, cu(s));
  };
  auto unmapBoth = [&]() {
    CUarrayMapInfo m[2] = {info(0, -1), info(1, -1)};
    return cuMemMapArrayAsync(m, 2, cu(s));
  };
  auto fill = [&](const std::vector<uint32_t>& img) {
    CUDA_MEMCPY2D c = {};
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = img.data();
    c.srcPitch = size_t(W) * 4;
    c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    c.dstArray = arr;
    c.WidthInBytes = size_t(W) * 4;
    c.Height = size_t(H);
    CKD(cuMemcpy2D(&c));
  };
  auto readBack = [&]() {
    std::vector<uint32_t> img(size_t(W) * size_t(H));
    CUDA_MEMCPY2D c = {};
    c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    c.srcArray = arr;
    c.dstMemoryType = CU_MEMORYTYPE_HOST;
    c.dstHost = img.data();
    c.dstPitch = size_t(W) * 4;
    c.WidthInBytes = size_t(W) * 4;
    c.Height = size_t(H);
    CKD(cuMemcpy2D(&c));
    return img;
  };
  // Every slot filled: tiles on slots 0 and 2, then on 1 and 3.
  for (int half = 0; half < 2; ++half) {
    if (half) {
      r = unmapBoth();
      if (r == CUDA_SUCCESS) r = mapBoth(1, 3);
    } else {
      r = mapBoth(0, 2);
    }
    std::printf("sparse initial map %d: code %d\n", half, int(r));
    if (r != CUDA_SUCCESS) {
      CK(cudaStreamSynchronize(s));
      CKD(cuArrayDestroy(arr));
      CKD(cuMemRelease(pool));
      std::printf("SKIP cuMemMapArrayAsync refused the tile pool\n");
      return;
    }
    CK(cudaStreamSynchronize(s));
    view.map[0] = half;
    view.map[1] = 2 + half;
    const std::vector<uint32_t> img = hostPattern(25501 + uint32_t(half), W * H);
    fill(img);
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) view.at(x, y) = img[size_t(y) * size_t(W) + size_t(x)];
  }
  checkHost("sparse_initial", 0, readBack().data(), view.image());
  const cudaTextureObject_t tex = pointTexture(reinterpret_cast<cudaArray_t>(arr));
  const int words = W * H;
  uint32_t *acc1 = deviceBuffer(25503, words), *acc2 = deviceBuffer(25504, words), *patch = zeroBuffer(32 * 32);
  std::vector<uint32_t> h1 = hostPattern(25503, words), h2 = hostPattern(25504, words), hpatch(32 * 32);
  const int pw = 32, ph = std::min(32, H);
  preload(sparseFold);
  preload(patchGen);
  Digest maps;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 25510u);
    sparseFold<<<(words + kBlock - 1) / kBlock, kBlock, 0, s>>>(acc1, tex, W, H, salt);
    CKL();
    sparseFoldHost(h1, view, salt);
    int m0 = i % 2, m1 = 2 + (i / 2) % 2;
    if (irregular(i, 2550, 5)) m0 ^= 1;
    if (irregular(i, 2551, 7)) m1 ^= 1;
    CKD(unmapBoth());
    CKD(mapBoth(m0, m1));
    view.map[0] = m0;
    view.map[1] = m1;
    maps.add(uint64_t(m0 * 4 + m1));
    sparseFold<<<(words + kBlock - 1) / kBlock, kBlock, 0, s>>>(acc2, tex, W, H, salt ^ 0x55u);
    CKL();
    sparseFoldHost(h2, view, salt ^ 0x55u);
    if (i % 3 == 2) {  // a patch copied into the array through the new mapping
      patchGen<<<(32 * 32) / kBlock, kBlock, 0, s>>>(patch, 32 * 32, salt ^ 7u);
      CKL();
      for (int k = 0; k < 32 * 32; ++k) hpatch[size_t(k)] = hash32(uint32_t(k) * 3u + (salt ^ 7u));
      const int px = (i * 17) % (W - pw + 1), py = (i * 29) % (H - ph + 1);
      CUDA_MEMCPY2D c = {};
      c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
      c.srcDevice = dptr(patch);
      c.srcPitch = 32 * 4;
      c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
      c.dstArray = arr;
      c.dstXInBytes = size_t(px) * 4;
      c.dstY = size_t(py);
      c.WidthInBytes = size_t(pw) * 4;
      c.Height = size_t(ph);
      CKD(cuMemcpy2DAsync(&c, cu(s)));
      for (int y = 0; y < ph; ++y)
        for (int x = 0; x < pw; ++x) view.at(px + x, py + y) = hpatch[size_t(y) * 32 + size_t(x)];
      sparseFold<<<(words + kBlock - 1) / kBlock, kBlock, 0, s>>>(acc1, tex, W, H, salt ^ 0x99u);
      CKL();
      sparseFoldHost(h1, view, salt ^ 0x99u);
    }
    if (at(i)) {
      CK(cudaStreamSynchronize(s));
      checkMirror("sparse_acc1", i, acc1, h1);
      checkMirror("sparse_acc2", i, acc2, h2);
      checkHost("sparse_image", i, readBack().data(), view.image());
      print("sparse_maps", i, maps.h);
    }
  }
  CK(cudaStreamSynchronize(s));
  CK(cudaDestroyTextureObject(tex));
  CKD(unmapBoth());
  CK(cudaStreamSynchronize(s));
  CKD(cuArrayDestroy(arr));
  CKD(cuMemRelease(pool));
}

// ---------------------------------------------------------------- unified_type_copies

constexpr int kUW = 48, kUH = 32;  // the copied region: words x rows
constexpr int kDevPitch = 64, kRows = 40;  // device buffers: 64-word rows
constexpr int kDevWords = kDevPitch * kRows;

__global__ void foldWords(uint32_t* acc, const uint32_t* src, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) acc[k] = rotl(acc[k], 5) ^ (src[(k * 7 + 3) % n] + salt + uint32_t(k));
}
void foldWordsHost(std::vector<uint32_t>& acc, const std::vector<uint32_t>& src, uint32_t salt) {
  const int n = int(acc.size());
  for (int k = 0; k < n; ++k) acc[size_t(k)] = rotl(acc[size_t(k)], 5) ^ (src[size_t((k * 7 + 3) % n)] + salt + uint32_t(k));
}

// Host memory of one kind, with rows `pitch` words apart.
struct HostKind {
  const char* name;
  uint32_t* p;
  int pitch;
};

// A 2-D copy of kUW x kUH words, both sides typed CU_MEMORYTYPE_UNIFIED
// (driver) or cudaMemcpyDefault (runtime).
void copy2D(bool driver, uint32_t* dst, int dstPitch, const uint32_t* src, int srcPitch, cudaStream_t s) {
  if (driver) {
    CUDA_MEMCPY2D c = {};
    c.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
    c.srcDevice = dptr(src);
    c.srcPitch = size_t(srcPitch) * 4;
    c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
    c.dstDevice = dptr(dst);
    c.dstPitch = size_t(dstPitch) * 4;
    c.WidthInBytes = kUW * 4;
    c.Height = kUH;
    CKD(cuMemcpy2DAsync(&c, cu(s)));
  } else {
    CK(cudaMemcpy2DAsync(dst, size_t(dstPitch) * 4, src, size_t(srcPitch) * 4, kUW * 4, kUH, cudaMemcpyDefault, s));
  }
}

// What a tool could get wrong: with CU_MEMORYTYPE_UNIFIED (and
// cudaMemcpyDefault) nothing in the call says which side is host memory; the
// driver looks the pointers up. From pageable memory the copy is staged before
// the call returns (the program scribbles the source at once); into pageable
// memory it has completed when the call returns (the program reads it at
// once). A tool that takes such a copy for a device copy and holds it (or
// copies with a kernel of its own later) reads the scribbled source and leaves
// the destination unwritten.
// Eagerly deterministic: one stream; pinned and managed memory is touched by
// the host only after the step's stream synchronize; pageable memory is
// staged or complete at the call's return (as traps_more's pageable_copies
// relies on).
void unifiedTypeCopies() {
  cudaStream_t s = nonBlockingStream();
  const int pitches[3] = {52, 56, 60};
  std::vector<uint32_t> srcPage(size_t(pitches[0]) * kRows, 0u), dstPage(size_t(pitches[0]) * kRows, 0u);
  uint32_t *srcPin = nullptr, *dstPin = nullptr, *srcMan = nullptr, *dstMan = nullptr;
  CK(cudaMallocHost(&srcPin, size_t(pitches[1]) * kRows * 4));
  CK(cudaMallocHost(&dstPin, size_t(pitches[1]) * kRows * 4));
  CK(cudaMallocManaged(&srcMan, size_t(pitches[2]) * kRows * 4));
  CK(cudaMallocManaged(&dstMan, size_t(pitches[2]) * kRows * 4));
  std::memset(srcPin, 0, size_t(pitches[1]) * kRows * 4);
  std::memset(dstPin, 0, size_t(pitches[1]) * kRows * 4);
  std::memset(srcMan, 0, size_t(pitches[2]) * kRows * 4);
  std::memset(dstMan, 0, size_t(pitches[2]) * kRows * 4);
  const HostKind srcKinds[3] = {{"pageable", srcPage.data(), pitches[0]},
                                {"pinned", srcPin, pitches[1]},
                                {"managed", srcMan, pitches[2]}};
  const HostKind dstKinds[3] = {{"pageable", dstPage.data(), pitches[0]},
                                {"pinned", dstPin, pitches[1]},
                                {"managed", dstMan, pitches[2]}};
  uint32_t *dev = deviceBuffer(25601, kDevWords), *acc = deviceBuffer(25602, kDevWords);
  std::vector<uint32_t> hdev = hostPattern(25601, kDevWords), hacc = hostPattern(25602, kDevWords);
  // 3-D: 4 slices of 10 rows of 20 words (pageable), a 16 x 8 x 4 box from (1, 1, 0).
  constexpr int k3Pitch = 20, k3Height = 10, k3Depth = 4, k3W = 16, k3H = 8;
  std::vector<uint32_t> src3(size_t(k3Pitch) * k3Height * k3Depth, 0u), line(kDevPitch, 0u);
  preload(foldWords);
  Digest kinds;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 25610u);
    // In: host memory of one kind -> the device buffer at a moving offset.
    int sk = i % 3;
    if (irregular(i, 2560, 4)) sk = 0;
    const HostKind& in = srcKinds[sk];
    for (int r = 0; r < kUH; ++r)
      for (int c = 0; c < kUW; ++c) in.p[size_t(r) * size_t(in.pitch) + size_t(c)] = hash32(uint32_t(i) * 7919u + uint32_t(r * 131 + c));
    const int dx = i % 4, dy = (i / 4) % 8;
    const bool driverIn = i % 2 == 0;
    copy2D(driverIn, dev + dy * kDevPitch + dx, kDevPitch, in.p, in.pitch, s);
    for (int r = 0; r < kUH; ++r)
      for (int c = 0; c < kUW; ++c)
        hdev[size_t(dy + r) * kDevPitch + size_t(dx + c)] = hash32(uint32_t(i) * 7919u + uint32_t(r * 131 + c));
    if (sk == 0) std::fill(srcPage.begin(), srcPage.end(), 0xdeadbeefu);  // staged at the call
    foldWords<<<(kDevWords + kBlock - 1) / kBlock, kBlock, 0, s>>>(acc, dev, kDevWords, salt);
    CKL();
    foldWordsHost(hacc, hdev, salt);
    // Every 5th step a 3-D box from pageable memory, UNIFIED on both sides;
    // the device buffer seen as 4 slices of 10 rows.
    if (i % 5 == 4) {
      for (size_t k = 0; k < src3.size(); ++k) src3[k] = hash32(uint32_t(i) * 31u + uint32_t(k) * 977u);
      const int x0 = 40 + (i % 3) * 2, y0 = i % 3;
      CUDA_MEMCPY3D c = {};
      c.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
      c.srcDevice = dptr(src3.data());
      c.srcPitch = k3Pitch * 4;
      c.srcHeight = k3Height;
      c.srcXInBytes = 4;
      c.srcY = 1;
      c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
      c.dstDevice = dptr(dev);
      c.dstPitch = kDevPitch * 4;
      c.dstHeight = 10;
      c.dstXInBytes = size_t(x0) * 4;
      c.dstY = size_t(y0);
      c.WidthInBytes = k3W * 4;
      c.Height = k3H;
      c.Depth = k3Depth;
      CKD(cuMemcpy3DAsync(&c, cu(s)));
      for (int z = 0; z < k3Depth; ++z)
        for (int r = 0; r < k3H; ++r)
          for (int q = 0; q < k3W; ++q)
            hdev[size_t(z * 10 + y0 + r) * kDevPitch + size_t(x0 + q)] =
                src3[size_t(z * k3Height + 1 + r) * k3Pitch + size_t(1 + q)];
      std::fill(src3.begin(), src3.end(), 0xfeedfaceu);  // staged at the call
      foldWords<<<(kDevWords + kBlock - 1) / kBlock, kBlock, 0, s>>>(acc, dev, kDevWords, salt ^ 3u);
      CKL();
      foldWordsHost(hacc, hdev, salt ^ 3u);
    }
    // Out: the folded buffer -> host memory of one kind.
    int dk = (i / 2) % 3;
    if (irregular(i, 2561, 5)) dk = 0;
    const HostKind& out = dstKinds[dk];
    const int sx = i % 3, sy = i % 5, ox = i % 2, oy = i % 4;
    std::fill_n(out.p, size_t(out.pitch) * kRows, 0x5a5a5a5au);  // nothing in flight touches it
    copy2D(!driverIn, out.p + oy * out.pitch + ox, out.pitch, acc + sy * kDevPitch + sx, kDevPitch, s);
    std::vector<uint32_t> got(size_t(kUW) * kUH), want(size_t(kUW) * kUH);
    for (int r = 0; r < kUH; ++r)
      for (int c = 0; c < kUW; ++c) want[size_t(r) * kUW + size_t(c)] = hacc[size_t(sy + r) * kDevPitch + size_t(sx + c)];
    if (dk != 0) CK(cudaStreamSynchronize(s));  // pageable: complete at the call's return
    for (int r = 0; r < kUH; ++r)
      for (int c = 0; c < kUW; ++c)
        got[size_t(r) * kUW + size_t(c)] = out.p[size_t(oy + r) * size_t(out.pitch) + size_t(ox + c)];
    expectHost(dk == 0 ? "unified_out_pageable" : dk == 1 ? "unified_out_pinned" : "unified_out_managed", i,
               got.data(), want.data(), want.size());
    // On odd steps one row through cuMemcpyAsync (pointer types inferred) into
    // pageable memory, read at once.
    if (i % 2 == 1) {
      std::fill(line.begin(), line.end(), 0u);
      const int row = (i * 7) % kRows;
      CKD(cuMemcpyAsync(dptr(line.data()), dptr(acc + row * kDevPitch), kDevPitch * 4, cu(s)));
      expectHost("unified_line_pageable", i, line.data(), hacc.data() + size_t(row) * kDevPitch, kDevPitch);
    }
    kinds.add(uint64_t(sk * 16 + dk));
    CK(cudaStreamSynchronize(s));  // the next step rewrites pinned and managed sources
    if (at(i)) {
      checkMirror("unified_dev", i, dev, hdev);
      checkMirror("unified_acc", i, acc, hacc);
      print("unified_kinds", i, kinds.h);
    }
  }
  CK(cudaFreeHost(srcPin));
  CK(cudaFreeHost(dstPin));
  CK(cudaFree(srcMan));
  CK(cudaFree(dstMan));
}

// ---------------------------------------------------------------- sync_memset_host_visible, sync_memops_flag

constexpr int kBigWords = 1 << 20;  // 4 MiB
__host__ __device__ inline uint32_t samplePos(int k) { return uint32_t(k) * 256u + uint32_t(k % 251); }

__global__ void stirBig(uint32_t* w, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) w[k] = rotl(w[k], 9) ^ hash32(uint32_t(k) ^ salt);
}
__global__ void sampleFold(uint32_t* acc, const uint32_t* w, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < kS) acc[k] = rotl(acc[k], 3) ^ (w[samplePos(k)] + salt + uint32_t(k));
}
__global__ void stirWordsK(uint32_t* w, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) w[k] = rotl(w[k], 13) + hash32(uint32_t(k) + salt);
}

struct BigSet {
  uint32_t *src = nullptr, *dst = nullptr, *dst2 = nullptr;
  std::vector<uint32_t> srcSamples;  // src at samplePos(k)
};
BigSet bigSet(uint32_t seed) {
  BigSet b;
  b.src = deviceBuffer(seed, kBigWords);
  b.dst = zeroBuffer(kBigWords);
  b.dst2 = zeroBuffer(kBigWords);
  b.srcSamples.resize(kS);
  for (int k = 0; k < kS; ++k) b.srcSamples[size_t(k)] = seed * 2654435761u + samplePos(k) * 40503u;
  return b;
}

// What a tool could get wrong: synchronous memsets into pinned host memory or
// into managed memory are fully synchronous (the driver API's "API
// synchronization behavior": "The synchronous memset functions are
// asynchronous with respect to the host except when the target is pinned host
// memory or a Unified Memory region, in which case they are fully
// synchronous"); the legacy stream orders such a memset after all earlier
// work of blocking streams. So when cudaMemset / cuMemsetD32 into managed or
// pinned memory returns, the host may read the target and what the earlier
// blocking-stream kernels wrote next to it, with no other call. A tool that
// holds such a memset (as it holds memsets of device memory, which return
// early) or the kernels before it lets the host read old values.
// Eagerly deterministic given that documented behaviour: the kernels run on
// one blocking stream, the memset on the legacy stream, and the host touches
// the memory only after the memset returned.
void syncMemsetHostVisible() {
  cudaStream_t sb = blockingStream();
  uint32_t *M = nullptr, *Z = nullptr;
  CK(cudaMallocManaged(&M, 2 * kS * 4));
  CK(cudaMallocHost(&Z, 2 * kS * 4));
  std::memset(M, 0, 2 * kS * 4);
  std::memset(Z, 0, 2 * kS * 4);
  std::vector<uint32_t> hM(kS, 0u), hZ(kS, 0u);
  uint32_t* x = deviceBuffer(25701, kS);
  std::vector<uint32_t> hx = hostPattern(25701);
  const CUresult pinnedProbe = cuMemsetD32(dptr(Z + kS), 0u, kS);
  std::printf("sync_memset: synchronous cuMemsetD32 on pinned host memory: %d\n", int(pinnedProbe));
  preload(mix);
  preload(stirWordsK);
  CK(cudaDeviceSynchronize());
  Digest kinds;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 25710u);
    // Kernels on a blocking stream write managed and pinned memory.
    stirWordsK<<<kSGrid, kBlock, 0, sb>>>(x, kS, salt);
    mix<<<kSGrid, kBlock, 0, sb>>>(M, x, kS, salt ^ 1u);
    mix<<<kSGrid, kBlock, 0, sb>>>(Z, x, kS, salt ^ 2u);
    CKL();
    for (int k = 0; k < kS; ++k) hx[size_t(k)] = rotl(hx[size_t(k)], 13) + hash32(uint32_t(k) + salt);
    mixHost(hM, hx, kS, salt ^ 1u);
    mixHost(hZ, hx, kS, salt ^ 2u);
    // A synchronous memset into the other half of one of them, in turn
    // through the runtime (bytes) and the driver (words).
    int kind = i % 4;
    if (irregular(i, 2570, 6)) kind = (kind + 1) % 4;
    if (pinnedProbe != CUDA_SUCCESS && kind >= 2) kind -= 2;
    const uint32_t word = hash32(uint32_t(i) * 3u + 1u) | 1u;
    const int byte = (i * 37 + 11) & 0xff;
    uint32_t expect = word;
    switch (kind) {
      case 0:
        CK(cudaMemset(M + kS, byte, kS * 4));
        expect = uint32_t(byte) * 0x01010101u;
        break;
      case 1: CKD(cuMemsetD32(dptr(M + kS), word, kS)); break;
      case 2:
        CK(cudaMemset(Z + kS, byte, kS * 4));
        expect = uint32_t(byte) * 0x01010101u;
        break;
      default: CKD(cuMemsetD32(dptr(Z + kS), word, kS)); break;
    }
    kinds.add(uint64_t(kind));
    // Right after the call: no synchronize.
    expectHost("managed_written_before_memset", i, M, hM.data(), kS);
    expectHost("pinned_written_before_memset", i, Z, hZ.data(), kS);
    const uint32_t* target = kind < 2 ? M + kS : Z + kS;
    for (int k = 0; k < kS; ++k) {
      if (target[k] != expect) {
        std::printf("FAIL sync_memset_%s at step %d: word %d is %x right after the call, the memset wrote %x\n",
                    kind < 2 ? "managed" : "pinned", i, k, target[k], expect);
        std::exit(1);
      }
    }
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      checkMirror("sync_memset_x", i, x, hx);
      checkHost("sync_memset_managed", i, M, hM);
      checkHost("sync_memset_pinned", i, Z, hZ);
      print("sync_memset_kinds", i, kinds.h);
    }
  }
  CK(cudaDeviceSynchronize());
  CK(cudaFree(M));
  CK(cudaFreeHost(Z));
}

// What a tool could get wrong: every synchronous copy and memset on memory
// with CU_POINTER_ATTRIBUTE_SYNC_MEMOPS set, or in a context with
// CU_CTX_SYNC_MEMOPS (cuCtxSetFlags), is fully synchronous (GPUDirect RDMA
// relies on it: a third party reads the memory when the call returns), where
// a device-to-device cudaMemcpy or a device cudaMemset otherwise returns
// early. The program reads the result at once with a kernel on a NON-blocking
// stream (no event, no implicit ordering). A tool that holds such a call as
// it holds ordinary device copies and memsets (or replays it in a graph next
// to the reader) lets the reader run first.
// Eagerly deterministic only if the driver honours the attribute and the flag
// for device-to-device copies and device memsets (unsure: otherwise the eager
// run races and fails its mirror). The attribute is on set A, the flag is on
// for the middle third of the run (set B, no attribute), then off again (set
// A).
void syncMemopsFlag() {
  cudaStream_t sn = nonBlockingStream();
  cudaEvent_t e = untimedEvent();
  BigSet sets[2] = {bigSet(25702), bigSet(25703)};
  Digest codes;
  int one = 1;
  for (uint32_t* p : {sets[0].src, sets[0].dst, sets[0].dst2}) {
    const CUresult r = cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, dptr(p));
    addCode(codes, int(r));
    int back = 0;
    const CUresult g = cuPointerGetAttribute(&back, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, dptr(p));
    std::printf("sync_memops: attribute set %d, read back %d: %d\n", int(r), int(g), back & 0xff);
    if (r != CUDA_SUCCESS) {
      std::printf("SKIP CU_POINTER_ATTRIBUTE_SYNC_MEMOPS cannot be set\n");
      return;
    }
  }
  unsigned baseFlags = 0;
  CKD(cuCtxGetFlags(&baseFlags));
  bool flagOk = false;
  uint32_t *acc = deviceBuffer(25704, kS), *acc2 = deviceBuffer(25705, kS);
  std::vector<uint32_t> hacc = hostPattern(25704), hacc2 = hostPattern(25705);
  preload(stirBig);
  preload(sampleFold);
  CK(cudaDeviceSynchronize());
  const int phase1 = g_iters / 3, phase2 = 2 * g_iters / 3;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 25720u);
    if (i == phase1 || i == phase2) {
      CK(cudaDeviceSynchronize());
      const unsigned want = i == phase1 ? baseFlags | CU_CTX_SYNC_MEMOPS : baseFlags;
      const CUresult r = cuCtxSetFlags(want);
      unsigned now = 0;
      CKD(cuCtxGetFlags(&now));
      std::printf("sync_memops step %d: cuCtxSetFlags(%#x) %d, flags now %#x\n", i, want, int(r), now);
      if (i == phase1) flagOk = r == CUDA_SUCCESS && (now & CU_CTX_SYNC_MEMOPS);
    }
    BigSet& set = sets[i >= phase1 && i < phase2 && flagOk ? 1 : 0];
    // The producer on the non-blocking stream; the legacy stream waits for it.
    stirBig<<<kBigWords / 256, 256, 0, sn>>>(set.src, kBigWords, salt);
    CKL();
    for (int k = 0; k < kS; ++k)
      set.srcSamples[size_t(k)] = rotl(set.srcSamples[size_t(k)], 9) ^ hash32(samplePos(k) ^ salt);
    CK(cudaEventRecord(e, sn));
    CK(cudaStreamWaitEvent(0, e, 0));
    // A synchronous device copy, read at once on the non-blocking stream.
    if (i % 2)
      CKD(cuMemcpyDtoD(dptr(set.dst), dptr(set.src), size_t(kBigWords) * 4));
    else
      CK(cudaMemcpy(set.dst, set.src, size_t(kBigWords) * 4, cudaMemcpyDeviceToDevice));
    sampleFold<<<kSGrid, kBlock, 0, sn>>>(acc, set.dst, salt ^ 4u);
    CKL();
    for (int k = 0; k < kS; ++k)
      hacc[size_t(k)] = rotl(hacc[size_t(k)], 3) ^ (set.srcSamples[size_t(k)] + (salt ^ 4u) + uint32_t(k));
    // A synchronous device memset, read at once on the non-blocking stream.
    const uint32_t word = hash32(uint32_t(i) * 5u + 2u) | 1u;
    const int byte = (i * 41 + 13) & 0xff;
    uint32_t filled = 0;
    if (i % 2) {
      CK(cudaMemset(set.dst2, byte, size_t(kBigWords) * 4));
      filled = uint32_t(byte) * 0x01010101u;
    } else {
      CKD(cuMemsetD32(dptr(set.dst2), word, kBigWords));
      filled = word;
    }
    sampleFold<<<kSGrid, kBlock, 0, sn>>>(acc2, set.dst2, salt ^ 5u);
    CKL();
    for (int k = 0; k < kS; ++k) hacc2[size_t(k)] = rotl(hacc2[size_t(k)], 3) ^ (filled + (salt ^ 5u) + uint32_t(k));
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      checkMirror("sync_memops_acc", i, acc, hacc);
      checkMirror("sync_memops_acc2", i, acc2, hacc2);
      print("sync_memops_codes", i, codes.h);
    }
  }
  CK(cudaDeviceSynchronize());
  for (BigSet& b : sets) {
    CK(cudaFree(b.src));
    CK(cudaFree(b.dst));
    CK(cudaFree(b.dst2));
  }
}

// ---------------------------------------------------------------- driver_logs

// What the log callback saw: messages, and a digest of them without their
// numbers (addresses, ids and times may differ from run to run).
struct LogSink {
  std::atomic<uint32_t> count{0};
  std::mutex m;
  Digest d;
};
void addWithoutNumbers(Digest& d, const char* s, size_t n) {
  for (size_t k = 0; k < n; ++k) {
    const char c = s[k];
    if (c == '0' && k + 1 < n && (s[k + 1] == 'x' || s[k + 1] == 'X')) {
      k += 1;
      while (k + 1 < n && std::isxdigit(static_cast<unsigned char>(s[k + 1]))) ++k;
      continue;
    }
    if (c >= '0' && c <= '9') continue;
    d.add(uint64_t(static_cast<unsigned char>(c)));
  }
}
void CUDA_CB onDriverLog(void* data, CUlogLevel level, char* message, size_t length) {
  auto* sink = static_cast<LogSink*>(data);
  sink->count.fetch_add(1);
  // TRAPS_PRINT_DRIVER_LOGS=1: each message on stderr (to see which differ).
  static const bool show = std::getenv("TRAPS_PRINT_DRIVER_LOGS") != nullptr;
  if (show && message) std::fprintf(stderr, "driver log %d: %.*s\n", int(level), int(strnlen(message, length)), message);
  std::lock_guard<std::mutex> lock(sink->m);
  sink->d.add(uint64_t(level));
  if (message) addWithoutNumbers(sink->d, message, strnlen(message, length));
}

// What a tool could get wrong: the driver logs the calls it refuses, and the
// program reads that log (a callback, and cuLogsDumpToMemory). A tool whose
// own driver calls fail (probes, captures it gives up) adds messages the
// program never caused; one that refuses a call itself, without the driver,
// leaves one out.
// Eagerly deterministic as far as the driver's logging is (unsure): the
// refused calls come at fixed steps; numbers are left out of the digests.
void driverLogs() {
  CK(cudaFree(nullptr));
  LogSink sink;
  CUlogsCallbackHandle handle = nullptr;
  const CUresult reg = cuLogsRegisterCallback(onDriverLog, &sink, &handle);
  CUlogIterator it = 0;
  const CUresult cur = reg == CUDA_SUCCESS ? cuLogsCurrent(&it, 0) : reg;
  std::printf("driver_logs: cuLogsRegisterCallback %d, cuLogsCurrent %d\n", int(reg), int(cur));
  if (reg != CUDA_SUCCESS || cur != CUDA_SUCCESS) {
    std::printf("SKIP no driver logs\n");
    return;
  }
  cudaStream_t s = nonBlockingStream();
  uint32_t *a = deviceBuffer(25801, kS), *b = deviceBuffer(25802, kS), *c = deviceBuffer(25803, kS);
  std::vector<uint32_t> ha = hostPattern(25801), hb = hostPattern(25802), hc = hostPattern(25803);
  uint32_t* block = nullptr;
  CK(cudaMallocAsync(&block, 1 << 16, s));
  CUfunction mixFn = nullptr;
  CK(cudaGetFuncBySymbol(reinterpret_cast<cudaFunction_t*>(&mixFn), reinterpret_cast<const void*>(mix)));
  preload(mix);
  CK(cudaStreamSynchronize(s));
  std::vector<char> text(64 << 10);
  Digest codes;
  int n = kS;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 25810u);
    mix<<<kSGrid, kBlock, 0, s>>>(a, b, kS, salt);
    CKL();
    mixHost(ha, hb, kS, salt);
    // The place of a driver launch of mix: 2048 threads a block on irregular steps.
    {
      const unsigned threads = irregular(i, 2580, 6) ? 2048u : unsigned(kBlock);
      uint32_t* dst = b;
      const uint32_t* src = a;
      uint32_t s2 = salt ^ 1u;
      void* params[] = {&dst, &src, &n, &s2};
      const CUresult r = cuLaunchKernel(mixFn, unsigned(kSGrid), 1, 1, threads, 1, 1, 0, cu(s), params, nullptr);
      addCode(codes, int(r));
      if (r == CUDA_SUCCESS) mixHost(hb, ha, kS, s2);
    }
    // The place of a 32-bit memset: 2 bytes off on irregular steps.
    {
      const size_t off = irregular(i, 2581, 7) ? 2 : 0;
      const uint32_t v = hash32(uint32_t(i) ^ 0x77u);
      const CUresult r = cuMemsetD32Async(dptr(c) + off, v, 256, cu(s));
      addCode(codes, int(r));
      if (r == CUDA_SUCCESS) std::fill(hc.begin(), hc.begin() + 256, v);
    }
    // The place of a free of the block: an inner pointer on irregular steps
    // (refused), the block itself otherwise, allocated again at once.
    {
      const bool inner = irregular(i, 2582, 9);
      const cudaError_t r = keep(cudaFreeAsync(inner ? block + 16 : block, s));
      addCode(codes, int(r));
      if (r == cudaSuccess) CK(cudaMallocAsync(&block, 1 << 16, s));
    }
    mix<<<kSGrid, kBlock, 0, s>>>(c, b, kS, salt ^ 2u);
    CKL();
    mixHost(hc, hb, kS, salt ^ 2u);
    if (at(i)) {
      CK(cudaStreamSynchronize(s));
      size_t size = text.size();
      const CUresult r = cuLogsDumpToMemory(&it, text.data(), &size, 0);
      Digest dumped;
      size_t lines = 0;
      if (r == CUDA_SUCCESS) {
        size = std::min(size, text.size());
        addWithoutNumbers(dumped, text.data(), size);
        lines = size_t(std::count(text.begin(), text.begin() + ptrdiff_t(size), '\n'));
      }
      uint64_t seen = 0;
      {
        std::lock_guard<std::mutex> lock(sink.m);
        seen = sink.d.h;
      }
      std::printf("driver_logs step %d: %u messages to the callback, dump code %d, %zu lines dumped\n", i,
                  sink.count.load(), int(r), lines);
      print("logs_callback", i, seen);
      print("logs_dumped", i, dumped.h);
      print("logs_codes", i, codes.h);
      checkMirror("logs_a", i, a, ha);
      checkMirror("logs_b", i, b, hb);
      checkMirror("logs_c", i, c, hc);
    }
  }
  CK(cudaFreeAsync(block, s));
  CK(cudaStreamSynchronize(s));
  CKD(cuLogsUnregisterCallback(handle));
}

const Scenario kScenarios[] = {
    {"ctx_event_barriers", ctxEventBarriers},   {"ctx_sync_v2", ctxSyncV2},
    {"printf_sync_points", printfSyncPoints},   {"printf_launch_flush", printfLaunchFlush},
    {"sparse_tile_remap", sparseTileRemap},     {"unified_type_copies", unifiedTypeCopies},
    {"sync_memset_host_visible", syncMemsetHostVisible}, {"sync_memops_flag", syncMemopsFlag},
    {"driver_logs", driverLogs},
};

}  // namespace

int main(int argc, char** argv) { return runScenarios(argc, argv, kScenarios); }
