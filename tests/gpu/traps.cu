// traps: odd but legal CUDA patterns, each a small loop that repeats often
// enough for graft to capture and replay it. Every scenario is deterministic
// in eager (no races: integer kernels, fixed orders), and prints digests of
// its device buffers at checkpoints and at the end; check_traps.py requires
// the output under graft to equal eager's, line for line.
//
//   traps NAME [--iters N]      one scenario (see kScenarios)
//   traps --list                the scenario names
//   traps --ipc-peer IN OUT     (internal) the other process of ipc_event
//
// Exit codes: 0 ok, 1 CUDA error or broken invariant, 2 usage, 77 no device.

#include <cooperative_groups.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <cub/cub.cuh>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace cg = cooperative_groups;

#include "trap_common.cuh"

namespace {

// Adds a device-resident scalar (written by a copy or a memset just before).
__global__ void addScalar(uint32_t* dst, const uint32_t* scalar, int n) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 9) + scalar[0] * 2654435761u + uint32_t(k);
}

struct Big {
  uint32_t v[1024];  // 4 KiB by value
};
struct Huge {
  uint32_t v[7000];  // 28000 bytes by value (parameter limit 32764 since CUDA 12.1)
};

__global__ void withBig(uint32_t* dst, Big p, int n) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 11) ^ (p.v[k % 1024] + uint32_t(k));
}
__global__ void withHuge(uint32_t* dst, Huge p, int n) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 13) + p.v[(k * 3) % 7000];
}
// Parameters of mixed sizes and alignments (padding between them).
__global__ void withOdd(uint32_t* dst, char c, double d, short s, const uint32_t* src, int n, float f) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n)
    dst[k] = rotl(dst[k], 7) ^ (uint32_t(c) * 131u + uint32_t(d * 8.0) * 7u + uint32_t(s) * 3u +
                                src[(k + 1) % n] + __float_as_uint(f));
}

__constant__ uint32_t c_table[64];
__global__ void withConstant(uint32_t* dst, int n) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 3) ^ (c_table[k % 64] + uint32_t(k));
}

// Every block adds its sum to partial[block]; after grid.sync() block 0 folds
// them in block order into out[slot].
__global__ void cooperativeSum(const uint32_t* src, uint32_t* partial, uint32_t* out, int n, int slot) {
  cg::grid_group grid = cg::this_grid();
  __shared__ uint32_t s[kBlock];
  uint32_t acc = 0;
  for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) acc += src[k] * 3u + 1u;
  s[threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t t = 0;
    for (int i = 0; i < blockDim.x; ++i) t = rotl(t, 1) ^ s[i];
    partial[blockIdx.x] = t;
  }
  grid.sync();
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    uint32_t t = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) t = t * 31u + partial[b];
    out[slot] = t;
  }
}

// Programmatic dependent launch: the primary lets its dependent start early
// (after its own writes), the dependent does independent work first and waits
// for the primary's completion (and its writes) in cudaGridDependencySynchronize.
__global__ void pdlPrimary(uint32_t* dst, const uint32_t* src, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(src[(k * 7 + 1) % n] ^ salt, 5) + uint32_t(k);
  cudaTriggerProgrammaticLaunchCompletion();
}
__global__ void pdlDependent(uint32_t* dst, const uint32_t* src, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t own = rotl(salt * 2654435761u + uint32_t(k), 11);  // before the wait: reads nothing
  cudaGridDependencySynchronize();
  if (k < n) dst[k] = (src[(k * 13 + 5) % n] ^ own) + dst[k];
}

// Each block reads its cluster neighbour's shared memory.
__global__ void clusterExchange(uint32_t* dst, const uint32_t* src, int n, uint32_t salt) {
  cg::cluster_group cluster = cg::this_cluster();
  __shared__ uint32_t s[kBlock];
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = k < n ? src[k] + salt : 0;
  cluster.sync();
  const unsigned peer = (cluster.block_rank() + 1) % cluster.num_blocks();
  const uint32_t* ps = cluster.map_shared_rank(s, peer);
  const uint32_t v = ps[(threadIdx.x + 1) % blockDim.x];
  cluster.sync();
  if (k < n) dst[k] = rotl(dst[k], 6) ^ v;
}

__global__ void writeMapped(volatile uint32_t* flag, uint32_t value, uint32_t* dst, int n) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] += value;
  if (k == 0) {
    __threadfence_system();
    *flag = value;
  }
}

__global__ void readMapped(uint32_t* dst, const uint32_t* mapped, int n) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 1) + mapped[k % 256];
}

// One thread prints a line per launch (device printf is flushed at syncs).
__global__ void printStep(const uint32_t* a, int step) {
  if (blockIdx.x == 0 && threadIdx.x == 0) printf("device: step %d value %08x\n", step, a[step % 64]);
}

// Writes through a pointer the host made invalid on purpose (a fault).
__global__ void writeThrough(uint32_t* p, uint32_t v) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *p = v;
}

__device__ uint32_t g_counter[4];
// No parameters at all (kernelParams may be null).
__global__ void noParams() {
  if (blockIdx.x == 0 && threadIdx.x == 0) g_counter[0] = g_counter[0] * 3u + 1u;
}
struct Empty {};
__global__ void emptyParam(Empty, uint32_t* dst) {
  if (blockIdx.x == 0 && threadIdx.x == 0) dst[0] += g_counter[0];
}
// 3-D grid and block; every thread adds its linear index.
__global__ void grid3d(uint32_t* dst, int n) {
  const int b = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const int t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const int k = b * (blockDim.x * blockDim.y * blockDim.z) + t;
  if (k < n) dst[k] = rotl(dst[k], 2) + uint32_t(k);
}
// One thread per block, many blocks.
__global__ void wideGrid(uint32_t* dst, int n, uint32_t salt) {
  const int k = blockIdx.x;
  if (k < n) dst[k] ^= salt + uint32_t(k);
}

// Spins about `cycles` clock cycles, then adds: slow enough that a reader
// that does not wait for it sees the old values.
__global__ void slowAdd(uint32_t* dst, int n, uint32_t v, long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 1) + v + uint32_t(k);
}

// ---------------------------------------------------------------- scenarios

// Blocking stream and legacy default stream, interleaved: only the legacy
// stream's implicit synchronization orders these launches.
void legacyOrder() {
  cudaStream_t s1;
  CK(cudaStreamCreate(&s1));
  uint32_t *a = deviceBuffer(1), *b = deviceBuffer(2);
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s1>>>(a, b, kN, i);
    mix<<<kGrid, kBlock, 0, 0>>>(b, a, kN, i * 3);
    mix<<<kGrid, kBlock, 0, s1>>>(a, b, kN, i + 7);
    CKL();
    if (i % 100 == 99) print("a", i, deviceDigest(a, kN * 4)), print("b", i, deviceDigest(b, kN * 4));
  }
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

// The per-thread default stream against the legacy stream: they synchronize
// with each other implicitly.
void perThreadStream() {
  uint32_t *a = deviceBuffer(3), *b = deviceBuffer(4);
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, cudaStreamPerThread>>>(a, b, kN, i);
    mix<<<kGrid, kBlock, 0, cudaStreamLegacy>>>(b, a, kN, i ^ 5);
    mix<<<kGrid, kBlock, 0, cudaStreamPerThread>>>(a, b, kN, i * 11);
    CKL();
    checkpoint(i, cudaStreamPerThread, "a", a);
  }
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

// Fork and join over three non-blocking streams with events.
void eventForkJoin() {
  cudaStream_t s0 = nonBlockingStream(), s1 = nonBlockingStream(), s2 = nonBlockingStream();
  cudaEvent_t fork, j1, j2;
  CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&j1, cudaEventDisableTiming));
  CK(cudaEventCreate(&j2));  // timing enabled on purpose
  uint32_t *a = deviceBuffer(5), *b1 = deviceBuffer(6), *b2 = deviceBuffer(7);
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s0>>>(a, b1, kN, i);
    CK(cudaEventRecord(fork, s0));
    CK(cudaStreamWaitEvent(s1, fork, 0));
    CK(cudaStreamWaitEvent(s2, fork, 0));
    mix<<<kGrid, kBlock, 0, s1>>>(b1, a, kN, i + 1);
    mix<<<kGrid, kBlock, 0, s2>>>(b2, a, kN, i + 2);
    mix<<<kGrid, kBlock, 0, s2>>>(b2, a, kN, i + 3);
    CK(cudaEventRecord(j1, s1));
    CK(cudaEventRecord(j2, s2));
    CK(cudaStreamWaitEvent(s0, j1, 0));
    CK(cudaStreamWaitEvent(s0, j2, 0));
    mix2<<<kGrid, kBlock, 0, s0>>>(a, b1, b2, kN, i);
    CKL();
    checkpoint(i, s0, "a", a);
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b1, kN * 4) ^ deviceDigest(b2, kN * 4));
}

// Memsets whose value changes every iteration (runtime and driver API).
void memsetValues() {
  cudaStream_t s = nonBlockingStream();
  uint32_t *a = deviceBuffer(8), *scalar = deviceBuffer(9, 64);
  for (int i = 0; i < g_iters; ++i) {
    CK(cudaMemsetAsync(scalar, i & 0xff, 4, s));
    addScalar<<<kGrid, kBlock, 0, s>>>(a, scalar, kN);
    CKD(cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(scalar), uint32_t(i) * 977u + 1u, 16, s));
    addScalar<<<kGrid, kBlock, 0, s>>>(a, scalar, kN);
    CKD(cuMemsetD16Async(reinterpret_cast<CUdeviceptr>(scalar), uint16_t(i * 31), 2, s));
    addScalar<<<kGrid, kBlock, 0, s>>>(a, scalar, kN);
    CKL();
    checkpoint(i, s, "a", a);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4));
}

// Parameters by value: 4 KiB and 28000-byte structs whose contents change in
// a few words, and mixed sizes with padding.
void bigParams() {
  cudaStream_t s = nonBlockingStream();
  uint32_t *a = deviceBuffer(10), *b = deviceBuffer(11);
  auto* big = new Big;
  auto* huge = new Huge;
  for (int i = 0; i < 1024; ++i) big->v[i] = i * 7u;
  for (int i = 0; i < 7000; ++i) huge->v[i] = i * 13u;
  for (int i = 0; i < g_iters; ++i) {
    big->v[i % 1024] += uint32_t(i);
    huge->v[(i * 37) % 7000] ^= 0xdead0000u + uint32_t(i);
    withBig<<<kGrid, kBlock, 0, s>>>(a, *big, kN);
    withHuge<<<kGrid, kBlock, 0, s>>>(b, *huge, kN);
    withOdd<<<kGrid, kBlock, 0, s>>>(a, char(i), i * 0.5, short(-i), b, kN, i % 3 ? 1.5f : -0.0f);
    withOdd<<<kGrid, kBlock, 0, s>>>(b, 'x', 2.0, short(7), a, kN, 0.25f);
    CKL();
    checkpoint(i, s, "a", a);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
  delete big;
  delete huge;
}

// Launch shapes that change on an irregular schedule, and a short last batch.
void gridChange() {
  cudaStream_t s = nonBlockingStream();
  uint32_t *a = deviceBuffer(12), *b = deviceBuffer(13);
  for (int i = 0; i < g_iters; ++i) {
    const int grid = (i % 5 == 4) ? kGrid / 2 : (i % 50 == 49 ? 17 : kGrid);
    const int n = grid * kBlock;
    mix<<<grid, kBlock, 0, s>>>(a, b, n, i);
    mix<<<kGrid, kBlock, (i % 7 == 0) ? 1024 : 0, s>>>(b, a, kN, i);  // dynamic shared memory varies
    mix<<<grid, kBlock / (i % 3 == 0 ? 2 : 1), 0, s>>>(a, b, n / (i % 3 == 0 ? 2 : 1), i * 3);
    CKL();
    checkpoint(i, s, "a", a);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

void CUDART_CB bumpCounter(void* p) { ++*static_cast<uint32_t*>(p); }

// A host function in stream order, then a copy from the pinned word it
// writes: the copy must read the value the host function left.
void hostFunc() {
  cudaStream_t s = nonBlockingStream();
  uint32_t* counter = nullptr;
  CK(cudaMallocHost(&counter, 64));
  *counter = 0;
  uint32_t *a = deviceBuffer(14), *b = deviceBuffer(44), *scalar = deviceBuffer(15, 64);
  for (int i = 0; i < g_iters; ++i) {
    CK(cudaLaunchHostFunc(s, bumpCounter, counter));
    CK(cudaMemcpyAsync(scalar, counter, 4, cudaMemcpyHostToDevice, s));
    addScalar<<<kGrid, kBlock, 0, s>>>(a, scalar, kN);
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, i);
    CKL();
    if (checkpoint(i, s, "a", a)) print("counter", i, *counter);
  }
  CK(cudaStreamSynchronize(s));
  print("end", *counter, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

// The classic loop: host writes pinned input, copies in, kernels, copies out,
// synchronizes and computes the next input from the output.
void pinnedRoundTrip() {
  cudaStream_t s = nonBlockingStream();
  uint32_t *in = nullptr, *out = nullptr;
  CK(cudaMallocHost(&in, 256 * 4));
  CK(cudaMallocHost(&out, 256 * 4));
  for (int k = 0; k < 256; ++k) in[k] = k;
  uint32_t *a = deviceBuffer(16), *b = deviceBuffer(45), *din = deviceBuffer(17, 256);
  Digest d;
  for (int i = 0; i < g_iters; ++i) {
    CK(cudaMemcpyAsync(din, in, 256 * 4, cudaMemcpyHostToDevice, s));
    readMapped<<<kGrid, kBlock, 0, s>>>(a, din, kN);
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, i);
    CK(cudaMemcpyAsync(out, b + (i % 64) * 256, 256 * 4, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    d.add(out, 256 * 4);
    for (int k = 0; k < 256; ++k) in[k] = out[k] ^ uint32_t(i);
    if (i % 100 == 99) print("out", i, d.h);
  }
  print("end", 0, d.h ^ deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

// Zero-copy: kernels read host-mapped memory the host rewrites after each
// synchronize, and write a mapped flag the host reads.
void mappedMemory() {
  cudaStream_t s = nonBlockingStream();
  uint32_t* host = nullptr;
  CK(cudaHostAlloc(&host, 4096, cudaHostAllocMapped));
  uint32_t* dev = nullptr;
  CK(cudaHostGetDevicePointer(&dev, host, 0));
  for (int k = 0; k < 1024; ++k) host[k] = k;
  uint32_t* a = deviceBuffer(18);
  for (int i = 0; i < g_iters; ++i) {
    readMapped<<<kGrid, kBlock, 0, s>>>(a, dev, kN);
    writeMapped<<<kGrid, kBlock, 0, s>>>(dev + 512, uint32_t(i + 1), a, kN);
    CKL();
    if (i % 3 == 0) {
      CK(cudaDeviceSynchronize());
    } else {
      CK(cudaStreamSynchronize(s));
    }
    if (host[512] != uint32_t(i + 1)) {
      std::fprintf(stderr, "traps: mapped flag %u after synchronize, expected %d\n", host[512], i + 1);
      std::exit(1);
    }
    for (int k = 0; k < 256; ++k) host[k] = host[k] * 3u + uint32_t(i);
    if (i % 100 == 99) print("a", i, deviceDigest(a, kN * 4));
  }
  print("end", 0, deviceDigest(a, kN * 4));
}

// Polls an event and a stream with queries until done, then reads what the
// kernel wrote to mapped memory: the query must not report work done that
// graft still holds.
void queryPoll() {
  cudaStream_t s = nonBlockingStream();
  cudaEvent_t e;
  CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  uint32_t* host = nullptr;
  CK(cudaHostAlloc(&host, 64, cudaHostAllocMapped));
  uint32_t* dev = nullptr;
  CK(cudaHostGetDevicePointer(&dev, host, 0));
  *host = 0;
  uint32_t *a = deviceBuffer(19), *b = deviceBuffer(20);
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, i);
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, i);
    writeMapped<<<kGrid, kBlock, 0, s>>>(dev, uint32_t(i + 1), a, kN);
    CKL();
    if (i % 2 == 0) {
      CK(cudaEventRecord(e, s));
      cudaError_t q;
      while ((q = cudaEventQuery(e)) == cudaErrorNotReady) {}
      CK(q);
    } else {
      cudaError_t q;
      while ((q = cudaStreamQuery(s)) == cudaErrorNotReady) {}
      CK(q);
    }
    if (*reinterpret_cast<volatile uint32_t*>(host) != uint32_t(i + 1)) {
      std::fprintf(stderr, "traps: query said done at iteration %d but the kernel's write is missing (%u)\n", i,
                   *host);
      std::exit(1);
    }
  }
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

// The host waits on a mapped flag without any CUDA call: graft must issue
// held work on its own (idle flush), or the program hangs.
void spinFlag() {
  cudaStream_t s = nonBlockingStream();
  uint32_t* host = nullptr;
  CK(cudaHostAlloc(&host, 64, cudaHostAllocMapped));
  uint32_t* dev = nullptr;
  CK(cudaHostGetDevicePointer(&dev, host, 0));
  *host = 0;
  uint32_t *a = deviceBuffer(21), *b = deviceBuffer(22);
  const int iters = g_iters / 5;
  for (int i = 0; i < iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, i);
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, i);
    writeMapped<<<kGrid, kBlock, 0, s>>>(dev, uint32_t(i + 1), a, kN);
    CKL();
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (*reinterpret_cast<volatile uint32_t*>(host) != uint32_t(i + 1)) {
      if (std::chrono::steady_clock::now() > until) {
        std::fprintf(stderr, "traps: spin on a mapped flag never ended (iteration %d)\n", i);
        std::exit(1);
      }
    }
  }
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

// Copies to a __constant__ symbol from pageable memory the host rewrites at
// once (legal: a pageable copy has read its source when it returns).
void constantSymbol() {
  cudaStream_t s = nonBlockingStream();
  std::vector<uint32_t> table(64);
  uint32_t* a = deviceBuffer(23);
  for (int i = 0; i < g_iters; ++i) {
    for (int k = 0; k < 64; ++k) table[k] = uint32_t(i * 64 + k) * 2246822519u;
    CK(cudaMemcpyToSymbolAsync(c_table, table.data(), 64 * 4, 0, cudaMemcpyHostToDevice, s));
    withConstant<<<kGrid, kBlock, 0, s>>>(a, kN);
    for (int k = 0; k < 64; ++k) table[k] = 0xffffffffu;  // overwritten right away
    CKL();
    checkpoint(i, s, "a", a);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4));
}

// Device-to-device copies of several shapes between kernels.
void copyKinds() {
  cudaStream_t s = nonBlockingStream();
  uint32_t *a = deviceBuffer(24), *b = deviceBuffer(25);
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, i);
    CK(cudaMemcpyAsync(b, a + (i % 16) * 64, 4096 * 4, cudaMemcpyDeviceToDevice, s));
    // 64 rows of 32 words out of a 128-word pitch
    CK(cudaMemcpy2DAsync(b + 8192, 64 * 4, a + 4096, 128 * 4, 32 * 4, 64, cudaMemcpyDeviceToDevice, s));
    CKD(cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(b + 12000), reinterpret_cast<CUdeviceptr>(a + (i % 3)),
                          100 * 4, s));
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, i * 5);
    CKL();
    checkpoint(i, s, "b", b);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

// Cooperative launches (grid-wide sync) and thread-block clusters.
void cooperativeAndCluster() {
  cudaStream_t s = nonBlockingStream();
  uint32_t *a = deviceBuffer(26), *b = deviceBuffer(27), *partial = deviceBuffer(28, 64), *out = deviceBuffer(29, 64);
  int coop = 0;
  CK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, 0));
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, i);
    if (coop) {
      const uint32_t* src = a;
      int n = kN, slot = i % 64;
      void* args[] = {&src, &partial, &out, &n, &slot};
      CK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(cooperativeSum), dim3(32), dim3(kBlock), args, 0, s));
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(kGrid);
    cfg.blockDim = dim3(kBlock);
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (i % 4 == 3) ? 4 : 2;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    CK(cudaLaunchKernelEx(&cfg, clusterExchange, b, static_cast<const uint32_t*>(a), kN, uint32_t(i)));
    CKL();
    checkpoint(i, s, "out", out, 64);
  }
  CK(cudaStreamSynchronize(s));
  print("end", coop, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(out, 64 * 4));
}

// Driver-API launches: kernel parameters packed in one buffer (`extra`), and
// cuLaunchKernelEx, next to runtime launches of the same kernel.
void driverLaunches() {
  cudaStream_t s = nonBlockingStream();
  cudaFunction_t rf;
  CK(cudaGetFuncBySymbol(&rf, reinterpret_cast<const void*>(mix)));
  CUfunction f = reinterpret_cast<CUfunction>(rf);
  uint32_t *a = deviceBuffer(30), *b = deviceBuffer(31);
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, i);
    struct alignas(8) Packed {
      uint32_t* dst;
      const uint32_t* src;
      int n;
      uint32_t salt;
    } packed{b, a, kN, uint32_t(i * 9)};
    size_t size = sizeof packed;
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    CKD(cuLaunchKernel(f, kGrid, 1, 1, kBlock, 1, 1, 0, s, nullptr, extra));
    uint32_t* dst = a;
    const uint32_t* src = b;
    int n = kN;
    uint32_t salt = uint32_t(i ^ 0x55);
    void* params[] = {&dst, &src, &n, &salt};
    CUlaunchConfig cfg = {};
    cfg.gridDimX = kGrid;
    cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = kBlock;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = s;
    CKD(cuLaunchKernelEx(&cfg, f, params, nullptr));
    checkpoint(i, s, "a", a);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

// Stream-ordered allocation inside the loop (sizes change every third step).
void mallocAsync() {
  cudaStream_t s = nonBlockingStream();
  uint32_t *a = deviceBuffer(32), *b = deviceBuffer(33);
  for (int i = 0; i < g_iters; ++i) {
    const size_t bytes = (i % 3 == 2 ? 2 : 1) * kN * 4;
    uint32_t* t = nullptr;
    CK(cudaMallocAsync(&t, bytes, s));
    CK(cudaMemsetAsync(t, 0, bytes, s));
    mix<<<kGrid, kBlock, 0, s>>>(t, a, kN, i);
    mix<<<kGrid, kBlock, 0, s>>>(b, t, kN, i);
    CK(cudaFreeAsync(t, s));
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, i);
    CKL();
    checkpoint(i, s, "a", a);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

// Several host threads, each looping on its own stream and buffers.
void threads() {
  constexpr int kThreads = 3;
  uint64_t results[kThreads] = {};
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([t, &results] {
      cudaStream_t s = nonBlockingStream();
      uint32_t *a = deviceBuffer(40 + t), *b = deviceBuffer(50 + t);
      for (int i = 0; i < g_iters; ++i) {
        mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, i + t);
        mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, i * (t + 2));
        if (t == 1) mix<<<kGrid / 2, kBlock, 0, s>>>(a, b, kN / 2, i);
        CKL();
        if (i % 25 == 24) CK(cudaStreamSynchronize(s));
      }
      CK(cudaStreamSynchronize(s));
      results[t] = deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4);
    });
  }
  for (auto& th : pool) th.join();
  for (int t = 0; t < kThreads; ++t) print("thread", t, results[t]);
}

// The program captures part of its step itself and launches that graph
// between eager kernels; every 100 steps it captures again and updates the
// executable graph in place.
void programGraph() {
  cudaStream_t s = nonBlockingStream();
  uint32_t *a = deviceBuffer(34), *b = deviceBuffer(35);
  cudaGraphExec_t exec = nullptr;
  auto capture = [&](uint32_t salt) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, salt);
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, salt + 1);
    CK(cudaStreamEndCapture(s, &g));
    if (!exec) {
      CK(cudaGraphInstantiate(&exec, g, 0));
    } else {
      cudaGraphExecUpdateResultInfo info;
      CK(cudaGraphExecUpdate(exec, g, &info));
    }
    CK(cudaGraphDestroy(g));
  };
  for (int i = 0; i < g_iters; ++i) {
    if (i % 100 == 0) capture(uint32_t(i));
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, i);
    CK(cudaGraphLaunch(exec, s));
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, i);
    CKL();
    checkpoint(i, s, "a", a);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
  CK(cudaGraphExecDestroy(exec));
}

// A launch that fails on every tenth step (too many threads per block): the
// program sees the error at the call, as in eager, and goes on.
void launchErrors() {
  cudaStream_t s = nonBlockingStream();
  uint32_t *a = deviceBuffer(36), *b = deviceBuffer(37);
  Digest errors;
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, i);
    mix<<<kGrid, (i % 10 == 9) ? 4096 : kBlock, 0, s>>>(b, a, kN, i);
    const cudaError_t e = cudaGetLastError();
    errors.add(uint64_t(e));
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, i + 1);
    CKL();
    if (checkpoint(i, s, "a", a)) print("errors", i, errors.h);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

// Synchronization of every kind at irregular points, with reads of results
// in between.
void syncKinds() {
  cudaStream_t s;
  CK(cudaStreamCreate(&s));  // blocking: the legacy-stream copies below wait for it
  cudaEvent_t e;
  CK(cudaEventCreate(&e));
  uint32_t *a = deviceBuffer(38), *b = deviceBuffer(39);
  Digest d;
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, i);
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, i);
    CKL();
    switch (i % 4) {
      case 0: CK(cudaDeviceSynchronize()); break;
      case 1: CK(cudaStreamSynchronize(s)); break;
      case 2: CK(cudaEventRecord(e, s)); CK(cudaEventSynchronize(e)); break;
      default: break;  // the copy below (legacy stream) orders after s
    }
    uint32_t v[4];
    CK(cudaMemcpy(v, a + (i * 131) % (kN - 4), sizeof v, cudaMemcpyDeviceToHost));
    d.add(v, sizeof v);
    if (i % 100 == 99) print("reads", i, d.h);
  }
  print("end", 0, d.h ^ deviceDigest(a, kN * 4));
}

// Device printf in every step: its lines come out at the syncs, in order.
void devicePrintf() {
  cudaStream_t s = nonBlockingStream();
  uint32_t *a = deviceBuffer(60), *b = deviceBuffer(61);
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, i);
    printStep<<<1, 32, 0, s>>>(a, i);
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, i);
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, i + 1);
    CKL();
    if (i % 50 == 49) {
      CK(cudaStreamSynchronize(s));
      std::fflush(stdout);
    }
  }
  CK(cudaStreamSynchronize(s));
  std::fflush(stdout);
  print("end", 0, deviceDigest(a, kN * 4));
}

// The same events recorded several times per step and waited on in between
// from another stream: each wait must see the record issued just before it.
void eventReuse() {
  cudaStream_t s0 = nonBlockingStream(), s1 = nonBlockingStream();
  cudaEvent_t e;
  CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  uint32_t *a = deviceBuffer(62), *b = deviceBuffer(63), *c = deviceBuffer(64);
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s0>>>(a, c, kN, i);
    CK(cudaEventRecord(e, s0));
    CK(cudaStreamWaitEvent(s1, e, 0));
    mix<<<kGrid, kBlock, 0, s1>>>(b, a, kN, i);  // after the first a
    mix<<<kGrid, kBlock, 0, s0>>>(c, a, kN, i);  // concurrent with s1, which reads a too
    CK(cudaEventRecord(e, s1));
    CK(cudaStreamWaitEvent(s0, e, 0));
    mix<<<kGrid, kBlock, 0, s0>>>(a, b, kN, i + 1);  // after s1's b
    CK(cudaEventRecord(e, s0));
    CK(cudaStreamWaitEvent(s1, e, 0));
    mix<<<kGrid, kBlock, 0, s1>>>(b, a, kN, i + 2);  // after the second a
    CK(cudaEventRecord(e, s1));
    CK(cudaStreamWaitEvent(s0, e, 0));
    CKL();
    checkpoint(i, s0, "a", a);
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

// A kernel faults (a write through an invalid pointer) in the middle of the
// run; the program checks only its syncs. The error must show at the same
// sync, with the same name, and the process must exit as it does eagerly.
void stickyFault() {
  cudaStream_t s = nonBlockingStream();
  uint32_t *a = deviceBuffer(65), *b = deviceBuffer(66);
  uint32_t* bad = reinterpret_cast<uint32_t*>(uintptr_t(0x10));  // never mapped
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, i);
    writeThrough<<<1, 32, 0, s>>>(i == g_iters / 2 ? bad : b, uint32_t(i));
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, i);
    cudaGetLastError();  // launches may or may not report the fault yet: not checked
    if (i % 10 == 9) {
      const cudaError_t e = cudaStreamSynchronize(s);
      if (e != cudaSuccess) {
        std::printf("sync after step %d: %s\n", i, cudaGetErrorName(e));
        std::fflush(stdout);
        std::exit(3);  // atexit handlers run with the context broken (graft's exit report too)
      }
      print("a", i, deviceDigest(a, kN * 4));
    }
  }
  print("end", 0, 0);
}

// The program resets the device halfway and starts over with new memory and
// streams (nothing graft learned before may be used after), and resets it
// again before it exits.
void deviceReset() {
  for (int round = 0; round < 2; ++round) {
    cudaStream_t s = nonBlockingStream();
    uint32_t *a = deviceBuffer(67 + round), *b = deviceBuffer(69 + round);
    for (int i = 0; i < g_iters / 2; ++i) {
      mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, i + round);
      mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, i);
      mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, i * 3);
      mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, i ^ 9);
      CKL();
      if (i % 50 == 49) {
        CK(cudaStreamSynchronize(s));
        print("a", i, deviceDigest(a, kN * 4));
      }
    }
    CK(cudaStreamSynchronize(s));
    print("round", round, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
    CK(cudaDeviceReset());  // after the last round too, as many CUDA samples end
  }
}

// A module the program loads from PTX (the driver compiles it), unloads and
// loads again every 50 steps: kernel handles may be reused by the driver.
// (Its PTX: trap_common.cuh, kIncPtx.)

void moduleReload() {
  cudaStream_t s = nonBlockingStream();
  uint32_t *a = deviceBuffer(71), *b = deviceBuffer(72);
  CUmodule module = nullptr;
  CUfunction inc = nullptr;
  for (int i = 0; i < g_iters; ++i) {
    if (i % 50 == 0) {
      if (module) {
        CK(cudaStreamSynchronize(s));
        CKD(cuModuleUnload(module));
      }
      CKD(cuModuleLoadData(&module, kIncPtx));
      CKD(cuModuleGetFunction(&inc, module, "trapInc"));
    }
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, i);
    uint32_t* dst = b;
    const uint32_t* src = a;
    int n = kN;
    uint32_t v = uint32_t(i);
    void* params[] = {&dst, &src, &n, &v};
    CKD(cuLaunchKernel(inc, kGrid, 1, 1, kBlock, 1, 1, 0, s, params, nullptr));
    CKD(cuLaunchKernel(inc, kGrid, 1, 1, kBlock, 1, 1, 0, s, params, nullptr));
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, i + 1);
    CKL();
    checkpoint(i, s, "a", a);
  }
  CK(cudaStreamSynchronize(s));
  CKD(cuModuleUnload(module));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

// Streams destroyed and created again every 60 steps, alternately blocking
// and non-blocking, mixed with the legacy stream: a recycled handle must not
// keep the old stream's flags (a blocking stream is ordered against the
// legacy stream, a non-blocking one is not, so the program orders that one
// with events).
void streamRecreate() {
  uint32_t *a = deviceBuffer(73), *b = deviceBuffer(74);
  cudaEvent_t e;
  CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  cudaStream_t s = nullptr;
  bool blocking = true;
  for (int i = 0; i < g_iters; ++i) {
    if (i % 60 == 0) {
      if (s) {
        CK(cudaStreamSynchronize(s));
        CK(cudaStreamDestroy(s));
      }
      blocking = (i / 60) % 2 == 0;
      CK(cudaStreamCreateWithFlags(&s, blocking ? cudaStreamDefault : cudaStreamNonBlocking));
    }
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, i);
    if (!blocking) {
      CK(cudaEventRecord(e, s));
      CK(cudaStreamWaitEvent(cudaStreamLegacy, e, 0));
    }
    mix<<<kGrid, kBlock, 0, cudaStreamLegacy>>>(b, a, kN, i);
    if (!blocking) {
      CK(cudaEventRecord(e, cudaStreamLegacy));
      CK(cudaStreamWaitEvent(s, e, 0));
    }
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, i + 7);
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, i + 9);
    CKL();
    if (i % 100 == 99) {
      if (!blocking) CK(cudaStreamSynchronize(s));  // the legacy-stream copy waits for blocking streams only
      print("a", i, deviceDigest(a, kN * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

// Ops of odd sizes and shapes: zero-byte memsets and copies, a 2-D memset,
// a kernel without parameters, one taking an empty struct, 3-D launches and
// a grid of 65536 one-thread blocks.
void oddOps() {
  cudaStream_t s = nonBlockingStream();
  uint32_t *a = deviceBuffer(75, 1 << 16), *b = deviceBuffer(76);
  for (int i = 0; i < g_iters; ++i) {
    CK(cudaMemsetAsync(b, i & 0xff, 0, s));
    CK(cudaMemcpyAsync(b, a, 0, cudaMemcpyDeviceToDevice, s));
    CK(cudaMemset2DAsync(b + 1024, 64 * 4, (i * 7) & 0xff, 16 * 4, 8, s));  // 8 rows of 16 words
    noParams<<<1, 32, 0, s>>>();
    emptyParam<<<1, 32, 0, s>>>(Empty{}, b);
    grid3d<<<dim3(4, 4, 2), dim3(8, 4, 2), 0, s>>>(b, kN);
    wideGrid<<<65536, 1, 0, s>>>(a, 1 << 16, uint32_t(i));
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, i);
    CKL();
    checkpoint(i, s, "b", b);
  }
  CK(cudaStreamSynchronize(s));
  uint32_t counter[4];
  CK(cudaMemcpyFromSymbol(counter, g_counter, sizeof counter));
  print("end", int(counter[0] & 0xffff), deviceDigest(a, (1 << 16) * 4) ^ deviceDigest(b, kN * 4));
}

// Both sides of ipcEvent's pipe protocol: exact reads and writes.
bool readAll(int fd, void* p, size_t n) {
  auto* b = static_cast<unsigned char*>(p);
  while (n) {
    const ssize_t r = read(fd, b, n);
    if (r <= 0) return false;
    b += r;
    n -= size_t(r);
  }
  return true;
}
bool writeAll(int fd, const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  while (n) {
    const ssize_t r = write(fd, b, n);
    if (r <= 0) return false;
    b += r;
    n -= size_t(r);
  }
  return true;
}
struct IpcHandles {
  cudaIpcMemHandle_t mem;
  cudaIpcEventHandle_t event;
};

// The other process of ipcEvent (this binary run with --ipc-peer IN OUT): for
// each step number it reads, waits on the shared event on its own stream,
// copies the shared buffer out and answers with its digest.
int ipcPeer(int in, int out) {
  IpcHandles h;
  if (!readAll(in, &h, sizeof h)) return 1;
  uint32_t* buf = nullptr;
  cudaEvent_t ev = nullptr;
  CK(cudaIpcOpenMemHandle(reinterpret_cast<void**>(&buf), h.mem, cudaIpcMemLazyEnablePeerAccess));
  CK(cudaIpcOpenEventHandle(&ev, h.event));
  cudaStream_t s = nonBlockingStream();
  std::vector<uint32_t> host(kN);
  int step = 0;
  while (readAll(in, &step, sizeof step) && step >= 0) {
    CK(cudaStreamWaitEvent(s, ev, 0));
    CK(cudaMemcpyAsync(host.data(), buf, kN * 4, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    Digest g;
    g.add(host.data(), kN * 4);
    if (!writeAll(out, &g.h, sizeof g.h)) return 1;
  }
  CK(cudaIpcCloseMemHandle(buf));
  return 0;
}

// Another process reads this one's results through CUDA IPC. Each step adds
// to a buffer on a stream (slowly), records an interprocess event and tells
// the peer the step through a pipe (no CUDA call); the peer waits on the
// event, reads the buffer and answers with its digest. Eagerly the peer always
// sees this step's values; graft cannot see the peer, so the record, and the
// work before it, must reach the driver when the record call returns.
void ipcEvent() {
  int toPeer[2], fromPeer[2];
  if (pipe(toPeer) || pipe(fromPeer)) {
    std::fprintf(stderr, "traps: pipe failed\n");
    std::exit(1);
  }
  const pid_t pid = fork();
  if (pid == 0) {  // a fresh process: exec before any CUDA call
    close(toPeer[1]);
    close(fromPeer[0]);
    const std::string in = std::to_string(toPeer[0]), out = std::to_string(fromPeer[1]);
    execl("/proc/self/exe", "traps", "--ipc-peer", in.c_str(), out.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(toPeer[0]);
  close(fromPeer[1]);
  cudaStream_t s = nonBlockingStream();
  uint32_t* buf = deviceBuffer(90);
  cudaEvent_t ev = nullptr;
  CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming | cudaEventInterprocess));
  IpcHandles h;
  CK(cudaIpcGetMemHandle(&h.mem, buf));
  CK(cudaIpcGetEventHandle(&h.event, ev));
  if (!writeAll(toPeer[1], &h, sizeof h)) {
    std::fprintf(stderr, "traps: the IPC peer did not start\n");
    std::exit(1);
  }
  Digest seen;
  for (int i = 0; i < g_iters; ++i) {
    for (int k = 0; k < 4; ++k) slowAdd<<<kGrid, kBlock, 0, s>>>(buf, kN, uint32_t(i * 4 + k), 20000);
    CKL();
    CK(cudaEventRecord(ev, s));
    uint64_t peerDigest = 0;
    if (!writeAll(toPeer[1], &i, sizeof i) || !readAll(fromPeer[0], &peerDigest, sizeof peerDigest)) {
      std::fprintf(stderr, "traps: the IPC peer stopped at step %d\n", i);
      std::exit(1);
    }
    seen.add(peerDigest);
    if (i % 100 == 99) print("peer_saw", i, seen.h);
  }
  const int stop = -1;
  writeAll(toPeer[1], &stop, sizeof stop);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "traps: the IPC peer failed (status %d)\n", status);
    std::exit(1);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(buf, kN * 4) ^ seen.h);
}

// Kernels launched with programmatic stream serialization (PDL, as cuBLAS and
// attention libraries do on Hopper): each dependent may start while the
// kernel before it on the stream still runs and waits inside itself for that
// kernel's results. In a captured graph the attribute becomes a programmatic
// edge. Every fifth step the dependents are launched without the attribute,
// so the steps differ in their launch attributes only.
void programmaticLaunch() {
  cudaStream_t s = nonBlockingStream();
  uint32_t* a = deviceBuffer(97);
  uint32_t* b = deviceBuffer(98);
  uint32_t* c = deviceBuffer(99);
  auto dependent = [&](uint32_t* dst, const uint32_t* src, uint32_t salt, bool pdl) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(kGrid);
    cfg.blockDim = dim3(kBlock);
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = pdl ? attr : nullptr;
    cfg.numAttrs = pdl ? 1 : 0;
    CK(cudaLaunchKernelEx(&cfg, pdlDependent, dst, src, kN, salt));
  };
  for (int i = 0; i < g_iters; ++i) {
    const bool pdl = i % 5 != 4;
    pdlPrimary<<<kGrid, kBlock, 0, s>>>(b, a, kN, uint32_t(i));
    dependent(c, b, uint32_t(i * 3 + 1), pdl);
    mix<<<kGrid, kBlock, 0, s>>>(a, c, kN, uint32_t(i));
    pdlPrimary<<<kGrid, kBlock, 0, s>>>(b, c, kN, uint32_t(i * 5));
    dependent(a, b, uint32_t(i * 3 + 2), pdl);
    CKL();
    checkpoint(i, s, "a", a);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4));
}

// Events and a stream destroyed while work that uses them is still pending
// (legal: the driver frees them once that work is done), new ones created
// every step, so the driver may hand back a handle just freed. Each step
// forks from stream A into B and back with fresh events destroyed right
// after the wait, and runs one kernel on a fresh stream destroyed right after
// its record. Every wait must bind to the record just before it.
void churnPending() {
  cudaStream_t a = nonBlockingStream();
  cudaStream_t b = nonBlockingStream();
  uint32_t* x = deviceBuffer(100);
  uint32_t* y = deviceBuffer(101);
  uint32_t* z = deviceBuffer(102);
  for (int i = 0; i < g_iters; ++i) {
    cudaEvent_t e, f, g;
    mix<<<kGrid, kBlock, 0, a>>>(y, x, kN, uint32_t(i));
    CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CK(cudaEventRecord(e, a));
    CK(cudaStreamWaitEvent(b, e, 0));
    CK(cudaEventDestroy(e));  // the wait is pending
    mix<<<kGrid, kBlock, 0, b>>>(z, y, kN, uint32_t(i) + 1);  // reads A's y
    CK(cudaEventCreateWithFlags(&f, cudaEventDisableTiming));
    CK(cudaEventRecord(f, b));
    CK(cudaStreamWaitEvent(a, f, 0));
    CK(cudaEventDestroy(f));
    cudaStream_t t = nonBlockingStream();
    CK(cudaEventCreateWithFlags(&g, cudaEventDisableTiming));
    CK(cudaEventRecord(g, a));
    CK(cudaStreamWaitEvent(t, g, 0));
    mix<<<kGrid, kBlock, 0, t>>>(x, z, kN, uint32_t(i) + 2);  // after A's wait on B: reads z
    CK(cudaEventRecord(g, t));
    CK(cudaStreamDestroy(t));  // its kernel is pending
    CK(cudaStreamWaitEvent(a, g, 0));
    CK(cudaEventDestroy(g));
    mix<<<kGrid, kBlock, 0, a>>>(y, x, kN, uint32_t(i) + 3);  // reads T's x
    CKL();
    checkpoint(i, a, "y", y);
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(x, kN * 4) ^ deviceDigest(y, kN * 4) ^ deviceDigest(z, kN * 4));
}

// Managed memory: kernels read and write a cudaMallocManaged buffer every
// step, a prefetch to the device (stream-ordered) comes every tenth step, and
// every 25th step the host synchronizes, reads the buffer in place and writes
// into it, which the next steps' kernels must see (pages migrate on access).
__global__ void addManaged(uint32_t* m, const uint32_t* src, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) m[k] = rotl(m[k] ^ src[(k * 3 + 1) % n], 3) + salt;
}
void managedMemory() {
  cudaStream_t s = nonBlockingStream();
  uint32_t* m = nullptr;
  CK(cudaMallocManaged(&m, kN * sizeof(uint32_t)));
  for (int k = 0; k < kN; ++k) m[k] = uint32_t(k) * 2654435761u;
  uint32_t* b = deviceBuffer(103);
  cudaMemLocation device = {};
  device.type = cudaMemLocationTypeDevice;
  device.id = 0;
  Digest seen;
  for (int i = 0; i < g_iters; ++i) {
    if (i % 10 == 0) CK(cudaMemPrefetchAsync(m, kN * sizeof(uint32_t), device, 0, s));
    addManaged<<<kGrid, kBlock, 0, s>>>(m, b, kN, uint32_t(i));
    mix<<<kGrid, kBlock, 0, s>>>(b, m, kN, uint32_t(i));
    addManaged<<<kGrid, kBlock, 0, s>>>(m, b, kN, uint32_t(i) + 7);
    CKL();
    if (i % 25 == 24) {
      CK(cudaStreamSynchronize(s));
      seen.add(m, kN * sizeof(uint32_t));                  // the host reads in place
      for (int k = 0; k < kN; k += 97) m[k] ^= uint32_t(i);  // and writes
      if (i % 100 == 99) print("managed", i, seen.h);
    }
  }
  CK(cudaStreamSynchronize(s));
  seen.add(m, kN * sizeof(uint32_t));
  print("end", 0, seen.h ^ deviceDigest(b, kN * 4));
  CK(cudaFree(m));
}

// Batched copies (cudaMemcpyBatchAsync, CUDA 12.8+) between kernels: a
// device-to-device copy in stream order, and a host-to-device copy whose
// source may be read only during the call (cudaMemcpySrcAccessOrderDuringApiCall):
// the host overwrites that source right after the call returns.
void batchCopy() {
  cudaStream_t s = nonBlockingStream();
  uint32_t* a = deviceBuffer(104);
  uint32_t* b = deviceBuffer(105);
  uint32_t* c = deviceBuffer(106);
  uint32_t* up = nullptr;
  CK(cudaMalloc(&up, 64 * sizeof(uint32_t)));
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, uint32_t(i));
    uint32_t host[64];
    for (int k = 0; k < 64; ++k) host[k] = uint32_t(i * 64 + k) * 2246822519u;
    void* dsts[2] = {c, up};
    const void* srcs[2] = {b, host};
    size_t sizes[2] = {kN * sizeof(uint32_t), sizeof host};
    cudaMemcpyAttributes attrs[2] = {};
    attrs[0].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    attrs[0].srcLocHint.type = cudaMemLocationTypeDevice;
    attrs[0].dstLocHint.type = cudaMemLocationTypeDevice;
    attrs[1].srcAccessOrder = cudaMemcpySrcAccessOrderDuringApiCall;
    attrs[1].srcLocHint.type = cudaMemLocationTypeHost;
    attrs[1].dstLocHint.type = cudaMemLocationTypeDevice;
    size_t attrsIdxs[2] = {0, 1};
    CK(cudaMemcpyBatchAsync(dsts, srcs, sizes, 2, attrs, attrsIdxs, 2, s));
    for (int k = 0; k < 64; ++k) host[k] = 0xdeadbeef;  // allowed: the call has read it
    mix2<<<kGrid, kBlock, 0, s>>>(a, c, up, 64, uint32_t(i));  // a[0..64) from c and the upload
    mix<<<kGrid, kBlock, 0, s>>>(a + 64, c + 64, kN - 64, uint32_t(i) + 1);
    CKL();
    checkpoint(i, s, "a", a);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(c, kN * 4) ^ deviceDigest(up, 64 * 4));
}

// forkChild's child: asks the driver about `s` (CUDA refuses every call in a
// child forked after it started) and leaves through exit(), which runs the
// atexit handlers. Its stdout and stderr go to a pipe; the parent prints what
// came through, the exit status, and whether the child left within 30 s.
void forkAndListen(int step, cudaStream_t s) {
  int out[2];
  if (pipe(out) != 0) {
    std::fprintf(stderr, "traps: pipe failed\n");
    std::exit(1);
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    std::fprintf(stderr, "traps: fork failed\n");
    std::exit(1);
  }
  if (pid == 0) {
    close(out[0]);
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    close(out[1]);
    const cudaError_t e = cudaStreamQuery(s);
    std::printf("cudaStreamQuery -> %s\n", cudaGetErrorName(e));
    std::exit(0);
  }
  close(out[1]);
  std::string text;
  bool left = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             deadline - std::chrono::steady_clock::now()).count();
    if (ms <= 0) {
      left = false;
      kill(pid, SIGKILL);
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, int(ms)) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, size_t(n));
  }
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  size_t from = 0;
  while (from < text.size()) {
    size_t to = text.find('\n', from);
    if (to == std::string::npos) to = text.size();
    std::printf("child_said %d %s\n", step, text.substr(from, to - from).c_str());
    from = to + 1;
  }
  std::printf("child_left %d %s status %d\n", step, left ? "in time" : "NOT within 30 s", status);
}

// A program forks a helper process in the middle of its steps (a data-loader
// worker, a shell command) while its kernels are in flight. The child is a
// copy of the parent, made while graft held some of the step's ops; eagerly
// it has no GPU work of its own and prints nothing but its own line. graft
// must not issue the parent's held ops, log or report from the child.
void forkChild() {
  cudaStream_t s = nonBlockingStream();
  uint32_t* a = deviceBuffer(95);
  uint32_t* b = deviceBuffer(96);
  for (int i = 0; i < g_iters; ++i) {
    for (int k = 0; k < 6; ++k) {
      mix<<<kGrid, kBlock, 0, s>>>(k % 2 ? a : b, k % 2 ? b : a, kN, uint32_t(i * 6 + k));
      // At steps 50, 150, ... (mid-step, where graft holds ops); once in a short run.
      if (k == 3 && (i % 100 == 50 || (g_iters <= 50 && i == g_iters / 2))) forkAndListen(i, s);
    }
    CKL();
    checkpoint(i, s, "a", a);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

// A kernel that spins until the host writes at least `want` into a mapped
// flag. It gives up after `maxCycles` and counts that in *timeouts: a program
// that waited for it before releasing it would otherwise hang.
__global__ void gateKernel(const volatile uint32_t* flag, uint32_t want, uint32_t* timeouts,
                           long long maxCycles) {
  const long long t0 = clock64();
  while (*flag < want) {
    if (clock64() - t0 > maxCycles) {
      atomicAdd(timeouts, 1u);
      return;
    }
  }
}

// The host releases a gate kernel only after it has seen other work of the
// step finish, work that eagerly never waits for the gate (the variants as in
// tests/sim/sim_gated_release.cc):
//   exit        gate and work on stream A, work on B; sync B, then release.
//   exit_legacy the same with A the legacy default stream (B non-blocking).
//   entry       the gate is issued on A before the step (a stream query);
//               the step has work on A and B; sync B, then release.
//   mid_record  on A: work, record E, the gate, work; sync E, then release.
//   mid_wait    on C: the gate, work, record E, a query; on A: work, record
//               F, wait E, work reading C's result; sync F, then release.
//   legacy_mixed_exit   the gate and work on C (non-blocking), work on the
//               legacy stream, then on a blocking stream D (which eagerly waits
//               for the legacy work, not for C); sync D, then release.
//   legacy_mixed_entry  the gate on C issued before the step; the step as in
//               legacy_mixed_exit; sync the legacy stream, then release.
//   fork_join   PyTorch's side stream: the legacy stream forks C (event E)
//               and joins it back (event F), then the gate on C; sync the
//               legacy stream, then release. (graft may launch a forking and
//               joining graph on the legacy stream, but not with the gate in
//               it.)
// Eagerly no gate ever times out; a replay that makes the awaited work wait
// for the gate makes every gate time out (a second each).
void gatedRelease(const char* variant) {
  cudaStream_t a = nonBlockingStream(), b = nonBlockingStream(), c = nonBlockingStream();
  uint32_t* host = nullptr;
  CK(cudaHostAlloc(&host, 64, cudaHostAllocMapped));
  uint32_t* dev = nullptr;
  CK(cudaHostGetDevicePointer(&dev, host, 0));
  host[0] = 0;  // the gate flag
  host[1] = 0;  // timeouts
  int clockKHz = 0;
  CK(cudaDeviceGetAttribute(&clockKHz, cudaDevAttrClockRate, 0));
  const long long maxCycles = (long long)clockKHz * 1000;  // about a second
  uint32_t *x = deviceBuffer(71), *y = deviceBuffer(72), *z = deviceBuffer(73), *w = deviceBuffer(74);
  // Load both kernels first: the first launch of a kernel may take long.
  gateKernel<<<1, 1>>>(dev, 0, dev + 1, maxCycles);
  mix<<<kGrid, kBlock>>>(y, x, kN, 0);
  CK(cudaDeviceSynchronize());
  const std::string v = variant;
  if (v == "exit_legacy") a = cudaStreamLegacy;
  cudaStream_t d = nullptr;
  uint32_t *u = nullptr, *t = nullptr;
  if (v == "legacy_mixed_exit" || v == "legacy_mixed_entry") {
    CK(cudaStreamCreateWithFlags(&d, cudaStreamDefault));
    u = deviceBuffer(75);
    t = deviceBuffer(76);
  }
  const int iters = g_iters / 5;
  auto gate = [&](int i, cudaStream_t s) { gateKernel<<<1, 1, 0, s>>>(dev, uint32_t(i + 1), dev + 1, maxCycles); };
  auto release = [&](int i) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    *reinterpret_cast<volatile uint32_t*>(host) = uint32_t(i + 1);
  };
  for (int i = 0; i < iters; ++i) {
    if (v == "exit" || v == "exit_legacy" || v == "entry") {
      gate(i, a);
      if (v == "entry") (void)cudaStreamQuery(a);  // the gate is issued before the step
      mix<<<kGrid, kBlock, 0, a>>>(y, w, kN, i);  // A and B share no buffer
      mix<<<kGrid, kBlock, 0, b>>>(x, z, kN, i);
      mix<<<kGrid, kBlock, 0, b>>>(z, x, kN, i);
      mix<<<kGrid, kBlock, 0, b>>>(x, z, kN, i + 1);
      CKL();
      CK(cudaStreamSynchronize(b));
      release(i);
      CK(cudaStreamSynchronize(a));
    } else if (v == "legacy_mixed_exit" || v == "legacy_mixed_entry") {
      gate(i, c);
      if (v == "legacy_mixed_entry") (void)cudaStreamQuery(c);  // the gate is issued before the step
      mix<<<kGrid, kBlock, 0, c>>>(u, t, kN, i);  // C shares no buffer with the others
      mix<<<kGrid, kBlock, 0, cudaStreamLegacy>>>(y, w, kN, i);
      mix<<<kGrid, kBlock, 0, d>>>(x, y, kN, i);  // reads the legacy stream's y
      mix<<<kGrid, kBlock, 0, d>>>(z, x, kN, i);
      CKL();
      CK(cudaStreamSynchronize(v == "legacy_mixed_exit" ? d : cudaStreamLegacy));
      release(i);
      CK(cudaStreamSynchronize(d));
      CK(cudaStreamSynchronize(c));
    } else if (v == "fork_join") {
      cudaEvent_t e, f;
      CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      CK(cudaEventCreateWithFlags(&f, cudaEventDisableTiming));
      mix<<<kGrid, kBlock, 0, cudaStreamLegacy>>>(x, y, kN, i);
      CK(cudaEventRecord(e, cudaStreamLegacy));
      CK(cudaStreamWaitEvent(c, e, 0));
      mix<<<kGrid, kBlock, 0, c>>>(z, x, kN, i);  // reads the legacy stream's x
      CK(cudaEventRecord(f, c));
      CK(cudaStreamWaitEvent(cudaStreamLegacy, f, 0));
      mix<<<kGrid, kBlock, 0, cudaStreamLegacy>>>(w, z, kN, i);  // reads C's z
      gate(i, c);
      CKL();
      CK(cudaStreamSynchronize(cudaStreamLegacy));
      release(i);
      CK(cudaStreamSynchronize(c));
      CK(cudaEventDestroy(f));
      CK(cudaEventDestroy(e));
    } else if (v == "mid_record") {
      cudaEvent_t e;
      CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      mix<<<kGrid, kBlock, 0, a>>>(x, z, kN, i);
      mix<<<kGrid, kBlock, 0, a>>>(z, x, kN, i);
      CK(cudaEventRecord(e, a));
      gate(i, a);
      mix<<<kGrid, kBlock, 0, a>>>(y, x, kN, i);
      CKL();
      CK(cudaEventSynchronize(e));
      release(i);
      CK(cudaStreamSynchronize(a));
      CK(cudaEventDestroy(e));
    } else {  // mid_wait
      cudaEvent_t e, f;
      CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      CK(cudaEventCreateWithFlags(&f, cudaEventDisableTiming));
      gate(i, c);
      mix<<<kGrid, kBlock, 0, c>>>(z, w, kN, i);
      CK(cudaEventRecord(e, c));
      (void)cudaStreamQuery(c);  // the gate, z's step and the record are issued before the step
      mix<<<kGrid, kBlock, 0, a>>>(x, y, kN, i);
      mix<<<kGrid, kBlock, 0, a>>>(y, x, kN, i);
      CK(cudaEventRecord(f, a));
      CK(cudaStreamWaitEvent(a, e, 0));
      mix<<<kGrid, kBlock, 0, a>>>(w, z, kN, i);  // reads this step's z
      CKL();
      CK(cudaEventSynchronize(f));
      release(i);
      CK(cudaStreamSynchronize(a));
      CK(cudaStreamSynchronize(c));
      CK(cudaEventDestroy(f));  // in this order each may get its handle back
      CK(cudaEventDestroy(e));
    }
  }
  CK(cudaDeviceSynchronize());
  print("timeouts", 0, host[1]);
  uint64_t digest = deviceDigest(x, kN * 4) ^ deviceDigest(y, kN * 4) ^ deviceDigest(z, kN * 4) ^
                    deviceDigest(w, kN * 4);
  if (u) digest ^= deviceDigest(u, kN * 4);
  print("end", 0, digest);
  if (d) CK(cudaStreamDestroy(d));
}
void gatedExit() { gatedRelease("exit"); }
void gatedExitLegacy() { gatedRelease("exit_legacy"); }
void gatedEntry() { gatedRelease("entry"); }
void gatedMidRecord() { gatedRelease("mid_record"); }
void gatedMidWait() { gatedRelease("mid_wait"); }
void gatedLegacyMixedExit() { gatedRelease("legacy_mixed_exit"); }
void gatedLegacyMixedEntry() { gatedRelease("legacy_mixed_entry"); }
void gatedForkJoin() { gatedRelease("fork_join"); }

// ---------------------------------------------------------------- more traps (eighteenth session)

// The legacy callback API: cudaStreamAddCallback after a kernel that writes a
// mapped word; the callback reads that word (the kernel must have run), checks
// the stream handle and status it is given, and counts. On a blocking stream
// and on the legacy stream in turn.
struct CallbackLog {
  cudaStream_t expect;
  volatile uint32_t* mapped;
  uint32_t calls;
  uint32_t wrong;
  uint64_t digest;
};
void CUDART_CB onStreamCallback(cudaStream_t stream, cudaError_t status, void* p) {
  auto* log = static_cast<CallbackLog*>(p);
  if (stream != log->expect || status != cudaSuccess) ++log->wrong;
  log->digest = log->digest * 1099511628211ull + *log->mapped;
  ++log->calls;
}
void streamCallback() {
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  uint32_t* host = nullptr;
  CK(cudaHostAlloc(&host, 4096, cudaHostAllocMapped));
  uint32_t* dev = nullptr;
  CK(cudaHostGetDevicePointer(&dev, host, 0));
  uint32_t *a = deviceBuffer(110), *b = deviceBuffer(111);
  CallbackLog onS{s, host, 0, 0, 0}, onLegacy{nullptr, host + 64, 0, 0, 0};
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, i);
    writeMapped<<<kGrid, kBlock, 0, s>>>(dev, uint32_t(i * 3 + 1), b, kN);
    CK(cudaStreamAddCallback(s, onStreamCallback, &onS, 0));
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, i + 1);
    mix<<<kGrid, kBlock, 0, 0>>>(a, b, kN, i + 2);
    writeMapped<<<kGrid, kBlock, 0, 0>>>(dev + 64, uint32_t(i * 5 + 2), a, kN);
    CK(cudaStreamAddCallback(0, onStreamCallback, &onLegacy, 0));
    CKL();
    if (checkpoint(i, s, "a", a)) {
      CK(cudaDeviceSynchronize());
      print("callbacks", int(onS.calls + onLegacy.calls), onS.digest ^ onLegacy.digest);
    }
  }
  CK(cudaDeviceSynchronize());
  print("wrong", int(onS.wrong + onLegacy.wrong), onS.digest * 31 + onLegacy.digest);
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

// Memsets whose target is not device memory: pinned, mapped host memory
// (named by its device pointer) and managed memory, each read by a kernel
// right after.
void memsetHost() {
  cudaStream_t s = nonBlockingStream();
  uint32_t* host = nullptr;
  CK(cudaHostAlloc(&host, 4096, cudaHostAllocMapped));
  uint32_t* dev = nullptr;
  CK(cudaHostGetDevicePointer(&dev, host, 0));
  uint32_t* managed = nullptr;
  CK(cudaMallocManaged(&managed, 4096));
  std::memset(host, 0, 4096);
  std::memset(managed, 0, 4096);
  uint32_t *a = deviceBuffer(112), *b = deviceBuffer(113);
  bool hostOk = cudaMemsetAsync(dev, 1, 256 * 4, s) == cudaSuccess;
  cudaGetLastError();
  CK(cudaStreamSynchronize(s));
  print("memset_on_host_memory", hostOk, 0);
  for (int i = 0; i < g_iters; ++i) {
    if (hostOk) CK(cudaMemsetAsync(dev, (i * 7) & 0xff, 256 * 4, s));
    readMapped<<<kGrid, kBlock, 0, s>>>(a, dev, kN);
    CK(cudaMemsetAsync(managed, (i * 11 + 3) & 0xff, 256 * 4, s));
    CKD(cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(managed + 128), uint32_t(i) * 2654435761u, 64, s));
    readMapped<<<kGrid, kBlock, 0, s>>>(b, managed, kN);
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, i);
    CKL();
    if (checkpoint(i, s, "a", a)) print("host", i, deviceDigest(dev, 1024) ^ deviceDigest(managed, 1024));
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

// Two host threads in lockstep through events: the producer computes on its
// stream, snapshots into one of four slots and records that slot's event; the
// consumer, told by the producer through an atomic (no CUDA call), waits on
// the event on its own stream, reads the slot and records its own event,
// which the producer waits on before it overwrites that slot four steps
// later. Every wait must bind to the record the host handshake names.
void crossThreadEvent() {
  constexpr int kSlots = 4;
  cudaStream_t ps = nonBlockingStream(), cs = nonBlockingStream();
  cudaEvent_t produced[kSlots], consumed[kSlots];
  uint32_t* slot[kSlots];
  for (int k = 0; k < kSlots; ++k) {
    CK(cudaEventCreateWithFlags(&produced[k], cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&consumed[k], cudaEventDisableTiming));
    slot[k] = deviceBuffer(120 + k);
  }
  uint32_t *a = deviceBuffer(114), *b = deviceBuffer(115), *base = deviceBuffer(148);
  std::atomic<int> published{-1}, done{-1};
  std::thread consumer([&] {
    for (int i = 0; i < g_iters; ++i) {
      while (published.load(std::memory_order_acquire) < i) std::this_thread::yield();
      CK(cudaStreamWaitEvent(cs, produced[i % kSlots], 0));
      mix<<<kGrid, kBlock, 0, cs>>>(b, slot[i % kSlots], kN, uint32_t(i));
      CKL();
      CK(cudaEventRecord(consumed[i % kSlots], cs));
      done.store(i, std::memory_order_release);
    }
  });
  for (int i = 0; i < g_iters; ++i) {
    // Slot i % kSlots was last read by the consumer's step i - kSlots.
    if (i >= kSlots) {
      while (done.load(std::memory_order_acquire) < i - kSlots) std::this_thread::yield();
      CK(cudaStreamWaitEvent(ps, consumed[i % kSlots], 0));
    }
    mix<<<kGrid, kBlock, 0, ps>>>(a, base, kN, uint32_t(i));
    mix<<<kGrid, kBlock, 0, ps>>>(slot[i % kSlots], a, kN, uint32_t(i) * 3u);
    CKL();
    CK(cudaEventRecord(produced[i % kSlots], ps));
    published.store(i, std::memory_order_release);
  }
  consumer.join();
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

// Stream memory operations as a semaphore between two streams: stream A
// waits (on the GPU) until B has read the previous snapshot, computes and
// writes a new one, and raises its flag; B waits for that flag, reads the
// snapshot and raises its own. Every wait is issued after the write it waits
// for (a wait issued before could block a hardware queue that the write's
// stream shares, and hang eagerly too).
void waitValue() {
  cudaStream_t sa = nonBlockingStream(), sb = nonBlockingStream();
  uint32_t* flags = nullptr;
  CK(cudaMalloc(&flags, 64));
  CK(cudaMemset(flags, 0, 64));
  const CUdeviceptr aFlag = reinterpret_cast<CUdeviceptr>(flags), bFlag = aFlag + 32;
  uint32_t *a = deviceBuffer(116), *snap = deviceBuffer(117), *b = deviceBuffer(118), *base = deviceBuffer(149);
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t v = uint32_t(i + 1);
    CKD(cuStreamWaitValue32(reinterpret_cast<CUstream>(sa), bFlag, v - 1, CU_STREAM_WAIT_VALUE_GEQ));
    mix<<<kGrid, kBlock, 0, sa>>>(a, b, kN, uint32_t(i));
    CK(cudaMemcpyAsync(snap, a, kN * 4, cudaMemcpyDeviceToDevice, sa));
    mix<<<kGrid, kBlock, 0, sa>>>(a, base, kN, uint32_t(i) * 5u);
    CKD(cuStreamWriteValue32(reinterpret_cast<CUstream>(sa), aFlag, v, CU_STREAM_WRITE_VALUE_DEFAULT));
    CKD(cuStreamWaitValue32(reinterpret_cast<CUstream>(sb), aFlag, v, CU_STREAM_WAIT_VALUE_GEQ));
    mix<<<kGrid, kBlock, 0, sb>>>(b, snap, kN, uint32_t(i));
    CKD(cuStreamWriteValue32(reinterpret_cast<CUstream>(sb), bFlag, v, CU_STREAM_WRITE_VALUE_DEFAULT));
    CKL();
    if (i % 100 == 99) {
      CK(cudaStreamSynchronize(sb));
      print("b", i, deviceDigest(b, kN * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(flags, 64));
}

// cudaMalloc and cudaFree every step: the scratch buffer's address changes
// (sizes alternate), so the step's memset, copies and kernels name new memory
// each time, and memory freed before may come back at a new use.
void reallocEachStep() {
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  uint32_t *a = deviceBuffer(119), *b = deviceBuffer(124);
  uint32_t* keep = nullptr;  // freed every fifth step, after the step that uses it
  for (int i = 0; i < g_iters; ++i) {
    const size_t words = (i % 3 == 1) ? 3 * kN : kN;
    uint32_t* t = nullptr;
    CK(cudaMalloc(&t, words * 4));
    if (!keep) CK(cudaMalloc(&keep, kN * 4 + 4096 * (i % 4)));
    CK(cudaMemsetAsync(t, (i * 13) & 0xff, words * 4, s));
    mix<<<kGrid, kBlock, 0, s>>>(t, a, kN, uint32_t(i));
    CK(cudaMemcpyAsync(keep, t, kN * 4, cudaMemcpyDeviceToDevice, s));
    mix<<<kGrid, kBlock, 0, s>>>(b, keep, kN, uint32_t(i) + 1);
    CK(cudaMemcpyAsync(a + 64, b, (kN - 64) * 4, cudaMemcpyDeviceToDevice, s));
    mix2<<<kGrid, kBlock, 0, s>>>(a, t, keep, kN, uint32_t(i));
    CKL();
    CK(cudaFree(t));
    if (i % 5 == 4) {
      CK(cudaFree(keep));
      keep = nullptr;
    }
    checkpoint(i, s, "a", a);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

// Device copies and memsets at every alignment: each op keeps its size while
// its source and destination move by a few bytes from step to step, so a
// replay's copies get other alignments than the ones they were built with
// (graft's copy kernels choose their path at run time), with sources at
// another offset than their destinations, odd starts and odd lengths.
void unalignedCopies() {
  cudaStream_t s = nonBlockingStream();
  constexpr int kWords = 4 * kN;  // 256 KiB
  uint32_t *a = deviceBuffer(140, kWords), *b = deviceBuffer(141, kWords);
  auto* A = reinterpret_cast<unsigned char*>(a);
  auto* B = reinterpret_cast<unsigned char*>(b);
  for (int i = 0; i < g_iters; ++i) {
    const int k = i % 16;
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i));
    CK(cudaMemcpyAsync(B + 3 + k, A + 1 + 17 * k, 40000, cudaMemcpyDeviceToDevice, s));
    CK(cudaMemcpyAsync(B + 50000 + (k & 3), A + 40001 + 2 * k, 4097, cudaMemcpyDeviceToDevice, s));
    CK(cudaMemcpyAsync(B + 60000 + 16 * k, A + 30005 + 16 * k, 333, cudaMemcpyDeviceToDevice, s));
    CK(cudaMemcpyAsync(B + 70001 + 16 * k, A + 100000 + 4 * k, 150001, cudaMemcpyDeviceToDevice, s));
    CK(cudaMemcpyAsync(B + 230000 + k, A + 220000 + k, 7, cudaMemcpyDeviceToDevice, s));
    CK(cudaMemsetAsync(B + 7 + k, (i * 5) & 0xff, 10001, s));
    CK(cudaMemset2DAsync(B + 20001 + k, 1000, (i * 3) & 0xff, 333, 9, s));
    CKD(cuMemsetD16Async(reinterpret_cast<CUdeviceptr>(B + 40002 + 2 * k), uint16_t(0xa5c3 + i), 1001, s));
    CKD(cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(B + 45004 + 4 * k), 0x9e3779b9u + uint32_t(i), 777, s));
    mix2<<<kGrid, kBlock, 0, s>>>(a, b, b + kN, kN, uint32_t(i));
    mix2<<<kGrid, kBlock, 0, s>>>(a + 2 * kN, b + 2 * kN, b + 3 * kN, kN, uint32_t(i) + 7);
    CKL();
    if (checkpoint(i, s, "a", a, kWords)) print("b", i, deviceDigest(b, size_t(kWords) * 4));
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, size_t(kWords) * 4) ^ deviceDigest(b, size_t(kWords) * 4));
}

// Virtual memory management, as PyTorch's expandable segments use it: one
// reserved address range, and every 20 steps (after a synchronize) the other
// of two physical allocations is mapped there, so the same addresses name
// other memory (each keeps its own contents). Memsets, copies and kernels
// use the range every step; every 60 steps the range itself is freed and
// reserved anew (new addresses).
void vmmRemap() {
  CK(cudaFree(nullptr));  // the runtime's primary context, current from here on
  CUdevice device;
  CKD(cuCtxGetDevice(&device));
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  size_t granularity = 0;
  CKD(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  const size_t bytes = ((kN * 4 + granularity - 1) / granularity) * granularity;
  CUmemGenericAllocationHandle physical[2];
  CKD(cuMemCreate(&physical[0], bytes, &prop, 0));
  CKD(cuMemCreate(&physical[1], bytes, &prop, 0));
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CUdeviceptr range = 0;
  int mapped = -1;
  auto mapOnto = [&](int which) {
    if (mapped >= 0) CKD(cuMemUnmap(range, bytes));
    CKD(cuMemMap(range, bytes, 0, physical[which], 0));
    CKD(cuMemSetAccess(range, bytes, &access, 1));
    mapped = which;
  };
  cudaStream_t s = nonBlockingStream();
  uint32_t *a = deviceBuffer(125), *b = deviceBuffer(126);
  for (int i = 0; i < g_iters; ++i) {
    if (i % 20 == 0) {
      CK(cudaStreamSynchronize(s));
      if (i % 60 == 0) {
        if (range) {
          CKD(cuMemUnmap(range, bytes));
          CKD(cuMemAddressFree(range, bytes));
          mapped = -1;
        }
        CKD(cuMemAddressReserve(&range, bytes, 0, 0, 0));
      }
      mapOnto((i / 20) % 2);
      if (i < 40) CK(cudaMemsetAsync(reinterpret_cast<void*>(range), 0x5a + i, bytes, s));
    }
    auto* v = reinterpret_cast<uint32_t*>(range);
    CKD(cuMemsetD32Async(range + 4 * (kN - 64), uint32_t(i) * 40503u, 64, reinterpret_cast<CUstream>(s)));
    mix<<<kGrid, kBlock, 0, s>>>(v, a, kN, uint32_t(i));
    CK(cudaMemcpyAsync(b, v, kN * 4, cudaMemcpyDeviceToDevice, s));
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i) + 1);
    CK(cudaMemcpyAsync(v + 128, a, 256 * 4, cudaMemcpyDeviceToDevice, s));
    CKL();
    checkpoint(i, s, "a", a);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^
                      deviceDigest(reinterpret_cast<void*>(range), kN * 4));
}

// A second context on the same device next to the primary one: every step
// works in the primary context (runtime launches on the legacy stream), then
// makes the second context current and works there through the driver API
// on that context's own legacy stream (NULL), then returns. A NULL stream
// names a different stream in each context.
void twoContexts() {
  CUcontext primary = nullptr, second = nullptr;
  CKD(cuCtxGetCurrent(&primary));
  CK(cudaFree(nullptr));  // the runtime's primary context, current from here on
  CUdevice device;
  CKD(cuCtxGetDevice(&device));
  CKD(cuCtxCreate(&second, nullptr, 0, device));  // becomes current
  CUmodule module = nullptr;
  CUfunction inc = nullptr;
  CKD(cuModuleLoadData(&module, kIncPtx));
  CKD(cuModuleGetFunction(&inc, module, "trapInc"));
  CUdeviceptr x = 0, y = 0;
  CKD(cuMemAlloc(&x, kN * 4));
  CKD(cuMemAlloc(&y, kN * 4));
  CKD(cuMemsetD32(x, 7, kN));
  CKD(cuMemsetD32(y, 9, kN));
  CKD(cuCtxSetCurrent(primary));
  uint32_t *a = deviceBuffer(127), *b = deviceBuffer(128);
  auto launchInc = [&](CUdeviceptr dst, CUdeviceptr src, uint32_t v) {
    int n = kN;
    void* params[] = {&dst, &src, &n, &v};
    CKD(cuLaunchKernel(inc, kGrid, 1, 1, kBlock, 1, 1, 0, nullptr, params, nullptr));
  };
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, 0>>>(a, b, kN, uint32_t(i));
    mix<<<kGrid, kBlock, 0, 0>>>(b, a, kN, uint32_t(i) + 1);
    CKL();
    CKD(cuCtxSetCurrent(second));
    launchInc(x, y, uint32_t(i));
    CKD(cuMemsetD32Async(y + 4 * (i % 64), uint32_t(i), 16, nullptr));
    launchInc(y, x, uint32_t(i) * 3u);
    CKD(cuMemcpyDtoDAsync(x + 4096, y, 1024, nullptr));
    CKD(cuCtxSetCurrent(primary));
    mix<<<kGrid, kBlock, 0, 0>>>(a, b, kN, uint32_t(i) + 2);
    CKL();
    if (i % 100 == 99) {
      print("a", i, deviceDigest(a, kN * 4));
      CKD(cuCtxSetCurrent(second));
      std::vector<uint32_t> h(kN);
      CKD(cuMemcpyDtoH(h.data(), x, kN * 4));
      Digest d;
      d.add(h.data(), kN * 4);
      CKD(cuCtxSetCurrent(primary));
      print("x", i, d.h);
    }
  }
  CK(cudaDeviceSynchronize());
  CKD(cuCtxSetCurrent(second));
  std::vector<uint32_t> h(kN);
  CKD(cuMemcpyDtoH(h.data(), y, kN * 4));
  Digest d;
  d.add(h.data(), kN * 4);
  CKD(cuCtxSetCurrent(primary));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ d.h);
  CKD(cuCtxDestroy(second));
}

// Two GPUs driven from one thread (needs two; with one it prints one line, the
// same with and without graft). Each step: kernels on GPU 0's stream, the
// result copied to GPU 1 by cudaMemcpyPeerAsync on GPU 0's stream, an event
// recorded there that GPU 1's stream waits on, kernels on GPU 1 (one reads
// GPU 0's memory directly, peer access on), the result copied back by
// cudaMemcpyAsync (device to device across GPUs) on GPU 1's stream, whose
// event GPU 0's stream waits on before the next step. Device switches
// (cudaSetDevice) every few ops; every 100th step a checkpoint reads both.
void twoDevices() {
  int devices = 0;
  CK(cudaGetDeviceCount(&devices));
  if (devices < 2) {
    print("one_device", 0, 0);
    return;
  }
  int canAccess = 0;
  CK(cudaDeviceCanAccessPeer(&canAccess, 1, 0));
  cudaStream_t s[2];
  cudaEvent_t done[2];
  uint32_t *a[2], *b[2];
  for (int d = 0; d < 2; ++d) {
    CK(cudaSetDevice(d));
    s[d] = nonBlockingStream();
    CK(cudaEventCreateWithFlags(&done[d], cudaEventDisableTiming));
    a[d] = deviceBuffer(140 + d);
    b[d] = deviceBuffer(150 + d);
  }
  CK(cudaSetDevice(1));
  if (canAccess) CK(cudaDeviceEnablePeerAccess(0, 0));
  for (int i = 0; i < g_iters; ++i) {
    CK(cudaSetDevice(0));
    if (i > 0) CK(cudaStreamWaitEvent(s[0], done[1], 0));
    mix<<<kGrid, kBlock, 0, s[0]>>>(b[0], a[0], kN, uint32_t(i));
    mix<<<kGrid, kBlock, 0, s[0]>>>(a[0], b[0], kN, uint32_t(i) * 3u);
    CKL();
    CK(cudaMemcpyPeerAsync(a[1], 1, a[0], 0, kN * 4, s[0]));
    CK(cudaEventRecord(done[0], s[0]));
    CK(cudaSetDevice(1));
    CK(cudaStreamWaitEvent(s[1], done[0], 0));
    mix<<<kGrid, kBlock, 0, s[1]>>>(b[1], a[1], kN, uint32_t(i) + 5);
    if (canAccess) mix2<<<kGrid, kBlock, 0, s[1]>>>(a[1], b[1], b[0], kN, uint32_t(i));  // b[0] on GPU 0
    else mix<<<kGrid, kBlock, 0, s[1]>>>(a[1], b[1], kN, uint32_t(i));
    CKL();
    CK(cudaMemcpyAsync(b[0], a[1], kN * 4, cudaMemcpyDeviceToDevice, s[1]));
    CK(cudaEventRecord(done[1], s[1]));
    if (i % 100 == 99) {
      CK(cudaStreamSynchronize(s[1]));
      print("gpu1", i, deviceDigest(a[1], kN * 4));
      CK(cudaSetDevice(0));
      print("gpu0", i, deviceDigest(b[0], kN * 4));
    }
  }
  for (int d = 0; d < 2; ++d) {
    CK(cudaSetDevice(d));
    CK(cudaDeviceSynchronize());
  }
  CK(cudaSetDevice(0));
  print("end", 0, deviceDigest(a[0], kN * 4) ^ deviceDigest(b[0], kN * 4) ^ deviceDigest(a[1], kN * 4) ^
                      deviceDigest(b[1], kN * 4));
}

// Library-style kernels: CUB's radix sort (several kernels whose parameter
// structs are large templates), inclusive scan and reduction, every step, on
// preallocated temporary storage, between kernels of the program's own.
void cubAlgorithms() {
  cudaStream_t s = nonBlockingStream();
  constexpr int n = kN;
  uint32_t *keysIn = deviceBuffer(129), *keysOut = deviceBuffer(130);
  uint32_t *valsIn = deviceBuffer(131), *valsOut = deviceBuffer(132);
  uint32_t *scan = deviceBuffer(133), *sums = deviceBuffer(134, 64);
  size_t sortBytes = 0, scanBytes = 0, reduceBytes = 0;
  CK(cub::DeviceRadixSort::SortPairs(nullptr, sortBytes, keysIn, keysOut, valsIn, valsOut, n, 0, 32, s));
  CK(cub::DeviceScan::InclusiveSum(nullptr, scanBytes, keysOut, scan, n, s));
  CK(cub::DeviceReduce::Sum(nullptr, reduceBytes, scan, sums, n, s));
  void* temp = nullptr;
  const size_t tempBytes = std::max(sortBytes, std::max(scanBytes, reduceBytes));
  CK(cudaMalloc(&temp, tempBytes));
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(keysIn, scan, n, uint32_t(i));
    mix<<<kGrid, kBlock, 0, s>>>(valsIn, keysIn, n, uint32_t(i) + 1);
    size_t bytes = tempBytes;
    CK(cub::DeviceRadixSort::SortPairs(temp, bytes, keysIn, keysOut, valsIn, valsOut, n, 0, 32, s));
    bytes = tempBytes;
    CK(cub::DeviceScan::InclusiveSum(temp, bytes, keysOut, scan, n, s));
    bytes = tempBytes;
    CK(cub::DeviceReduce::Sum(temp, bytes, valsOut, sums + (i % 64), n, s));
    CKL();
    if (checkpoint(i, s, "scan", scan)) print("sums", i, deviceDigest(sums, 64 * 4));
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(scan, n * 4) ^ deviceDigest(valsOut, n * 4) ^ deviceDigest(sums, 64 * 4));
}

// Texture objects over linear memory, destroyed and created again every 50
// steps over the other of two buffers (the driver may hand back the same
// handle value for the new object).
__global__ void readTexture(uint32_t* dst, cudaTextureObject_t tex, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 5) + tex1Dfetch<uint32_t>(tex, (k * 17 + 3) % n) + salt;
}
void textureObject() {
  cudaStream_t s = nonBlockingStream();
  uint32_t *a = deviceBuffer(135), *b = deviceBuffer(136), *src[2] = {deviceBuffer(137), deviceBuffer(138)};
  cudaTextureObject_t tex = 0;
  for (int i = 0; i < g_iters; ++i) {
    if (i % 50 == 0) {
      if (tex) {
        CK(cudaStreamSynchronize(s));
        CK(cudaDestroyTextureObject(tex));
      }
      cudaResourceDesc res = {};
      res.resType = cudaResourceTypeLinear;
      res.res.linear.devPtr = src[(i / 50) % 2];
      res.res.linear.desc = cudaCreateChannelDesc<uint32_t>();
      res.res.linear.sizeInBytes = kN * 4;
      cudaTextureDesc td = {};
      td.readMode = cudaReadModeElementType;
      CK(cudaCreateTextureObject(&tex, &res, &td, nullptr));
    }
    readTexture<<<kGrid, kBlock, 0, s>>>(a, tex, kN, uint32_t(i));
    mix<<<kGrid, kBlock, 0, s>>>(src[(i / 50) % 2], a, kN, uint32_t(i));
    readTexture<<<kGrid, kBlock, 0, s>>>(b, tex, kN, uint32_t(i) + 1);
    CKL();
    checkpoint(i, s, "a", a);
  }
  CK(cudaStreamSynchronize(s));
  CK(cudaDestroyTextureObject(tex));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

// Launch attributes graft may keep in a graph (priority, memory
// synchronization domain, an L2 access policy window) and ones it must not
// (an event recorded when the kernel's blocks have all started, or may let
// dependents start), on streams of different priorities. The events order a
// kernel on another stream.
void launchAttributes() {
  int least = 0, greatest = 0;
  CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t lo, hi;
  CK(cudaStreamCreateWithPriority(&lo, cudaStreamNonBlocking, least));
  CK(cudaStreamCreateWithPriority(&hi, cudaStreamNonBlocking, greatest));
  cudaEvent_t started, programmatic;
  CK(cudaEventCreateWithFlags(&started, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&programmatic, cudaEventDisableTiming));
  uint32_t *a = deviceBuffer(139), *b = deviceBuffer(140), *c = deviceBuffer(141);
  auto launch = [&](cudaStream_t s, uint32_t* dst, const uint32_t* src, uint32_t salt, cudaLaunchAttribute* attrs,
                    unsigned numAttrs) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(kGrid);
    cfg.blockDim = dim3(kBlock);
    cfg.stream = s;
    cfg.attrs = attrs;
    cfg.numAttrs = numAttrs;
    CK(cudaLaunchKernelEx(&cfg, mix, dst, src, kN, salt));
  };
  for (int i = 0; i < g_iters; ++i) {
    cudaLaunchAttribute attrs[3] = {};
    attrs[0].id = cudaLaunchAttributePriority;
    attrs[0].val.priority = (i % 3 == 0) ? greatest : least;
    attrs[1].id = cudaLaunchAttributeMemSyncDomain;
    attrs[1].val.memSyncDomain = (i % 2) ? cudaLaunchMemSyncDomainRemote : cudaLaunchMemSyncDomainDefault;
    attrs[2].id = cudaLaunchAttributeAccessPolicyWindow;
    attrs[2].val.accessPolicyWindow.base_ptr = b;
    attrs[2].val.accessPolicyWindow.num_bytes = kN * 4;
    attrs[2].val.accessPolicyWindow.hitRatio = 0.5f;
    attrs[2].val.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
    attrs[2].val.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    launch(lo, a, b, uint32_t(i), attrs, 3);
    // The producer below records an event when its blocks have all started
    // (even steps) or triggered completion (odd steps), on which `hi` waits.
    cudaLaunchAttribute ev[1] = {};
    ev[0].id = (i % 2) ? cudaLaunchAttributeProgrammaticEvent : cudaLaunchAttributeLaunchCompletionEvent;
    if (i % 2) {
      ev[0].val.programmaticEvent.event = programmatic;
      ev[0].val.programmaticEvent.triggerAtBlockStart = 0;
    } else {
      ev[0].val.launchCompletionEvent.event = started;
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(kGrid);
    cfg.blockDim = dim3(kBlock);
    cfg.stream = lo;
    cfg.attrs = ev;
    cfg.numAttrs = 1;
    CK(cudaLaunchKernelEx(&cfg, pdlPrimary, c, a, kN, uint32_t(i)));
    // Either event comes after `a` was written (the producer starts once the
    // kernel before it on `lo` finished); the producer only reads `a`.
    CK(cudaStreamWaitEvent(hi, (i % 2) ? programmatic : started, 0));
    mix<<<kGrid, kBlock, 0, hi>>>(b, a, kN, uint32_t(i) + 3);
    CK(cudaEventRecord(started, hi));
    CK(cudaStreamWaitEvent(lo, started, 0));
    launch(lo, c, b, uint32_t(i) + 5, attrs, 2);
    CKL();
    checkpoint(i, lo, "c", c);
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4));
}

// A green context (a partition of the device's SMs, CUDA 12.4+) with its own
// stream, next to a stream of the primary context; events join the two every
// step. Devices or drivers without green contexts print one line instead.
void greenContext() {
  CK(cudaFree(nullptr));  // the runtime's primary context, current from here on
  CUdevice device;
  CKD(cuCtxGetDevice(&device));
  CUdevResource all = {}, parts[2] = {}, rest = {};
  unsigned groups = 1;
  CUgreenCtx green = nullptr;
  CUstream gs = nullptr;
  CUdevResourceDesc desc = nullptr;
  bool ok = cuDeviceGetDevResource(device, &all, CU_DEV_RESOURCE_TYPE_SM) == CUDA_SUCCESS &&
            cuDevSmResourceSplitByCount(parts, &groups, &all, &rest, 0, 16) == CUDA_SUCCESS && groups >= 1 &&
            cuDevResourceGenerateDesc(&desc, parts, 1) == CUDA_SUCCESS &&
            cuGreenCtxCreate(&green, desc, device, CU_GREEN_CTX_DEFAULT_STREAM) == CUDA_SUCCESS &&
            cuGreenCtxStreamCreate(&gs, green, CU_STREAM_NON_BLOCKING, 0) == CUDA_SUCCESS;
  uint32_t* probe = deviceBuffer(151);
  if (ok) {
    // A runtime launch into the green context's stream (the primary context
    // is current); where the driver refuses it, the scenario stops here.
    mix<<<kGrid, kBlock, 0, reinterpret_cast<cudaStream_t>(gs)>>>(probe, probe + kN / 2, kN / 2, 1);
    ok = cudaGetLastError() == cudaSuccess && cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(gs)) == cudaSuccess;
  }
  print("green_context", ok, 0);
  if (!ok) return;
  cudaStream_t s = nonBlockingStream();
  cudaEvent_t e, f;
  CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&f, cudaEventDisableTiming));
  uint32_t *a = deviceBuffer(142), *b = deviceBuffer(143), *c = deviceBuffer(150);
  auto* g = reinterpret_cast<cudaStream_t>(gs);
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i));
    CK(cudaEventRecord(e, s));
    CK(cudaStreamWaitEvent(g, e, 0));
    mix<<<kGrid, kBlock, 0, g>>>(b, a, kN, uint32_t(i) + 1);
    mix<<<kGrid, kBlock, 0, g>>>(c, b, kN, uint32_t(i) + 2);
    CK(cudaEventRecord(f, g));
    CK(cudaStreamWaitEvent(s, f, 0));
    mix2<<<kGrid, kBlock, 0, s>>>(a, b, c, kN, uint32_t(i) + 3);
    CKL();
    checkpoint(i, s, "a", a);
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4));
  CKD(cuStreamDestroy(gs));
  CKD(cuGreenCtxDestroy(green));
}

// Another thread captures graphs of its own stream in thread-local mode and
// launches them, while this thread runs its loop on another stream: graft
// must step aside only for the capture, and never mix this thread's ops into
// it.
void captureOtherThread() {
  cudaStream_t s = nonBlockingStream(), t = nonBlockingStream();
  uint32_t *a = deviceBuffer(144), *b = deviceBuffer(145), *c = deviceBuffer(146), *d = deviceBuffer(147);
  std::atomic<bool> stop{false};
  std::atomic<int> captures{0};
  std::thread capturer([&] {
    int round = 0;
    while (!stop.load(std::memory_order_acquire) || round < 5) {
      cudaGraph_t g;
      cudaGraphExec_t exec;
      CK(cudaStreamBeginCapture(t, cudaStreamCaptureModeThreadLocal));
      mix<<<kGrid, kBlock, 0, t>>>(c, d, kN, uint32_t(round));
      mix<<<kGrid, kBlock, 0, t>>>(d, c, kN, uint32_t(round) + 1);
      CK(cudaStreamEndCapture(t, &g));
      CK(cudaGraphInstantiate(&exec, g, 0));
      CK(cudaGraphLaunch(exec, t));
      CK(cudaStreamSynchronize(t));
      CK(cudaGraphExecDestroy(exec));
      CK(cudaGraphDestroy(g));
      ++round;
      captures.store(round, std::memory_order_release);
    }
  });
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i));
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, uint32_t(i) + 1);
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i) + 2);
    CKL();
    checkpoint(i, s, "a", a);
  }
  stop.store(true, std::memory_order_release);
  capturer.join();
  CK(cudaDeviceSynchronize());
  // The capturer's result depends on how many rounds it ran (timing); only
  // this thread's buffers are compared.
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

// A memory pool the program made with a maximum size that holds one big
// block and a half: each step frees its block and allocates the next one on
// the same stream, which stream order lets the pool hand out again at once,
// so eagerly every allocation fits. graft defers a free past the ops it holds;
// the next allocation then finds the pool full, and graft must issue what it
// holds and retry it (cudaMallocFromPoolAsync, not only cudaMallocAsync).
void poolMaxSize() {
  cudaStream_t s = nonBlockingStream();
  uint32_t *a = deviceBuffer(38), *b = deviceBuffer(39);
  constexpr size_t kBig = size_t(64) << 20;
  int device = 0;
  CK(cudaGetDevice(&device));
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  props.maxSize = kBig + kBig / 2;
  cudaMemPool_t pool = nullptr;
  if (cudaMemPoolCreate(&pool, &props) != cudaSuccess) {
    cudaGetLastError();
    print("no pool with a maximum size here", 0, 0);
    return;
  }
  for (int i = 0; i < g_iters; ++i) {
    uint32_t* t = nullptr;
    CK(cudaMallocFromPoolAsync(&t, kBig, pool, s));
    CK(cudaMemsetAsync(t, 0, kN * 4, s));
    mix<<<kGrid, kBlock, 0, s>>>(t, a, kN, i);
    mix<<<kGrid, kBlock, 0, s>>>(b, t, kN, i);
    CK(cudaFreeAsync(t, s));
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, i);
    uint32_t* u = nullptr;
    CK(cudaMallocFromPoolAsync(&u, kBig, pool, s));  // t's memory again, eagerly
    CK(cudaMemsetAsync(u, 0, kN * 4, s));             // read below: never the old contents
    mix<<<kGrid, kBlock, 0, s>>>(u, b, kN, i + 1);
    mix<<<kGrid, kBlock, 0, s>>>(a, u, kN, i + 2);
    CK(cudaFreeAsync(u, s));
    CKL();
    checkpoint(i, s, "a", a);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
  CK(cudaMemPoolDestroy(pool));
}

constexpr Scenario kScenarios[] = {
    {"legacy_order", legacyOrder},       {"per_thread_stream", perThreadStream},
    {"event_fork_join", eventForkJoin},  {"memset_values", memsetValues},
    {"big_params", bigParams},           {"grid_change", gridChange},
    {"host_func", hostFunc},             {"pinned_round_trip", pinnedRoundTrip},
    {"mapped_memory", mappedMemory},     {"query_poll", queryPoll},
    {"spin_flag", spinFlag},             {"constant_symbol", constantSymbol},
    {"copy_kinds", copyKinds},           {"cooperative_cluster", cooperativeAndCluster},
    {"driver_launches", driverLaunches}, {"malloc_async", mallocAsync},
    {"threads", threads},                {"program_graph", programGraph},
    {"launch_errors", launchErrors},     {"sync_kinds", syncKinds},
    {"device_printf", devicePrintf},     {"event_reuse", eventReuse},
    {"sticky_fault", stickyFault},       {"device_reset", deviceReset},
    {"module_reload", moduleReload},     {"stream_recreate", streamRecreate},
    {"odd_ops", oddOps},                 {"ipc_event", ipcEvent},
    {"gated_exit", gatedExit},           {"gated_entry", gatedEntry},
    {"gated_mid_record", gatedMidRecord}, {"gated_mid_wait", gatedMidWait},
    {"gated_exit_legacy", gatedExitLegacy}, {"gated_legacy_mixed_exit", gatedLegacyMixedExit},
    {"gated_legacy_mixed_entry", gatedLegacyMixedEntry}, {"gated_fork_join", gatedForkJoin},
    {"fork_child", forkChild},           {"programmatic_launch", programmaticLaunch},
    {"churn_pending", churnPending},     {"managed_memory", managedMemory},
    {"batch_copy", batchCopy},           {"stream_callback", streamCallback},
    {"memset_host", memsetHost},         {"cross_thread_event", crossThreadEvent},
    {"wait_value", waitValue},           {"realloc_each_step", reallocEachStep},
    {"vmm_remap", vmmRemap},             {"two_contexts", twoContexts},
    {"cub_algorithms", cubAlgorithms},   {"texture_object", textureObject},
    {"launch_attributes", launchAttributes}, {"green_context", greenContext},
    {"capture_other_thread", captureOtherThread}, {"unaligned_copies", unalignedCopies},
    {"pool_max_size", poolMaxSize},      {"two_devices", twoDevices},
};

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && !std::strcmp(argv[1], "--ipc-peer")) return ipcPeer(std::atoi(argv[2]), std::atoi(argv[3]));
  return runScenarios(argc, argv, kScenarios);
}
