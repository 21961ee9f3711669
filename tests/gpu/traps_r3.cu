// traps_r3: a third red-team round of odd but legal CUDA C++ patterns in the
// style of traps_edge.cu and traps_driver2.cu (trap_common.cuh), aimed at
// what a tool that holds launches back (answering CUDA_SUCCESS before it
// issues them), replays them as graphs and patches their parameter values
// could get wrong: the context a launch really runs in, parameter bytes no
// field owns, the program's own graphs built by capture into an existing
// graph, launches that differ only where the kernel can see it, loops whose
// period is long, copies the driver does its own way, stream-ordered memory
// handed between three streams, managed memory, events whose handles come
// back, stream attributes, `extra` lists in every legal order, and a device
// with no memory left. Each scenario is deterministic in eager and prints
// digests of its buffers and of the return codes and values the host saw;
// check_traps.py requires the same output under graft.
//
//   kernel_stream_context  a library kernel (cuLibraryLoadData, a CUkernel:
//                         no context of its own) launched by cuLaunchKernel
//                         and cuLaunchKernelEx on a stream of ANOTHER context
//                         than the current one: the driver runs it in the
//                         stream's context (cuda.h, cuLaunchKernel), on that
//                         context's memory. In three phases of 20 steps: the
//                         primary context current and only the second
//                         context's stream used; both contexts' streams; the
//                         second context current and the primary's stream
//                         used. Where a fresh process (the probe) finds the
//                         driver does it, also a module function of the
//                         second context launched on its stream while the
//                         primary is current; where the driver refuses that,
//                         the refused launch on irregular steps (codes
//                         digested). Each context has its own address space:
//                         a tool that takes the current context as the
//                         launch's and builds its graph there runs the
//                         kernel where the memory is not mapped (a fault), or
//                         launches a graph of one context on a stream of
//                         another.
//   padded_struct_params  kernels taking structs by value whose padding
//                         bytes hold garbage that changes every launch (a
//                         struct with interior and tail padding, a union with
//                         only its small member set, a 13-byte struct padded
//                         to 16), whose pointer and count fields change every
//                         step; the same field values launched twice with
//                         other garbage; a __grid_constant__ struct whose
//                         address the kernel takes; on irregular steps the
//                         same launch through an `extra` buffer whose gaps
//                         between parameters hold garbage. Garbage must not
//                         matter to the result, nor break matching.
//   capture_to_graph      the program's own graphs built every step by
//                         cudaStreamBeginCaptureToGraph into a clone of a
//                         template graph (its kernel node's parameters set on
//                         the clone, the capture depending on it, every
//                         capture mode in turn), a user object with a
//                         destructor moved into each graph, the graph
//                         destroyed once instantiated and the executable
//                         graph destroyed right after its launch (still in
//                         flight); kernels the tool holds before and after
//                         each launch. The destructors must all run (counted
//                         after a synchronize), the captured graph must be the
//                         one given, and the results must match.
//   dyn_smem_only         one kernel launched with the same grid, block and
//                         parameters, only its dynamic shared memory size
//                         changing (0, 1, 8 KiB in turn, 4 or 64 KiB on
//                         irregular steps), through the runtime and through
//                         cuLaunchKernelEx; the kernel reads its own size
//                         (%dynamic_smem_size), so a launch made with another
//                         size than the program asked for shows.
//   long_period_counter   a step of 97 to 113 ops (an inner loop of 12
//                         rounds of 8 ops, 13 on irregular steps, 11 every
//                         17th), so its period is longer than 64 ops, with a
//                         one-thread kernel counting its launches in a
//                         __device__ counter and logging each launch's tag in
//                         launch order: a launch dropped, made twice or out of
//                         order changes the log. The counter is read into
//                         pageable memory by cudaMemcpyFromSymbolAsync every
//                         25 steps (the host uses it at once), reset by a
//                         device-to-device cudaMemcpyToSymbolAsync every 50,
//                         the log cleared by a memset of its symbol address.
//   peer_copies_one_device  on two blocking streams joined by events:
//                         cudaMemcpyPeerAsync, cudaMemcpy3DPeerAsync,
//                         cudaMemset3DAsync and cudaMemcpy3DAsync between
//                         pitched regions of one device, extents changing on
//                         irregular steps, between kernels a tool holds; every
//                         10th step a cudaMemcpyPeer (serialized with the
//                         device's pending and later work) right before a
//                         kernel that overwrites its source.
//   pool_three_streams    stream-ordered memory handed between three streams:
//                         allocated and filled on A, used on B after an
//                         event, used and freed on C after another, A waiting
//                         for C before its next allocation (the pool may hand
//                         the block back at once); every 13th step a second
//                         block allocated on C and freed on A; sizes doubling
//                         on irregular steps; the pool trimmed every 50 steps.
//   managed_copies        device-to-device copies (cudaMemcpyAsync with
//                         cudaMemcpyDefault and cudaMemcpyDeviceToDevice) and
//                         memsets (runtime and driver) into and out of managed
//                         memory between kernels, with cudaMemAdvise
//                         (read-mostly on and off, preferred location host or
//                         device) between them, prefetches to the host every
//                         10 steps after which the host reads and writes the
//                         memory, and cudaMemRangeGetAttribute's answers
//                         digested.
//   event_recycle         an event created every step (untimed, blocking-sync
//                         untimed, or timing, in turn at one call site),
//                         recorded, waited on and destroyed with the wait
//                         still pending; a new event (the driver may give the
//                         same handle back) queried and waited on before its
//                         first record (a no-op, cudaSuccess), then recorded
//                         and waited on; an event recorded and destroyed with
//                         no waiter; a blocking-sync event synchronized and
//                         queried before any record. A tool that ties a handle
//                         to the old event's held record answers "not ready"
//                         or orders the wrong work.
//   stream_attrs          stream attributes changed between launches: an
//                         access policy window set (on a, on b, or empty) on
//                         one stream and copied to another with
//                         cudaStreamCopyAttributes, synchronization policy,
//                         priority and memory synchronization domain, the
//                         persisting L2 lines reset every 10 steps; the codes
//                         and values read back (cudaStreamGetAttribute,
//                         cudaStreamGetPriority, cudaStreamIsCapturing,
//                         cudaStreamGetCaptureInfo) digested.
//   extra_key_order       one launch site of a kernel with gaps between its
//                         parameters, through kernelParams or an `extra` list
//                         whose keys come in every order: size before
//                         pointer, and the buffer pointer given twice (a
//                         decoy buffer with other values first or last), the
//                         gaps full of garbage; a kernel without parameters
//                         launched with a buffer pointer and no size, counting
//                         its launches. The driver's codes are digested: a
//                         tool that reads the list otherwise than the driver
//                         runs other values.
//   memory_exhausted      every kernel and stream used first, then the device's
//                         memory taken in chunks until an allocation fails and
//                         4 MiB given back; a loop of launches, copies and
//                         memsets (which need no memory of their own) then
//                         runs, an allocation of 64 MiB refused every 10th
//                         step. A tool that builds graphs must go on, with the
//                         same results, when it cannot get memory for them.
//
//   traps_r3 NAME [--iters N]     one scenario (see kScenarios)
//   traps_r3 --list               the scenario names
//   traps_r3 --probe-stream-context V   (internal) kernel_stream_context's probe
//
// Built like traps_driver2 (-rdc=true -lcudadevrt) and linked to libcuda (-lcuda):
//   nvcc -O2 -std=c++17 -rdc=true -o traps_r3 traps_r3.cu -lcudadevrt -lcuda

#include <cuda.h>
#include <cuda_runtime.h>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "trap_common.cuh"

namespace {

// ---------------------------------------------------------------- helpers



uint32_t* zeroBuffer(size_t bytes) {
  uint32_t* d = nullptr;
  CK(cudaMalloc(&d, bytes));
  CK(cudaMemset(d, 0, bytes));
  return d;
}

// Garbage for padding: bytes that change with `seed`.
void fillGarbage(void* p, size_t bytes, uint32_t seed) {
  auto* b = static_cast<unsigned char*>(p);
  for (size_t k = 0; k < bytes; ++k) b[k] = static_cast<unsigned char>(hash32(seed * 0x9e3779b9u + uint32_t(k)) >> 5);
}

// Writes `v` at byte `offset` of `base`.
template <typename T>
void put(void* base, size_t offset, const T& v) {
  std::memcpy(static_cast<unsigned char*>(base) + offset, &v, sizeof v);
}

// A second context on the current device, not current (the primary context
// is current on return).
CUcontext makeSecondContext() {
  CK(cudaFree(nullptr));
  CUdevice dev = 0;
  CKD(cuCtxGetDevice(&dev));
  CUcontext second = nullptr, popped = nullptr;
  CKD(cuCtxCreate(&second, nullptr, 0, dev));
  CKD(cuCtxPopCurrent(&popped));
  return second;
}

struct ProbeResult {
  std::string text;  // "exit N: LINE", "signal N" or "timed out"
  std::string line;  // its output, without the trailing newline
  int exitCode = -1;
};

// The probe machinery: this binary run again as `traps_r3 FLAG VARIANT`
// (trap_common.cuh, runSelfInChild).
ProbeResult runProbe(const char* flag, const char* variant) {
  const ChildRun run = runSelfInChild("traps_r3", flag, variant);
  return {run.text, run.out, run.exitCode};
}

// ---------------------------------------------------------------- kernels

// dst[k] = rotl(dst[k], 3) + src[(k * 11 + 5) % n] + v: what trapInc
// (trap_common.cuh, kIncPtx) does, on the host.
void incOnHost(std::vector<uint32_t>& dst, const std::vector<uint32_t>& src, uint32_t v) {
  const int n = int(dst.size());
  for (int k = 0; k < n; ++k) dst[k] = rotl(dst[k], 3) + src[(k * 11 + 5) % n] + v;
}

// padded_struct_params: interior padding after `tag`, `count` and `c`.
struct Padded {
  uint8_t tag;     // 7 bytes of padding after it
  uint32_t* ptr;
  uint16_t count;  // 2 bytes of padding after it
  uint32_t salt;
  double scale;
  char c;  // 7 bytes of tail padding
};
static_assert(sizeof(Padded) == 40, "Padded: 40 bytes with its padding");
union Pick {  // only `word` is ever set: the other 4 bytes of `wide` are garbage
  uint32_t word;
  uint64_t wide;
};
struct Trailing {  // 13 bytes of fields, 3 bytes of tail padding
  uint32_t v[3];
  uint8_t last;
};
static_assert(sizeof(Trailing) == 16, "Trailing: 16 bytes with its padding");

__global__ void paddedWrite(Padded p, const uint32_t* src, Pick pick, Trailing t, int n) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= int(p.count) || k >= n) return;
  const uint32_t extra = uint32_t(p.scale * 8.0) + uint32_t(uint8_t(p.c)) + t.v[k % 3] + t.last;
  p.ptr[k] = rotl(p.ptr[k], (p.tag & 15) + 1) ^ (src[(uint32_t(k) * 13u + p.salt) % uint32_t(n)] + pick.word + extra);
}

// The parameter's own address, read through.
__device__ uint32_t readPadded(const Padded* q, int k) {
  return (k < int(q->count) ? q->ptr[k] : q->salt) + q->tag + uint32_t(uint8_t(q->c));
}
__global__ void gridConstRead(const __grid_constant__ Padded p, uint32_t* out, int n) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) out[k] = rotl(out[k], 9) + readPadded(&p, k);
}

// dyn_smem_only: reads its own dynamic shared memory size.
__global__ void smemSized(uint32_t* dst, const uint32_t* src, int n, uint32_t salt) {
  extern __shared__ uint32_t sh[];
  uint32_t bytes = 0;
  asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));
  const uint32_t words = bytes / 4;
  for (uint32_t w = threadIdx.x; w < words; w += blockDim.x) sh[w] = src[(blockIdx.x * 131u + w) % uint32_t(n)] ^ w;
  __syncthreads();
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 7) + (words ? sh[(threadIdx.x * 7u) % words] : 0u) + bytes * 3u + salt;
}

// long_period_counter: launches counted and logged in launch order.
constexpr uint32_t kLogWords = 1024;
__device__ uint32_t g_r3Count;
__device__ uint32_t g_r3Log[kLogWords];
__global__ void tick(uint32_t tag) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const uint32_t k = atomicAdd(&g_r3Count, 1u);
    g_r3Log[k % kLogWords] = tag * 2654435761u + k;
  }
}

// extra_key_order: gaps between parameters (offsets 0, 8, 16, 24, 28, 32).
__global__ void gapParams(uint32_t* dst, char c, const uint32_t* src, short s, int n, double d) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n)
    dst[k] = rotl(dst[k], 11) + src[(k * 3 + 1) % n] + uint32_t(uint8_t(c)) * 7u + uint32_t(uint16_t(s)) +
             uint32_t(d);
}
__device__ uint32_t g_r3Bumps;
__global__ void bump() {
  if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(&g_r3Bumps, 1u);
}

// ---------------------------------------------------------------- scenarios

// --- kernel_stream_context

// The probe: in a fresh process, the primary context current, trapInc
// launched on a stream of a second context over that context's memory, as a
// library kernel (V = "kernel") or as a function of a module loaded in the
// second context (V = "function"). Prints the codes and whether the memory
// then holds what the kernel would have written (or, refused, what it held).
int probeStreamContext(const char* variant) {
  if (cudaFree(nullptr) != cudaSuccess) {
    std::printf("no device\n");
    return 77;
  }
  const bool asKernel = !std::strcmp(variant, "kernel");
  if (!asKernel && std::strcmp(variant, "function")) return 2;
  CUcontext primary = nullptr, second = nullptr;
  CUdevice dev = 0;
  if (cuCtxGetCurrent(&primary) != CUDA_SUCCESS || cuCtxGetDevice(&dev) != CUDA_SUCCESS) return 2;
  if (cuCtxCreate(&second, nullptr, 0, dev) != CUDA_SUCCESS) return 2;  // current
  std::vector<uint32_t> px(kN), py(kN);
  for (int k = 0; k < kN; ++k) {
    px[k] = uint32_t(k) * 2654435761u + 3u;
    py[k] = uint32_t(k) * 40503u ^ 0x5bd1e995u;
  }
  CUdeviceptr x = 0, y = 0;
  CUstream sq = nullptr;
  if (cuMemAlloc(&x, kN * 4) != CUDA_SUCCESS || cuMemAlloc(&y, kN * 4) != CUDA_SUCCESS) return 2;
  if (cuMemcpyHtoD(x, px.data(), kN * 4) != CUDA_SUCCESS || cuMemcpyHtoD(y, py.data(), kN * 4) != CUDA_SUCCESS)
    return 2;
  if (cuStreamCreate(&sq, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return 2;
  CUfunction f = nullptr;
  if (asKernel) {
    CUlibrary lib = nullptr;
    CUkernel k = nullptr;
    if (cuLibraryLoadData(&lib, kIncPtx, nullptr, nullptr, 0, nullptr, nullptr, 0) != CUDA_SUCCESS ||
        cuLibraryGetKernel(&k, lib, "trapInc") != CUDA_SUCCESS)
      return 2;
    f = reinterpret_cast<CUfunction>(k);
  } else {
    CUmodule module = nullptr;
    if (cuModuleLoadData(&module, kIncPtx) != CUDA_SUCCESS ||
        cuModuleGetFunction(&f, module, "trapInc") != CUDA_SUCCESS)
      return 2;
  }
  if (cuCtxSetCurrent(primary) != CUDA_SUCCESS) return 2;
  int n = kN;
  uint32_t v = 12345;
  void* params[] = {&x, &y, &n, &v};
  const CUresult launch = cuLaunchKernel(f, kGrid, 1, 1, kBlock, 1, 1, 0, sq, params, nullptr);
  CUresult sync = cuCtxSetCurrent(second);
  if (sync == CUDA_SUCCESS) sync = cuStreamSynchronize(sq);
  std::vector<uint32_t> back(kN);
  const CUresult copy = cuMemcpyDtoH(back.data(), x, kN * 4);
  if (launch == CUDA_SUCCESS) incOnHost(px, py, v);
  std::printf("launch %d sync %d copy %d same %d\n", int(launch), int(sync), int(copy), int(back == px));
  return 0;
}

struct StreamContextProbe {
  bool works = false;    // launched, ran in the stream's context, right result
  bool refused = false;  // refused at the call, the context fine, memory untouched
};

StreamContextProbe probeStreamContextIn(const char* variant) {
  const ProbeResult p = runProbe("--probe-stream-context", variant);
  std::printf("probe %s: %s\n", variant, p.text.c_str());
  StreamContextProbe r;
  int launch = 0, sync = 0, copy = 0, same = 0;
  if (p.exitCode == 0 &&
      std::sscanf(p.line.c_str(), "launch %d sync %d copy %d same %d", &launch, &sync, &copy, &same) == 4 &&
      sync == 0 && copy == 0 && same == 1) {
    r.works = launch == 0;
    r.refused = launch != 0;
  }
  return r;
}

void kernelStreamContext() {
  const StreamContextProbe asKernel = probeStreamContextIn("kernel");
  const StreamContextProbe asFunction = probeStreamContextIn("function");
  CUcontext second = makeSecondContext();  // the primary context is current
  CUcontext popped = nullptr;
  // The second context's memory, stream and module function.
  CKD(cuCtxPushCurrent(second));
  CUdeviceptr qx = 0, qy = 0;
  CKD(cuMemAlloc(&qx, kN * 4));
  CKD(cuMemAlloc(&qy, kN * 4));
  {
    std::vector<uint32_t> h(kN);
    for (int k = 0; k < kN; ++k) h[k] = uint32_t(k) * 97u + 5u;
    CKD(cuMemcpyHtoD(qx, h.data(), kN * 4));
    for (int k = 0; k < kN; ++k) h[k] = uint32_t(k) * 131u + 9u;
    CKD(cuMemcpyHtoD(qy, h.data(), kN * 4));
  }
  CUstream sq = nullptr;
  CKD(cuStreamCreate(&sq, CU_STREAM_NON_BLOCKING));
  CUmodule module = nullptr;
  CUfunction fq = nullptr;
  CKD(cuModuleLoadData(&module, kIncPtx));
  CKD(cuModuleGetFunction(&fq, module, "trapInc"));
  CKD(cuCtxPopCurrent(&popped));
  // The library kernel: no context of its own.
  CUlibrary lib = nullptr;
  CUkernel kernel = nullptr;
  CKD(cuLibraryLoadData(&lib, kIncPtx, nullptr, nullptr, 0, nullptr, nullptr, 0));
  CKD(cuLibraryGetKernel(&kernel, lib, "trapInc"));
  const auto kf = reinterpret_cast<CUfunction>(kernel);
  // The primary context's memory and stream.
  cudaStream_t sp = nonBlockingStream();
  const auto csp = reinterpret_cast<CUstream>(sp);
  uint32_t *a = deviceBuffer(1201), *b = deviceBuffer(1202);
  const auto A = CUdeviceptr(a), B = CUdeviceptr(b);
  auto inc = [](CUfunction f, CUstream s, CUdeviceptr dst, CUdeviceptr src, uint32_t v) {
    int n = kN;
    void* params[] = {&dst, &src, &n, &v};
    return cuLaunchKernel(f, kGrid, 1, 1, kBlock, 1, 1, 0, s, params, nullptr);
  };
  auto incEx = [](CUfunction f, CUstream s, CUdeviceptr dst, CUdeviceptr src, uint32_t v) {
    int n = kN;
    void* params[] = {&dst, &src, &n, &v};
    CUlaunchConfig cfg = {};
    cfg.gridDimX = kGrid;
    cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = kBlock;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = s;
    return cuLaunchKernelEx(&cfg, f, params, nullptr);
  };
  auto syncSecond = [&]() {
    CKD(cuCtxPushCurrent(second));
    CKD(cuStreamSynchronize(sq));
    CKD(cuCtxPopCurrent(&popped));
  };
  auto readSecond = [&](CUdeviceptr p) {
    std::vector<uint32_t> h(kN);
    CKD(cuCtxPushCurrent(second));
    CKD(cuMemcpyDtoH(h.data(), p, kN * 4));
    CKD(cuCtxPopCurrent(&popped));
    return hostDigest(h.data(), kN * 4);
  };
  Digest codes;
  int refused = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 16u;
    const int phase = (i / 20) % 3;
    if (phase == 0) {
      // The primary context current; only the second context's stream.
      for (uint32_t j = 0; j < 3; ++j) {
        if (asKernel.works) {
          CKD(inc(kf, sq, qx, qy, u + j));
          CKD(incEx(kf, sq, qy, qx, u + j + 4));
        }
        if (asFunction.works) CKD(inc(fq, sq, qx, qy, u + j + 8));
      }
      if (asFunction.refused && irregular(i, 71, 6)) {
        const CUresult r = inc(fq, sq, qy, qx, u + 12);
        codes.add(uint64_t(r));
        refused += r != CUDA_SUCCESS;
      }
      CKD(cuCtxPushCurrent(second));  // the second context's own launches, as a control
      CKD(inc(fq, sq, qy, qx, u + 13));
      CKD(inc(kf, sq, qx, qy, u + 14));
      CKD(cuCtxPopCurrent(&popped));
      syncSecond();
    } else if (phase == 1) {
      // The primary context current; both contexts' streams.
      mix<<<kGrid, kBlock, 0, sp>>>(a, b, kN, u);
      CKL();
      if (asKernel.works) CKD(inc(kf, sq, qx, qy, u + 1));
      CKD(inc(kf, csp, A, B, u + 2));  // its own stream: runs in the primary context
      if (asKernel.works) CKD(incEx(kf, sq, qy, qx, u + 3));
      mix<<<kGrid, kBlock, 0, sp>>>(b, a, kN, u + 4);
      CKL();
      if (asFunction.works) CKD(inc(fq, sq, qx, qy, u + 5));
      CKD(incEx(kf, csp, B, A, u + 6));
      CK(cudaStreamSynchronize(sp));
      syncSecond();
    } else {
      // The second context current; the primary context's stream too.
      CKD(cuCtxPushCurrent(second));
      CKD(inc(fq, sq, qx, qy, u + 1));  // its own function on its own stream
      if (asKernel.works) CKD(incEx(kf, csp, A, B, u + 2));  // runs in the primary context
      CKD(inc(kf, sq, qy, qx, u + 3));
      if (asKernel.works) CKD(inc(kf, csp, B, A, u + 4));
      CKD(inc(fq, sq, qx, qy, u + 5));
      CKD(cuCtxPopCurrent(&popped));
      mix<<<kGrid, kBlock, 0, sp>>>(a, b, kN, u + 6);
      CKL();
      CK(cudaStreamSynchronize(sp));
      syncSecond();
    }
    if (i % 100 == 99) {
      print("a", i, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
      print("q", i, readSecond(qx) ^ readSecond(qy));
      print("codes", refused, codes.h);
    }
  }
  CK(cudaStreamSynchronize(sp));
  syncSecond();
  print("end", refused,
        deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ readSecond(qx) ^ readSecond(qy) ^ codes.h);
  CKD(cuCtxDestroy(second));
}

// --- padded_struct_params

// The parameter offsets and sizes of `f` (cuFuncGetParamInfo); empty where
// the driver cannot tell.
std::vector<std::pair<size_t, size_t>> paramLayout(const void* symbol) {
  CUfunction f = nullptr;
  CK(cudaGetFuncBySymbol(&f, symbol));
  std::vector<std::pair<size_t, size_t>> layout;
  for (size_t k = 0; k < 64; ++k) {
    size_t offset = 0, size = 0;
    if (cuFuncGetParamInfo(f, k, &offset, &size) != CUDA_SUCCESS) break;
    layout.emplace_back(offset, size);
  }
  return layout;
}

void paddedStructParams() {
  cudaStream_t s = nonBlockingStream();
  const auto cs = reinterpret_cast<CUstream>(s);
  uint32_t* bufs[3] = {deviceBuffer(1301), deviceBuffer(1302), deviceBuffer(1303)};
  uint32_t *src = deviceBuffer(1304), *out = deviceBuffer(1305), *acc = deviceBuffer(1306);
  CUfunction writeFn = nullptr;
  CK(cudaGetFuncBySymbol(&writeFn, reinterpret_cast<const void*>(paddedWrite)));
  const auto layout = paramLayout(reinterpret_cast<const void*>(paddedWrite));
  const bool extraOk = layout.size() == 5;
  print("padded_layout", int(layout.size()), extraOk ? layout[4].first + layout[4].second : 0);
  // The argument bytes: garbage first, then the fields at their offsets.
  alignas(8) unsigned char rawP[sizeof(Padded)];
  alignas(8) unsigned char rawPick[sizeof(Pick)];
  alignas(8) unsigned char rawT[sizeof(Trailing)];
  auto makeArgs = [&](int i, uint32_t garbageSeed) {
    fillGarbage(rawP, sizeof rawP, garbageSeed);
    fillGarbage(rawPick, sizeof rawPick, garbageSeed + 1);
    fillGarbage(rawT, sizeof rawT, garbageSeed + 2);
    put(rawP, offsetof(Padded, tag), uint8_t(i % 7 + 1));
    put(rawP, offsetof(Padded, ptr), bufs[i % 3]);
    put(rawP, offsetof(Padded, count), uint16_t(1000 + (i * 37) % 15000));
    put(rawP, offsetof(Padded, salt), uint32_t(i) * 3u);
    put(rawP, offsetof(Padded, scale), 0.5 * (i % 5));
    put(rawP, offsetof(Padded, c), char('a' + i % 26));
    put(rawPick, 0, uint32_t(i) * 7u);  // Pick::word
    const uint32_t v[3] = {uint32_t(i), uint32_t(i) * 2u, uint32_t(i) * 3u};
    std::memcpy(rawT + offsetof(Trailing, v), v, sizeof v);
    put(rawT, offsetof(Trailing, last), uint8_t(i & 0xff));
  };
  Digest codes;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i);
    const uint32_t* srcArg = src;
    int n = kN;
    makeArgs(i, u * 4u);
    {
      void* args[] = {rawP, &srcArg, rawPick, rawT, &n};
      CK(cudaLaunchKernel(reinterpret_cast<const void*>(paddedWrite), dim3(kGrid), dim3(kBlock), args, 0, s));
    }
    // The same fields with other garbage: the grid-constant reader.
    makeArgs(i, u * 4u + 1u);
    {
      uint32_t* outArg = out;
      void* args[] = {rawP, &outArg, &n};
      CK(cudaLaunchKernel(reinterpret_cast<const void*>(gridConstRead), dim3(kGrid), dim3(kBlock), args, 0, s));
    }
    // The write again: kernelParams with fresh garbage, or on irregular steps
    // one `extra` buffer whose gaps hold garbage too.
    makeArgs(i + 1, u * 4u + 2u);
    if (extraOk && irregular(i, 131, 5)) {
      alignas(8) unsigned char buffer[256];
      const size_t size = layout[4].first + layout[4].second;
      fillGarbage(buffer, sizeof buffer, u * 4u + 3u);
      std::memcpy(buffer + layout[0].first, rawP, sizeof rawP);
      std::memcpy(buffer + layout[1].first, &srcArg, sizeof srcArg);
      std::memcpy(buffer + layout[2].first, rawPick, sizeof rawPick);
      std::memcpy(buffer + layout[3].first, rawT, sizeof rawT);
      std::memcpy(buffer + layout[4].first, &n, sizeof n);
      size_t sizeArg = size;
      void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &sizeArg,
                       CU_LAUNCH_PARAM_END};
      const CUresult r = cuLaunchKernel(writeFn, kGrid, 1, 1, kBlock, 1, 1, 0, cs, nullptr, extra);
      codes.add(uint64_t(r));
      fillGarbage(buffer, sizeof buffer, u);  // read at the call only
    } else {
      void* args[] = {rawP, &srcArg, rawPick, rawT, &n};
      CK(cudaLaunchKernel(reinterpret_cast<const void*>(paddedWrite), dim3(kGrid), dim3(kBlock), args, 0, s));
    }
    fillGarbage(rawP, sizeof rawP, u ^ 0xabcdu);  // argument storage scribbled after the calls
    mix2<<<kGrid, kBlock, 0, s>>>(acc, bufs[i % 3], out, kN, u);
    CKL();
    if (checkpoint(i, s, "acc", acc)) print("codes", i, codes.h);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0,
        deviceDigest(acc, kN * 4) ^ deviceDigest(out, kN * 4) ^ deviceDigest(bufs[0], kN * 4) ^
            deviceDigest(bufs[1], kN * 4) ^ deviceDigest(bufs[2], kN * 4) ^ codes.h);
}

// --- capture_to_graph

void CUDART_CB userObjectGone(void* p) { static_cast<std::atomic<int>*>(p)->fetch_add(1); }

void captureToGraph() {
  cudaStream_t s = nonBlockingStream(), c = nonBlockingStream();
  uint32_t *a = deviceBuffer(1401), *b = deviceBuffer(1402), *d = deviceBuffer(1403), *e = deviceBuffer(1404);
  // The template: one kernel node, b from a.
  cudaGraph_t tmpl = nullptr;
  CK(cudaGraphCreate(&tmpl, 0));
  uint32_t* dst0 = b;
  const uint32_t* src0 = a;
  int n = kN;
  uint32_t salt0 = 0;
  void* args0[] = {&dst0, &src0, &n, &salt0};
  cudaKernelNodeParams kp = {};
  kp.func = reinterpret_cast<void*>(mix);
  kp.gridDim = dim3(kGrid);
  kp.blockDim = dim3(kBlock);
  kp.kernelParams = args0;
  cudaGraphNode_t n0 = nullptr;
  CK(cudaGraphAddKernelNode(&n0, tmpl, nullptr, 0, &kp));
  {
    // A driver without capture into an existing graph (before CUDA 12.3).
    cudaGraph_t g = nullptr;
    CK(cudaGraphClone(&g, tmpl));
    cudaGraphNode_t c0 = nullptr;
    CK(cudaGraphNodeFindInClone(&c0, n0, g));
    const cudaError_t r = cudaStreamBeginCaptureToGraph(c, g, &c0, nullptr, 1, cudaStreamCaptureModeRelaxed);
    if (r != cudaSuccess) {
      cudaGetLastError();
      print("no capture into a graph here", 0, uint64_t(r));
      CK(cudaGraphDestroy(g));
      CK(cudaGraphDestroy(tmpl));
      return;
    }
    cudaGraph_t ended = nullptr;
    CK(cudaStreamEndCapture(c, &ended));
    CK(cudaGraphDestroy(g));
  }
  const cudaStreamCaptureMode modes[3] = {cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeRelaxed,
                                          cudaStreamCaptureModeGlobal};
  std::atomic<int> destroyed{0};
  int created = 0;
  Digest states;
  auto waitForDestructors = [&]() {
    // Destructors run on a thread of the driver once the last launch that
    // holds the object completed: wait (at most 5 s) for all of them.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (destroyed.load() < created && std::chrono::steady_clock::now() < until) {
      CK(cudaStreamQuery(s));
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return destroyed.load();
  };
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 8u;
    mix<<<kGrid, kBlock, 0, s>>>(a, d, kN, u);  // before the graph
    CKL();
    cudaGraph_t g = nullptr;
    CK(cudaGraphClone(&g, tmpl));
    cudaGraphNode_t c0 = nullptr;
    CK(cudaGraphNodeFindInClone(&c0, n0, g));
    salt0 = u + 1;
    CK(cudaGraphKernelNodeSetParams(c0, &kp));
    CK(cudaStreamBeginCaptureToGraph(c, g, &c0, nullptr, 1, modes[i % 3]));
    mix<<<kGrid, kBlock, 0, c>>>(e, b, kN, u + 2);  // captured after c0
    CK(cudaMemsetAsync(e + (i % 64) * 16, i & 0xff, 64, c));
    mix2<<<kGrid, kBlock, 0, c>>>(b, e, a, kN, u + 3);
    CKL();
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cudaGraph_t capturing = nullptr;
    CK(cudaStreamGetCaptureInfo(c, &status, nullptr, &capturing, nullptr, nullptr, nullptr));
    states.add(uint64_t(status) * 2 + uint64_t(capturing == g));
    cudaGraph_t ended = nullptr;
    CK(cudaStreamEndCapture(c, &ended));
    states.add(uint64_t(ended == g));
    size_t nodes = 0;
    CK(cudaGraphGetNodes(g, nullptr, &nodes));
    states.add(uint64_t(nodes));
    cudaUserObject_t object = nullptr;
    CK(cudaUserObjectCreate(&object, &destroyed, userObjectGone, 1, cudaUserObjectNoDestructorSync));
    ++created;
    CK(cudaGraphRetainUserObject(g, object, 1, cudaGraphUserObjectMove));
    cudaGraphExec_t exec = nullptr;
    CK(cudaGraphInstantiate(&exec, g, 0));
    CK(cudaGraphDestroy(g));  // the executable graph keeps the object
    CK(cudaGraphLaunch(exec, s));
    CK(cudaGraphExecDestroy(exec));  // in flight
    mix<<<kGrid, kBlock, 0, s>>>(d, b, kN, u + 4);  // after the graph
    CKL();
    if (i % 100 == 99) {
      CK(cudaStreamSynchronize(s));
      print("states", i, states.h);
      print("bd", i, deviceDigest(b, kN * 4) ^ deviceDigest(d, kN * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  print("destroyed", created, uint64_t(waitForDestructors()));
  print("end", 0,
        deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(d, kN * 4) ^ deviceDigest(e, kN * 4) ^
            states.h);
  CK(cudaGraphDestroy(tmpl));
}

// --- dyn_smem_only

void dynSmemOnly() {
  cudaStream_t s = nonBlockingStream();
  const auto cs = reinterpret_cast<CUstream>(s);
  const int optin = deviceAttribute(cudaDevAttrMaxSharedMemoryPerBlockOptin);
  const unsigned big = optin >= 64 * 1024 ? 64 * 1024 : 40 * 1024;
  CK(cudaFuncSetAttribute(smemSized, cudaFuncAttributeMaxDynamicSharedMemorySize, int(big)));
  CUfunction f = nullptr;
  CK(cudaGetFuncBySymbol(&f, reinterpret_cast<const void*>(smemSized)));
  uint32_t *a = deviceBuffer(1501), *b = deviceBuffer(1502), *c = deviceBuffer(1503);
  const unsigned sizes[3] = {0, 1024, 8192};
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i);
    unsigned s1 = sizes[i % 3], s2 = sizes[(i + 1) % 3], s3 = sizes[(i + 2) % 3];
    if (irregular(i, 141, 7)) s1 = 4096;
    if (irregular(i, 142, 9)) s3 = big;
    smemSized<<<kGrid, kBlock, s1, s>>>(a, b, kN, u);
    smemSized<<<kGrid, kBlock, s2, s>>>(b, a, kN, u);  // the same values: only the size differs
    CKL();
    {
      uint32_t* dst = c;
      const uint32_t* srcArg = b;
      int n = kN;
      uint32_t salt = u;
      void* params[] = {&dst, &srcArg, &n, &salt};
      CUlaunchConfig cfg = {};
      cfg.gridDimX = kGrid;
      cfg.gridDimY = cfg.gridDimZ = 1;
      cfg.blockDimX = kBlock;
      cfg.blockDimY = cfg.blockDimZ = 1;
      cfg.sharedMemBytes = s3;
      cfg.hStream = cs;
      CKD(cuLaunchKernelEx(&cfg, f, params, nullptr));
    }
    mix<<<kGrid, kBlock, 0, s>>>(a, c, kN, u);
    CKL();
    checkpoint(i, s, "a", a);
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4));
}

// --- long_period_counter

void longPeriodCounter() {
  cudaStream_t s = nonBlockingStream();
  uint32_t *a = deviceBuffer(1601), *b = deviceBuffer(1602), *c = deviceBuffer(1603);
  uint32_t* zero = zeroBuffer(256);
  uint32_t* logAddr = nullptr;
  CK(cudaGetSymbolAddress(reinterpret_cast<void**>(&logAddr), g_r3Log));
  CK(cudaMemsetAsync(logAddr, 0, kLogWords * 4, s));
  CK(cudaMemcpyToSymbolAsync(g_r3Count, zero, 4, 0, cudaMemcpyDeviceToDevice, s));
  CK(cudaStreamSynchronize(s));
  auto logDigest = [&]() {
    std::vector<uint32_t> h(kLogWords);
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpyFromSymbol(h.data(), g_r3Log, kLogWords * 4));
    return hostDigest(h.data(), kLogWords * 4);
  };
  uint64_t launched = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 64u;
    int trips = 12;
    if (irregular(i, 151, 9)) ++trips;
    if (i % 17 == 5) --trips;
    for (int t = 0; t < trips; ++t) {
      const uint32_t v = u + uint32_t(t) * 4u;
      tick<<<1, 32, 0, s>>>(v);
      mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, v);
      tick<<<1, 32, 0, s>>>(v + 1);
      CK(cudaMemsetAsync(c + (t * 97) % (kN - 64), (i + t) & 0xff, 64 * 4, s));
      mix2<<<kGrid, kBlock, 0, s>>>(b, a, c, kN, v + 2);
      CK(cudaMemcpyAsync(c + 4096, b + t * 16, 1024 * 4, cudaMemcpyDeviceToDevice, s));
      tick<<<1, 32, 0, s>>>(v + 3);
      mix<<<kGrid, kBlock, 0, s>>>(c, b, kN, v + 3);
      CKL();
      launched += 3;
    }
    tick<<<1, 32, 0, s>>>(u + 63);
    CKL();
    ++launched;
    if (i % 25 == 24) {
      uint32_t count = 0;  // pageable: the copy has completed on return
      CK(cudaMemcpyFromSymbolAsync(&count, g_r3Count, 4, 0, cudaMemcpyDeviceToHost, s));
      print("count", i, count);
    }
    if (i % 50 == 10) {
      CK(cudaMemcpyToSymbolAsync(g_r3Count, zero, 4, 0, cudaMemcpyDeviceToDevice, s));
      launched = 0;
    }
    if (i % 100 == 60) CK(cudaMemsetAsync(logAddr, 0, kLogWords * 4, s));
    if (i % 100 == 99) {
      print("log", i, logDigest());
      print("a", i, deviceDigest(a, kN * 4));
    }
  }
  CK(cudaStreamSynchronize(s));
  uint32_t count = 0;
  CK(cudaMemcpyFromSymbol(&count, g_r3Count, 4));
  print("launched", int(launched), count);
  print("end", 0, logDigest() ^ deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4));
}

// --- peer_copies_one_device

void peerCopiesOneDevice() {
  const int dev = currentDevice();
  cudaStream_t A = nullptr, B = nullptr;
  CK(cudaStreamCreate(&A));  // blocking: ordered against the legacy stream as well
  CK(cudaStreamCreate(&B));
  cudaEvent_t eA, eB;
  CK(cudaEventCreateWithFlags(&eA, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&eB, cudaEventDisableTiming));
  uint32_t *a = deviceBuffer(1701), *b = deviceBuffer(1702), *c = deviceBuffer(1703), *d = deviceBuffer(1704);
  uint32_t *e = deviceBuffer(1705), *f = deviceBuffer(1706), *g = deviceBuffer(1707);
  // Pitched views of a whole buffer: rows of 1 KiB, 16 rows a slice, 4 slices.
  constexpr size_t kPitch = 256 * 4, kRows = 16;
  auto pitched = [](uint32_t* p) { return make_cudaPitchedPtr(p, kPitch, kPitch, kRows); };
  Digest peerCodes;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 4u;
    const bool odd = irregular(i, 161, 7);
    const size_t width = odd ? 100 * 4 : 128 * 4, height = odd ? 12 : 16, depth = odd ? 3 : 4;
    mix<<<kGrid, kBlock, 0, A>>>(a, b, kN, u);
    CKL();
    CK(cudaMemcpyPeerAsync(c, dev, a + (i % 8) * 64, dev, 8192 * 4, A));
    CK(cudaEventRecord(eA, A));
    CK(cudaStreamWaitEvent(B, eA, 0));
    cudaMemcpy3DPeerParms pp = {};
    pp.srcPtr = pitched(a);
    pp.srcPos = make_cudaPos(size_t(4 * (i % 4)), 0, 0);
    pp.srcDevice = dev;
    pp.dstPtr = pitched(d);
    pp.dstPos = make_cudaPos(0, 0, 0);
    pp.dstDevice = dev;
    pp.extent = make_cudaExtent(width, height, depth);
    peerCodes.add(uint64_t(keep(cudaMemcpy3DPeerAsync(&pp, B))));
    CK(cudaMemset3DAsync(pitched(d), (i * 13) & 0xff, make_cudaExtent(odd ? 60 * 4 : 32 * 4, odd ? 5 : 8, odd ? 2 : 3),
                         B));
    mix2<<<kGrid, kBlock, 0, B>>>(e, d, c, kN, u + 1);
    CKL();
    cudaMemcpy3DParms p3 = {};
    p3.srcPtr = pitched(e);
    p3.dstPtr = pitched(f);
    p3.extent = make_cudaExtent(width, height, depth);
    p3.kind = cudaMemcpyDeviceToDevice;
    CK(cudaMemcpy3DAsync(&p3, B));
    CK(cudaEventRecord(eB, B));
    CK(cudaStreamWaitEvent(A, eB, 0));
    mix<<<kGrid, kBlock, 0, A>>>(b, f, kN, u + 2);
    CKL();
    if (i % 10 == 9) {
      // After all the device's pending work, before its later work.
      CK(cudaMemcpyPeer(g, dev, b, dev, 4096 * 4));
      mix<<<kGrid, kBlock, 0, A>>>(b, a, kN, u + 3);  // overwrites the copy's source
      CKL();
    }
    if (i % 100 == 99) {
      CK(cudaDeviceSynchronize());
      print("b", i, deviceDigest(b, kN * 4));
      print("g", i, deviceDigest(g, 4096 * 4));
      print("codes", i, peerCodes.h);
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", 0,
        deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4) ^ deviceDigest(d, kN * 4) ^
            deviceDigest(e, kN * 4) ^ deviceDigest(f, kN * 4) ^ deviceDigest(g, kN * 4) ^ peerCodes.h);
}

// --- pool_three_streams

void poolThreeStreams() {
  cudaStream_t A = nonBlockingStream(), B = nonBlockingStream(), C = nonBlockingStream();
  cudaEvent_t eA, eB, eC;
  for (cudaEvent_t* ev : {&eA, &eB, &eC}) CK(cudaEventCreateWithFlags(ev, cudaEventDisableTiming));
  cudaMemPool_t pool = nullptr;
  CK(cudaDeviceGetDefaultMemPool(&pool, currentDevice()));
  uint64_t threshold = ~uint64_t(0);  // freed blocks stay in the pool
  CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  uint32_t *a = deviceBuffer(1801), *b = deviceBuffer(1802), *c = deviceBuffer(1803);
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 8u;
    const size_t words = size_t(kN) * (irregular(i, 171, 6) ? 2 : 1);
    uint32_t* t = nullptr;
    CK(cudaMallocAsync(reinterpret_cast<void**>(&t), words * 4, A));
    CK(cudaMemsetAsync(t, (i * 3) & 0xff, words * 4, A));
    mix<<<kGrid, kBlock, 0, A>>>(t, a, kN, u);
    CKL();
    CK(cudaEventRecord(eA, A));
    CK(cudaStreamWaitEvent(B, eA, 0));
    mix<<<kGrid, kBlock, 0, B>>>(b, t, kN, u + 1);
    mix<<<kGrid, kBlock, 0, B>>>(t, b, kN, u + 2);
    CKL();
    CK(cudaEventRecord(eB, B));
    CK(cudaStreamWaitEvent(C, eB, 0));
    uint32_t* w = nullptr;
    if (i % 13 == 7) {  // a second block, allocated on C and freed on A
      CK(cudaMallocAsync(reinterpret_cast<void**>(&w), kN * 4, C));
      CK(cudaMemsetAsync(w, 0, kN * 4, C));
      mix<<<kGrid, kBlock, 0, C>>>(w, t, kN, u + 3);
    }
    mix<<<kGrid, kBlock, 0, C>>>(c, t, kN, u + 4);
    CKL();
    CK(cudaFreeAsync(t, C));
    CK(cudaEventRecord(eC, C));
    CK(cudaStreamWaitEvent(A, eC, 0));  // the next allocation on A may get t's memory back
    if (w) {
      mix<<<kGrid, kBlock, 0, A>>>(a, w, kN, u + 5);
      CKL();
      CK(cudaFreeAsync(w, A));
    }
    mix<<<kGrid, kBlock, 0, A>>>(a, c, kN, u + 6);
    CKL();
    if (i % 50 == 49) {
      CK(cudaDeviceSynchronize());
      CK(cudaMemPoolTrimTo(pool, 0));
    }
    if (i % 100 == 99) {
      CK(cudaStreamSynchronize(A));  // after B and C too (the events)
      print("a", i, deviceDigest(a, kN * 4));
      print("bc", i, deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4));
  threshold = 0;
  CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  CK(cudaMemPoolTrimTo(pool, 0));
}

// --- managed_copies

void managedCopies() {
  if (!deviceAttribute(cudaDevAttrManagedMemory)) {
    print("no managed memory here", 0, 0);
    return;
  }
  const int dev = currentDevice();
  const bool concurrent = deviceAttribute(cudaDevAttrConcurrentManagedAccess) != 0;
  cudaStream_t s = nonBlockingStream();
  const auto cs = reinterpret_cast<CUstream>(s);
  constexpr size_t kBytes = size_t(2) * kN * 4;
  uint32_t* m = nullptr;
  CK(cudaMallocManaged(&m, kBytes));
  for (int k = 0; k < 2 * kN; ++k) m[k] = uint32_t(k) * 2654435761u ^ 0x1234u;
  uint32_t *m0 = m, *m1 = m + kN;
  uint32_t *a = deviceBuffer(1901), *b = deviceBuffer(1902);
  cudaMemLocation onDevice = {};
  onDevice.type = cudaMemLocationTypeDevice;
  onDevice.id = dev;
  cudaMemLocation onHost = {};
  onHost.type = cudaMemLocationTypeHost;
  onHost.id = 0;
  Digest seen, codes;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 4u;
    CK(cudaMemcpyAsync(m0, a, kN * 4, cudaMemcpyDefault, s));
    CK(cudaMemsetAsync(m1 + (i % 32) * 128, (i * 7) & 0xff, 512, s));
    mix<<<kGrid, kBlock, 0, s>>>(b, m0, kN, u);
    mix2<<<kGrid, kBlock, 0, s>>>(m1, b, a, kN, u + 1);
    CKL();
    CK(cudaMemcpyAsync(a, m1, kN * 4, cudaMemcpyDeviceToDevice, s));
    CKD(cuMemsetD32Async(CUdeviceptr(m0 + 100), u, 64, cs));
    mix<<<kGrid, kBlock, 0, s>>>(a, m0, kN, u + 2);
    CKL();
    if (i % 5 == 0) {
      const cudaMemoryAdvise advice = (i / 5) % 2 ? cudaMemAdviseSetReadMostly : cudaMemAdviseUnsetReadMostly;
      codes.add(uint64_t(keep(cudaMemAdvise(m, kBytes, advice, onDevice))));
      int readMostly = -1;
      codes.add(uint64_t(keep(cudaMemRangeGetAttribute(&readMostly, sizeof readMostly, cudaMemRangeAttributeReadMostly,
                                                       m, kBytes))));
      codes.add(uint64_t(uint32_t(readMostly)));
    }
    if (i % 7 == 3)
      codes.add(uint64_t(
          keep(cudaMemAdvise(m1, kN * 4, cudaMemAdviseSetPreferredLocation, (i / 7) % 2 ? onHost : onDevice))));
    if (i % 10 == 9) {
      CK(cudaMemPrefetchAsync(m, kBytes, onHost, 0, s));
      CK(cudaStreamSynchronize(s));
      if (!concurrent) CK(cudaDeviceSynchronize());
      seen.add(m, kBytes);  // the host reads in place
      for (int k = 0; k < kN; k += 61) m1[k] += u;  // and writes
      int last = -2;
      codes.add(uint64_t(
          keep(cudaMemRangeGetAttribute(&last, sizeof last, cudaMemRangeAttributeLastPrefetchLocation, m, kBytes))));
      codes.add(uint64_t(uint32_t(last)));
      if (i % 20 == 19) CK(cudaMemPrefetchAsync(m, kBytes, onDevice, 0, s));
    }
    if (checkpoint(i, s, "a", a)) {
      print("seen", i, seen.h);
      print("codes", i, codes.h);
    }
  }
  CK(cudaStreamSynchronize(s));
  if (!concurrent) CK(cudaDeviceSynchronize());
  seen.add(m, kBytes);
  print("end", 0, seen.h ^ codes.h ^ deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
  CK(cudaFree(m));
}

// --- event_recycle

void eventRecycle() {
  cudaStream_t A = nonBlockingStream(), B = nonBlockingStream();
  uint32_t *a = deviceBuffer(2001), *b = deviceBuffer(2002), *c = deviceBuffer(2003);
  uint32_t *d = deviceBuffer(2004), *d2 = deviceBuffer(2005);
  Digest codes;
  int notSuccess = 0;
  auto code = [&](cudaError_t r) {
    codes.add(uint64_t(keep(r)));
    notSuccess += r != cudaSuccess;
  };
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 4u;
    mix<<<kGrid, kBlock, 0, A>>>(a, b, kN, u);
    CKL();
    const unsigned flags = i % 3 == 0   ? cudaEventDisableTiming
                           : i % 3 == 1 ? cudaEventBlockingSync | cudaEventDisableTiming
                                        : cudaEventDefault;
    cudaEvent_t e = nullptr;
    CK(cudaEventCreateWithFlags(&e, flags));
    CK(cudaEventRecord(e, A));
    CK(cudaStreamWaitEvent(B, e, 0));
    CK(cudaEventDestroy(e));  // the wait is pending; the handle may come back below
    cudaEvent_t f = nullptr;
    CK(cudaEventCreateWithFlags(&f, cudaEventDisableTiming));
    code(cudaEventQuery(f));              // never recorded: cudaSuccess
    CK(cudaStreamWaitEvent(A, f, 0));     // never recorded: waits for nothing
    mix<<<kGrid, kBlock, 0, B>>>(c, a, kN, u + 1);  // after A's first kernel (e)
    mix<<<kGrid, kBlock, 0, A>>>(d, d2, kN, u + 2);  // A's own buffers: may run beside B
    CKL();
    cudaEvent_t h = nullptr;
    CK(cudaEventCreateWithFlags(&h, cudaEventDisableTiming));
    CK(cudaEventRecord(h, B));
    CK(cudaEventDestroy(h));  // recorded, never waited on
    CK(cudaEventRecord(f, B));
    CK(cudaStreamWaitEvent(A, f, 0));
    mix<<<kGrid, kBlock, 0, A>>>(b, c, kN, u + 3);  // after B's c
    CKL();
    if (i % 4 == 3) {
      CK(cudaEventSynchronize(f));
      code(cudaEventQuery(f));  // complete
    }
    cudaEvent_t g = nullptr;
    CK(cudaEventCreateWithFlags(&g, cudaEventBlockingSync | cudaEventDisableTiming));
    code(cudaEventSynchronize(g));  // never recorded: returns at once
    code(cudaEventQuery(g));
    CK(cudaEventDestroy(g));
    CK(cudaEventDestroy(f));
    if (checkpoint(i, A, "a", a)) print("codes", notSuccess, codes.h);  // A waited for B (f)
  }
  CK(cudaDeviceSynchronize());
  print("end", notSuccess,
        deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4) ^ deviceDigest(d, kN * 4) ^
            codes.h);
}

// --- stream_attrs

void streamAttrs() {
  int least = 0, greatest = 0;
  CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t s = nonBlockingStream(), t = nonBlockingStream(), p = nullptr;
  CK(cudaStreamCreateWithPriority(&p, cudaStreamNonBlocking, greatest));
  cudaEvent_t es, et, ep;
  for (cudaEvent_t* ev : {&es, &et, &ep}) CK(cudaEventCreateWithFlags(ev, cudaEventDisableTiming));
  const int maxWindow = deviceAttribute(cudaDevAttrMaxAccessPolicyWindowSize);
  const int maxPersist = deviceAttribute(cudaDevAttrMaxPersistingL2CacheSize);
  Digest codes;
  if (maxPersist > 0) {
    const size_t persist = size_t(std::min(maxPersist, 1 << 20));
    codes.add(uint64_t(keep(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, persist))));
    size_t got = 0;
    CK(cudaDeviceGetLimit(&got, cudaLimitPersistingL2CacheSize));
    codes.add(uint64_t(got));
  }
  print("attrs", int(maxWindow > 0) + 2 * int(maxPersist > 0), codes.h);
  uint32_t *a = deviceBuffer(2101), *b = deviceBuffer(2102), *c = deviceBuffer(2103);
  auto which = [&](const void* q) -> uint64_t { return q == a ? 1 : q == b ? 2 : q == nullptr ? 0 : 3; };
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 4u;
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, u);
    CKL();
    if (maxWindow > 0) {
      cudaStreamAttrValue v = {};
      v.accessPolicyWindow.base_ptr = i % 2 ? static_cast<void*>(a) : static_cast<void*>(b);
      v.accessPolicyWindow.num_bytes = i % 5 == 4 ? 0 : std::min<size_t>(kN * 4, size_t(maxWindow));
      v.accessPolicyWindow.hitRatio = 0.5f + 0.125f * float(i % 3);
      v.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
      v.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
      codes.add(uint64_t(keep(cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v))));
    }
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, u + 1);
    CKL();
    cudaStreamAttrValue policy = {};
    policy.syncPolicy = i % 2 ? cudaSyncPolicySpin : cudaSyncPolicyBlockingSync;
    codes.add(uint64_t(keep(cudaStreamSetAttribute(t, cudaStreamAttributeSynchronizationPolicy, &policy))));
    cudaStreamAttrValue priority = {};
    priority.priority = i % 3 == 0 ? greatest : least;
    codes.add(uint64_t(keep(cudaStreamSetAttribute(p, cudaStreamAttributePriority, &priority))));
    cudaStreamAttrValue domain = {};
    domain.memSyncDomain = i % 2 ? cudaLaunchMemSyncDomainRemote : cudaLaunchMemSyncDomainDefault;
    codes.add(uint64_t(keep(cudaStreamSetAttribute(t, cudaStreamAttributeMemSyncDomain, &domain))));
    if (i % 3 == 2) codes.add(uint64_t(keep(cudaStreamCopyAttributes(t, s))));
    CK(cudaEventRecord(es, s));
    CK(cudaStreamWaitEvent(t, es, 0));
    mix2<<<kGrid, kBlock, 0, t>>>(c, a, b, kN, u + 2);
    CKL();
    CK(cudaEventRecord(et, t));
    CK(cudaStreamWaitEvent(p, et, 0));
    mix<<<kGrid, kBlock, 0, p>>>(a, c, kN, u + 3);
    CKL();
    CK(cudaEventRecord(ep, p));
    CK(cudaStreamWaitEvent(s, ep, 0));  // s writes a and b again only after p
    if (i % 10 == 9) codes.add(uint64_t(keep(cudaCtxResetPersistingL2Cache())));
    cudaStreamAttrValue got = {};
    codes.add(uint64_t(keep(cudaStreamGetAttribute(t, cudaStreamAttributeAccessPolicyWindow, &got))));
    codes.add(which(got.accessPolicyWindow.base_ptr));
    codes.add(uint64_t(got.accessPolicyWindow.num_bytes));
    codes.add(uint64_t(got.accessPolicyWindow.hitProp));
    got = {};
    codes.add(uint64_t(keep(cudaStreamGetAttribute(t, cudaStreamAttributeSynchronizationPolicy, &got))));
    codes.add(uint64_t(got.syncPolicy));
    got = {};
    codes.add(uint64_t(keep(cudaStreamGetAttribute(p, cudaStreamAttributePriority, &got))));
    codes.add(uint64_t(uint32_t(got.priority)));
    int prio = 0;
    CK(cudaStreamGetPriority(p, &prio));
    codes.add(uint64_t(uint32_t(prio)));
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusActive;
    CK(cudaStreamIsCapturing(s, &status));
    codes.add(uint64_t(status));
    status = cudaStreamCaptureStatusActive;
    CK(cudaStreamGetCaptureInfo(t, &status));
    codes.add(uint64_t(status));
    if (checkpoint(i, s, "a", a)) print("codes", i, codes.h);  // s waited for t and p
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4) ^ codes.h);
  if (maxPersist > 0) CK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0));
}

// --- extra_key_order

void extraKeyOrder() {
  cudaStream_t s = nonBlockingStream();
  const auto cs = reinterpret_cast<CUstream>(s);
  CUfunction gapFn = nullptr, bumpFn = nullptr;
  CK(cudaGetFuncBySymbol(&gapFn, reinterpret_cast<const void*>(gapParams)));
  CK(cudaGetFuncBySymbol(&bumpFn, reinterpret_cast<const void*>(bump)));
  const auto layout = paramLayout(reinterpret_cast<const void*>(gapParams));
  if (layout.size() != 6) {
    print("no parameter layout here", int(layout.size()), 0);
    return;
  }
  const size_t size = layout[5].first + layout[5].second;
  print("gap_layout", int(size), uint64_t(layout[1].first) << 32 | layout[3].first);
  uint32_t *a = deviceBuffer(2201), *b = deviceBuffer(2202), *decoyDst = deviceBuffer(2203);
  const uint32_t zero = 0;
  CK(cudaMemcpyToSymbol(g_r3Bumps, &zero, 4));
  // A buffer of gapParams' arguments, gaps full of garbage.
  auto fill = [&](unsigned char* buf, uint32_t* dst, char c, const uint32_t* src, short sh, double d, uint32_t seed) {
    fillGarbage(buf, 256, seed);
    int n = kN;
    std::memcpy(buf + layout[0].first, &dst, sizeof dst);
    std::memcpy(buf + layout[1].first, &c, sizeof c);
    std::memcpy(buf + layout[2].first, &src, sizeof src);
    std::memcpy(buf + layout[3].first, &sh, sizeof sh);
    std::memcpy(buf + layout[4].first, &n, sizeof n);
    std::memcpy(buf + layout[5].first, &d, sizeof d);
  };
  Digest codes;
  int refused = 0, bumps = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i);
    const char c = char('A' + i % 50);
    const short sh = short(i % 1000);
    const double d = double(i % 777);
    alignas(16) unsigned char buf[256], decoy[256];
    fill(buf, a, c, b, sh, d, u * 2u);
    fill(decoy, decoyDst, char('z'), a, short(3), 999.0, u * 2u + 1u);  // other values: a decoy
    size_t sizeArg = size;
    const int form = irregular(i, 181, 9) ? 4 : i % 4;
    CUresult r = CUDA_SUCCESS;
    if (form == 0) {
      uint32_t* dst = a;
      const uint32_t* src = b;
      int n = kN;
      void* params[] = {&dst, const_cast<char*>(&c), &src, const_cast<short*>(&sh), &n, const_cast<double*>(&d)};
      r = cuLaunchKernel(gapFn, kGrid, 1, 1, kBlock, 1, 1, 0, cs, params, nullptr);
    } else if (form == 1) {  // the size before the pointer
      void* extra[] = {CU_LAUNCH_PARAM_BUFFER_SIZE, &sizeArg, CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_END};
      r = cuLaunchKernel(gapFn, kGrid, 1, 1, kBlock, 1, 1, 0, cs, nullptr, extra);
    } else if (form == 2) {
      void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &sizeArg, CU_LAUNCH_PARAM_END};
      r = cuLaunchKernel(gapFn, kGrid, 1, 1, kBlock, 1, 1, 0, cs, nullptr, extra);
    } else if (form == 3) {  // the pointer twice: the decoy first
      void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, decoy, CU_LAUNCH_PARAM_BUFFER_POINTER, buf,
                       CU_LAUNCH_PARAM_BUFFER_SIZE,    &sizeArg, CU_LAUNCH_PARAM_END};
      r = cuLaunchKernel(gapFn, kGrid, 1, 1, kBlock, 1, 1, 0, cs, nullptr, extra);
    } else {  // the pointer twice: the decoy last, after the size
      void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf,   CU_LAUNCH_PARAM_BUFFER_SIZE, &sizeArg,
                       CU_LAUNCH_PARAM_BUFFER_POINTER, decoy, CU_LAUNCH_PARAM_END};
      r = cuLaunchKernel(gapFn, kGrid, 1, 1, kBlock, 1, 1, 0, cs, nullptr, extra);
    }
    codes.add(uint64_t(form) << 32 | uint64_t(r));
    refused += r != CUDA_SUCCESS;
    fillGarbage(buf, sizeof buf, ~u);  // read at the call only
    fillGarbage(decoy, sizeof decoy, ~u * 3u);
    {
      // No parameters: a buffer pointer without a size (it has no effect).
      void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_END};
      const CUresult rb = cuLaunchKernel(bumpFn, 1, 1, 1, 32, 1, 1, 0, cs, nullptr, extra);
      codes.add(uint64_t(rb));
      bumps += rb == CUDA_SUCCESS;
    }
    {
      // With a size of 0.
      size_t none = 0;
      void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &none, CU_LAUNCH_PARAM_END};
      const CUresult rb = cuLaunchKernel(bumpFn, 1, 1, 1, 32, 1, 1, 0, cs, nullptr, extra);
      codes.add(uint64_t(rb));
      bumps += rb == CUDA_SUCCESS;
    }
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, u);
    CKL();
    if (checkpoint(i, s, "a", a)) {
      print("decoy", i, deviceDigest(decoyDst, kN * 4));
      print("codes", refused, codes.h);
    }
  }
  CK(cudaStreamSynchronize(s));
  uint32_t counted = 0;
  CK(cudaMemcpyFromSymbol(&counted, g_r3Bumps, 4));
  print("bumps", bumps, counted);
  print("end", refused,
        deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(decoyDst, kN * 4) ^ codes.h);
}

// --- memory_exhausted

void memoryExhausted() {
  cudaStream_t s = nonBlockingStream(), t = nonBlockingStream();
  cudaEvent_t e;
  CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  uint32_t *a = deviceBuffer(2301), *b = deviceBuffer(2302), *c = deviceBuffer(2303);
  // Everything the loop uses, once, before the memory is gone (lazy loading
  // loads a kernel's code at its first launch).
  // (s, then t, then s again: the kernels and copies touch a and c on both
  // streams, which must not race; thirty-fourth session's audit.)
  mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, 0);
  CK(cudaEventRecord(e, s));
  CK(cudaStreamWaitEvent(t, e, 0));
  mix2<<<kGrid, kBlock, 0, t>>>(c, a, b, kN, 0);
  CKL();
  CK(cudaMemcpyAsync(c + 64, a, 256, cudaMemcpyDeviceToDevice, t));
  CK(cudaEventRecord(e, t));
  CK(cudaStreamWaitEvent(s, e, 0));
  CK(cudaMemsetAsync(c, 0, 64, s));
  CK(cudaEventRecord(e, s));
  CK(cudaStreamWaitEvent(t, e, 0));
  CK(cudaDeviceSynchronize());
  print("before", 0, deviceDigest(a, kN * 4));  // the runtime's staging for copies to the host, too
  // Take the device's memory in chunks of 256, 16 and 2 MiB until refused.
  std::vector<void*> chunks;
  for (size_t chunk : {size_t(256) << 20, size_t(16) << 20, size_t(2) << 20}) {
    for (;;) {
      void* p = nullptr;
      if (cudaMalloc(&p, chunk) != cudaSuccess) {
        cudaGetLastError();
        break;
      }
      chunks.push_back(p);
    }
  }
  for (int k = 0; k < 2 && !chunks.empty(); ++k) {  // 4 MiB of slack for the driver
    CK(cudaFree(chunks.back()));
    chunks.pop_back();
  }
  Digest codes;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 4u;
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, u);
    CKL();
    CK(cudaMemsetAsync(c + (i % 16) * 256, i & 0xff, 1024, s));
    CK(cudaEventRecord(e, s));
    CK(cudaStreamWaitEvent(t, e, 0));
    mix2<<<kGrid, kBlock, 0, t>>>(c, a, b, kN, u + 1);
    CKL();
    CK(cudaMemcpyAsync(c + 8192, a + (i % 7) * 32, 4096 * 4, cudaMemcpyDeviceToDevice, t));
    CK(cudaEventRecord(e, t));
    CK(cudaStreamWaitEvent(s, e, 0));
    mix<<<kGrid, kBlock, 0, s>>>(b, c, kN, u + 2);
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, u + 3);
    CKL();
    if (i % 10 == 9) {
      void* p = nullptr;
      const cudaError_t r = cudaMalloc(&p, size_t(64) << 20);  // no memory: refused
      codes.add(uint64_t(r));
      if (r == cudaSuccess) CK(cudaFree(p));
      cudaGetLastError();
    }
    if (i % 25 == 24) CK(cudaStreamSynchronize(s));
    if (checkpoint(i, s, "a", a)) print("codes", i, codes.h);
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4) ^ codes.h);
  for (void* p : chunks) CK(cudaFree(p));
}

constexpr Scenario kScenarios[] = {
    {"kernel_stream_context", kernelStreamContext},
    {"padded_struct_params", paddedStructParams},
    {"capture_to_graph", captureToGraph},
    {"dyn_smem_only", dynSmemOnly},
    {"long_period_counter", longPeriodCounter},
    {"peer_copies_one_device", peerCopiesOneDevice},
    {"pool_three_streams", poolThreeStreams},
    {"managed_copies", managedCopies},
    {"event_recycle", eventRecycle},
    {"stream_attrs", streamAttrs},
    {"extra_key_order", extraKeyOrder},
    {"memory_exhausted", memoryExhausted},
};

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && !std::strcmp(argv[1], "--probe-stream-context")) return probeStreamContext(argv[2]);
  return runScenarios(argc, argv, kScenarios);
}
