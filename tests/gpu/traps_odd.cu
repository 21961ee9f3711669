// traps_odd: still more odd but legal CUDA C++ patterns in the style of
// traps.cu and traps_more.cu (trap_common.cuh), aimed at what a tool that
// holds launches back and replays them in graphs could miss: copies between
// two contexts of one device, kernel attributes that change what an
// identical launch means (cluster shapes) or whether it is refused, launches
// refused only by the driver in a repeating pattern, the program's own graph
// launched on two streams and changed right after each launch, graphs that
// allocate memory, event waits that bind to a record of the step before,
// sequences whose period shifts, launches that differ only in their shape
// (with their argument storage scribbled over after the call), a host
// function that blocks until the host saw other work finish, CUDA work in
// atexit handlers and a static destructor while work is still pending, two
// modules and a library with kernels of one name, and 2-D and 3-D copies
// and 2-D memsets whose pitches and extents change. Each scenario is
// deterministic in eager and prints digests of its buffers; check_traps.py
// requires the same output under graft. Built like traps_more (-rdc=true
// -lcudadevrt, not linked to libcuda: driver functions come from
// cudaGetDriverEntryPointByVersion).
//
//   traps_odd NAME [--iters N]    one scenario (see kScenarios)
//   traps_odd --list              the scenario names
//   traps_odd --probe-cross-context M   (internal) cross_context_copy's probe

#include <cooperative_groups.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "trap_common.cuh"

namespace cg = cooperative_groups;

namespace {

// ---------------------------------------------------------------- helpers


// Loads a kernel now (cudaFuncGetAttributes does, under lazy loading), so
// that its first use inside a capture loads nothing.
template <typename F>
void preload(F* kernel) {
  cudaFuncAttributes attr;
  CK(cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(kernel)));
}

// A driver function through the runtime's entry-point lookup (the program
// is not linked to libcuda), in the ABI of `version`.
template <typename Fn>
Fn driverFunction(const char* name, int version = 12000) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  CK(cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &found));
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

// The driver functions the scenarios call, looked up once.
struct Driver {
  PFN_cuCtxGetCurrent_v4000 ctxGetCurrent = driverFunction<PFN_cuCtxGetCurrent_v4000>("cuCtxGetCurrent");
  PFN_cuCtxSetCurrent_v4000 ctxSetCurrent = driverFunction<PFN_cuCtxSetCurrent_v4000>("cuCtxSetCurrent");
  PFN_cuCtxGetDevice_v2000 ctxGetDevice = driverFunction<PFN_cuCtxGetDevice_v2000>("cuCtxGetDevice");
  PFN_cuCtxCreate_v12050 ctxCreate = driverFunction<PFN_cuCtxCreate_v12050>("cuCtxCreate", 12050);
  PFN_cuCtxDestroy_v4000 ctxDestroy = driverFunction<PFN_cuCtxDestroy_v4000>("cuCtxDestroy");
  PFN_cuCtxSynchronize_v2000 ctxSynchronize = driverFunction<PFN_cuCtxSynchronize_v2000>("cuCtxSynchronize");
  PFN_cuMemAlloc_v3020 memAlloc = driverFunction<PFN_cuMemAlloc_v3020>("cuMemAlloc");
  PFN_cuMemFree_v3020 memFree = driverFunction<PFN_cuMemFree_v3020>("cuMemFree");
  PFN_cuMemcpyHtoD_v3020 memcpyHtoD = driverFunction<PFN_cuMemcpyHtoD_v3020>("cuMemcpyHtoD");
  PFN_cuMemcpyDtoH_v3020 memcpyDtoH = driverFunction<PFN_cuMemcpyDtoH_v3020>("cuMemcpyDtoH");
  PFN_cuMemcpyDtoDAsync_v3020 memcpyDtoDAsync = driverFunction<PFN_cuMemcpyDtoDAsync_v3020>("cuMemcpyDtoDAsync");
  PFN_cuMemcpyAsync_v4000 memcpyAsync = driverFunction<PFN_cuMemcpyAsync_v4000>("cuMemcpyAsync");
  PFN_cuMemcpyPeerAsync_v4000 memcpyPeerAsync = driverFunction<PFN_cuMemcpyPeerAsync_v4000>("cuMemcpyPeerAsync");
  PFN_cuMemsetD32Async_v3020 memsetD32Async = driverFunction<PFN_cuMemsetD32Async_v3020>("cuMemsetD32Async");
  PFN_cuMemsetD2D8Async_v3020 memsetD2D8Async = driverFunction<PFN_cuMemsetD2D8Async_v3020>("cuMemsetD2D8Async");
  PFN_cuMemsetD2D16Async_v3020 memsetD2D16Async = driverFunction<PFN_cuMemsetD2D16Async_v3020>("cuMemsetD2D16Async");
  PFN_cuMemsetD2D32Async_v3020 memsetD2D32Async = driverFunction<PFN_cuMemsetD2D32Async_v3020>("cuMemsetD2D32Async");
  PFN_cuStreamCreate_v2000 streamCreate = driverFunction<PFN_cuStreamCreate_v2000>("cuStreamCreate");
  PFN_cuStreamDestroy_v4000 streamDestroy = driverFunction<PFN_cuStreamDestroy_v4000>("cuStreamDestroy");
  PFN_cuStreamSynchronize_v2000 streamSynchronize = driverFunction<PFN_cuStreamSynchronize_v2000>("cuStreamSynchronize");
  PFN_cuStreamWaitEvent_v3020 streamWaitEvent = driverFunction<PFN_cuStreamWaitEvent_v3020>("cuStreamWaitEvent");
  PFN_cuEventCreate_v2000 eventCreate = driverFunction<PFN_cuEventCreate_v2000>("cuEventCreate");
  PFN_cuEventDestroy_v4000 eventDestroy = driverFunction<PFN_cuEventDestroy_v4000>("cuEventDestroy");
  PFN_cuEventRecord_v2000 eventRecord = driverFunction<PFN_cuEventRecord_v2000>("cuEventRecord");
  PFN_cuModuleLoadData_v2000 moduleLoadData = driverFunction<PFN_cuModuleLoadData_v2000>("cuModuleLoadData");
  PFN_cuModuleGetFunction_v2000 moduleGetFunction = driverFunction<PFN_cuModuleGetFunction_v2000>("cuModuleGetFunction");
  PFN_cuModuleUnload_v2000 moduleUnload = driverFunction<PFN_cuModuleUnload_v2000>("cuModuleUnload");
  PFN_cuLibraryLoadData_v12000 libraryLoadData = driverFunction<PFN_cuLibraryLoadData_v12000>("cuLibraryLoadData");
  PFN_cuLibraryGetKernel_v12000 libraryGetKernel = driverFunction<PFN_cuLibraryGetKernel_v12000>("cuLibraryGetKernel");
  PFN_cuLibraryUnload_v12000 libraryUnload = driverFunction<PFN_cuLibraryUnload_v12000>("cuLibraryUnload");
  PFN_cuKernelGetFunction_v12000 kernelGetFunction = driverFunction<PFN_cuKernelGetFunction_v12000>("cuKernelGetFunction");
  PFN_cuLaunchKernel_v4000 launchKernel = driverFunction<PFN_cuLaunchKernel_v4000>("cuLaunchKernel");
};


// A kernel compiled from PTX (the driver compiles it): cross_context_copy's
// kernel in the second context, and same_name_modules' two versions of one
// name (trap_common.cuh, kIncPtx).

// The same kernel under the same name with other constants: rotate by 5,
// read src[(k * 13 + 7) % n].
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

// Each block reads its right-hand neighbour's shared memory in its cluster,
// whatever the cluster's shape, and folds the cluster's size and its own rank
// into the result. Template copies are separate functions with separate
// attributes.
template <int V>
__global__ void clusterRing(uint32_t* dst, const uint32_t* src, int n, uint32_t salt) {
  cg::cluster_group cluster = cg::this_cluster();
  __shared__ uint32_t sh[kBlock];
  const int block = blockIdx.y * gridDim.x + blockIdx.x;
  const int k = block * blockDim.x + threadIdx.x;
  sh[threadIdx.x] = (k < n ? src[k] : 0u) + salt + uint32_t(V);
  cluster.sync();
  const unsigned rank = cluster.block_rank(), size = cluster.num_blocks();
  const uint32_t* peer = cluster.map_shared_rank(sh, (rank + 1) % size);
  const uint32_t v = peer[(threadIdx.x + 3) % blockDim.x];
  cluster.sync();
  if (k < n) dst[k] = rotl(dst[k], 6) ^ (v + size * 977u + rank * 131u);
}

// At most 64 threads per block: a launch with more is refused by the driver
// (the function's own limit, not the device's).
__global__ void __launch_bounds__(64) narrowMix(uint32_t* dst, const uint32_t* src, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 4) ^ (src[(k * 5 + 3) % n] + salt);
}

// Every block folds its part into partial[block]; after grid.sync() block 0
// folds them in block order into out[slot]. kBlock threads per block.
__global__ void cooperativeFold(const uint32_t* src, uint32_t* partial, uint32_t* out, int n, int slot) {
  cg::grid_group grid = cg::this_grid();
  __shared__ uint32_t s[kBlock];
  uint32_t acc = 0;
  for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) acc += src[k] * 3u + 1u;
  s[threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t t = 0;
    for (unsigned i = 0; i < blockDim.x; ++i) t = rotl(t, 1) ^ s[i];
    partial[blockIdx.x] = t;
  }
  grid.sync();
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    uint32_t t = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) t = t * 31u + partial[b];
    out[slot] = t;
  }
}

// A slow read-modify-write of every element (no element read by another
// thread): two of these running at once lose updates.
__global__ void slowRmw(uint32_t* a, const uint32_t* k, const uint32_t* w, int n, uint32_t salt, long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = rotl(a[i], 1) + k[i] + w[i % 256] * 7u + salt;
}

// Folds the launch's shape into the result: grid and block dimensions, the
// dynamic shared memory size (read from the special register) and which
// block handles which element (a grid-stride loop, so every shape covers all
// of dst). Two launches with equal arguments and another shape differ.
__global__ void shapeFold(uint32_t* dst, const uint32_t* src, int n, uint32_t salt) {
  extern __shared__ uint32_t sm[];
  uint32_t dyn = 0;
  asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
  const uint32_t threads = blockDim.x * blockDim.y * blockDim.z;
  const uint32_t t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const uint32_t blk = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const uint32_t words = dyn / 4;
  for (uint32_t w = t; w < words; w += threads) sm[w] = salt + w * 2654435761u + blk * 40503u;
  __syncthreads();
  const uint32_t shape = gridDim.x + gridDim.y * 31u + gridDim.z * 977u + blockDim.x * 7u + blockDim.y * 131u +
                         blockDim.z * 1009u + dyn * 13u;
  const uint32_t total = threads * gridDim.x * gridDim.y * gridDim.z;
  for (uint32_t k = blk * threads + t; k < uint32_t(n); k += total) {
    const uint32_t extra = words ? sm[(k * 5u) % words] : blk;
    dst[k] = rotl(dst[k], 3) ^ (src[(k * 7u + 1u) % uint32_t(n)] + salt + shape + extra);
  }
}

// Writes host-mapped memory.
__global__ void writeMappedWords(uint32_t* host, const uint32_t* src, int words, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < words) host[k] = rotl(src[(k * 29 + 7) % kN], 3) ^ (salt + uint32_t(k));
}

// ---------------------------------------------------------------- scenarios

// --- cross_context_copy

// The probe (this binary run with --probe-cross-context M, a fresh process:
// a copy the driver let fault would leave the scenario's own context
// broken): whether method M (0: cuMemcpyDtoDAsync, 1: cuMemcpyAsync) copies
// between the primary context's memory and a second context's memory on the
// same device, both ways, on a stream of either context. Exit 0 if it does.
int probeCrossContext(int method) {
  if (cudaFree(nullptr) != cudaSuccess) return 2;
  Driver d;
  CUcontext primary = nullptr, second = nullptr;
  CUdevice device = 0;
  if (d.ctxGetCurrent(&primary) != CUDA_SUCCESS || d.ctxGetDevice(&device) != CUDA_SUCCESS) return 2;
  if (d.ctxCreate(&second, nullptr, 0, device) != CUDA_SUCCESS) return 2;
  constexpr size_t bytes = 4096 * 4;
  CUdeviceptr x = 0;
  CUstream sb = nullptr;
  if (d.memAlloc(&x, bytes) != CUDA_SUCCESS || d.streamCreate(&sb, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return 2;
  if (d.ctxSetCurrent(primary) != CUDA_SUCCESS) return 2;
  uint32_t* a = nullptr;
  cudaStream_t sa = nullptr;
  if (cudaMalloc(&a, bytes) != cudaSuccess || cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking) != cudaSuccess)
    return 2;
  std::vector<uint32_t> pattern(bytes / 4), back(bytes / 4);
  for (size_t k = 0; k < pattern.size(); ++k) pattern[k] = uint32_t(k) * 2654435761u + 17u;
  auto copy = [&](CUdeviceptr dst, CUdeviceptr src, CUstream s) {
    return method == 0 ? d.memcpyDtoDAsync(dst, src, bytes, s) : d.memcpyAsync(dst, src, bytes, s);
  };
  // Primary to second, on the primary context's stream.
  if (cudaMemcpy(a, pattern.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess) return 2;
  if (copy(x, CUdeviceptr(a), reinterpret_cast<CUstream>(sa)) != CUDA_SUCCESS) return 1;
  if (cudaStreamSynchronize(sa) != cudaSuccess) return 1;
  if (d.ctxSetCurrent(second) != CUDA_SUCCESS || d.memcpyDtoH(back.data(), x, bytes) != CUDA_SUCCESS) return 1;
  if (back != pattern) return 1;
  // Second to primary, on the second context's stream.
  for (uint32_t& v : pattern) v = rotl(v, 7) ^ 0x5bd1e995u;
  if (d.memcpyHtoD(x, pattern.data(), bytes) != CUDA_SUCCESS) return 2;
  if (copy(CUdeviceptr(a), x, sb) != CUDA_SUCCESS) return 1;
  if (d.streamSynchronize(sb) != CUDA_SUCCESS) return 1;
  if (d.ctxSetCurrent(primary) != CUDA_SUCCESS) return 2;
  if (cudaMemcpy(back.data(), a, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) return 1;
  return back == pattern ? 0 : 1;
}

bool crossContextWorks(int method) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    std::fprintf(stderr, "traps: fork failed\n");
    std::exit(1);
  }
  if (pid == 0) {  // a fresh process: exec before any CUDA call
    const std::string m = std::to_string(method);
    execl("/proc/self/exe", "traps_odd", "--probe-cross-context", m.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Copies between the memory of two contexts on one device, as a program
// that drives a second context of its own next to the runtime's primary one
// may make them: every step the primary context's stream copies its buffer
// into the second context's memory, the second context's stream (after an
// event of the primary one) runs a kernel there and copies the result back
// into the primary context's memory, and an event of the second context
// orders the primary stream's next kernel after it. Each copy is a plain
// device-to-device copy (cuMemcpyDtoDAsync, cuMemcpyAsync) where the driver
// does these across contexts (asked in a fresh process first), else and
// besides a peer copy naming both contexts. Each context has its own address
// space: a kernel of one context cannot reach the other's memory, so a copy
// that is right eagerly must not become a kernel.
void crossContextCopy() {
  const bool dtod = crossContextWorks(0), uva = crossContextWorks(1);
  print("cross_context_copies", 0, uint64_t(dtod) | uint64_t(uva) << 1);
  CK(cudaFree(nullptr));  // the runtime's primary context, current from here on
  Driver d;
  CUcontext primary = nullptr, second = nullptr;
  CUdevice device = 0;
  CKU(d.ctxGetCurrent(&primary));
  CKU(d.ctxGetDevice(&device));
  CKU(d.ctxCreate(&second, nullptr, 0, device));  // becomes current
  CUmodule module = nullptr;
  CUfunction inc = nullptr;
  CKU(d.moduleLoadData(&module, kIncPtx));
  CKU(d.moduleGetFunction(&inc, module, "trapInc"));
  CUdeviceptr x = 0, y = 0;
  CKU(d.memAlloc(&x, kN * 4));
  CKU(d.memAlloc(&y, kN * 4));
  {
    std::vector<uint32_t> init(kN);
    for (int k = 0; k < kN; ++k) init[k] = uint32_t(k) * 97u + 5u;
    CKU(d.memcpyHtoD(x, init.data(), kN * 4));
    for (int k = 0; k < kN; ++k) init[k] = uint32_t(k) * 131u + 9u;
    CKU(d.memcpyHtoD(y, init.data(), kN * 4));
  }
  CUstream sb = nullptr;
  CUevent eb = nullptr;
  CKU(d.streamCreate(&sb, CU_STREAM_NON_BLOCKING));
  CKU(d.eventCreate(&eb, CU_EVENT_DISABLE_TIMING));
  CKU(d.ctxSetCurrent(primary));
  cudaStream_t sa = nonBlockingStream();
  cudaEvent_t ea;
  CK(cudaEventCreateWithFlags(&ea, cudaEventDisableTiming));
  uint32_t *a = deviceBuffer(601), *b = deviceBuffer(602), *a2 = deviceBuffer(603);
  const auto A = CUdeviceptr(a), A2 = CUdeviceptr(a2);
  auto* csa = reinterpret_cast<CUstream>(sa);
  // A copy of `bytes` from src (in context sctx) to dst (in dctx) on `s`, by
  // `method` where the driver does it across contexts, else by a peer copy.
  auto copy = [&](int method, CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t bytes,
                  CUstream s) {
    if (method == 0 && dtod) CKU(d.memcpyDtoDAsync(dst, src, bytes, s));
    else if (method == 1 && uva) CKU(d.memcpyAsync(dst, src, bytes, s));
    else CKU(d.memcpyPeerAsync(dst, dctx, src, sctx, bytes, s));
  };
  auto readSecond = [&](CUdeviceptr p) {
    std::vector<uint32_t> h(kN);
    CKU(d.ctxSetCurrent(second));
    CKU(d.memcpyDtoH(h.data(), p, kN * 4));
    CKU(d.ctxSetCurrent(primary));
    return hostDigest(h.data(), kN * 4);
  };
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, sa>>>(a, b, kN, uint32_t(i));
    CKL();
    copy(0, x, second, A, primary, kN * 4, csa);             // into the second context's memory
    copy(1, x + 4096 * 4, second, A + 64, primary, 4096 * 4, csa);  // a part again, another way
    CK(cudaEventRecord(ea, sa));
    CKU(d.ctxSetCurrent(second));
    CKU(d.streamWaitEvent(sb, reinterpret_cast<CUevent>(ea), 0));
    {
      CUdeviceptr dst = y, src = x;
      int n = kN;
      uint32_t v = uint32_t(i) * 3u + 1u;
      void* params[] = {&dst, &src, &n, &v};
      CKU(d.launchKernel(inc, kGrid, 1, 1, kBlock, 1, 1, 0, sb, params, nullptr));
    }
    CKU(d.memsetD32Async(y + 4 * (i % 64), uint32_t(i) * 2654435761u, 16, sb));
    copy(1, A2, primary, y, second, kN * 4, sb);              // back into the primary context's memory
    copy(0, A2 + 4 * 100, primary, x + 4 * 200, second, 1000 * 4, sb);
    copy(2, A2 + 4 * 8000, primary, y + 4 * 3, second, 999 * 4, sb);  // always a peer copy
    CKU(d.eventRecord(eb, sb));
    CKU(d.ctxSetCurrent(primary));
    CKU(d.streamWaitEvent(csa, eb, 0));
    mix<<<kGrid, kBlock, 0, sa>>>(b, a2, kN, uint32_t(i) + 1);
    CKL();
    if (i % 100 == 99) {
      CK(cudaStreamSynchronize(sa));  // after the second context's step too (the event)
      print("a", i, deviceDigest(a, kN * 4));
      print("y", i, readSecond(y));
    }
  }
  CK(cudaStreamSynchronize(sa));
  CKU(d.ctxSetCurrent(second));
  CKU(d.ctxSynchronize());
  CKU(d.ctxSetCurrent(primary));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(a2, kN * 4) ^ readSecond(x) ^
                      readSecond(y));
  CKU(d.ctxDestroy(second));
}

// --- cluster_attr_toggle

// Kernel attributes that change what an identical launch does, set between
// launches every step or every 25 steps: a kernel's permission for
// non-portable cluster sizes, off every fourth step, with the same launch of
// 16-block clusters right after (refused at its call while it is off), and
// another kernel's required cluster shape (cudaFuncAttributeRequiredCluster*,
// the cluster every plain launch of it then gets: 0 (none), 2, 4, 1 wide by
// turns). The kernels fold their cluster's size and rank into the result; the
// refusals' error codes go into a digest. A graph made under one setting and
// replayed under another would differ.
void clusterAttrToggle() {
  int device = currentDevice(), clusters = 0;
  CK(cudaDeviceGetAttribute(&clusters, cudaDevAttrClusterLaunch, device));
  if (!clusters) {
    print("no cluster launches here", 0, 0);
    return;
  }
  cudaStream_t s = nonBlockingStream();
  uint32_t *a = deviceBuffer(611), *b = deviceBuffer(612), *c = deviceBuffer(613);
  // Whether 16-block clusters of clusterRing<1> run here once allowed.
  bool sixteen = cudaFuncSetAttribute(clusterRing<1>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess;
  cudaGetLastError();
  cudaLaunchAttribute attr = {};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = 16;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  if (sixteen) {
    cudaLaunchConfig_t probe = {};
    probe.gridDim = dim3(kGrid);
    probe.blockDim = dim3(kBlock);
    probe.attrs = &attr;
    probe.numAttrs = 1;
    int n = 0;
    sixteen = cudaOccupancyMaxActiveClusters(&n, clusterRing<1>, &probe) == cudaSuccess && n > 0;
    cudaGetLastError();
  }
  print("cluster_16", 0, sixteen);
  const int widths[4] = {0, 2, 4, 1};
  Digest codes;
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(a, c, kN, uint32_t(i));
    CKL();
    if (sixteen) {
      const int allowed = i % 4 != 3;
      codes.add(uint64_t(cudaFuncSetAttribute(clusterRing<1>, cudaFuncAttributeNonPortableClusterSizeAllowed, allowed)));
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(kGrid);
      cfg.blockDim = dim3(kBlock);
      cfg.stream = s;
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
      codes.add(uint64_t(cudaLaunchKernelEx(&cfg, clusterRing<1>, b, static_cast<const uint32_t*>(a), kN, 7u)));
      codes.add(uint64_t(cudaGetLastError()));
    }
    if (i % 25 == 0) {
      // All three zero, or all three positive, by the next launch.
      const int w = widths[(i / 25) % 4];
      codes.add(uint64_t(cudaFuncSetAttribute(clusterRing<2>, cudaFuncAttributeRequiredClusterHeight, w ? 1 : 0)));
      codes.add(uint64_t(cudaFuncSetAttribute(clusterRing<2>, cudaFuncAttributeRequiredClusterDepth, w ? 1 : 0)));
      codes.add(uint64_t(cudaFuncSetAttribute(clusterRing<2>, cudaFuncAttributeRequiredClusterWidth, w)));
      codes.add(uint64_t(cudaGetLastError()));
    }
    clusterRing<2><<<kGrid, kBlock, 0, s>>>(c, b, kN, 9u);  // equal arguments every step
    codes.add(uint64_t(cudaGetLastError()));
    mix2<<<kGrid, kBlock, 0, s>>>(a, b, c, kN, uint32_t(i));
    CKL();
    if (checkpoint(i, s, "a", a)) print("codes", i, codes.h);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4) ^ codes.h);
}

// --- launch_error_kinds

// Launches only the driver refuses, in a pattern of period 4 between
// launches of the same kernels that succeed: more threads than the
// function's own __launch_bounds__ allow, a cooperative grid larger than the
// device holds at once, a grid that clusters of 4 do not divide, and an empty
// grid. Each is refused at its call (the code goes into a digest) and runs
// nothing; the loop goes on. A replay that held such a launch would return
// success and run it.
void launchErrorKinds() {
  cudaStream_t s = nonBlockingStream();
  const int device = currentDevice();
  int sms = 0, coop = 0, clusters = 0, perSm = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, device));
  CK(cudaDeviceGetAttribute(&clusters, cudaDevAttrClusterLaunch, device));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, cooperativeFold, kBlock, 0));
  print("launch_kinds", coop, uint64_t(clusters));
  const int tooMany = sms * std::max(perSm, 1) + sms;  // more blocks than fit at once
  uint32_t *a = deviceBuffer(621), *b = deviceBuffer(622), *partial = deviceBuffer(623, tooMany + 1);
  uint32_t* out = deviceBuffer(624, 64);
  Digest codes;
  auto cooperative = [&](int grid, int slot) {
    const uint32_t* src = a;
    int n = kN;
    void* args[] = {&src, &partial, &out, &n, &slot};
    codes.add(uint64_t(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(cooperativeFold), dim3(grid), dim3(kBlock),
                                                   args, 0, s)));
    codes.add(uint64_t(cudaGetLastError()));
  };
  auto clustered = [&](int grid, uint32_t salt) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(kBlock);
    cfg.stream = s;
    cudaLaunchAttribute attr = {};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = 4;
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    codes.add(uint64_t(cudaLaunchKernelEx(&cfg, clusterRing<3>, b, static_cast<const uint32_t*>(a), kN, salt)));
    codes.add(uint64_t(cudaGetLastError()));
  };
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i));
    narrowMix<<<kN / 64, 64, 0, s>>>(b, a, kN, 1u);
    codes.add(uint64_t(cudaGetLastError()));
    if (i % 4 == 0) {
      narrowMix<<<kGrid, kBlock, 0, s>>>(b, a, kN, 2u);  // 128 threads: above its bound
      codes.add(uint64_t(cudaGetLastError()));
    }
    if (coop) {
      cooperative(sms, 0);
      if (i % 4 == 1) cooperative(tooMany, 1);
    }
    if (clusters) {
      clustered(kGrid, 3u);
      if (i % 4 == 2) clustered(kGrid + 2, 4u);  // 130 blocks in clusters of 4
    }
    if (i % 4 == 3) {
      mix<<<0, kBlock, 0, s>>>(a, b, kN, 5u);
      codes.add(uint64_t(cudaGetLastError()));
    }
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i) + 6);
    CKL();
    if (checkpoint(i, s, "a", a)) print("codes", i, codes.h ^ deviceDigest(out, 64 * 4));
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(out, 64 * 4) ^ codes.h);
}

// --- graph_exec_streams

// One executable graph of the program's (a slow read-modify-write kernel, a
// memset, another such kernel that reads it, a fold) launched every step on
// stream A and right after on stream B, with no event between them: the
// driver orders the launches of one executable graph behind each other, so
// the second waits for the first. Right after the second launch the program
// changes the executable graph (the memset's value, the first kernel's salt,
// the third node enabled or not), which affects only later launches; every
// fifth step it uploads the graph on A first. Side kernels on both streams
// share no buffer with the graph. Two launches run at once, or one run with
// the later parameters, would lose or change updates.
void graphExecStreams() {
  cudaStream_t A = nonBlockingStream(), B = nonBlockingStream();
  uint32_t *a = deviceBuffer(631), *b = deviceBuffer(632), *k = deviceBuffer(633), *w = deviceBuffer(634, 256);
  uint32_t *e1 = deviceBuffer(635), *e2 = deviceBuffer(636), *e3 = deviceBuffer(637), *e4 = deviceBuffer(638);
  int n = kN;
  long long cycles = 20000;
  uint32_t salt1 = 1, salt3 = 3;
  const uint32_t* kc = k;
  const uint32_t* wc = w;
  cudaGraph_t g = nullptr;
  CK(cudaGraphCreate(&g, 0));
  auto kernelParams = [](void* func, void** args) {
    cudaKernelNodeParams p = {};
    p.func = func;
    p.gridDim = dim3(kGrid);
    p.blockDim = dim3(kBlock);
    p.kernelParams = args;
    return p;
  };
  void* args1[] = {&a, &kc, &wc, &n, &salt1, &cycles};
  const cudaKernelNodeParams p1 = kernelParams(reinterpret_cast<void*>(slowRmw), args1);
  cudaGraphNode_t n1 = nullptr, n2 = nullptr, n3 = nullptr, n4 = nullptr;
  CK(cudaGraphAddKernelNode(&n1, g, nullptr, 0, &p1));
  cudaMemsetParams mp = {};
  mp.dst = w;
  mp.value = 0x1000;
  mp.elementSize = 4;
  mp.width = 256;
  mp.height = 1;
  CK(cudaGraphAddMemsetNode(&n2, g, &n1, 1, &mp));
  void* args3[] = {&a, &kc, &wc, &n, &salt3, &cycles};
  const cudaKernelNodeParams p3 = kernelParams(reinterpret_cast<void*>(slowRmw), args3);
  CK(cudaGraphAddKernelNode(&n3, g, &n2, 1, &p3));
  uint32_t salt4 = 4;
  const uint32_t* ac = a;
  void* args4[] = {&b, &ac, &n, &salt4};
  const cudaKernelNodeParams p4 = kernelParams(reinterpret_cast<void*>(mix), args4);
  CK(cudaGraphAddKernelNode(&n4, g, &n3, 1, &p4));
  cudaGraphExec_t exec = nullptr;
  CK(cudaGraphInstantiate(&exec, g, 0));
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, A>>>(e1, e2, kN, uint32_t(i));
    if (i % 5 == 0) CK(cudaGraphUpload(exec, A));
    CK(cudaGraphLaunch(exec, A));
    mix<<<kGrid, kBlock, 0, B>>>(e3, e4, kN, uint32_t(i));
    CK(cudaGraphLaunch(exec, B));  // after A's launch: the same executable graph
    mix<<<kGrid, kBlock, 0, B>>>(e4, e3, kN, uint32_t(i) + 1);
    CKL();
    // For the next launches only.
    mp.value = 0x1000u + uint32_t(i) * 7u;
    CK(cudaGraphExecMemsetNodeSetParams(exec, n2, &mp));
    salt1 = uint32_t(i) * 13u + 1u;
    const cudaKernelNodeParams q1 = kernelParams(reinterpret_cast<void*>(slowRmw), args1);
    CK(cudaGraphExecKernelNodeSetParams(exec, n1, &q1));
    CK(cudaGraphNodeSetEnabled(exec, n3, i % 3 != 1));
    if (i % 100 == 99) {
      CK(cudaDeviceSynchronize());
      print("a", i, deviceDigest(a, kN * 4));
      print("b", i, deviceDigest(b, kN * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(e1, kN * 4) ^
                      deviceDigest(e4, kN * 4) ^ deviceDigest(w, 256 * 4));
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(g));
}

// --- graph_mem_nodes

// The program's own graphs that allocate memory (captured cudaMallocAsync):
// G1 allocates, uses and frees inside itself; G2 allocates and leaves the
// block to the program, which reads it with eager kernels and a copy and
// frees it with cudaFreeAsync before G2 is launched again (a launch while
// the block is still allocated is refused); G3, instantiated with
// AutoFreeOnLaunch, leaves its block allocated until its next launch frees
// it. Every 50 steps the host trims the device's graph memory. A free held
// back past G2's next launch makes that launch fail.
void graphMemNodes() {
  cudaStream_t s = nonBlockingStream(), cs = nonBlockingStream();
  uint32_t *a = deviceBuffer(641), *b = deviceBuffer(642), *c = deviceBuffer(643);
  preload(mix);
  const int device = currentDevice();
  cudaGraph_t g1 = nullptr, g2 = nullptr, g3 = nullptr;
  uint32_t *p = nullptr, *q = nullptr, *r = nullptr;
  CK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
  CK(cudaMallocAsync(&p, kN * 4, cs));
  CK(cudaMemsetAsync(p, 0x5a, kN * 4, cs));
  mix<<<kGrid, kBlock, 0, cs>>>(p, a, kN, 11u);
  mix<<<kGrid, kBlock, 0, cs>>>(b, p, kN, 12u);
  CK(cudaFreeAsync(p, cs));
  CK(cudaStreamEndCapture(cs, &g1));
  CK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
  CK(cudaMallocAsync(&q, kN * 4, cs));
  CK(cudaMemsetAsync(q, 0x33, kN * 4, cs));
  mix<<<kGrid, kBlock, 0, cs>>>(q, b, kN, 21u);
  CK(cudaStreamEndCapture(cs, &g2));
  CK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
  CK(cudaMallocAsync(&r, kN * 4, cs));
  CK(cudaMemsetAsync(r, 0x77, kN * 4, cs));
  mix<<<kGrid, kBlock, 0, cs>>>(r, c, kN, 31u);
  CK(cudaStreamEndCapture(cs, &g3));
  CKL();
  cudaGraphExec_t e1 = nullptr, e2 = nullptr, e3 = nullptr;
  CK(cudaGraphInstantiate(&e1, g1, 0));
  CK(cudaGraphInstantiate(&e2, g2, 0));
  CK(cudaGraphInstantiate(&e3, g3, cudaGraphInstantiateFlagAutoFreeOnLaunch));
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i));
    CK(cudaGraphLaunch(e1, s));
    CK(cudaGraphLaunch(e2, s));  // q allocated again
    mix<<<kGrid, kBlock, 0, s>>>(a, q, kN, uint32_t(i) + 1);
    CK(cudaMemcpyAsync(c, q + 64, (kN - 64) * 4, cudaMemcpyDeviceToDevice, s));
    CK(cudaFreeAsync(q, s));
    CK(cudaGraphLaunch(e3, s));  // frees the last step's r, allocates r
    mix<<<kGrid, kBlock, 0, s>>>(b, r, kN, uint32_t(i) + 2);
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i) + 3);
    CKL();
    if (i % 50 == 49) {
      CK(cudaStreamSynchronize(s));
      CK(cudaDeviceGraphMemTrim(device));
    }
    checkpoint(i, s, "a", a);
  }
  CK(cudaFreeAsync(r, s));
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4));
  CK(cudaGraphExecDestroy(e1));
  CK(cudaGraphExecDestroy(e2));
  CK(cudaGraphExecDestroy(e3));
  CK(cudaGraphDestroy(g1));
  CK(cudaGraphDestroy(g2));
  CK(cudaGraphDestroy(g3));
}

// --- lagged_event

// A producer stream P and a consumer stream C pass double-buffered slots
// with one event each way: P (after waiting F) writes slot[i % 2] and
// records E; C waits E, reads the slot of the step before and records F. On
// even steps C's part comes first, so its wait binds to P's record of the
// step before (and P's wait to C's record just made); on odd steps P's part
// comes first, so P's wait binds to C's record of the step before. C also
// waits every step on an event that is never recorded (no effect). A wait
// bound to the record later in the same step, or to none, lets C read a slot
// P has not written yet.
void laggedEvent() {
  cudaStream_t P = nonBlockingStream(), C = nonBlockingStream();
  cudaEvent_t E, F, never;
  CK(cudaEventCreateWithFlags(&E, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&F, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&never, cudaEventDisableTiming));
  uint32_t* slot[2] = {deviceBuffer(651), deviceBuffer(652)};
  uint32_t *a = deviceBuffer(653), *b = deviceBuffer(654), *base = deviceBuffer(655);
  auto producer = [&](int i) {
    if (i >= 1) CK(cudaStreamWaitEvent(P, F, 0));
    slowAdd<<<kGrid, kBlock, 0, P>>>(a, kN, uint32_t(i), 20000);
    mix<<<kGrid, kBlock, 0, P>>>(a, base, kN, uint32_t(i));
    mix<<<kGrid, kBlock, 0, P>>>(slot[i % 2], a, kN, uint32_t(i) * 3u);
    CK(cudaEventRecord(E, P));
  };
  auto consumer = [&](int i) {
    CK(cudaStreamWaitEvent(C, never, 0));
    if (i >= 1) {
      CK(cudaStreamWaitEvent(C, E, 0));
      mix<<<kGrid, kBlock, 0, C>>>(b, slot[(i - 1) % 2], kN, uint32_t(i));
    }
    addFrom<<<kGrid, kBlock, 0, C>>>(b, base, kN, uint32_t(i) + 1);
    CK(cudaEventRecord(F, C));
  };
  for (int i = 0; i < g_iters; ++i) {
    if (i % 2 == 0) {
      consumer(i);
      producer(i);
    } else {
      producer(i);
      consumer(i);
    }
    CKL();
    if (i % 100 == 99) {
      CK(cudaDeviceSynchronize());
      print("b", i, deviceDigest(b, kN * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(slot[0], kN * 4) ^
                      deviceDigest(slot[1], kN * 4));
}

// --- period_shift

// A loop whose body is one of five sequences of the same kernels with the
// same arguments in other orders (X, Y = X with its first two swapped, Z =
// X with its last two swapped, W = X with one salt changed, V = X with one
// kernel on a forked stream), chosen with period 2 (X Y), then 3 (X Y Z),
// then 5 (X X Y W V), then 2 again shifted (Y X), each for a quarter of the
// run, followed by 0 to 3 copies of one more launch ((i * 7) % 4). The
// arguments never change, so only the order tells the sequences apart.
void periodShift() {
  cudaStream_t s = nonBlockingStream(), t = nonBlockingStream();
  cudaEvent_t fork, join;
  CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  uint32_t *a = deviceBuffer(661), *b = deviceBuffer(662), *c = deviceBuffer(663), *d = deviceBuffer(664);
  auto m1 = [&] { mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, 1u); };
  auto m2 = [&] { mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, 2u); };
  auto m3 = [&](uint32_t salt) { mix2<<<kGrid, kBlock, 0, s>>>(c, a, b, kN, salt); };
  auto body = [&](char which) {
    switch (which) {
      case 'X': m1(); m2(); m3(3u); break;
      case 'Y': m2(); m1(); m3(3u); break;
      case 'Z': m1(); m3(3u); m2(); break;
      case 'W': m1(); m2(); m3(4u); break;
      default:  // 'V'
        m1();
        CK(cudaEventRecord(fork, s));
        CK(cudaStreamWaitEvent(t, fork, 0));
        mix<<<kGrid, kBlock, 0, t>>>(d, a, kN, 5u);  // reads a, as m2 does
        m2();
        CK(cudaEventRecord(join, t));
        CK(cudaStreamWaitEvent(s, join, 0));
        mix2<<<kGrid, kBlock, 0, s>>>(c, a, d, kN, 3u);
        break;
    }
  };
  const char* const phases[4] = {"XY", "XYZ", "XXYWV", "YX"};
  for (int i = 0; i < g_iters; ++i) {
    const int phase = std::min(3, 4 * i / g_iters);
    const char* p = phases[phase];
    body(p[i % int(std::strlen(p))]);
    for (int r = 0; r < (i * 7) % 4; ++r) mix<<<kGrid, kBlock, 0, s>>>(c, b, kN, 9u);
    CKL();
    if (i % 25 == 24) {
      CK(cudaStreamSynchronize(s));
      print("a", i, deviceDigest(a, kN * 4));
      print("c", i, deviceDigest(c, kN * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4) ^
                      deviceDigest(d, kN * 4));
}

// --- shape_only

struct Shape {
  dim3 grid, block;
  unsigned smem;
};
// Equal arguments, other shapes (the first three have the same thread count).
const Shape kShapes[7] = {
    {dim3(128), dim3(128), 0},         {dim3(64, 2), dim3(128), 0},  {dim3(128), dim3(64, 2), 0},
    {dim3(128), dim3(128), 1024},      {dim3(128), dim3(128), 4096}, {dim3(8, 4, 4), dim3(32, 2, 2), 512},
    {dim3(32), dim3(128), 256},
};

// The same kernel with the same arguments every step, launched four ways
// whose shapes change on their own schedules: a runtime launch (shapes of
// period 6), cuLaunchKernel with kernelParams (period 4), cudaLaunchKernelExC
// with a launch attribute (one shape for the first half of the run, another
// after), and cuLaunchKernel with an `extra` parameter buffer (period 3).
// The kernel folds its grid, block and dynamic shared memory size into the
// result. Right after each call the program scribbles over everything the
// call read (the parameter values and the pointers to them, the launch
// configuration and its attributes, the `extra` buffer and its size): the
// call has taken them. A replay with the shape of another step, or that read
// those after the call, differs.
void shapeOnly() {
  cudaStream_t s = nonBlockingStream();
  Driver d;
  cudaFunction_t rf;
  CK(cudaGetFuncBySymbol(&rf, reinterpret_cast<const void*>(shapeFold)));
  const CUfunction f = reinterpret_cast<CUfunction>(rf);
  uint32_t *a = deviceBuffer(671), *b = deviceBuffer(672), *c = deviceBuffer(673), *e = deviceBuffer(674);
  uint32_t* junk = deviceBuffer(675);  // what the scribbled pointers name: a valid buffer
  struct Args {
    uint32_t* dst;
    const uint32_t* src;
    int n;
    uint32_t salt;
  };
  auto* held = new Args;
  auto* poison = new Args{junk, junk, kN / 2, 0xdeadbeefu};
  void** params = new void*[4];
  struct alignas(8) Packed {
    uint32_t* dst;
    const uint32_t* src;
    int n;
    uint32_t salt;
  };
  static Packed packed;
  static size_t packedSize;
  int least = 0, greatest = 0;
  CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  const int pattern1[6] = {0, 1, 0, 2, 0, 3}, pattern2[4] = {3, 4, 3, 5}, pattern4[3] = {6, 0, 4};
  for (int i = 0; i < g_iters; ++i) {
    // 1: runtime launch.
    const Shape& s1 = kShapes[pattern1[i % 6]];
    shapeFold<<<s1.grid, s1.block, s1.smem, s>>>(b, a, kN, 11u);
    CKL();
    // 2: cuLaunchKernel, parameters through pointers into the heap.
    const Shape& s2 = kShapes[pattern2[i % 4]];
    *held = Args{c, b, kN, 22u};
    params[0] = &held->dst;
    params[1] = &held->src;
    params[2] = &held->n;
    params[3] = &held->salt;
    CKU(d.launchKernel(f, s2.grid.x, s2.grid.y, s2.grid.z, s2.block.x, s2.block.y, s2.block.z, s2.smem,
                       reinterpret_cast<CUstream>(s), params, nullptr));
    *held = *poison;
    params[0] = &poison->dst;
    params[1] = &poison->src;
    params[2] = &poison->n;
    params[3] = &poison->salt;
    // 3: cudaLaunchKernelExC with a priority attribute.
    const Shape& s3 = kShapes[i < g_iters / 2 ? 0 : 3];
    cudaLaunchAttribute attrs[1] = {};
    attrs[0].id = cudaLaunchAttributePriority;
    attrs[0].val.priority = greatest;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = s3.grid;
    cfg.blockDim = s3.block;
    cfg.dynamicSmemBytes = s3.smem;
    cfg.stream = s;
    cfg.attrs = attrs;
    cfg.numAttrs = 1;
    Args ex{e, c, kN, 33u};
    void* exArgs[] = {&ex.dst, &ex.src, &ex.n, &ex.salt};
    CK(cudaLaunchKernelExC(&cfg, reinterpret_cast<const void*>(shapeFold), exArgs));
    ex = *poison;
    exArgs[0] = exArgs[1] = &poison->dst;
    cfg.gridDim = dim3(1);
    cfg.blockDim = dim3(32);
    cfg.dynamicSmemBytes = 8;
    cfg.stream = nullptr;
    attrs[0].id = cudaLaunchAttributeClusterDimension;
    attrs[0].val.clusterDim = {2, 1, 1};
    // 4: cuLaunchKernel with one parameter buffer.
    const Shape& s4 = kShapes[pattern4[i % 3]];
    packed = Packed{a, e, kN, 44u};
    packedSize = sizeof packed;
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &packedSize,
                     CU_LAUNCH_PARAM_END};
    CKU(d.launchKernel(f, s4.grid.x, s4.grid.y, s4.grid.z, s4.block.x, s4.block.y, s4.block.z, s4.smem,
                       reinterpret_cast<CUstream>(s), nullptr, extra));
    packed = Packed{junk, junk, kN / 2, 0xbadf00du};
    packedSize = 8;
    extra[1] = poison;
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, 55u);
    CKL();
    if (checkpoint(i, s, "a", a)) print("junk", i, deviceDigest(junk, kN * 4));
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4) ^
                      deviceDigest(e, kN * 4) ^ deviceDigest(junk, kN * 4));
  delete held;
  delete poison;
  delete[] params;
}

// --- host_func_gate

// A host function in stream A that blocks until the host opens it, which the
// host does only once stream B's work of the step (which never waits for A)
// is done: at the start of A's step on even steps, between A's kernels on
// odd ones. Eagerly no gate ever times out. A replay that makes B's work
// wait for A's host function, or issues B's work only after it, makes every
// gate time out (1 s each) and shows in the count.
void hostFuncGate() {
  cudaStream_t A = nonBlockingStream(), B = nonBlockingStream();
  uint32_t *x = deviceBuffer(681), *y = deviceBuffer(682), *z = deviceBuffer(683), *w = deviceBuffer(684);
  HostGate gate(1000);  // 1 s
  HostGateCall calls[4];
  const int iters = std::max(g_iters / 4, 10);
  for (int i = 0; i < iters; ++i) {
    HostGateCall* call = &calls[i % 4];  // the one of four steps ago has run (A was synchronized)
    *call = HostGateCall{&gate, uint32_t(i + 1)};
    if (i % 2 == 0) CK(cudaLaunchHostFunc(A, hostGateWait, call));
    mix<<<kGrid, kBlock, 0, A>>>(y, w, kN, uint32_t(i));  // A and B share no buffer
    if (i % 2 == 1) CK(cudaLaunchHostFunc(A, hostGateWait, call));
    mix<<<kGrid, kBlock, 0, A>>>(w, y, kN, uint32_t(i) + 1);
    mix<<<kGrid, kBlock, 0, B>>>(x, z, kN, uint32_t(i));
    mix<<<kGrid, kBlock, 0, B>>>(z, x, kN, uint32_t(i));
    mix<<<kGrid, kBlock, 0, B>>>(x, z, kN, uint32_t(i) + 1);
    CKL();
    CK(cudaStreamSynchronize(B));
    gate.open.store(uint32_t(i + 1), std::memory_order_release);
    CK(cudaStreamSynchronize(A));
  }
  CK(cudaDeviceSynchronize());
  print("timeouts", int(gate.ran.load()), gate.timeouts.load());
  print("end", 0, deviceDigest(x, kN * 4) ^ deviceDigest(y, kN * 4) ^ deviceDigest(z, kN * 4) ^
                      deviceDigest(w, kN * 4));
}

// --- exit_with_held

struct ExitState {
  cudaStream_t s = nullptr, t = nullptr;
  uint32_t *a = nullptr, *b = nullptr, *c = nullptr;
  uint32_t* pinned = nullptr;  // an async copy's destination
  uint32_t* mapped = nullptr;  // written by a kernel
} g_exit;
constexpr int kExitWords = 1024;

// The handlers below run inside exit(): a failing call is printed, never
// CK'd (exit() again from a handler is undefined).
uint64_t exitDigest(const void* d, size_t bytes) {
  std::vector<unsigned char> h(bytes);
  const cudaError_t e = cudaMemcpy(h.data(), d, bytes, cudaMemcpyDeviceToHost);
  return e == cudaSuccess ? hostDigest(h.data(), bytes) : uint64_t(e);
}

// Registered last, so run first at exit: synchronizes, prints the device
// buffers.
void exitSynchronize() {
  print("atexit_sync", int(cudaDeviceSynchronize()), exitDigest(g_exit.a, kN * 4));
  print("atexit_bc", 0, exitDigest(g_exit.b, kN * 4) ^ exitDigest(g_exit.c, kN * 4));
  std::fflush(stdout);
}
// Run second: the host memory the last copy and kernel wrote (already
// synchronized), with no CUDA call.
void exitReadHost() {
  print("atexit_host", 0, hostDigest(g_exit.pinned, kExitWords * 4) ^ hostDigest(g_exit.mapped, kExitWords * 4));
  std::fflush(stdout);
}
// A static object's destructor, run after both: queries the streams and
// reads a buffer again.
struct ExitFinale {
  bool armed = false;
  ~ExitFinale() {
    if (!armed) return;
    const cudaError_t qs = cudaStreamQuery(g_exit.s), qt = cudaStreamQuery(g_exit.t);
    print("finale", int(qs) * 1000 + int(qt), exitDigest(g_exit.c, kN * 4));
    std::fflush(stdout);
  }
};

// The program leaves through exit() with work pending on two streams (the
// last steps are never synchronized in the loop), an asynchronous copy into
// pinned memory and a kernel writing mapped memory last; atexit handlers
// registered in the scenario (after the CUDA runtime's own) synchronize and
// print the buffers, read the host memory, and a function-local static
// object's destructor queries the streams and prints once more. Everything
// held must reach the GPU by the handlers' synchronize, and the handlers'
// CUDA calls must work.
void exitWithHeld() {
  static ExitFinale finale;  // its destructor is registered now: it runs after the handlers below
  finale.armed = true;
  std::atexit(exitReadHost);
  std::atexit(exitSynchronize);
  g_exit.s = nonBlockingStream();
  g_exit.t = nonBlockingStream();
  g_exit.a = deviceBuffer(691);
  g_exit.b = deviceBuffer(692);
  g_exit.c = deviceBuffer(693);
  CK(cudaMallocHost(&g_exit.pinned, kExitWords * 4));
  CK(cudaHostAlloc(&g_exit.mapped, kExitWords * 4, cudaHostAllocMapped));
  std::memset(g_exit.pinned, 0, kExitWords * 4);
  std::memset(g_exit.mapped, 0, kExitWords * 4);
  uint32_t* mappedDev = nullptr;
  CK(cudaHostGetDevicePointer(&mappedDev, g_exit.mapped, 0));
  cudaEvent_t e, f;
  CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&f, cudaEventDisableTiming));
  const ExitState& x = g_exit;
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, x.s>>>(x.a, x.b, kN, uint32_t(i));
    CK(cudaEventRecord(e, x.s));
    CK(cudaStreamWaitEvent(x.t, e, 0));
    mix<<<kGrid, kBlock, 0, x.t>>>(x.c, x.a, kN, uint32_t(i) + 1);
    mix<<<kGrid, kBlock, 0, x.s>>>(x.b, x.a, kN, uint32_t(i) + 2);  // reads a, as t does
    CK(cudaEventRecord(f, x.t));
    CK(cudaStreamWaitEvent(x.s, f, 0));
    mix2<<<kGrid, kBlock, 0, x.s>>>(x.a, x.b, x.c, kN, uint32_t(i) + 3);
    CKL();
    if (i < g_iters / 2) checkpoint(i, x.s, "a", x.a);  // no synchronize in the second half
  }
  CK(cudaMemcpyAsync(g_exit.pinned, x.a + 100, kExitWords * 4, cudaMemcpyDeviceToHost, x.s));
  writeMappedWords<<<kExitWords / kBlock, kBlock, 0, x.t>>>(mappedDev, x.c, kExitWords, 77u);
  CKL();
  std::fflush(stdout);
  std::exit(0);
}

// --- same_name_modules

// Two modules loaded from PTX that define a kernel of the same name with
// other code, and a library (cuLibraryLoadData) of the first: every step
// launches each with the same arguments: the two modules' functions, the
// library's kernel handle passed as a function (context-free, as the driver
// allows) and that kernel's function in this context. Every 50 steps the
// second module is unloaded and loaded again from the other PTX, and every
// 75 steps the library likewise, so the driver may hand back a handle it
// gave before for other code. Only the code tells the launches apart.
void sameNameModules() {
  CK(cudaFree(nullptr));
  Driver d;
  cudaStream_t s = nonBlockingStream();
  auto* cs = reinterpret_cast<CUstream>(s);
  const std::string ptx[2] = {kIncPtx, otherIncPtx()};
  uint32_t *a = deviceBuffer(701), *b = deviceBuffer(702);
  CUmodule mods[2] = {};
  CUfunction fa = nullptr, fb = nullptr, fl = nullptr;
  CUlibrary lib = nullptr;
  CUkernel kl = nullptr;
  int modVariant = 1, libVariant = 0;
  CKU(d.moduleLoadData(&mods[0], ptx[0].c_str()));
  CKU(d.moduleGetFunction(&fa, mods[0], "trapInc"));
  auto loadModule = [&](int variant) {
    CKU(d.moduleLoadData(&mods[1], ptx[variant].c_str()));
    CKU(d.moduleGetFunction(&fb, mods[1], "trapInc"));
  };
  auto loadLibrary = [&](int variant) {
    CKU(d.libraryLoadData(&lib, ptx[variant].c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    CKU(d.libraryGetKernel(&kl, lib, "trapInc"));
    CKU(d.kernelGetFunction(&fl, kl));
  };
  loadModule(modVariant);
  loadLibrary(libVariant);
  auto launch = [&](CUfunction f, uint32_t* dst, const uint32_t* src, uint32_t v) {
    CUdeviceptr pd = CUdeviceptr(dst), ps = CUdeviceptr(src);
    int n = kN;
    void* params[] = {&pd, &ps, &n, &v};
    CKU(d.launchKernel(f, kGrid, 1, 1, kBlock, 1, 1, 0, cs, params, nullptr));
  };
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i));
    CKL();
    launch(fa, b, a, 5u);
    launch(fb, b, a, 5u);
    launch(reinterpret_cast<CUfunction>(kl), b, a, 5u);
    launch(fl, b, a, 5u);
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, uint32_t(i) + 1);
    CKL();
    if (i % 50 == 49) {
      CK(cudaStreamSynchronize(s));
      CKU(d.moduleUnload(mods[1]));
      modVariant = 1 - modVariant;
      loadModule(modVariant);
    }
    if (i % 75 == 74) {
      CK(cudaStreamSynchronize(s));
      CKU(d.libraryUnload(lib));
      libVariant = 1 - libVariant;
      loadLibrary(libVariant);
    }
    checkpoint(i, s, "a", a);
  }
  CK(cudaStreamSynchronize(s));
  print("end", modVariant * 2 + libVariant, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
  CKU(d.libraryUnload(lib));
  CKU(d.moduleUnload(mods[1]));
  CKU(d.moduleUnload(mods[0]));
}

// --- pitch_shapes

// 2-D and 3-D copies and 2-D memsets whose shapes change every step while
// their sizes stay: a 2-D copy of 4096 bytes as 16 rows of 256, 32 of 128, 8
// of 512 or 64 of 64 with source and destination pitches on other periods; a
// driver 2-D memset of 1024 words with width, height and pitch on period 4;
// a runtime 2-D memset with only its pitch changing; an 8-bit 2-D memset
// whose rows are contiguous on odd steps; a 3-D copy from pitched memory
// into a 32x16x8 CUDA array with extents of 1024 elements in four shapes,
// positions that move and a source slice height of 16 or 32 rows; the array
// copied back whole; and a linear 3-D copy whose extent and source slice
// height change. Kernels read everything written.
void pitchShapes() {
  cudaStream_t s = nonBlockingStream();
  Driver d;
  auto* cs = reinterpret_cast<CUstream>(s);
  uint32_t *src = deviceBuffer(711, 2 * kN), *dst2d = deviceBuffer(712, 2 * kN), *mset = deviceBuffer(713, 2 * kN);
  uint32_t *lin3d = deviceBuffer(714), *lin3b = deviceBuffer(715), *a = deviceBuffer(716), *base = deviceBuffer(717);
  constexpr int kAx = 32, kAy = 16, kAz = 8;
  static_assert(kAx * kAy * kAz * 4 <= kN * 4, "the array fits a buffer");
  const cudaChannelFormatDesc desc = cudaCreateChannelDesc<uint32_t>();
  cudaArray_t arr = nullptr;
  CK(cudaMalloc3DArray(&arr, &desc, make_cudaExtent(kAx, kAy, kAz)));
  {
    cudaMemcpy3DParms p = {};
    p.srcPtr = make_cudaPitchedPtr(base, kAx * 4, kAx, kAy);
    p.dstArray = arr;
    p.extent = make_cudaExtent(kAx, kAy, kAz);
    p.kind = cudaMemcpyDeviceToDevice;
    CK(cudaMemcpy3D(&p));
  }
  const size_t widths[4] = {256, 128, 512, 64};  // bytes; 4096 in all
  const size_t rowsOf[4] = {16, 32, 8, 64};
  const size_t setWidths[4] = {256, 64, 1024, 128};  // words; 1024 in all
  const cudaExtent extents[4] = {make_cudaExtent(32, 16, 2), make_cudaExtent(16, 16, 4), make_cudaExtent(32, 8, 4),
                                 make_cudaExtent(16, 8, 8)};
  const cudaExtent linExtents[3] = {make_cudaExtent(256, 4, 4), make_cudaExtent(128, 8, 4),
                                    make_cudaExtent(64, 8, 8)};  // bytes, rows, slices
  auto* S = reinterpret_cast<unsigned char*>(src);
  auto* M = reinterpret_cast<unsigned char*>(mset);
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock, 0, s>>>(src, base, kN, uint32_t(i));
    CKL();
    // 2-D copy: 4096 bytes in four shapes, pitches on periods 3 and 5.
    const int k = i % 4;
    const size_t w = widths[k], h = rowsOf[k];
    const size_t spitch = w + 128 * size_t(i % 3 + 1), dpitch = w + 64 * size_t(i % 5);
    CK(cudaMemcpy2DAsync(dst2d + 3, dpitch, src + 7, spitch, w, h, cudaMemcpyDeviceToDevice, s));
    // Driver 2-D memset: 1024 words, value fixed, shape and pitch changing.
    const size_t sw = setWidths[k], sh = 1024 / sw, spitchSet = sw * 4 + 32 * size_t(i % 3);
    CKU(d.memsetD2D32Async(CUdeviceptr(mset), spitchSet, 0x01234567u, sw, sh, cs));
    // Runtime 2-D memset: only the pitch changes.
    CK(cudaMemset2DAsync(M + 40000, 256 + 64 * size_t(i % 3), 0x3c, 256, 16, s));
    // 8-bit 2-D memset, rows contiguous on odd steps; 16-bit with its pitch on period 2.
    CKU(d.memsetD2D8Async(CUdeviceptr(M + 60001), i % 2 ? 100 : 160, uint8_t(0xa5), 100, 9, cs));
    CKU(d.memsetD2D16Async(CUdeviceptr(M + 70002), i % 2 ? 200 : 264, uint16_t(0xbeef), 100, 7, cs));
    // 3-D copy into the array: 1024 elements, four extents, moving positions.
    {
      const cudaExtent e = extents[k];
      cudaMemcpy3DParms p = {};
      p.srcPtr = make_cudaPitchedPtr(src + 32, kAx * 4, kAx, i % 2 ? 32 : 16);
      p.dstArray = arr;
      p.dstPos = make_cudaPos((i % 2) * (kAx - e.width), ((i / 2) % 2) * (kAy - e.height), (i % 3) * (kAz - e.depth) / 2);
      p.extent = e;
      p.kind = cudaMemcpyDeviceToDevice;
      CK(cudaMemcpy3DAsync(&p, s));
    }
    // The array back into linear memory, whole.
    {
      cudaMemcpy3DParms p = {};
      p.srcArray = arr;
      p.dstPtr = make_cudaPitchedPtr(lin3d, kAx * 4, kAx, kAy);
      p.extent = make_cudaExtent(kAx, kAy, kAz);
      p.kind = cudaMemcpyDeviceToDevice;
      CK(cudaMemcpy3DAsync(&p, s));
    }
    // Linear 3-D copy: extent and source slice height changing.
    {
      const cudaExtent e = linExtents[i % 3];
      cudaMemcpy3DParms p = {};
      p.srcPtr = make_cudaPitchedPtr(S + 4096, 512, 512, i % 2 ? 16 : 8);
      p.dstPtr = make_cudaPitchedPtr(lin3b, 256, 256, 8);
      p.dstPos = make_cudaPos((i % 2) * (256 - e.width), 0, 0);
      p.extent = e;
      p.kind = cudaMemcpyDeviceToDevice;
      CK(cudaMemcpy3DAsync(&p, s));
    }
    mix2<<<kGrid, kBlock, 0, s>>>(a, dst2d, mset, kN, uint32_t(i));
    mix2<<<kGrid, kBlock, 0, s>>>(a, lin3d, lin3b, kN, uint32_t(i) + 1);
    addFrom<<<kGrid, kBlock, 0, s>>>(a, mset + kN, kN, uint32_t(i) + 2);
    CKL();
    if (checkpoint(i, s, "a", a))
      print("copies", i, deviceDigest(dst2d, 2 * kN * 4) ^ deviceDigest(mset, 2 * kN * 4) ^
                             deviceDigest(lin3d, kN * 4) ^ deviceDigest(lin3b, kN * 4));
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(dst2d, 2 * kN * 4) ^ deviceDigest(mset, 2 * kN * 4) ^
                      deviceDigest(lin3d, kN * 4) ^ deviceDigest(lin3b, kN * 4));
  CK(cudaFreeArray(arr));
}

constexpr Scenario kScenarios[] = {
    {"cross_context_copy", crossContextCopy},   {"cluster_attr_toggle", clusterAttrToggle},
    {"launch_error_kinds", launchErrorKinds},   {"graph_exec_streams", graphExecStreams},
    {"graph_mem_nodes", graphMemNodes},         {"lagged_event", laggedEvent},
    {"period_shift", periodShift},              {"shape_only", shapeOnly},
    {"host_func_gate", hostFuncGate},           {"exit_with_held", exitWithHeld},
    {"same_name_modules", sameNameModules},     {"pitch_shapes", pitchShapes},
};

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && !std::strcmp(argv[1], "--probe-cross-context")) return probeCrossContext(std::atoi(argv[2]));
  return runScenarios(argc, argv, kScenarios);
}
