// traps_r23 (helper-written): a twenty-third red-team round of odd but legal CUDA C++
// patterns in the style of traps_r19.cu and traps_r21.cu (trap_common.cuh,
// trap_helpers.cuh, trap_mirror.cuh), aimed at what a tool that holds launches
// back, captures the repeating ones into graphs of its own, patches their
// parameters and hooks the driver's entry points could get wrong: Hopper
// tensor maps by value far into a large parameter list and in global memory,
// parameter values that differ only in bits a value comparison misses, CUDA
// arrays moved by every copy entry point between surface and texture objects
// that are re-created, synchronous and stream-ordered copies and memsets
// through the driver's rarer entry points, a device reset in the middle of
// the run, kernels that read and write pageable host memory (HMM), and
// driver functions looked up in their older ABIs. Each scenario is
// deterministic in eager (integer kernels, every cross-stream access ordered
// by a stream, an event, a stream memory wait, the legacy stream's implicit
// synchronization or a host barrier), prints digests of its buffers and of
// the codes the host saw, and checks its results against a host mirror of its
// kernels (a FAIL line and exit 1 on a mismatch); check_traps.py requires the
// same output under graft. A scenario whose feature this machine lacks prints
// a SKIP line and stops.
//
//   tma_far_param         a kernel taking (out, a 6000-byte table, a
//                         __grid_constant__ CUtensorMap at offset 6016, a
//                         pointer to a CUtensorMap in global memory, int2,
//                         salt) loads two 32x8 tiles with the bulk tensor copy
//                         (cp.async.bulk.tensor, mbarrier), launched twice a
//                         step through <<<>>>, cuLaunchKernel with
//                         kernelParams, cuLaunchKernel with an `extra` buffer
//                         laid out by cuFuncGetParamInfo, and
//                         cudaLaunchKernelEx in rotation. The by-value map is
//                         moved to another tensor by cuTensorMapReplaceAddress
//                         (also between the step's two launches) and encoded
//                         again for another view (pitch, extent) on irregular
//                         steps; the global maps are rewritten by a
//                         stream-ordered copy between the two launches; tile
//                         origins go out of bounds (zero fill); one word of
//                         the table changes on irregular steps. What graft may
//                         get wrong: bytes past 4 KiB and a 64-byte aligned
//                         parameter patched at the wrong place or not at all,
//                         a launch whose map was changed right after the call,
//                         the map copy ordered against the held launches.
//   param_value_edges     one kernel with float, double, __half, char, float4,
//                         __int128, uint16_t, bool, a device function pointer,
//                         a struct holding a host pointer it only compares, and
//                         a salt, launched twice a step (<<<>>> and
//                         cudaLaunchKernel) with values that differ in bits a
//                         value comparison misses: +0.0 and -0.0 (float, double,
//                         half, a float4 lane), NaNs of other payloads, a
//                         negative char, only the high half of the __int128 or
//                         the high byte of the short. The kernel records every
//                         bit. What graft may get wrong: equal by value is not
//                         equal by bytes; a launch matched to the one before it
//                         runs with its values.
//   array_async_order     two 64x64 CUDA arrays and a mipmap level written by
//                         cudaMemcpy2DToArrayAsync, a surface-object kernel,
//                         cudaMemcpy3DAsync (array to mip level), cuMemcpy2DAsync
//                         (array to array) and read by a texture-object kernel
//                         and cudaMemcpy2DFromArrayAsync on a second blocking
//                         stream, with a synchronous cudaMemcpy2DArrayToArray
//                         every 50 steps; on irregular steps the objects are
//                         destroyed and re-created with the arrays' roles
//                         swapped (the driver may hand the same handles back for
//                         the other array). What graft may get wrong: array
//                         copies, which a kernel of its own cannot do, issued
//                         out of order with the held kernels; a graph kept for
//                         handles whose arrays changed.
//   sync_rare_entry_points  kernels on a blocking stream, the legacy stream or
//                         the per-thread stream (phases of 25 steps), then one
//                         synchronous copy or memset through a rarely used entry
//                         point (cuMemcpy2DUnaligned to pageable memory,
//                         cuMemcpy, cuMemcpyPeer, cuMemcpy3DPeer, cuMemcpyDtoD,
//                         cuMemsetD2D16, cuMemsetD8, cuMemcpyDtoA + cuMemcpyAtoH,
//                         cuMemcpyAtoD, cuMemcpyAtoA, cudaMemcpy3D to pageable
//                         memory, cudaMemcpyPeer, cuMemcpyHtoA from pageable
//                         memory scribbled at once), then a kernel reading what
//                         it wrote. The host checks what the copy brought back
//                         at once. What graft may get wrong: an entry point it
//                         does not hook reaches the driver ahead of the held
//                         kernels that the legacy stream orders before it.
//   async_rare_entry_points  the stream-ordered kin on a non-blocking stream,
//                         between held kernels: cuMemcpyAsync, cuMemcpyPeerAsync,
//                         cuMemcpy3DPeerAsync, cuMemsetD2D8Async,
//                         cuMemsetD2D16Async, cuMemsetD16Async, cuMemsetD8Async,
//                         cuMemcpyHtoAAsync into a 1-D array a texture object
//                         reads, cudaMemcpyToSymbolAsync into __constant__ memory
//                         (pinned, and pageable every 5th step), cuMemPrefetchAsync
//                         and cuMemAdvise of managed memory a kernel writes and the
//                         host reads and rewrites at checkpoints; a second stream
//                         reads everything after an event. What graft may get
//                         wrong: such an op passed through ahead of the kernels
//                         it holds on the same stream.
//   device_reset_midrun   cudaDeviceReset every 60 steps (after a synchronize;
//                         on odd phases with streams, events, buffers and mapped
//                         memory left for the reset to destroy), then everything
//                         made again and the same loop run: two streams joined
//                         by events, a kernel with 64 KiB of dynamic shared
//                         memory, __device__ globals that the reset brings back
//                         to their initial values. After each reset the limits,
//                         the kernel's attributes and the code of a 64 KiB
//                         launch made before its allowance is raised again are
//                         printed. What graft may get wrong: graphs, streams and
//                         functions of the destroyed context used again (the
//                         new handles and addresses may equal the old ones).
//   hmm_pageable_order    (a SKIP line without pageable memory access) kernels
//                         read and write malloc'ed host memory directly: one
//                         stream writes it, a second reads it after an event;
//                         the host reads it right after a device-to-pageable
//                         copy returns, after an event synchronize or a stream
//                         synchronize (in turn), then rewrites it; the buffer is
//                         moved to a new allocation on irregular steps;
//                         cudaMemPrefetchAsync and cudaMemAdvise of it. What
//                         graft may get wrong: the only barrier before the host
//                         read is the completion of a copy of another buffer.
//   proc_address_versions  driver functions looked up by cuGetProcAddress in
//                         their older ABIs and used in a loop: cuStreamBeginCapture
//                         (10.0: no mode), cuStreamGetCaptureInfo (10.1, 11.3,
//                         12.3), cuGraphInstantiate (10.0), cuGraphAddKernelNode,
//                         cuGraphKernelNodeGetParams and
//                         cuGraphExecKernelNodeSetParams (the v1 node struct),
//                         cuMemPrefetchAsync and cuMemAdvise (8.0: a device
//                         ordinal), cuStreamGetCtx (9.2), cuStreamWaitValue32 /
//                         cuStreamWriteValue32 (8.0, falling back to 11.7's), and
//                         cuGetProcAddress itself (11.3) to find cuLaunchKernel;
//                         every lookup's code and every call's code printed. What
//                         graft may get wrong: a hook returned for the newest
//                         ABI where the program asked for an older one (other
//                         arguments, other structs), a code the driver would not
//                         give.
//
//   traps_r23 NAME [--iters N]     one scenario (see kScenarios)
//   traps_r23 --list               the scenario names
//
// Linked to libcuda (-lcuda: tensor maps, driver copies, memsets, launches and
// lookups); no device-side launches:
//   nvcc -O2 -std=c++17 -lineinfo -gencode arch=compute_90,code=[sm_90,compute_90]
//        -Xcompiler=-Wall,-Wextra,-Werror -I tests/gpu -o traps_r23 traps_r23.cu -lcuda
#include <cuda_fp16.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "trap_mirror.cuh"

namespace {

// ---------------------------------------------------------------- shared helpers

// FAIL and exit 1 where host memory the device wrote differs from its mirror;
// then the mirror's digest.
void checkHost(const char* what, int at, const uint32_t* got, const std::vector<uint32_t>& want) {
  for (size_t k = 0; k < want.size(); ++k) {
    if (got[k] != want[k]) {
      std::printf("FAIL %s at step %d: word %zu is %x, the host mirror says %x\n", what, at, k, got[k], want[k]);
      std::exit(1);
    }
  }
  print(what, at, hostDigest(want.data(), want.size() * 4));
}

uint8_t* bytesOf(std::vector<uint32_t>& v) { return reinterpret_cast<uint8_t*>(v.data()); }


CUcontext currentContext() {
  CK(cudaFree(nullptr));
  CUcontext c = nullptr;
  CKD(cuCtxGetCurrent(&c));
  return c;
}

// A word-wise stir, w[k] = rotl(w[k], r) ^ hash32(k ^ salt), and its host mirror.
__global__ void stirWords(uint32_t* w, int n, int r, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) w[k] = rotl(w[k], r) ^ hash32(uint32_t(k) ^ salt);
}
void stirWordsHost(std::vector<uint32_t>& w, int r, uint32_t salt) {
  for (size_t k = 0; k < w.size(); ++k) w[k] = rotl(w[k], r) ^ hash32(uint32_t(k) ^ salt);
}

// A pitched 64x64-word buffer (rows `pitch` bytes apart) and its mirror with
// rows 256 bytes apart.
constexpr int kSide = 64;
constexpr size_t kRowBytes = kSide * 4;
struct Pitched {
  uint32_t* d = nullptr;
  size_t pitch = 0;
  std::vector<uint32_t> h;
};
Pitched pitchedBuffer(uint32_t seed) {
  Pitched p;
  CK(cudaMallocPitch(reinterpret_cast<void**>(&p.d), &p.pitch, kRowBytes, kSide));
  p.h = hostPattern(seed, kSide * kSide);
  CK(cudaMemcpy2D(p.d, p.pitch, p.h.data(), kRowBytes, kRowBytes, kSide, cudaMemcpyHostToDevice));
  return p;
}
void checkPitched(const char* what, int at, const Pitched& p) {
  std::vector<uint32_t> got(kSide * kSide);
  CK(cudaMemcpy2D(got.data(), kRowBytes, p.d, p.pitch, kRowBytes, kSide, cudaMemcpyDeviceToHost));
  checkHost(what, at, got.data(), p.h);
}
// Every word of a pitched buffer: w = w * 3 + hash32(index + salt).
__global__ void stirPitched(uint32_t* p, size_t pitchWords, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < kSide * kSide) {
    uint32_t& w = p[size_t(k / kSide) * pitchWords + size_t(k % kSide)];
    w = w * 3u + hash32(uint32_t(k) + salt);
  }
}
void stirPitchedHost(std::vector<uint32_t>& h, uint32_t salt) {
  for (int k = 0; k < kSide * kSide; ++k) h[size_t(k)] = h[size_t(k)] * 3u + hash32(uint32_t(k) + salt);
}

// A 1-D CUDA array of kS words and its mirror.
struct Array1D {
  cudaArray_t a = nullptr;
  std::vector<uint32_t> h;
  CUarray cu() const { return reinterpret_cast<CUarray>(a); }
};
Array1D array1D(uint32_t seed) {
  Array1D r;
  const cudaChannelFormatDesc ch = cudaCreateChannelDesc<uint32_t>();
  CK(cudaMallocArray(&r.a, &ch, kS, 0, 0));
  r.h = hostPattern(seed, kS);
  CKD(cuMemcpyHtoA(r.cu(), 0, r.h.data(), kS * 4));
  return r;
}
void checkArray1D(const char* what, int at, const Array1D& a) {
  std::vector<uint32_t> got(kS);
  CKD(cuMemcpyAtoH(got.data(), a.cu(), 0, kS * 4));
  checkHost(what, at, got.data(), a.h);
}

// Offsets and sizes of a kernel's parameters (cuFuncGetParamInfo), as a
// digest line; the parameter count is where the driver stops answering.
struct ParamLayout {
  std::vector<size_t> offset, size;
  size_t total = 0;
};
ParamLayout paramLayout(const char* what, CUfunction f) {
  ParamLayout L;
  Digest d;
  for (size_t i = 0; i < 64; ++i) {
    size_t off = 0, sz = 0;
    if (cuFuncGetParamInfo(f, i, &off, &sz) != CUDA_SUCCESS) break;
    L.offset.push_back(off);
    L.size.push_back(sz);
    L.total = off + sz;
    d.add(uint64_t(off));
    d.add(uint64_t(sz));
  }
  std::printf("%s %zu parameters, %zu bytes\n", what, L.offset.size(), L.total);
  print(what, 0, d.h);
  return L;
}

template <typename K>
CUfunction functionOf(K kernel) {
  CUfunction f = nullptr;
  CK(cudaGetFuncBySymbol(reinterpret_cast<cudaFunction_t*>(&f), reinterpret_cast<const void*>(kernel)));
  return f;
}

// ---------------------------------------------------------------- tma_far_param

constexpr int kTmaCols = 256, kTmaRows = 128, kTmaWords = kTmaCols * kTmaRows;
constexpr int kBoxW = 32, kBoxH = 8, kBoxWords = kBoxW * kBoxH;  // one word per thread
constexpr int kTmaBlocks = 8, kTmaOut = kTmaBlocks * kBoxWords;
constexpr int kFarWords = 1500;
struct FarTable {
  uint32_t v[kFarWords];  // 6000 bytes by value: the map after it lies past 4 KiB
};
struct TmaView {
  uint64_t cols, rows, pitchBytes;
};
// Over a 128x256-word tensor: all of it; every other row of its first 96;
// a 100x200 corner.
constexpr TmaView kTmaViews[3] = {{256, 128, 1024}, {256, 48, 2048}, {200, 100, 1024}};
constexpr int kTmaXOffsets[4] = {-16, 0, 8, 40};

__device__ __forceinline__ uint32_t sharedAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void tmaTile(uint32_t* dst, const CUtensorMap* map, int x, int y, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(sharedAddr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(sharedAddr(bar))
      : "memory");
}

// Tile A through the by-value map at (origin.x + 32 * block, origin.y), tile
// B through the global map at (32 * block - origin.x, origin.y / 2 + 3 * block).
__global__ void __launch_bounds__(kBoxWords)
    tmaFar(uint32_t* out, FarTable table, const __grid_constant__ CUtensorMap map, const CUtensorMap* gmap,
           int2 origin, uint32_t salt) {
  __shared__ alignas(128) uint32_t tileA[kBoxWords];
  __shared__ alignas(128) uint32_t tileB[kBoxWords];
  __shared__ alignas(8) uint64_t bar;
  const int t = threadIdx.x;
  const uint32_t b = sharedAddr(&bar);
  if (t == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (t == 0) {
    // The global map was written by a copy: acquire it for the tensor-map proxy.
    asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(reinterpret_cast<uint64_t>(gmap))
                 : "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(2 * kBoxWords * 4) : "memory");
    const int bx = int(blockIdx.x);
    tmaTile(tileA, &map, origin.x + bx * kBoxW, origin.y, &bar);
    tmaTile(tileB, gmap, bx * kBoxW - origin.x, origin.y / 2 + 3 * bx, &bar);
  }
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(b)
        : "memory");
  }
  const int k = int(blockIdx.x) * kBoxWords + t;
  out[k] = rotl(out[k], 5) ^ (tileA[t] + 3u * tileB[t] + table.v[(k * 7) % kFarWords] + salt);
}

__global__ void bumpWords(uint32_t* w, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) w[k] = w[k] * 5u + salt + uint32_t(k);
}

struct MapDesc {
  int view;
  int tensor;
};

CUresult encodeTmaMap(CUtensorMap* m, void* base, int view) {
  const TmaView& v = kTmaViews[view];
  const cuuint64_t dims[2] = {v.cols, v.rows};
  const cuuint64_t strides[1] = {v.pitchBytes};
  const cuuint32_t box[2] = {kBoxW, kBoxH};
  const cuuint32_t elementStrides[2] = {1, 1};
  return cuTensorMapEncodeTiled(m, CU_TENSOR_MAP_DATA_TYPE_UINT32, 2, base, dims, strides, box, elementStrides,
                                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

uint32_t tmaElem(const std::vector<uint32_t>* tensors, MapDesc d, int x, int y) {
  const TmaView& v = kTmaViews[d.view];
  if (x < 0 || y < 0 || x >= int(v.cols) || y >= int(v.rows)) return 0;  // out of bounds: zero fill
  return tensors[d.tensor][size_t(y) * (v.pitchBytes / 4) + size_t(x)];
}

void tmaFarHost(std::vector<uint32_t>& out, const std::vector<uint32_t>* tensors, const FarTable& table, MapDesc a,
                MapDesc g, int2 o, uint32_t salt) {
  for (int bx = 0; bx < kTmaBlocks; ++bx) {
    for (int t = 0; t < kBoxWords; ++t) {
      const int r = t / kBoxW, c = t % kBoxW;
      const uint32_t av = tmaElem(tensors, a, o.x + bx * kBoxW + c, o.y + r);
      const uint32_t gv = tmaElem(tensors, g, bx * kBoxW - o.x + c, o.y / 2 + 3 * bx + r);
      const int k = bx * kBoxWords + t;
      out[size_t(k)] = rotl(out[size_t(k)], 5) ^ (av + 3u * gv + table.v[(k * 7) % kFarWords] + salt);
    }
  }
}

struct alignas(64) TmaParamBuffer {
  unsigned char b[8192];
};

// One launch of tmaFar through entry point `form` (0 <<<>>>, 1 cuLaunchKernel
// kernelParams, 2 cuLaunchKernel `extra`, 3 cudaLaunchKernelEx).
void launchTmaFar(int form, CUfunction fn, const ParamLayout& L, TmaParamBuffer& scratch, cudaStream_t s,
                  uint32_t* out, const FarTable& table, const CUtensorMap& map, const CUtensorMap* gmap, int2 origin,
                  uint32_t salt) {
  switch (form) {
    case 0:
      tmaFar<<<kTmaBlocks, kBoxWords, 0, s>>>(out, table, map, gmap, origin, salt);
      CKL();
      break;
    case 1: {
      void* params[] = {&out, const_cast<FarTable*>(&table), const_cast<CUtensorMap*>(&map), &gmap, &origin, &salt};
      CKD(cuLaunchKernel(fn, kTmaBlocks, 1, 1, kBoxWords, 1, 1, 0, cu(s), params, nullptr));
      break;
    }
    case 2: {
      std::memset(scratch.b, 0xa5, sizeof scratch.b);
      const void* fields[6] = {&out, &table, &map, &gmap, &origin, &salt};
      for (int p = 0; p < 6; ++p) std::memcpy(scratch.b + L.offset[size_t(p)], fields[p], L.size[size_t(p)]);
      size_t size = L.total;
      void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, scratch.b, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                       CU_LAUNCH_PARAM_END};
      CKD(cuLaunchKernel(fn, kTmaBlocks, 1, 1, kBoxWords, 1, 1, 0, cu(s), nullptr, extra));
      std::memset(scratch.b, 0x5a, sizeof scratch.b);  // the buffer is the program's again
      break;
    }
    default: {
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(kTmaBlocks);
      cfg.blockDim = dim3(kBoxWords);
      cfg.stream = s;
      CK(cudaLaunchKernelEx(&cfg, tmaFar, out, table, map, gmap, origin, salt));
      break;
    }
  }
}

void tmaFarParam() {
  const int major = deviceAttribute(cudaDevAttrComputeCapabilityMajor);
  print("tensor_maps", 0, major >= 9);
  if (major < 9) {
    std::printf("SKIP tensor maps need compute capability 9.0\n");
    return;
  }
  uint32_t* tensors[3];
  std::vector<uint32_t> hTensors[3];
  for (int t = 0; t < 3; ++t) {
    tensors[t] = deviceBuffer(2301 + uint32_t(t), kTmaWords);
    hTensors[t] = hostPattern(2301 + uint32_t(t), kTmaWords);
  }
  // Staging for the global maps: one pinned map per step, never reused.
  CUtensorMap* staging = nullptr;
  CK(cudaHostAlloc(reinterpret_cast<void**>(&staging), sizeof(CUtensorMap) * size_t(g_iters + 4), 0));
  CUtensorMap* slots = nullptr;
  CK(cudaMalloc(&slots, 4 * sizeof(CUtensorMap)));
  MapDesc slotDesc[4];
  bool ok = true;
  for (int j = 0; j < 4; ++j) {
    slotDesc[j] = {j % 3, 1 + (j & 1)};
    ok = ok && encodeTmaMap(&staging[g_iters + j], tensors[slotDesc[j].tensor], slotDesc[j].view) == CUDA_SUCCESS;
  }
  alignas(64) CUtensorMap mapA;
  MapDesc descA = {0, 0};
  ok = ok && encodeTmaMap(&mapA, tensors[0], 0) == CUDA_SUCCESS;
  print("tensor_map_encode", 0, ok);
  if (!ok) {
    std::printf("SKIP cuTensorMapEncodeTiled refused the maps\n");
    return;
  }
  CK(cudaMemcpy(slots, &staging[g_iters], 4 * sizeof(CUtensorMap), cudaMemcpyHostToDevice));
  const CUfunction fn = functionOf(tmaFar);
  const ParamLayout layout = paramLayout("tma_param_layout", fn);
  if (layout.offset.size() != 6) {
    std::printf("FAIL tmaFar has %zu parameters\n", layout.offset.size());
    std::exit(1);
  }
  auto scratch = std::make_unique<TmaParamBuffer>();
  uint32_t* out = zeroBuffer(kTmaOut);
  std::vector<uint32_t> hOut(kTmaOut, 0u);
  auto table = std::make_unique<FarTable>();
  for (int k = 0; k < kFarWords; ++k) table->v[k] = hash32(uint32_t(k) + 77u);
  cudaStream_t s = nonBlockingStream();
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = uint32_t(i) * 2654435761u;
    bumpWords<<<kTmaWords / kBlock, kBlock, 0, s>>>(tensors[0], kTmaWords, salt);
    CKL();
    for (int k = 0; k < kTmaWords; ++k) hTensors[0][size_t(k)] = hTensors[0][size_t(k)] * 5u + salt + uint32_t(k);
    if (irregular(i, 31, 5)) {
      descA.tensor = (descA.tensor + 1) % 3;
      CKD(cuTensorMapReplaceAddress(&mapA, tensors[descA.tensor]));
    }
    if (irregular(i, 32, 7)) {
      descA.view = (descA.view + 1) % 3;
      CKD(encodeTmaMap(&mapA, tensors[descA.tensor], descA.view));
    }
    if (irregular(i, 35, 3)) table->v[hash32(uint32_t(i)) % kFarWords] = hash32(uint32_t(i) * 3u + 1u);
    const int j = (i / 3) % 4;
    const int2 o1 = {kTmaXOffsets[i % 4], int(hash32(uint32_t(i) + 5u) % 133u) - 4};
    launchTmaFar(i % 4, fn, layout, *scratch, s, out, *table, mapA, slots + j, o1, salt ^ 1u);
    tmaFarHost(hOut, hTensors, *table, descA, slotDesc[j], o1, salt ^ 1u);
    // Right after the call: the launch took the map's bytes then.
    if (irregular(i, 34, 4)) {
      descA.tensor = (descA.tensor + 2) % 3;
      CKD(cuTensorMapReplaceAddress(&mapA, tensors[descA.tensor]));
    }
    if (irregular(i, 33, 6)) {
      const MapDesc nd = {i % 3, (i & 1) ? 2 : 0};
      CKD(encodeTmaMap(&staging[i], tensors[nd.tensor], nd.view));
      CK(cudaMemcpyAsync(slots + j, &staging[i], sizeof(CUtensorMap), cudaMemcpyHostToDevice, s));
      slotDesc[j] = nd;
    }
    const int2 o2 = {kTmaXOffsets[(i + 1) % 4], int(hash32(uint32_t(i) + 9u) % 133u) - 4};
    launchTmaFar((i + 1) % 4, fn, layout, *scratch, s, out, *table, mapA, slots + j, o2, salt ^ 2u);
    tmaFarHost(hOut, hTensors, *table, descA, slotDesc[j], o2, salt ^ 2u);
    if (i % 25 == 24 || i == g_iters - 1) {
      CK(cudaStreamSynchronize(s));
      checkMirror("tma_out", i, out, hOut);
    }
  }
  CK(cudaDeviceSynchronize());
  checkMirror("tma_tensor0", g_iters, tensors[0], hTensors[0]);
  CK(cudaFreeHost(staging));
}

// ---------------------------------------------------------------- param_value_edges

using EdgeFn = uint32_t (*)(uint32_t);
__host__ __device__ uint32_t edgeFnA(uint32_t x) { return hash32(x) ^ 0x1234u; }
__host__ __device__ uint32_t edgeFnB(uint32_t x) { return rotl(x, 11) + 0x9e37u; }
__device__ EdgeFn g_edgeFns[2] = {edgeFnA, edgeFnB};

struct HostTag {
  const void* host;  // a host address, compared with `expect`, never read
  uint32_t flags;
};
constexpr int kEdgeWords = 20;

__host__ __device__ uint32_t edgeSigns(float f, double d) {
  return (std::signbit(f) ? 1u : 0u) | (f != f ? 2u : 0u) | (std::signbit(d) ? 4u : 0u) | (1.0f / f < 0.0f ? 8u : 0u);
}

__global__ void edgeParams(uint32_t* rec, float f, double d, __half h, char c, float4 v, __int128 big, uint16_t s,
                           bool b, EdgeFn fn, HostTag tag, const void* expect, uint32_t salt) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  const auto db = static_cast<unsigned long long>(__double_as_longlong(d));
  const auto ub = static_cast<unsigned __int128>(big);
  const uint32_t w[kEdgeWords] = {__float_as_uint(f),
                                  uint32_t(db),
                                  uint32_t(db >> 32),
                                  __half_as_ushort(h),
                                  uint32_t(static_cast<unsigned char>(c)),
                                  __float_as_uint(v.x),
                                  __float_as_uint(v.y),
                                  __float_as_uint(v.z),
                                  __float_as_uint(v.w),
                                  uint32_t(ub),
                                  uint32_t(ub >> 32),
                                  uint32_t(ub >> 64),
                                  uint32_t(ub >> 96),
                                  s,
                                  b ? 1u : 0u,
                                  fn(salt),
                                  tag.host == expect ? 1u : 0u,
                                  tag.flags,
                                  salt,
                                  edgeSigns(f, d)};
  for (int k = 0; k < kEdgeWords; ++k) rec[k] = w[k];
}

struct EdgeArgs {
  float f;
  double d;
  __half h;
  char c;
  float4 v;
  __int128 big;
  uint16_t s;
  bool b;
  int fnIndex;
  HostTag tag;
  const void* expect;
  uint32_t salt;
};

float floatBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
double doubleBits(uint64_t u) {
  double d;
  std::memcpy(&d, &u, 8);
  return d;
}
__half halfBits(uint16_t u) {
  __half_raw r;
  r.x = u;
  return __half(r);
}
uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

void edgeRecordHost(uint32_t* w, const EdgeArgs& a) {
  uint64_t db;
  std::memcpy(&db, &a.d, 8);
  uint16_t hb;
  std::memcpy(&hb, &a.h, 2);
  const auto ub = static_cast<unsigned __int128>(a.big);
  const uint32_t r[kEdgeWords] = {bitsOf(a.f),
                                  uint32_t(db),
                                  uint32_t(db >> 32),
                                  hb,
                                  uint32_t(static_cast<unsigned char>(a.c)),
                                  bitsOf(a.v.x),
                                  bitsOf(a.v.y),
                                  bitsOf(a.v.z),
                                  bitsOf(a.v.w),
                                  uint32_t(ub),
                                  uint32_t(ub >> 32),
                                  uint32_t(ub >> 64),
                                  uint32_t(ub >> 96),
                                  a.s,
                                  a.b ? 1u : 0u,
                                  a.fnIndex ? edgeFnB(a.salt) : edgeFnA(a.salt),
                                  a.tag.host == a.expect ? 1u : 0u,
                                  a.tag.flags,
                                  a.salt,
                                  edgeSigns(a.f, a.d)};
  std::memcpy(w, r, sizeof r);
}

// The step's arguments for launch r (0 or 1): the two launches differ only in
// a sign, a NaN payload, a half, a char or a high half on irregular steps.
EdgeArgs edgeArgsFor(int i, int r, const int* hostObjects) {
  EdgeArgs a;
  a.f = 0.0f;
  if (irregular(i, 41, 3) && r == 1) a.f = -0.0f;
  if (irregular(i, 42, 5)) a.f = floatBits(r ? 0x7fc00001u : 0x7fc00000u);
  if (i % 11 == 0) a.f = floatBits(r ? 0x80000001u : 0x00000001u);  // denormals of either sign
  a.d = (irregular(i, 43, 4) && r == (i & 1)) ? -0.0 : 0.0;
  if (i % 13 == 5) a.d = doubleBits(r ? 0xfff8000000000001ull : 0x7ff8000000000000ull);
  a.h = halfBits(irregular(i, 44, 3) && r ? 0x8000 : 0x0000);
  if (irregular(i, 45, 7)) a.h = halfBits(r ? 0x7e01 : 0x7e00);
  a.c = irregular(i, 46, 9) && r ? char(-128) : 'x';
  a.v = make_float4(1.0f, 2.0f, 3.0f, irregular(i, 47, 3) && r ? -0.0f : 0.0f);
  const uint64_t hi = (irregular(i, 48, 4) && r) ? 0x8000000000000000ull : uint64_t(i / 50);
  a.big = static_cast<__int128>((static_cast<unsigned __int128>(hi) << 64) | 0x0123456789abcdefull);
  a.s = uint16_t(0x00ff | ((irregular(i, 49, 5) && r) ? 0x0100 : 0));
  a.b = !(irregular(i, 50, 6) && r);
  a.fnIndex = irregular(i, 51, 4) ? 1 : 0;
  a.tag.host = &hostObjects[(i * 7) % 16];
  a.tag.flags = 0x5a5a0000u | uint32_t(i & 0xff);
  a.expect = (irregular(i, 52, 3) && r) ? &hostObjects[(i * 7 + 1) % 16] : a.tag.host;
  a.salt = uint32_t(i) * 2u + 7u;  // the same for both launches
  return a;
}

void paramValueEdges() {
  EdgeFn fns[2] = {};
  CK(cudaMemcpyFromSymbol(fns, g_edgeFns, sizeof fns));
  paramLayout("edge_param_layout", functionOf(edgeParams));
  const int hostObjects[16] = {};
  const size_t words = size_t(g_iters) * 2 * kEdgeWords;
  uint32_t* rec = zeroBuffer(words);
  std::vector<uint32_t> hRec(words, 0u);
  cudaStream_t s = nonBlockingStream();
  for (int i = 0; i < g_iters; ++i) {
    for (int r = 0; r < 2; ++r) {
      EdgeArgs a = edgeArgsFor(i, r, hostObjects);
      uint32_t* slot = rec + (size_t(i) * 2 + size_t(r)) * kEdgeWords;
      EdgeFn fn = fns[a.fnIndex];
      if (r == 0) {
        edgeParams<<<1, 32, 0, s>>>(slot, a.f, a.d, a.h, a.c, a.v, a.big, a.s, a.b, fn, a.tag, a.expect, a.salt);
        CKL();
      } else {
        void* args[] = {&slot, &a.f, &a.d, &a.h, &a.c, &a.v, &a.big, &a.s, &a.b, &fn, &a.tag, &a.expect, &a.salt};
        CK(cudaLaunchKernel(reinterpret_cast<const void*>(edgeParams), dim3(1), dim3(32), args, 0, s));
      }
      edgeRecordHost(&hRec[(size_t(i) * 2 + size_t(r)) * kEdgeWords], a);
    }
    if (at(i)) {
      CK(cudaStreamSynchronize(s));
      checkMirror("edge_records", i, rec, hRec);
    }
  }
}

// ---------------------------------------------------------------- array_async_order

constexpr int kLevel = kSide / 2;  // mip level 1 is 32x32

__global__ void surfStir(cudaSurfaceObject_t s, uint32_t salt) {
  const int x = threadIdx.x, y = blockIdx.x;
  const uint32_t v = surf2Dread<uint32_t>(s, x * 4, y);
  surf2Dwrite(rotl(v, 7) ^ hash32(uint32_t(y * kSide + x) ^ salt), s, x * 4, y);
}
__global__ void texGather(uint32_t* o, cudaTextureObject_t t, cudaSurfaceObject_t level, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= kSide * kSide) return;
  const int x = k % kSide, y = k / kSide;
  const uint32_t a = tex2D<uint32_t>(t, float(x) + 0.5f, float(y) + 0.5f);
  const uint32_t l = surf2Dread<uint32_t>(level, (x / 2) * 4, y / 2);
  o[k] = rotl(o[k], 3) ^ (a + 5u * l + salt);
}

// Host copy of a w x h block of words between row-major images.
void copyBlock(std::vector<uint32_t>& dst, int dstRowWords, int dx, int dy, const std::vector<uint32_t>& src,
               int srcRowWords, int sx, int sy, int w, int h) {
  std::vector<uint32_t> tmp(size_t(w) * size_t(h));
  for (int r = 0; r < h; ++r)
    for (int c = 0; c < w; ++c) tmp[size_t(r * w + c)] = src[size_t((sy + r) * srcRowWords + sx + c)];
  for (int r = 0; r < h; ++r)
    for (int c = 0; c < w; ++c) dst[size_t((dy + r) * dstRowWords + dx + c)] = tmp[size_t(r * w + c)];
}

struct ArrayObjects {
  cudaSurfaceObject_t surfCur = 0;
  cudaTextureObject_t texOther = 0;
  cudaSurfaceObject_t surfLevel = 0;
};
ArrayObjects makeArrayObjects(cudaArray_t cur, cudaArray_t other, cudaArray_t level) {
  ArrayObjects o;
  o.surfCur = surfaceOver(cur);
  o.texOther = pointTexture(other);
  o.surfLevel = surfaceOver(level);
  return o;
}
void destroyArrayObjects(const ArrayObjects& o) {
  CK(cudaDestroySurfaceObject(o.surfCur));
  CK(cudaDestroyTextureObject(o.texOther));
  CK(cudaDestroySurfaceObject(o.surfLevel));
}

void arrayAsyncOrder() {
  const cudaChannelFormatDesc ch = cudaCreateChannelDesc<uint32_t>();
  cudaArray_t arr[2];
  std::vector<uint32_t> hArr[2];
  for (int a = 0; a < 2; ++a) {
    CK(cudaMallocArray(&arr[a], &ch, kSide, kSide, cudaArraySurfaceLoadStore));
    hArr[a] = hostPattern(2330 + uint32_t(a), kSide * kSide);
    CK(cudaMemcpy2DToArray(arr[a], 0, 0, hArr[a].data(), kRowBytes, kRowBytes, kSide, cudaMemcpyHostToDevice));
  }
  cudaMipmappedArray_t mip = nullptr;
  CK(cudaMallocMipmappedArray(&mip, &ch, make_cudaExtent(kSide, kSide, 0), 3, cudaArraySurfaceLoadStore));
  cudaArray_t level = nullptr;
  CK(cudaGetMipmappedArrayLevel(&level, mip, 1));
  std::vector<uint32_t> hLevel = hostPattern(2333, kLevel * kLevel);
  CK(cudaMemcpy2DToArray(level, 0, 0, hLevel.data(), kLevel * 4, kLevel * 4, kLevel, cudaMemcpyHostToDevice));
  Pitched src = pitchedBuffer(2334);
  uint32_t* out = zeroBuffer(kSide * kSide);
  std::vector<uint32_t> hOut(kSide * kSide, 0u);
  uint32_t* snapshot = nullptr;  // the other array read back each step
  CK(cudaHostAlloc(reinterpret_cast<void**>(&snapshot), kSide * kSide * 4, 0));
  cudaStream_t s = blockingStream(), t = blockingStream();
  cudaEvent_t sDone = untimedEvent(), tDone = untimedEvent();
  int cur = 0, other = 1;
  ArrayObjects obj = makeArrayObjects(arr[cur], arr[other], level);
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 2335u);
    if (irregular(i, 61, 8)) {
      // The objects' kernels must be done before they go; then the arrays
      // swap roles, and the new objects may come back with the old handles.
      CK(cudaStreamSynchronize(s));
      CK(cudaStreamSynchronize(t));
      const ArrayObjects old = obj;
      destroyArrayObjects(obj);
      std::swap(cur, other);
      obj = makeArrayObjects(arr[cur], arr[other], level);
      // Whether a handle came back is the driver's affair: stderr only.
      std::fprintf(stderr, "array_async_order step %d: handles reused %d %d %d\n", i, obj.surfCur == old.surfCur,
                   obj.texOther == old.texOther, obj.surfLevel == old.surfLevel);
    }
    stirPitched<<<kSide * kSide / kBlock, kBlock, 0, s>>>(src.d, src.pitch / 4, salt);
    CKL();
    stirPitchedHost(src.h, salt);
    // Device memory into the current array.
    const int w = 8 + (i % 4) * 8, h = 4 + (i % 5) * 6;
    const int x0 = (i * 3) % 20, y0 = (i * 5) % 17, sx = i % 3, sy = (i * 7) % 9;
    CK(cudaMemcpy2DToArrayAsync(arr[cur], size_t(x0) * 4, size_t(y0),
                                reinterpret_cast<const char*>(src.d) + size_t(sy) * src.pitch + size_t(sx) * 4,
                                src.pitch, size_t(w) * 4, size_t(h), cudaMemcpyDeviceToDevice, s));
    copyBlock(hArr[cur], kSide, x0, y0, src.h, kSide, sx, sy, w, h);
    surfStir<<<kSide, kSide, 0, s>>>(obj.surfCur, salt);
    CKL();
    for (int k = 0; k < kSide * kSide; ++k)
      hArr[cur][size_t(k)] = rotl(hArr[cur][size_t(k)], 7) ^ hash32(uint32_t(k) ^ salt);
    // Current array into the mip level (3-D copy between arrays, in elements).
    {
      const int lx = i % 16, ly = (i * 3) % 16;
      cudaMemcpy3DParms p = {};
      p.srcArray = arr[cur];
      p.srcPos = make_cudaPos(size_t(x0 / 2), size_t(y0 / 2), 0);
      p.dstArray = level;
      p.dstPos = make_cudaPos(size_t(lx), size_t(ly), 0);
      p.extent = make_cudaExtent(size_t(w / 2), size_t(h / 2), 1);
      p.kind = cudaMemcpyDeviceToDevice;
      CK(cudaMemcpy3DAsync(&p, s));
      copyBlock(hLevel, kLevel, lx, ly, hArr[cur], kSide, x0 / 2, y0 / 2, w / 2, h / 2);
    }
    // Current array into the other one (driver 2-D copy between arrays).
    {
      const int ax = (i % 5) * 4, ay = i % 6, bx = (i * 7) % 30, by = (i * 11) % 30;
      const int cw = 10 + i % 20, chh = 6 + i % 25;
      CUDA_MEMCPY2D c = {};
      c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
      c.srcArray = reinterpret_cast<CUarray>(arr[cur]);
      c.srcXInBytes = size_t(ax) * 4;
      c.srcY = size_t(ay);
      c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
      c.dstArray = reinterpret_cast<CUarray>(arr[other]);
      c.dstXInBytes = size_t(bx) * 4;
      c.dstY = size_t(by);
      c.WidthInBytes = size_t(cw) * 4;
      c.Height = size_t(chh);
      CKD(cuMemcpy2DAsync(&c, cu(s)));
      copyBlock(hArr[other], kSide, bx, by, hArr[cur], kSide, ax, ay, cw, chh);
    }
    // The second stream reads the other array (texture), the level (surface)
    // and copies the other array back to pinned memory.
    CK(cudaEventRecord(sDone, s));
    CK(cudaStreamWaitEvent(t, sDone, 0));
    texGather<<<kSide * kSide / kBlock, kBlock, 0, t>>>(out, obj.texOther, obj.surfLevel, salt);
    CKL();
    for (int k = 0; k < kSide * kSide; ++k) {
      const int x = k % kSide, y = k / kSide;
      const uint32_t a = hArr[other][size_t(k)], l = hLevel[size_t((y / 2) * kLevel + x / 2)];
      hOut[size_t(k)] = rotl(hOut[size_t(k)], 3) ^ (a + 5u * l + salt);
    }
    CK(cudaMemcpy2DFromArrayAsync(snapshot, kRowBytes, arr[other], 0, 0, kRowBytes, kSide, cudaMemcpyDeviceToHost, t));
    CK(cudaEventRecord(tDone, t));
    CK(cudaStreamWaitEvent(s, tDone, 0));
    if (i % 50 == 49) {
      // Synchronous, on the legacy stream: ordered after both blocking streams.
      CK(cudaMemcpy2DArrayToArray(arr[cur], 4, 2, arr[other], 0, 0, 40 * 4, 30, cudaMemcpyDeviceToDevice));
      copyBlock(hArr[cur], kSide, 1, 2, hArr[other], kSide, 0, 0, 40, 30);
    }
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      checkHost("array_snapshot", i, snapshot, hArr[other]);
      checkMirror("array_gather", i, out, hOut);
    }
  }
  CK(cudaDeviceSynchronize());
  for (int a = 0; a < 2; ++a) {
    std::vector<uint32_t> got(kSide * kSide);
    CK(cudaMemcpy2DFromArray(got.data(), kRowBytes, arr[a], 0, 0, kRowBytes, kSide, cudaMemcpyDeviceToHost));
    checkHost(a ? "array_1" : "array_0", g_iters, got.data(), hArr[a]);
  }
  std::vector<uint32_t> got(kLevel * kLevel);
  CK(cudaMemcpy2DFromArray(got.data(), kLevel * 4, level, 0, 0, kLevel * 4, kLevel, cudaMemcpyDeviceToHost));
  checkHost("array_level", g_iters, got.data(), hLevel);
  destroyArrayObjects(obj);
  CK(cudaFreeHost(snapshot));
}

// ---------------------------------------------------------------- sync_rare_entry_points

__global__ void consumeXP(uint32_t* y, const uint32_t* x, const uint32_t* p, size_t pitchWords, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) y[k] = rotl(y[k], 3) + (x[(k * 5 + 1) % n] ^ p[size_t(k / kSide) * pitchWords + size_t(k % kSide)]) + salt;
}
void consumeXPHost(std::vector<uint32_t>& y, const std::vector<uint32_t>& x, const std::vector<uint32_t>& p,
                   uint32_t salt) {
  const int n = int(y.size());
  for (int k = 0; k < n; ++k) y[size_t(k)] = rotl(y[size_t(k)], 3) + (x[size_t((k * 5 + 1) % n)] ^ p[size_t(k)]) + salt;
}

// Bytes of a host mirror with rows 256 bytes apart.
void setBytes(std::vector<uint32_t>& v, size_t at, uint8_t value, size_t n) { std::memset(bytesOf(v) + at, value, n); }

void checkBytes(const char* what, int at, const uint8_t* got, const uint8_t* want, size_t n) {
  if (std::memcmp(got, want, n) != 0) {
    std::printf("FAIL %s at step %d: %zu bytes differ from the host mirror\n", what, at, n);
    std::exit(1);
  }
}

struct SyncRare {
  uint32_t *x = nullptr, *y = nullptr;
  std::vector<uint32_t> hx, hy;
  Pitched p;
  Array1D a1, a2;
  std::vector<uint32_t> host;  // pageable
  std::vector<uint8_t> hostBytes;
  CUcontext ctx = nullptr;
  int device = 0;
  Digest seen;
};

// One synchronous copy or memset (the legacy stream) through entry point `op`.
void syncRareProbe(SyncRare& st, int op, int i) {
  const int o = (i * 13) % 1000, o2 = (i * 29) % 1000, n = 500 + (i * 7) % 700;
  switch (op) {
    case 0: {  // cuMemcpy2DUnaligned: pitched device to pageable host, odd offsets and pitch
      const int r0 = (i * 7) % 40, c0 = (i * 3) % 30, u = i % 3, h = 3 + i % 9;
      const size_t wBytes = size_t(4 * (5 + i % 20) + i % 3), dstPitch = wBytes + 5;
      st.hostBytes.assign(dstPitch * size_t(h), 0);
      CUDA_MEMCPY2D c = {};
      c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
      c.srcDevice = dptr(st.p.d);
      c.srcPitch = st.p.pitch;
      c.srcXInBytes = size_t(c0 * 4 + u);
      c.srcY = size_t(r0);
      c.dstMemoryType = CU_MEMORYTYPE_HOST;
      c.dstHost = st.hostBytes.data();
      c.dstPitch = dstPitch;
      c.WidthInBytes = wBytes;
      c.Height = size_t(h);
      CKD(cuMemcpy2DUnaligned(&c));
      for (int r = 0; r < h; ++r)
        checkBytes("unaligned_2d", i, st.hostBytes.data() + size_t(r) * dstPitch,
                   bytesOf(st.p.h) + size_t(r0 + r) * kRowBytes + size_t(c0 * 4 + u), wBytes);
      st.seen.add(st.hostBytes.data(), st.hostBytes.size());
      break;
    }
    case 1:  // cuMemcpy (unified addressing) into pageable memory
      st.host.assign(kS, 0u);
      CKD(cuMemcpy(dptr(st.host.data()), dptr(st.x), kS * 4));
      checkHost("unified_copy", i, st.host.data(), st.hx);
      break;
    case 2:
      CKD(cuMemcpyPeer(dptr(st.y + o), st.ctx, dptr(st.x + o2), st.ctx, size_t(n) * 4));
      std::copy(st.hx.begin() + o2, st.hx.begin() + o2 + n, st.hy.begin() + o);
      break;
    case 3: {  // pitched region into Y seen as 64x64
      const int sx = i % 10, sy = i % 20, w = 8 + i % 16, h = 4 + i % 12;
      CUDA_MEMCPY3D_PEER c = {};
      c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
      c.srcDevice = dptr(st.p.d);
      c.srcContext = st.ctx;
      c.srcPitch = st.p.pitch;
      c.srcHeight = kSide;
      c.srcXInBytes = size_t(sx) * 4;
      c.srcY = size_t(sy);
      c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
      c.dstDevice = dptr(st.y);
      c.dstContext = st.ctx;
      c.dstPitch = kRowBytes;
      c.dstHeight = kSide;
      c.WidthInBytes = size_t(w) * 4;
      c.Height = size_t(h);
      c.Depth = 1;
      CKD(cuMemcpy3DPeer(&c));
      copyBlock(st.hy, kSide, 0, 0, st.p.h, kSide, sx, sy, w, h);
      break;
    }
    case 4:
      CKD(cuMemcpyDtoD(dptr(st.y + o), dptr(st.x + o2), size_t(n) * 4));
      std::copy(st.hx.begin() + o2, st.hx.begin() + o2 + n, st.hy.begin() + o);
      break;
    case 5: {  // 16-bit 2-D memset of the pitched buffer
      const int r0 = i % 25, b0 = 2 * (i % 7), w16 = 10 + i % 50, h = 2 + i % 30;
      const uint16_t v = uint16_t(0xbeef ^ i);
      CKD(cuMemsetD2D16(dptr(st.p.d) + size_t(r0) * st.p.pitch + size_t(b0), st.p.pitch, v, size_t(w16), size_t(h)));
      for (int r = 0; r < h; ++r)
        for (int e = 0; e < w16; ++e)
          std::memcpy(bytesOf(st.p.h) + size_t(r0 + r) * kRowBytes + size_t(b0 + 2 * e), &v, 2);
      break;
    }
    case 6: {  // 8-bit memset at an odd byte offset and length
      const size_t b0 = size_t(i % 13), len = size_t(1 + (i * 37) % 3000);
      const uint8_t v = uint8_t(0x3c + i);
      CKD(cuMemsetD8(dptr(st.x) + b0, v, len));
      setBytes(st.hx, b0, v, len);
      break;
    }
    case 7: {  // device into the array, the array back to pageable memory
      const int ao = i % 100, xo = i % 50, len = 200 + (i * 11) % 800;
      CKD(cuMemcpyDtoA(st.a1.cu(), size_t(ao) * 4, dptr(st.x + xo), size_t(len) * 4));
      std::copy(st.hx.begin() + xo, st.hx.begin() + xo + len, st.a1.h.begin() + ao);
      st.host.assign(kS, 0u);
      CKD(cuMemcpyAtoH(st.host.data(), st.a1.cu(), 0, kS * 4));
      checkHost("array1_back", i, st.host.data(), st.a1.h);
      break;
    }
    case 8:
      CKD(cuMemcpyAtoD(dptr(st.y + o), st.a1.cu(), size_t(o2) * 4, size_t(n) * 4));
      std::copy(st.a1.h.begin() + o2, st.a1.h.begin() + o2 + n, st.hy.begin() + o);
      break;
    case 9:
      CKD(cuMemcpyAtoA(st.a2.cu(), size_t(o) * 4, st.a1.cu(), size_t(o2) * 4, size_t(n) * 4));
      std::copy(st.a1.h.begin() + o2, st.a1.h.begin() + o2 + n, st.a2.h.begin() + o);
      st.host.assign(kS, 0u);
      CKD(cuMemcpyAtoH(st.host.data(), st.a2.cu(), 0, kS * 4));
      checkHost("array2_back", i, st.host.data(), st.a2.h);
      break;
    case 10: {  // runtime 3-D copy of the pitched buffer into pageable memory
      st.host.assign(kS, 0u);
      cudaMemcpy3DParms c = {};
      c.srcPtr = make_cudaPitchedPtr(st.p.d, st.p.pitch, kRowBytes, kSide);
      c.dstPtr = make_cudaPitchedPtr(st.host.data(), kRowBytes, kRowBytes, kSide);
      c.extent = make_cudaExtent(kRowBytes, kSide, 1);
      c.kind = cudaMemcpyDeviceToHost;
      CK(cudaMemcpy3D(&c));
      checkHost("pitched_3d_back", i, st.host.data(), st.p.h);
      break;
    }
    case 11:
      CK(cudaMemcpyPeer(st.y + o, st.device, st.x + o2, st.device, size_t(n) * 4));
      std::copy(st.hx.begin() + o2, st.hx.begin() + o2 + n, st.hy.begin() + o);
      break;
    default: {  // pageable host into the array (scribbled at once), the array into Y
      st.host.resize(kS);
      for (int k = 0; k < kS; ++k) st.host[size_t(k)] = hash32(uint32_t(i * kS + k));
      CKD(cuMemcpyHtoA(st.a1.cu(), size_t(o) * 4, st.host.data() + o2, size_t(n) * 4));
      std::copy(st.host.begin() + o2, st.host.begin() + o2 + n, st.a1.h.begin() + o);
      std::fill(st.host.begin(), st.host.end(), 0xdeadbeefu);
      const int yo = (i * 17) % 2000;
      CKD(cuMemcpyAtoD(dptr(st.y + yo), st.a1.cu(), size_t(o) * 4, size_t(n) * 4));
      std::copy(st.a1.h.begin() + o, st.a1.h.begin() + o + n, st.hy.begin() + yo);
      break;
    }
  }
}

void syncRareEntryPoints() {
  SyncRare st;
  st.ctx = currentContext();
  st.device = currentDevice();
  st.x = deviceBuffer(2341, kS);
  st.y = deviceBuffer(2342, kS);
  st.hx = hostPattern(2341);
  st.hy = hostPattern(2342);
  st.p = pitchedBuffer(2343);
  st.a1 = array1D(2344);
  st.a2 = array1D(2345);
  cudaStream_t blocking = blockingStream();
  const cudaStream_t producers[3] = {blocking, cudaStreamLegacy, cudaStreamPerThread};
  for (int i = 0; i < g_iters; ++i) {
    const cudaStream_t prod = producers[(i / 25) % 3];
    const uint32_t salt = hash32(uint32_t(i) + 2346u);
    stirWords<<<kSGrid, kBlock, 0, prod>>>(st.x, kS, 5, salt);
    CKL();
    stirWordsHost(st.hx, 5, salt);
    stirPitched<<<kSide * kSide / kBlock, kBlock, 0, prod>>>(st.p.d, st.p.pitch / 4, salt ^ 7u);
    CKL();
    stirPitchedHost(st.p.h, salt ^ 7u);
    syncRareProbe(st, i % 13, i);
    consumeXP<<<kSGrid, kBlock, 0, prod>>>(st.y, st.x, st.p.d, st.p.pitch / 4, kS, salt);
    CKL();
    consumeXPHost(st.hy, st.hx, st.p.h, salt);
    if (i % 25 == 24 || i == g_iters - 1) {
      CK(cudaDeviceSynchronize());  // and the producer stream changes
      checkMirror("sync_x", i, st.x, st.hx);
      checkMirror("sync_y", i, st.y, st.hy);
      checkPitched("sync_p", i, st.p);
      print("sync_seen", i, st.seen.h);
    }
  }
  checkArray1D("sync_array1", g_iters, st.a1);
  checkArray1D("sync_array2", g_iters, st.a2);
}

// ---------------------------------------------------------------- async_rare_entry_points

__constant__ uint32_t c_table[256];

__global__ void gatherAll(uint32_t* o, const uint32_t* y, const uint32_t* p, size_t pitchWords, const uint32_t* m,
                          cudaTextureObject_t arr, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= n) return;
  const uint32_t pv = p[size_t(k / kSide) * pitchWords + size_t(k % kSide)];
  const uint32_t av = tex1D<uint32_t>(arr, float(k) + 0.5f);
  o[k] = rotl(o[k], 1) ^ (y[k] + 3u * pv + m[(k * 3) % n] + 5u * av + c_table[k & 255] + salt);
}
void gatherAllHost(std::vector<uint32_t>& o, const std::vector<uint32_t>& y, const std::vector<uint32_t>& p,
                   const std::vector<uint32_t>& m, const std::vector<uint32_t>& arr, const uint32_t* table,
                   uint32_t salt) {
  const int n = int(o.size());
  for (int k = 0; k < n; ++k)
    o[size_t(k)] = rotl(o[size_t(k)], 1) ^ (y[size_t(k)] + 3u * p[size_t(k)] + m[size_t((k * 3) % n)] +
                                            5u * arr[size_t(k)] + table[k & 255] + salt);
}

__global__ void managedStir(uint32_t* m, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) m[k] = rotl(m[k], 9) + hash32(uint32_t(k) ^ salt);
}

CUmemLocation deviceLocation(int device) {
  CUmemLocation l = {};
  l.type = CU_MEM_LOCATION_TYPE_DEVICE;
  l.id = device;
  return l;
}
CUmemLocation hostLocation() {
  CUmemLocation l = {};
  l.type = CU_MEM_LOCATION_TYPE_HOST;
  l.id = 0;
  return l;
}

void asyncRareEntryPoints() {
  const CUcontext ctx = currentContext();
  const int device = currentDevice();
  if (!deviceAttribute(cudaDevAttrConcurrentManagedAccess)) {
    print("concurrent_managed", 0, 0);
    std::printf("SKIP no concurrent managed access\n");
    return;
  }
  uint32_t *x = deviceBuffer(2351, kS), *y = deviceBuffer(2352, kS), *o = zeroBuffer(kS);
  std::vector<uint32_t> hx = hostPattern(2351), hy = hostPattern(2352), ho(kS, 0u);
  Pitched p = pitchedBuffer(2353);
  Array1D arr = array1D(2354);
  const cudaTextureObject_t arrTex = pointTexture(arr.a);
  uint32_t* m = nullptr;
  CK(cudaMallocManaged(&m, kS * 4));
  std::vector<uint32_t> hm = hostPattern(2355);
  std::memcpy(m, hm.data(), kS * 4);
  std::vector<uint32_t> hTable(256, 0u);
  CK(cudaMemcpyToSymbol(c_table, hTable.data(), 256 * 4));
  // Pinned sources, one region per step (never rewritten), and a readback.
  uint32_t *ring = nullptr, *readback = nullptr;
  CK(cudaHostAlloc(reinterpret_cast<void**>(&ring), size_t(g_iters) * 512 * 4, 0));
  CK(cudaHostAlloc(reinterpret_cast<void**>(&readback), kS * 4, 0));
  std::vector<uint32_t> pageable(256);
  cudaStream_t s = nonBlockingStream(), t = nonBlockingStream();
  cudaEvent_t sDone = untimedEvent(), tDone = untimedEvent();
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 2356u);
    uint32_t* region = ring + size_t(i) * 512;
    mix<<<kSGrid, kBlock, 0, s>>>(x, y, kS, salt);
    CKL();
    mixHost(hx, hy, kS, salt);
    const int o1 = (i * 13) % 1500, o2 = (i * 31) % 1500, n1 = 300 + (i * 7) % 900;
    CKD(cuMemcpyAsync(dptr(y + o1), dptr(x + o2), size_t(n1) * 4, cu(s)));
    std::copy(hx.begin() + o2, hx.begin() + o2 + n1, hy.begin() + o1);
    const int o3 = 2000 + (i * 5) % 1000, o4 = (i * 3) % 2000, n2 = 100 + (i * 11) % 900;
    CKD(cuMemcpyPeerAsync(dptr(y + o3), ctx, dptr(x + o4), ctx, size_t(n2) * 4, cu(s)));
    std::copy(hx.begin() + o4, hx.begin() + o4 + n2, hy.begin() + o3);
    {  // X seen as 64x64 (rows 256 bytes) into the pitched buffer
      const int sx = i % 9, sy = (i * 3) % 20, dx = (i * 5) % 12, dy = i % 17, w = 6 + i % 40, h = 5 + i % 30;
      CUDA_MEMCPY3D_PEER c = {};
      c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
      c.srcDevice = dptr(x);
      c.srcContext = ctx;
      c.srcPitch = kRowBytes;
      c.srcHeight = kSide;
      c.srcXInBytes = size_t(sx) * 4;
      c.srcY = size_t(sy);
      c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
      c.dstDevice = dptr(p.d);
      c.dstContext = ctx;
      c.dstPitch = p.pitch;
      c.dstHeight = kSide;
      c.dstXInBytes = size_t(dx) * 4;
      c.dstY = size_t(dy);
      c.WidthInBytes = size_t(w) * 4;
      c.Height = size_t(h);
      c.Depth = 1;
      CKD(cuMemcpy3DPeerAsync(&c, cu(s)));
      copyBlock(p.h, kSide, dx, dy, hx, kSide, sx, sy, w, h);
    }
    {  // 8- and 16-bit 2-D memsets of the pitched buffer
      const int r0 = i % 30, b0 = i % 11, wb = 1 + (i * 7) % 200, h = 1 + i % 20;
      const uint8_t v8 = uint8_t(0x11 * (i % 15));
      CKD(cuMemsetD2D8Async(dptr(p.d) + size_t(r0) * p.pitch + size_t(b0), p.pitch, v8, size_t(wb), size_t(h), cu(s)));
      for (int r = 0; r < h; ++r) std::memset(bytesOf(p.h) + size_t(r0 + r) * kRowBytes + size_t(b0), v8, size_t(wb));
      const int r1 = (i * 3) % 40, e0 = i % 9, w16 = 1 + (i * 5) % 100, h1 = 1 + i % 24;
      const uint16_t v16 = uint16_t(0xa000 + i);
      CKD(cuMemsetD2D16Async(dptr(p.d) + size_t(r1) * p.pitch + size_t(e0) * 2, p.pitch, v16, size_t(w16),
                             size_t(h1), cu(s)));
      for (int r = 0; r < h1; ++r)
        for (int e = 0; e < w16; ++e)
          std::memcpy(bytesOf(p.h) + size_t(r1 + r) * kRowBytes + size_t(e0 + e) * 2, &v16, 2);
    }
    {  // 16- and 8-bit linear memsets at odd offsets
      const size_t e0 = size_t(i % 9), n16 = size_t(1 + (i * 13) % 1000);
      const uint16_t v16 = uint16_t(0x5000 + i);
      CKD(cuMemsetD16Async(dptr(y) + 2 * e0, v16, n16, cu(s)));
      for (size_t e = 0; e < n16; ++e) std::memcpy(bytesOf(hy) + 2 * (e0 + e), &v16, 2);
      const size_t b0 = size_t(1 + i % 7), n8 = size_t(1 + (i * 29) % 2000);
      const uint8_t v8 = uint8_t(0x80 + i);
      CKD(cuMemsetD8Async(dptr(x) + b0, v8, n8, cu(s)));
      setBytes(hx, b0, v8, n8);
    }
    {  // pinned memory into the 1-D array
      const int ao = (i * 37) % (kS - 256);
      for (int k = 0; k < 256; ++k) region[k] = hash32(uint32_t(i) * 977u + uint32_t(k));
      CKD(cuMemcpyHtoAAsync(arr.cu(), size_t(ao) * 4, region, 256 * 4, cu(s)));
      std::copy(region, region + 256, arr.h.begin() + ao);
    }
    if (i % 5 == 0) {  // pageable into constant memory, rewritten only once its copy completed
      CK(cudaStreamSynchronize(s));
      for (int k = 0; k < 256; ++k) pageable[size_t(k)] = hash32(uint32_t(i) * 31u + uint32_t(k));
      CK(cudaMemcpyToSymbolAsync(c_table, pageable.data(), 256 * 4, 0, cudaMemcpyHostToDevice, s));
      hTable = pageable;
    } else {  // pinned into part of it, at an offset
      const int off = (i * 19) % 192, len = 1 + (i * 23) % 64;
      for (int k = 0; k < len; ++k) region[256 + k] = hash32(uint32_t(i) * 7u + uint32_t(k) + 1u);
      CK(cudaMemcpyToSymbolAsync(c_table, region + 256, size_t(len) * 4, size_t(off) * 4, cudaMemcpyHostToDevice, s));
      std::copy(region + 256, region + 256 + len, hTable.begin() + off);
    }
    // Managed memory: prefetched to the device, advised, written.
    CKD(cuMemPrefetchAsync(dptr(m), kS * 4, deviceLocation(device), 0, cu(s)));
    if (i % 7 == 0)
      CKD(cuMemAdvise(dptr(m), kS * 4, (i / 7) % 2 ? CU_MEM_ADVISE_UNSET_READ_MOSTLY : CU_MEM_ADVISE_SET_READ_MOSTLY,
                      deviceLocation(device)));
    managedStir<<<kSGrid, kBlock, 0, s>>>(m, kS, salt);
    CKL();
    for (int k = 0; k < kS; ++k) hm[size_t(k)] = rotl(hm[size_t(k)], 9) + hash32(uint32_t(k) ^ salt);
    CK(cudaEventRecord(sDone, s));
    CK(cudaStreamWaitEvent(t, sDone, 0));
    gatherAll<<<kSGrid, kBlock, 0, t>>>(o, y, p.d, p.pitch / 4, m, arrTex, kS, salt);
    CKL();
    gatherAllHost(ho, hy, p.h, hm, arr.h, hTable.data(), salt);
    CK(cudaEventRecord(tDone, t));
    CK(cudaStreamWaitEvent(s, tDone, 0));
    if (i % 25 == 24 || i == g_iters - 1) {
      CKD(cuMemPrefetchAsync(dptr(m), kS * 4, hostLocation(), 0, cu(s)));
      CKD(cuMemcpyAtoHAsync(readback, arr.cu(), 0, kS * 4, cu(s)));
      CK(cudaDeviceSynchronize());
      checkHost("async_managed", i, m, hm);
      checkHost("async_array", i, readback, arr.h);
      checkMirror("async_x", i, x, hx);
      checkMirror("async_y", i, y, hy);
      checkPitched("async_p", i, p);
      checkMirror("async_out", i, o, ho);
      // The device is idle: the host rewrites managed memory.
      for (int k = 0; k < kS; ++k) m[k] ^= uint32_t(k) * uint32_t(i);
      for (int k = 0; k < kS; ++k) hm[size_t(k)] ^= uint32_t(k) * uint32_t(i);
    }
  }
  CK(cudaDestroyTextureObject(arrTex));
  CK(cudaFreeHost(ring));
  CK(cudaFreeHost(readback));
  CK(cudaFree(m));
}

// ---------------------------------------------------------------- device_reset_midrun

constexpr int kResetPhase = 60;
constexpr int kBigSmemWords = 16384;  // 64 KiB of dynamic shared memory
__device__ uint32_t g_resetCount = 1000u;
__device__ uint32_t g_resetSeed = 0x5eedu;

__global__ void resetCountStep(uint32_t* log, uint32_t salt) {
  g_resetSeed = g_resetSeed * 3u + salt;
  g_resetCount += 1u;
  log[0] = g_resetCount;
  log[1] = g_resetSeed;
}
__global__ void bigSmemFold(uint32_t* y, const uint32_t* x, int n, uint32_t salt) {
  extern __shared__ uint32_t sm[];
  for (int j = threadIdx.x; j < kBigSmemWords; j += blockDim.x) sm[j] = x[(int(blockIdx.x) * 131 + j) % n] ^ salt;
  __syncthreads();
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) y[k] = rotl(y[k], 2) + sm[(k * 17) % kBigSmemWords] + sm[kBigSmemWords - 1 - int(threadIdx.x)];
}
void bigSmemFoldHost(std::vector<uint32_t>& y, const std::vector<uint32_t>& x, uint32_t salt) {
  const int n = int(y.size());
  std::vector<uint32_t> sm(kBigSmemWords);
  for (int b = 0; b < n / kBlock; ++b) {
    for (int j = 0; j < kBigSmemWords; ++j) sm[size_t(j)] = x[size_t((b * 131 + j) % n)] ^ salt;
    for (int t = 0; t < kBlock; ++t) {
      const int k = b * kBlock + t;
      y[size_t(k)] = rotl(y[size_t(k)], 2) + sm[size_t((k * 17) % kBigSmemWords)] + sm[size_t(kBigSmemWords - 1 - t)];
    }
  }
}
__global__ void mappedStamp(uint32_t* m, uint32_t step) { m[threadIdx.x] = hash32(step * 64u + threadIdx.x); }

struct ResetPhase {
  cudaStream_t s = nullptr, b = nullptr;
  cudaEvent_t sDone = nullptr, bDone = nullptr;
  uint32_t *x = nullptr, *y = nullptr, *log = nullptr;
  Mapped stamp;
  std::vector<uint32_t> hx, hy, hLog;
  uint32_t count = 1000u, seed = 0x5eedu;
};

// Everything a phase uses, made in the (new) primary context, with the state a
// reset leaves printed first.
ResetPhase beginResetPhase(int phase, int i) {
  size_t stack = 0, heap = 0;
  CK(cudaDeviceGetLimit(&stack, cudaLimitStackSize));
  CK(cudaDeviceGetLimit(&heap, cudaLimitMallocHeapSize));
  cudaFuncAttributes fa;
  CK(cudaFuncGetAttributes(&fa, bigSmemFold));
  std::printf("reset_phase %d at %d: stack %zu heap %zu max_dynamic_smem %d\n", phase, i, stack, heap,
              fa.maxDynamicSharedSizeBytes);
  ResetPhase r;
  r.s = nonBlockingStream();
  r.b = blockingStream();
  r.sDone = untimedEvent();
  r.bDone = untimedEvent();
  const uint32_t seed = 2360u + uint32_t(phase) * 2u;
  r.x = deviceBuffer(seed, kS);
  r.y = deviceBuffer(seed + 1, kS);
  r.hx = hostPattern(seed);
  r.hy = hostPattern(seed + 1);
  r.log = zeroBuffer(2 * kResetPhase);
  r.hLog.assign(2 * kResetPhase, 0u);
  r.stamp = mappedBuffer(64, 0);
  // A 64 KiB launch before the kernel's allowance is raised again: whatever
  // the runtime kept across the reset, its code says.
  bigSmemFold<<<kSGrid, kBlock, kBigSmemWords * 4, r.b>>>(r.y, r.x, kS, 0x77u);
  const cudaError_t early = cudaGetLastError();
  std::printf("reset_phase %d: early 64 KiB launch %s\n", phase, cudaGetErrorName(early));
  if (early == cudaSuccess) bigSmemFoldHost(r.hy, r.hx, 0x77u);
  CK(cudaFuncSetAttribute(bigSmemFold, cudaFuncAttributeMaxDynamicSharedMemorySize, kBigSmemWords * 4));
  CK(cudaDeviceSetLimit(cudaLimitStackSize, size_t(2048 + 512 * phase)));
  CK(cudaDeviceSynchronize());
  return r;
}

void checkResetPhase(ResetPhase& r, int i) {
  CK(cudaStreamSynchronize(r.s));
  checkMirror("reset_x", i, r.x, r.hx);
  checkMirror("reset_y", i, r.y, r.hy);
  checkMirror("reset_log", i, r.log, r.hLog);
  uint32_t count = 0, seed = 0;
  CK(cudaMemcpyFromSymbol(&count, g_resetCount, 4));
  CK(cudaMemcpyFromSymbol(&seed, g_resetSeed, 4));
  if (count != r.count || seed != r.seed) {
    std::printf("FAIL reset globals at step %d: count %u seed %x, the host mirror says %u %x\n", i, count, seed,
                r.count, r.seed);
    std::exit(1);
  }
  std::vector<uint32_t> want(64);
  for (uint32_t t = 0; t < 64; ++t) want[t] = hash32(uint32_t(i) * 64u + t);
  checkHost("reset_stamp", i, r.stamp.host, want);
}

void deviceResetMidrun() {
  ResetPhase r;
  int phase = -1;
  for (int i = 0; i < g_iters; ++i) {
    if (i % kResetPhase == 0) {
      if (i > 0) {
        CK(cudaDeviceSynchronize());
        if (phase % 2 == 0) {  // even phases clean up; odd ones leave it to the reset
          CK(cudaStreamDestroy(r.s));
          CK(cudaStreamDestroy(r.b));
          CK(cudaEventDestroy(r.sDone));
          CK(cudaEventDestroy(r.bDone));
          CK(cudaFree(r.x));
          CK(cudaFree(r.y));
          CK(cudaFree(r.log));
          CK(cudaFreeHost(r.stamp.host));
        }
        CK(cudaDeviceReset());
      }
      ++phase;
      r = beginResetPhase(phase, i);
    }
    const uint32_t salt = hash32(uint32_t(i) + 2361u);
    const int slot = i % kResetPhase;
    resetCountStep<<<1, 1, 0, r.s>>>(r.log + 2 * slot, salt);
    CKL();
    r.seed = r.seed * 3u + salt;
    r.count += 1u;
    r.hLog[size_t(2 * slot)] = r.count;
    r.hLog[size_t(2 * slot + 1)] = r.seed;
    mix<<<kSGrid, kBlock, 0, r.s>>>(r.x, r.y, kS, salt);
    CKL();
    mixHost(r.hx, r.hy, kS, salt);
    CK(cudaEventRecord(r.sDone, r.s));
    CK(cudaStreamWaitEvent(r.b, r.sDone, 0));
    bigSmemFold<<<kSGrid, kBlock, kBigSmemWords * 4, r.b>>>(r.y, r.x, kS, salt ^ 3u);
    CKL();
    bigSmemFoldHost(r.hy, r.hx, salt ^ 3u);
    CK(cudaEventRecord(r.bDone, r.b));
    CK(cudaStreamWaitEvent(r.s, r.bDone, 0));
    mappedStamp<<<1, 64, 0, r.s>>>(r.stamp.dev, uint32_t(i));
    CKL();
    if (i % 20 == 19 || slot == kResetPhase - 1 || i == g_iters - 1) checkResetPhase(r, i);
  }
}

// ---------------------------------------------------------------- hmm_pageable_order

__global__ void hmmStir(uint32_t* p, const uint32_t* d, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) p[k] = rotl(p[k], 3) ^ (d[(k * 7 + 1) % n] + salt);
}
__global__ void hmmFold(uint32_t* d, const uint32_t* p, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) d[k] = rotl(d[k], 5) + (p[(k * 11 + 3) % n] ^ salt);
}

void hmmPageableOrder() {
  const bool pageable = deviceAttribute(cudaDevAttrPageableMemoryAccess) != 0;
  print("pageable_access", 0, pageable);
  if (!pageable) {
    std::printf("SKIP no pageable memory access (HMM/ATS)\n");
    return;
  }
  const int device = currentDevice();
  auto hostBuffer = std::make_unique<uint32_t[]>(kS);
  std::vector<uint32_t> hp = hostPattern(2371);
  std::copy(hp.begin(), hp.end(), hostBuffer.get());
  uint32_t *d = deviceBuffer(2372, kS), *d2 = deviceBuffer(2373, kS);
  std::vector<uint32_t> hd = hostPattern(2372), hd2 = hostPattern(2373), q(kS);
  cudaStream_t s = nonBlockingStream(), t = nonBlockingStream();
  cudaEvent_t sDone = untimedEvent(), tDone = untimedEvent();
  Digest codes;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 2374u);
    uint32_t* P = hostBuffer.get();
    if (i % 25 == 0) {
      cudaMemLocation loc = {};
      loc.type = (i / 25) % 2 ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
      loc.id = (i / 25) % 2 ? 0 : device;
      codes.add(uint64_t(keep(cudaMemAdvise(P, kS * 4, cudaMemAdviseSetPreferredLocation, loc))));
    }
    if (i % 4 == 0) {
      cudaMemLocation loc = {};
      loc.type = cudaMemLocationTypeDevice;
      loc.id = device;
      codes.add(uint64_t(keep(cudaMemPrefetchAsync(P, kS * 4, loc, 0, s))));
    }
    hmmStir<<<kSGrid, kBlock, 0, s>>>(P, d, kS, salt);
    CKL();
    for (int k = 0; k < kS; ++k) hp[size_t(k)] = rotl(hp[size_t(k)], 3) ^ (hd[size_t((k * 7 + 1) % kS)] + salt);
    CK(cudaEventRecord(sDone, s));
    CK(cudaStreamWaitEvent(t, sDone, 0));
    hmmFold<<<kSGrid, kBlock, 0, t>>>(d2, P, kS, salt);
    CKL();
    for (int k = 0; k < kS; ++k) hd2[size_t(k)] = rotl(hd2[size_t(k)], 5) + (hp[size_t((k * 11 + 3) % kS)] ^ salt);
    hmmFold<<<kSGrid, kBlock, 0, t>>>(d, d2, kS, salt ^ 9u);
    CKL();
    for (int k = 0; k < kS; ++k)
      hd[size_t(k)] = rotl(hd[size_t(k)], 5) + (hd2[size_t((k * 11 + 3) % kS)] ^ (salt ^ 9u));
    // The host's only barrier before it reads P: in turn the completion of a
    // device-to-pageable copy of another buffer, an event, the stream.
    switch (i % 3) {
      case 0:
        CK(cudaMemcpyAsync(q.data(), d2, kS * 4, cudaMemcpyDeviceToHost, t));
        checkHost("hmm_copy", i, q.data(), hd2);
        break;
      case 1:
        CK(cudaEventRecord(tDone, t));
        CK(cudaEventSynchronize(tDone));
        break;
      default: {
        cudaMemLocation host = {};
        host.type = cudaMemLocationTypeHost;
        codes.add(uint64_t(keep(cudaMemPrefetchAsync(P, kS * 4, host, 0, t))));
        CK(cudaStreamSynchronize(t));
        break;
      }
    }
    if (i % 10 == 9) checkHost("hmm_pageable", i, P, hp);
    for (int k = 0; k < kS; ++k) {  // every kernel that touches P is done
      P[k] ^= hash32(uint32_t(i) ^ uint32_t(k) * 3u);
      hp[size_t(k)] ^= hash32(uint32_t(i) ^ uint32_t(k) * 3u);
    }
    if (irregular(i, 71, 6)) {  // moved to a new allocation, the old one freed
      auto moved = std::make_unique<uint32_t[]>(kS);
      std::copy(P, P + kS, moved.get());
      hostBuffer = std::move(moved);
    }
    CK(cudaEventRecord(tDone, t));
    CK(cudaStreamWaitEvent(s, tDone, 0));
    if (i % 50 == 49 || i == g_iters - 1) {
      CK(cudaStreamSynchronize(s));
      checkMirror("hmm_d", i, d, hd);
      checkMirror("hmm_d2", i, d2, hd2);
      print("hmm_codes", i, codes.h);
    }
  }
  CK(cudaDeviceSynchronize());
}

// ---------------------------------------------------------------- proc_address_versions

using BeginCaptureV1 = CUresult(CUDAAPI*)(CUstream);
using InstantiateV1 = CUresult(CUDAAPI*)(CUgraphExec*, CUgraph, CUgraphNode*, char*, size_t);

__global__ void addSalt(uint32_t* x, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) x[k] = x[k] * 3u + salt + uint32_t(k);
}
void addSaltHost(std::vector<uint32_t>& x, uint32_t salt) {
  for (size_t k = 0; k < x.size(); ++k) x[k] = x[k] * 3u + salt + uint32_t(k);
}

// cuGetProcAddress for one name in the ABI of `version`; the code, what the
// driver says of the symbol and whether a function came back are printed.
template <typename Fn>
Fn lookupVersion(const char* name, int version) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  const CUresult r = cuGetProcAddress(name, &fn, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &q);
  std::printf("lookup %s %d: code %d, symbol %d, found %d\n", name, version, int(r), int(q), fn != nullptr);
  return r == CUDA_SUCCESS ? reinterpret_cast<Fn>(fn) : nullptr;
}

struct OldAbi {
  BeginCaptureV1 beginCapture = nullptr;
  PFN_cuStreamGetCaptureInfo_v10010 captureInfo1 = nullptr;
  PFN_cuStreamGetCaptureInfo_v11030 captureInfo2 = nullptr;
  PFN_cuStreamGetCaptureInfo_v12030 captureInfo3 = nullptr;
  InstantiateV1 instantiate1 = nullptr, instantiate2 = nullptr;
  PFN_cuGraphAddKernelNode_v10000 addKernelNode = nullptr;
  PFN_cuGraphExecKernelNodeSetParams_v10010 execSetParams = nullptr;
  PFN_cuGraphKernelNodeGetParams_v10000 getParams = nullptr;
  PFN_cuMemPrefetchAsync_v8000 prefetch = nullptr;
  PFN_cuMemAdvise_v8000 advise = nullptr;
  PFN_cuStreamGetCtx_v9020 streamCtx = nullptr;
  PFN_cuStreamWaitValue32_v8000 wait1 = nullptr;
  PFN_cuStreamWriteValue32_v8000 write1 = nullptr;
  PFN_cuStreamWaitValue32_v11070 wait2 = nullptr;
  PFN_cuStreamWriteValue32_v11070 write2 = nullptr;
  PFN_cuLaunchKernel_v4000 launch = nullptr;
};

OldAbi lookupOldAbi() {
  OldAbi a;
  a.beginCapture = lookupVersion<BeginCaptureV1>("cuStreamBeginCapture", 10000);
  a.captureInfo1 = lookupVersion<PFN_cuStreamGetCaptureInfo_v10010>("cuStreamGetCaptureInfo", 10010);
  a.captureInfo2 = lookupVersion<PFN_cuStreamGetCaptureInfo_v11030>("cuStreamGetCaptureInfo", 11030);
  a.captureInfo3 = lookupVersion<PFN_cuStreamGetCaptureInfo_v12030>("cuStreamGetCaptureInfo", 12030);
  a.instantiate1 = lookupVersion<InstantiateV1>("cuGraphInstantiate", 10000);
  a.instantiate2 = lookupVersion<InstantiateV1>("cuGraphInstantiate", 11000);
  a.addKernelNode = lookupVersion<PFN_cuGraphAddKernelNode_v10000>("cuGraphAddKernelNode", 10000);
  a.execSetParams = lookupVersion<PFN_cuGraphExecKernelNodeSetParams_v10010>("cuGraphExecKernelNodeSetParams", 10010);
  a.getParams = lookupVersion<PFN_cuGraphKernelNodeGetParams_v10000>("cuGraphKernelNodeGetParams", 10000);
  a.prefetch = lookupVersion<PFN_cuMemPrefetchAsync_v8000>("cuMemPrefetchAsync", 8000);
  a.advise = lookupVersion<PFN_cuMemAdvise_v8000>("cuMemAdvise", 8000);
  a.streamCtx = lookupVersion<PFN_cuStreamGetCtx_v9020>("cuStreamGetCtx", 9020);
  a.wait1 = lookupVersion<PFN_cuStreamWaitValue32_v8000>("cuStreamWaitValue32", 8000);
  a.write1 = lookupVersion<PFN_cuStreamWriteValue32_v8000>("cuStreamWriteValue32", 8000);
  a.wait2 = lookupVersion<PFN_cuStreamWaitValue32_v11070>("cuStreamWaitValue32", 11070);
  a.write2 = lookupVersion<PFN_cuStreamWriteValue32_v11070>("cuStreamWriteValue32", 11070);
  // cuGetProcAddress itself in its 11.3 ABI (no query result), asked for
  // cuLaunchKernel in its 4.0 ABI.
  const auto getProc1 = lookupVersion<PFN_cuGetProcAddress_v11030>("cuGetProcAddress", 11030);
  if (getProc1) {
    void* fn = nullptr;
    const CUresult r = getProc1("cuLaunchKernel", &fn, 4000, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    std::printf("lookup cuLaunchKernel 4000 through cuGetProcAddress 11030: code %d, found %d\n", int(r),
                fn != nullptr);
    if (r == CUDA_SUCCESS) a.launch = reinterpret_cast<PFN_cuLaunchKernel_v4000>(fn);
  }
  return a;
}

// The program's one-node graph, built and instantiated through the old ABIs
// where the driver has them (the current ones otherwise, as the line says).
struct OldGraph {
  CUgraph graph = nullptr;
  CUgraphNode node = nullptr;
  CUgraphExec exec = nullptr;
};
OldGraph buildOldGraph(const OldAbi& a, CUfunction fn, void** params) {
  OldGraph g;
  CKD(cuGraphCreate(&g.graph, 0));
  CUDA_KERNEL_NODE_PARAMS_v1 p = {};
  p.func = fn;
  p.gridDimX = kSGrid;
  p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = kBlock;
  p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = params;
  CUresult added = CUDA_ERROR_NOT_FOUND;
  if (a.addKernelNode) added = a.addKernelNode(&g.node, g.graph, nullptr, 0, &p);
  if (added != CUDA_SUCCESS) {
    CUDA_KERNEL_NODE_PARAMS p2 = {};
    p2.func = fn;
    p2.gridDimX = kSGrid;
    p2.gridDimY = p2.gridDimZ = 1;
    p2.blockDimX = kBlock;
    p2.blockDimY = p2.blockDimZ = 1;
    p2.kernelParams = params;
    CKD(cuGraphAddKernelNode(&g.node, g.graph, nullptr, 0, &p2));
  }
  char log[256] = {};
  CUgraphNode errorNode = nullptr;
  CUresult inst = CUDA_ERROR_NOT_FOUND;
  if (a.instantiate2) inst = a.instantiate2(&g.exec, g.graph, &errorNode, log, sizeof log);
  if (inst != CUDA_SUCCESS) CKD(cuGraphInstantiateWithFlags(&g.exec, g.graph, 0));
  std::printf("old_graph: add node %d, instantiate %d\n", int(added), int(inst));
  return g;
}

void procAddressVersions() {
  const CUcontext ctx = currentContext();
  const int device = currentDevice();
  const OldAbi a = lookupOldAbi();
  uint32_t *x = deviceBuffer(2381, kS), *y = deviceBuffer(2382, kS), *flag = zeroBuffer(1);
  std::vector<uint32_t> hx = hostPattern(2381), hy = hostPattern(2382);
  uint32_t* m = nullptr;
  CK(cudaMallocManaged(&m, kS * 4));
  std::vector<uint32_t> hm = hostPattern(2383);
  std::memcpy(m, hm.data(), kS * 4);
  const CUfunction addFn = functionOf(addSalt);
  int n = kS;
  uint32_t nodeSalt = 0x1000u;
  void* nodeParams[] = {&x, &n, &nodeSalt};
  const OldGraph g = buildOldGraph(a, addFn, nodeParams);
  cudaStream_t s = nonBlockingStream(), t = nonBlockingStream();
  cudaEvent_t sDone = untimedEvent(), tDone = untimedEvent();
  Digest codes;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 2384u);
    mix<<<kSGrid, kBlock, 0, s>>>(x, y, kS, salt);
    CKL();
    mixHost(hx, hy, kS, salt);
    // The program's graph, its node's salt set through the v1 struct.
    {
      uint32_t stepSalt = salt ^ 0x3cu;
      void* params[] = {&x, &n, &stepSalt};
      CUDA_KERNEL_NODE_PARAMS_v1 p = {};
      p.func = addFn;
      p.gridDimX = kSGrid;
      p.gridDimY = p.gridDimZ = 1;
      p.blockDimX = kBlock;
      p.blockDimY = p.blockDimZ = 1;
      p.kernelParams = params;
      CUresult set = CUDA_ERROR_NOT_FOUND;
      if (a.execSetParams) set = a.execSetParams(g.exec, g.node, &p);
      codes.add(uint64_t(set));
      if (set != CUDA_SUCCESS) {
        CUDA_KERNEL_NODE_PARAMS p2 = {};
        p2.func = addFn;
        p2.gridDimX = kSGrid;
        p2.gridDimY = p2.gridDimZ = 1;
        p2.blockDimX = kBlock;
        p2.blockDimY = p2.blockDimZ = 1;
        p2.kernelParams = params;
        CKD(cuGraphExecKernelNodeSetParams(g.exec, g.node, &p2));
      }
      CKD(cuGraphLaunch(g.exec, cu(s)));
      addSaltHost(hx, stepSalt);
    }
    if (a.captureInfo1) {
      CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
      cuuint64_t id = 0;
      codes.add(uint64_t(a.captureInfo1(cu(s), &status, &id)));
      codes.add(uint64_t(status));
    }
    if (a.streamCtx) {
      CUcontext c = nullptr;
      codes.add(uint64_t(a.streamCtx(cu(s), &c)));
      codes.add(uint64_t(c == ctx));
    }
    // Managed memory through the 8.0 ABI (a device ordinal).
    if (a.prefetch) codes.add(uint64_t(a.prefetch(dptr(m), kS * 4, device, cu(s))));
    if (a.advise && i % 25 == 0)
      codes.add(uint64_t(a.advise(dptr(m), kS * 4, CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
                                  (i / 25) % 2 ? CU_DEVICE_CPU : device)));
    addSalt<<<kSGrid, kBlock, 0, s>>>(m, kS, salt);
    CKL();
    addSaltHost(hm, salt);
    // The 4.0 cuLaunchKernel from the 11.3 cuGetProcAddress.
    if (a.launch) {
      uint32_t launchSalt = salt ^ 0x5au;
      void* params[] = {&x, &n, &launchSalt};
      codes.add(uint64_t(a.launch(addFn, kSGrid, 1, 1, kBlock, 1, 1, 0, cu(s), params, nullptr)));
      addSaltHost(hx, launchSalt);
    }
    CK(cudaEventRecord(sDone, s));
    CK(cudaStreamWaitEvent(t, sDone, 0));
    // Every 10th step a capture begun through the 10.0 ABI (no mode: global).
    if (i % 10 == 9 && a.beginCapture) {
      const CUresult begun = a.beginCapture(cu(t));
      codes.add(uint64_t(begun));
      if (begun == CUDA_SUCCESS) {
        const uint32_t capSalt = salt ^ 0x99u;
        addSalt<<<kSGrid, kBlock, 0, t>>>(y, kS, capSalt);
        CKL();
        CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
        cuuint64_t id = 0;
        CUgraph capGraph = nullptr;
        const CUgraphNode* deps = nullptr;
        const CUgraphEdgeData* edges = nullptr;
        size_t numDeps = 0;
        if (a.captureInfo1) {
          codes.add(uint64_t(a.captureInfo1(cu(t), &status, &id)));
          codes.add(uint64_t(status) | uint64_t(id != 0) << 8);
        }
        if (a.captureInfo2) {
          codes.add(uint64_t(a.captureInfo2(cu(t), &status, &id, &capGraph, &deps, &numDeps)));
          codes.add(uint64_t(status) | uint64_t(numDeps) << 8 | uint64_t(capGraph != nullptr) << 16);
        }
        if (a.captureInfo3) {
          codes.add(uint64_t(a.captureInfo3(cu(t), &status, &id, &capGraph, &deps, &edges, &numDeps)));
          codes.add(uint64_t(status) | uint64_t(numDeps) << 8);
        }
        CUgraph captured = nullptr;
        CKD(cuStreamEndCapture(cu(t), &captured));
        CUgraphExec exec = nullptr;
        char log[256] = {};
        CUgraphNode errorNode = nullptr;
        CUresult inst = CUDA_ERROR_NOT_FOUND;
        if (a.instantiate1) inst = a.instantiate1(&exec, captured, &errorNode, log, sizeof log);
        codes.add(uint64_t(inst));
        if (inst != CUDA_SUCCESS) CKD(cuGraphInstantiateWithFlags(&exec, captured, 0));
        CKD(cuGraphLaunch(exec, cu(t)));
        addSaltHost(hy, capSalt);
        CKD(cuGraphExecDestroy(exec));
        CKD(cuGraphDestroy(captured));
      }
    }
    addSalt<<<kSGrid, kBlock, 0, t>>>(y, kS, salt ^ 0x11u);
    CKL();
    addSaltHost(hy, salt ^ 0x11u);
    // t tells s through a stream memory write, s waits for it (the 8.0 ABI,
    // else 11.7's, else an event).
    const cuuint32_t value = cuuint32_t(i + 1);
    CUresult wrote = CUDA_ERROR_NOT_FOUND;
    if (a.write1) wrote = a.write1(cu(t), dptr(flag), value, CU_STREAM_WRITE_VALUE_DEFAULT);
    codes.add(uint64_t(wrote));
    if (wrote != CUDA_SUCCESS && a.write2) wrote = a.write2(cu(t), dptr(flag), value, CU_STREAM_WRITE_VALUE_DEFAULT);
    CUresult waited = CUDA_ERROR_NOT_FOUND;
    if (wrote == CUDA_SUCCESS) {
      waited = a.wait1 ? a.wait1(cu(s), dptr(flag), value, CU_STREAM_WAIT_VALUE_GEQ) : CUDA_ERROR_NOT_FOUND;
      codes.add(uint64_t(waited));
      if (waited != CUDA_SUCCESS && a.wait2) waited = a.wait2(cu(s), dptr(flag), value, CU_STREAM_WAIT_VALUE_GEQ);
    }
    if (waited != CUDA_SUCCESS) {
      CK(cudaEventRecord(tDone, t));
      CK(cudaStreamWaitEvent(s, tDone, 0));
    }
    codes.add(uint64_t(waited));
    mix<<<kSGrid, kBlock, 0, s>>>(x, y, kS, salt ^ 0x55u);
    CKL();
    mixHost(hx, hy, kS, salt ^ 0x55u);
    // s must also be behind t's last read of y before the next step's writes.
    CK(cudaEventRecord(tDone, t));
    CK(cudaStreamWaitEvent(s, tDone, 0));
    if (i % 50 == 49 && a.getParams) {
      CUDA_KERNEL_NODE_PARAMS_v1 p = {};
      const CUresult got = a.getParams(g.node, &p);
      codes.add(uint64_t(got));
      if (got == CUDA_SUCCESS)
        codes.add(uint64_t(p.gridDimX) | uint64_t(p.blockDimX) << 20 | uint64_t(p.func == addFn) << 40 |
                  uint64_t(*static_cast<uint32_t*>(p.kernelParams[2])) << 41);
    }
    if (i % 25 == 24 || i == g_iters - 1) {
      if (a.prefetch) codes.add(uint64_t(a.prefetch(dptr(m), kS * 4, CU_DEVICE_CPU, cu(s))));
      CK(cudaDeviceSynchronize());
      checkHost("old_abi_managed", i, m, hm);
      checkMirror("old_abi_x", i, x, hx);
      checkMirror("old_abi_y", i, y, hy);
      print("old_abi_codes", i, codes.h);
    }
  }
  CKD(cuGraphExecDestroy(g.exec));
  CKD(cuGraphDestroy(g.graph));
  CK(cudaFree(m));
}

const Scenario kScenarios[] = {
    {"tma_far_param", tmaFarParam},
    {"param_value_edges", paramValueEdges},
    {"array_async_order", arrayAsyncOrder},
    {"sync_rare_entry_points", syncRareEntryPoints},
    {"async_rare_entry_points", asyncRareEntryPoints},
    {"device_reset_midrun", deviceResetMidrun},
    {"hmm_pageable_order", hmmPageableOrder},
    {"proc_address_versions", procAddressVersions},
};

}  // namespace

int main(int argc, char** argv) { return runScenarios(argc, argv, kScenarios); }
