// traps_edge: odd but legal CUDA C++ patterns in the style of traps.cu,
// traps_more.cu and traps_odd.cu (trap_common.cuh), aimed at places where a
// tool that holds launches back, answers some calls itself and replays
// graphs could tell the program something eager execution would not, or
// run something eager execution would not. Each scenario is deterministic in
// eager and prints digests of its buffers and of the return codes and
// values the host saw; check_traps.py requires the same output under graft.
//
//   noop_query            every step synchronizes, then puts only functional
//                         no-ops on two streams (waits on events never
//                         recorded) and asks cudaStreamQuery about them (and
//                         cudaEventQuery about a completed and a never-
//                         recorded event) before the step's kernels: eagerly
//                         every answer is cudaSuccess. A tool that holds the
//                         no-op waits and answers "not ready" for streams it
//                         holds work on differs.
//   pool_usage_stats      per step, a block from a private pool and one from
//                         the device's pool are freed (cudaFreeAsync) and the
//                         next allocated on the same stream, between kernels;
//                         cudaMemPoolGetAttribute reads the used memory right
//                         after each free and allocation, and the high
//                         watermarks and reserved memory at checkpoints. A
//                         free held back past the ops held before it leaves
//                         the memory in use (and the pool grows) where eager
//                         reuses it at once.
//   params_and_extra      cuLaunchKernel / cuLaunchKernelEx given both
//                         kernelParams and an `extra` list (empty, or a
//                         buffer with other values) on irregular steps, where
//                         other steps make the same launch with kernelParams
//                         only: the driver refuses such a launch
//                         (CUDA_ERROR_INVALID_VALUE). A matcher that reads
//                         kernelParams and ignores `extra` holds it as the
//                         expected launch, returns success and runs it.
//   refused_values        memsets, copies and frees the driver refuses for
//                         their pointer values only (a 32-bit memset 2 bytes
//                         off alignment, a 16-bit one at an odd address, a
//                         device copy from pageable host memory, through the
//                         driver and the runtime, cudaFreeAsync of an inner
//                         pointer and of pinned host memory), on irregular
//                         steps at the place of the valid call: values are
//                         patched into a graph, not validated, and a free is
//                         deferred, so a tool may return success (and write
//                         memory) where eager returns an error.
//   pageable_copy_gate    a host function on stream S waits (at most 250 ms)
//                         for a helper thread, which makes a CUDA call of its
//                         own (a launch on another stream) and then opens the
//                         gate, while the main thread is inside a copy into
//                         pageable memory on S: synchronously after a
//                         cudaStreamSynchronize (control), then through
//                         cuMemcpyDtoHAsync, cudaMemcpyAsync and
//                         cudaMemcpy2DAsync, which return only once their
//                         copy, and so the host function, completed. Eagerly
//                         no gate times out; a tool that keeps a lock of its
//                         own across such a blocking call stalls the helper's
//                         launch and every gate times out.
//   primary_release_retain  only the driver API: the device's primary
//                         context is retained, a module loaded, memory,
//                         streams and events made and a two-stream loop run,
//                         then (nothing destroyed by hand) the context
//                         released, which ends it with everything in it, and
//                         retained again for the next round (the other PTX
//                         of one kernel name on odd rounds). The driver may
//                         hand back the same context, stream, event and
//                         function handles; graphs, capture streams and
//                         caches of the ended context must not be used.
//   zero_size_after_node  every step a copy out of mapped host memory and a
//                         memset of mapped host memory (ops a graph keeps as
//                         driver nodes), each followed at once by an empty op
//                         of the same kind (0 bytes; 0-wide 2-D memset) whose
//                         addresses and value change every step; the host
//                         rewrites the copy's source and reads the memset's
//                         target after each step's synchronize. A capture
//                         adds no node for an empty op; taking the node
//                         before it as the empty op's node and patching it
//                         redirects the real copy or memset.
//   constant_device_copy  device-to-device copies and memsets into a
//                         __constant__ table (cudaMemcpyToSymbolAsync with
//                         cudaMemcpyDeviceToDevice, cudaMemsetAsync and
//                         cudaMemcpyAsync through cudaGetSymbolAddress, a
//                         driver 32-bit memset) between kernels that read it
//                         through the constant cache, and the table copied
//                         back out. A copy or memset replaced by a kernel
//                         writes constant memory the way no driver copy does.
//   memory_kind_switch    one driver copy call, one runtime copy, one memset
//                         and a same-device cudaMemcpyPeerAsync whose
//                         pointers move between device memory, mapped pinned
//                         memory (its device pointer), managed memory and a
//                         block from the stream-ordered pool, on schedules of
//                         periods 4 then 3: a graph built for one kind of
//                         memory patched with another.
//   barrier_other_thread  a helper thread, in lockstep with the main thread
//                         (atomics, no CUDA call), synchronizes an event, the
//                         main thread's stream or the device in the middle of
//                         the main thread's step and reads its buffer with
//                         cudaMemcpy: another thread's barriers must issue
//                         what is held for the main thread, at whatever point
//                         of its step they come.
//   allowance_handles     one kernel's dynamic shared memory limit raised and
//                         lowered through three setters (cudaFuncSetAttribute,
//                         cuFuncSetAttribute on its function,
//                         cuKernelSetAttribute on its library kernel) and
//                         launches of 80, 40 and 64 KiB through four handles
//                         (runtime launch, the CUkernel, the function from
//                         cudaGetFuncBySymbol, cuKernelGetFunction's) in
//                         rotation; the launches the driver refuses, and the
//                         setters' codes, go into a digest.
//
//   traps_edge NAME [--iters N]    one scenario (see kScenarios)
//   traps_edge --list              the scenario names
//
// Built like traps_odd (-rdc=true -lcudadevrt) and linked to libcuda (-lcuda):
//   nvcc -O2 -std=c++17 -rdc=true -o traps_edge traps_edge.cu -lcudadevrt -lcuda

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "trap_common.cuh"

namespace {

// ---------------------------------------------------------------- helpers





// trapInc (trap_common.cuh, kIncPtx) with other constants under the same
// name: rotate by 5, read src[(k * 13 + 7) % n].
std::string otherIncPtx() {
  std::string ptx = kIncPtx;
  const std::pair<const char*, const char*> edits[] = {
      {"shf.l.wrap.b32 \t%r8, %r7, %r7, 3;", "shf.l.wrap.b32 \t%r8, %r7, %r7, 5;"},
      {"mad.lo.s32 \t%r9, %r1, 11, 5;", "mad.lo.s32 \t%r9, %r1, 13, 7;"},
  };
  for (const auto& [from, to] : edits) {
    const size_t at = ptx.find(from);
    if (at == std::string::npos) {
      std::fprintf(stderr, "traps: PTX edit '%s' not found\n", from);
      std::exit(1);
    }
    ptx.replace(at, std::strlen(from), to);
  }
  return ptx;
}

// mix's parameters as one buffer (the `extra` form): 24 bytes, as the kernel's.
struct alignas(8) MixArgs {
  uint32_t* dst;
  const uint32_t* src;
  int n;
  uint32_t salt;
};
static_assert(sizeof(MixArgs) == 24, "mix takes 24 bytes of parameters");

// ---------------------------------------------------------------- kernels

// dst[k] mixes with small[k % m] (a buffer of m words).
__global__ void foldSmall(uint32_t* dst, const uint32_t* small, int m, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 2) ^ (small[k % m] + salt + uint32_t(k));
}

__constant__ uint32_t c_edge[1024];

// Reads the constant table twice: one address per block (a broadcast) and
// one per thread.
__global__ void readEdge(uint32_t* dst, const uint32_t* src, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t uniform = c_edge[(blockIdx.x * 7u + salt) & 1023u];
  const uint32_t spread = c_edge[(threadIdx.x * 5u + salt * 3u) & 1023u];
  if (k < n) dst[k] = rotl(dst[k], 7) ^ (uniform + rotl(spread, 11) + src[k]);
}

// Fills `words` words of dynamic shared memory and folds them into dst.
__global__ void smemFold(uint32_t* dst, const uint32_t* src, int n, uint32_t salt, int words) {
  extern __shared__ uint32_t sm[];
  for (int w = threadIdx.x; w < words; w += blockDim.x) sm[w] = src[(blockIdx.x * 131 + w) % n] + salt;
  __syncthreads();
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 3) ^ (sm[(threadIdx.x * 17) % words] + uint32_t(words));
}

// ---------------------------------------------------------------- scenarios

// --- noop_query

// After a device synchronize, two streams (a non-blocking one and the legacy
// stream) get only waits on events that were never recorded, which are
// functional no-ops: the streams have nothing pending, and cudaStreamQuery
// says so. Asked once each, not polled. Then the step's kernels follow.
void noopQuery() {
  cudaStream_t s = nonBlockingStream();
  cudaEvent_t never1, never2, done;
  CK(cudaEventCreateWithFlags(&never1, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&never2, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  uint32_t *a = deviceBuffer(801), *b = deviceBuffer(802), *c = deviceBuffer(803), *d = deviceBuffer(804);
  Digest codes;
  uint64_t notReady[4] = {0, 0, 0, 0};
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i));
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, uint32_t(i) + 1);
    mix<<<kGrid, kBlock, 0, 0>>>(c, d, kN, uint32_t(i) + 2);  // the legacy stream: its own buffers
    CKL();
    CK(cudaEventRecord(done, s));
    CK(cudaDeviceSynchronize());  // both streams idle, `done` complete
    CK(cudaStreamWaitEvent(s, never1, 0));
    CK(cudaStreamWaitEvent(s, never2, 0));
    CK(cudaStreamWaitEvent(0, never1, 0));
    const cudaError_t q[4] = {cudaStreamQuery(s), cudaStreamQuery(0), cudaEventQuery(done), cudaEventQuery(never2)};
    const cudaError_t last = cudaGetLastError();  // a "not ready" must not linger as an error
    for (int k = 0; k < 4; ++k) {
      if (q[k] != cudaSuccess && q[k] != cudaErrorNotReady) {
        std::fprintf(stderr, "traps: query %d at step %d: %s\n", k, i, cudaGetErrorName(q[k]));
        std::exit(1);
      }
      codes.add(uint64_t(q[k]));
      notReady[k] += q[k] == cudaErrorNotReady;
    }
    codes.add(uint64_t(last));
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i) + 3);
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, uint32_t(i) + 4);
    mix<<<kGrid, kBlock, 0, 0>>>(d, c, kN, uint32_t(i) + 5);
    CKL();
    if (checkpoint(i, s, "a", a)) print("queries", i, codes.h);
  }
  CK(cudaDeviceSynchronize());
  print("not_ready_streams", int(notReady[0]), notReady[1]);
  print("not_ready_events", int(notReady[2]), notReady[3]);
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4) ^
                      deviceDigest(d, kN * 4) ^ codes.h);
}

// --- pool_usage_stats

// Every step (after the last step's synchronize): a block from a private
// pool is written, read and freed, a kernel runs, and the next block is
// allocated on the same stream (eagerly the freed memory again); likewise
// two blocks of the device's own pool. The pools' used memory is read right
// after each free and each allocation; at checkpoints the high watermarks
// (then reset) and the reserved memory. Both pools keep their memory
// (release threshold at its maximum), so nothing depends on timing.
void poolUsageStats() {
  const int device = currentDevice();
  int pools = 0;
  CK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device));
  if (!pools) {
    print("no memory pools here", 0, 0);
    return;
  }
  cudaStream_t s = nonBlockingStream();
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool = nullptr, dflt = nullptr;
  CK(cudaMemPoolCreate(&pool, &props));
  CK(cudaDeviceGetDefaultMemPool(&dflt, device));
  uint64_t keep = ~uint64_t(0);
  CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  CK(cudaMemPoolSetAttribute(dflt, cudaMemPoolAttrReleaseThreshold, &keep));
  auto attr = [](cudaMemPool_t p, cudaMemPoolAttr a) {
    uint64_t v = 0;
    CK(cudaMemPoolGetAttribute(p, a, &v));
    return v;
  };
  auto resetHigh = [](cudaMemPool_t p) {
    uint64_t zero = 0;
    CK(cudaMemPoolSetAttribute(p, cudaMemPoolAttrUsedMemHigh, &zero));
    CK(cudaMemPoolSetAttribute(p, cudaMemPoolAttrReservedMemHigh, &zero));
  };
  resetHigh(pool);
  resetHigh(dflt);
  constexpr size_t kBlockBytes = size_t(8) << 20;  // kernels use the first kN words
  uint32_t *a = deviceBuffer(811), *b = deviceBuffer(812);
  Digest used;
  for (int i = 0; i < g_iters; ++i) {
    uint32_t *t = nullptr, *u = nullptr, *v = nullptr, *w = nullptr;
    CK(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&t), kBlockBytes, pool, s));
    CK(cudaMemsetAsync(t, i & 0xff, kN * 4, s));
    mix<<<kGrid, kBlock, 0, s>>>(t, a, kN, uint32_t(i));
    mix<<<kGrid, kBlock, 0, s>>>(b, t, kN, uint32_t(i) + 1);
    CK(cudaFreeAsync(t, s));
    used.add(attr(pool, cudaMemPoolAttrUsedMemCurrent));
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i) + 2);
    CK(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&u), kBlockBytes, pool, s));  // t's memory, eagerly
    used.add(attr(pool, cudaMemPoolAttrUsedMemCurrent));
    CK(cudaMemsetAsync(u, (i * 3) & 0xff, kN * 4, s));
    mix<<<kGrid, kBlock, 0, s>>>(u, b, kN, uint32_t(i) + 3);
    mix<<<kGrid, kBlock, 0, s>>>(a, u, kN, uint32_t(i) + 4);
    CK(cudaFreeAsync(u, s));
    used.add(attr(pool, cudaMemPoolAttrUsedMemCurrent));
    // The device's pool, the same way.
    CK(cudaMallocAsync(reinterpret_cast<void**>(&v), kBlockBytes / 2, s));
    CK(cudaMemsetAsync(v, (i * 5) & 0xff, kN * 4, s));
    mix<<<kGrid, kBlock, 0, s>>>(v, a, kN, uint32_t(i) + 5);
    mix<<<kGrid, kBlock, 0, s>>>(b, v, kN, uint32_t(i) + 6);
    CK(cudaFreeAsync(v, s));
    used.add(attr(dflt, cudaMemPoolAttrUsedMemCurrent));
    CK(cudaMallocAsync(reinterpret_cast<void**>(&w), kBlockBytes / 2, s));
    used.add(attr(dflt, cudaMemPoolAttrUsedMemCurrent));
    CK(cudaMemsetAsync(w, (i * 7) & 0xff, kN * 4, s));
    mix<<<kGrid, kBlock, 0, s>>>(a, w, kN, uint32_t(i) + 7);
    CK(cudaFreeAsync(w, s));
    CKL();
    CK(cudaStreamSynchronize(s));
    if (i % 100 == 99) {
      print("a", i, deviceDigest(a, kN * 4));
      print("used", i, used.h);
      print("pool_used_high", i, attr(pool, cudaMemPoolAttrUsedMemHigh));
      print("pool_reserved", i, attr(pool, cudaMemPoolAttrReservedMemCurrent));
      print("pool_reserved_high", i, attr(pool, cudaMemPoolAttrReservedMemHigh));
      print("device_pool_used_high", i, attr(dflt, cudaMemPoolAttrUsedMemHigh));
      print("device_pool_reserved_high", i, attr(dflt, cudaMemPoolAttrReservedMemHigh));
      resetHigh(pool);
      resetHigh(dflt);
    }
  }
  print("end", int(attr(pool, cudaMemPoolAttrUsedMemCurrent) + attr(dflt, cudaMemPoolAttrUsedMemCurrent)),
        deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ used.h);
  CK(cudaMemPoolDestroy(pool));
}

// --- params_and_extra

// Four driver launches of mix per step: L1 with kernelParams; L2 with
// kernelParams and, on irregular steps, an `extra` list too (empty, or a
// parameter buffer with another salt); L3 likewise through cuLaunchKernelEx;
// L4 with an `extra` buffer only. The driver refuses a launch given both
// (cuda.h, cuLaunchKernel); its code and the buffers show what ran.
void paramsAndExtra() {
  cudaStream_t s = nonBlockingStream();
  auto* cs = reinterpret_cast<CUstream>(s);
  cudaFunction_t rf;
  CK(cudaGetFuncBySymbol(&rf, reinterpret_cast<const void*>(mix)));
  const CUfunction f = reinterpret_cast<CUfunction>(rf);
  uint32_t *a = deviceBuffer(821), *b = deviceBuffer(822), *c = deviceBuffer(823);
  Digest codes;
  int refused = 0;
  auto note = [&](CUresult r) {
    codes.add(uint64_t(r));
    refused += r != CUDA_SUCCESS;
  };
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(a, c, kN, uint32_t(i));
    CKL();
    // L1: parameters by pointer.
    MixArgs p1{b, a, kN, uint32_t(i) * 3u + 1u};
    void* k1[] = {&p1.dst, &p1.src, &p1.n, &p1.salt};
    CKD(cuLaunchKernel(f, kGrid, 1, 1, kBlock, 1, 1, 0, cs, k1, nullptr));
    // The odd `extra` lists: empty, or a buffer naming the same buffers with another salt.
    MixArgs other{c, b, kN, 0xdeadbeefu ^ uint32_t(i)};
    size_t otherSize = sizeof other;
    void* emptyExtra[] = {CU_LAUNCH_PARAM_END};
    void* bufferExtra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &other, CU_LAUNCH_PARAM_BUFFER_SIZE, &otherSize,
                           CU_LAUNCH_PARAM_END};
    // L2: parameters by pointer, and on irregular steps an `extra` list too.
    MixArgs p2{c, b, kN, uint32_t(i) * 5u + 2u};
    void* k2[] = {&p2.dst, &p2.src, &p2.n, &p2.salt};
    void** extra2 = irregular(i, 1, 7) ? emptyExtra : irregular(i, 2, 7) ? bufferExtra : nullptr;
    note(cuLaunchKernel(f, kGrid, 1, 1, kBlock, 1, 1, 0, cs, k2, extra2));
    // L3: the same through cuLaunchKernelEx, on other steps.
    MixArgs p3{a, c, kN, uint32_t(i) * 7u + 3u};
    void* k3[] = {&p3.dst, &p3.src, &p3.n, &p3.salt};
    CUlaunchConfig cfg = {};
    cfg.gridDimX = kGrid;
    cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = kBlock;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = cs;
    void** extra3 = irregular(i, 3, 7) ? bufferExtra : irregular(i, 4, 7) ? emptyExtra : nullptr;
    note(cuLaunchKernelEx(&cfg, f, k3, extra3));
    // L4: parameters in an `extra` buffer only.
    MixArgs p4{b, c, kN, uint32_t(i) * 11u + 4u};
    size_t p4Size = sizeof p4;
    void* extra4[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &p4, CU_LAUNCH_PARAM_BUFFER_SIZE, &p4Size, CU_LAUNCH_PARAM_END};
    CKD(cuLaunchKernel(f, kGrid, 1, 1, kBlock, 1, 1, 0, cs, nullptr, extra4));
    mix2<<<kGrid, kBlock, 0, s>>>(a, b, c, kN, uint32_t(i));
    CKL();
    if (checkpoint(i, s, "a", a)) print("codes", refused, codes.h);
  }
  CK(cudaStreamSynchronize(s));
  print("refused", refused, codes.h);
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4));
}

// --- refused_values

// Each call below is made every step with valid pointers, and on irregular
// steps with a pointer value the driver refuses (documented alignment of
// 32- and 16-bit memsets; a device copy's source in pageable memory that was
// never registered; cudaFreeAsync of a pointer into a block, and of pinned
// host memory, before the block's own free). Codes, and cudaGetLastError
// after runtime calls, go into a digest; the buffers show what was written.
// (On a system where the GPU may read pageable memory the copies succeed in
// eager as well.)
void refusedValues() {
  cudaStream_t s = nonBlockingStream();
  auto* cs = reinterpret_cast<CUstream>(s);
  uint32_t *a = deviceBuffer(831), *b = deviceBuffer(832), *x = deviceBuffer(833), *y = deviceBuffer(834);
  std::vector<uint32_t> pageable(8192);  // read only (by refused copies), never written after this
  for (size_t k = 0; k < pageable.size(); ++k) pageable[k] = uint32_t(k) * 2246822519u + 3u;
  uint32_t* pinned = nullptr;  // only ever handed to a refused free (never released: it may be gone)
  CK(cudaMallocHost(reinterpret_cast<void**>(&pinned), 4096));
  std::memset(pinned, 0, 4096);
  const CUdeviceptr X = reinterpret_cast<CUdeviceptr>(x);
  Digest codes;
  int refusals = 0;
  auto note = [&](int r) {
    codes.add(uint64_t(r));
    refusals += r != 0;
  };
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i));
    CKL();
    // A 32-bit memset: 4-byte aligned, or 2 bytes off.
    note(int(cuMemsetD32Async(X + 1024 + (irregular(i, 11, 6) ? 2 : 0), 0x9e3779b9u * uint32_t(i + 1), 256, cs)));
    // A 16-bit memset: 2-byte aligned, or at an odd address.
    note(int(cuMemsetD16Async(X + 32768 + (irregular(i, 12, 6) ? 1 : 0), uint16_t(i * 31 + 7), 300, cs)));
    // A driver device copy of 4 KiB: from device memory, or from pageable host memory.
    const CUdeviceptr from = irregular(i, 13, 6) ? reinterpret_cast<CUdeviceptr>(pageable.data())
                                                 : reinterpret_cast<CUdeviceptr>(a + 4096);
    note(int(cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(y + 128), from, 4096, cs)));
    // The runtime's device-to-device copy, likewise.
    const void* from2 = irregular(i, 14, 6) ? static_cast<const void*>(pageable.data() + 1024)
                                            : static_cast<const void*>(a + 2048);
    note(int(cudaMemcpyAsync(y + 8192, from2, 4096, cudaMemcpyDeviceToDevice, s)));
    note(int(cudaGetLastError()));
    mix2<<<kGrid, kBlock, 0, s>>>(b, x, y, kN, uint32_t(i));
    // Scratch from the stream's pool, freed after its use; before that, on
    // irregular steps, a free of a pointer into it and one of pinned memory.
    uint32_t* q = nullptr;
    CK(cudaMallocAsync(reinterpret_cast<void**>(&q), kN * 4, s));
    CK(cudaMemsetAsync(q, i & 0xff, kN * 4, s));
    mix<<<kGrid, kBlock, 0, s>>>(q, a, kN, uint32_t(i) + 1);
    mix<<<kGrid, kBlock, 0, s>>>(b, q, kN, uint32_t(i) + 2);
    CKL();
    if (irregular(i, 15, 6)) {
      note(int(cudaFreeAsync(q + 16, s)));
      note(int(cudaGetLastError()));
    }
    if (irregular(i, 16, 6)) {
      note(int(cudaFreeAsync(pinned, s)));
      note(int(cudaGetLastError()));
    }
    note(int(cudaFreeAsync(q, s)));
    note(int(cudaGetLastError()));
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i) + 3);
    CKL();
    if (checkpoint(i, s, "b", b)) {
      print("xy", i, deviceDigest(x, kN * 4) ^ deviceDigest(y, kN * 4));
      print("codes", refusals, codes.h);
    }
  }
  CK(cudaStreamSynchronize(s));
  print("refusals", refusals, codes.h);
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(x, kN * 4) ^
                      deviceDigest(y, kN * 4));
}

// --- pageable_copy_gate

// Four phases of `per` steps. Each step: a kernel and the gated host
// function on S, then the main thread announces the step and copies the
// kernel's result into pageable memory: phase 0 synchronizes S first and
// copies synchronously (the control), phases 1-3 copy asynchronously
// (cuMemcpyDtoHAsync, cudaMemcpyAsync, cudaMemcpy2DAsync), which into
// pageable memory return only once the copy completed. The helper, told of
// the step, waits 15 ms (the main thread is inside its copy by then),
// launches a kernel of its own on T and opens the gate.
void pageableCopyGate() {
  cudaStream_t s = nonBlockingStream(), t = nonBlockingStream();
  auto* cs = reinterpret_cast<CUstream>(s);
  uint32_t *a = deviceBuffer(841), *base = deviceBuffer(842), *b = deviceBuffer(843);
  std::vector<uint32_t> host(kN);  // pageable
  const int per = std::max(g_iters / 25, 6);
  constexpr int kPhases = 4;
  HostGate gate(250);
  std::atomic<int> announced{0};  // the last step whose host function the main thread issued
  HostGateCall calls[4];
  std::thread helper([&] {
    for (int i = 0; i < kPhases * per; ++i) {
      while (announced.load(std::memory_order_acquire) < i + 1) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::milliseconds(15));
      mix<<<kGrid, kBlock, 0, t>>>(b, base, kN, uint32_t(i));
      CKL();
      gate.open.store(uint32_t(i + 1), std::memory_order_release);
    }
  });
  Digest seen;
  for (int phase = 0; phase < kPhases; ++phase) {
    const uint32_t before = gate.timeouts.load();
    for (int k = 0; k < per; ++k) {
      const int i = phase * per + k;
      mix<<<kGrid, kBlock, 0, s>>>(a, base, kN, uint32_t(i));
      CKL();
      calls[i % 4] = HostGateCall{&gate, uint32_t(i + 1)};  // the call of 4 steps ago has run (its copy returned)
      CK(cudaLaunchHostFunc(s, hostGateWait, &calls[i % 4]));
      mix<<<kGrid, kBlock, 0, s>>>(a, base, kN, uint32_t(i) + 1000);
      CKL();
      announced.store(i + 1, std::memory_order_release);
      switch (phase) {
        case 0:
          CK(cudaStreamSynchronize(s));
          CKD(cuMemcpyDtoH(host.data(), reinterpret_cast<CUdeviceptr>(a), kN * 4));
          break;
        case 1:
          CKD(cuMemcpyDtoHAsync(host.data(), reinterpret_cast<CUdeviceptr>(a), kN * 4, cs));
          break;
        case 2:
          CK(cudaMemcpyAsync(host.data(), a, kN * 4, cudaMemcpyDeviceToHost, s));
          break;
        default:  // 64 rows of 512 bytes out of a 1024-byte pitch
          CK(cudaMemcpy2DAsync(host.data(), 512, a, 1024, 512, kN * 4 / 1024, cudaMemcpyDeviceToHost, s));
          break;
      }
      CK(cudaStreamSynchronize(s));  // (the copies into pageable memory have completed already)
      seen.add(host.data(), kN * 4);
      while (gate.open.load(std::memory_order_acquire) < uint32_t(i + 1)) std::this_thread::yield();
    }
    print("timeouts", phase, uint64_t(gate.timeouts.load() - before));
  }
  helper.join();
  CK(cudaDeviceSynchronize());
  print("host_functions", int(gate.ran.load()), seen.h);
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

// --- primary_release_retain

// Driver API only (the runtime has made no context yet): three rounds of
// retain the device's primary context, load a module (kIncPtx, or on odd
// rounds the other PTX of the same kernel name), allocate, create two
// streams and two events, run a loop over both streams, and release the
// context without destroying anything by hand: the last release ends the
// context and everything in it. The next retain starts a new one.
void primaryReleaseRetain() {
  CKD(cuInit(0));
  CUdevice dev = 0;
  CKD(cuDeviceGet(&dev, 0));
  unsigned flags = 0;
  int active = 0;
  CKD(cuDevicePrimaryCtxGetState(dev, &flags, &active));
  print("primary_active_at_start", active, 0);  // active: releasing ours will not end it
  const std::string ptx[2] = {kIncPtx, otherIncPtx()};
  const int steps = std::max(g_iters / 3, 10);
  std::vector<uint32_t> host(kN);
  for (int round = 0; round < 3; ++round) {
    CUcontext ctx = nullptr;
    CKD(cuDevicePrimaryCtxRetain(&ctx, dev));
    CKD(cuCtxSetCurrent(ctx));
    CUmodule module = nullptr;
    CUfunction inc = nullptr;
    CKD(cuModuleLoadData(&module, ptx[round % 2].c_str()));
    CKD(cuModuleGetFunction(&inc, module, "trapInc"));
    CUdeviceptr a = 0, b = 0, c = 0;
    CUdeviceptr* const bufs[3] = {&a, &b, &c};
    for (int j = 0; j < 3; ++j) {
      CKD(cuMemAlloc(bufs[j], kN * 4));
      for (int k = 0; k < kN; ++k) host[k] = uint32_t(k) * 2654435761u + uint32_t(round * 3 + j) * 40503u;
      CKD(cuMemcpyHtoD(*bufs[j], host.data(), kN * 4));
    }
    CUstream s1 = nullptr, s2 = nullptr;
    CKD(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CKD(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CUevent e1 = nullptr, e2 = nullptr;
    CKD(cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
    CKD(cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
    auto launch = [&](CUstream st, CUdeviceptr dst, CUdeviceptr src, uint32_t v) {
      int n = kN;
      void* params[] = {&dst, &src, &n, &v};
      CKD(cuLaunchKernel(inc, kGrid, 1, 1, kBlock, 1, 1, 0, st, params, nullptr));
    };
    auto digest = [&](CUdeviceptr p) {
      CKD(cuMemcpyDtoH(host.data(), p, kN * 4));
      return hostDigest(host.data(), kN * 4);
    };
    for (int i = 0; i < steps; ++i) {
      launch(s1, b, a, uint32_t(i));  // after s2's last step (the wait on e2 below)
      CKD(cuEventRecord(e1, s1));
      CKD(cuStreamWaitEvent(s2, e1, 0));
      launch(s2, c, b, uint32_t(i) + 1);
      CKD(cuMemsetD32Async(c + 4 * (i % 64), uint32_t(i) * 2654435761u, 16, s2));
      launch(s2, a, c, uint32_t(i) + 2);
      CKD(cuEventRecord(e2, s2));
      CKD(cuStreamWaitEvent(s1, e2, 0));
      if (i % 50 == 49) {
        CKD(cuStreamSynchronize(s1));  // s2's step too (the wait on e2)
        print("a", round * 1000 + i, digest(a));
      }
    }
    CKD(cuCtxSynchronize());
    print("round", round, digest(a) ^ digest(b) ^ digest(c));
    CKD(cuCtxSetCurrent(nullptr));
    CKD(cuDevicePrimaryCtxRelease(dev));
    CKD(cuDevicePrimaryCtxGetState(dev, &flags, &active));
    print("released", round, uint64_t(active));
  }
}

// --- zero_size_after_node

// Every step: a 16 KiB copy out of mapped host memory (which the host
// rewrites after each step's synchronize) right before an empty copy whose
// addresses change every step; a memset of mapped host memory with a value
// that changes every step (if the driver sets host memory) right before an
// empty memset, and a 2-D memset of it right before a 0-wide one; kernels
// read what the real copy brought in; the host reads the memsets' target
// after each step's synchronize. The empty ops do nothing.
void zeroSizeAfterNode() {
  cudaStream_t s = nonBlockingStream();
  auto* cs = reinterpret_cast<CUstream>(s);
  constexpr int kWords = 4096;
  uint32_t *srcHost = nullptr, *dstHost = nullptr, *srcDev = nullptr, *dstDev = nullptr;
  CK(cudaHostAlloc(reinterpret_cast<void**>(&srcHost), kWords * 4, cudaHostAllocMapped));
  CK(cudaHostAlloc(reinterpret_cast<void**>(&dstHost), kWords * 4, cudaHostAllocMapped));
  for (int k = 0; k < kWords; ++k) srcHost[k] = uint32_t(k) * 2654435761u + 17u;
  std::memset(dstHost, 0, kWords * 4);
  CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&srcDev), srcHost, 0));
  CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dstDev), dstHost, 0));
  const bool hostSet = cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(dstDev), 0, 16, cs) == CUDA_SUCCESS;
  CK(cudaStreamSynchronize(s));
  print("memset_on_host_memory", hostSet, 0);
  uint32_t *a = deviceBuffer(881), *b = deviceBuffer(882), *c = deviceBuffer(883);
  uint32_t* z[3] = {deviceBuffer(884, 8192), deviceBuffer(885, 8192), deviceBuffer(886, 8192)};
  auto D = [](const uint32_t* p) { return reinterpret_cast<CUdeviceptr>(p); };
  Digest seen, codes;  // codes: every call's (all succeed where the driver takes empty ops)
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i));
    CKL();
    codes.add(uint64_t(cuMemcpyDtoDAsync(D(c + 256), D(srcDev), kWords * 4, cs)));
    codes.add(uint64_t(cuMemcpyDtoDAsync(D(z[i % 3] + 64), D(z[(i + 1) % 3] + 128), 0, cs)));
    mix2<<<kGrid, kBlock, 0, s>>>(a, c, b, kN, uint32_t(i));
    CKL();
    if (hostSet) {
      codes.add(uint64_t(cuMemsetD32Async(D(dstDev), 0x5a5a0000u + uint32_t(i), kWords, cs)));
      codes.add(uint64_t(cuMemsetD32Async(D(z[(i + 2) % 3] + 32), uint32_t(i) * 2654435761u, 0, cs)));
      codes.add(uint64_t(cuMemsetD2D8Async(D(dstDev) + 64, 256, uint8_t(0xa5 ^ i), 64, 16, cs)));
      codes.add(uint64_t(cuMemsetD2D8Async(D(z[i % 3]) + 16000, 256, uint8_t(i), 0, 16, cs)));
    }
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, uint32_t(i) + 1);
    CKL();
    CK(cudaStreamSynchronize(s));
    seen.add(dstHost, kWords * 4);  // what the memsets left (the GPU is done with it)
    for (int k = 0; k < kWords; ++k) srcHost[k] = rotl(srcHost[k], 3) ^ uint32_t(i);  // the next step's copy source
    if (i % 100 == 99) {
      print("a", i, deviceDigest(a, kN * 4));
      print("z", i, deviceDigest(z[0], 8192 * 4) ^ deviceDigest(z[1], 8192 * 4) ^ deviceDigest(z[2], 8192 * 4));
      print("host", i, seen.h);
      print("codes", i, codes.h);
    }
  }
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4) ^ seen.h ^
                      codes.h);
}

// --- constant_device_copy

// The constant table written every step from device memory (the runtime's
// symbol copy, a memset and a copy through its address, a driver 32-bit
// memset) with kernels reading it in between, and copied back out into
// device memory that a kernel folds in.
void constantDeviceCopy() {
  cudaStream_t s = nonBlockingStream();
  auto* cs = reinterpret_cast<CUstream>(s);
  uint32_t* table = nullptr;
  CK(cudaGetSymbolAddress(reinterpret_cast<void**>(&table), c_edge));
  uint32_t *a = deviceBuffer(851), *b = deviceBuffer(852), *back = deviceBuffer(853, 1024);
  CK(cudaMemcpy(table, back, sizeof c_edge, cudaMemcpyDeviceToDevice));
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i));
    CKL();
    CK(cudaMemcpyToSymbolAsync(c_edge, a + (i % 8) * 1024, sizeof c_edge, 0, cudaMemcpyDeviceToDevice, s));
    readEdge<<<kGrid, kBlock, 0, s>>>(b, a, kN, uint32_t(i));
    CKL();
    CK(cudaMemsetAsync(table + 256, (i * 13 + 1) & 0xff, 1024, s));
    readEdge<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i) + 1);
    CKL();
    CK(cudaMemcpyAsync(table + 512, b + (i % 5) * 512, 2048, cudaMemcpyDeviceToDevice, s));
    CKD(cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(table + 900), uint32_t(i) * 2654435761u, 64, cs));
    readEdge<<<kGrid, kBlock, 0, s>>>(b, a, kN, uint32_t(i) + 2);
    CKL();
    CK(cudaMemcpyFromSymbolAsync(back, c_edge, sizeof c_edge, 0, cudaMemcpyDeviceToDevice, s));
    foldSmall<<<kGrid, kBlock, 0, s>>>(a, back, 1024, kN, uint32_t(i) + 3);
    CKL();
    if (checkpoint(i, s, "a", a)) print("table", i, deviceDigest(back, 1024 * 4));
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(back, 1024 * 4));
}

// --- memory_kind_switch

// Four places of kN words: device memory, mapped pinned memory (named by its
// device pointer), managed memory (where the GPU may use it while the host
// does not touch it; else device memory) and a block of the stream-ordered
// pool. Every step one driver copy writes one place, one runtime copy reads
// another, one memset writes a third (mapped memory only where the driver
// sets host memory) and a same-device peer copy reads the device memory or
// the pool block, chosen with period 4 for half the run and period 3 after;
// kernels read every place. The host reads the places only after a
// synchronize.
void memoryKindSwitch() {
  const int device = currentDevice();
  int concurrentManaged = 0;
  CK(cudaDeviceGetAttribute(&concurrentManaged, cudaDevAttrConcurrentManagedAccess, device));
  cudaStream_t s = nonBlockingStream();
  auto* cs = reinterpret_cast<CUstream>(s);
  uint32_t *dev1 = deviceBuffer(861), *dev2 = deviceBuffer(862), *a = deviceBuffer(863), *b = deviceBuffer(864);
  uint32_t *pinnedHost = nullptr, *pinnedDev = nullptr, *managed = nullptr, *pooled = nullptr;
  CK(cudaHostAlloc(reinterpret_cast<void**>(&pinnedHost), kN * 4, cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&pinnedDev), pinnedHost, 0));
  for (int k = 0; k < kN; ++k) pinnedHost[k] = uint32_t(k) * 40503u + 5u;
  CK(cudaMallocManaged(reinterpret_cast<void**>(&managed), kN * 4));
  for (int k = 0; k < kN; ++k) managed[k] = uint32_t(k) * 2246822519u + 9u;
  CK(cudaMallocAsync(reinterpret_cast<void**>(&pooled), kN * 4, s));
  CK(cudaMemcpyAsync(pooled, dev2, kN * 4, cudaMemcpyDeviceToDevice, s));
  const bool hostSet = cudaMemsetAsync(pinnedDev, 0x11, 256, s) == cudaSuccess;
  cudaGetLastError();
  CK(cudaStreamSynchronize(s));
  print("kinds", concurrentManaged, uint64_t(hostSet));
  uint32_t* const places[4] = {dev1, pinnedDev, concurrentManaged ? managed : dev2, pooled};
  uint32_t* const settable[4] = {dev1, hostSet ? pinnedDev : dev2, places[2], pooled};
  uint32_t* const peerable[2] = {dev1, pooled};
  auto kind = [](int i) { return i < g_iters / 2 ? i % 4 : i % 3 + 1; };
  Digest peerCodes;  // same-device peer copies: codes (success where the driver takes them)
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i));
    CKL();
    CKD(cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(places[kind(i)] + 1024),
                          reinterpret_cast<CUdeviceptr>(a + 512), 16384, cs));
    CK(cudaMemcpyAsync(b + 2048, places[kind(i + 2)] + 3000, 8192, cudaMemcpyDefault, s));
    CK(cudaMemsetAsync(settable[kind(i + 1)] + 5000, (i * 7) & 0xff, 4096, s));
    peerCodes.add(uint64_t(cudaMemcpyPeerAsync(b + 9000, device, peerable[i % 2] + 100, device, 4096, s)));
    peerCodes.add(uint64_t(cudaGetLastError()));
    mix2<<<kGrid, kBlock, 0, s>>>(a, dev1, b, kN, uint32_t(i));
    mix2<<<kGrid, kBlock, 0, s>>>(b, pinnedDev, places[2], kN, uint32_t(i) + 1);
    mix2<<<kGrid, kBlock, 0, s>>>(a, pooled, b, kN, uint32_t(i) + 2);
    CKL();
    if (checkpoint(i, s, "a", a))
      print("places", i, deviceDigest(dev1, kN * 4) ^ deviceDigest(pinnedDev, kN * 4) ^
                             deviceDigest(places[2], kN * 4) ^ deviceDigest(pooled, kN * 4));
  }
  CK(cudaStreamSynchronize(s));
  print("peer_copies", 0, peerCodes.h);
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ hostDigest(pinnedHost, kN * 4) ^
                      deviceDigest(places[2], kN * 4) ^ deviceDigest(pooled, kN * 4));
  CK(cudaFreeAsync(pooled, s));
  CK(cudaStreamSynchronize(s));
}

// --- barrier_other_thread

// The main thread's step: x written and read on S, an event, then (after
// telling the helper) more work on S and on U that leaves x alone; it waits
// for the helper before the next step. The helper synchronizes the event,
// S or the whole device by turns and reads x with cudaMemcpy.
void barrierOtherThread() {
  cudaStream_t s = nonBlockingStream(), u = nonBlockingStream();
  cudaEvent_t mid;
  CK(cudaEventCreateWithFlags(&mid, cudaEventDisableTiming));
  uint32_t *x = deviceBuffer(871), *y = deviceBuffer(872), *z = deviceBuffer(873), *w = deviceBuffer(874);
  std::atomic<int> posted{0}, checked{0};
  std::vector<uint64_t> seen(size_t(g_iters), 0);
  std::thread helper([&] {
    std::vector<uint32_t> h(kN);
    for (int i = 0; i < g_iters; ++i) {
      while (posted.load(std::memory_order_acquire) < i + 1) std::this_thread::yield();
      switch (i % 3) {
        case 0: CK(cudaEventSynchronize(mid)); break;
        case 1: CK(cudaStreamSynchronize(s)); break;
        default: CK(cudaDeviceSynchronize()); break;
      }
      // x was last written before `mid`; the main thread writes it again only after `checked`.
      CK(cudaMemcpy(h.data(), x, kN * 4, cudaMemcpyDeviceToHost));
      seen[size_t(i)] = hostDigest(h.data(), kN * 4);
      checked.store(i + 1, std::memory_order_release);
    }
  });
  Digest all;
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(x, z, kN, uint32_t(i));
    mix<<<kGrid, kBlock, 0, s>>>(y, x, kN, uint32_t(i) + 1);
    CKL();
    CK(cudaEventRecord(mid, s));
    posted.store(i + 1, std::memory_order_release);
    mix<<<kGrid, kBlock, 0, s>>>(y, z, kN, uint32_t(i) + 2);  // z is only ever read
    mix<<<kGrid, kBlock, 0, u>>>(w, z, kN, uint32_t(i) + 3);  // U: its own buffer
    CKL();
    while (checked.load(std::memory_order_acquire) < i + 1) std::this_thread::yield();
    all.add(seen[size_t(i)]);
    if (i % 100 == 99) print("x_seen", i, all.h);
  }
  helper.join();
  CK(cudaDeviceSynchronize());
  print("end", 0, all.h ^ deviceDigest(x, kN * 4) ^ deviceDigest(y, kN * 4) ^ deviceDigest(z, kN * 4) ^
                      deviceDigest(w, kN * 4));
}

// --- allowance_handles

// Per step: raise the limit to 96 KiB through one setter and launch 80 KiB
// through one handle, lower it to 48 KiB through the next setter and launch
// 40 KiB and 64 KiB through two other handles (setters by turns of 3,
// handles of 4). Which launches the driver refuses depends on which level
// (the function's own value in this context, or the library kernel's value
// for the device) each setter set last; eagerly that is the same every run.
void allowanceHandles() {
  const int device = currentDevice();
  int optin = 0;
  CK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  constexpr int kHigh = 96 * 1024, kLow = 48 * 1024, kWithin = 80 * 1024, kUnder = 40 * 1024, kAbove = 64 * 1024;
  if (optin < kHigh) {
    print("no 96 KiB of shared memory per block here", 0, uint64_t(optin));
    return;
  }
  cudaStream_t s = nonBlockingStream();
  auto* cs = reinterpret_cast<CUstream>(s);
  cudaKernel_t rk = nullptr;
  CK(cudaGetKernel(&rk, smemFold));
  const CUkernel kern = reinterpret_cast<CUkernel>(rk);
  cudaFunction_t rf = nullptr;
  CK(cudaGetFuncBySymbol(&rf, reinterpret_cast<const void*>(smemFold)));
  const CUfunction fn = reinterpret_cast<CUfunction>(rf);
  CUfunction kfn = nullptr;
  CKD(cuKernelGetFunction(&kfn, kern));
  print("one_function", fn == kfn, 0);
  uint32_t *a = deviceBuffer(891), *b = deviceBuffer(892);
  Digest codes;
  int refused = 0;
  auto set = [&](int how, int bytes) {
    int r = 0;
    switch (how) {
      case 0:
        r = int(cudaFuncSetAttribute(smemFold, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
        codes.add(uint64_t(cudaGetLastError()));
        break;
      case 1: r = int(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes)); break;
      default:
        r = int(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes, kern, CUdevice(device)));
        break;
    }
    codes.add(uint64_t(r));
  };
  auto launch = [&](int how, int bytes, uint32_t* dst, const uint32_t* src, uint32_t salt) {
    int n = kN, words = bytes / 4;
    void* params[] = {&dst, &src, &n, &salt, &words};
    int r = 0;
    switch (how) {
      case 0:
        smemFold<<<kGrid, kBlock, size_t(bytes), s>>>(dst, src, n, salt, words);
        r = int(cudaGetLastError());
        break;
      case 1:
        r = int(cuLaunchKernel(reinterpret_cast<CUfunction>(kern), kGrid, 1, 1, kBlock, 1, 1, unsigned(bytes), cs,
                               params, nullptr));
        break;
      case 2: r = int(cuLaunchKernel(fn, kGrid, 1, 1, kBlock, 1, 1, unsigned(bytes), cs, params, nullptr)); break;
      default: {
        CUlaunchConfig cfg = {};
        cfg.gridDimX = kGrid;
        cfg.gridDimY = cfg.gridDimZ = 1;
        cfg.blockDimX = kBlock;
        cfg.blockDimY = cfg.blockDimZ = 1;
        cfg.sharedMemBytes = unsigned(bytes);
        cfg.hStream = cs;
        r = int(cuLaunchKernelEx(&cfg, kfn, params, nullptr));
        break;
      }
    }
    codes.add(uint64_t(r));
    refused += r != 0;
  };
  for (int i = 0; i < g_iters; ++i) {
    set(i % 3, kHigh);
    launch(i % 4, kWithin, b, a, uint32_t(i));
    set((i + 1) % 3, kLow);
    launch((i + 2) % 4, kUnder, a, b, uint32_t(i) + 1);
    launch((i + 3) % 4, kAbove, b, a, uint32_t(i) + 2);
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i) + 3);
    CKL();
    if (checkpoint(i, s, "a", a)) print("codes", refused, codes.h);
  }
  CK(cudaStreamSynchronize(s));
  print("end", refused, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ codes.h);
}

constexpr Scenario kScenarios[] = {
    {"noop_query", noopQuery},
    {"pool_usage_stats", poolUsageStats},
    {"params_and_extra", paramsAndExtra},
    {"refused_values", refusedValues},
    {"pageable_copy_gate", pageableCopyGate},
    {"primary_release_retain", primaryReleaseRetain},
    {"zero_size_after_node", zeroSizeAfterNode},
    {"constant_device_copy", constantDeviceCopy},
    {"memory_kind_switch", memoryKindSwitch},
    {"barrier_other_thread", barrierOtherThread},
    {"allowance_handles", allowanceHandles},
};

}  // namespace

int main(int argc, char** argv) { return runScenarios(argc, argv, kScenarios); }
