// traps_r6: a sixth red-team round of odd but legal CUDA C++ patterns in the
// style of traps_r4.cu and traps_edge.cu (trap_common.cuh), aimed at what a
// tool that holds launches back, captures the repeating ones into graphs of
// its own and patches their parameters could change: what a kernel can see
// of how it was launched (inside a graph or not, an explicit cluster or
// not), per-step texture objects, the legacy stream's implicit ordering
// over every kind of blocking stream, a ring exchange between three prioritized streams, another thread's
// global-mode capture, launch shapes read back from the device, and the
// program's own captures waiting on events a replay recorded. Each scenario
// is deterministic in eager and prints digests of its buffers and of the
// return codes and values the host saw; check_traps.py requires the same
// output under graft.
//
//   graph_membership      a library-style kernel tries the device-graph fast
//                         path every step: it reads cudaGetCurrentGraphExec()
//                         and calls the device-side cudaGraphLaunch of a
//                         device-launchable graph (fire-and-forget or tail
//                         launch, in turn), and when that fails does the
//                         graph's work inline; the graph's own kernel counts
//                         its runs. Eagerly the kernel is launched on a plain
//                         stream, where device graph launches are refused
//                         (a kernel must run inside a graph to launch one),
//                         so every step falls back. A tool that captures the
//                         launch into a graph of its own changes what the
//                         kernel sees: the launch may succeed, the counts and
//                         the codes differ. A fresh process (the probe) first
//                         makes sure the refusal is clean on this driver.
//   launch_identity       one kernel body launched seven ways every step (a
//                         plain <<<>>>, cudaLaunchKernelEx with a 1x1x1 and a
//                         2x1x1 cluster attribute, a __cluster_dims__ kernel,
//                         cuLaunchKernelEx with an IGNORE entry and a 1x1x1
//                         cluster, cudaLaunchKernelEx with no attributes, and
//                         on irregular steps a 4x1x1 cluster) records what a
//                         kernel can read about its own launch: the special
//                         registers %is_explicit_cluster, %cluster_nctarank,
//                         %nclusterid, %dynamic_smem_size, %total_smem_size,
//                         %aggr_smem_size and %current_graph_exec. A graph
//                         node made by capture must carry the launch exactly
//                         (an explicit 1x1x1 cluster is not "no cluster").
//   tex_recreate          texture objects made anew every step over the same
//                         pitched memory, with another address mode each time
//                         (wrap, clamp, mirror, border; normalized coordinates
//                         sampled far outside [0,1)), and a 1-D linear texture
//                         over the same allocation whose size shrinks and
//                         grows; three steps in flight, each step's objects
//                         destroyed two steps later after an event synchronize
//                         (the driver may hand the same handle back with
//                         another descriptor); a kernel rewrites the texels
//                         every step.
//   legacy_mesh           the legacy stream's implicit ordering, with no
//                         event, over every kind of blocking stream at once: a
//                         prioritized blocking stream, one made by cuStreamCreate,
//                         cudaStreamPerThread (blocking against the legacy
//                         stream in a legacy-default program); the legacy
//                         stream (named 0 or cudaStreamLegacy) gets a device
//                         copy, a memset and kernels, a cooperative-groups
//                         memcpy_async (cp.async) kernel runs on the per-thread
//                         stream, and a non-blocking stream joins through
//                         events; on irregular steps a legacy copy into
//                         pinned memory (eager for a tool) and a driver-API
//                         launch. Every access is ordered only by the rules.
//   ring_ranks            "three devices' worth" of streams on one device: a
//                         ring all-reduce (reduce-scatter, then all-gather)
//                         between three ranks on non-blocking streams of
//                         three priorities, chunks moved by device copies and
//                         summed by kernels, each rank's single event recorded
//                         five times a step and waited on by its neighbours
//                         (every wait binds to the record made before it),
//                         cudaSetDevice before each rank's calls as multi-GPU
//                         code does, and on irregular steps a same-device
//                         cudaMemcpyPeerAsync in place of one copy.
//   global_capture_helper a helper thread, in lockstep with the main thread,
//                         captures its own stream (global, thread-local and
//                         relaxed mode in turn) while the main thread keeps
//                         launching, records an event, memsets and calls
//                         cudaMalloc (refused during another thread's global
//                         capture, which that may invalidate); the helper
//                         ends the capture and runs what it got. Every code
//                         is printed: a tool that steps aside for the capture
//                         must flush the main thread's held work first and make
//                         no call of its own that the capture forbids.
//   readback_grid         the launch shape comes from the device: each step
//                         counts elements above a threshold, copies the count
//                         into pinned memory and waits for it with an event
//                         created with cudaEventBlockingSync|DisableTiming,
//                         then launches a kernel on a second stream (forked
//                         and joined by events) with a grid computed from the
//                         count: about 16 grid sizes in plateaus of a few
//                         steps (more than a tool keeps variants of), a 2-D
//                         grid of the same size on irregular steps.
//   capture_wait_on_replayed  a two-stream step records one event in the
//                         middle of a stream and another as the last op of the
//                         second stream; now and then, after synchronizing,
//                         the program queries both, begins a capture of its
//                         own and waits on them inside it (plainly and with
//                         cudaEventWaitExternal), ends it and runs the graph.
//                         Under a tool those records were made by its graph's
//                         event nodes, or beside the graph's launch; the
//                         driver's answers must be those of plain records.
//
//   traps_r6 NAME [--iters N]          one scenario (see kScenarios)
//   traps_r6 --list                    the scenario names
//   traps_r6 --probe-devgraph MODE     (internal) graph_membership's probe
//
// Built like traps_r4 (-rdc=true -lcudadevrt: device-side graph launches)
// and linked to libcuda (-lcuda: TMA descriptors, driver launches):
//   nvcc -O2 -std=c++17 -arch=sm_90 -rdc=true -o traps_r6 traps_r6.cu -lcudadevrt -lcuda

#include <cooperative_groups.h>
#include <cooperative_groups/memcpy_async.h>
#include <cuda/barrier>
#include <cuda/ptx>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "trap_common.cuh"

namespace cg = cooperative_groups;

namespace {

// ---------------------------------------------------------------- helpers

std::vector<uint32_t> readWords(const void* d, size_t words) {
  std::vector<uint32_t> h(words);
  CK(cudaMemcpy(h.data(), d, words * 4, cudaMemcpyDeviceToHost));
  return h;
}

// A code into a digest (a host-side record of what calls returned).
void addCode(Digest& d, int code) { d.add(uint64_t(uint32_t(code))); }

uint32_t* zeroBuffer(size_t words) {
  uint32_t* d = nullptr;
  CK(cudaMalloc(&d, words * 4));
  CK(cudaMemset(d, 0, words * 4));
  return d;
}

cudaEvent_t untimedEvent(unsigned extra = 0) {
  cudaEvent_t e = nullptr;
  CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming | extra));
  return e;
}

// Loads a kernel now (lazy loading): its first launch then loads nothing.
template <typename K>
void preload(K kernel) {
  cudaFuncAttributes a;
  CK(cudaFuncGetAttributes(&a, kernel));
}

// ---------------------------------------------------------------- graph_membership

// The device graph's kernel: the work the fast path does, counted.
__global__ void dgWork(uint32_t* data, int n, const uint32_t* saltWord, uint32_t* counts) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) data[k] = rotl(data[k], 3) + *saltWord + uint32_t(k);
  if (k == 0) atomicAdd(&counts[0], 1u);
}

// info: [0] launches that ran inside a graph, [1] device launches accepted,
// [2] refused, [3] the last code, [4] inline fallbacks, [5] a digest of the
// codes. One block; launches of it are serialized on their stream.
__global__ void tryDeviceGraph(cudaGraphExec_t dg, int mode, uint32_t* info, uint32_t* data, int n,
                               const uint32_t* saltWord) {
  __shared__ int launched;
  if (threadIdx.x == 0) {
    const bool inGraph = cudaGetCurrentGraphExec() != nullptr;
    const cudaError_t e = cudaGraphLaunch(dg, mode == 0 ? cudaStreamGraphFireAndForget : cudaStreamGraphTailLaunch);
    info[0] += inGraph ? 1u : 0u;
    info[e == cudaSuccess ? 1 : 2] += 1u;
    info[3] = uint32_t(e);
    info[5] = info[5] * 31u + uint32_t(e) + 1u;
    launched = e == cudaSuccess;
  }
  __syncthreads();
  if (!launched) {
    const uint32_t salt = *saltWord;
    for (int k = threadIdx.x; k < n; k += blockDim.x) data[k] = rotl(data[k], 3) + salt + uint32_t(k);
    if (threadIdx.x == 0) info[4] += 1u;
  }
}

struct DeviceGraph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
};

DeviceGraph makeDeviceGraph(uint32_t* data, int n, const uint32_t* saltWord, uint32_t* counts, cudaStream_t s) {
  DeviceGraph g;
  CK(cudaGraphCreate(&g.graph, 0));
  void* args[] = {&data, &n, &saltWord, &counts};
  cudaKernelNodeParams p = {};
  p.func = reinterpret_cast<void*>(dgWork);
  p.gridDim = dim3((n + kBlock - 1) / kBlock);
  p.blockDim = dim3(kBlock);
  p.kernelParams = args;
  cudaGraphNode_t node = nullptr;
  CK(cudaGraphAddKernelNode(&node, g.graph, nullptr, 0, &p));
  CK(cudaGraphInstantiate(&g.exec, g.graph, cudaGraphInstantiateFlagDeviceLaunch));
  CK(cudaGraphUpload(g.exec, s));
  CK(cudaStreamSynchronize(s));
  return g;
}

constexpr int kDgWords = 4096;

// The probe (this binary run with --probe-devgraph MODE, a fresh process):
// one launch of tryDeviceGraph on a plain stream; prints the codes it got.
int probeDevGraph(const char* variant) {
  if (cudaFree(nullptr) != cudaSuccess) {
    std::printf("no device\n");
    return 77;
  }
  const int mode = std::strcmp(variant, "tail") == 0 ? 1 : 0;
  cudaStream_t s = nonBlockingStream();
  uint32_t *data = deviceBuffer(5001, kDgWords), *salt = zeroBuffer(1), *counts = zeroBuffer(1), *info = zeroBuffer(8);
  const DeviceGraph dg = makeDeviceGraph(data, kDgWords, salt, counts, s);
  tryDeviceGraph<<<1, 128, 0, s>>>(dg.exec, mode, info, data, kDgWords, salt);
  const cudaError_t launch = cudaGetLastError();
  const cudaError_t sync = cudaStreamSynchronize(s);
  uint32_t h[8] = {};
  uint32_t c = 0;
  if (sync == cudaSuccess) {
    CK(cudaMemcpy(h, info, sizeof h, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(&c, counts, 4, cudaMemcpyDeviceToHost));
  }
  std::printf("launch %d sync %d in_graph %u accepted %u refused %u code %u fallbacks %u dg_runs %u\n", int(launch),
              int(sync), h[0], h[1], h[2], h[3], h[4], c);
  return 0;
}

void graphMembership() {
  bool clean[2] = {};
  const char* const kModes[2] = {"fire", "tail"};
  for (int m = 0; m < 2; ++m) {
    const ChildRun run = runSelfInChild("traps_r6", "--probe-devgraph", kModes[m]);
    int launch = -1, sync = -1;
    clean[m] = run.exitCode == 0 && std::sscanf(run.out.c_str(), "launch %d sync %d", &launch, &sync) == 2 &&
               launch == 0 && sync == 0;
    std::printf("probe %s: %s\n", kModes[m], run.text.c_str());
  }
  if (!clean[0] && !clean[1]) {
    std::printf("SKIP the device-side graph launch does not fail cleanly outside a graph here\n");
    return;
  }
  cudaStream_t s = nonBlockingStream();
  uint32_t *data = deviceBuffer(5011, kDgWords), *salt = zeroBuffer(1), *counts = zeroBuffer(1), *info = zeroBuffer(8);
  uint32_t *a = deviceBuffer(5012), *b = deviceBuffer(5013);
  preload(tryDeviceGraph);
  const DeviceGraph dg = makeDeviceGraph(data, kDgWords, salt, counts, s);
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i);
    // The mode the probe found refused cleanly; both in turn where both are.
    const int mode = clean[0] && clean[1] ? (irregular(i, 601, 3) ? 1 : 0) : (clean[0] ? 0 : 1);
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, u);
    CK(cudaMemsetAsync(salt, int(u * 7u) & 0xff, 4, s));
    tryDeviceGraph<<<1, 128, 0, s>>>(dg.exec, mode, info, data, kDgWords, salt);
    mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, u + 1);
    mix<<<kDgWords / kBlock, kBlock, 0, s>>>(a, data, kDgWords, u + 2);
    CKL();
    if (i % 100 == 99 || i == g_iters - 1) {
      CK(cudaStreamSynchronize(s));
      const std::vector<uint32_t> h = readWords(info, 8);
      const std::vector<uint32_t> c = readWords(counts, 1);
      std::printf("step %d: in_graph %u accepted %u refused %u last_code %u fallbacks %u dg_runs %u\n", i, h[0], h[1],
                  h[2], h[3], h[4], c[0]);
      print("codes", i, h[5]);
      print("data", i, deviceDigest(data, kDgWords * 4) ^ deviceDigest(a, kN * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(data, kDgWords * 4) ^ deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
  CK(cudaGraphExecDestroy(dg.exec));
  CK(cudaGraphDestroy(dg.graph));
}

// ---------------------------------------------------------------- launch_identity

__device__ __forceinline__ uint32_t sregIsExplicitCluster() {
  uint32_t r;
  asm volatile(
      "{\n\t.reg .pred p;\n\tmov.pred p, %%is_explicit_cluster;\n\tselp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t sregClusterNctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t sregNclusteridX() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t sregDynamicSmem() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t sregTotalSmem() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%total_smem_size;" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t sregAggrSmem() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%aggr_smem_size;" : "=r"(r));
  return r;
}

constexpr int kIdForms = 7;
constexpr int kIdGrid = 16, kIdBlock = 64, kIdWords = kIdGrid * kIdBlock;

// out: [0] explicit-cluster bits seen (1 yes, 2 no), [1] most CTAs per
// cluster, [2] most clusters in x, [3] most dynamic shared memory, [4] most
// total shared memory, [5] most aggregate shared memory, [6] in-graph bits
// seen (1 yes, 2 no), [7] blocks that ran.
__device__ void identityBody(uint32_t* out, uint32_t* dst, const uint32_t* src, uint32_t salt) {
  extern __shared__ uint32_t dyn[];
  __shared__ uint32_t stat[kIdBlock];
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  stat[threadIdx.x] = src[(k * 5 + 3) % kN] + salt;
  __syncthreads();
  uint32_t v = stat[(threadIdx.x * 7) % kIdBlock];
  const uint32_t dynWords = sregDynamicSmem() / 4;
  if (dynWords >= uint32_t(kIdBlock)) {  // the same for the whole block
    dyn[threadIdx.x] = v;
    __syncthreads();
    v ^= dyn[(threadIdx.x + 1) % kIdBlock];
  }
  dst[k] = rotl(dst[k], 3) ^ v;
  if (threadIdx.x == 0) {
    atomicOr(&out[0], sregIsExplicitCluster() ? 1u : 2u);
    atomicMax(&out[1], sregClusterNctarank());
    atomicMax(&out[2], sregNclusteridX());
    atomicMax(&out[3], sregDynamicSmem());
    atomicMax(&out[4], sregTotalSmem());
    atomicMax(&out[5], sregAggrSmem());
    atomicOr(&out[6], cudaGetCurrentGraphExec() != nullptr ? 1u : 2u);
    atomicAdd(&out[7], 1u);
  }
}
__global__ void identityProbe(uint32_t* out, uint32_t* dst, const uint32_t* src, uint32_t salt) {
  identityBody(out, dst, src, salt);
}
__global__ void __cluster_dims__(2, 1, 1) identityClustered(uint32_t* out, uint32_t* dst, const uint32_t* src,
                                                            uint32_t salt) {
  identityBody(out, dst, src, salt);
}

cudaLaunchConfig_t identityConfig(cudaStream_t s, unsigned smem, cudaLaunchAttribute* attrs, unsigned numAttrs) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(kIdGrid);
  cfg.blockDim = dim3(kIdBlock);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = attrs;
  cfg.numAttrs = numAttrs;
  return cfg;
}

void launchIdentity() {
  cudaStream_t s = nonBlockingStream();
  uint32_t *out = zeroBuffer(kIdForms * 8), *dst = deviceBuffer(5101, kIdForms * kIdWords), *src = deviceBuffer(5102);
  CUfunction probeFn = nullptr;
  CK(cudaGetFuncBySymbol(&probeFn, reinterpret_cast<const void*>(identityProbe)));
  preload(identityClustered);
  Digest codes;
  for (int i = 0; i < g_iters; ++i) {
    uint32_t u = uint32_t(i);
    auto slot = [&](int f) { return out + f * 8; };
    auto region = [&](int f) { return dst + f * kIdWords; };
    // 0: plain.
    identityProbe<<<kIdGrid, kIdBlock, 0, s>>>(slot(0), region(0), src, u);
    // 1: an explicit 1x1x1 cluster.
    cudaLaunchAttribute one[1] = {};
    one[0].id = cudaLaunchAttributeClusterDimension;
    one[0].val.clusterDim.x = 1;
    one[0].val.clusterDim.y = 1;
    one[0].val.clusterDim.z = 1;
    cudaLaunchConfig_t c1 = identityConfig(s, 0, one, 1);
    addCode(codes, keep(cudaLaunchKernelEx(&c1, identityProbe, slot(1), region(1), static_cast<const uint32_t*>(src), u)));
    // 2 (6 on irregular steps): a 2x1x1 (4x1x1) cluster with dynamic shared memory.
    const bool wide = irregular(i, 611, 9);
    cudaLaunchAttribute two[1] = {};
    two[0].id = cudaLaunchAttributeClusterDimension;
    two[0].val.clusterDim.x = wide ? 4 : 2;
    two[0].val.clusterDim.y = 1;
    two[0].val.clusterDim.z = 1;
    cudaLaunchConfig_t c2 = identityConfig(s, wide ? 1024 : 2048, two, 1);
    addCode(codes, keep(cudaLaunchKernelEx(&c2, identityProbe, slot(wide ? 6 : 2), region(wide ? 6 : 2),
                                           static_cast<const uint32_t*>(src), u)));
    // 3: compile-time cluster dimensions.
    identityClustered<<<kIdGrid, kIdBlock, 512, s>>>(slot(3), region(3), src, u);
    // 4: the driver, with an ignored entry before an explicit 1x1x1 cluster.
    {
      CUlaunchAttribute attrs[2] = {};
      attrs[0].id = CU_LAUNCH_ATTRIBUTE_IGNORE;
      attrs[1].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attrs[1].value.clusterDim.x = 1;
      attrs[1].value.clusterDim.y = 1;
      attrs[1].value.clusterDim.z = 1;
      CUlaunchConfig cfg = {};
      cfg.gridDimX = kIdGrid;
      cfg.gridDimY = cfg.gridDimZ = 1;
      cfg.blockDimX = kIdBlock;
      cfg.blockDimY = cfg.blockDimZ = 1;
      cfg.sharedMemBytes = 0;
      cfg.hStream = reinterpret_cast<CUstream>(s);
      cfg.attrs = attrs;
      cfg.numAttrs = 2;
      uint32_t* o = slot(4);
      uint32_t* d = region(4);
      const uint32_t* sp = src;
      void* params[] = {&o, &d, &sp, &u};
      addCode(codes, cuLaunchKernelEx(&cfg, probeFn, params, nullptr));
    }
    // 5: cudaLaunchKernelEx with no attributes.
    cudaLaunchConfig_t c5 = identityConfig(s, 1024, nullptr, 0);
    addCode(codes, keep(cudaLaunchKernelEx(&c5, identityProbe, slot(5), region(5), static_cast<const uint32_t*>(src), u)));
    mix<<<kIdForms * kIdWords / kBlock, kBlock, 0, s>>>(src, dst, kIdForms * kIdWords, u);  // the next step's input
    CKL();
    if (i % 100 == 99 || i == g_iters - 1) {
      CK(cudaStreamSynchronize(s));
      const std::vector<uint32_t> h = readWords(out, kIdForms * 8);
      for (int f = 0; f < kIdForms; ++f)
        std::printf("step %d form %d: explicit %u ctas %u clusters %u dyn %u total %u aggr %u in_graph %u blocks %u\n", i,
                    f, h[f * 8 + 0], h[f * 8 + 1], h[f * 8 + 2], h[f * 8 + 3], h[f * 8 + 4], h[f * 8 + 5],
                    h[f * 8 + 6], h[f * 8 + 7]);
      print("codes", i, codes.h);
      print("dst", i, deviceDigest(dst, kIdForms * kIdWords * 4));
    }
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, deviceDigest(dst, kIdForms * kIdWords * 4) ^ deviceDigest(src, kN * 4));
}

// ---------------------------------------------------------------- tex_recreate

constexpr int kTexW = 128, kTexH = 64, kTexN = kTexW * kTexH;

// Samples at texel centres over [-w/2, 3w/2) x [-h/2, 3h/2) in normalized
// coordinates (exact in float: w and h are powers of two), so the address
// mode decides every value outside the texture.
__global__ void texSample(uint32_t* dst, cudaTextureObject_t tex, int w, int h, int ox, int oy, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= w * h) return;
  const int x = k % w, y = k / w;
  const int sx = x * 2 - w / 2 + ox, sy = y * 2 - h / 2 + oy;
  const float u = (float(sx) + 0.5f) / float(w), v = (float(sy) + 0.5f) / float(h);
  dst[k] = rotl(dst[k], 5) + tex2D<uint32_t>(tex, u, v) + salt;
}

// Fetches past the end of a linear texture read 0.
__global__ void texFetch(uint32_t* dst, cudaTextureObject_t tex, int n, int off, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 7) ^ (tex1Dfetch<uint32_t>(tex, k * 3 + off) + salt);
}

// Rewrites the texels (the first w words of each pitched row).
__global__ void pitchMix(uint32_t* buf, size_t pitchWords, int w, int h, const uint32_t* src, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= w * h) return;
  uint32_t& t = buf[size_t(k / w) * pitchWords + size_t(k % w)];
  t = rotl(t, 3) + src[(k * 7 + 11) % (w * h)] + salt;
}

// 0 (and the code) where the driver refuses the descriptor.
cudaTextureObject_t pitchTexture(uint32_t* buf, size_t pitch, cudaTextureAddressMode mode, cudaError_t* code) {
  cudaResourceDesc res = {};
  res.resType = cudaResourceTypePitch2D;
  res.res.pitch2D.devPtr = buf;
  res.res.pitch2D.desc = cudaCreateChannelDesc<uint32_t>();
  res.res.pitch2D.width = kTexW;
  res.res.pitch2D.height = kTexH;
  res.res.pitch2D.pitchInBytes = pitch;
  cudaTextureDesc td = {};
  td.addressMode[0] = td.addressMode[1] = mode;
  td.filterMode = cudaFilterModePoint;
  td.readMode = cudaReadModeElementType;
  td.normalizedCoords = 1;
  cudaTextureObject_t t = 0;
  *code = keep(cudaCreateTextureObject(&t, &res, &td, nullptr));
  return *code == cudaSuccess ? t : 0;
}

cudaTextureObject_t linearTexture(uint32_t* buf, size_t bytes, cudaError_t* code) {
  cudaResourceDesc res = {};
  res.resType = cudaResourceTypeLinear;
  res.res.linear.devPtr = buf;
  res.res.linear.desc = cudaCreateChannelDesc<uint32_t>();
  res.res.linear.sizeInBytes = bytes;
  cudaTextureDesc td = {};
  td.readMode = cudaReadModeElementType;
  cudaTextureObject_t t = 0;
  *code = keep(cudaCreateTextureObject(&t, &res, &td, nullptr));
  return *code == cudaSuccess ? t : 0;
}

void texRecreate() {
  cudaStream_t s = nonBlockingStream();
  // Rows with 64 bytes of padding (rounded to the pitch alignment), from a
  // base aligned for both kinds of texture.
  const size_t pitchAlign = size_t(deviceAttribute(cudaDevAttrTexturePitchAlignment));
  const size_t baseAlign = std::max<size_t>(1024, size_t(deviceAttribute(cudaDevAttrTextureAlignment)));
  const size_t pitch = (kTexW * 4 + 64 + pitchAlign - 1) / pitchAlign * pitchAlign;
  unsigned char* raw = nullptr;
  CK(cudaMalloc(&raw, pitch * kTexH + baseAlign));
  uint32_t* buf = reinterpret_cast<uint32_t*>((reinterpret_cast<uintptr_t>(raw) + baseAlign - 1) / baseAlign * baseAlign);
  CK(cudaMemset(buf, 0x5a, pitch * kTexH));  // the padding too: the linear texture reads it
  uint32_t *dst = deviceBuffer(5301, kTexN), *dst2 = deviceBuffer(5302, kTexN);
  const size_t pitchWords = pitch / 4;
  const cudaTextureAddressMode kModes[4] = {cudaAddressModeWrap, cudaAddressModeClamp, cudaAddressModeMirror,
                                            cudaAddressModeBorder};
  cudaEvent_t ev[3] = {untimedEvent(), untimedEvent(), untimedEvent()};
  cudaTextureObject_t tex2d[3] = {}, tex1d[3] = {};
  const int grid = kTexN / kBlock;
  Digest codes;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i);
    const int slot = i % 3;
    const cudaTextureAddressMode mode = kModes[(i + i / 7) % 4];
    cudaError_t c2 = cudaSuccess, c1 = cudaSuccess;
    tex2d[slot] = pitchTexture(buf, pitch, mode, &c2);
    const size_t bytes = pitch * kTexH - size_t((i * 5) % 13) * 256;
    tex1d[slot] = linearTexture(buf, bytes, &c1);
    addCode(codes, c2);
    addCode(codes, c1);
    if (tex2d[slot])
      texSample<<<grid, kBlock, 0, s>>>(dst, tex2d[slot], kTexW, kTexH, (i * 3) % 17 - 8, (i * 5) % 11 - 5, u);
    if (tex1d[slot]) texFetch<<<grid, kBlock, 0, s>>>(dst2, tex1d[slot], kTexN, (i * 7) % 97, u);
    pitchMix<<<grid, kBlock, 0, s>>>(buf, pitchWords, kTexW, kTexH, dst, u);
    mix<<<grid, kBlock, 0, s>>>(dst2, dst, kTexN, u);
    CKL();
    CK(cudaEventRecord(ev[slot], s));
    // The objects of two steps ago: their kernels are done once their event is.
    const int old = (i + 1) % 3;
    if (i >= 2) {
      CK(cudaEventSynchronize(ev[old]));
      if (tex2d[old]) CK(cudaDestroyTextureObject(tex2d[old]));
      if (tex1d[old]) CK(cudaDestroyTextureObject(tex1d[old]));
      tex2d[old] = tex1d[old] = 0;
    }
    if (checkpoint(i, s, "dst", dst, kTexN)) {
      print("dst2", i, deviceDigest(dst2, kTexN * 4));
      print("codes", i, codes.h);
    }
  }
  CK(cudaStreamSynchronize(s));
  for (int k = 0; k < 3; ++k) {
    if (tex2d[k]) CK(cudaDestroyTextureObject(tex2d[k]));
    if (tex1d[k]) CK(cudaDestroyTextureObject(tex1d[k]));
  }
  std::vector<uint32_t> texels(pitchWords * kTexH);
  CK(cudaMemcpy2D(texels.data(), pitch, buf, pitch, kTexW * 4, kTexH, cudaMemcpyDeviceToHost));
  Digest d;
  for (int y = 0; y < kTexH; ++y) d.add(&texels[size_t(y) * pitchWords], kTexW * 4);
  print("end", 0, d.h ^ deviceDigest(dst, kTexN * 4) ^ deviceDigest(dst2, kTexN * 4));
  CK(cudaFree(raw));
}

// ---------------------------------------------------------------- legacy_mesh

// Stages this block's slice and another block's slice of src in shared
// memory with cooperative-groups memcpy_async (cp.async), then folds both in.
// Needs n == gridDim.x * blockDim.x and 2 * blockDim.x words of dynamic
// shared memory.
__global__ void stagedMix(uint32_t* dst, const uint32_t* src, int n, uint32_t salt) {
  extern __shared__ uint32_t stage[];
  cg::thread_block block = cg::this_thread_block();
  const int base = blockIdx.x * blockDim.x;
  const int other = ((blockIdx.x + 17) % gridDim.x) * blockDim.x;
  cg::memcpy_async(block, stage, src + base, sizeof(uint32_t) * blockDim.x);
  cg::memcpy_async(block, stage + blockDim.x, src + other, sizeof(uint32_t) * blockDim.x);
  cg::wait(block);
  const int k = base + threadIdx.x;
  if (k < n)
    dst[k] = rotl(dst[k], 9) ^ (stage[threadIdx.x] + stage[blockDim.x + (threadIdx.x * 5) % blockDim.x] + salt);
}

void legacyMesh() {
  int least = 0, greatest = 0;
  CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t b1 = nullptr;
  CK(cudaStreamCreateWithPriority(&b1, cudaStreamDefault, greatest));  // blocking, high priority
  CUstream b2d = nullptr;
  CKD(cuStreamCreate(&b2d, CU_STREAM_DEFAULT));  // blocking, made by the driver
  cudaStream_t b2 = reinterpret_cast<cudaStream_t>(b2d);
  cudaStream_t p = cudaStreamPerThread;  // blocking against the legacy stream
  cudaStream_t nb = nonBlockingStream();
  cudaEvent_t eL = untimedEvent(), eN = untimedEvent();
  uint32_t *a = deviceBuffer(5501), *b = deviceBuffer(5502), *c = deviceBuffer(5503), *d = deviceBuffer(5504),
           *e = deviceBuffer(5505), *f = deviceBuffer(5506);
  uint32_t* pinned = nullptr;
  CK(cudaMallocHost(&pinned, 16 * 256));
  std::memset(pinned, 0, 16 * 256);
  CUfunction mixFn = nullptr;
  CK(cudaGetFuncBySymbol(&mixFn, reinterpret_cast<const void*>(mix)));
  int copies = 0;
  for (int i = 0; i < g_iters; ++i) {
    uint32_t u = uint32_t(i);
    cudaStream_t legacy = irregular(i, 631, 6) ? cudaStreamLegacy : cudaStream_t(0);
    mix<<<kGrid, kBlock, 0, b1>>>(a, e, kN, u);                                   // 1: B1 writes a
    CK(cudaMemcpyAsync(c, a, kN * 4, cudaMemcpyDeviceToDevice, legacy));         // 2: after B1
    if (irregular(i, 632, 8)) {                                                   // 3: after the copy
      int n = kN;
      uint32_t salt = u + 1;
      void* params[] = {&b, &c, &n, &salt};
      CKD(cuLaunchKernel(mixFn, kGrid, 1, 1, kBlock, 1, 1, 0, b2d, params, nullptr));
    } else {
      mix<<<kGrid, kBlock, 0, b2>>>(b, c, kN, u + 1);
    }
    stagedMix<<<kGrid, kBlock, 2 * kBlock * 4, p>>>(d, c, kN, u + 2);            // 4: after the copy, beside 3
    CK(cudaMemsetAsync(e + (i % 64) * 128, int(u * 13u) & 0xff, 512, legacy));  // 5: after 1, 3 and 4
    CK(cudaEventRecord(eL, legacy));
    CK(cudaStreamWaitEvent(nb, eL, 0));
    mix<<<kGrid, kBlock, 0, nb>>>(f, d, kN, u + 3);                               // 6: N, after 5
    CK(cudaEventRecord(eN, nb));
    CK(cudaStreamWaitEvent(b1, eN, 0));
    mix<<<kGrid, kBlock, 0, b1>>>(a, f, kN, u + 4);                               // 7: after 6 and 5
    mix2<<<kGrid, kBlock, 0, legacy>>>(e, b, d, kN, u + 5);                       // 8: after 3, 4, 7
    CKL();
    if (irregular(i, 633, 9)) {  // into pinned memory, on the legacy stream (after 8)
      CK(cudaMemcpyAsync(pinned + (copies % 16) * 64, e + (i % 97) * 64, 256, cudaMemcpyDeviceToHost, legacy));
      ++copies;
    }
    if (i % 100 == 99 || i == g_iters - 1) {
      CK(cudaDeviceSynchronize());
      print("a", i, deviceDigest(a, kN * 4));
      print("e", i, deviceDigest(e, kN * 4));
      print("bcdf", i,
            deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4) ^ deviceDigest(d, kN * 4) ^ deviceDigest(f, kN * 4));
      print("pinned", copies, hostDigest(pinned, 16 * 256));
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", 0,
        deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4) ^ deviceDigest(d, kN * 4) ^
            deviceDigest(e, kN * 4) ^ deviceDigest(f, kN * 4));
  CK(cudaStreamDestroy(b1));
  CKD(cuStreamDestroy(b2d));
  CK(cudaFreeHost(pinned));
}

// ---------------------------------------------------------------- ring_ranks

__global__ void mixSelf(uint32_t* d, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) d[k] = rotl(d[k], 5) ^ hash32(uint32_t(k) * 2654435761u + salt);
}
__global__ void addInto(uint32_t* dst, const uint32_t* src, int n) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] += src[k];
}

constexpr int kRanks = 3, kChunk = 4096;

void ringRanks() {
  const int dev = currentDevice();
  int least = 0, greatest = 0;
  CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  const int priority[kRanks] = {least, (least + greatest) / 2, greatest};
  cudaStream_t s[kRanks];
  cudaEvent_t ev[kRanks];
  uint32_t *data[kRanks], *recv[kRanks];
  for (int r = 0; r < kRanks; ++r) {
    CK(cudaStreamCreateWithPriority(&s[r], cudaStreamNonBlocking, priority[r]));
    ev[r] = untimedEvent();
    data[r] = deviceBuffer(5601 + uint32_t(r), kRanks * kChunk);
    recv[r] = deviceBuffer(5611 + uint32_t(r), kChunk);
  }
  auto left = [](int r) { return (r + kRanks - 1) % kRanks; };
  auto right = [](int r) { return (r + 1) % kRanks; };
  auto chunk = [&](int r, int idx) { return data[r] + ((idx % kRanks + kRanks) % kRanks) * kChunk; };
  const int chunkGrid = kChunk / kBlock, allGrid = kRanks * kChunk / kBlock;
  int peers = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i);
    // On irregular steps one copy is a same-device peer copy.
    const int peerAt = irregular(i, 641, 7) ? int(hash32(u) % 12) : -1;
    int copyNo = 0;
    auto copy = [&](void* dst, const void* src, cudaStream_t st) {
      if (copyNo++ == peerAt) {
        CK(cudaMemcpyPeerAsync(dst, dev, src, dev, kChunk * 4, st));
        ++peers;
      } else {
        CK(cudaMemcpyAsync(dst, src, kChunk * 4, cudaMemcpyDeviceToDevice, st));
      }
    };
    // Each rank's data changes; first its right neighbour must be done reading it.
    for (int r = 0; r < kRanks; ++r) CK(cudaStreamWaitEvent(s[r], ev[right(r)], 0));
    for (int r = 0; r < kRanks; ++r) {
      CK(cudaSetDevice(dev));
      mixSelf<<<allGrid, kBlock, 0, s[r]>>>(data[r], kRanks * kChunk, u * 3u + uint32_t(r));
      CK(cudaEventRecord(ev[r], s[r]));
    }
    // Reduce-scatter: rank r adds chunk r-1-k of its left neighbour into its own.
    for (int k = 0; k < kRanks - 1; ++k) {
      for (int r = 0; r < kRanks; ++r) CK(cudaStreamWaitEvent(s[r], ev[left(r)], 0));
      for (int r = 0; r < kRanks; ++r) {
        CK(cudaSetDevice(dev));
        const int idx = r - 1 - k;
        copy(recv[r], chunk(left(r), idx), s[r]);
        addInto<<<chunkGrid, kBlock, 0, s[r]>>>(chunk(r, idx), recv[r], kChunk);
        CK(cudaEventRecord(ev[r], s[r]));
      }
    }
    // All-gather: rank r takes chunk r-k from its left neighbour.
    for (int k = 0; k < kRanks - 1; ++k) {
      for (int r = 0; r < kRanks; ++r) CK(cudaStreamWaitEvent(s[r], ev[left(r)], 0));
      for (int r = 0; r < kRanks; ++r) {
        CK(cudaSetDevice(dev));
        const int idx = r - k;
        copy(chunk(r, idx), chunk(left(r), idx), s[r]);
        CK(cudaEventRecord(ev[r], s[r]));
      }
    }
    CKL();
    if (i % 100 == 99 || i == g_iters - 1) {
      CK(cudaDeviceSynchronize());
      Digest d;
      for (int r = 0; r < kRanks; ++r) d.add(deviceDigest(data[r], kRanks * kChunk * 4));
      print("ranks", i, d.h);
      // After an all-reduce every rank holds the same data.
      const std::vector<uint32_t> r0 = readWords(data[0], kRanks * kChunk);
      int same = 0;
      for (int r = 1; r < kRanks; ++r) same += readWords(data[r], kRanks * kChunk) == r0;
      std::printf("step %d: ranks equal to rank 0: %d, peer copies %d\n", i, same, peers);
    }
  }
  CK(cudaDeviceSynchronize());
  Digest d;
  for (int r = 0; r < kRanks; ++r) d.add(deviceDigest(data[r], kRanks * kChunk * 4));
  print("end", 0, d.h);
  for (int r = 0; r < kRanks; ++r) CK(cudaStreamDestroy(s[r]));
}

// ---------------------------------------------------------------- global_capture_helper

void globalCaptureHelper() {
  const int dev = currentDevice();
  preload(mix);
  preload(mix2);
  cudaStream_t m = nonBlockingStream();
  cudaEvent_t e = untimedEvent();
  uint32_t *a = deviceBuffer(5701), *b = deviceBuffer(5702), *h1 = deviceBuffer(5703), *h2 = deviceBuffer(5704);
  // stage: 4r+1 the main thread asks for round r; 4r+2 the helper captures;
  // 4r+3 the main thread made its calls; 4r+4 the helper ended and ran the
  // capture; -1 the end.
  std::atomic<int> stage{0};
  std::atomic<uint64_t> helperCodes{0};
  const cudaStreamCaptureMode kModes[3] = {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal,
                                           cudaStreamCaptureModeRelaxed};
  auto waitFor = [&stage](int want) {
    int st;
    while ((st = stage.load(std::memory_order_acquire)) != want && st != -1) std::this_thread::yield();
    return st;
  };
  std::thread helper([&] {
    CK(cudaSetDevice(dev));
    cudaStream_t hs = nonBlockingStream();
    Digest codes;
    for (int r = 0;; ++r) {
      if (waitFor(4 * r + 1) == -1) break;
      addCode(codes, keep(cudaStreamBeginCapture(hs, kModes[r % 3])));
      mix<<<kGrid, kBlock, 0, hs>>>(h1, h2, kN, uint32_t(r));
      addCode(codes, keep(cudaGetLastError()));
      stage.store(4 * r + 2, std::memory_order_release);
      waitFor(4 * r + 3);
      mix<<<kGrid, kBlock, 0, hs>>>(h2, h1, kN, uint32_t(r) + 1);
      addCode(codes, keep(cudaGetLastError()));
      cudaGraph_t g = nullptr;
      addCode(codes, keep(cudaStreamEndCapture(hs, &g)));
      addCode(codes, g ? 1 : 0);
      if (g) {
        cudaGraphExec_t x = nullptr;
        addCode(codes, keep(cudaGraphInstantiate(&x, g, 0)));
        if (x) {
          CK(cudaGraphLaunch(x, hs));
          CK(cudaStreamSynchronize(hs));
          CK(cudaGraphExecDestroy(x));
        }
        CK(cudaGraphDestroy(g));
      }
      helperCodes.store(codes.h, std::memory_order_relaxed);
      stage.store(4 * r + 4, std::memory_order_release);
    }
    CK(cudaStreamDestroy(hs));
  });
  Digest mainCodes;
  int round = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i);
    mix<<<kGrid, kBlock, 0, m>>>(a, b, kN, u);
    mix<<<kGrid, kBlock, 0, m>>>(b, a, kN, u + 1);
    CK(cudaMemsetAsync(b + (i % 32) * 64, int(u) & 0xff, 256, m));
    mix2<<<kGrid, kBlock, 0, m>>>(a, b, b, kN, u + 2);  // (the helper's buffers are its own: its graph runs unordered)
    CKL();
    if (i % 30 == 7) {
      stage.store(4 * round + 1, std::memory_order_release);
      waitFor(4 * round + 2);
      // While the helper captures: launches, a record, a memset, an allocation.
      mix<<<kGrid, kBlock, 0, m>>>(a, b, kN, u + 3);
      addCode(mainCodes, keep(cudaGetLastError()));
      addCode(mainCodes, keep(cudaEventRecord(e, m)));
      addCode(mainCodes, keep(cudaMemsetAsync(a + (i % 16) * 64, 0x3c, 256, m)));
      void* p = nullptr;
      const cudaError_t allocated = keep(cudaMalloc(&p, 4096));
      addCode(mainCodes, allocated);
      mix<<<kGrid, kBlock, 0, m>>>(b, a, kN, u + 4);
      addCode(mainCodes, keep(cudaGetLastError()));
      stage.store(4 * round + 3, std::memory_order_release);
      waitFor(4 * round + 4);
      if (allocated == cudaSuccess) CK(cudaFree(p));  // after the capture: no longer refused
      std::printf("round %d (mode %d): main %016llx helper %016llx\n", round, round % 3, ull(mainCodes.h),
                  ull(helperCodes.load(std::memory_order_relaxed)));
      ++round;
    }
    if (checkpoint(i, m, "a", a)) print("b", i, deviceDigest(b, kN * 4));
  }
  stage.store(-1, std::memory_order_release);
  helper.join();
  CK(cudaDeviceSynchronize());
  print("end", round, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(h1, kN * 4) ^
                          deviceDigest(h2, kN * 4));
}

// ---------------------------------------------------------------- readback_grid

// Counts the elements whose top ten bits are below the threshold (a sum:
// the same whatever order the atomics take).
__global__ void countBelow(const uint32_t* x, int n, uint32_t threshold, uint32_t* count) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n && (x[k] >> 22) < threshold) atomicAdd(count, 1u);
}
// The first gridDim * blockDim elements (1-D or 2-D grid, in block order).
__global__ void prefixWork(uint32_t* y, const uint32_t* x, uint32_t salt) {
  const int blocks = gridDim.x * gridDim.y;
  const int block = blockIdx.y * gridDim.x + blockIdx.x;
  const int k = block * blockDim.x + threadIdx.x;
  y[k] = rotl(y[k], 11) + (x[(k * 13 + 7) % kN] ^ salt) + uint32_t(blocks);
}

void readbackGrid() {
  cudaStream_t sa = nonBlockingStream(), sb = nonBlockingStream();
  cudaEvent_t evRead = untimedEvent(cudaEventBlockingSync), evFork = untimedEvent(), evJoin = untimedEvent();
  uint32_t *x = deviceBuffer(5801), *y = deviceBuffer(5802), *count = zeroBuffer(1);
  uint32_t* host = nullptr;
  CK(cudaMallocHost(&host, 64));
  Digest seen;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i);
    const uint32_t threshold = 64u * uint32_t((i / 6) % 16) + 16u;
    CK(cudaMemsetAsync(count, 0, 4, sa));
    countBelow<<<kGrid, kBlock, 0, sa>>>(x, kN, threshold, count);
    CK(cudaMemcpyAsync(host, count, 4, cudaMemcpyDeviceToHost, sa));
    CK(cudaEventRecord(evRead, sa));
    CK(cudaEventSynchronize(evRead));
    const uint32_t c = *host;
    seen.add(c);
    const unsigned grid = 1u + c / 1024u;  // at most 17 blocks of 128
    CK(cudaEventRecord(evFork, sa));
    CK(cudaStreamWaitEvent(sb, evFork, 0));
    if (irregular(i, 651, 8))
      prefixWork<<<dim3(grid, 2), 64, 0, sb>>>(y, x, u);
    else
      prefixWork<<<grid, 128, 0, sb>>>(y, x, u);
    CK(cudaEventRecord(evJoin, sb));
    CK(cudaStreamWaitEvent(sa, evJoin, 0));
    mix<<<kGrid, kBlock, 0, sa>>>(x, y, kN, u);
    mix<<<kGrid, kBlock, 0, sa>>>(y, x, kN, u + 1);
    CKL();
    if (checkpoint(i, sa, "x", x)) print("counts", i, seen.h);
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, seen.h ^ deviceDigest(x, kN * 4) ^ deviceDigest(y, kN * 4));
  CK(cudaFreeHost(host));
}

// ---------------------------------------------------------------- capture_wait_on_replayed

void captureWaitOnReplayed() {
  cudaStream_t a = nonBlockingStream(), b = nonBlockingStream(), c = nonBlockingStream();
  cudaEvent_t mid = untimedEvent(), tail = untimedEvent(cudaEventBlockingSync);
  uint32_t *x = deviceBuffer(5901), *y = deviceBuffer(5902), *z = deviceBuffer(5903);
  Digest codes;
  int captures = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i);
    mix<<<kGrid, kBlock, 0, a>>>(x, y, kN, u);
    CK(cudaEventRecord(mid, a));  // in the middle of stream a
    mix<<<kGrid, kBlock, 0, a>>>(z, x, kN, u + 1);
    CK(cudaStreamWaitEvent(b, mid, 0));
    mix<<<kGrid, kBlock, 0, b>>>(y, x, kN, u + 2);
    CK(cudaEventRecord(tail, b));  // the last op of stream b
    CK(cudaStreamWaitEvent(a, tail, 0));
    mix2<<<kGrid, kBlock, 0, a>>>(x, y, z, kN, u + 3);
    CKL();
    if (i % 40 == 21) {
      CK(cudaStreamSynchronize(a));  // both records are complete now
      addCode(codes, keep(cudaEventQuery(mid)));
      addCode(codes, keep(cudaEventQuery(tail)));
      const bool external = (captures % 2) == 1;
      const unsigned flags = external ? cudaEventWaitExternal : cudaEventWaitDefault;
      addCode(codes, keep(cudaStreamBeginCapture(c, cudaStreamCaptureModeRelaxed)));
      addCode(codes, keep(cudaStreamWaitEvent(c, mid, flags)));
      mix<<<kGrid, kBlock, 0, c>>>(z, y, kN, u + 4);
      addCode(codes, keep(cudaGetLastError()));
      addCode(codes, keep(cudaStreamWaitEvent(c, tail, flags)));
      mix<<<kGrid, kBlock, 0, c>>>(y, z, kN, u + 5);
      addCode(codes, keep(cudaGetLastError()));
      cudaGraph_t g = nullptr;
      addCode(codes, keep(cudaStreamEndCapture(c, &g)));
      size_t nodes = 0;
      if (g) {
        CK(cudaGraphGetNodes(g, nullptr, &nodes));
        cudaGraphExec_t ge = nullptr;
        addCode(codes, keep(cudaGraphInstantiate(&ge, g, 0)));
        if (ge) {
          CK(cudaGraphLaunch(ge, c));
          CK(cudaStreamSynchronize(c));
          CK(cudaGraphExecDestroy(ge));
        }
        CK(cudaGraphDestroy(g));
      }
      std::printf("capture %d (%s waits) at step %d: graph %s, %zu nodes, codes %016llx\n", captures,
                  external ? "external" : "plain", i, g ? "yes" : "no", nodes, ull(codes.h));
      ++captures;
    }
    if (checkpoint(i, a, "x", x)) print("yz", i, deviceDigest(y, kN * 4) ^ deviceDigest(z, kN * 4));
  }
  CK(cudaDeviceSynchronize());
  print("end", captures, codes.h ^ deviceDigest(x, kN * 4) ^ deviceDigest(y, kN * 4) ^ deviceDigest(z, kN * 4));
}

constexpr Scenario kScenarios[] = {
    {"graph_membership", graphMembership},
    {"launch_identity", launchIdentity},
    {"tex_recreate", texRecreate},
    {"legacy_mesh", legacyMesh},
    {"ring_ranks", ringRanks},
    {"global_capture_helper", globalCaptureHelper},
    {"readback_grid", readbackGrid},
    {"capture_wait_on_replayed", captureWaitOnReplayed},
};

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && !std::strcmp(argv[1], "--probe-devgraph")) return probeDevGraph(argv[2]);
  return runScenarios(argc, argv, kScenarios);
}
