// traps_r4: a fourth red-team round of odd but legal CUDA C++ patterns in the
// style of traps_r3.cu (trap_common.cuh), aimed at what a tool that holds
// launches back (answering CUDA_SUCCESS before it issues them), replays them
// as graphs and patches their parameter values could get wrong: ordering the
// driver cannot see (a stream memory wait on a word the host writes, a host
// that answers a kernel through mapped memory), programmatic
// dependent launches chained three deep, cooperative launches through every
// entry point, host functions that read and write zero-copy memory, the
// CUDA 12.8+ batched copies, virtual memory made of chunks
// and mapped twice, large by-value structs changing one byte through five
// kernel handles, launch attribute lists in odd orders with garbage and
// duplicates, cache preferences between launches, and double-buffered
// zero-copy input the host rewrites after an event. Each scenario is
// deterministic in eager and prints digests of its buffers and of the return
// codes the host saw; where it can, it checks its results against a host
// mirror of its kernels and prints a FAIL line (and exits 1) on a mismatch.
// check_traps.py requires the same output under graft. A scenario whose
// feature this machine lacks prints a SKIP line and stops.
//
//   host_gpu_handshake    a kernel on stream A writes a checksum and a ready
//                         flag into mapped memory; the host polls the flag
//                         with no CUDA call (on odd steps before it issues
//                         anything else, so only an idle flush gets the held
//                         kernel out), computes a value from the checksum,
//                         writes it and a go flag into mapped memory; stream B
//                         waits for go with cuStreamWaitValue32 on the mapped
//                         word (issued before the host sets it) and its kernel
//                         reads the value. The values the kernels saw are
//                         checked against the host's.
//   pdl_chain             programmatic dependent launch three deep: each stage
//                         does independent work, waits in
//                         cudaGridDependencySynchronize, then reads the stage
//                         before; stages trigger completion early on some
//                         steps and not at all on others; the attribute given
//                         through cudaLaunchKernelEx and cuLaunchKernelEx,
//                         after a kernel, after a memset (irregular steps) and
//                         after an event wait on another stream's work,
//                         switched off every 5th step. A replay that loses
//                         the ordering reads a stage before it is written.
//                         Checked against a host mirror.
//   cooperative_ex        a grid-synchronizing kernel (2 or 3 rounds of
//                         grid.sync) launched in turn through
//                         cudaLaunchCooperativeKernel, cudaLaunchKernelEx with
//                         the cooperative attribute, cuLaunchKernelEx with it
//                         and cuLaunchCooperativeKernel, its grid changing
//                         (64 blocks, one per SM, and on irregular steps up to
//                         512 co-resident blocks), between plain kernels. A launch that loses
//                         the cooperative attribute deadlocks or fails; a
//                         wrong grid gives other sums. Checked against a host
//                         mirror.
//   hostfunc_mapped_chain a kernel writes 256 words into mapped memory and a
//                         device shadow copied to pinned memory; a host
//                         function (cudaLaunchHostFunc) compares the two,
//                         computes the next 256 words and writes them into
//                         mapped memory, which the next kernel reads; a second
//                         stream joins by events. A kernel that runs before
//                         the host function, or a host function that runs
//                         before the kernel's write, shows.
//   batch_copy_3d         cudaMemcpyBatchAsync with 1 to 5 device copies and
//                         attribute lists indexed from the middle (a
//                         device-to-pinned copy every 5th step), and
//                         cudaMemcpy3DBatchAsync with a pitched
//                         pointer-to-pointer copy whose extents change and a
//                         device-to-pinned copy, between kernels; the pinned
//                         copy is checked against a device snapshot taken at
//                         the same point in the stream.
//   vmm_chunks            one virtual range made of four chunks, each mapped
//                         from its own physical allocation (cuMemCreate), and
//                         a second range mapping the same four allocations
//                         (aliases); memsets, copies and kernels cross the
//                         chunk boundaries and write through one range while
//                         others read through the alias; every 25 steps both
//                         ranges are unmapped and mapped again rotated (the
//                         same addresses, other memory), every 50 the alias
//                         rotated once more than the first range. What each
//                         physical allocation holds is read through both
//                         ranges and compared.
//   kernel_handles_big_struct  one kernel template taking a by-value
//                         __grid_constant__ struct of 2048, 4100, 16384 or
//                         30000 bytes, of which one byte changes per step (at
//                         byte 0, the last byte or a hashed position; every
//                         4th step nothing changes), launched in turn through
//                         <<<>>>, cudaLaunchKernel with a cudaKernel_t,
//                         cudaLaunchKernelEx with a cudaKernel_t, cuLaunchKernel
//                         with the CUfunction of cudaGetFuncBySymbol and with
//                         the CUkernel; the struct scribbled after each call.
//                         The kernel sums every byte by position: a patch that
//                         misses a byte shows. Checked against a host mirror.
//   launch_attr_lists     cudaLaunchKernelEx attribute lists with ignored
//                         entries full of garbage, the same attributes in
//                         another order, cluster dimensions (the kernel
//                         reports its cluster shape and rank), priorities,
//                         carveout and sync-domain preferences, a duplicated
//                         cluster attribute (whatever the driver does with it,
//                         its code digested) and on irregular steps a launch
//                         completion event another stream waits on; one driver
//                         launch with a garbage-filled ignored entry. Checked
//                         against a host mirror (the duplicate aside).
//   cache_prefs           a kernel with 32 KiB of static and some dynamic
//                         shared memory, with cudaFuncSetCacheConfig,
//                         cudaDeviceSetCacheConfig, the preferred carveout as a
//                         function attribute and as a launch attribute,
//                         cudaCtxResetPersistingL2Cache and the values read
//                         back between its launches; on irregular steps its
//                         dynamic allowance raised, a 60 KiB launch, and the
//                         allowance lowered again at once (below the launch
//                         just made). Checked against a host mirror.
//   mapped_double_buffer  two zero-copy input buffers (write-combined mapped
//                         host memory) and two mapped outputs: the host
//                         rewrites input i%2 once the event recorded after the
//                         kernel that last read it has completed (waited for
//                         by cudaEventSynchronize, or on every third step by
//                         polling cudaEventQuery), and checks the output that
//                         kernel wrote. A tool that answers the event before
//                         the kernel ran lets the host overwrite input the
//                         kernel has not read yet.
//
//   traps_r4 NAME [--iters N]     one scenario (see kScenarios)
//   traps_r4 --list               the scenario names
//
// Built like traps_r3 (-rdc=true -lcudadevrt) and linked to libcuda (-lcuda):
//   nvcc -O2 -std=c++17 -arch=sm_90 -rdc=true -o traps_r4 traps_r4.cu -lcudadevrt -lcuda

#include <cooperative_groups.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "trap_common.cuh"

namespace cg = cooperative_groups;

namespace {

// ---------------------------------------------------------------- helpers

int g_fails = 0;

// A broken invariant: one line, counted; endChecks exits 1 after the
// scenario's last line.
void fail(const char* what, int at, uint64_t detail) {
  std::printf("FAIL %s %d %016llx\n", what, at, ull(detail));
  ++g_fails;
}
void endChecks(const char* scenario) {
  if (!g_fails) return;
  std::printf("FAIL %s: %d checks failed\n", scenario, g_fails);
  std::fflush(stdout);
  std::exit(1);
}
void skip(const char* why, uint64_t code) { std::printf("SKIP %s %llx\n", why, ull(code)); }



// Garbage that changes with `seed`.
void fillGarbage(void* p, size_t bytes, uint32_t seed) {
  auto* b = static_cast<unsigned char*>(p);
  for (size_t k = 0; k < bytes; ++k) b[k] = static_cast<unsigned char>(hash32(seed * 0x9e3779b9u + uint32_t(k)) >> 7);
}

// What deviceBuffer(seed, n) holds, on the host.
std::vector<uint32_t> hostBuffer(uint32_t seed, int n = kN) {
  std::vector<uint32_t> h(n);
  for (int i = 0; i < n; ++i) h[i] = seed * 2654435761u + uint32_t(i) * 40503u;
  return h;
}

// mix (trap_common.cuh) on the host.
void hostMix(std::vector<uint32_t>& dst, const std::vector<uint32_t>& src, uint32_t salt) {
  const int n = int(dst.size());
  for (int k = 0; k < n; ++k) dst[k] = rotl(dst[k], 5) ^ (src[(k * 7 + 4099) % n] + salt + uint32_t(k));
}
std::vector<uint32_t> readDevice(const void* d, size_t words) {
  std::vector<uint32_t> h(words);
  CK(cudaMemcpy(h.data(), d, words * 4, cudaMemcpyDeviceToHost));
  return h;
}

// A device buffer against its host mirror (a synchronous copy: waits for the
// blocking streams; the caller synchronized the others).
void compareWith(const char* what, int at, const uint32_t* d, const std::vector<uint32_t>& mirror) {
  const std::vector<uint32_t> got = readDevice(d, mirror.size());
  for (size_t k = 0; k < mirror.size(); ++k) {
    if (got[k] != mirror[k]) {
      fail(what, at, uint64_t(k) << 32 | got[k]);
      return;
    }
  }
}

// Spins (no CUDA call) until *p == want, at most 20 s; exits on a timeout.
void spinUntil(const volatile uint32_t* p, uint32_t want, const char* what, int at) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (*p != want) {
    if (std::chrono::steady_clock::now() > until) {
      fail(what, at, *p);
      endChecks(what);
    }
  }
}

// ---------------------------------------------------------------- kernels

// host_gpu_handshake.
__global__ void reportMapped(volatile uint32_t* hm, const uint32_t* a, uint32_t v) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    hm[3] = a[0] ^ a[4097] ^ rotl(a[12345], 7);
    __threadfence_system();
    hm[0] = v;
  }
}
__global__ void useHostValue(uint32_t* c, const uint32_t* b, const volatile uint32_t* hm, uint32_t* seen, int slot,
                             int n) {
  const uint32_t hv = hm[2];
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) c[k] = rotl(c[k], 3) ^ (b[(k * 5 + 3) % n] + hv + uint32_t(k));
  if (k == 0) seen[slot] = hv;
}

// pdl_chain: independent work, the wait, then the stage before.
__global__ void pdlStage(uint32_t* dst, const uint32_t* src, int n, uint32_t salt, int trigger) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t own = hash32(salt * 2654435761u + uint32_t(k));  // reads nothing
  cudaGridDependencySynchronize();
  if (k < n) dst[k] = rotl(dst[k], 3) + (src[(k * 13 + 5) % n] ^ own);
  if (trigger) cudaTriggerProgrammaticLaunchCompletion();  // after this thread's write
}
__global__ void pdlStage2(uint32_t* dst, const uint32_t* s1, const uint32_t* s2, int n, uint32_t salt, int trigger) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t own = hash32(salt * 40503u + uint32_t(k) * 7u);
  cudaGridDependencySynchronize();
  if (k < n) dst[k] = rotl(dst[k], 3) + (s1[(k * 13 + 5) % n] ^ own ^ rotl(s2[(k * 3 + 1) % n], 9));
  if (trigger) cudaTriggerProgrammaticLaunchCompletion();
}
uint32_t hostOwn(uint32_t salt, int k) { return hash32(salt * 2654435761u + uint32_t(k)); }
uint32_t hostOwn2(uint32_t salt, int k) { return hash32(salt * 40503u + uint32_t(k) * 7u); }
void hostPdlStage(std::vector<uint32_t>& dst, const std::vector<uint32_t>& src, uint32_t salt) {
  const int n = int(dst.size());
  for (int k = 0; k < n; ++k) dst[k] = rotl(dst[k], 3) + (src[(k * 13 + 5) % n] ^ hostOwn(salt, k));
}
void hostPdlStage2(std::vector<uint32_t>& dst, const std::vector<uint32_t>& s1, const std::vector<uint32_t>& s2,
                   uint32_t salt) {
  const int n = int(dst.size());
  for (int k = 0; k < n; ++k)
    dst[k] = rotl(dst[k], 3) + (s1[(k * 13 + 5) % n] ^ hostOwn2(salt, k) ^ rotl(s2[(k * 3 + 1) % n], 9));
}

// cooperative_ex: sums mod 2^32, so the order of the atomics does not matter.
__global__ void coopRounds(uint32_t* buf, uint32_t* partial, uint32_t* out, int n, int rounds, uint32_t salt,
                           int slot) {
  cg::grid_group grid = cg::this_grid();
  __shared__ uint32_t acc;
  const int stride = int(gridDim.x * blockDim.x);
  for (int r = 0; r < rounds; ++r) {
    if (threadIdx.x == 0) acc = 0;
    __syncthreads();
    uint32_t mine = 0;
    for (int k = int(blockIdx.x * blockDim.x + threadIdx.x); k < n; k += stride) mine += buf[k] * 3u + 1u;
    atomicAdd(&acc, mine);
    __syncthreads();
    if (threadIdx.x == 0) partial[blockIdx.x] = acc;
    grid.sync();
    uint32_t g = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) g += partial[b] * (b + 1u);
    for (int k = int(blockIdx.x * blockDim.x + threadIdx.x); k < n; k += stride)
      buf[k] = rotl(buf[k], 1) ^ (g + uint32_t(k) + salt + uint32_t(r));
    if (blockIdx.x == 0 && threadIdx.x == 0 && r == rounds - 1) out[slot] = g;
    grid.sync();  // the partials are written again in the next round
  }
}
uint32_t hostCoopRounds(std::vector<uint32_t>& buf, unsigned grid, int rounds, uint32_t salt) {
  const int n = int(buf.size());
  const int stride = int(grid) * kBlock;
  uint32_t g = 0;
  std::vector<uint32_t> partial(grid);
  for (int r = 0; r < rounds; ++r) {
    std::fill(partial.begin(), partial.end(), 0u);
    for (int k = 0; k < n; ++k) partial[(k % stride) / kBlock] += buf[k] * 3u + 1u;
    g = 0;
    for (unsigned b = 0; b < grid; ++b) g += partial[b] * (b + 1u);
    for (int k = 0; k < n; ++k) buf[k] = rotl(buf[k], 1) ^ (g + uint32_t(k) + salt + uint32_t(r));
  }
  return g;
}

// hostfunc_mapped_chain.
constexpr int kChainWords = 256;
__global__ void toMapped(volatile uint32_t* m, uint32_t* shadow, const uint32_t* a, int n) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < kChainWords) {
    const uint32_t v = a[(k * 61 + 7) % n];
    m[k] = v;
    shadow[k] = v;
  }
  __threadfence_system();
}
__global__ void fromMapped(uint32_t* a, const volatile uint32_t* m, uint32_t* echo, int n) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) {
    const uint32_t w = m[kChainWords + k % kChainWords];
    a[k] = rotl(a[k], 2) + w;
    if (k < kChainWords) echo[k] = w;
  }
}

// vmm_chunks: reads through the alias.
__global__ void readInto(uint32_t* a, const uint32_t* q, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) a[k] = rotl(a[k], 3) ^ (q[k] + salt);
}

// kernel_handles_big_struct: every byte counts, by position.
template <int N>
struct Blob {
  unsigned char b[N];
};
template <int N>
__global__ void blobMix(uint32_t* dst, const __grid_constant__ Blob<N> p, int n, uint32_t salt) {
  __shared__ uint32_t part[kBlock];
  uint32_t s = 0;
  for (int j = threadIdx.x; j < N; j += blockDim.x) s += uint32_t(p.b[j]) * uint32_t(j + 1);
  part[threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t h = 0;
    for (unsigned t = 0; t < blockDim.x; ++t) h += part[t];
    part[0] = h;
  }
  __syncthreads();
  const uint32_t h = part[0];
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 7) ^ (h + salt + uint32_t(k));
}

// launch_attr_lists: the cluster shape the launch got.
__global__ void clusterReport(uint32_t* dst, int n, uint32_t salt) {
  uint32_t cx = 0, rank = 0;
  asm volatile("mov.u32 %0, %%cluster_nctaid.x;" : "=r"(cx));
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 5) + cx * 131u + rank * 7u + salt + uint32_t(k);
}
void hostClusterReport(std::vector<uint32_t>& dst, uint32_t cx, uint32_t salt) {
  const int n = int(dst.size());
  for (int k = 0; k < n; ++k) dst[k] = rotl(dst[k], 5) + cx * 131u + uint32_t((k / kBlock) % int(cx)) * 7u + salt + uint32_t(k);
}

// cache_prefs: 32 KiB of static shared memory and whatever dynamic size the
// launch gave.
constexpr int kStaticWords = 8192;
__global__ void smemPref(uint32_t* dst, const uint32_t* src, int n, uint32_t salt) {
  __shared__ uint32_t st[kStaticWords];
  extern __shared__ uint32_t dyn[];
  uint32_t dynBytes = 0;
  asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dynBytes));
  const uint32_t dynWords = dynBytes / 4;
  for (uint32_t w = threadIdx.x; w < uint32_t(kStaticWords); w += blockDim.x)
    st[w] = src[(blockIdx.x * 257u + w) % uint32_t(n)];
  __syncthreads();
  for (uint32_t w = threadIdx.x; w < dynWords; w += blockDim.x) dyn[w] = st[(w * 3u) % uint32_t(kStaticWords)] ^ w;
  __syncthreads();
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n)
    dst[k] = rotl(dst[k], 9) + st[(threadIdx.x * 7u + 1u) % uint32_t(kStaticWords)] +
             (dynWords ? dyn[(threadIdx.x * 5u) % dynWords] : 0u) + dynBytes + salt;
}
void hostSmemPref(std::vector<uint32_t>& dst, const std::vector<uint32_t>& src, uint32_t dynBytes, uint32_t salt) {
  const uint32_t n = uint32_t(dst.size());
  const uint32_t dynWords = dynBytes / 4;
  for (uint32_t k = 0; k < n; ++k) {
    const uint32_t b = k / kBlock, t = k % kBlock;
    auto st = [&](uint32_t w) { return src[(b * 257u + w) % n]; };
    const uint32_t dw = dynWords ? (t * 5u) % dynWords : 0;
    const uint32_t dynv = dynWords ? (st((dw * 3u) % uint32_t(kStaticWords)) ^ dw) : 0u;
    dst[k] = rotl(dst[k], 9) + st((t * 7u + 1u) % uint32_t(kStaticWords)) + dynv + dynBytes + salt;
  }
}

// mapped_double_buffer: zero-copy input and output.
constexpr int kZcWords = 256;
__global__ void zeroCopyStep(uint32_t* a, const uint32_t* in, uint32_t* out, int n, uint32_t u) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) a[k] = rotl(a[k], 1) + in[k % kZcWords];
  if (k < kZcWords) out[k] = in[k] * 3u + u;
}

// ---------------------------------------------------------------- scenarios

// --- host_gpu_handshake

void hostGpuHandshake() {
  cudaStream_t A = nonBlockingStream(), B = nonBlockingStream();
  const auto cB = reinterpret_cast<CUstream>(B);
  cudaEvent_t evB;
  CK(cudaEventCreateWithFlags(&evB, cudaEventDisableTiming));
  uint32_t* hm = nullptr;  // [0] ready (GPU), [1] go (host), [2] value (host), [3] checksum (GPU)
  CK(cudaHostAlloc(&hm, 4096, cudaHostAllocMapped));
  std::memset(hm, 0, 4096);
  uint32_t* hmDev = nullptr;
  CK(cudaHostGetDevicePointer(&hmDev, hm, 0));
  const CUdeviceptr goDev = CUdeviceptr(hmDev + 1);
  // A wait on mapped host memory, already satisfied: the driver may refuse it.
  const CUresult probe = cuStreamWaitValue32(cB, goDev, 0, CU_STREAM_WAIT_VALUE_GEQ);
  if (probe != CUDA_SUCCESS) {
    skip("no stream wait on mapped host memory here", uint64_t(probe));
    return;
  }
  CK(cudaStreamSynchronize(B));
  volatile uint32_t* vh = hm;
  uint32_t *a = deviceBuffer(2501), *b = deviceBuffer(2502), *c = deviceBuffer(2503);
  uint32_t* seen = nullptr;
  CK(cudaMalloc(&seen, size_t(g_iters) * 4));
  CK(cudaMemset(seen, 0, size_t(g_iters) * 4));
  std::vector<uint32_t> hostValues(g_iters);
  Digest sums;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t v = uint32_t(i) + 1, u = uint32_t(i) * 4u;
    if (i > 0) CK(cudaStreamWaitEvent(A, evB, 0));  // A reads b, which B wrote
    mix<<<kGrid, kBlock, 0, A>>>(a, b, kN, u);
    reportMapped<<<1, 32, 0, A>>>(hmDev, a, v);
    CKL();
    auto ready = [&]() {
      spinUntil(vh, v, "handshake_ready", i);  // no CUDA call
      const uint32_t sum = vh[3];
      sums.add(sum);
      hostValues[i] = hash32(sum + v);
    };
    const bool readyFirst = i % 2 == 1;  // before anything else: only an idle flush helps
    if (readyFirst) ready();
    CKD(cuStreamWaitValue32(cB, goDev, v, CU_STREAM_WAIT_VALUE_GEQ));  // go is set below
    useHostValue<<<kGrid, kBlock, 0, B>>>(c, b, hmDev, seen, i, kN);
    mix<<<kGrid, kBlock, 0, B>>>(b, c, kN, u + 1);
    CKL();
    CK(cudaEventRecord(evB, B));
    if (!readyFirst) ready();
    vh[2] = hostValues[i];
    std::atomic_thread_fence(std::memory_order_seq_cst);
    vh[1] = v;  // go
    if (i % 100 == 99) {
      CK(cudaStreamSynchronize(B));
      print("sums", i, sums.h);
      print("abc", i, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  const std::vector<uint32_t> got = readDevice(seen, size_t(g_iters));
  for (int i = 0; i < g_iters; ++i) {
    if (got[i] != hostValues[i]) {
      fail("handshake_seen", i, uint64_t(got[i]) << 32 | hostValues[i]);
      break;
    }
  }
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4) ^ sums.h);
  endChecks("host_gpu_handshake");
  CK(cudaFreeHost(hm));
}

// --- pdl_chain

void pdlChain() {
  cudaStream_t s = nonBlockingStream(), t = nonBlockingStream();
  const auto cs = reinterpret_cast<CUstream>(s);
  cudaEvent_t evT, evS;
  CK(cudaEventCreateWithFlags(&evT, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&evS, cudaEventDisableTiming));
  CUfunction stageFn = nullptr;
  CK(cudaGetFuncBySymbol(&stageFn, reinterpret_cast<const void*>(pdlStage)));
  uint32_t *a = deviceBuffer(2601), *b = deviceBuffer(2602), *c = deviceBuffer(2603), *d = deviceBuffer(2604);
  uint32_t *e = deviceBuffer(2605), *f = deviceBuffer(2606);
  std::vector<uint32_t> ha = hostBuffer(2601), hb = hostBuffer(2602), hc = hostBuffer(2603), hd = hostBuffer(2604);
  std::vector<uint32_t> he = hostBuffer(2605), hf = hostBuffer(2606);
  auto runtimeEx = [&](bool pss, auto kernel, auto... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(kGrid);
    cfg.blockDim = dim3(kBlock);
    cfg.stream = s;
    cudaLaunchAttribute attr[1] = {};
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = pss ? 1 : 0;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    CK(cudaLaunchKernelEx(&cfg, kernel, args...));
  };
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 8u;
    const bool pss = i % 5 != 4;
    const int trig0 = i % 2, trig1 = (i / 2) % 2, trig2 = 1, trig3 = i % 3 == 0;
    if (i > 0) CK(cudaStreamWaitEvent(t, evS, 0));  // t writes e, which K3 read
    mix<<<kGrid, kBlock, 0, t>>>(e, f, kN, u + 7);
    CKL();
    CK(cudaEventRecord(evT, t));
    hostMix(he, hf, u + 7);
    // K0: plain.
    pdlStage<<<kGrid, kBlock, 0, s>>>(b, a, kN, u, trig0);
    CKL();
    hostPdlStage(hb, ha, u);
    // K1: may start while K0 runs.
    runtimeEx(pss, pdlStage, c, static_cast<const uint32_t*>(b), int(kN), u + 1, trig1);
    hostPdlStage(hc, hb, u + 1);
    if (irregular(i, 261, 4)) {  // K2 follows a memset
      const int off = int(hash32(u) % uint32_t(kN - 256));
      CK(cudaMemsetAsync(c + off, (i * 5) & 0xff, 1024, s));
      std::memset(hc.data() + off, (i * 5) & 0xff, 1024);
    }
    // K2: through the driver.
    {
      uint32_t* dst = d;
      const uint32_t* src = c;
      int n = kN;
      uint32_t salt = u + 2;
      int trig = trig2;
      void* params[] = {&dst, &src, &n, &salt, &trig};
      CUlaunchAttribute attr[1] = {};
      attr[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attr[0].value.programmaticStreamSerializationAllowed = pss ? 1 : 0;
      CUlaunchConfig cfg = {};
      cfg.gridDimX = kGrid;
      cfg.gridDimY = cfg.gridDimZ = 1;
      cfg.blockDimX = kBlock;
      cfg.blockDimY = cfg.blockDimZ = 1;
      cfg.hStream = cs;
      cfg.attrs = attr;
      cfg.numAttrs = 1;
      CKD(cuLaunchKernelEx(&cfg, stageFn, params, nullptr));
    }
    hostPdlStage(hd, hc, u + 2);
    // K3: after an event wait on t's work.
    CK(cudaStreamWaitEvent(s, evT, 0));
    runtimeEx(pss, pdlStage2, a, static_cast<const uint32_t*>(d), static_cast<const uint32_t*>(e), int(kN), u + 3,
              trig3);
    hostPdlStage2(ha, hd, he, u + 3);
    CK(cudaEventRecord(evS, s));
    if (i % 100 == 99) {
      CK(cudaStreamSynchronize(s));
      compareWith("pdl_a", i, a, ha);
      compareWith("pdl_d", i, d, hd);
      print("a", i, deviceDigest(a, kN * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  compareWith("pdl_a", g_iters, a, ha);
  compareWith("pdl_b", g_iters, b, hb);
  compareWith("pdl_c", g_iters, c, hc);
  compareWith("pdl_e", g_iters, e, he);
  print("end", 0,
        deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4) ^ deviceDigest(d, kN * 4) ^
            deviceDigest(e, kN * 4));
  endChecks("pdl_chain");
}

// --- cooperative_ex

void cooperativeEx() {
  if (!deviceAttribute(cudaDevAttrCooperativeLaunch)) {
    skip("no cooperative launch here", 0);
    return;
  }
  const int sms = deviceAttribute(cudaDevAttrMultiProcessorCount);
  int perSm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, coopRounds, kBlock, 0));
  const int maxCoop = perSm * sms;
  if (maxCoop < 64) {
    skip("too few co-resident blocks", uint64_t(maxCoop));
    return;
  }
  const unsigned grids[3] = {64u, unsigned(std::min(sms, maxCoop)), unsigned(std::min(maxCoop, 512))};
  print("coop_grids", int(grids[1]), uint64_t(grids[2]));
  cudaStream_t s = nonBlockingStream();
  const auto cs = reinterpret_cast<CUstream>(s);
  CUfunction fn = nullptr;
  CK(cudaGetFuncBySymbol(&fn, reinterpret_cast<const void*>(coopRounds)));
  uint32_t *buf = deviceBuffer(2701), *other = deviceBuffer(2702);
  uint32_t *partial = nullptr, *out = nullptr;
  CK(cudaMalloc(&partial, size_t(maxCoop) * 4));
  CK(cudaMalloc(&out, 64 * 4));
  CK(cudaMemset(out, 0, 64 * 4));
  std::vector<uint32_t> hbuf = hostBuffer(2701), hother = hostBuffer(2702), hout(64, 0u);
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 4u;
    unsigned grid = grids[i % 2];
    if (irregular(i, 271, 6)) grid = grids[2];
    int rounds = i % 3 == 2 ? 3 : 2;
    int slot = i % 64;
    int n = kN;
    uint32_t salt = u;
    mix<<<kGrid, kBlock, 0, s>>>(other, buf, kN, u + 1);
    CKL();
    hostMix(hother, hbuf, u + 1);
    void* args[] = {&buf, &partial, &out, &n, &rounds, &salt, &slot};
    switch (i % 4) {
      case 0:
        CK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(coopRounds), dim3(grid), dim3(kBlock), args, 0, s));
        break;
      case 1: {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(grid);
        cfg.blockDim = dim3(kBlock);
        cfg.stream = s;
        cudaLaunchAttribute attr[1] = {};
        attr[0].id = cudaLaunchAttributeCooperative;
        attr[0].val.cooperative = 1;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        CK(cudaLaunchKernelEx(&cfg, coopRounds, buf, partial, out, n, rounds, salt, slot));
        break;
      }
      case 2: {
        CUlaunchAttribute attr[1] = {};
        attr[0].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
        attr[0].value.cooperative = 1;
        CUlaunchConfig cfg = {};
        cfg.gridDimX = grid;
        cfg.gridDimY = cfg.gridDimZ = 1;
        cfg.blockDimX = kBlock;
        cfg.blockDimY = cfg.blockDimZ = 1;
        cfg.hStream = cs;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        CKD(cuLaunchKernelEx(&cfg, fn, args, nullptr));
        break;
      }
      default:
        CKD(cuLaunchCooperativeKernel(fn, grid, 1, 1, kBlock, 1, 1, 0, cs, args));
        break;
    }
    hout[slot] = hostCoopRounds(hbuf, grid, rounds, salt);
    mix<<<kGrid, kBlock, 0, s>>>(buf, other, kN, u + 2);
    CKL();
    hostMix(hbuf, hother, u + 2);
    if (i % 100 == 99) {
      CK(cudaStreamSynchronize(s));
      compareWith("coop_buf", i, buf, hbuf);
      compareWith("coop_out", i, out, hout);
      print("buf", i, deviceDigest(buf, kN * 4));
    }
  }
  CK(cudaStreamSynchronize(s));
  compareWith("coop_buf", g_iters, buf, hbuf);
  compareWith("coop_out", g_iters, out, hout);
  print("end", 0, deviceDigest(buf, kN * 4) ^ deviceDigest(other, kN * 4) ^ deviceDigest(out, 64 * 4));
  endChecks("cooperative_ex");
}

// --- hostfunc_mapped_chain

struct ChainShared {
  volatile uint32_t* m = nullptr;     // mapped: [0, 256) from the kernel, [256, 512) from the host function
  const volatile uint32_t* pinned = nullptr;  // the device shadow, copied
  uint32_t lastWritten[kChainWords] = {};
  int mismatches = 0;
  int ran = 0;
  Digest log;
};
struct ChainCall {
  ChainShared* shared;
  int step;
};
void CUDART_CB chainHost(void* p) {
  const auto* call = static_cast<const ChainCall*>(p);
  ChainShared& sh = *call->shared;
  for (int k = 0; k < kChainWords; ++k) {
    const uint32_t v = sh.m[k];
    if (v != sh.pinned[k]) ++sh.mismatches;
    sh.log.add(v);
    const uint32_t w = hash32(v + uint32_t(call->step) * 7u + uint32_t(k));
    sh.m[kChainWords + k] = w;
    sh.lastWritten[k] = w;
  }
  ++sh.ran;
}

void hostfuncMappedChain() {
  cudaStream_t s = nonBlockingStream(), t = nonBlockingStream();
  cudaEvent_t evS, evT;
  CK(cudaEventCreateWithFlags(&evS, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&evT, cudaEventDisableTiming));
  uint32_t *m = nullptr, *pinned = nullptr;
  CK(cudaHostAlloc(&m, 2 * kChainWords * 4, cudaHostAllocMapped));
  CK(cudaHostAlloc(&pinned, kChainWords * 4, cudaHostAllocDefault));
  std::memset(m, 0, 2 * kChainWords * 4);
  std::memset(pinned, 0, kChainWords * 4);
  uint32_t* mDev = nullptr;
  CK(cudaHostGetDevicePointer(&mDev, m, 0));
  uint32_t *a = deviceBuffer(2801), *b = deviceBuffer(2802), *c = deviceBuffer(2803);
  uint32_t *shadow = nullptr, *echo = nullptr;
  CK(cudaMalloc(&shadow, kChainWords * 4));
  CK(cudaMalloc(&echo, kChainWords * 4));
  auto shared = std::make_unique<ChainShared>();
  shared->m = m;
  shared->pinned = pinned;
  std::vector<ChainCall> calls(g_iters);
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 4u;
    if (i > 0) CK(cudaStreamWaitEvent(s, evT, 0));  // t read a
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, u);
    toMapped<<<2, kBlock, 0, s>>>(mDev, shadow, a, kN);
    CKL();
    CK(cudaMemcpyAsync(pinned, shadow, kChainWords * 4, cudaMemcpyDeviceToHost, s));
    calls[i] = {shared.get(), i};
    CK(cudaLaunchHostFunc(s, chainHost, &calls[i]));
    fromMapped<<<kGrid, kBlock, 0, s>>>(a, mDev, echo, kN);  // what the host function wrote
    CKL();
    CK(cudaEventRecord(evS, s));
    CK(cudaStreamWaitEvent(t, evS, 0));
    mix<<<kGrid, kBlock, 0, t>>>(c, a, kN, u + 1);
    mix<<<kGrid, kBlock, 0, t>>>(b, c, kN, u + 2);  // s reads b next step (after evT)
    CKL();
    CK(cudaEventRecord(evT, t));
    if (i % 100 == 99) {
      CK(cudaStreamSynchronize(t));  // after s's step too (the events)
      CK(cudaStreamSynchronize(s));
      const std::vector<uint32_t> got = readDevice(echo, kChainWords);
      if (std::memcmp(got.data(), shared->lastWritten, kChainWords * 4) != 0) fail("chain_echo", i, 0);
      if (shared->mismatches) fail("chain_mapped_vs_copy", i, uint64_t(shared->mismatches));
      if (shared->ran != i + 1) fail("chain_ran", i, uint64_t(shared->ran));
      print("log", i, shared->log.h);
      print("a", i, deviceDigest(a, kN * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  if (shared->ran != g_iters) fail("chain_ran", g_iters, uint64_t(shared->ran));
  print("end", shared->mismatches,
        deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4) ^ shared->log.h);
  endChecks("hostfunc_mapped_chain");
  CK(cudaFreeHost(m));
  CK(cudaFreeHost(pinned));
}

// --- batch_copy_3d

cudaMemcpy3DOperand pointerOperand(void* p, size_t rowLength, size_t layerHeight, bool host) {
  cudaMemcpy3DOperand o = {};
  o.type = cudaMemcpyOperandTypePointer;
  o.op.ptr.ptr = p;
  o.op.ptr.rowLength = rowLength;
  o.op.ptr.layerHeight = layerHeight;
  o.op.ptr.locHint.type = host ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
  o.op.ptr.locHint.id = host ? 0 : currentDevice();
  return o;
}

void batchCopy3d() {
  cudaStream_t s = nonBlockingStream();
  const int dev = currentDevice();
  uint32_t *a = deviceBuffer(2901), *b = deviceBuffer(2902), *c = deviceBuffer(2903), *d = deviceBuffer(2904);
  uint32_t* snap = nullptr;
  CK(cudaMalloc(&snap, 1024 * 4));
  uint32_t* host = nullptr;
  CK(cudaHostAlloc(&host, kN * 4, cudaHostAllocDefault));
  std::memset(host, 0, kN * 4);
  {
    // A driver without cudaMemcpy3DBatchAsync (before CUDA 12.8) refuses it.
    cudaMemcpy3DBatchOp op = {};
    op.src = pointerOperand(a, 0, 0, false);
    op.dst = pointerOperand(c, 0, 0, false);
    op.extent = make_cudaExtent(64, 1, 1);
    op.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    const cudaError_t r = keep(cudaMemcpy3DBatchAsync(1, &op, 0, s));
    CK(cudaStreamSynchronize(s));
    if (r != cudaSuccess) {
      skip("no cudaMemcpy3DBatchAsync here", uint64_t(r));
      return;
    }
  }
  Digest codes;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 4u;
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, u);
    CKL();
    // 1 to 5 device copies, attributes from the middle; every 5th step a copy
    // to pinned memory last.
    {
      size_t count = size_t(1 + i % 3) + (irregular(i, 291, 5) ? 2 : 0);
      const bool toHost = i % 5 == 4;
      void* dsts[6];
      const void* srcs[6];
      size_t sizes[6];
      for (size_t j = 0; j < count; ++j) {
        dsts[j] = c + j * 2048 + size_t(i % 4) * 16;
        srcs[j] = a + j * 3072 + size_t(i % 7) * 8;
        sizes[j] = (1024 - j * 100) * 4;
      }
      cudaMemcpyAttributes attrs[3] = {};
      size_t idxs[3] = {};
      size_t numAttrs = 0;
      attrs[0].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      attrs[0].srcLocHint.type = cudaMemLocationTypeDevice;
      attrs[0].srcLocHint.id = dev;
      attrs[0].dstLocHint.type = cudaMemLocationTypeDevice;
      attrs[0].dstLocHint.id = dev;
      idxs[numAttrs++] = 0;
      if (count >= 2) {
        attrs[1] = attrs[0];
        attrs[1].flags = cudaMemcpyFlagPreferOverlapWithCompute;
        idxs[numAttrs++] = count / 2;
      }
      if (toHost) {
        dsts[count] = host + 8192 + (i % 8) * 64;
        srcs[count] = b + 512;
        sizes[count] = 2048 * 4;
        attrs[numAttrs] = attrs[0];
        attrs[numAttrs].dstLocHint.type = cudaMemLocationTypeHost;
        attrs[numAttrs].dstLocHint.id = 0;
        idxs[numAttrs++] = count;
        ++count;
      }
      codes.add(uint64_t(keep(cudaMemcpyBatchAsync(dsts, srcs, sizes, count, attrs, idxs, numAttrs, s))));
    }
    // A pitched pointer-to-pointer copy and a device-to-pinned copy.
    {
      const size_t width = 200 + size_t(i % 8) * 4, height = 8 + size_t(i % 3), depth = irregular(i, 292, 7) ? 3 : 2;
      cudaMemcpy3DBatchOp ops[2] = {};
      ops[0].src = pointerOperand(a + (i % 5) * 4, 256, 16, false);  // rows of 256 bytes, layers of 16 rows
      ops[0].dst = pointerOperand(d, 512, 20, false);
      ops[0].extent = make_cudaExtent(width, height, depth);
      ops[0].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      ops[1].src = pointerOperand(b + 1024, 0, 0, false);
      ops[1].dst = pointerOperand(host + 4096, 0, 0, true);
      ops[1].extent = make_cudaExtent(1024, 4, 1);  // 4 KiB, packed
      ops[1].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      codes.add(uint64_t(keep(cudaMemcpy3DBatchAsync(2, ops, 0, s))));
    }
    CK(cudaMemcpyAsync(snap, b + 1024, 1024 * 4, cudaMemcpyDeviceToDevice, s));  // what ops[1] copied
    mix2<<<kGrid, kBlock, 0, s>>>(b, c, d, kN, u + 1);
    CKL();
    if (i % 100 == 99 || i == g_iters - 1) {
      CK(cudaStreamSynchronize(s));
      const std::vector<uint32_t> want = readDevice(snap, 1024);
      if (std::memcmp(want.data(), host + 4096, 1024 * 4) != 0) fail("batch_pinned", i, 0);
      print("cd", i, deviceDigest(c, kN * 4) ^ deviceDigest(d, kN * 4));
      print("host", i, hostDigest(host, kN * 4));
      print("codes", i, codes.h);
    }
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ hostDigest(host, kN * 4) ^ codes.h);
  endChecks("batch_copy_3d");
  CK(cudaFreeHost(host));
}

// --- vmm_chunks

void vmmChunks() {
  CK(cudaFree(nullptr));
  CUdevice device = 0;
  CKD(cuCtxGetDevice(&device));
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  size_t gran = 0;
  CKD(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  const size_t chunk = ((size_t(256) << 10) + gran - 1) / gran * gran;  // at least 256 KiB
  const size_t W = chunk / 4;                                            // words a chunk
  constexpr int kChunks = 4;
  CUmemGenericAllocationHandle phys[kChunks];
  for (auto& h : phys) CKD(cuMemCreate(&h, chunk, &prop, 0));
  CUdeviceptr R = 0, Q = 0;
  CKD(cuMemAddressReserve(&R, kChunks * chunk, chunk, 0, 0));
  CKD(cuMemAddressReserve(&Q, kChunks * chunk, chunk, 0, 0));
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  int mapR[kChunks], mapQ[kChunks];  // the physical allocation behind chunk j
  bool mapped = false;
  auto mapBoth = [&](int rotR, int rotQ) {
    for (int j = 0; j < kChunks; ++j) {
      if (mapped) {
        CKD(cuMemUnmap(R + j * chunk, chunk));
        CKD(cuMemUnmap(Q + j * chunk, chunk));
      }
    }
    for (int j = 0; j < kChunks; ++j) {
      mapR[j] = (j + rotR) % kChunks;
      mapQ[j] = (j + rotQ) % kChunks;
      CKD(cuMemMap(R + j * chunk, chunk, 0, phys[mapR[j]], 0));
      CKD(cuMemMap(Q + j * chunk, chunk, 0, phys[mapQ[j]], 0));
      CKD(cuMemSetAccess(R + j * chunk, chunk, &access, 1));
      CKD(cuMemSetAccess(Q + j * chunk, chunk, &access, 1));
    }
    mapped = true;
  };
  mapBoth(0, 0);
  print("vmm_chunk", int(chunk >> 10), uint64_t(gran));
  cudaStream_t s = nonBlockingStream();
  const auto cs = reinterpret_cast<CUstream>(s);
  auto* r = reinterpret_cast<uint32_t*>(R);
  auto* q = reinterpret_cast<uint32_t*>(Q);
  for (int j = 0; j < kChunks; ++j) CK(cudaMemsetAsync(r + j * W, 0, chunk, s));  // physical memory starts undefined
  uint32_t *a = deviceBuffer(3001), *b = deviceBuffer(3002), *b2 = deviceBuffer(3003);
  Digest codes;
  // What each physical allocation holds, read through both ranges.
  auto checkAliases = [&](int at) {
    Digest d;
    for (int p = 0; p < kChunks; ++p) {
      int jr = 0, jq = 0;
      for (int j = 0; j < kChunks; ++j) {
        if (mapR[j] == p) jr = j;
        if (mapQ[j] == p) jq = j;
      }
      const std::vector<uint32_t> viaR = readDevice(r + jr * W, W);
      const std::vector<uint32_t> viaQ = readDevice(q + jq * W, W);
      if (viaR != viaQ) fail("vmm_alias", at, uint64_t(p));
      d.add(viaR.data(), W * 4);
    }
    return d.h;
  };
  int rot = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 4u;
    // Across the boundaries of chunks 0/1, 1/2 and 2/3 of R.
    codes.add(uint64_t(cuMemsetD32Async(R + (W - 1024) * 4, u * 40503u, 2048, cs)));
    codes.add(uint64_t(keep(cudaMemcpyAsync(r + 2 * W - 8192, a, kN * 4, cudaMemcpyDeviceToDevice, s))));
    mix<<<kGrid, kBlock, 0, s>>>(r + 3 * W - 8000, a, kN, u);
    // Read through the alias (the same memory while the rotations agree).
    readInto<<<kGrid, kBlock, 0, s>>>(a, q + 2 * W - 8192 + 7, kN, u + 1);
    readInto<<<kGrid, kBlock, 0, s>>>(b, q + 3 * W - 8000, kN, u + 2);
    CKL();
    codes.add(uint64_t(keep(cudaMemcpyAsync(b2, q + W - 1029, 4096 * 4, cudaMemcpyDeviceToDevice, s))));
    mix2<<<kGrid, kBlock, 0, s>>>(a, b, b2, kN, u + 3);
    CKL();
    if (i % 25 == 24) {
      // Same addresses, other memory: both ranges rotated, the alias once
      // more every 50 steps.
      CK(cudaStreamSynchronize(s));
      rot = (rot + 1) % kChunks;
      mapBoth(rot, i % 50 == 49 ? (rot + 1) % kChunks : rot);
    }
    if (i % 100 == 99) {
      CK(cudaStreamSynchronize(s));
      print("phys", i, checkAliases(i));
      print("a", i, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(b2, 4096 * 4));
      print("codes", i, codes.h);
    }
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, checkAliases(g_iters) ^ deviceDigest(a, kN * 4) ^ codes.h);
  for (int j = 0; j < kChunks; ++j) {
    CKD(cuMemUnmap(R + j * chunk, chunk));
    CKD(cuMemUnmap(Q + j * chunk, chunk));
  }
  CKD(cuMemAddressFree(R, kChunks * chunk));
  CKD(cuMemAddressFree(Q, kChunks * chunk));
  for (auto& h : phys) CKD(cuMemRelease(h));
  endChecks("vmm_chunks");
}

// --- kernel_handles_big_struct

uint32_t blobHash(const unsigned char* b, int n) {
  uint32_t h = 0;
  for (int j = 0; j < n; ++j) h += uint32_t(b[j]) * uint32_t(j + 1);
  return h;
}

// One size's blob and its launches through five handles.
template <int N>
struct BlobSlot {
  std::unique_ptr<Blob<N>> blob = std::make_unique<Blob<N>>();
  std::vector<unsigned char> base = std::vector<unsigned char>(N);
  int pos = -1;            // the byte that differs from base
  int scribbled = -1;      // a byte scribbled after the last launch
  unsigned char saved = 0;
  uint32_t* dst = nullptr;
  std::vector<uint32_t> mirror;
  cudaKernel_t kernel = nullptr;
  CUfunction fn = nullptr;

  BlobSlot(uint32_t seed) {
    fillGarbage(base.data(), N, seed);
    std::memcpy(blob->b, base.data(), N);
    dst = deviceBuffer(seed);
    mirror = hostBuffer(seed);
    const void* sym = reinterpret_cast<const void*>(blobMix<N>);
    CK(cudaGetKernel(&kernel, sym));
    CK(cudaGetFuncBySymbol(&fn, sym));
  }

  void step(int i, uint32_t salt, cudaStream_t s, int path) {
    if (scribbled >= 0) blob->b[scribbled] = saved;  // undo the scribble
    if (i % 4 != 3) {                                 // every 4th step: the same bytes again
      if (pos >= 0) blob->b[pos] = base[pos];
      pos = i % 7 == 0 ? 0 : i % 7 == 1 ? N - 1 : int(hash32(uint32_t(i) * 31u + N) % uint32_t(N));
      blob->b[pos] = static_cast<unsigned char>(base[pos] + 1 + i % 250);
    }
    const uint32_t h = blobHash(blob->b, N);
    for (int k = 0; k < kN; ++k) mirror[k] = rotl(mirror[k], 7) ^ (h + salt + uint32_t(k));
    uint32_t* d = dst;
    int n = kN;
    uint32_t sl = salt;
    void* args[] = {&d, blob.get(), &n, &sl};
    switch (path) {
      case 0:
        blobMix<N><<<kGrid, kBlock, 0, s>>>(d, *blob, n, sl);
        CKL();
        break;
      case 1:
        CK(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(kGrid), dim3(kBlock), args, 0, s));
        break;
      case 2: {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(kGrid);
        cfg.blockDim = dim3(kBlock);
        cfg.stream = s;
        CK(cudaLaunchKernelEx(&cfg, kernel, d, *blob, n, sl));
        break;
      }
      case 3:
        CKD(cuLaunchKernel(fn, kGrid, 1, 1, kBlock, 1, 1, 0, reinterpret_cast<CUstream>(s), args, nullptr));
        break;
      default:
        CKD(cuLaunchKernel(reinterpret_cast<CUfunction>(kernel), kGrid, 1, 1, kBlock, 1, 1, 0,
                           reinterpret_cast<CUstream>(s), args, nullptr));
        break;
    }
    // Read at the call only: scribbled until the next step.
    scribbled = int(hash32(uint32_t(i) + 77u) % uint32_t(N));
    saved = blob->b[scribbled];
    blob->b[scribbled] = static_cast<unsigned char>(~saved);
  }
};

void kernelHandlesBigStruct() {
  cudaStream_t s = nonBlockingStream();
  BlobSlot<2048> s0(3101);
  BlobSlot<4100> s1(3102);
  BlobSlot<16384> s2(3103);
  BlobSlot<30000> s3(3104);
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 8u;
    s0.step(i, u, s, i % 5);
    s1.step(i, u + 1, s, (i + 1) % 5);
    mix<<<kGrid, kBlock, 0, s>>>(s0.dst, s1.dst, kN, u + 2);
    CKL();
    hostMix(s0.mirror, s1.mirror, u + 2);
    s2.step(i, u + 3, s, (i + 2) % 5);
    s3.step(i, u + 4, s, (i + 3) % 5);
    mix<<<kGrid, kBlock, 0, s>>>(s2.dst, s3.dst, kN, u + 5);
    CKL();
    hostMix(s2.mirror, s3.mirror, u + 5);
    if (i % 100 == 99) {
      CK(cudaStreamSynchronize(s));
      compareWith("blob_2048", i, s0.dst, s0.mirror);
      compareWith("blob_4100", i, s1.dst, s1.mirror);
      compareWith("blob_16384", i, s2.dst, s2.mirror);
      compareWith("blob_30000", i, s3.dst, s3.mirror);
      print("d", i, deviceDigest(s0.dst, kN * 4) ^ deviceDigest(s3.dst, kN * 4));
    }
  }
  CK(cudaStreamSynchronize(s));
  compareWith("blob_2048", g_iters, s0.dst, s0.mirror);
  compareWith("blob_4100", g_iters, s1.dst, s1.mirror);
  compareWith("blob_16384", g_iters, s2.dst, s2.mirror);
  compareWith("blob_30000", g_iters, s3.dst, s3.mirror);
  print("end", 0,
        deviceDigest(s0.dst, kN * 4) ^ deviceDigest(s1.dst, kN * 4) ^ deviceDigest(s2.dst, kN * 4) ^
            deviceDigest(s3.dst, kN * 4));
  endChecks("kernel_handles_big_struct");
}

// --- launch_attr_lists

cudaLaunchAttribute ignoredAttr(uint32_t seed) {
  cudaLaunchAttribute a;
  fillGarbage(&a, sizeof a, seed);
  a.id = cudaLaunchAttributeIgnore;
  return a;
}
cudaLaunchAttribute clusterAttr(unsigned x) {
  cudaLaunchAttribute a = {};
  a.id = cudaLaunchAttributeClusterDimension;
  a.val.clusterDim.x = x;
  a.val.clusterDim.y = 1;
  a.val.clusterDim.z = 1;
  return a;
}
cudaLaunchAttribute priorityAttr(int p) {
  cudaLaunchAttribute a = {};
  a.id = cudaLaunchAttributePriority;
  a.val.priority = p;
  return a;
}

void launchAttrLists() {
  int least = 0, greatest = 0;
  CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t s = nonBlockingStream(), t = nonBlockingStream();
  cudaEvent_t evC, evT;
  CK(cudaEventCreateWithFlags(&evC, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&evT, cudaEventDisableTiming));
  CUfunction fn = nullptr;
  CK(cudaGetFuncBySymbol(&fn, reinterpret_cast<const void*>(clusterReport)));
  uint32_t *a = deviceBuffer(3201), *dup = deviceBuffer(3202), *e = deviceBuffer(3203), *f = deviceBuffer(3204);
  std::vector<uint32_t> ha = hostBuffer(3201), he = hostBuffer(3203), hf = hostBuffer(3204);
  Digest codes;
  auto launch = [&](const cudaLaunchAttribute* attrs, unsigned numAttrs, uint32_t* dst, uint32_t salt) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(kGrid);
    cfg.blockDim = dim3(kBlock);
    cfg.stream = s;
    cfg.attrs = const_cast<cudaLaunchAttribute*>(attrs);
    cfg.numAttrs = numAttrs;
    int n = kN;
    void* args[] = {&dst, &n, &salt};
    const cudaError_t r = keep(cudaLaunchKernelExC(&cfg, reinterpret_cast<const void*>(clusterReport), args));
    codes.add(uint64_t(r));
    return r;
  };
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 8u;
    const int prio = i % 3 == 0 ? greatest : least;
    cudaLaunchAttribute list[4];
    unsigned n = 0;
    unsigned cx = 1;
    switch (i % 4) {
      case 0:
        list[n++] = ignoredAttr(u);
        list[n++] = clusterAttr(2);
        list[n++] = priorityAttr(prio);
        cx = 2;
        break;
      case 1:  // the same attributes in another order
        list[n++] = priorityAttr(prio);
        list[n++] = ignoredAttr(u + 1);
        list[n++] = clusterAttr(2);
        cx = 2;
        break;
      case 2: {
        cudaLaunchAttribute carve = {};
        carve.id = cudaLaunchAttributePreferredSharedMemoryCarveout;
        carve.val.sharedMemCarveout = unsigned((i / 4) % 3) * 50u;
        cudaLaunchAttribute domain = {};
        domain.id = cudaLaunchAttributeMemSyncDomain;
        domain.val.memSyncDomain = (i / 4) % 2 ? cudaLaunchMemSyncDomainRemote : cudaLaunchMemSyncDomainDefault;
        list[n++] = carve;
        list[n++] = domain;
        list[n++] = ignoredAttr(u + 2);
        break;
      }
      default:
        list[n++] = clusterAttr(4);
        list[n++] = priorityAttr(prio);
        cx = 4;
        break;
    }
    if (launch(list, n, a, u) == cudaSuccess) {
      hostClusterReport(ha, cx, u);
    } else {
      fail("attr_list_refused", i, uint64_t(i % 4));
    }
    if (irregular(i, 321, 6)) {  // a duplicated cluster attribute: whatever the driver does, it does every time
      cudaLaunchAttribute twice[2] = {clusterAttr(2), clusterAttr(4)};
      launch(twice, 2, dup, u + 1);
    }
    if (irregular(i, 322, 7)) {
      // Another stream waits until this launch has started; its work touches
      // none of the launch's buffers.
      cudaLaunchAttribute done = {};
      done.id = cudaLaunchAttributeLaunchCompletionEvent;
      done.val.launchCompletionEvent.event = evC;
      done.val.launchCompletionEvent.flags = 0;
      cudaLaunchAttribute l2[2] = {ignoredAttr(u + 3), done};
      if (launch(l2, 2, a, u + 2) == cudaSuccess) {
        hostClusterReport(ha, 1, u + 2);
        CK(cudaStreamWaitEvent(t, evC, 0));
        mix<<<kGrid, kBlock, 0, t>>>(e, f, kN, u + 3);
        CKL();
        hostMix(he, hf, u + 3);
        CK(cudaEventRecord(evT, t));
        CK(cudaStreamWaitEvent(s, evT, 0));
      } else {
        fail("completion_event_refused", i, 0);
      }
    }
    {
      // The driver: an ignored entry full of garbage, then a cluster.
      CUlaunchAttribute attrs[2];
      fillGarbage(&attrs[0], sizeof attrs[0], u + 4);
      attrs[0].id = CU_LAUNCH_ATTRIBUTE_IGNORE;
      std::memset(&attrs[1], 0, sizeof attrs[1]);
      attrs[1].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attrs[1].value.clusterDim.x = i % 2 ? 2 : 1;
      attrs[1].value.clusterDim.y = 1;
      attrs[1].value.clusterDim.z = 1;
      CUlaunchConfig cfg = {};
      cfg.gridDimX = kGrid;
      cfg.gridDimY = cfg.gridDimZ = 1;
      cfg.blockDimX = kBlock;
      cfg.blockDimY = cfg.blockDimZ = 1;
      cfg.hStream = reinterpret_cast<CUstream>(s);
      cfg.attrs = attrs;
      cfg.numAttrs = 2;
      uint32_t* dst = a;
      int nn = kN;
      uint32_t salt = u + 5;
      void* params[] = {&dst, &nn, &salt};
      CKD(cuLaunchKernelEx(&cfg, fn, params, nullptr));
      hostClusterReport(ha, i % 2 ? 2 : 1, u + 5);
    }
    if (i % 100 == 99) {
      CK(cudaStreamSynchronize(s));
      CK(cudaStreamSynchronize(t));
      compareWith("attr_a", i, a, ha);
      compareWith("attr_e", i, e, he);
      print("dup", i, deviceDigest(dup, kN * 4));
      print("codes", i, codes.h);
    }
  }
  CK(cudaDeviceSynchronize());
  compareWith("attr_a", g_iters, a, ha);
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(dup, kN * 4) ^ deviceDigest(e, kN * 4) ^ codes.h);
  endChecks("launch_attr_lists");
}

// --- cache_prefs

void cachePrefs() {
  cudaStream_t s = nonBlockingStream();
  const int optin = deviceAttribute(cudaDevAttrMaxSharedMemoryPerBlockOptin);
  const bool big = optin >= kStaticWords * 4 + 64 * 1024;
  const void* sym = reinterpret_cast<const void*>(smemPref);
  uint32_t *a = deviceBuffer(3401), *b = deviceBuffer(3402), *c = deviceBuffer(3403);
  std::vector<uint32_t> ha = hostBuffer(3401), hb = hostBuffer(3402), hc = hostBuffer(3403);
  const cudaFuncCache prefs[4] = {cudaFuncCachePreferNone, cudaFuncCachePreferShared, cudaFuncCachePreferL1,
                                  cudaFuncCachePreferEqual};
  const int carveouts[4] = {0, 50, 100, -1};
  Digest codes;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 4u;
    CK(cudaFuncSetCacheConfig(sym, prefs[i % 4]));
    smemPref<<<kGrid, kBlock, 4096, s>>>(a, b, kN, u);
    CKL();
    hostSmemPref(ha, hb, 4096, u);
    if (i % 3 == 0) codes.add(uint64_t(keep(cudaDeviceSetCacheConfig(prefs[(i / 3) % 4]))));
    codes.add(uint64_t(keep(cudaFuncSetAttribute(sym, cudaFuncAttributePreferredSharedMemoryCarveout, carveouts[i % 4]))));
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, u + 1);
    CKL();
    hostMix(hb, ha, u + 1);
    {
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(kGrid);
      cfg.blockDim = dim3(kBlock);
      cfg.dynamicSmemBytes = 16384;
      cfg.stream = s;
      cudaLaunchAttribute attr[1] = {};
      attr[0].id = cudaLaunchAttributePreferredSharedMemoryCarveout;
      attr[0].val.sharedMemCarveout = unsigned(i % 3) * 40u;
      cfg.attrs = i % 2 ? attr : nullptr;
      cfg.numAttrs = i % 2 ? 1 : 0;
      CK(cudaLaunchKernelEx(&cfg, smemPref, c, static_cast<const uint32_t*>(a), int(kN), u + 2));
      hostSmemPref(hc, ha, 16384, u + 2);
    }
    if (big && irregular(i, 341, 8)) {
      // The allowance raised, a launch that needs it, and the allowance
      // lowered at once (the launch was asked for under the higher one).
      CK(cudaFuncSetAttribute(sym, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024));
      smemPref<<<kGrid, kBlock, 60 * 1024, s>>>(a, c, kN, u + 3);
      CKL();
      hostSmemPref(ha, hc, 60 * 1024, u + 3);
      CK(cudaFuncSetAttribute(sym, cudaFuncAttributeMaxDynamicSharedMemorySize, 16 * 1024));
    }
    if (i % 10 == 9) codes.add(uint64_t(keep(cudaCtxResetPersistingL2Cache())));
    cudaFuncCache cfgNow = cudaFuncCachePreferNone;
    CK(cudaDeviceGetCacheConfig(&cfgNow));
    codes.add(uint64_t(cfgNow));
    cudaFuncAttributes fa = {};
    CK(cudaFuncGetAttributes(&fa, sym));
    codes.add(uint64_t(uint32_t(fa.preferredShmemCarveout)));
    codes.add(uint64_t(uint32_t(fa.maxDynamicSharedSizeBytes)));
    if (i % 100 == 99) {
      CK(cudaStreamSynchronize(s));
      compareWith("prefs_a", i, a, ha);
      compareWith("prefs_c", i, c, hc);
      print("codes", i, codes.h);
    }
  }
  CK(cudaStreamSynchronize(s));
  compareWith("prefs_a", g_iters, a, ha);
  compareWith("prefs_b", g_iters, b, hb);
  compareWith("prefs_c", g_iters, c, hc);
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4) ^ codes.h);
  CK(cudaDeviceSetCacheConfig(cudaFuncCachePreferNone));
  endChecks("cache_prefs");
}

// --- mapped_double_buffer

void mappedDoubleBuffer() {
  cudaStream_t s = nonBlockingStream();
  cudaEvent_t ev[2];
  for (auto& e : ev) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  uint32_t* in[2] = {};
  uint32_t* out[2] = {};
  uint32_t* inDev[2] = {};
  uint32_t* outDev[2] = {};
  for (int k = 0; k < 2; ++k) {
    CK(cudaHostAlloc(&in[k], kZcWords * 4, cudaHostAllocMapped | cudaHostAllocWriteCombined));
    CK(cudaHostAlloc(&out[k], kZcWords * 4, cudaHostAllocMapped));
    std::memset(out[k], 0, kZcWords * 4);
    CK(cudaHostGetDevicePointer(&inDev[k], in[k], 0));
    CK(cudaHostGetDevicePointer(&outDev[k], out[k], 0));
  }
  uint32_t *a = deviceBuffer(3501), *b = deviceBuffer(3502);
  std::vector<uint32_t> ha = hostBuffer(3501), hb = hostBuffer(3502);
  std::vector<uint32_t> written[2] = {std::vector<uint32_t>(kZcWords), std::vector<uint32_t>(kZcWords)};
  uint32_t writtenSalt[2] = {};
  int polls = 0;
  Digest outs;
  auto checkOut = [&](int slot, int at) {
    for (int k = 0; k < kZcWords; ++k) {
      const uint32_t want = written[slot][k] * 3u + writtenSalt[slot];
      if (out[slot][k] != want) {
        fail("zero_copy_out", at, uint64_t(k) << 32 | out[slot][k]);
        return;
      }
    }
    outs.add(out[slot], kZcWords * 4);
  };
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 4u;
    const int slot = i % 2;
    if (i >= 2) {
      // The kernel of step i-2 read in[slot] and wrote out[slot].
      if (i % 3 == 0) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        cudaError_t q;
        while ((q = cudaEventQuery(ev[slot])) == cudaErrorNotReady) {
          if (std::chrono::steady_clock::now() > until) {
            fail("zero_copy_poll", i, 0);
            endChecks("mapped_double_buffer");
          }
        }
        CK(q);
        ++polls;
      } else {
        CK(cudaEventSynchronize(ev[slot]));
      }
      checkOut(slot, i - 2);
    }
    for (int k = 0; k < kZcWords; ++k) {
      const uint32_t v = hash32(uint32_t(i) * 256u + uint32_t(k));
      in[slot][k] = v;  // write-combined: the host only writes it
      written[slot][k] = v;
    }
    writtenSalt[slot] = u;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, u);
    zeroCopyStep<<<kGrid, kBlock, 0, s>>>(a, inDev[slot], outDev[slot], kN, u);
    CKL();
    CK(cudaEventRecord(ev[slot], s));
    hostMix(ha, hb, u);
    for (int k = 0; k < kN; ++k) ha[k] = rotl(ha[k], 1) + written[slot][k % kZcWords];
    if (i % 7 == 3) {
      mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, u + 1);
      CKL();
      hostMix(hb, ha, u + 1);
    }
    if (i % 100 == 99) {
      CK(cudaStreamSynchronize(s));
      compareWith("zero_copy_a", i, a, ha);
      print("outs", i, outs.h);
    }
  }
  CK(cudaStreamSynchronize(s));
  for (int i = std::max(0, g_iters - 2); i < g_iters; ++i) checkOut(i % 2, i);
  compareWith("zero_copy_a", g_iters, a, ha);
  print("end", 0, outs.h ^ deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
  std::printf("polled %s\n", polls > 0 ? "yes" : "no");
  endChecks("mapped_double_buffer");
  for (int k = 0; k < 2; ++k) {
    CK(cudaFreeHost(in[k]));
    CK(cudaFreeHost(out[k]));
  }
}

// alloc_after_legacy: is a stream-ordered allocation on a blocking stream
// ordered behind the legacy stream's earlier work, as a query of that stream
// tells? Each step: a kernel of ~2 ms and two short ones on the legacy stream,
// then cudaMallocAsync on a created blocking stream and cudaStreamQuery of
// it at once. A tool that holds the legacy kernels but sends the allocation to
// the driver at once answers "ready" where the driver may say "not ready"
// (tests/sim sim_review4_calls, alloc-blocking-query: the simulator orders it
// behind; whether the driver does is what this asks). The answers are digested.
__global__ void spinThenWrite(uint32_t* x, uint32_t v, long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  x[0] = v;
}

void allocAfterLegacy() {
  cudaStream_t b;
  CK(cudaStreamCreate(&b));  // blocking
  uint32_t *x = deviceBuffer(3601), *y = deviceBuffer(3602);
  const long long cycles = 2LL * deviceAttribute(cudaDevAttrClockRate);  // ~2 ms (the clock rate is in kHz)
  int notReady = 0, ready = 0;
  Digest answers;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 5u;
    spinThenWrite<<<1, 1, 0, 0>>>(x, u, cycles);
    mix<<<kGrid, kBlock, 0, 0>>>(y, x, kN, u);
    mix<<<kGrid, kBlock, 0, 0>>>(x, y, kN, u + 1);
    mix<<<kGrid, kBlock, 0, 0>>>(y, x, kN, u + 2);  // five ops a step: long enough for a graph
    mix<<<kGrid, kBlock, 0, 0>>>(x, y, kN, u + 3);
    CKL();
    void* p = nullptr;
    CK(cudaMallocAsync(&p, 4096, b));
    const cudaError_t q = cudaStreamQuery(b);
    if (q != cudaSuccess && q != cudaErrorNotReady) CK(q);
    (q == cudaSuccess ? ready : notReady) += 1;
    const uint32_t answer = q == cudaSuccess ? 1u : 2u;
    answers.add(&answer, sizeof(answer));
    CK(cudaFreeAsync(p, b));
    CK(cudaDeviceSynchronize());
    if (i % 100 == 99) print("answers", i, answers.h);
  }
  print("end", 0, answers.h ^ deviceDigest(x, kN * 4) ^ deviceDigest(y, kN * 4));
  std::printf("query of the allocating stream: ready %s, not ready %s\n", ready ? "yes" : "no",
              notReady ? "yes" : "no");
  endChecks("alloc_after_legacy");
  CK(cudaStreamDestroy(b));
}

constexpr Scenario kScenarios[] = {
    {"host_gpu_handshake", hostGpuHandshake},
    {"pdl_chain", pdlChain},
    {"cooperative_ex", cooperativeEx},
    {"hostfunc_mapped_chain", hostfuncMappedChain},
    {"batch_copy_3d", batchCopy3d},
    {"vmm_chunks", vmmChunks},
    {"kernel_handles_big_struct", kernelHandlesBigStruct},
    {"launch_attr_lists", launchAttrLists},
    {"cache_prefs", cachePrefs},
    {"mapped_double_buffer", mappedDoubleBuffer},
    {"alloc_after_legacy", allocAfterLegacy},
};

}  // namespace

int main(int argc, char** argv) { return runScenarios(argc, argv, kScenarios); }
