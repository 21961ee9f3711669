// traps_r21: green contexts' SM partitions under a tool that replays their work
// from graphs of its own. A green context (CUDA 12.4+) runs its streams' kernels
// on a partition of the device's SMs; serving and overlap code (prefill/decode
// multiplexing, compute next to communication) relies on the partition holding.
// Each scenario records, from inside its kernels, the SMs they ran on (%smid,
// one bit per SM) and prints whether every kernel launched into a partition
// stayed within it (no more distinct SMs than the partition has, the two
// partitions' SM sets disjoint), next to digests of the data. Eagerly those
// flags are 1 on every run; a tool that captures such a launch into a graph of
// another context (the one current at the launch, say) runs it on SMs outside
// the partition. Scenarios whose machine has no green contexts print a SKIP
// line and stop.
//
//   green_partition_runtime  the primary context current; runtime launches into
//                            streams of two green contexts (cuGreenCtxStreamCreate),
//                            joined to a primary stream by events every step.
//   green_partition_current  each green context made current in turn
//                            (cuCtxFromGreenCtx, cuCtxPushCurrent) and its
//                            kernels launched into its own streams, the primary
//                            context's stream waiting for them through events.
//   green_partition_alone    one green context's stream alone in the loop (the
//                            primary context current), then the other's (its
//                            green context pushed).
//   green_per_thread         the per-thread default stream (runtime and driver
//                            launches, its query and synchronize) while a green
//                            context is current; every code digested.
//   texref_rebind            a texture reference of a PTX module rebound
//                            between two buffers on irregular steps and on
//                            each of the last 40 (cuTexRefSetAddress), read
//                            by a kernel launched twice a step.
//   texref_every_step        the same, rebound on every step.
//   green_destroy_last_ref   driver API only: the primary context's per-thread
//                            stream before and after a green context holds its
//                            last reference, and after cuGreenCtxDestroy ends it.
#include "trap_common.cuh"

// texref_rebind calls the texture reference API, which CUDA 13 still has but
// marks deprecated.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace {

constexpr int kMaskWords = 16;  // 512 SMs
constexpr int kTouchGrid = 1024;

__global__ void smTouch(uint32_t* mask, uint32_t* data, int n, uint32_t v) {
  uint32_t sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  if (threadIdx.x == 0 && sm < kMaskWords * 32) atomicOr(&mask[sm >> 5], 1u << (sm & 31));
  for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
    data[k] = hash32(data[k] ^ v) + uint32_t(k);
}

__global__ void fold(uint32_t* dst, const uint32_t* a, const uint32_t* b, int n, uint32_t v) {
  int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = hash32(dst[k] + a[(k * 7 + 3) % n] * 3u + b[(k * 13 + 1) % n] + v);
}

struct Partitions {
  bool ok = false;
  CUgreenCtx green[2] = {};
  unsigned smCount[2] = {};
  CUstream stream[2] = {};
};

// Two green contexts of at least 16 SMs each, a stream in each (ok false where
// the device or driver makes none).
Partitions tryPartitions() {
  Partitions p;
  CK(cudaFree(nullptr));
  CUdevice device;
  CKD(cuCtxGetDevice(&device));
  CUdevResource all = {}, parts[2] = {}, rest = {};
  unsigned groups = 2;
  if (cuDeviceGetDevResource(device, &all, CU_DEV_RESOURCE_TYPE_SM) != CUDA_SUCCESS ||
      cuDevSmResourceSplitByCount(parts, &groups, &all, &rest, 0, 16) != CUDA_SUCCESS || groups < 2)
    return p;
  for (int g = 0; g < 2; ++g) {
    CUdevResourceDesc desc = nullptr;
    if (cuDevResourceGenerateDesc(&desc, &parts[g], 1) != CUDA_SUCCESS ||
        cuGreenCtxCreate(&p.green[g], desc, device, CU_GREEN_CTX_DEFAULT_STREAM) != CUDA_SUCCESS ||
        cuGreenCtxStreamCreate(&p.stream[g], p.green[g], CU_STREAM_NON_BLOCKING, 0) != CUDA_SUCCESS)
      return p;
    p.smCount[g] = parts[g].sm.smCount;
  }
  p.ok = true;
  return p;
}

// The same, printing whether they were made (and a SKIP line where not).
Partitions makePartitions() {
  Partitions p = tryPartitions();
  print("green_contexts", p.ok, 0);
  if (!p.ok) std::printf("SKIP green contexts unavailable\n");
  return p;
}

// Each partition's SM bits (printPartitionFlags), zeroed.
uint32_t* zeroedMasks() {
  uint32_t* masks = nullptr;
  CK(cudaMalloc(&masks, 2 * kMaskWords * sizeof(uint32_t)));
  CK(cudaMemset(masks, 0, 2 * kMaskWords * sizeof(uint32_t)));
  return masks;
}

void destroyPartitions(Partitions& p) {
  for (int g = 0; g < 2; ++g) {
    CKD(cuStreamDestroy(p.stream[g]));
    CKD(cuGreenCtxDestroy(p.green[g]));
  }
}

// The flags the scenarios print: each partition's kernels on no more SMs than
// it has, and on SMs the other's never used.
void printPartitionFlags(const uint32_t* masks, const Partitions& p) {
  uint32_t h[2][kMaskWords];
  CK(cudaMemcpy(h, masks, sizeof h, cudaMemcpyDeviceToHost));
  bool disjoint = true;
  for (int g = 0; g < 2; ++g) {
    unsigned used = 0;
    for (int w = 0; w < kMaskWords; ++w) used += unsigned(__builtin_popcount(h[g][w]));
    print(g == 0 ? "partition_a_within" : "partition_b_within", 0, used <= p.smCount[g] && used > 0);
    if (used > p.smCount[g])
      std::fprintf(stderr, "traps_r21: partition %d: %u SMs used, %u in it\n", g, used, p.smCount[g]);
  }
  for (int w = 0; w < kMaskWords; ++w) disjoint = disjoint && !(h[0][w] & h[1][w]);
  print("partitions_disjoint", 0, disjoint);
}

void greenPartitionRuntime() {
  Partitions p = makePartitions();
  if (!p.ok) return;
  cudaStream_t s = nonBlockingStream();
  auto* ga = reinterpret_cast<cudaStream_t>(p.stream[0]);
  auto* gb = reinterpret_cast<cudaStream_t>(p.stream[1]);
  cudaEvent_t fromMain, doneA, doneB;
  CK(cudaEventCreateWithFlags(&fromMain, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&doneA, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&doneB, cudaEventDisableTiming));
  uint32_t *x = deviceBuffer(211), *a = deviceBuffer(212), *b = deviceBuffer(213);
  uint32_t* masks = zeroedMasks();
  for (int i = 0; i < g_iters; ++i) {
    fold<<<kGrid, kBlock, 0, s>>>(x, a, b, kN, uint32_t(i));
    CK(cudaEventRecord(fromMain, s));
    CK(cudaStreamWaitEvent(ga, fromMain, 0));
    CK(cudaStreamWaitEvent(gb, fromMain, 0));
    smTouch<<<kTouchGrid, kBlock, 0, ga>>>(masks, a, kN, uint32_t(i) * 3u);
    smTouch<<<kTouchGrid, kBlock, 0, ga>>>(masks, a, kN, uint32_t(i) * 3u + 1);
    smTouch<<<kTouchGrid, kBlock, 0, gb>>>(masks + kMaskWords, b, kN, uint32_t(i) * 5u);
    CK(cudaEventRecord(doneA, ga));
    CK(cudaEventRecord(doneB, gb));
    CK(cudaStreamWaitEvent(s, doneA, 0));
    CK(cudaStreamWaitEvent(s, doneB, 0));
    fold<<<kGrid, kBlock, 0, s>>>(x, a, b, kN, uint32_t(i) + 7u);
    CKL();
    checkpoint(i, s, "x", x);
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(x, kN * 4) ^ deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
  printPartitionFlags(masks, p);
  destroyPartitions(p);
}

void greenPartitionCurrent() {
  Partitions p = makePartitions();
  if (!p.ok) return;
  CUcontext asCtx[2] = {};
  for (int g = 0; g < 2; ++g) CKD(cuCtxFromGreenCtx(&asCtx[g], p.green[g]));
  cudaStream_t s = nonBlockingStream();
  cudaEvent_t fromMain, done[2];
  CK(cudaEventCreateWithFlags(&fromMain, cudaEventDisableTiming));
  for (auto& e : done) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  uint32_t *x = deviceBuffer(221), *a = deviceBuffer(222), *b = deviceBuffer(223);
  uint32_t* masks = zeroedMasks();
  uint32_t* data[2] = {a, b};
  for (int i = 0; i < g_iters; ++i) {
    fold<<<kGrid, kBlock, 0, s>>>(x, a, b, kN, uint32_t(i));
    CK(cudaEventRecord(fromMain, s));
    for (int g = 0; g < 2; ++g) {
      CKD(cuCtxPushCurrent(asCtx[g]));
      auto* gs = reinterpret_cast<cudaStream_t>(p.stream[g]);
      CK(cudaStreamWaitEvent(gs, fromMain, 0));
      smTouch<<<kTouchGrid, kBlock, 0, gs>>>(masks + g * kMaskWords, data[g], kN, uint32_t(i) * 3u + g);
      smTouch<<<kTouchGrid, kBlock, 0, gs>>>(masks + g * kMaskWords, data[g], kN, uint32_t(i) * 5u + g);
      CKL();
      CK(cudaEventRecord(done[g], gs));
      CUcontext popped = nullptr;
      CKD(cuCtxPopCurrent(&popped));
    }
    CK(cudaStreamWaitEvent(s, done[0], 0));
    CK(cudaStreamWaitEvent(s, done[1], 0));
    fold<<<kGrid, kBlock, 0, s>>>(x, a, b, kN, uint32_t(i) + 9u);
    CKL();
    checkpoint(i, s, "x", x);
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(x, kN * 4) ^ deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
  printPartitionFlags(masks, p);
  destroyPartitions(p);
}

// Each green context's stream alone, with no primary stream in the loop:
// partition A's kernels launched with the primary context current, B's with
// B pushed; each step's host wait is on B's stream.
void greenPartitionAlone() {
  Partitions p = makePartitions();
  if (!p.ok) return;
  CUcontext b = nullptr;
  CKD(cuCtxFromGreenCtx(&b, p.green[1]));
  auto* ga = reinterpret_cast<cudaStream_t>(p.stream[0]);
  auto* gb = reinterpret_cast<cudaStream_t>(p.stream[1]);
  uint32_t *x = deviceBuffer(231), *y = deviceBuffer(232), *z = deviceBuffer(233);
  uint32_t* masks = zeroedMasks();
  for (int i = 0; i < g_iters; ++i) {
    smTouch<<<kTouchGrid, kBlock, 0, ga>>>(masks, x, kN, uint32_t(i) * 3u);
    fold<<<kGrid, kBlock, 0, ga>>>(y, x, z, kN, uint32_t(i));
    smTouch<<<kTouchGrid, kBlock, 0, ga>>>(masks, y, kN, uint32_t(i) * 3u + 1);
    CKL();
    checkpoint(i, ga, "y", y);
  }
  CK(cudaStreamSynchronize(ga));
  CKD(cuCtxPushCurrent(b));
  for (int i = 0; i < g_iters; ++i) {
    smTouch<<<kTouchGrid, kBlock, 0, gb>>>(masks + kMaskWords, z, kN, uint32_t(i) * 5u);
    fold<<<kGrid, kBlock, 0, gb>>>(z, y, x, kN, uint32_t(i) + 1);
    smTouch<<<kTouchGrid, kBlock, 0, gb>>>(masks + kMaskWords, z, kN, uint32_t(i) * 5u + 1);
    CKL();
    checkpoint(i, gb, "z", z);
  }
  CK(cudaStreamSynchronize(gb));
  CUcontext popped = nullptr;
  CKD(cuCtxPopCurrent(&popped));
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(x, kN * 4) ^ deviceDigest(y, kN * 4) ^ deviceDigest(z, kN * 4));
  printPartitionFlags(masks, p);
  destroyPartitions(p);
}

// A kernel of a module loaded from PTX that reads a texture reference (a
// module global: the pre-CUDA 12 runtime's cudaBindTexture sets it through
// cuTexRefSetAddress), rebound between two buffers on irregular steps
// (salt 21, about one step in 4), and on every step of the last 40. Each
// step launches the kernel twice and a mixing kernel, with a host wait every
// 25 steps; the host mirrors what each launch read. Eagerly a launch reads the binding in effect at its call;
// a tool that holds the launch past the rebinding, or replays a graph made
// under the old binding, reads the other buffer.
const char kTexRefPtx[] = R"(
.version 7.0
.target sm_52
.address_size 64
.global .texref texSource;
.visible .entry texRead(.param .u64 dst, .param .u32 n, .param .u32 v)
{
  .reg .pred %p<2>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [dst];
  ld.param.u32 %r1, [n];
  ld.param.u32 %r2, [v];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mad.lo.s32 %r6, %r3, %r4, %r5;
  setp.ge.s32 %p1, %r6, %r1;
  @%p1 bra DONE;
  tex.1d.v4.u32.s32 {%r7, %r8, %r9, %r10}, [texSource, {%r6}];
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.s32 %rd3, %r6, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.u32 %r11, [%rd4];
  mad.lo.s32 %r11, %r11, 3, %r7;
  add.s32 %r11, %r11, %r2;
  st.global.u32 [%rd4], %r11;
DONE:
  ret;
}
)";

void texrefLoop(bool everyStep) {
  CK(cudaFree(nullptr));
  CUmodule module = nullptr;
  CUfunction read = nullptr;
  CUtexref tex = nullptr;
  const bool ok = cuModuleLoadData(&module, kTexRefPtx) == CUDA_SUCCESS &&
                  cuModuleGetFunction(&read, module, "texRead") == CUDA_SUCCESS &&
                  cuModuleGetTexRef(&tex, module, "texSource") == CUDA_SUCCESS &&
                  cuTexRefSetFormat(tex, CU_AD_FORMAT_UNSIGNED_INT32, 1) == CUDA_SUCCESS &&
                  cuTexRefSetFlags(tex, CU_TRSF_READ_AS_INTEGER) == CUDA_SUCCESS;
  print("texture_reference", ok, 0);
  if (!ok) {
    cudaGetLastError();
    std::printf("SKIP texture references unavailable\n");
    return;
  }
  constexpr int n = kN;
  uint32_t *src[2] = {deviceBuffer(241, n), deviceBuffer(242, n)}, *dst = deviceBuffer(243, n),
           *side = deviceBuffer(244, n);
  std::vector<uint32_t> hsrc[2], hdst(n);
  for (int b = 0; b < 2; ++b) {
    hsrc[b].resize(n);
    CK(cudaMemcpy(hsrc[b].data(), src[b], n * 4, cudaMemcpyDeviceToHost));
  }
  CK(cudaMemcpy(hdst.data(), dst, n * 4, cudaMemcpyDeviceToHost));
  cudaStream_t s = nonBlockingStream();
  int bound = -1;
  for (int i = 0; i < g_iters; ++i) {
    const int want = (everyStep || i >= g_iters - 40) ? (i & 1) : (irregular(i, 21, 4) ? 1 : 0);
    if (want != bound) {
      size_t offset = 0;
      CKD(cuTexRefSetAddress(&offset, tex, reinterpret_cast<CUdeviceptr>(src[want]), n * 4));
      if (offset != 0) {
        std::printf("FAIL step %d: texture offset %zu\n", i, offset);
        std::exit(1);
      }
      bound = want;
    }
    for (int r = 0; r < 2; ++r) {
      int count = n;
      uint32_t v = uint32_t(i) * 2u + uint32_t(r);
      CUdeviceptr d = reinterpret_cast<CUdeviceptr>(dst);
      void* params[] = {&d, &count, &v};
      CKD(cuLaunchKernel(read, kGrid, 1, 1, kBlock, 1, 1, 0, reinterpret_cast<CUstream>(s), params, nullptr));
      for (int k = 0; k < n; ++k) hdst[k] = hdst[k] * 3u + hsrc[bound][k] + v;
    }
    mix<<<kGrid, kBlock, 0, s>>>(side, dst, n, uint32_t(i));
    CKL();
    if (i % 25 == 24) {
      CK(cudaStreamSynchronize(s));
      std::vector<uint32_t> got(n);
      CK(cudaMemcpy(got.data(), dst, n * 4, cudaMemcpyDeviceToHost));
      for (int k = 0; k < n; ++k)
        if (got[k] != hdst[k]) {
          std::printf("FAIL step %d: word %d is %x, the host mirror says %x (bound to %d)\n", i, k, got[k], hdst[k],
                      bound);
          std::exit(1);
        }
      print("dst", i, hostDigest(got.data(), n * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(dst, n * 4) ^ deviceDigest(side, n * 4));
  CKD(cuModuleUnload(module));
}
void texrefRebind() { texrefLoop(false); }
void texrefEveryStep() { texrefLoop(true); }

// The per-thread default stream while a green context is current (its
// converted context pushed): runtime launches into cudaStreamPerThread, the
// per-thread stream's query and synchronize, and a driver launch of the same
// kernel into CU_STREAM_PER_THREAD; every code is digested (cuStreamGetCtx_v2
// refuses the per-thread handle under a green context; whether launches do is
// the driver's to say), with the data, and the partition flag for its kernels.
void greenPerThread() {
  Partitions p = makePartitions();
  if (!p.ok) return;
  CUcontext a = nullptr;
  CKD(cuCtxFromGreenCtx(&a, p.green[0]));
  uint32_t *x = deviceBuffer(251), *y = deviceBuffer(252);
  uint32_t* masks = zeroedMasks();
  CUfunction touch = nullptr;
  CK(cudaGetFuncBySymbol(reinterpret_cast<cudaFunction_t*>(&touch), reinterpret_cast<const void*>(smTouch)));
  Digest codes;
  CKD(cuCtxPushCurrent(a));
  for (int i = 0; i < g_iters; ++i) {
    smTouch<<<kTouchGrid, kBlock, 0, cudaStreamPerThread>>>(masks, x, kN, uint32_t(i));
    const cudaError_t first = cudaGetLastError();
    fold<<<kGrid, kBlock, 0, cudaStreamPerThread>>>(y, x, x, kN, uint32_t(i));
    const cudaError_t second = cudaGetLastError();
    codes.add(uint64_t(first));
    codes.add(uint64_t(second));
    if (i < 2 || first || second)
      std::fprintf(stderr, "green_per_thread step %d: runtime launches %d %d\n", i, int(first), int(second));
    CUdeviceptr m = reinterpret_cast<CUdeviceptr>(masks), d = reinterpret_cast<CUdeviceptr>(x);
    int n = kN;
    uint32_t v = uint32_t(i) + 77u;
    void* params[] = {&m, &d, &n, &v};
    const CUresult driverLaunch =
        cuLaunchKernel(touch, kTouchGrid, 1, 1, kBlock, 1, 1, 0, CU_STREAM_PER_THREAD, params, nullptr);
    codes.add(uint64_t(driverLaunch));
    if (i < 2 || driverLaunch != CUDA_SUCCESS)  // on stderr, which check_traps.py does not compare
      std::fprintf(stderr, "green_per_thread step %d: driver launch %d\n", i, int(driverLaunch));
    if (i % 50 == 49) {
      const cudaError_t q = keep(cudaStreamQuery(cudaStreamPerThread));  // ready or not: timing
      codes.add(uint64_t(q == cudaErrorNotReady ? cudaSuccess : q));
      const cudaError_t sync = keep(cudaStreamSynchronize(cudaStreamPerThread));
      codes.add(uint64_t(sync));
      std::fprintf(stderr, "green_per_thread step %d: query %d, synchronize %d\n", i, int(q), int(sync));
      print("codes", i, codes.h);
    }
  }
  CK(cudaDeviceSynchronize());
  CUcontext popped = nullptr;
  CKD(cuCtxPopCurrent(&popped));
  print("end", 0, deviceDigest(x, kN * 4) ^ deviceDigest(y, kN * 4));
  uint32_t h[kMaskWords];
  CK(cudaMemcpy(h, masks, sizeof h, cudaMemcpyDeviceToHost));
  unsigned used = 0;
  for (uint32_t w : h) used += unsigned(__builtin_popcount(w));
  print("partition_a_within", 0, used <= p.smCount[0]);
  destroyPartitions(p);
}

// --- green_destroy_last_ref

// A kernel of a module loaded from PTX (the driver compiles it), for
// green_destroy_last_ref, which makes no runtime call: x[k] = x[k] * 3 + v.
const char kTriplePtx[] = R"(
.version 7.0
.target sm_52
.address_size 64
.visible .entry triple(.param .u64 x, .param .u32 n, .param .u32 v)
{
  .reg .pred %p<2>;
  .reg .b32 %r<9>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [x];
  ld.param.u32 %r1, [n];
  ld.param.u32 %r2, [v];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mad.lo.s32 %r6, %r3, %r4, %r5;
  setp.ge.s32 %p1, %r6, %r1;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.s32 %rd3, %r6, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.u32 %r7, [%rd4];
  mad.lo.s32 %r8, %r7, 3, %r2;
  st.global.u32 [%rd4], %r8;
DONE:
  ret;
}
)";

// Driver API only (the runtime retains the primary context when it makes its
// own, which would keep it alive): the primary context P retained and made
// current, a loop of launches into its per-thread default stream
// (CU_STREAM_PER_THREAD), checked against a host mirror every 10 steps, for
// a third of the steps; then a green context made (it retains P) and the
// program's own reference released, so that the green context holds the
// last; the loop again with P current; then the buffer and the module freed
// and cuGreenCtxDestroy, which releases P: the primary context ends. The
// primary context retained again (a new one, perhaps under the same handle),
// the module and the buffer made again, and the loop for the remaining steps,
// every code of which is digested. Eagerly every launch succeeds; a tool that
// keeps a stream of its own for the thread's per-thread stream of P, and goes
// on using it after P ended, launches into a destroyed stream.
void greenDestroyLastRef() {
  CKD(cuInit(0));
  CUdevice dev = 0;
  CKD(cuDeviceGet(&dev, 0));
  unsigned flags = 0;
  int active = 0;
  CKD(cuDevicePrimaryCtxGetState(dev, &flags, &active));
  print("primary_active_at_start", active, 0);
  CUcontext primary = nullptr;
  CKD(cuDevicePrimaryCtxRetain(&primary, dev));
  CKD(cuCtxSetCurrent(primary));
  constexpr int n = kN;
  CUmodule module = nullptr;
  CUfunction triple = nullptr;
  CUdeviceptr x = 0;
  std::vector<uint32_t> mirror(n), got(n);
  // The module and the buffer in the current context, the buffer and its
  // mirror set from `seed`.
  auto setUp = [&](uint32_t seed) {
    CKD(cuModuleLoadData(&module, kTriplePtx));
    CKD(cuModuleGetFunction(&triple, module, "triple"));
    CKD(cuMemAlloc(&x, n * 4));
    for (int k = 0; k < n; ++k) mirror[k] = seed * 2654435761u + uint32_t(k) * 40503u;
    CKD(cuMemcpyHtoD(x, mirror.data(), n * 4));
  };
  // Phase C's codes (launches and synchronizes), and how many were not
  // CUDA_SUCCESS.
  Digest codes;
  int failed = 0;
  auto record = [&](CUresult r, int i, const char* what) {
    codes.add(uint64_t(r));
    if (r != CUDA_SUCCESS) {
      if (failed++ < 4)  // on stderr, which check_traps.py does not compare
        std::fprintf(stderr, "green_destroy_last_ref step %d: %s -> %d\n", i, what, int(r));
    }
  };
  // Waits for the per-thread stream and compares the buffer with its mirror
  // (FAIL and exit 1 on a mismatch); prints the mirror's digest if `show`.
  auto check = [&](int i, bool show, bool phaseC) {
    const CUresult sync = cuStreamSynchronize(CU_STREAM_PER_THREAD);
    if (phaseC)
      record(sync, i, "cuStreamSynchronize");
    else
      CKD(sync);
    CKD(cuMemcpyDtoH(got.data(), x, n * 4));
    for (int k = 0; k < n; ++k)
      if (got[k] != mirror[k]) {
        std::printf("FAIL step %d: word %d is %x, the host mirror says %x (%d codes not CUDA_SUCCESS)\n", i, k,
                    got[k], mirror[k], failed);
        std::exit(1);
      }
    if (show) print("x", i, hostDigest(mirror.data(), n * 4));
  };
  // Steps [from, to): 4 launches each into the per-thread stream; a check
  // every 10 steps, a printed digest every 25, and a check at the end.
  auto loop = [&](int from, int to, bool phaseC) {
    for (int i = from; i < to; ++i) {
      for (int r = 0; r < 4; ++r) {
        int count = n;
        uint32_t v = uint32_t(i) + uint32_t(r);
        void* params[] = {&x, &count, &v};
        const CUresult launch =
            cuLaunchKernel(triple, kGrid, 1, 1, kBlock, 1, 1, 0, CU_STREAM_PER_THREAD, params, nullptr);
        if (phaseC)
          record(launch, i, "cuLaunchKernel");
        else
          CKD(launch);
        for (int k = 0; k < n; ++k) mirror[k] = mirror[k] * 3u + v;
      }
      if (i % 10 == 9 || i % 25 == 24) check(i, i % 25 == 24, phaseC);
    }
    check(to - 1, false, phaseC);
  };
  const int third = g_iters / 3;
  setUp(261);
  loop(0, third, false);

  // The green context: one group of at least 16 SMs of the device's.
  CUdevResource all = {}, part = {}, rest = {};
  unsigned groups = 1;
  CUdevResourceDesc desc = nullptr;
  CUgreenCtx green = nullptr;
  const bool ok = cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM) == CUDA_SUCCESS &&
                  cuDevSmResourceSplitByCount(&part, &groups, &all, &rest, 0, 16) == CUDA_SUCCESS && groups >= 1 &&
                  cuDevResourceGenerateDesc(&desc, &part, 1) == CUDA_SUCCESS &&
                  cuGreenCtxCreate(&green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM) == CUDA_SUCCESS;
  print("green_contexts", ok, 0);
  if (!ok) {
    std::printf("SKIP green contexts unavailable\n");
    CKD(cuMemFree(x));
    CKD(cuModuleUnload(module));
    CKD(cuCtxSetCurrent(nullptr));
    CKD(cuDevicePrimaryCtxRelease(dev));
    return;
  }
  CKD(cuDevicePrimaryCtxRelease(dev));  // the green context holds the last reference
  CKD(cuDevicePrimaryCtxGetState(dev, &flags, &active));
  print("primary_active_after_release", active, 0);

  loop(third, 2 * third, false);  // P still current, and alive
  CKD(cuMemFree(x));
  CKD(cuModuleUnload(module));
  const CUresult destroyed = cuGreenCtxDestroy(green);
  print("green_ctx_destroy", int(destroyed), 0);
  CKD(cuDevicePrimaryCtxGetState(dev, &flags, &active));
  print("primary_active_after_destroy", active, 0);  // 0: the primary context ended

  CUcontext again = nullptr;
  CKD(cuDevicePrimaryCtxRetain(&again, dev));
  CKD(cuCtxSetCurrent(again));
  // (on stderr: whether the driver reuses the handle is its own business)
  std::fprintf(stderr, "green_destroy_last_ref: the primary context retained again has the old handle: %d\n",
               int(again == primary));
  setUp(262);
  loop(2 * third, g_iters, true);
  print("launch_codes", failed, codes.h);
  print("end", 0, hostDigest(mirror.data(), n * 4));
  CKD(cuMemFree(x));
  CKD(cuModuleUnload(module));
  CKD(cuCtxSetCurrent(nullptr));
  CKD(cuDevicePrimaryCtxRelease(dev));
}

const Scenario kScenarios[] = {
    {"green_partition_runtime", greenPartitionRuntime},
    {"green_partition_current", greenPartitionCurrent},
    {"green_partition_alone", greenPartitionAlone},
    {"green_per_thread", greenPerThread},
    {"texref_rebind", texrefRebind},
    {"texref_every_step", texrefEveryStep},
    {"green_destroy_last_ref", greenDestroyLastRef},
};

}  // namespace

int main(int argc, char** argv) { return runScenarios(argc, argv, kScenarios); }
