// traps_more: more odd but legal CUDA C++ patterns in the style of traps.cu
// (trap_common.cuh): timing events, function attributes and device limits
// changed between launches (calls graft does not intercept), CUDA arrays with
// surface and texture objects, pageable copies, the program's own graphs with
// conditional nodes and device-side graph launches, captures in every mode,
// host memory that comes and goes, stream priorities, cluster shapes, managed
// memory attachment, __device__ symbols, and 32 streams at once. Each
// scenario is deterministic in eager and prints digests of its buffers (and,
// for timings, only whether a call succeeded and the value's sign or bound);
// check_traps.py requires the same output under graft. Built with
// relocatable device code (-rdc=true -lcudadevrt) for the device-side graph
// launches. Not linked to libcuda: the driver functions it calls come from
// cudaGetDriverEntryPointByVersion (through cuGetProcAddress, as the
// runtime's own do), so it lists its scenarios, and says there is no device,
// on a machine without a driver.
//
//   traps_more NAME [--iters N]    one scenario (see kScenarios)
//   traps_more --list              the scenario names

#include <cooperative_groups.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "trap_common.cuh"

namespace cg = cooperative_groups;

namespace {

// ---------------------------------------------------------------- kernels

// Spins about `cycles` clock cycles, then adds.
__global__ void slowAdd(uint32_t* dst, int n, uint32_t v, long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 1) + v + uint32_t(k);
}

__global__ void addFrom(uint32_t* dst, const uint32_t* src, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 9) + src[k] + salt;
}

// dst[k] mixes with small[k % m]: small buffers (a few hundred words).
__global__ void addSmall(uint32_t* dst, const uint32_t* small, int n, int m, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 11) ^ (small[k % m] * 2246822519u + salt);
}

// A big buffer mixed with a small one.
__global__ void spread(uint32_t* big, const uint32_t* src, int nBig, int nSrc, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < nBig) big[k] = rotl(big[k], 3) ^ (src[(k * 13) % nSrc] + salt);
}

// Dynamic shared memory of `words` words, all of it written and read.
// Template copies are separate functions with separate attributes.
template <int V>
__global__ void smemMix(uint32_t* dst, const uint32_t* src, int n, uint32_t salt, int words) {
  extern __shared__ uint32_t sm[];
  for (int w = threadIdx.x; w < words; w += blockDim.x)
    sm[w] = src[(blockIdx.x * 977 + w * 13) % n] ^ (salt + uint32_t(w) * uint32_t(V));
  __syncthreads();
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 5) ^ (sm[(threadIdx.x * 97u + salt) % unsigned(words)] + sm[words - 1 - threadIdx.x]);
}

// A kernel that uses printf (it never prints: `never` is never that value),
// so the printf FIFO size may no longer be set once it was launched.
__global__ void withPrintf(uint32_t* dst, int n, uint32_t salt, int never) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 1) + salt;
  if (never == 0x7fffffff && k == 0) printf("traps: never printed %u\n", dst[0]);
}

// Device-side malloc and free: a scratch block per thread block.
__global__ void withMalloc(uint32_t* dst, const uint32_t* src, int n, uint32_t salt, uint32_t* failures) {
  __shared__ uint32_t* scratch;
  if (threadIdx.x == 0) {
    scratch = static_cast<uint32_t*>(malloc(2 * blockDim.x * sizeof(uint32_t)));
    if (!scratch) atomicAdd(failures, 1u);
  }
  __syncthreads();
  if (!scratch) return;
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  scratch[threadIdx.x] = k < n ? src[(k * 7 + 3) % n] ^ salt : 0u;
  scratch[blockDim.x + threadIdx.x] = k < n ? dst[k] : 0u;
  __syncthreads();
  if (k < n) dst[k] = rotl(scratch[blockDim.x + threadIdx.x], 7) + scratch[(threadIdx.x + 5) % blockDim.x];
  __syncthreads();
  if (threadIdx.x == 0) free(scratch);
}

// A per-thread array indexed by data: 1.5 KiB of local memory (stack) per
// thread, more than the default stack size, so the driver grows the stack at
// launch.
__global__ void deepStack(uint32_t* dst, const uint32_t* src, int n, uint32_t salt) {
  uint32_t loc[384];
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= n) return;
  for (int j = 0; j < 384; ++j) loc[j] = src[(k + j * 31) % n] ^ (salt + uint32_t(j));
  uint32_t acc = dst[k];
  for (int j = 0; j < 48; ++j) acc = rotl(acc, 3) + loc[(acc + uint32_t(j) * 7u) % 384u];
  dst[k] = acc;
}

// CUDA arrays of kW x kH words, through surface and texture objects.
constexpr int kW = 128, kH = 128;
static_assert(kW * kH == kN, "one array holds one buffer");
__global__ void surfaceMix(cudaSurfaceObject_t in, cudaSurfaceObject_t out, const uint32_t* a, uint32_t salt) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x >= kW || y >= kH) return;
  const uint32_t v = surf2Dread<uint32_t>(in, x * 4, y);
  const uint32_t u = surf2Dread<uint32_t>(in, ((x + 7) % kW) * 4, (y + 3) % kH);
  surf2Dwrite(rotl(v, 3) ^ (u + a[((y * kW + x) * 5) % kN] + salt), out, x * 4, y);
}
__global__ void textureFold(uint32_t* a, cudaTextureObject_t t, uint32_t salt) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x >= kW || y >= kH) return;
  const uint32_t v = tex2D<uint32_t>(t, float((x + 1) % kW) + 0.5f, float(y) + 0.5f);
  a[y * kW + x] = rotl(a[y * kW + x], 1) + v + salt;
}

// Conditional nodes: one thread picks the IF branch and the WHILE count from
// the data; the loop body counts down and says whether to go on.
__global__ void decideBranches(const uint32_t* a, uint32_t* counter, cudaGraphConditionalHandle hIf,
                               cudaGraphConditionalHandle hWhile, int n) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const uint32_t v = a[(counter[1] * 7u + 13u) % uint32_t(n)];
    cudaGraphSetConditional(hIf, v & 1u);
    counter[0] = (v >> 1) % 4u;
    cudaGraphSetConditional(hWhile, counter[0] > 0 ? 1u : 0u);
  }
}
__global__ void loopTail(uint32_t* counter, cudaGraphConditionalHandle hWhile) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const uint32_t left = --counter[0];
    counter[1] += 1;
    cudaGraphSetConditional(hWhile, left > 0 ? 1u : 0u);
  }
}
__global__ void mixCounted(uint32_t* dst, const uint32_t* src, const uint32_t* counter, int n) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 4) ^ (src[(k * 3 + 5) % n] + counter[0] * 977u + counter[1]);
}

// Device graph launch: the device graph's kernel, and the kernel (itself in
// a graph, as device launches require) that launches it in one of the three
// device launch modes, chosen by a word in device memory.
__global__ void dgWork(uint32_t* dst, const uint32_t* src, const uint32_t* salt, int n, uint32_t k2) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 3) ^ (src[(k * 11 + 3) % n] + salt[0] + k2 + uint32_t(k));
}
__global__ void graphLauncher(cudaGraphExec_t g, const uint32_t* mode, uint32_t* err) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const uint32_t m = mode[0] & 3u;
    cudaStream_t where = m == 0   ? cudaStreamGraphFireAndForget
                         : m == 1 ? cudaStreamGraphTailLaunch
                                  : cudaStreamGraphFireAndForgetAsSibling;
    const cudaError_t e = cudaGraphLaunch(g, where);
    err[0] = err[0] * 31u + uint32_t(e) + 1u;
  }
}

// Reads host-mapped memory (any pointer a kernel may use).
__global__ void readHost(uint32_t* dst, const uint32_t* host, int n, int m) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 1) + host[k % m];
}
// Writes `words` words of host memory through the pointer it is given.
__global__ void writeHost(uint32_t* host, const uint32_t* src, int words, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < words) host[k] = rotl(src[(k * 29 + 7) % kN], 3) ^ (salt + uint32_t(k));
}

// Each block reads its right-hand neighbour's shared memory in its cluster,
// whatever the cluster's shape (1-D or 2-D, one block or sixteen), and
// folds the cluster's size and its own rank into the result.
__global__ void clusterRing(uint32_t* dst, const uint32_t* src, int n, uint32_t salt) {
  cg::cluster_group cluster = cg::this_cluster();
  __shared__ uint32_t sh[kBlock];
  const int block = blockIdx.y * gridDim.x + blockIdx.x;
  const int k = block * blockDim.x + threadIdx.x;
  sh[threadIdx.x] = (k < n ? src[k] : 0u) + salt;
  cluster.sync();
  const unsigned rank = cluster.block_rank(), size = cluster.num_blocks();
  const uint32_t* peer = cluster.map_shared_rank(sh, (rank + 1) % size);
  const uint32_t v = peer[(threadIdx.x + 3) % blockDim.x];
  cluster.sync();
  if (k < n) dst[k] = rotl(dst[k], 6) ^ (v + size * 977u + rank * 131u);
}

__device__ uint32_t g_table[256];
__device__ uint32_t g_acc[kN];
// Reads the table by its symbol and writes the accumulator through the
// pointer the host got from cudaGetSymbolAddress.
__global__ void tableMix(uint32_t* acc, const uint32_t* src, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) acc[k] = rotl(acc[k], 7) ^ (g_table[(k + salt) % 256] + src[(k * 3 + 1) % n]);
}

// One slice of a buffer: [off, off + len).
__global__ void sliceMix(uint32_t* dst, const uint32_t* src, int n, int off, int len, uint32_t salt) {
  const int k = off + blockIdx.x * blockDim.x + threadIdx.x;
  if (k < off + len) dst[k] = rotl(dst[k], 3) ^ (src[(k * 7 + 4099) % n] + salt);
}


// Loads a kernel now (cudaFuncGetAttributes does, under lazy loading), so
// that its first use inside a capture loads nothing.
template <typename F>
void preload(F* kernel) {
  cudaFuncAttributes attr;
  CK(cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(kernel)));
}

// A driver function through the runtime's entry-point lookup (the program
// is not linked to libcuda).
template <typename Fn>
Fn driverFunction(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  CK(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || !fn) {
    std::fprintf(stderr, "traps: driver function %s not found\n", name);
    std::exit(1);
  }
  return reinterpret_cast<Fn>(fn);
}
#define CKU(call)                                                                  \
  do {                                                                             \
    const CUresult r_ = (call);                                                    \
    if (r_ != CUDA_SUCCESS) {                                                      \
      std::fprintf(stderr, "traps: %s:%d: %s -> CUresult %d\n", __FILE__, __LINE__, #call, int(r_)); \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

cudaStream_t blockingStream() {
  cudaStream_t s = nullptr;
  CK(cudaStreamCreate(&s));
  return s;
}

// ---------------------------------------------------------------- scenarios

// Timing events recorded in the middle of every step, around a kernel that
// spins a known number of cycles; every tenth step the host waits on a
// blocking-sync event and reads elapsed times: forward (at least the spin at
// the peak clock, halved), backward (negative), across streams (not
// negative), and against an event without timing (refused). A replay that
// records a timing event before the work graft holds in front of it measures
// nothing. Only success, sign and bound are printed.
void elapsedTime() {
  cudaStream_t s = nonBlockingStream(), u = nonBlockingStream();
  cudaEvent_t t0, t1, t2, tb, nt;
  CK(cudaEventCreate(&t0));
  CK(cudaEventCreate(&t1));
  CK(cudaEventCreate(&t2));
  CK(cudaEventCreateWithFlags(&tb, cudaEventBlockingSync));
  CK(cudaEventCreateWithFlags(&nt, cudaEventDisableTiming));
  int clockKHz = 0;
  CK(cudaDeviceGetAttribute(&clockKHz, cudaDevAttrClockRate, currentDevice()));
  constexpr long long kCycles = 1000000;
  const double minMs = clockKHz > 0 ? 0.5 * double(kCycles) / double(clockKHz) : 0.0;
  uint32_t *a = deviceBuffer(301), *b = deviceBuffer(302), *c = deviceBuffer(303);
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i));
    CK(cudaEventRecord(t0, s));
    slowAdd<<<kGrid, kBlock, 0, s>>>(a, kN, uint32_t(i), kCycles);
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, uint32_t(i) + 1);
    CK(cudaEventRecordWithFlags(t1, s, cudaEventRecordDefault));
    CK(cudaStreamWaitEvent(u, t1, 0));
    mix<<<kGrid, kBlock, 0, u>>>(c, b, kN, uint32_t(i) + 2);
    CK(cudaEventRecord(t2, u));
    CK(cudaEventRecord(nt, u));
    mix<<<kGrid, kBlock, 0, u>>>(c, a, kN, uint32_t(i) + 3);
    CK(cudaEventRecord(tb, u));
    CK(cudaStreamWaitEvent(s, tb, 0));
    mix<<<kGrid, kBlock, 0, s>>>(a, c, kN, uint32_t(i) + 4);
    CKL();
    if (i % 10 == 9) {
      CK(cudaEventSynchronize(tb));  // t0, t1, t2 and nt completed before it
      float fwd = -1, back = 1, across = -1, whole = -1, none = 0;
      const cudaError_t eFwd = cudaEventElapsedTime(&fwd, t0, t1);
      const cudaError_t eBack = cudaEventElapsedTime(&back, t1, t0);
      const cudaError_t eAcross = cudaEventElapsedTime(&across, t1, t2);
      const cudaError_t eWhole = cudaEventElapsedTime(&whole, t0, tb);
      const cudaError_t eNone = cudaEventElapsedTime(&none, t0, nt);
      cudaGetLastError();  // eNone is an error on purpose
      const bool okFwd = eFwd == cudaSuccess && std::isfinite(fwd) && fwd >= minMs;
      const bool okBack = eBack == cudaSuccess && std::isfinite(back) && back <= -minMs;
      const bool okAcross = eAcross == cudaSuccess && std::isfinite(across) && across >= 0;
      const bool okWhole = eWhole == cudaSuccess && std::isfinite(whole) && whole >= fwd;
      print("elapsed", i,
            uint64_t(okFwd) | uint64_t(okBack) << 1 | uint64_t(okAcross) << 2 | uint64_t(okWhole) << 3 |
                uint64_t(eNone) << 8);
    }
    checkpoint(i, s, "a", a);
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4));
}

// cudaFuncSetAttribute (not a stream op; graft does not see it) changes a
// kernel's dynamic shared memory limit between its launches every step: a
// launch with 100 KiB while the limit allows it, then the limit back to
// 48 KiB and a launch with 40 KiB; every fifth step one more launch with
// 64 KiB, which eagerly fails at the call (a held launch must not succeed
// there, and a launch graft issues later must not meet the lowered limit).
// A second kernel's cache preference and carveout change every step while
// its launches alternate between 64 and 160 KiB.
void funcAttributes() {
  cudaStream_t s = nonBlockingStream();
  constexpr int kBig = 100 * 1024, kSmall = 40 * 1024, kMid = 64 * 1024, kHuge = 160 * 1024, kDefault = 48 * 1024;
  int optin = 0;
  CK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, currentDevice()));
  if (optin < kHuge) {
    print("no 160 KiB of shared memory per block here", 0, uint64_t(optin));
    return;
  }
  uint32_t *a = deviceBuffer(311), *b = deviceBuffer(312), *c = deviceBuffer(313);
  CK(cudaFuncSetAttribute(smemMix<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, kHuge));
  Digest errors;
  for (int i = 0; i < g_iters; ++i) {
    CK(cudaFuncSetAttribute(smemMix<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, kBig));
    smemMix<1><<<kGrid, kBlock, kBig, s>>>(b, a, kN, uint32_t(i), kBig / 4);
    CKL();
    CK(cudaFuncSetAttribute(smemMix<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, kDefault));
    smemMix<1><<<kGrid, kBlock, kSmall, s>>>(a, b, kN, uint32_t(i) + 1, kSmall / 4);
    CKL();
    if (i % 5 == 4) {
      smemMix<1><<<kGrid, kBlock, kMid, s>>>(a, c, kN, uint32_t(i) + 2, kMid / 4);  // over the limit now
      errors.add(uint64_t(cudaGetLastError()));
    }
    CK(cudaFuncSetCacheConfig(smemMix<2>, i % 2 ? cudaFuncCachePreferShared : cudaFuncCachePreferL1));
    CK(cudaFuncSetAttribute(smemMix<2>, cudaFuncAttributePreferredSharedMemoryCarveout, (i % 3) * 50));
    const int bytes = i % 2 ? kHuge : kMid;
    smemMix<2><<<kGrid, kBlock, bytes, s>>>(c, a, kN, uint32_t(i) + 3, bytes / 4);
    mix<<<kGrid, kBlock, 0, s>>>(a, c, kN, uint32_t(i) + 4);
    CKL();
    if (checkpoint(i, s, "a", a)) print("errors", i, errors.h);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4) ^ errors.h);
}

// Device limits set in the middle of the loop (cudaDeviceSetLimit reaches
// the driver without graft): the printf FIFO and the malloc heap may be set
// only until a kernel that uses printf or malloc was launched, so setting
// them right after the first such launch fails eagerly (the launch has
// reached the driver when its call returns); the stack size is lowered every
// tenth step right before a kernel that needs more, and read back after its
// launch (the driver grows the stack at launch). Device-side malloc and free
// run every step once started.
void deviceLimits() {
  cudaStream_t s = nonBlockingStream();
  uint32_t *a = deviceBuffer(321), *b = deviceBuffer(322), *failures = deviceBuffer(323, 1);
  CK(cudaMemset(failures, 0, 4));
  auto setLimit = [](cudaLimit l, size_t v) {
    const cudaError_t e = cudaDeviceSetLimit(l, v);
    cudaGetLastError();  // a refusal is expected: it must not reach CKL below
    return uint64_t(e);
  };
  auto getLimit = [](cudaLimit l) {
    size_t v = 0;
    CK(cudaDeviceGetLimit(&v, l));
    return uint64_t(v);
  };
  print("set_fifo", 0, setLimit(cudaLimitPrintfFifoSize, size_t(2) << 20));
  print("set_heap", 0, setLimit(cudaLimitMallocHeapSize, size_t(16) << 20));
  const int firstPrintf = g_iters / 3, firstMalloc = g_iters / 2;
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i));
    deepStack<<<kGrid, kBlock, 0, s>>>(b, a, kN, uint32_t(i));
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, uint32_t(i) + 1);
    if (i >= firstPrintf) withPrintf<<<kGrid, kBlock, 0, s>>>(b, kN, uint32_t(i), 0);
    if (i == firstPrintf) {
      print("set_fifo_after_launch", i, setLimit(cudaLimitPrintfFifoSize, size_t(4) << 20));
      print("fifo", i, getLimit(cudaLimitPrintfFifoSize));
    }
    if (i >= firstMalloc) withMalloc<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i), failures);
    if (i == firstMalloc) {
      print("set_heap_after_launch", i, setLimit(cudaLimitMallocHeapSize, size_t(32) << 20));
      print("heap", i, getLimit(cudaLimitMallocHeapSize));
    }
    if (i % 10 == 5) {
      print("set_stack", i, setLimit(cudaLimitStackSize, 1024));
      deepStack<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i) + 2);
      print("stack_after_launch", i, getLimit(cudaLimitStackSize));
    }
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i) + 3);
    CKL();
    checkpoint(i, s, "a", a);
  }
  CK(cudaStreamSynchronize(s));
  print("malloc_failures", 0, deviceDigest(failures, 4));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

// CUDA arrays: each step copies a buffer into an array (2-D, device to
// array) and sometimes a patch from pinned host memory into it, a kernel
// reads it through one surface object and writes another array through a
// second, the next kernel reads that array through a texture object, and the
// array is copied back into linear memory (array to device). Every 50 steps
// the output array changes and both objects are made anew (the driver may
// hand back the same handles); every 25 steps a synchronous array-to-array
// copy puts part of the last output into the input array.
void surfaceArray() {
  cudaStream_t s = nonBlockingStream();
  const cudaChannelFormatDesc desc = cudaCreateChannelDesc<uint32_t>();
  uint32_t *a = deviceBuffer(331), *lin = deviceBuffer(332);
  cudaArray_t arr[3];
  for (int j = 0; j < 3; ++j) {
    CK(cudaMallocArray(&arr[j], &desc, kW, kH, cudaArraySurfaceLoadStore));
    uint32_t* init = deviceBuffer(333 + j);
    CK(cudaMemcpy2DToArray(arr[j], 0, 0, init, kW * 4, kW * 4, kH, cudaMemcpyDeviceToDevice));
  }
  uint32_t* host = nullptr;
  CK(cudaMallocHost(&host, 64 * 8 * 4));
  for (int k = 0; k < 64 * 8; ++k) host[k] = uint32_t(k) * 2654435761u;
  CK(cudaDeviceSynchronize());
  auto resourceOf = [](cudaArray_t x) {
    cudaResourceDesc rd = {};
    rd.resType = cudaResourceTypeArray;
    rd.res.array.array = x;
    return rd;
  };
  auto surfaceOf = [&](cudaArray_t x) {
    const cudaResourceDesc rd = resourceOf(x);
    cudaSurfaceObject_t so = 0;
    CK(cudaCreateSurfaceObject(&so, &rd));
    return so;
  };
  auto textureOf = [&](cudaArray_t x) {
    const cudaResourceDesc rd = resourceOf(x);
    cudaTextureDesc td = {};
    td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp;
    td.filterMode = cudaFilterModePoint;
    td.readMode = cudaReadModeElementType;
    td.normalizedCoords = 0;
    cudaTextureObject_t to = 0;
    CK(cudaCreateTextureObject(&to, &rd, &td, nullptr));
    return to;
  };
  int cur = 1;
  const cudaSurfaceObject_t sIn = surfaceOf(arr[0]);
  cudaSurfaceObject_t sOut = surfaceOf(arr[cur]);
  cudaTextureObject_t tOut = textureOf(arr[cur]);
  const dim3 grid(kW / kBlock, kH);
  for (int i = 0; i < g_iters; ++i) {
    CK(cudaMemcpy2DToArrayAsync(arr[0], 0, 0, lin, kW * 4, kW * 4, kH, cudaMemcpyDeviceToDevice, s));
    if (i % 7 == 3)
      CK(cudaMemcpy2DToArrayAsync(arr[0], (i % 4) * 16 * 4, (i % 5) * 8, host, 64 * 4, 64 * 4, 8,
                                  cudaMemcpyHostToDevice, s));
    if (i % 25 == 12) {
      // The legacy stream does not wait for s (non-blocking): synchronize
      // around the synchronous copy.
      CK(cudaStreamSynchronize(s));
      CK(cudaMemcpy2DArrayToArray(arr[0], 32 * 4, 16, arr[cur], 0, 0, 64 * 4, 32, cudaMemcpyDeviceToDevice));
      CK(cudaDeviceSynchronize());
    }
    surfaceMix<<<grid, kBlock, 0, s>>>(sIn, sOut, a, uint32_t(i));
    textureFold<<<grid, kBlock, 0, s>>>(a, tOut, uint32_t(i));
    CK(cudaMemcpy2DFromArrayAsync(lin, kW * 4, arr[cur], 0, 0, kW * 4, kH, cudaMemcpyDeviceToDevice, s));
    mix<<<kGrid, kBlock, 0, s>>>(lin, a, kN, uint32_t(i));
    CKL();
    if (i % 50 == 25) {
      CK(cudaStreamSynchronize(s));
      CK(cudaDestroySurfaceObject(sOut));
      CK(cudaDestroyTextureObject(tOut));
      cur = 3 - cur;
      sOut = surfaceOf(arr[cur]);
      tOut = textureOf(arr[cur]);
    }
    if (checkpoint(i, s, "a", a)) print("lin", i, deviceDigest(lin, kN * 4));
  }
  CK(cudaStreamSynchronize(s));
  print("end", cur, deviceDigest(a, kN * 4) ^ deviceDigest(lin, kN * 4));
  CK(cudaDestroySurfaceObject(sIn));
  CK(cudaDestroySurfaceObject(sOut));
  CK(cudaDestroyTextureObject(tOut));
  for (cudaArray_t x : arr) CK(cudaFreeArray(x));
  CK(cudaFreeHost(host));
}

// Pageable (not pinned) host memory. A host-to-device copy from pageable
// memory has read its source when the call returns, so the host overwrites
// the source at once, and a temporary vector is freed right after its copy;
// a device-to-pageable copy has completed when the call returns, so the host
// reads the result with no synchronize at all (1 KiB every step, 1 MiB every
// tenth step) and computes the next step's input from it. Also a 2-D copy
// from pageable memory and a host-to-host copy. A copy graft held, or
// issued later, would read overwritten or freed memory, or leave the host
// reading stale results.
void pageableCopies() {
  cudaStream_t s = nonBlockingStream();
  constexpr int kBigWords = 1 << 18;  // 1 MiB
  std::vector<uint32_t> in(kN), out(256), hostCopy(256), bigOut(kBigWords), plane(64 * 32);
  uint32_t *a = deviceBuffer(341), *b = deviceBuffer(342), *din = deviceBuffer(343), *dtmp = deviceBuffer(344, 512);
  uint32_t *big = deviceBuffer(345, kBigWords), *pitched = deviceBuffer(346);
  Digest d;
  uint32_t state = 1;
  for (int i = 0; i < g_iters; ++i) {
    for (int k = 0; k < kN; ++k) in[k] = state * 2654435761u + uint32_t(k) * 97u + uint32_t(i);
    CK(cudaMemcpyAsync(din, in.data(), kN * 4, cudaMemcpyHostToDevice, s));
    std::fill(in.begin(), in.end(), 0xdeadbeefu);  // staged at the call: the copy must not see this
    {
      std::vector<uint32_t> tmp(512, state ^ uint32_t(i) * 40503u);
      CK(cudaMemcpyAsync(dtmp, tmp.data(), 512 * 4, cudaMemcpyDefault, s));
    }  // freed here, before the GPU reaches the copy's position
    addFrom<<<kGrid, kBlock, 0, s>>>(a, din, kN, uint32_t(i));
    addSmall<<<kGrid, kBlock, 0, s>>>(a, dtmp, kN, 512, uint32_t(i));
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, uint32_t(i));
    spread<<<kBigWords / kBlock, kBlock, 0, s>>>(big, b, kBigWords, kN, uint32_t(i));
    if (i % 4 == 0) {
      for (int k = 0; k < 64 * 32; ++k) plane[k] = uint32_t(k) * 7u + uint32_t(i) + state;
      CK(cudaMemcpy2DAsync(pitched + (i % 3) * 8, 512, plane.data(), 64 * 4, 64 * 4, 32, cudaMemcpyHostToDevice, s));
      std::fill(plane.begin(), plane.end(), 0u);
      addFrom<<<kGrid, kBlock, 0, s>>>(b, pitched, kN, uint32_t(i));
    }
    CK(cudaMemcpyAsync(out.data(), b + (i % 64) * 256, 1024, cudaMemcpyDeviceToHost, s));
    d.add(out.data(), 1024);  // no synchronize: the copy to pageable memory has completed
    state = out[i % 256] | 1u;
    if (i % 10 == 9) {
      CK(cudaMemcpyAsync(bigOut.data(), big, kBigWords * 4, cudaMemcpyDeviceToHost, s));
      d.add(bigOut.data(), kBigWords * 4);
    }
    if (i % 5 == 0) {
      CK(cudaMemcpyAsync(hostCopy.data(), out.data(), 1024, cudaMemcpyHostToHost, s));
      d.add(hostCopy.data(), 1024);
    }
    CKL();
    if (i % 100 == 99) print("reads", i, d.h);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, d.h ^ deviceDigest(a, kN * 4) ^ deviceDigest(big, kBigWords * 4) ^ deviceDigest(pitched, kN * 4));
}

// The program's own graph with conditional nodes, launched every step
// between eager kernels: a kernel sets an IF node's condition (two branches,
// the else branch captured into its body graph with
// cudaStreamBeginCaptureToGraph) and a WHILE node's loop count from the
// data, the loop body counts down. The last kernel node's salt is set on the
// executable graph before every launch (cudaGraphExecKernelNodeSetParams,
// which graft does not intercept). Every 100 steps the graph is built anew
// (with another capture) while another stream keeps working.
void graphConditional() {
  cudaStream_t s = nonBlockingStream(), u = nonBlockingStream(), cs = nonBlockingStream();
  uint32_t *a = deviceBuffer(351), *b = deviceBuffer(352), *c = deviceBuffer(353), *counter = deviceBuffer(354, 2);
  uint32_t *e = deviceBuffer(355), *f = deviceBuffer(356);
  CK(cudaMemset(counter, 0, 8));
  int n = kN;
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaGraphNode_t fold = nullptr;
  auto kernelParams = [](void* func, dim3 grid, void** args) {
    cudaKernelNodeParams p = {};
    p.func = func;
    p.gridDim = grid;
    p.blockDim = dim3(kBlock);
    p.sharedMemBytes = 0;
    p.kernelParams = args;
    p.extra = nullptr;
    return p;
  };
  auto kernelNode = [&](cudaGraph_t in, const cudaGraphNode_t* deps, size_t nDeps, void* func, dim3 grid,
                        void** args) {
    const cudaKernelNodeParams p = kernelParams(func, grid, args);
    cudaGraphNode_t node = nullptr;
    CK(cudaGraphAddKernelNode(&node, in, deps, nDeps, &p));
    return node;
  };
  auto build = [&](uint32_t round) {
    CK(cudaGraphCreate(&g, 0));
    cudaGraphConditionalHandle hIf = 0, hWhile = 0;
    CK(cudaGraphConditionalHandleCreate(&hIf, g, 0, cudaGraphCondAssignDefault));
    CK(cudaGraphConditionalHandleCreate(&hWhile, g, 0, cudaGraphCondAssignDefault));
    void* decideArgs[] = {&a, &counter, &hIf, &hWhile, &n};
    cudaGraphNode_t decide = kernelNode(g, nullptr, 0, reinterpret_cast<void*>(decideBranches), dim3(1), decideArgs);

    cudaGraphNodeParams ifp = {};
    ifp.type = cudaGraphNodeTypeConditional;
    ifp.conditional.handle = hIf;
    ifp.conditional.type = cudaGraphCondTypeIf;
    ifp.conditional.size = 2;
    cudaGraphNode_t ifNode = nullptr;
    CK(cudaGraphAddNode(&ifNode, g, &decide, nullptr, 1, &ifp));
    uint32_t thenSalt = 11 + round;
    void* thenArgs[] = {&b, &a, &n, &thenSalt};
    kernelNode(ifp.conditional.phGraph_out[0], nullptr, 0, reinterpret_cast<void*>(mix), dim3(kGrid), thenArgs);
    CK(cudaStreamBeginCaptureToGraph(cs, ifp.conditional.phGraph_out[1], nullptr, nullptr, 0,
                                     cudaStreamCaptureModeThreadLocal));
    mix<<<kGrid, kBlock, 0, cs>>>(b, a, kN, 22 + round);
    mix<<<kGrid, kBlock, 0, cs>>>(b, c, kN, 33 + round);
    cudaGraph_t captured = nullptr;
    CK(cudaStreamEndCapture(cs, &captured));  // the else body itself, owned by the node
    CKL();

    cudaGraphNodeParams wp = {};
    wp.type = cudaGraphNodeTypeConditional;
    wp.conditional.handle = hWhile;
    wp.conditional.type = cudaGraphCondTypeWhile;
    wp.conditional.size = 1;
    cudaGraphNode_t whileNode = nullptr;
    CK(cudaGraphAddNode(&whileNode, g, &ifNode, nullptr, 1, &wp));
    void* bodyArgs[] = {&a, &b, &counter, &n};
    cudaGraphNode_t body =
        kernelNode(wp.conditional.phGraph_out[0], nullptr, 0, reinterpret_cast<void*>(mixCounted), dim3(kGrid), bodyArgs);
    void* tailArgs[] = {&counter, &hWhile};
    kernelNode(wp.conditional.phGraph_out[0], &body, 1, reinterpret_cast<void*>(loopTail), dim3(1), tailArgs);

    uint32_t foldSalt = 0;
    void* foldArgs[] = {&c, &a, &n, &foldSalt};
    fold = kernelNode(g, &whileNode, 1, reinterpret_cast<void*>(mix), dim3(kGrid), foldArgs);
    CK(cudaGraphInstantiate(&exec, g, 0));
  };
  preload(mix);
  build(0);
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(a, c, kN, uint32_t(i));
    mix<<<kGrid, kBlock, 0, u>>>(e, f, kN, uint32_t(i));
    mix<<<kGrid, kBlock, 0, u>>>(f, e, kN, uint32_t(i) + 1);
    uint32_t salt = uint32_t(i) * 3u + 1u;
    void* args[] = {&c, &a, &n, &salt};
    const cudaKernelNodeParams p = kernelParams(reinterpret_cast<void*>(mix), dim3(kGrid), args);
    CK(cudaGraphExecKernelNodeSetParams(exec, fold, &p));
    CK(cudaGraphLaunch(exec, s));
    mix<<<kGrid, kBlock, 0, s>>>(c, b, kN, uint32_t(i) + 1);
    CKL();
    if (i % 100 == 50) {
      CK(cudaStreamSynchronize(s));  // the old executable graph is done
      CK(cudaGraphExecDestroy(exec));
      CK(cudaGraphDestroy(g));
      build(uint32_t(i));
    }
    if (checkpoint(i, s, "a", a)) print("counter", i, deviceDigest(counter, 8));
  }
  CK(cudaDeviceSynchronize());
  print("end", 0,
        deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4) ^ deviceDigest(e, kN * 4) ^
            deviceDigest(counter, 8));
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(g));
}

// A device graph (instantiated for device launch and uploaded: a kernel, a
// device-to-device copy, a kernel) launched every step from a kernel of a
// small host graph, in fire-and-forget, tail or sibling mode by turns (a word
// the step's memset writes), and every fourth step from the host instead;
// the eager kernels after it read what it wrote. graft sees only the host
// graph's launch. Every 100 steps the device graph's first kernel gets a new
// argument and is uploaded again.
void deviceGraphLaunch() {
  cudaStream_t s = nonBlockingStream();
  uint32_t *a = deviceBuffer(361), *b = deviceBuffer(362), *c = deviceBuffer(363), *words = deviceBuffer(364, 4);
  CK(cudaMemset(words, 0, 16));
  int n = kN;
  uint32_t* salt = words;
  uint32_t k2 = 5, k3 = 9;
  cudaGraph_t dg = nullptr;
  CK(cudaGraphCreate(&dg, 0));
  auto params = [](void** args) {
    cudaKernelNodeParams p = {};
    p.func = reinterpret_cast<void*>(dgWork);
    p.gridDim = dim3(kGrid);
    p.blockDim = dim3(kBlock);
    p.kernelParams = args;
    return p;
  };
  void* w1[] = {&a, &b, &salt, &n, &k2};
  const cudaKernelNodeParams p1 = params(w1);
  cudaGraphNode_t node1 = nullptr, copy = nullptr, node3 = nullptr;
  CK(cudaGraphAddKernelNode(&node1, dg, nullptr, 0, &p1));
  CK(cudaGraphAddMemcpyNode1D(&copy, dg, &node1, 1, c, a, 4096 * 4, cudaMemcpyDeviceToDevice));
  void* w3[] = {&b, &c, &salt, &n, &k3};
  const cudaKernelNodeParams p3 = params(w3);
  CK(cudaGraphAddKernelNode(&node3, dg, &copy, 1, &p3));
  cudaGraphExec_t dgExec = nullptr;
  CK(cudaGraphInstantiate(&dgExec, dg, cudaGraphInstantiateFlagDeviceLaunch));
  CK(cudaGraphUpload(dgExec, s));
  // The launching graph: device graphs are launched from the device only by
  // a kernel that runs in a graph.
  cudaGraph_t lg = nullptr;
  cudaGraphExec_t lgExec = nullptr;
  preload(graphLauncher);
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  graphLauncher<<<1, 32, 0, s>>>(dgExec, words + 1, words + 2);
  CK(cudaStreamEndCapture(s, &lg));
  CK(cudaGraphInstantiate(&lgExec, lg, 0));
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, uint32_t(i));
    CK(cudaMemsetAsync(words, (i * 7) & 0xff, 4, s));  // the salt dgWork reads
    CK(cudaMemsetAsync(words + 1, i % 3, 4, s));       // the launch mode
    CK(cudaGraphLaunch(i % 4 == 3 ? dgExec : lgExec, s));
    mix<<<kGrid, kBlock, 0, s>>>(a, c, kN, uint32_t(i) + 1);  // c: the device graph's copy
    mix<<<kGrid, kBlock, 0, s>>>(c, b, kN, uint32_t(i) + 2);
    CKL();
    if (i % 100 == 50) {
      CK(cudaStreamSynchronize(s));  // no launch of the device graph in flight during the update
      k2 = 5u + uint32_t(i);
      const cudaKernelNodeParams p = params(w1);
      CK(cudaGraphExecKernelNodeSetParams(dgExec, node1, &p));
      CK(cudaGraphUpload(dgExec, s));
    }
    if (checkpoint(i, s, "a", a)) print("launch_results", i, deviceDigest(words + 2, 4));
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4));
  CK(cudaGraphExecDestroy(lgExec));
  CK(cudaGraphDestroy(lg));
  CK(cudaGraphExecDestroy(dgExec));
  CK(cudaGraphDestroy(dg));
}

// The program captures part of every step on stream C, in global,
// thread-local and relaxed mode by turns, forking into stream D and joining
// back, while the same thread keeps launching eagerly on stream A, asks every
// stream's capture status and dependency count in the middle, allocates
// memory inside the relaxed capture, and updates one executable graph from
// each capture (cudaGraphExecUpdate) and launches it. C also runs eager work
// right before the capture begins. Anything graft issues into the driver
// from any thread during a global capture that the driver deems unsafe
// invalidates it.
void captureModes() {
  cudaStream_t A = nonBlockingStream(), C = nonBlockingStream(), D = nonBlockingStream();
  cudaEvent_t fork, join, after, back;
  CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&after, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&back, cudaEventDisableTiming));
  uint32_t *a = deviceBuffer(371), *b = deviceBuffer(372), *c = deviceBuffer(373), *d = deviceBuffer(374);
  uint32_t* e = deviceBuffer(375);
  const cudaStreamCaptureMode modes[3] = {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal,
                                          cudaStreamCaptureModeRelaxed};
  auto info = [](cudaStream_t st) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    const cudaGraphNode_t* deps = nullptr;
    size_t nDeps = 0;
    CK(cudaStreamGetCaptureInfo(st, &status, nullptr, nullptr, &deps, nullptr, &nDeps));
    return uint64_t(status) * 1000 + (status == cudaStreamCaptureStatusActive ? nDeps : 0);
  };
  auto capturing = [](cudaStream_t st) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    CK(cudaStreamIsCapturing(st, &status));
    return uint64_t(status);
  };
  cudaGraphExec_t exec = nullptr;
  Digest states;
  preload(mix);
  preload(mix2);
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = uint32_t(i);
    mix<<<kGrid, kBlock, 0, A>>>(a, b, kN, salt);
    mix<<<kGrid, kBlock, 0, C>>>(c, d, kN, salt);  // eager, just before the capture
    CK(cudaStreamBeginCapture(C, modes[i % 3]));
    mix<<<kGrid, kBlock, 0, C>>>(d, c, kN, salt + 1);
    CK(cudaEventRecord(fork, C));
    CK(cudaStreamWaitEvent(D, fork, 0));
    mix<<<kGrid, kBlock, 0, D>>>(e, d, kN, salt + 2);
    mix<<<kGrid, kBlock, 0, A>>>(b, a, kN, salt + 3);  // eager, on a stream outside the capture
    states.add(info(C));
    states.add(info(D));
    states.add(info(A));
    uint32_t* scratch = nullptr;
    if (modes[i % 3] == cudaStreamCaptureModeRelaxed) CK(cudaMalloc(&scratch, 4096));
    CK(cudaEventRecord(join, D));
    CK(cudaStreamWaitEvent(C, join, 0));
    mix2<<<kGrid, kBlock, 0, C>>>(c, d, e, kN, salt + 4);
    states.add(info(C));
    cudaGraph_t g = nullptr;
    CK(cudaStreamEndCapture(C, &g));
    states.add(capturing(C));
    states.add(capturing(D));
    if (!exec) {
      CK(cudaGraphInstantiate(&exec, g, 0));
    } else {
      cudaGraphExecUpdateResultInfo result = {};
      CK(cudaGraphExecUpdate(exec, g, &result));
    }
    CK(cudaGraphDestroy(g));
    CK(cudaGraphLaunch(exec, C));
    CK(cudaEventRecord(after, C));
    CK(cudaStreamWaitEvent(A, after, 0));
    mix2<<<kGrid, kBlock, 0, A>>>(a, b, c, kN, salt + 5);
    // C's next work writes c, which this kernel reads: C waits for it. (Until
    // the thirty-fourth session it did not; the program raced with itself,
    // and graft's graph, where the next step's kernel on C and this one are
    // siblings, showed it in 6-7 of 20 runs on an H100 at 3316131 and later.)
    CK(cudaEventRecord(back, A));
    CK(cudaStreamWaitEvent(C, back, 0));
    CKL();
    if (scratch) CK(cudaFree(scratch));
    if (checkpoint(i, A, "a", a)) print("capture_states", i, states.h);
  }
  CK(cudaDeviceSynchronize());
  print("end", 0,
        deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4) ^ deviceDigest(d, kN * 4) ^
            deviceDigest(e, kN * 4) ^ states.h);
  CK(cudaGraphExecDestroy(exec));
}

// Host memory that comes and goes while kernels use it directly: a kernel
// writes results into pinned memory through the host pointer it gets as a
// parameter, and the host reads them after cudaEventSynchronize on a
// blocking-sync event (another stream keeps working meanwhile). Every 25
// steps that buffer is freed and allocated again with another size
// (cudaMallocHost and cudaHostAlloc by turns); every 20 steps a malloc'ed
// buffer the kernels read is unregistered and the other of two registered
// (cudaHostRegister), and the host rewrites what they read every step.
void hostMemoryChurn() {
  cudaStream_t s = nonBlockingStream(), t = nonBlockingStream();
  cudaEvent_t ev;
  CK(cudaEventCreateWithFlags(&ev, cudaEventBlockingSync | cudaEventDisableTiming));
  uint32_t *a = deviceBuffer(381), *b = deviceBuffer(382), *c = deviceBuffer(383), *d = deviceBuffer(384);
  constexpr size_t kRegBytes = 64 * 1024;
  uint32_t* reg[2];
  for (auto& r : reg) {
    r = static_cast<uint32_t*>(std::aligned_alloc(4096, kRegBytes));
    if (!r) {
      std::fprintf(stderr, "traps: aligned_alloc failed\n");
      std::exit(1);
    }
    for (size_t k = 0; k < kRegBytes / 4; ++k) r[k] = uint32_t(k) * 2654435761u;
  }
  int curReg = 0;
  uint32_t* regDev = nullptr;
  CK(cudaHostRegister(reg[curReg], kRegBytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
  CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&regDev), reg[curReg], 0));
  int gen = 0, words = 256;
  uint32_t* pinned = nullptr;
  CK(cudaMallocHost(&pinned, words * 4));
  Digest d0;
  for (int i = 0; i < g_iters; ++i) {
    readHost<<<kGrid, kBlock, 0, s>>>(a, regDev, kN, 256);
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, uint32_t(i));
    writeHost<<<(words + kBlock - 1) / kBlock, kBlock, 0, s>>>(pinned, b, words, uint32_t(i));  // a host pointer
    CK(cudaEventRecord(ev, s));
    mix<<<kGrid, kBlock, 0, t>>>(c, d, kN, uint32_t(i));
    mix<<<kGrid, kBlock, 0, t>>>(d, c, kN, uint32_t(i) + 1);
    CKL();
    CK(cudaEventSynchronize(ev));
    d0.add(pinned, size_t(words) * 4);
    for (int k = 0; k < 256; ++k) reg[curReg][k] = pinned[k % words] ^ uint32_t(i * 131 + k);
    if (i % 25 == 24) {
      CK(cudaFreeHost(pinned));
      ++gen;
      words = 256 + 64 * (gen % 3);
      if (gen % 2) {
        CK(cudaHostAlloc(&pinned, words * 4, cudaHostAllocMapped | cudaHostAllocPortable));
      } else {
        CK(cudaMallocHost(&pinned, words * 4));
      }
      for (int k = 0; k < words; ++k) pinned[k] = 0;
    }
    if (i % 20 == 19) {
      // The kernels that read it have finished (the event comes after them).
      CK(cudaHostUnregister(reg[curReg]));
      const uint32_t* last = reg[curReg];
      curReg ^= 1;
      for (int k = 0; k < 256; ++k) reg[curReg][k] = last[k] * 3u + uint32_t(i);
      CK(cudaHostRegister(reg[curReg], kRegBytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
      CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&regDev), reg[curReg], 0));
    }
    if (i % 100 == 99) print("host_reads", i, d0.h);
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, d0.h ^ deviceDigest(a, kN * 4) ^ deviceDigest(c, kN * 4) ^ deviceDigest(d, kN * 4));
  CK(cudaHostUnregister(reg[curReg]));
  CK(cudaFreeHost(pinned));
  std::free(reg[0]);
  std::free(reg[1]);
}

// Two streams of different priorities, joined by events every step, with
// memsets whose values, sizes, offsets and shapes repeat with period 3
// (runtime 1-D and 2-D memsets, the driver's 16-bit and 2-D 32-bit ones) and
// a read-back into pinned memory every seventh step: the step's pattern
// repeats every 21 steps, and the read-back falls at another place of the
// 3-step pattern each time.
void priorityStreams() {
  int least = 0, greatest = 0;
  CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t lo, hi;
  CK(cudaStreamCreateWithPriority(&lo, cudaStreamNonBlocking, least));
  CK(cudaStreamCreateWithPriority(&hi, cudaStreamNonBlocking, greatest));
  cudaEvent_t e1, e2;
  CK(cudaEventCreateWithFlags(&e1, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&e2, cudaEventDisableTiming));
  uint32_t *a = deviceBuffer(391), *b = deviceBuffer(392), *c = deviceBuffer(393), *p2d = deviceBuffer(394);
  uint32_t* q = deviceBuffer(395);
  uint32_t* out = nullptr;
  CK(cudaMallocHost(&out, 1024));
  const int value[3] = {0x11, 0xa5, 0x3c}, bytes[3] = {kN * 4, kN * 2 + 12, 4096 + 3}, offset[3] = {0, 8, 1};
  const int value2[3] = {0x7f, 0x01, 0xee}, width2[3] = {512, 300, 129}, height2[3] = {32, 17, 9};
  const unsigned short value16[3] = {0x1234, 0xbeef, 0x0f0f};
  const size_t count16[3] = {kN, kN / 2, 777};
  const unsigned value32[3] = {0xdeadbeefu, 7u, 0x80000001u};
  const size_t width32[3] = {128, 64, 33}, height32[3] = {16, 8, 3};
  const auto memsetD16 = driverFunction<PFN_cuMemsetD16Async_v3020>("cuMemsetD16Async");
  const auto memsetD2D32 = driverFunction<PFN_cuMemsetD2D32Async_v3020>("cuMemsetD2D32Async");
  Digest reads;
  for (int i = 0; i < g_iters; ++i) {
    const int r = i % 3;
    mix<<<kGrid, kBlock, 0, lo>>>(a, b, kN, uint32_t(i));
    CK(cudaEventRecord(e1, lo));
    CK(cudaStreamWaitEvent(hi, e1, 0));
    CK(cudaMemsetAsync(reinterpret_cast<char*>(c) + offset[r], value[r], bytes[r] - offset[r], hi));
    CK(cudaMemset2DAsync(p2d, 512, value2[r], width2[r], height2[r], hi));
    CKU(memsetD16(reinterpret_cast<CUdeviceptr>(q) + 2 * r, value16[r], count16[r], reinterpret_cast<CUstream>(hi)));
    CKU(memsetD2D32(reinterpret_cast<CUdeviceptr>(p2d) + 16384, 512, value32[r], width32[r], height32[r],
                    reinterpret_cast<CUstream>(hi)));
    mix2<<<kGrid, kBlock, 0, hi>>>(b, c, p2d, kN, uint32_t(i));
    mix2<<<kGrid, kBlock, 0, hi>>>(b, q, a, kN, uint32_t(i) + 1);
    CK(cudaEventRecord(e2, hi));
    CK(cudaStreamWaitEvent(lo, e2, 0));
    mix<<<kGrid, kBlock, 0, lo>>>(a, b, kN, uint32_t(i) + 2);
    CKL();
    if (i % 7 == 6) {
      CK(cudaMemcpyAsync(out, a + (i % 64) * 256, 1024, cudaMemcpyDeviceToHost, lo));
      CK(cudaStreamSynchronize(lo));
      reads.add(out, 1024);
    }
    if (checkpoint(i, lo, "a", a)) print("reads", i, reads.h);
  }
  CK(cudaDeviceSynchronize());
  print("end", 0,
        reads.h ^ deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4) ^
            deviceDigest(p2d, kN * 4) ^ deviceDigest(q, kN * 4));
  CK(cudaFreeHost(out));
}

// Cluster launches through cudaLaunchKernelExC (arguments as void**) whose
// cluster shape changes every step: 1-D clusters of 1, 2, 4, 8 blocks (16
// where the device allows non-portable sizes), 2-D clusters, and no cluster
// attribute at all, each with an L2 access policy window whose base, size
// and hit ratio change every step and a scheduling preference that
// alternates. The kernel folds its cluster's size and rank into the result,
// so a replay with another cluster shape than the call's differs.
void clusterDims() {
  cudaStream_t s = nonBlockingStream();
  uint32_t *a = deviceBuffer(401), *b = deviceBuffer(402), *c = deviceBuffer(403);
  bool sixteen = cudaFuncSetAttribute(clusterRing, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess;
  cudaGetLastError();
  if (sixteen) {
    cudaLaunchConfig_t probe = {};
    probe.gridDim = dim3(kGrid);
    probe.blockDim = dim3(kBlock);
    cudaLaunchAttribute attr = {};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = 16;
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    probe.attrs = &attr;
    probe.numAttrs = 1;
    int clusters = 0;
    sixteen = cudaOccupancyMaxActiveClusters(&clusters, clusterRing, &probe) == cudaSuccess && clusters > 0;
    cudaGetLastError();
  }
  print("cluster_16", 0, sixteen);
  const unsigned pattern[6] = {2, 4, 1, 8, sixteen ? 16u : 4u, 2};
  uint32_t* windows[3] = {a, b, c};
  for (int i = 0; i < g_iters; ++i) {
    cudaLaunchAttribute attrs[3] = {};
    attrs[0].id = cudaLaunchAttributeAccessPolicyWindow;
    attrs[0].val.accessPolicyWindow.base_ptr = windows[i % 3];
    attrs[0].val.accessPolicyWindow.num_bytes = size_t(4096) * size_t(1 + i % 16);
    attrs[0].val.accessPolicyWindow.hitRatio = 0.25f * float(i % 4);
    attrs[0].val.accessPolicyWindow.hitProp = i % 2 ? cudaAccessPropertyPersisting : cudaAccessPropertyNormal;
    attrs[0].val.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    attrs[1].id = cudaLaunchAttributeClusterSchedulingPolicyPreference;
    attrs[1].val.clusterSchedulingPolicyPreference =
        i % 2 ? cudaClusterSchedulingPolicySpread : cudaClusterSchedulingPolicyLoadBalancing;
    attrs[2].id = cudaLaunchAttributeClusterDimension;
    attrs[2].val.clusterDim.x = pattern[i % 6];
    attrs[2].val.clusterDim.y = 1;
    attrs[2].val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(kGrid);
    cfg.blockDim = dim3(kBlock);
    cfg.stream = s;
    cfg.attrs = attrs;
    cfg.numAttrs = i % 7 == 6 ? 1 : 3;  // every seventh step: no cluster attribute
    int n = kN;
    uint32_t salt = uint32_t(i);
    const uint32_t* src = a;
    void* args1[] = {&b, &src, &n, &salt};
    CK(cudaLaunchKernelExC(&cfg, reinterpret_cast<const void*>(clusterRing), args1));
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i));
    // A 2-D grid with 2-D clusters: (1|2|4) x 2 blocks.
    cudaLaunchConfig_t cfg2 = cfg;
    cfg2.gridDim = dim3(kGrid / 4, 4);
    attrs[2].val.clusterDim.x = 1u << (i % 3);
    attrs[2].val.clusterDim.y = 2;
    cfg2.numAttrs = 3;
    uint32_t salt2 = uint32_t(i) + 1;
    const uint32_t* src2 = b;
    void* args2[] = {&c, &src2, &n, &salt2};
    CK(cudaLaunchKernelExC(&cfg2, reinterpret_cast<const void*>(clusterRing), args2));
    mix<<<kGrid, kBlock, 0, s>>>(a, c, kN, uint32_t(i) + 2);
    CKL();
    checkpoint(i, s, "a", a);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4));
}

// Managed memory attached to streams: a buffer allocated host-attached is
// attached to stream s (single) before s's kernels use it, every third step
// attached to the host, after which the host synchronizes and reads and
// writes it, and on other steps attached globally. A globally attached
// buffer is shared by two streams (events between them), prefetched to the
// host and back to the device by turns, advised read-mostly and not, copied
// into device memory with a default-kind copy, and every 25 steps read and
// written by the host after a device synchronize.
void managedAttach() {
  cudaStream_t s = nonBlockingStream(), t = nonBlockingStream();
  cudaEvent_t e, f;
  CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&f, cudaEventDisableTiming));
  uint32_t *m = nullptr, *m2 = nullptr;
  CK(cudaMallocManaged(&m, kN * 4, cudaMemAttachGlobal));
  CK(cudaMallocManaged(&m2, kN * 4, cudaMemAttachHost));
  for (int k = 0; k < kN; ++k) {
    m[k] = uint32_t(k) * 2654435761u;
    m2[k] = uint32_t(k) * 40503u + 7u;
  }
  uint32_t *a = deviceBuffer(411), *b = deviceBuffer(412), *copy = deviceBuffer(413, 1024);
  const int dev = currentDevice();
  cudaMemLocation onDevice = {}, onHost = {};
  onDevice.type = cudaMemLocationTypeDevice;
  onDevice.id = dev;
  onHost.type = cudaMemLocationTypeHost;
  onHost.id = 0;
  Digest host;
  for (int i = 0; i < g_iters; ++i) {
    CK(cudaStreamAttachMemAsync(s, m2, 0, cudaMemAttachSingle));
    mix<<<kGrid, kBlock, 0, s>>>(m2, a, kN, uint32_t(i));
    mix<<<kGrid, kBlock, 0, s>>>(a, m2, kN, uint32_t(i) + 1);
    if (i % 5 == 4) CK(cudaMemPrefetchAsync(m, kN * 4, onHost, 0, s));
    if (i % 5 == 0) CK(cudaMemPrefetchAsync(m, kN * 4, onDevice, 0, s));
    if (i % 10 == 0)
      CK(cudaMemAdvise(m, kN * 4, i % 20 == 0 ? cudaMemAdviseSetReadMostly : cudaMemAdviseUnsetReadMostly, onDevice));
    mix<<<kGrid, kBlock, 0, s>>>(m, a, kN, uint32_t(i) + 2);
    CK(cudaEventRecord(e, s));
    CK(cudaStreamWaitEvent(t, e, 0));
    mix<<<kGrid, kBlock, 0, t>>>(b, m, kN, uint32_t(i) + 3);
    CK(cudaEventRecord(f, t));
    CK(cudaStreamWaitEvent(s, f, 0));
    CK(cudaMemcpyAsync(copy, m + (i % 16) * 1024, 4096, cudaMemcpyDefault, s));
    addSmall<<<kGrid, kBlock, 0, s>>>(a, copy, kN, 1024, uint32_t(i));
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i) + 4);
    CKL();
    if (i % 3 == 0) {
      CK(cudaStreamAttachMemAsync(s, m2, 0, cudaMemAttachHost));
      CK(cudaStreamSynchronize(s));
      host.add(m2, 256 * 4);
      for (int k = 0; k < 256; ++k) m2[k * 61 % kN] ^= uint32_t(i) * 7u + uint32_t(k);
    } else if (i % 3 == 1) {
      CK(cudaStreamAttachMemAsync(s, m2, 0, cudaMemAttachGlobal));
    }
    if (i % 25 == 24) {
      CK(cudaDeviceSynchronize());
      host.add(m, kN * 4);
      for (int k = 0; k < 64; ++k) m[k * 255] += uint32_t(i);
    }
    if (checkpoint(i, s, "a", a)) print("host_reads", i, host.h);
  }
  CK(cudaDeviceSynchronize());
  host.add(m, kN * 4);
  host.add(m2, kN * 4);
  print("end", 0, host.h ^ deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
  CK(cudaFree(m));
  CK(cudaFree(m2));
}

// __device__ symbols: a table written every step by cudaMemcpyToSymbolAsync
// from pinned memory that the host rewrites as soon as an event recorded
// right after the copy completed (kernels after it still run), and every
// other step partly from device memory; an accumulator reached through the
// pointer from cudaGetSymbolAddress (a kernel parameter), copied out with
// cudaMemcpyFromSymbolAsync into pinned memory read every third step after a
// stream synchronize, and with the synchronous cudaMemcpyFromSymbol every
// tenth step (the legacy stream: the work stream is a blocking one).
void symbolPinned() {
  cudaStream_t s = blockingStream();
  cudaEvent_t copied;
  CK(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
  uint32_t *hp = nullptr, *pout = nullptr;
  CK(cudaMallocHost(&hp, 1024));
  CK(cudaMallocHost(&pout, 1024));
  for (int k = 0; k < 256; ++k) hp[k] = uint32_t(k) * 2246822519u;
  uint32_t* acc = nullptr;
  CK(cudaGetSymbolAddress(reinterpret_cast<void**>(&acc), g_acc));
  uint32_t* a = deviceBuffer(421);
  CK(cudaMemcpy(acc, a, kN * 4, cudaMemcpyDeviceToDevice));
  Digest reads;
  for (int i = 0; i < g_iters; ++i) {
    CK(cudaMemcpyToSymbolAsync(g_table, hp, 1024, 0, cudaMemcpyHostToDevice, s));
    CK(cudaEventRecord(copied, s));
    tableMix<<<kGrid, kBlock, 0, s>>>(acc, a, kN, uint32_t(i));
    mix<<<kGrid, kBlock, 0, s>>>(a, acc, kN, uint32_t(i));
    if (i % 2) CK(cudaMemcpyToSymbolAsync(g_table, a + (i % 64) * 256, 512, 512, cudaMemcpyDeviceToDevice, s));
    tableMix<<<kGrid, kBlock, 0, s>>>(acc, a, kN, uint32_t(i) + 1);
    CK(cudaMemcpyFromSymbolAsync(pout, g_acc, 1024, size_t(i % 16) * 1024, cudaMemcpyDeviceToHost, s));
    CKL();
    CK(cudaEventSynchronize(copied));
    for (int k = 0; k < 256; ++k) hp[k] = hp[k] * 2654435761u + uint32_t(i);  // the copy has read it
    if (i % 3 == 2) {
      CK(cudaStreamSynchronize(s));
      reads.add(pout, 1024);
      for (int k = 0; k < 256; ++k) hp[k] ^= pout[k];
    }
    if (i % 10 == 9) {
      uint32_t v[4];
      CK(cudaMemcpyFromSymbol(v, g_acc, sizeof v, size_t(i % 100) * sizeof v));
      reads.add(v, sizeof v);
    }
    if (checkpoint(i, s, "acc", acc)) print("reads", i, reads.h);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, reads.h ^ deviceDigest(acc, kN * 4) ^ deviceDigest(a, kN * 4));
  CK(cudaFreeHost(hp));
  CK(cudaFreeHost(pout));
}

// 32 streams: every step forks from a main stream into all of them (one
// event), each launches one kernel on one slice of a buffer, the slices
// going round-robin over the streams (slice j on stream (j + step) % 32, so
// the step's pattern of streams repeats every 32 steps), some streams also
// launch a side kernel on a pattern of period 7, and the main stream waits on
// all 32 (one event each) before folding. Read back every 50 steps.
void manyStreams() {
  constexpr int kStreams = 32, kSlice = kN / kStreams;
  cudaStream_t m = nonBlockingStream();
  cudaStream_t st[kStreams];
  cudaEvent_t forkEv, joinEv[kStreams];
  CK(cudaEventCreateWithFlags(&forkEv, cudaEventDisableTiming));
  for (int j = 0; j < kStreams; ++j) {
    st[j] = nonBlockingStream();
    CK(cudaEventCreateWithFlags(&joinEv[j], cudaEventDisableTiming));
  }
  uint32_t *a = deviceBuffer(431), *b = deviceBuffer(432), *side = deviceBuffer(433);
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, m>>>(a, b, kN, uint32_t(i));
    CK(cudaEventRecord(forkEv, m));
    for (int j = 0; j < kStreams; ++j) {
      cudaStream_t x = st[(j + i) % kStreams];
      CK(cudaStreamWaitEvent(x, forkEv, 0));
      sliceMix<<<kSlice / kBlock, kBlock, 0, x>>>(b, a, kN, j * kSlice, kSlice, uint32_t(i) * 32u + uint32_t(j));
      if ((i + j) % 7 == 0)
        sliceMix<<<kSlice / kBlock, kBlock, 0, x>>>(side, a, kN, j * kSlice, kSlice, uint32_t(i) ^ uint32_t(j));
      CK(cudaEventRecord(joinEv[j], x));
    }
    for (int j = 0; j < kStreams; ++j) CK(cudaStreamWaitEvent(m, joinEv[j], 0));
    mix2<<<kGrid, kBlock, 0, m>>>(a, b, side, kN, uint32_t(i));
    CKL();
    if (i % 50 == 49) {
      CK(cudaStreamSynchronize(m));
      print("a", i, deviceDigest(a, kN * 4));
      print("side", i, deviceDigest(side, kN * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(side, kN * 4));
}

constexpr Scenario kScenarios[] = {
    {"elapsed_time", elapsedTime},           {"func_attributes", funcAttributes},
    {"device_limits", deviceLimits},         {"surface_array", surfaceArray},
    {"pageable_copies", pageableCopies},     {"graph_conditional", graphConditional},
    {"device_graph_launch", deviceGraphLaunch}, {"capture_modes", captureModes},
    {"host_memory_churn", hostMemoryChurn},  {"priority_streams", priorityStreams},
    {"cluster_dims", clusterDims},           {"managed_attach", managedAttach},
    {"symbol_pinned", symbolPinned},         {"many_streams", manyStreams},
};

}  // namespace

int main(int argc, char** argv) { return runScenarios(argc, argv, kScenarios); }
