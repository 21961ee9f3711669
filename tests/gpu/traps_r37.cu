// traps_r37 (helper-written): a thirty-seventh red-team round of odd but legal
// CUDA C++ patterns in the style of traps_r35.cu and traps_r33.cu
// (trap_common.cuh, trap_helpers.cuh, trap_mirror.cuh), aimed at what a tool
// that holds stream-ordered ops back, replays the repeating ones as graphs of
// its own (device copies and memsets as its own copy and memset kernels),
// patches argument values, leaves the ops that change every step eager between
// its graphs (holes), builds runs that recur but never repeat in a row
// (stretches), defers stream-ordered frees and issues the ops it cannot graph
// eagerly at their position could get wrong, with CUDA features no earlier
// round used: memory pools located on the HOST and stream-ordered MANAGED
// allocations (CUDA 13); LAYERED and CUBEMAP arrays moved by 3-D copies at
// layers and faces that change every step; the program's own graph whose
// device-updatable kernel nodes a plain kernel rewrites from the device
// (cudaGraphKernelNodeSetParam, ...SetEnabled, ...SetGridDim,
// ...UpdatesApply: PyTorch's dynamic-graph updater); a recursive kernel under
// a stack limit raised and lowered between epochs (cudaLimitStackSize); copies
// and memsets that end exactly at the edge of a virtual-memory mapping with no
// page mapped beyond; launch attributes no round used (preferred cluster
// dimension, memory synchronization domain map, NVLink-centric scheduling);
// plus holes on a side stream that changes every step and a stretch with four
// kinds of eager op inside it. Each scenario is deterministic in eager (integer
// kernels, every cross-stream access ordered by a stream, an event, the legacy
// stream's implicit synchronization or a host wait), prints digests of its
// buffers and checks them against a host mirror of its kernels (a MISMATCH
// line and exit 1 on a difference); check_traps.py requires the same output
// under graft. No line depends on an address or on timing (what may depend on
// timing goes to stderr). A scenario whose feature this machine lacks prints a
// SKIP line (the same eagerly and under graft) and stops.
//
//   host_pool_blocks      three pools side by side: a pool LOCATED ON THE HOST
//                         (cudaMemLocationTypeHost, else HostNuma; the device
//                         granted access with cudaMemPoolSetAccess), the
//                         device's current pool (cudaMallocAsync), and the
//                         device's default MANAGED pool where the driver has
//                         one. Every step on
//                         stream A: a host-pool block (its size moving among
//                         three) filled by a kernel through its device
//                         address, memset at an odd byte offset, copied
//                         (cudaMemcpyDefault) into a fresh device-pool block and
//                         a fresh managed block that kernels fold into an
//                         accumulator, and device words copied back into it;
//                         stream B (after an event) reads the host block with a
//                         kernel, copies a window of it into a long-lived
//                         host-pool ring the host reads DIRECTLY two steps
//                         later after cudaEventSynchronize, and frees all three
//                         blocks (A's next step allocates after B's event);
//                         every 10th step a 0-byte host-pool allocation and its
//                         free (codes digested). What graft may get wrong: a
//                         copy or memset of host-pool memory (host memory that
//                         carries a pool handle) taken for device memory, a
//                         deferred free of it run too early or dropped, the
//                         event the host waits on completing before the held
//                         copy into the ring ran, a 0-byte block's free
//                         answered differently from the driver.
//   layered_cubemap_copies  a 2-D LAYERED array (6 layers), a second one (5
//                         layers) and a CUBEMAP array (6 faces), all surface
//                         capable; surface objects made every step (destroyed
//                         two steps later after an event synchronize). Every
//                         step: a kernel rewrites one layer through a surface;
//                         cudaMemcpy3DAsync moves a window of it into another
//                         layer of the second array (array to array, 1 or 2
//                         layers); a second stream (after an event) copies 2
//                         layers into slices of pitched linear memory and a
//                         kernel reads them; back on the first stream (after an
//                         event) a window of the linear memory goes into a cube
//                         face, a kernel reads two faces through a surface and
//                         writes a third, and a window of a face goes into a
//                         layer of the first array (cubemap to layered). Layers,
//                         faces, rows and columns move every step. What graft
//                         may get wrong: array copies (eager at their
//                         position) issued before the held surface kernels they
//                         follow on their own or the other stream, or held
//                         kernels after them hoisted before them; a kernel
//                         node replayed with the surface handle of another step.
//   hole_stream_rotation  a ~135-op step on a non-blocking main stream M with
//                         a fixed side stream F (fork and join by events) and
//                         a second fork whose branch (a wait, a kernel, a
//                         record) runs on a stream that is never the one of the
//                         step before (three non-blocking streams; in the
//                         second half a blocking stream, the legacy stream and
//                         cudaStreamPerThread), plus a memset on M whose size
//                         changes every step: four places that differ in every
//                         instance (holes, which graft leaves eager between its
//                         graphs). What graft may get wrong: a hole's wait bound
//                         to a record of the graph before it that graft has not
//                         re-recorded yet, M's wait on the hole's record (in the
//                         next graph) not honoured at that graph's launch, a
//                         hole issued on the stream of the instance the graphs
//                         were built from.
//   device_node_updates   the program's own graph of two device-updatable
//                         kernel nodes (captured with
//                         cudaLaunchAttributeDeviceUpdatableKernelNode) and a
//                         plain "updater" kernel that, from words a held kernel
//                         computed on the device, rewrites the nodes' salt and
//                         log-slot parameters, grid size and (first node)
//                         enabled state, by cudaGraphKernelNodeSetParam /
//                         SetGridDim / SetEnabled one by one, by one
//                         cudaGraphKernelNodeUpdatesApply batch, or mixed; the
//                         updater runs on the graph's stream or on another one
//                         joined by events, and the graph is launched on its
//                         stream or a third one; each node logs its grid size.
//                         A SKIP line where the driver refuses device-side
//                         updates from a kernel outside the graph. What graft
//                         may get wrong: the program's graph launched before
//                         the held updater (or the held kernel its words come
//                         from), the updater run inside graft's own graph where
//                         the driver answers it otherwise (the codes are
//                         checked), held work after the launch hoisted before it.
//   stack_limit_epochs    a recursive kernel (a ~220-byte frame per level, the
//                         depth per thread read from device memory that a held
//                         kernel writes from a level word) under a stack limit
//                         the program sets between epochs of 14 to 37 steps:
//                         1 KiB with depths up to 1, 8 KiB with depths up to 24
//                         (cudaDeviceSetLimit(cudaLimitStackSize), read back and
//                         printed), the level changed by a 4-byte memset; the
//                         step's launches are byte for byte the same in every
//                         epoch. What graft may get wrong: a graph built in a
//                         shallow epoch, whose kernel node keeps the 1 KiB stack
//                         it was made under, replayed after the limit was raised
//                         (the deep recursion overflows: a fault or wrong words).
//   copy_edge_guard       one 2 MiB device mapping (cuMemCreate/cuMemMap) in
//                         the middle of a reserved range of three, nothing
//                         mapped before or after it; every step 20 copies of
//                         fixed sizes (1 to 4099 bytes; cudaMemcpyAsync and
//                         cuMemcpyDtoDAsync in turn) whose source or
//                         destination ENDS exactly at the mapping's last byte
//                         or STARTS at its first, the other side in a plain
//                         buffer at an offset that moves every step through
//                         all 16 alignments (tail to head too), and memsets of
//                         1-, 2- and 4-byte elements and a 2-D memset whose last
//                         row ends at the mapping's end; kernels stir both
//                         between. What graft may get wrong: its copy and memset
//                         kernels (which read aligned words around a misaligned
//                         source, and store 16 bytes at a time) touching a byte
//                         past the mapping (a fault, where the driver's copy
//                         stays inside), or a head or tail byte lost.
//   unseen_launch_attrs   one cluster-aware kernel launched four times a step
//                         with launch attributes no earlier round used: a
//                         cluster dimension (1, 2 or 4) with a PREFERRED cluster
//                         dimension of twice it (on and off), a memory
//                         synchronization domain MAP and domain, NVLink-centric
//                         scheduling and a shared-memory carveout, each on a
//                         schedule of its own, through cudaLaunchKernelEx,
//                         cudaLaunchKernelExC and cuLaunchKernelEx; the last
//                         launch has no cluster. Each block logs the cluster
//                         size and rank it ran in; a launch must see exactly
//                         its regular cluster size, or the preferred one where
//                         that was asked for (MISMATCH otherwise); the codes of
//                         the calls are digested. What graft may get wrong: a
//                         graph node made from a launch with one attribute list
//                         replayed for a launch with another (a cluster the
//                         launch never asked for), an attribute graft does not
//                         know dropped or refused where the driver takes it.
//   stretch_with_boundaries  a ~14-op stretch on two streams, the same every
//                         step, with four kinds of op graft leaves eager inside
//                         it (a device 2-D copy, a host function that copies
//                         zero-copy words another stream's kernel wrote, a
//                         stream memory write that a later kernel reads, a copy
//                         into pinned memory), each between held kernels,
//                         followed by an eval pass on a third stream whose
//                         number of kernels, grids and memset size a host RNG
//                         draws every step: the stretch recurs every step but
//                         the step never repeats. What graft may get wrong: a
//                         stretch built at its third sighting and cut around
//                         the eager ops issued with them out of place (the host
//                         function before the other stream's kernel it waits
//                         for, the flag's write after the kernel that reads it),
//                         the eval's wait bound to another stretch's record.
//
//   traps_r37 NAME [--iters N]     one scenario (see kScenarios)
//   traps_r37 --list               the scenario names
//
// Linked to libcuda (-lcuda: driver copies, memsets, launches, virtual memory,
// stream memory writes, parameter layouts); no relocatable device code (the
// device-side graph updates need none):
//   nvcc -O2 -std=c++17 -lineinfo -gencode arch=compute_90,code=[sm_90,compute_90]
//        -Xcompiler=-Wall,-Wextra,-Werror -o traps_r37 traps_r37.cu -lcuda
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "trap_words.cuh"

namespace {

// ---------------------------------------------------------------- shared helpers


// A word each index k gets from salt alone (no earlier contents read: a fresh
// pool block holds whatever its last user left).
__host__ __device__ inline uint32_t freshWord(uint32_t salt, int k) {
  return hash32(salt ^ (uint32_t(k) * 0x9e3779b9u));
}
__global__ void freshK(uint32_t* w, int n, uint32_t salt) {
  const int k = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (k < n) w[k] = freshWord(salt, k);
}
void freshHost(uint32_t* w, int n, uint32_t salt) {
  for (int k = 0; k < n; ++k) w[k] = freshWord(salt, k);
}

// Bytes [off, off + len) of a mirror set to `value`, as cudaMemsetAsync does.
void memsetHost(std::vector<uint32_t>& mirror, size_t off, int value, size_t len) {
  std::memset(reinterpret_cast<uint8_t*>(mirror.data()) + off, value & 0xff, len);
}

// ================================================================ host_pool_blocks

constexpr int kRingSlots = 4;    // the host-read ring: step i's window in slot i % 4
constexpr int kRingWords = 64;   // words per slot
constexpr int kHostPad[3] = {0, 4096, 256};  // extra bytes per step: block sizes move

// What a tool could get wrong: pool blocks that are host memory (a pool
// located on the host), device memory and managed memory, allocated and freed
// in stream order on two streams, copied into one another with the unified
// kind, memset and read by kernels; the host reads host-pool memory directly
// right after waiting on an event.
void hostPoolBlocks() {
  const char* name = "host_pool_blocks";
  const int dev = currentDevice();
  // The pool on the host: any host location, else the device's host NUMA node.
  cudaMemPool_t hostPool = nullptr;
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeHost;
  props.location.id = 0;
  const char* where = "host";
  const cudaError_t made = keep(cudaMemPoolCreate(&hostPool, &props));
  if (made != cudaSuccess) {
    const int numa = deviceAttribute(cudaDevAttrHostNumaId);
    props.location.type = cudaMemLocationTypeHostNuma;
    props.location.id = std::max(0, numa);
    where = "host NUMA node";
    const cudaError_t numaMade = keep(cudaMemPoolCreate(&hostPool, &props));
    if (numaMade != cudaSuccess) {
      std::printf("%s: SKIP no pool on the host (codes %d, %d)\n", name, int(made), int(numaMade));
      return;
    }
  }
  cudaMemAccessDesc access = {};
  access.location.type = cudaMemLocationTypeDevice;
  access.location.id = dev;
  access.flags = cudaMemAccessFlagsProtReadWrite;
  const cudaError_t granted = keep(cudaMemPoolSetAccess(hostPool, &access, 1));
  if (granted != cudaSuccess) {
    std::printf("%s: SKIP the device may not access the %s pool (code %d)\n", name, where, int(granted));
    CK(cudaMemPoolDestroy(hostPool));
    return;
  }
  std::printf("%s: a pool on the %s, the device granted read-write access\n", name, where);
  // The device's managed pool (CUDA 13), where the driver has one.
  cudaMemPool_t managedPool = nullptr;
  {
    cudaMemLocation loc = {};
    loc.type = cudaMemLocationTypeDevice;
    loc.id = dev;
    cudaError_t r = keep(cudaMemGetDefaultMemPool(&managedPool, &loc, cudaMemAllocationTypeManaged));
    if (r != cudaSuccess) {
      loc.type = cudaMemLocationTypeNone;
      loc.id = 0;
      r = keep(cudaMemGetDefaultMemPool(&managedPool, &loc, cudaMemAllocationTypeManaged));
    }
    if (r != cudaSuccess) managedPool = nullptr;
    std::printf("%s: managed pool %s (code %d)\n", name, managedPool ? "found" : "none", int(r));
  }
  cudaStream_t A = nonBlockingStream(), B = nonBlockingStream();
  cudaEvent_t eA = untimedEvent(), eB[kRingSlots];
  for (auto& e : eB) e = untimedEvent();
  Buf acc(37101), acc2(37102);
  preload(freshK);
  preload(mix);
  // The long-lived ring in host-pool memory the host reads.
  uint32_t* ring = nullptr;
  CK(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&ring), size_t(kRingSlots) * kRingWords * 4, hostPool, A));
  freshK<<<1, kRingSlots * kRingWords, 0, A>>>(ring, kRingSlots * kRingWords, 0x37100u);
  CKL();
  // The probes (eager everywhere, a synchronize after each): a memset of a
  // host-pool block, and a managed block from the managed pool.
  bool memsetTaken = false, managedTaken = false;
  {
    uint32_t* probe = nullptr;
    CK(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&probe), 4096, hostPool, A));
    const cudaError_t set = keep(cudaMemsetAsync(probe, 0x5a, 4096, A));
    const cudaError_t done = keep(cudaStreamSynchronize(A));
    memsetTaken = set == cudaSuccess && done == cudaSuccess;
    std::printf("%s: a memset of host-pool memory: codes %d %d\n", name, int(set), int(done));
    CK(cudaFreeAsync(probe, A));
    if (managedPool) {
      uint32_t* m = nullptr;
      const cudaError_t got = keep(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&m), 4096, managedPool, A));
      const cudaError_t sync = keep(cudaStreamSynchronize(A));
      managedTaken = got == cudaSuccess && sync == cudaSuccess && m;
      std::printf("%s: a managed-pool block: codes %d %d\n", name, int(got), int(sync));
      if (got == cudaSuccess && m) CK(cudaFreeAsync(m, A));
    }
  }
  CK(cudaStreamSynchronize(A));
  std::vector<uint32_t> ringH(size_t(kRingSlots) * kRingWords);
  freshHost(ringH.data(), kRingSlots * kRingWords, 0x37100u);
  expectWords("hpb_ring_initial", -1, ring, ringH.data(), ringH.size());
  std::vector<std::vector<uint32_t>> ringWant;  // per slot, what the host must read there
  for (int k = 0; k < kRingSlots; ++k)
    ringWant.emplace_back(ringH.begin() + k * kRingWords, ringH.begin() + (k + 1) * kRingWords);
  std::vector<uint32_t> hostH(kW), devH(kW);
  Digest zeroCodes;
  int hostChecks = 0, zeroAllocs = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 37110u);
    // A waits for B's frees of the step before (so the pools may reuse them).
    if (i > 0) CK(cudaStreamWaitEvent(A, eB[(i - 1) % kRingSlots], 0));
    uint32_t *hostBlock = nullptr, *devBlock = nullptr, *managedBlock = nullptr;
    const size_t hostBytes = size_t(kW) * 4 + size_t(kHostPad[i % 3]);
    CK(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&hostBlock), hostBytes, hostPool, A));
    freshK<<<kWGrid, kBlock, 0, A>>>(hostBlock, kW, salt);
    CKL();
    freshHost(hostH.data(), kW, salt);
    if (memsetTaken) {  // an odd byte offset and length
      const size_t off = 1 + size_t(hash32(salt ^ 1u) % 1000u), len = 3 + size_t(hash32(salt ^ 2u) % 500u);
      const int value = int(hash32(salt ^ 3u) & 0xffu);
      CK(cudaMemsetAsync(reinterpret_cast<uint8_t*>(hostBlock) + off, value, len, A));
      memsetHost(hostH, off, value, len);
    }
    CK(cudaMallocAsync(reinterpret_cast<void**>(&devBlock), size_t(kW) * 4 + size_t(kHostPad[(i + 1) % 3]), A));
    CK(cudaMemcpyAsync(devBlock, hostBlock, size_t(kW) * 4, cudaMemcpyDefault, A));
    devH = hostH;
    mixRaw(A, acc.d, acc.h, devBlock, devH, salt ^ 4u);
    if (managedTaken) {
      CK(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&managedBlock), size_t(kW) * 4, managedPool, A));
      CK(cudaMemcpyAsync(managedBlock, devBlock, size_t(kW) * 4, cudaMemcpyDefault, A));
      mixRaw(A, acc.d, acc.h, managedBlock, devH, salt ^ 5u);
    }
    // Device words back into the host block.
    const int back = int(hash32(salt ^ 6u) % uint32_t(kW - 256));
    CK(cudaMemcpyAsync(hostBlock + back, acc.d + 512, 256 * 4, cudaMemcpyDefault, A));
    std::copy(acc.h.begin() + 512, acc.h.begin() + 768, hostH.begin() + back);
    CK(cudaEventRecord(eA, A));
    // B: reads the host block, copies a window into the ring, frees the blocks.
    CK(cudaStreamWaitEvent(B, eA, 0));
    mixRaw(B, acc2.d, acc2.h, hostBlock, hostH, salt ^ 7u);
    const int slot = i % kRingSlots, window = int(hash32(salt ^ 8u) % uint32_t(kW - kRingWords));
    CK(cudaMemcpyAsync(ring + slot * kRingWords, hostBlock + window, kRingWords * 4, cudaMemcpyDefault, B));
    std::copy(hostH.begin() + window, hostH.begin() + window + kRingWords, ringWant[size_t(slot)].begin());
    CK(cudaFreeAsync(hostBlock, B));
    CK(cudaFreeAsync(devBlock, B));
    if (managedBlock) CK(cudaFreeAsync(managedBlock, B));
    CK(cudaEventRecord(eB[slot], B));
    if (i % 10 == 9) {  // a 0-byte host-pool block and its free
      void* z = reinterpret_cast<void*>(uintptr_t(1));
      const cudaError_t got = keep(cudaMallocFromPoolAsync(&z, 0, hostPool, A));
      addCode(zeroCodes, int(got));
      zeroCodes.add(uint64_t(z == nullptr));
      if (got == cudaSuccess) addCode(zeroCodes, int(keep(cudaFreeAsync(z, A))));
      ++zeroAllocs;
    }
    // The host reads the ring slot of two steps back, directly.
    if (i >= 2) {
      const int old = (i - 2) % kRingSlots;
      CK(cudaEventSynchronize(eB[old]));
      expectWords("hpb_ring_read_by_host", i - 2, ring + old * kRingWords, ringWant[size_t(old)].data(),
                  kRingWords);
      ++hostChecks;
    }
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      acc.check("hpb", "acc", i);
      acc2.check("hpb", "acc2", i);
      std::vector<uint32_t> ringAll;  // every slot as the last step that wrote it left it
      for (const auto& w : ringWant) ringAll.insert(ringAll.end(), w.begin(), w.end());
      checkWords("hpb_ring", i, ring, ringAll);
    }
  }
  CK(cudaDeviceSynchronize());
  std::printf("%s: host reads %d, 0-byte allocations %d, their codes %016llx\n", name, hostChecks, zeroAllocs,
              ull(zeroCodes.h));
  CK(cudaFreeAsync(ring, A));
  CK(cudaStreamSynchronize(A));
  CK(cudaMemPoolDestroy(hostPool));
}

// ================================================================ layered_cubemap_copies

constexpr int kLW = 64, kLH = 16;                 // a layer: 64 x 16 words
constexpr int kL1Layers = 6, kL2Layers = 5;       // the two layered arrays
constexpr int kCubeW = 32, kFaces = 6;            // the cubemap: 6 faces of 32 x 32 words
constexpr int kLinW = 64, kLinRows = 64;          // pitched linear memory: 4 slices of 16 rows
constexpr int kCopyW = 48;                        // the layer-to-layer window's width

// Index of texel (x, y) of a layer (or face) in a mirror of h x w layers.
size_t texel(int layer, int y, int x, int h, int w) {
  return (size_t(layer) * size_t(h) + size_t(y)) * size_t(w) + size_t(x);
}

__host__ __device__ inline uint32_t layerWord(uint32_t old, const uint32_t* src, int x, int y, uint32_t salt) {
  return rotl(old, 5) ^ (src[(uint32_t((y * kLW + x) * 3) + salt) % uint32_t(kW)] + salt);
}
// One layer of a layered array rewritten through a surface (each thread its texel).
__global__ void writeLayerK(cudaSurfaceObject_t s, int layer, const uint32_t* src, uint32_t salt) {
  const int x = int(threadIdx.x), y = int(blockIdx.x * blockDim.y + threadIdx.y);
  const uint32_t v = surf2DLayeredread<uint32_t>(s, x * 4, y, layer);
  surf2DLayeredwrite(layerWord(v, src, x, y, salt), s, x * 4, y, layer);
}
// out (kW words) folds in 32 rows of the linear memory from rowBase on.
__global__ void readLinK(uint32_t* out, const uint32_t* lin, size_t pitchWords, int rowBase, uint32_t salt) {
  const int k = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (k < kW) out[k] = rotl(out[k], 3) + (lin[size_t(rowBase + k / kLinW) * pitchWords + size_t(k % kLinW)] ^ salt);
}
__host__ __device__ inline uint32_t cubeOut(uint32_t old, uint32_t a, uint32_t b, uint32_t salt) {
  return rotl(old, 1) ^ (a + b * 3u + salt);
}
__host__ __device__ inline uint32_t cubeTexel(uint32_t a, uint32_t b, uint32_t salt) { return a ^ rotl(b, 7) ^ salt; }
// Reads faces fa and fb (fb mirrored in x), folds them into out2 and writes
// face fw (never fa or fb: no texel is read and written by two threads).
__global__ void cubeK(cudaSurfaceObject_t c, uint32_t* out2, int fa, int fb, int fw, uint32_t salt) {
  const int x = int(threadIdx.x), y = int(blockIdx.x * blockDim.y + threadIdx.y);
  const uint32_t a = surfCubemapread<uint32_t>(c, x * 4, y, fa);
  const uint32_t b = surfCubemapread<uint32_t>(c, (kCubeW - 1 - x) * 4, y, fb);
  out2[y * kCubeW + x] = cubeOut(out2[y * kCubeW + x], a, b, salt);
  surfCubemapwrite(cubeTexel(a, b, salt), c, x * 4, y, fw);
}

// The arrays, the linear memory and their mirrors.
struct LayeredSet {
  cudaArray_t l1 = nullptr, l2 = nullptr, cube = nullptr;
  uint32_t* lin = nullptr;
  size_t pitch = 0;  // bytes
  std::vector<uint32_t> l1h, l2h, cubeh, linh;

  // An array's words (w x h x depth) from or to host memory, synchronously.
  static void upload(cudaArray_t a, const std::vector<uint32_t>& h, int w, int hgt, int depth) {
    cudaMemcpy3DParms p = {};
    p.srcPtr = make_cudaPitchedPtr(const_cast<uint32_t*>(h.data()), size_t(w) * 4, size_t(w), size_t(hgt));
    p.dstArray = a;
    p.extent = make_cudaExtent(size_t(w), size_t(hgt), size_t(depth));
    p.kind = cudaMemcpyHostToDevice;
    CK(cudaMemcpy3D(&p));
  }
  static std::vector<uint32_t> download(cudaArray_t a, int w, int hgt, int depth) {
    std::vector<uint32_t> h(size_t(w) * size_t(hgt) * size_t(depth));
    cudaMemcpy3DParms p = {};
    p.srcArray = a;
    p.dstPtr = make_cudaPitchedPtr(h.data(), size_t(w) * 4, size_t(w), size_t(hgt));
    p.extent = make_cudaExtent(size_t(w), size_t(hgt), size_t(depth));
    p.kind = cudaMemcpyDeviceToHost;
    CK(cudaMemcpy3D(&p));
    return h;
  }
  void uploadAll() {
    upload(l1, l1h, kLW, kLH, kL1Layers);
    upload(l2, l2h, kLW, kLH, kL2Layers);
    upload(cube, cubeh, kCubeW, kCubeW, kFaces);
    CK(cudaMemcpy2D(lin, pitch, linh.data(), size_t(kLinW) * 4, size_t(kLinW) * 4, kLinRows, cudaMemcpyHostToDevice));
  }
  void checkAll(int at) const {
    checkWords("lcc_layered1", at, download(l1, kLW, kLH, kL1Layers).data(), l1h);
    checkWords("lcc_layered2", at, download(l2, kLW, kLH, kL2Layers).data(), l2h);
    checkWords("lcc_cubemap", at, download(cube, kCubeW, kCubeW, kFaces).data(), cubeh);
    std::vector<uint32_t> got(linh.size());
    CK(cudaMemcpy2D(got.data(), size_t(kLinW) * 4, lin, pitch, size_t(kLinW) * 4, kLinRows, cudaMemcpyDeviceToHost));
    checkWords("lcc_linear", at, got.data(), linh);
  }

  // The four copies (cudaMemcpy3DAsync, device to device) and their mirrors.
  // A window of kCopyW columns of `depth` layers of l1 into l2.
  cudaError_t layerToLayer(cudaStream_t s, int l1z, int xs, int l2z, int xd, int depth) const {
    cudaMemcpy3DParms p = {};
    p.srcArray = l1;
    p.srcPos = make_cudaPos(size_t(xs), 0, size_t(l1z));
    p.dstArray = l2;
    p.dstPos = make_cudaPos(size_t(xd), 0, size_t(l2z));
    p.extent = make_cudaExtent(kCopyW, kLH, size_t(depth));
    p.kind = cudaMemcpyDeviceToDevice;
    return keep(cudaMemcpy3DAsync(&p, s));
  }
  void layerToLayerHost(int l1z, int xs, int l2z, int xd, int depth) {
    for (int z = 0; z < depth; ++z)
      for (int y = 0; y < kLH; ++y)
        for (int x = 0; x < kCopyW; ++x)
          l2h[texel(l2z + z, y, xd + x, kLH, kLW)] = l1h[texel(l1z + z, y, xs + x, kLH, kLW)];
  }
  // Layers p, p + 1 of l2 into slices sl, sl + 1 (16 rows each) of the linear memory.
  cudaError_t layersToLinear(cudaStream_t s, int p, int sl) const {
    cudaMemcpy3DParms c = {};
    c.srcArray = l2;
    c.srcPos = make_cudaPos(0, 0, size_t(p));
    c.dstPtr = make_cudaPitchedPtr(lin, pitch, kLinW, kLH);
    c.dstPos = make_cudaPos(0, 0, size_t(sl));
    c.extent = make_cudaExtent(kLW, kLH, 2);
    c.kind = cudaMemcpyDeviceToDevice;
    return keep(cudaMemcpy3DAsync(&c, s));
  }
  void layersToLinearHost(int p, int sl) {
    for (int z = 0; z < 2; ++z)
      for (int y = 0; y < kLH; ++y)
        for (int x = 0; x < kLW; ++x)
          linh[size_t((sl + z) * kLH + y) * kLinW + size_t(x)] = l2h[texel(p + z, y, x, kLH, kLW)];
  }
  // A 32 x 32 window of the linear memory (from row rowOff, column xo) into face f.
  cudaError_t linearToFace(cudaStream_t s, int rowOff, int xo, int f) const {
    cudaMemcpy3DParms c = {};
    c.srcPtr = make_cudaPitchedPtr(lin, pitch, kLinW, kLinRows);
    c.srcPos = make_cudaPos(size_t(xo) * 4, size_t(rowOff), 0);
    c.dstArray = cube;
    c.dstPos = make_cudaPos(0, 0, size_t(f));
    c.extent = make_cudaExtent(kCubeW, kCubeW, 1);
    c.kind = cudaMemcpyDeviceToDevice;
    return keep(cudaMemcpy3DAsync(&c, s));
  }
  void linearToFaceHost(int rowOff, int xo, int f) {
    for (int y = 0; y < kCubeW; ++y)
      for (int x = 0; x < kCubeW; ++x)
        cubeh[texel(f, y, x, kCubeW, kCubeW)] = linh[size_t(rowOff + y) * kLinW + size_t(xo + x)];
  }
  // 16 rows of face g (from row yo) into layer l3 of l1 at column xo2.
  cudaError_t faceToLayer(cudaStream_t s, int g, int yo, int l3, int xo2) const {
    cudaMemcpy3DParms c = {};
    c.srcArray = cube;
    c.srcPos = make_cudaPos(0, size_t(yo), size_t(g));
    c.dstArray = l1;
    c.dstPos = make_cudaPos(size_t(xo2), 0, size_t(l3));
    c.extent = make_cudaExtent(kCubeW, kLH, 1);
    c.kind = cudaMemcpyDeviceToDevice;
    return keep(cudaMemcpy3DAsync(&c, s));
  }
  void faceToLayerHost(int g, int yo, int l3, int xo2) {
    for (int y = 0; y < kLH; ++y)
      for (int x = 0; x < kCubeW; ++x)
        l1h[texel(l3, y, xo2 + x, kLH, kLW)] = cubeh[texel(g, yo + y, x, kCubeW, kCubeW)];
  }
};

// What a tool could get wrong: 3-D copies between layered arrays, a cubemap
// and pitched memory (ops it issues eagerly at their position) at layers,
// faces and windows that move every step, between held kernels that read and
// write the arrays through surface objects made every step, on two streams.
void layeredCubemapCopies() {
  const char* name = "layered_cubemap_copies";
  LayeredSet a;
  const cudaChannelFormatDesc desc = cudaCreateChannelDesc<uint32_t>();
  const cudaError_t made[3] = {
      keep(cudaMalloc3DArray(&a.l1, &desc, make_cudaExtent(kLW, kLH, kL1Layers),
                             cudaArrayLayered | cudaArraySurfaceLoadStore)),
      keep(cudaMalloc3DArray(&a.l2, &desc, make_cudaExtent(kLW, kLH, kL2Layers),
                             cudaArrayLayered | cudaArraySurfaceLoadStore)),
      keep(cudaMalloc3DArray(&a.cube, &desc, make_cudaExtent(kCubeW, kCubeW, kFaces),
                             cudaArrayCubemap | cudaArraySurfaceLoadStore))};
  if (made[0] != cudaSuccess || made[1] != cudaSuccess || made[2] != cudaSuccess) {
    std::printf("%s: SKIP layered or cubemap surface arrays refused (codes %d %d %d)\n", name, int(made[0]),
                int(made[1]), int(made[2]));
    return;
  }
  CK(cudaMallocPitch(reinterpret_cast<void**>(&a.lin), &a.pitch, size_t(kLinW) * 4, kLinRows));
  a.l1h = hostPattern(37201, kLW * kLH * kL1Layers);
  a.l2h = hostPattern(37202, kLW * kLH * kL2Layers);
  a.cubeh = hostPattern(37203, kCubeW * kCubeW * kFaces);
  a.linh = hostPattern(37204, kLinW * kLinRows);
  a.uploadAll();
  cudaStream_t S = nonBlockingStream(), T = nonBlockingStream();
  cudaEvent_t e1 = untimedEvent(), e2 = untimedEvent(), done[3] = {untimedEvent(), untimedEvent(), untimedEvent()};
  // Every copy form once, before the loop (then everything uploaded again).
  {
    const cudaError_t codes[4] = {a.layerToLayer(S, 4, 16, 3, 16, 2), a.layersToLinear(S, 3, 2),
                                  a.linearToFace(S, 32, 32, 5), a.faceToLayer(S, 5, 16, 5, 32)};
    const cudaError_t sync = keep(cudaStreamSynchronize(S));
    if (codes[0] || codes[1] || codes[2] || codes[3] || sync) {
      std::printf("%s: SKIP a 3-D copy form was refused (codes %d %d %d %d, synchronize %d)\n", name, int(codes[0]),
                  int(codes[1]), int(codes[2]), int(codes[3]), int(sync));
      return;
    }
    a.uploadAll();
  }
  Buf out(37205), out2(37206);
  const size_t pitchWords = a.pitch / 4;
  preload(writeLayerK);
  preload(readLinK);
  preload(cubeK);
  CK(cudaDeviceSynchronize());
  struct StepSurfaces {
    cudaSurfaceObject_t layered = 0, cube = 0;
  } ring[3];
  int twoLayerCopies = 0;
  for (int i = 0; i < g_iters; ++i) {
    if (i >= 2) {  // step i-2's surfaces: its work is done once its last event is
      StepSurfaces& old = ring[(i - 2) % 3];
      CK(cudaEventSynchronize(done[(i - 2) % 3]));
      CK(cudaDestroySurfaceObject(old.layered));
      CK(cudaDestroySurfaceObject(old.cube));
      old = StepSurfaces{};
    }
    StepSurfaces& cur = ring[i % 3];
    cur.layered = surfaceOver(a.l1);
    cur.cube = surfaceOver(a.cube);
    const uint32_t salt = hash32(uint32_t(i) + 37210u);
    const int l1z = (i + i / 5) % kL1Layers, l2z = (2 * i + 1) % kL2Layers;
    const int depth = (i % 2 == 1 && l1z + 1 < kL1Layers && l2z + 1 < kL2Layers) ? 2 : 1;
    const int xs = (3 * i) % 17, xd = (5 * i + 2) % 17;
    const int p = i % 4, sl = (i / 2) % 3;
    const int rowOff = (7 * i) % 33, xo = (11 * i) % 33;
    const int f = i % kFaces, fa = (i + 1) % kFaces, fb = (i + 3) % kFaces, fw = (i + 5) % kFaces;
    const int g = (i + 2) % kFaces, yo = (3 * i) % 17, xo2 = (7 * i) % 33, l3 = (i + 4) % kL1Layers;
    twoLayerCopies += depth == 2;
    // S: a layer rewritten through its surface, then moved into the second array.
    writeLayerK<<<kLH / 4, dim3(kLW, 4), 0, S>>>(cur.layered, l1z, out.d, salt);
    CKL();
    for (int y = 0; y < kLH; ++y)
      for (int x = 0; x < kLW; ++x) {
        uint32_t& t = a.l1h[texel(l1z, y, x, kLH, kLW)];
        t = layerWord(t, out.h.data(), x, y, salt);
      }
    CK(a.layerToLayer(S, l1z, xs, l2z, xd, depth));
    a.layerToLayerHost(l1z, xs, l2z, xd, depth);
    CK(cudaEventRecord(e1, S));
    // T: two layers into the linear memory, read by a kernel.
    CK(cudaStreamWaitEvent(T, e1, 0));
    CK(a.layersToLinear(T, p, sl));
    a.layersToLinearHost(p, sl);
    readLinK<<<kWGrid, kBlock, 0, T>>>(out.d, a.lin, pitchWords, sl * kLH, salt ^ 1u);
    CKL();
    for (int k = 0; k < kW; ++k) {
      const uint32_t word = a.linh[size_t(sl * kLH + k / kLinW) * kLinW + size_t(k % kLinW)];
      out.h[size_t(k)] = rotl(out.h[size_t(k)], 3) + (word ^ (salt ^ 1u));
    }
    CK(cudaEventRecord(e2, T));
    // S: a window of the linear memory into a face, two faces read and a third
    // written through the cubemap's surface, a face window into a layer.
    CK(cudaStreamWaitEvent(S, e2, 0));
    CK(a.linearToFace(S, rowOff, xo, f));
    a.linearToFaceHost(rowOff, xo, f);
    cubeK<<<kCubeW / 8, dim3(kCubeW, 8), 0, S>>>(cur.cube, out2.d, fa, fb, fw, salt ^ 2u);
    CKL();
    {
      std::vector<uint32_t> faceW(size_t(kCubeW) * kCubeW);
      for (int y = 0; y < kCubeW; ++y)
        for (int x = 0; x < kCubeW; ++x) {
          const uint32_t va = a.cubeh[texel(fa, y, x, kCubeW, kCubeW)];
          const uint32_t vb = a.cubeh[texel(fb, y, kCubeW - 1 - x, kCubeW, kCubeW)];
          uint32_t& o = out2.h[size_t(y * kCubeW + x)];
          o = cubeOut(o, va, vb, salt ^ 2u);
          faceW[size_t(y * kCubeW + x)] = cubeTexel(va, vb, salt ^ 2u);
        }
      std::copy(faceW.begin(), faceW.end(), a.cubeh.begin() + std::ptrdiff_t(texel(fw, 0, 0, kCubeW, kCubeW)));
    }
    CK(a.faceToLayer(S, g, yo, l3, xo2));
    a.faceToLayerHost(g, yo, l3, xo2);
    CK(cudaEventRecord(done[i % 3], S));
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      a.checkAll(i);
      out.check("lcc", "out", i);
      out2.check("lcc", "out2", i);
    }
  }
  CK(cudaDeviceSynchronize());
  for (StepSurfaces& s : ring) {
    if (s.layered) CK(cudaDestroySurfaceObject(s.layered));
    if (s.cube) CK(cudaDestroySurfaceObject(s.cube));
  }
  std::printf("%s: two-layer copies %d of %d\n", name, twoLayerCopies, g_iters);
  CK(cudaFreeArray(a.l1));
  CK(cudaFreeArray(a.l2));
  CK(cudaFreeArray(a.cube));
  CK(cudaFree(a.lin));
}

// ================================================================ hole_stream_rotation

constexpr int kChainA = 10, kChainB = 20, kChainC = 20, kChainD = 50, kSideLen = 10;

// What a tool could get wrong: four places of a long step differ in every
// instance (the side branch's wait, kernel and record run on a stream that is
// never the one of the step before; a memset's size changes every step), so a
// tool that leaves them eager between graphs of the rest issues them between
// two graphs: the branch's wait must bind to the fork record of THIS step, and
// the main stream's wait on the branch's record must hold in the next graph.
void holeStreamRotation() {
  const char* name = "hole_stream_rotation";
  cudaStream_t M = nonBlockingStream(), F = nonBlockingStream();
  cudaStream_t nbX[3] = {nonBlockingStream(), nonBlockingStream(), nonBlockingStream()};
  cudaStream_t blX = blockingStream();
  cudaEvent_t eFork = untimedEvent(), eJoin = untimedEvent(), eF1 = untimedEvent(), eF2 = untimedEvent();
  Buf m[4] = {Buf(37301), Buf(37302), Buf(37303), Buf(37304)};
  Buf xsrc(37305), fsrc(37306), side(37307), fx(37308), fx2(37309), setBuf(37310);
  preload(mix);
  preload(mix2);
  CK(cudaDeviceSynchronize());
  const int half = g_iters / 2;
  int x = 0, byX[2][3] = {{0, 0, 0}, {0, 0, 0}};
  const char* const xNames[2][3] = {{"non-blocking 0", "non-blocking 1", "non-blocking 2"},
                                    {"blocking", "legacy", "per-thread"}};
  auto chain = [&](int len, int first, uint32_t salt) {  // main-stream kernels over the m set
    for (int j = 0; j < len; ++j) {
      const int d = (first + j) % 4, s = (first + j + 1) % 4;
      mixOn(M, m[d], m[s], salt + uint32_t(j));
    }
  };
  for (int i = 0; i < g_iters; ++i) {
    if (i == half) CK(cudaDeviceSynchronize());  // the side streams change kind
    const int phase = i >= half ? 1 : 0;
    if (i > 0) x = (x + 1 + int(hash32(uint32_t(i) ^ 0x3730u) & 1u)) % 3;  // never the stream of the step before
    ++byX[phase][x];
    cudaStream_t X = phase == 0 ? nbX[x] : x == 0 ? blX : x == 1 ? cudaStreamLegacy : cudaStreamPerThread;
    const uint32_t salt = hash32(uint32_t(i) + 37310u);
    // A: the main chain, then the sources of the two branches.
    chain(kChainA, i % 4, salt);
    mixOn(M, xsrc, m[1], salt ^ 0x100u);
    mixOn(M, fsrc, m[2], salt ^ 0x200u);
    CK(cudaEventRecord(eFork, M));
    // The rotating branch (three holes): a wait, a kernel, a record.
    CK(cudaStreamWaitEvent(X, eFork, 0));
    mixOn(X, side, xsrc, salt ^ 0x300u);
    CK(cudaEventRecord(eJoin, X));
    // B: more main work; then the fixed branch on F.
    chain(kChainB, (i + 1) % 4, salt ^ 0x400u);
    CK(cudaEventRecord(eF1, M));
    CK(cudaStreamWaitEvent(F, eF1, 0));
    for (int j = 0; j < kSideLen; ++j) {
      mixOn(F, fx, j == 0 ? fsrc : fx2, salt ^ (0x500u + uint32_t(j)));
      mixOn(F, fx2, fx, salt ^ (0x600u + uint32_t(j)));
    }
    CK(cudaEventRecord(eF2, F));
    // C, the join of the rotating branch, the memset hole and its reader.
    chain(kChainC, (i + 2) % 4, salt ^ 0x700u);
    CK(cudaStreamWaitEvent(M, eJoin, 0));
    mixOn(M, m[3], side, salt ^ 0x800u);
    const size_t setWords = 64 + size_t(i * 13 % 97);  // differs from the step before every time
    const int setValue = int(hash32(salt ^ 0x900u) & 0xffu);
    CK(cudaMemsetAsync(setBuf.d, setValue, setWords * 4, M));
    memsetHost(setBuf.h, 0, setValue, setWords * 4);
    mixOn(M, m[0], setBuf, salt ^ 0xa00u);
    // D, then the join of the fixed branch.
    chain(kChainD, (i + 3) % 4, salt ^ 0xb00u);
    CK(cudaStreamWaitEvent(M, eF2, 0));
    mixOn(M, m[1], fx2, salt ^ 0xc00u);
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      for (int k = 0; k < 4; ++k) m[k].check("hsr", ("m" + std::to_string(k)).c_str(), i);
      side.check("hsr", "side", i);
      fx2.check("hsr", "fx2", i);
      setBuf.check("hsr", "set", i);
    }
  }
  CK(cudaDeviceSynchronize());
  for (int p = 0; p < 2; ++p)
    std::printf("%s: half %d branch streams: %s %d, %s %d, %s %d\n", name, p, xNames[p][0], byX[p][0], xNames[p][1],
                byX[p][1], xNames[p][2], byX[p][2]);
}

// ================================================================ device_node_updates

constexpr int kCtlWords = 4;
constexpr int kNodeBlockMax = 8;  // grid sizes the updater picks: 1..8 blocks

__host__ __device__ inline uint32_t nodeWordAt(uint32_t old, const uint32_t* src, uint32_t salt, int k) {
  return rotl(old, 7) ^ (src[(uint32_t(k) * 5u + salt) % uint32_t(kW)] + salt);
}
// A program-graph node: a grid-stride loop (any grid gives the same words);
// block 0 logs the grid size it ran with at `slot`.
__global__ void nodeWorkK(uint32_t* dst, const uint32_t* src, int n, uint32_t salt, uint32_t* gridLog, uint32_t slot) {
  for (int k = int(blockIdx.x * blockDim.x + threadIdx.x); k < n; k += int(gridDim.x * blockDim.x))
    dst[k] = nodeWordAt(dst[k], src, salt, k);
  if (blockIdx.x == 0 && threadIdx.x == 0) gridLog[slot] = gridDim.x;
}
__host__ __device__ inline uint32_t ctlWordOf(const uint32_t* in, uint32_t salt, int j) {
  uint32_t s = salt ^ (0x85ebca6bu * uint32_t(j + 1));
  for (int k = j; k < kW; k += 61) s = rotl(s, 5) ^ (in[k] + uint32_t(k));
  return s;
}
// The words the updater decides from.
__global__ void ctlK(uint32_t* ctl, const uint32_t* in, uint32_t salt) {
  const int j = int(threadIdx.x);
  if (j < kCtlWords) ctl[j] = ctlWordOf(in, salt, j);
}
// What the updater sets, from the control words.
struct NodeDecision {
  uint32_t salt1, salt2, grid1, grid2;
  bool enabled1;
};
__host__ __device__ inline NodeDecision decideNodes(const uint32_t* ctl) {
  NodeDecision d;
  d.salt1 = ctl[0];
  d.salt2 = ctl[1];
  d.grid1 = 1u + ctl[2] % kNodeBlockMax;
  d.grid2 = 1u + (ctl[2] >> 8) % kNodeBlockMax;
  d.enabled1 = ctl[3] % 5u != 0u;
  return d;
}
// Byte offsets of nodeWorkK's salt and slot parameters (cuFuncGetParamInfo).
struct NodeParamOffsets {
  uint32_t salt = 0, slot = 0;
};
// Rewrites both nodes from the device: form 0 one call per field, form 1 one
// batch, form 2 a batch for the first node and single calls for the second.
// codes[step]: the first failing call's code (0: all taken).
__global__ void updaterK(const uint32_t* ctl, cudaGraphDeviceNode_t n1, cudaGraphDeviceNode_t n2, uint32_t step,
                         int form, NodeParamOffsets off, int* codes) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  const NodeDecision d = decideNodes(ctl);
  const uint32_t slot1 = 2u * step, slot2 = 2u * step + 1u;
  int first = 0;
  auto note = [&](cudaError_t r) {
    if (r != cudaSuccess && first == 0) first = int(r);
  };
  // cudaGraphKernelNodeUpdate has no default constructor (a union with dim3):
  // the batch is built in raw storage.
  alignas(cudaGraphKernelNodeUpdate) unsigned char raw[7 * sizeof(cudaGraphKernelNodeUpdate)];
  auto* u = reinterpret_cast<cudaGraphKernelNodeUpdate*>(raw);
  int count = 0;
  auto addParam = [&](cudaGraphDeviceNode_t node, uint32_t offset, const uint32_t* value) {
    u[count].node = node;
    u[count].field = cudaGraphKernelNodeFieldParam;
    u[count].updateData.param.pValue = value;
    u[count].updateData.param.offset = offset;
    u[count].updateData.param.size = 4;
    ++count;
  };
  auto addGrid = [&](cudaGraphDeviceNode_t node, uint32_t blocks) {
    u[count].node = node;
    u[count].field = cudaGraphKernelNodeFieldGridDim;
    u[count].updateData.gridDim = make_uint3(blocks, 1, 1);
    ++count;
  };
  auto addEnabled = [&](cudaGraphDeviceNode_t node, bool on) {
    u[count].node = node;
    u[count].field = cudaGraphKernelNodeFieldEnabled;
    u[count].updateData.isEnabled = on ? 1u : 0u;
    ++count;
  };
  if (form == 0) {
    note(cudaGraphKernelNodeSetParam(n1, off.salt, &d.salt1, 4));
    note(cudaGraphKernelNodeSetParam(n1, off.slot, &slot1, 4));
    note(cudaGraphKernelNodeSetGridDim(n1, dim3(d.grid1)));
    note(cudaGraphKernelNodeSetEnabled(n1, d.enabled1));
  } else {
    addParam(n1, off.salt, &d.salt1);
    addParam(n1, off.slot, &slot1);
    addGrid(n1, d.grid1);
    addEnabled(n1, d.enabled1);
  }
  if (form == 1) {
    addParam(n2, off.salt, &d.salt2);
    addParam(n2, off.slot, &slot2);
    addGrid(n2, d.grid2);
    note(cudaGraphKernelNodeUpdatesApply(u, size_t(count)));
  } else {
    if (form == 2) note(cudaGraphKernelNodeUpdatesApply(u, size_t(count)));
    note(cudaGraphKernelNodeSetParam(n2, off.salt, &d.salt2, 4));
    note(cudaGraphKernelNodeSetParam(n2, off.slot, &slot2, 4));
    note(cudaGraphKernelNodeSetGridDim(n2, dim3(d.grid2)));
  }
  codes[step] = first;
}

// The program's graph: node 1 (w1 from in), then node 2 (w2 from w1), both
// device-updatable, captured on P; their device handles.
struct UpdatableGraph {
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaGraphDeviceNode_t dev1 = nullptr, dev2 = nullptr;
};
// The driver's code where it refuses any step (nothing left behind then).
cudaError_t buildUpdatableGraph(UpdatableGraph& ug, cudaStream_t P, uint32_t* w1, uint32_t* w2, const uint32_t* in,
                                uint32_t* gridLog, uint32_t scratchSlot) {
  CK(cudaStreamBeginCapture(P, cudaStreamCaptureModeThreadLocal));
  cudaLaunchAttribute attr[1] = {};
  attr[0].id = cudaLaunchAttributeDeviceUpdatableKernelNode;
  attr[0].val.deviceUpdatableKernelNode.deviceUpdatable = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(kWGrid);
  cfg.blockDim = dim3(kBlock);
  cfg.stream = P;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  int n = kW;
  uint32_t salt0 = 0x3740u, slot = scratchSlot;
  const uint32_t* src1 = in;
  const uint32_t* src2 = w1;
  void* a1[] = {&w1, &src1, &n, &salt0, &gridLog, &slot};
  void* a2[] = {&w2, &src2, &n, &salt0, &gridLog, &slot};
  const cudaError_t r1 = keep(cudaLaunchKernelExC(&cfg, reinterpret_cast<const void*>(nodeWorkK), a1));
  const cudaError_t r2 = keep(cudaLaunchKernelExC(&cfg, reinterpret_cast<const void*>(nodeWorkK), a2));
  const cudaError_t re = keep(cudaStreamEndCapture(P, &ug.g));
  if (r1 != cudaSuccess || r2 != cudaSuccess || re != cudaSuccess) {
    if (re == cudaSuccess) CK(cudaGraphDestroy(ug.g));
    ug.g = nullptr;
    return r1 != cudaSuccess ? r1 : r2 != cudaSuccess ? r2 : re;
  }
  size_t count = 0;
  CK(cudaGraphGetNodes(ug.g, nullptr, &count));
  if (count != 2) {
    CK(cudaGraphDestroy(ug.g));
    ug.g = nullptr;
    return cudaErrorInvalidValue;
  }
  cudaGraphNode_t nodes[2] = {nullptr, nullptr};
  CK(cudaGraphGetNodes(ug.g, nodes, &count));
  for (cudaGraphNode_t node : nodes) {  // which is which: by the destination each writes
    cudaKernelNodeParams p = {};
    CK(cudaGraphKernelNodeGetParams(node, &p));
    uint32_t* dst = *static_cast<uint32_t**>(p.kernelParams[0]);
    cudaLaunchAttributeValue v = {};
    const cudaError_t ra =
        keep(cudaGraphKernelNodeGetAttribute(node, cudaLaunchAttributeDeviceUpdatableKernelNode, &v));
    if (ra != cudaSuccess || !v.deviceUpdatableKernelNode.deviceUpdatable) {
      CK(cudaGraphDestroy(ug.g));
      ug.g = nullptr;
      return ra != cudaSuccess ? ra : cudaErrorInvalidValue;
    }
    (dst == w1 ? ug.dev1 : ug.dev2) = v.deviceUpdatableKernelNode.devNode;
  }
  const cudaError_t ri = keep(cudaGraphInstantiate(&ug.exec, ug.g, 0));
  if (ri != cudaSuccess) {
    CK(cudaGraphDestroy(ug.g));
    ug.g = nullptr;
    ug.exec = nullptr;
    return ri;
  }
  return keep(cudaGraphUpload(ug.exec, P));
}

// What a tool could get wrong: the program's graph takes its nodes'
// parameters, grids and enabled state from device memory a plain kernel wrote
// through the device-side node update calls; that kernel (and the kernel its
// words come from) must run before the graph's launch, which the tool issues
// eagerly at its position, on the same stream or joined by events.
void deviceNodeUpdates() {
  const char* name = "device_node_updates";
  cudaStream_t S = nonBlockingStream(), U = nonBlockingStream(), V = nonBlockingStream(), P = nonBlockingStream();
  cudaEvent_t eCtl = untimedEvent(), eUpd = untimedEvent(), eL = untimedEvent(), eG = untimedEvent();
  Buf in(37401), w1(37402), w2(37403), acc(37404);
  const int logWords = 2 * g_iters + 2;  // two slots a step, one scratch slot the capture used
  uint32_t* gridLog = zeroBuffer(size_t(logWords));
  std::vector<uint32_t> gridLogH(size_t(logWords), 0u);
  uint32_t* ctl = zeroBuffer(kCtlWords);
  int* codes = nullptr;
  CK(cudaMalloc(reinterpret_cast<void**>(&codes), size_t(g_iters + 1) * sizeof(int)));
  CK(cudaMemset(codes, 0xff, size_t(g_iters + 1) * sizeof(int)));
  preload(nodeWorkK);
  preload(ctlK);
  preload(updaterK);
  preload(mix);
  CK(cudaDeviceSynchronize());
  NodeParamOffsets off;
  {
    cudaFunction_t fn = nullptr;
    CK(cudaGetFuncBySymbol(&fn, reinterpret_cast<const void*>(nodeWorkK)));
    size_t o = 0, sz = 0;
    CKD(cuFuncGetParamInfo(reinterpret_cast<CUfunction>(fn), 3, &o, &sz));
    off.salt = uint32_t(o);
    CKD(cuFuncGetParamInfo(reinterpret_cast<CUfunction>(fn), 5, &o, &sz));
    off.slot = uint32_t(o);
  }
  const uint32_t scratch = uint32_t(logWords - 1);
  UpdatableGraph ug;
  const cudaError_t built = buildUpdatableGraph(ug, P, w1.d, w2.d, in.d, gridLog, scratch);
  if (built != cudaSuccess) {
    std::printf("%s: SKIP the driver refused a graph of device-updatable nodes (code %d)\n", name, int(built));
    return;
  }
  // The probe: one update from a kernel outside the graph, then a launch.
  {
    const uint32_t probeCtl[kCtlWords] = {0x1234u, 0x5678u, 0x0302u, 1u};
    CK(cudaMemcpy(ctl, probeCtl, sizeof probeCtl, cudaMemcpyHostToDevice));
    updaterK<<<1, 32, 0, P>>>(ctl, ug.dev1, ug.dev2, uint32_t(g_iters), 1, off, codes);
    const cudaError_t launched = keep(cudaGetLastError());
    const cudaError_t ran = keep(cudaGraphLaunch(ug.exec, P));
    const cudaError_t sync = keep(cudaStreamSynchronize(P));
    int code = -1;
    if (sync == cudaSuccess) CK(cudaMemcpy(&code, codes + g_iters, sizeof code, cudaMemcpyDeviceToHost));
    if (launched != cudaSuccess || ran != cudaSuccess || sync != cudaSuccess || code != 0) {
      std::printf("%s: SKIP device-side node updates from a kernel outside the graph refused (codes %d %d %d, "
                  "device %d)\n",
                  name, int(launched), int(ran), int(sync), code);
      return;
    }
    // Back to the patterns the mirrors start from.
    CK(cudaMemcpy(w1.d, w1.h.data(), kW * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(w2.d, w2.h.data(), kW * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(gridLog, 0, size_t(logWords) * 4));
  }
  std::printf("%s: device-side updates taken (salt at byte %u, slot at byte %u)\n", name, off.salt, off.slot);
  int byForm[3] = {0, 0, 0}, onU = 0, onV = 0, disabled = 0;
  std::vector<uint32_t> ctlH(kCtlWords);
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 37410u);
    int form = (i + i / 3) % 3;
    if (irregular(i, 3741, 5)) form = (form + 1) % 3;
    ++byForm[form];
    const bool updaterOnU = i % 4 == 1, launchOnV = i % 5 == 2;
    onU += updaterOnU;
    onV += launchOnV;
    // S: the input moves; the control words from it.
    mixOn(S, in, acc, salt);
    ctlK<<<1, 32, 0, S>>>(ctl, in.d, salt ^ 1u);
    CKL();
    for (int j = 0; j < kCtlWords; ++j) ctlH[size_t(j)] = ctlWordOf(in.h.data(), salt ^ 1u, j);
    // The updater, on S or on U between events.
    cudaStream_t up = S;
    if (updaterOnU) {
      CK(cudaEventRecord(eCtl, S));
      CK(cudaStreamWaitEvent(U, eCtl, 0));
      up = U;
    }
    updaterK<<<1, 32, 0, up>>>(ctl, ug.dev1, ug.dev2, uint32_t(i), form, off, codes);
    CKL();
    if (updaterOnU) {
      CK(cudaEventRecord(eUpd, U));
      CK(cudaStreamWaitEvent(S, eUpd, 0));
    }
    // The program's graph, on S or on V between events.
    if (launchOnV) {
      CK(cudaEventRecord(eL, S));
      CK(cudaStreamWaitEvent(V, eL, 0));
      CK(cudaGraphLaunch(ug.exec, V));
      CK(cudaEventRecord(eG, V));
      CK(cudaStreamWaitEvent(S, eG, 0));
    } else {
      CK(cudaGraphLaunch(ug.exec, S));
    }
    const NodeDecision d = decideNodes(ctlH.data());
    if (d.enabled1) {
      for (int k = 0; k < kW; ++k) w1.h[size_t(k)] = nodeWordAt(w1.h[size_t(k)], in.h.data(), d.salt1, k);
      gridLogH[size_t(2 * i)] = d.grid1;
    } else {
      ++disabled;
    }
    for (int k = 0; k < kW; ++k) w2.h[size_t(k)] = nodeWordAt(w2.h[size_t(k)], w1.h.data(), d.salt2, k);
    gridLogH[size_t(2 * i + 1)] = d.grid2;
    // Held work after the launch reads what the graph wrote.
    mixOn(S, acc, w2, salt ^ 2u);
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      const std::vector<int> got = fetch<int>(codes, size_t(i + 1));
      for (int s = 0; s <= i; ++s)
        if (got[size_t(s)] != 0)
          mismatch(name, s, "a device-side update returned code " + std::to_string(got[size_t(s)]));
      in.check("dnu", "in", i);
      w1.check("dnu", "w1", i);
      w2.check("dnu", "w2", i);
      acc.check("dnu", "acc", i);
      std::vector<uint32_t> logUpTo(gridLogH.begin(), gridLogH.begin() + 2 * (i + 1));
      checkDev("dnu_grid_log", i, gridLog, logUpTo);
    }
  }
  CK(cudaDeviceSynchronize());
  std::printf("%s: forms %d %d %d, updater on a second stream %d, graph on a third %d, node 1 disabled %d\n", name,
              byForm[0], byForm[1], byForm[2], onU, onV, disabled);
  CK(cudaGraphExecDestroy(ug.exec));
  CK(cudaGraphDestroy(ug.g));
}

// ================================================================ stack_limit_epochs

constexpr int kFrameWords = 24;        // local words per recursion level (a stack frame each)
constexpr int kShallowDepth = 1, kDeepDepth = 24;
constexpr size_t kShallowStack = 1024, kDeepStack = 8192;

// A fold that recurses `depth` levels, each with a frame of its own (the
// volatile array cannot live in registers), so its stack need grows with the
// depth the data asks for: the compiler cannot bound it, the stack limit does.
__host__ __device__ uint32_t deepFold(const uint32_t* data, int depth, uint32_t acc) {
  volatile uint32_t frame[kFrameWords];
  for (int j = 0; j < kFrameWords; ++j)
    frame[j] = acc + data[(acc + uint32_t(j) * 7u) % uint32_t(kW)] * uint32_t(j + 1);
  if (depth <= 0) return frame[acc % kFrameWords];
  const uint32_t below = deepFold(data, depth - 1, rotl(acc, 3) ^ frame[uint32_t(depth) % kFrameWords]);
  return below ^ frame[(acc >> 5) % kFrameWords];
}
__host__ __device__ inline int depthOf(uint32_t word, uint32_t level, uint32_t salt) {
  return level == 0 ? 0 : int(hash32(word ^ salt) % (level + 1u));
}
// Each thread's depth, from the data and the level word (device memory the
// program sets once per epoch).
__global__ void depthK(int* depth, const uint32_t* src, const uint32_t* level, uint32_t salt) {
  const int k = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (k < kW) depth[k] = depthOf(src[k], *level, salt);
}
__global__ void deepK(uint32_t* out, const uint32_t* data, const int* depth) {
  const int k = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (k < kW) out[k] = deepFold(data, depth[k], out[k] ^ uint32_t(k));
}

// What a tool could get wrong: the step's launches are byte for byte the same
// in every epoch (the recursion depth comes from device memory), but between
// epochs the program raises or lowers the stack limit; a graph built while
// the limit was low, replayed once it is high, must give the kernel the stack
// an eager launch would get.
void stackLimitEpochs() {
  const char* name = "stack_limit_epochs";
  cudaStream_t S = nonBlockingStream();
  Buf src(37501), data(37502), out(37503), acc(37504);
  int* depth = nullptr;
  CK(cudaMalloc(reinterpret_cast<void**>(&depth), kW * sizeof(int)));
  uint32_t* level = zeroBuffer(1);
  uint32_t levelH = 0;
  preload(depthK);
  preload(deepK);
  preload(mix);
  size_t original = 0;
  CK(cudaDeviceGetLimit(&original, cudaLimitStackSize));
  CK(cudaDeviceSynchronize());
  int epoch = -1, nextEpochAt = 0, deepEpochs = 0, deepSteps = 0;
  int maxDepthSeen = 0;
  for (int i = 0; i < g_iters; ++i) {
    if (i == nextEpochAt) {  // a new epoch: the limit first, then the level
      ++epoch;
      nextEpochAt = i + 14 + int(hash32(uint32_t(epoch) + 3750u) % 24u);
      const bool deep = epoch % 2 == 1;
      deepEpochs += deep;
      CK(cudaDeviceSetLimit(cudaLimitStackSize, deep ? kDeepStack : kShallowStack));
      size_t now = 0;
      CK(cudaDeviceGetLimit(&now, cudaLimitStackSize));
      std::printf("%s: epoch %d from step %d: %s, stack limit %zu\n", name, epoch, i, deep ? "deep" : "shallow", now);
      levelH = deep ? kDeepDepth : kShallowDepth;
      CKD(cuMemsetD32Async(dptr(level), levelH, 1, cu(S)));
    }
    deepSteps += levelH == kDeepDepth;
    const uint32_t salt = hash32(uint32_t(i) + 37510u);
    mixOn(S, src, acc, salt);
    depthK<<<kWGrid, kBlock, 0, S>>>(depth, src.d, level, salt ^ 1u);
    CKL();
    deepK<<<kWGrid, kBlock, 0, S>>>(out.d, data.d, depth);
    CKL();
    for (int k = 0; k < kW; ++k) {
      const int dk = depthOf(src.h[size_t(k)], levelH, salt ^ 1u);
      maxDepthSeen = std::max(maxDepthSeen, dk);
      out.h[size_t(k)] = deepFold(data.h.data(), dk, out.h[size_t(k)] ^ uint32_t(k));
    }
    mixOn(S, acc, out, salt ^ 2u);
    if (at(i)) {
      CK(cudaStreamSynchronize(S));
      src.check("sle", "src", i);
      out.check("sle", "out", i);
      acc.check("sle", "acc", i);
    }
  }
  CK(cudaDeviceSynchronize());
  CK(cudaDeviceSetLimit(cudaLimitStackSize, original));
  std::printf("%s: epochs %d (deep %d), deep steps %d, deepest recursion %d\n", name, epoch + 1, deepEpochs,
              deepSteps, maxDepthSeen);
  CK(cudaFree(depth));
}

// ================================================================ copy_edge_guard

constexpr size_t kEdgeBytes = 64 * 1024;   // mirrored bytes at each end of the mapping
constexpr size_t kPlainBytes = 256 * 1024;  // the plain buffer: 8 KiB windows, one per copy position
constexpr size_t kWindowBytes = 8192;
constexpr int kEdgeCopies = 20;
constexpr size_t kEdgeCopySizes[kEdgeCopies] = {1,  2,  3,  5,  7,  8,   12,  15,  16,   17,
                                                31, 33, 63, 64, 65, 100, 255, 257, 1023, 4099};
// Memsets ending at the mapping's end: byte counts, 2-byte and 4-byte element counts.
constexpr size_t kEdgeSet8[] = {1, 7, 33, 250};
constexpr size_t kEdgeSet16[] = {1, 3, 31};
constexpr size_t kEdgeSet32[] = {1, 5, 63};

// Where a copy's side lies: the plain buffer (at a byte offset), or the
// mapping's head or tail (offsets from its first byte, or back from its end).
enum class EdgeRegion { Plain, Head, Tail };
struct EdgeSpot {
  EdgeRegion region;
  size_t off;  // Plain and Head: bytes from the start; Tail: bytes before the end
};

// The mapping (its head and tail mirrored), the plain buffer and its mirror.
struct EdgeMemory {
  CUdeviceptr reserved = 0, map = 0;  // the mapping: the middle third of the reserved range
  size_t gran = 0;
  CUmemGenericAllocationHandle phys = 0;
  uint8_t* plain = nullptr;
  std::vector<uint8_t> headH, tailH, plainH;

  uint8_t* dev(EdgeSpot s) const {
    switch (s.region) {
      case EdgeRegion::Plain: return plain + s.off;
      case EdgeRegion::Head: return reinterpret_cast<uint8_t*>(map + s.off);
      default: return reinterpret_cast<uint8_t*>(map + gran - s.off);
    }
  }
  uint8_t* host(EdgeSpot s) {
    switch (s.region) {
      case EdgeRegion::Plain: return plainH.data() + s.off;
      case EdgeRegion::Head: return headH.data() + s.off;
      default: return tailH.data() + (kEdgeBytes - s.off);
    }
  }
  uint8_t* tailStart() const { return reinterpret_cast<uint8_t*>(map + gran - kEdgeBytes); }
};

// Word-wise stirs of the plain buffer and both mirrored ends (mirrors below).
__global__ void edgeStirK(uint32_t* plain, uint32_t* head, uint32_t* tail, uint32_t salt) {
  const uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
  constexpr uint32_t kPlainWords = uint32_t(kPlainBytes / 4), kEdgeWords = uint32_t(kEdgeBytes / 4);
  if (k < kPlainWords) plain[k] = rotl(plain[k], 9) ^ hash32(k ^ salt);
  if (k < kEdgeWords) {
    head[k] = rotl(head[k], 11) ^ hash32(k + salt);
    tail[k] = rotl(tail[k], 13) ^ hash32(k ^ (salt * 3u));
  }
}
void edgeStirHost(EdgeMemory& m, uint32_t salt) {
  auto stir = [](std::vector<uint8_t>& bytes, int r, auto term) {
    for (size_t k = 0; k < bytes.size() / 4; ++k) {
      uint32_t v;
      std::memcpy(&v, &bytes[4 * k], 4);
      v = rotl(v, r) ^ term(uint32_t(k));
      std::memcpy(&bytes[4 * k], &v, 4);
    }
  };
  stir(m.plainH, 9, [&](uint32_t k) { return hash32(k ^ salt); });
  stir(m.headH, 11, [&](uint32_t k) { return hash32(k + salt); });
  stir(m.tailH, 13, [&](uint32_t k) { return hash32(k ^ (salt * 3u)); });
}

// What a tool could get wrong: copies and memsets whose bytes end exactly at
// the last byte of a mapping (or start at its first) with nothing mapped
// beyond, at every relative alignment: a copy kernel that reads an aligned
// word around a misaligned source, or stores 16 bytes at a time, must never
// touch a byte outside the range (the driver's own copy does not).
void copyEdgeGuard() {
  const char* name = "copy_edge_guard";
  const int dev = currentDevice();
  CUdevice cuDev = 0;
  CKD(cuDeviceGet(&cuDev, dev));
  int vmm = 0;
  CKD(cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, cuDev));
  if (!vmm) {
    std::printf("%s: SKIP no virtual memory management\n", name);
    return;
  }
  EdgeMemory m;
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t granularity = 0;
  CKD(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  m.gran = (2 * kEdgeBytes + granularity - 1) / granularity * granularity;  // both mirrored ends fit
  CKD(cuMemCreate(&m.phys, m.gran, &prop, 0));
  CKD(cuMemAddressReserve(&m.reserved, 3 * m.gran, 0, 0, 0));
  m.map = m.reserved + m.gran;  // nothing mapped in the thirds before and after
  CKD(cuMemMap(m.map, m.gran, 0, m.phys, 0));
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = dev;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CKD(cuMemSetAccess(m.map, m.gran, &access, 1));
  CK(cudaMalloc(reinterpret_cast<void**>(&m.plain), kPlainBytes));
  // Known bytes everywhere the scenario reads.
  m.plainH.resize(kPlainBytes);
  m.headH.resize(kEdgeBytes);
  m.tailH.resize(kEdgeBytes);
  for (size_t k = 0; k < kPlainBytes; ++k) m.plainH[k] = uint8_t(hash32(uint32_t(k) ^ 0x3760u));
  for (size_t k = 0; k < kEdgeBytes; ++k) {
    m.headH[k] = uint8_t(hash32(uint32_t(k) ^ 0x3761u));
    m.tailH[k] = uint8_t(hash32(uint32_t(k) ^ 0x3762u));
  }
  CK(cudaMemcpy(m.plain, m.plainH.data(), kPlainBytes, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(m.dev({EdgeRegion::Head, 0}), m.headH.data(), kEdgeBytes, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(m.tailStart(), m.tailH.data(), kEdgeBytes, cudaMemcpyHostToDevice));
  cudaStream_t S = nonBlockingStream();
  preload(edgeStirK);
  CK(cudaDeviceSynchronize());
  std::printf("%s: a mapping of %zu KiB between two unmapped ones\n", name, m.gran / 1024);
  auto check = [&](int i) {
    std::vector<uint8_t> got(kPlainBytes);
    CK(cudaMemcpy(got.data(), m.plain, kPlainBytes, cudaMemcpyDeviceToHost));
    for (size_t k = 0; k < kPlainBytes; ++k)
      if (got[k] != m.plainH[k]) mismatch(name, i, "plain byte " + std::to_string(k) + " differs from the mirror");
    got.resize(kEdgeBytes);
    CK(cudaMemcpy(got.data(), m.dev({EdgeRegion::Head, 0}), kEdgeBytes, cudaMemcpyDeviceToHost));
    for (size_t k = 0; k < kEdgeBytes; ++k)
      if (got[k] != m.headH[k]) mismatch(name, i, "head byte " + std::to_string(k) + " differs from the mirror");
    CK(cudaMemcpy(got.data(), m.tailStart(), kEdgeBytes, cudaMemcpyDeviceToHost));
    for (size_t k = 0; k < kEdgeBytes; ++k)
      if (got[k] != m.tailH[k])
        mismatch(name, i, "byte " + std::to_string(kEdgeBytes - k) + " before the end differs from the mirror");
    print("ceg_plain", i, hostDigest(m.plainH.data(), kPlainBytes));
    print("ceg_edges", i, hostDigest(m.headH.data(), kEdgeBytes) ^ hostDigest(m.tailH.data(), kEdgeBytes));
  };
  const unsigned stirBlocks = unsigned(kPlainBytes / 4 / kBlock);
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 37610u);
    edgeStirK<<<stirBlocks, kBlock, 0, S>>>(reinterpret_cast<uint32_t*>(m.plain),
                                            reinterpret_cast<uint32_t*>(m.dev({EdgeRegion::Head, 0})),
                                            reinterpret_cast<uint32_t*>(m.tailStart()), salt);
    CKL();
    edgeStirHost(m, salt);
    for (int p = 0; p < kEdgeCopies; ++p) {
      const size_t n = kEdgeCopySizes[p];
      // The moving side: every alignment in turn, a window per position.
      const size_t moving = size_t(p) * kWindowBytes + size_t((i * 7 + p * 3) % 64);
      const size_t headOff = size_t((i + p) % 16);
      EdgeSpot src{}, dst{};
      switch ((p + i / 16) % 5) {
        case 0:  // the source ends at the mapping's last byte
          src = {EdgeRegion::Tail, n};
          dst = {EdgeRegion::Plain, moving};
          break;
        case 1:  // the destination ends there
          src = {EdgeRegion::Plain, moving};
          dst = {EdgeRegion::Tail, n};
          break;
        case 2:  // the source starts at the mapping's first byte (or just after it)
          src = {EdgeRegion::Head, headOff};
          dst = {EdgeRegion::Plain, moving};
          break;
        case 3:  // the destination starts there
          src = {EdgeRegion::Plain, moving};
          dst = {EdgeRegion::Head, headOff};
          break;
        default:  // tail end to head start, inside the one mapping
          src = {EdgeRegion::Tail, n};
          dst = {EdgeRegion::Head, headOff};
          break;
      }
      if (p % 2 == 0)
        CK(cudaMemcpyAsync(m.dev(dst), m.dev(src), n, cudaMemcpyDeviceToDevice, S));
      else
        CKD(cuMemcpyDtoDAsync(dptr(m.dev(dst)), dptr(m.dev(src)), n, cu(S)));
      std::memcpy(m.host(dst), m.host(src), n);
    }
    // Memsets of 1-, 2- and 4-byte elements and a 2-D one that end at the
    // mapping's last byte, and one at its first byte: sizes fixed (a size
    // that changed every step would keep the step out of graphs), values new.
    const uint32_t v = hash32(salt ^ 0x77u);
    for (size_t n8 : kEdgeSet8) {
      const int value = int((v + n8) & 0xffu);
      CK(cudaMemsetAsync(m.dev({EdgeRegion::Tail, n8}), value, n8, S));
      std::memset(m.host({EdgeRegion::Tail, n8}), value, n8);
    }
    for (size_t n16 : kEdgeSet16) {
      const uint16_t value = uint16_t((v >> 8) + n16);
      CKD(cuMemsetD16Async(dptr(m.dev({EdgeRegion::Tail, 2 * n16})), value, n16, cu(S)));
      uint8_t* h = m.host({EdgeRegion::Tail, 2 * n16});
      for (size_t k = 0; k < n16; ++k) std::memcpy(h + 2 * k, &value, 2);
    }
    for (size_t n32 : kEdgeSet32) {
      const uint32_t value = v ^ uint32_t(n32);
      CKD(cuMemsetD32Async(dptr(m.dev({EdgeRegion::Tail, 4 * n32})), value, n32, cu(S)));
      uint8_t* h = m.host({EdgeRegion::Tail, 4 * n32});
      for (size_t k = 0; k < n32; ++k) std::memcpy(h + 4 * k, &value, 4);
    }
    {  // a 2-D memset whose last row ends at the mapping's last byte
      constexpr size_t width = 7, pitch = 40, height = 6, span = (height - 1) * pitch + width;
      const int value = int((v >> 16) & 0xffu);
      CK(cudaMemset2DAsync(m.dev({EdgeRegion::Tail, span}), pitch, value, width, height, S));
      uint8_t* h = m.host({EdgeRegion::Tail, span});
      for (size_t r = 0; r < height; ++r) std::memset(h + r * pitch, value, width);
    }
    CK(cudaMemsetAsync(m.dev({EdgeRegion::Head, 0}), int((v >> 24) & 0xffu), 13, S));
    std::memset(m.host({EdgeRegion::Head, 0}), int((v >> 24) & 0xffu), 13);
    if (at(i)) {
      CK(cudaStreamSynchronize(S));
      check(i);
    }
  }
  CK(cudaDeviceSynchronize());
  CKD(cuMemUnmap(m.map, m.gran));
  CKD(cuMemRelease(m.phys));
  CKD(cuMemAddressFree(m.reserved, 3 * m.gran));
  CK(cudaFree(m.plain));
}

// ================================================================ unseen_launch_attrs

constexpr int kProbeBlocks = kW / kBlock;  // 16 blocks: every cluster size used divides it
constexpr int kAttrForms = 4;
constexpr uint32_t kBlockRan = 0x10000u;

__host__ __device__ inline uint32_t probeWord(uint32_t old, const uint32_t* in, uint32_t salt, int k) {
  return rotl(old, 3) ^ (in[(uint32_t(k) * 13u + salt) % uint32_t(kW)] + salt);
}
// Words independent of how blocks are grouped; each block logs the cluster
// size and its rank in it (the special registers) and that it ran.
__global__ void clusterProbeK(uint32_t* out, const uint32_t* in, uint32_t* seen, uint32_t salt) {
  const int k = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (k < kW) out[k] = probeWord(out[k], in, salt, k);
  if (threadIdx.x == 0) {
    unsigned size = 0, rank = 0;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(size));
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    seen[blockIdx.x] = size | (rank << 8) | kBlockRan;
  }
}

// One launch's attributes, as the program chose them this step.
struct AttrChoice {
  unsigned cluster = 0;    // 0: no cluster attribute
  unsigned preferred = 0;  // 0: none; else twice the cluster
  bool domainMap = false;
  unsigned char mapDefault = 0, mapRemote = 0;
  int domain = -1;  // -1: no domain attribute
  int nvlink = -1;  // -1: no NVLink-centric scheduling attribute
  int carveout = -1;
};

// What a tool could get wrong: a launch's attribute list (with kinds no
// earlier round used) must reach the GPU as the program gave it: a kernel
// node made from one list and replayed for another shows in the cluster the
// blocks run in; an attribute a tool does not know must be kept, not dropped
// or refused.
void unseenLaunchAttrs() {
  const char* name = "unseen_launch_attrs";
  if (deviceAttribute(cudaDevAttrClusterLaunch) == 0) {
    std::printf("%s: SKIP no cluster launches\n", name);
    return;
  }
  cudaStream_t S = nonBlockingStream();
  Buf in(37701), out(37702);
  uint32_t* seen = zeroBuffer(size_t(g_iters) * kAttrForms * kProbeBlocks + kProbeBlocks);
  cudaFunction_t fn = nullptr;
  CK(cudaGetFuncBySymbol(&fn, reinterpret_cast<const void*>(clusterProbeK)));
  preload(clusterProbeK);
  preload(mix);
  CK(cudaDeviceSynchronize());
  // Launches form f (0: cudaLaunchKernelEx, 1 and 3: cudaLaunchKernelExC, 2:
  // cuLaunchKernelEx) with the attributes of `c`; the call's code.
  auto launch = [&](int form, const AttrChoice& c, uint32_t* seenAt, uint32_t salt) -> int {
    uint32_t* o = out.d;
    const uint32_t* src = in.d;
    if (form == 2) {
      CUlaunchAttribute at[4];
      std::memset(at, 0, sizeof at);
      unsigned n = 0;
      if (c.cluster) {
        at[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        at[n].value.clusterDim.x = c.cluster;
        at[n].value.clusterDim.y = at[n].value.clusterDim.z = 1;
        ++n;
      }
      if (c.preferred) {
        at[n].id = CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION;
        at[n].value.preferredClusterDim.x = c.preferred;
        at[n].value.preferredClusterDim.y = at[n].value.preferredClusterDim.z = 1;
        ++n;
      }
      if (c.carveout >= 0) {
        at[n].id = CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT;
        at[n].value.sharedMemCarveout = unsigned(c.carveout);
        ++n;
      }
      if (c.nvlink >= 0) {
        at[n].id = CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING;
        at[n].value.nvlinkUtilCentricScheduling = unsigned(c.nvlink);
        ++n;
      }
      CUlaunchConfig cfg = {};
      cfg.gridDimX = kProbeBlocks;
      cfg.gridDimY = cfg.gridDimZ = 1;
      cfg.blockDimX = kBlock;
      cfg.blockDimY = cfg.blockDimZ = 1;
      cfg.hStream = cu(S);
      cfg.attrs = at;
      cfg.numAttrs = n;
      void* args[] = {&o, &src, &seenAt, &salt};
      return int(cuLaunchKernelEx(&cfg, reinterpret_cast<CUfunction>(fn), args, nullptr));
    }
    cudaLaunchAttribute at[5];
    std::memset(at, 0, sizeof at);
    unsigned n = 0;
    if (c.cluster) {
      at[n].id = cudaLaunchAttributeClusterDimension;
      at[n].val.clusterDim.x = c.cluster;
      at[n].val.clusterDim.y = at[n].val.clusterDim.z = 1;
      ++n;
    }
    if (c.preferred) {
      at[n].id = cudaLaunchAttributePreferredClusterDimension;
      at[n].val.preferredClusterDim.x = c.preferred;
      at[n].val.preferredClusterDim.y = at[n].val.preferredClusterDim.z = 1;
      ++n;
    }
    if (c.domainMap) {
      at[n].id = cudaLaunchAttributeMemSyncDomainMap;
      at[n].val.memSyncDomainMap.default_ = c.mapDefault;
      at[n].val.memSyncDomainMap.remote = c.mapRemote;
      ++n;
    }
    if (c.domain >= 0) {
      at[n].id = cudaLaunchAttributeMemSyncDomain;
      at[n].val.memSyncDomain = c.domain ? cudaLaunchMemSyncDomainRemote : cudaLaunchMemSyncDomainDefault;
      ++n;
    }
    if (c.nvlink >= 0) {
      at[n].id = cudaLaunchAttributeNvlinkUtilCentricScheduling;
      at[n].val.nvlinkUtilCentricScheduling = unsigned(c.nvlink);
      ++n;
    }
    if (c.carveout >= 0 && n < 5) {
      at[n].id = cudaLaunchAttributePreferredSharedMemoryCarveout;
      at[n].val.sharedMemCarveout = unsigned(c.carveout);
      ++n;
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(kProbeBlocks);
    cfg.blockDim = dim3(kBlock);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = S;
    cfg.attrs = at;
    cfg.numAttrs = n;
    if (form == 0) return int(keep(cudaLaunchKernelEx(&cfg, clusterProbeK, o, src, seenAt, salt)));
    void* args[] = {&o, &src, &seenAt, &salt};
    return int(keep(cudaLaunchKernelExC(&cfg, reinterpret_cast<const void*>(clusterProbeK), args)));
  };
  // Each new kind alone, before the loop (eager everywhere; codes printed).
  uint32_t* probeSeen = seen + size_t(g_iters) * kAttrForms * kProbeBlocks;
  {
    const char* const kinds[4] = {"preferred cluster 4 over 2", "memory sync domain map", "NVLink-centric",
                                  "carveout 50"};
    AttrChoice alone[4];
    alone[0].cluster = 2;
    alone[0].preferred = 4;
    alone[1].domainMap = true;
    alone[1].mapDefault = 1;
    alone[1].mapRemote = 1;
    alone[2].nvlink = 1;
    alone[3].carveout = 50;
    for (int k = 0; k < 4; ++k) {
      const int code = launch(1, alone[k], probeSeen, 0x37700u + uint32_t(k));
      const cudaError_t sync = keep(cudaStreamSynchronize(S));
      if (code == 0)
        for (int w = 0; w < kW; ++w)
          out.h[size_t(w)] = probeWord(out.h[size_t(w)], in.h.data(), 0x37700u + uint32_t(k), w);
      std::printf("%s: alone, %s: code %d, synchronize %d\n", name, kinds[k], code, int(sync));
    }
  }
  const unsigned clusterOf[3] = {1, 2, 4};
  const int carveouts[4] = {0, 25, 50, 100};
  Digest codes;
  int taken[kAttrForms] = {0, 0, 0, 0}, preferredGrouped = 0;
  std::vector<AttrChoice> chosen(size_t(g_iters) * kAttrForms);
  std::vector<int> codeOf(size_t(g_iters) * kAttrForms, -1);
  int checkedUpTo = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 37710u);
    mixOn(S, in, out, salt);
    AttrChoice c[kAttrForms];
    c[0].cluster = clusterOf[i % 3];
    c[0].domainMap = true;
    c[0].mapDefault = (i / 4) % 2;
    c[0].mapRemote = (i / 8) % 2;
    c[0].domain = (i / 3) % 2;
    c[1].cluster = clusterOf[(i / 2) % 3];
    c[1].preferred = i % 2 == 0 ? 2 * c[1].cluster : 0;
    c[1].nvlink = (i / 5) % 2;
    c[2].cluster = clusterOf[(i / 5 + 1) % 3];
    c[2].preferred = i % 3 != 1 ? 2 * c[2].cluster : 0;
    c[2].carveout = carveouts[(i / 7) % 4];
    c[3].nvlink = (i / 6) % 2;
    c[3].carveout = carveouts[(i / 11) % 4];
    c[3].domainMap = irregular(i, 3771, 3);
    c[3].mapRemote = 1;
    for (int f = 0; f < kAttrForms; ++f) {
      const size_t slot = size_t(i) * kAttrForms + size_t(f);
      const uint32_t ls = salt ^ (uint32_t(f + 1) * 0x01000193u);
      const int code = launch(f, c[f], seen + slot * kProbeBlocks, ls);
      chosen[slot] = c[f];
      codeOf[slot] = code;
      addCode(codes, code);
      if (code == 0) {
        ++taken[f];
        for (int w = 0; w < kW; ++w) out.h[size_t(w)] = probeWord(out.h[size_t(w)], in.h.data(), ls, w);
      }
    }
    if (at(i)) {
      CK(cudaStreamSynchronize(S));
      const std::vector<uint32_t> log = fetch<uint32_t>(seen, size_t(i + 1) * kAttrForms * kProbeBlocks);
      for (int s = checkedUpTo; s < (i + 1) * kAttrForms; ++s) {
        const AttrChoice& a = chosen[size_t(s)];
        const int step = s / kAttrForms, form = s % kAttrForms;
        bool grouped = false;
        for (int b = 0; b < kProbeBlocks; ++b) {
          const uint32_t w = log[size_t(s) * kProbeBlocks + size_t(b)];
          const std::string where = "launch " + std::to_string(form) + " block " + std::to_string(b);
          if (codeOf[size_t(s)] != 0) {
            if (w != 0) mismatch(name, step, where + " ran, but its call was refused");
            continue;
          }
          if (!(w & kBlockRan)) mismatch(name, step, where + " did not run");
          const unsigned size = w & 0xffu, rank = (w >> 8) & 0xffu;
          const unsigned regular = a.cluster ? a.cluster : 1u;
          const bool legal = size == regular || (a.preferred && size == a.preferred);
          if (!legal || rank >= size)
            mismatch(name, step,
                     where + " ran in a cluster of " + std::to_string(size) + " (rank " + std::to_string(rank) +
                         "); the launch asked for " + std::to_string(regular) +
                         (a.preferred ? " preferring " + std::to_string(a.preferred) : std::string()));
          grouped = grouped || (a.preferred && size == a.preferred);
        }
        preferredGrouped += grouped;
      }
      checkedUpTo = (i + 1) * kAttrForms;
      in.check("ula", "in", i);
      out.check("ula", "out", i);
      print("ula_codes", i, codes.h);
    }
  }
  CK(cudaDeviceSynchronize());
  std::printf("%s: launches taken by form %d %d %d %d\n", name, taken[0], taken[1], taken[2], taken[3]);
  // Whether the device grouped blocks in preferred clusters is its own
  // best-effort choice: stderr only.
  std::fprintf(stderr, "%s: launches grouped in preferred clusters: %d\n", name, preferredGrouped);
}

// ================================================================ stretch_with_boundaries

constexpr int kZeroCopyWords = 64;
constexpr int kPinnedWords = 256;

__host__ __device__ inline uint32_t zeroCopyWord(const uint32_t* c, uint32_t salt, int k) {
  return c[(uint32_t(k) * 37u + salt) % uint32_t(kW)] ^ rotl(salt, k & 31);
}
__global__ void zeroCopyK(uint32_t* zc, const uint32_t* c, uint32_t salt) {
  const int k = int(threadIdx.x);
  if (k < kZeroCopyWords) zc[k] = zeroCopyWord(c, salt, k);
}
__host__ __device__ inline uint32_t flagWord(uint32_t old, uint32_t flag, uint32_t salt, int k) {
  return rotl(old, 3) ^ (flag * 0x9e3779b1u + uint32_t(k) + salt);
}
__global__ void flagMixK(uint32_t* a, const uint32_t* flag, uint32_t salt) {
  const int k = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (k < kW) a[k] = flagWord(a[k], *flag, salt, k);
}
__host__ __device__ inline uint32_t evalWord(uint32_t old, const uint32_t* a, uint32_t salt, int k) {
  return rotl(old, 7) + (a[(uint32_t(k) * 3u + salt) % uint32_t(kW)] ^ salt);
}
// An eval pass kernel over the first n words (n: the drawn grid's threads).
__global__ void evalK(uint32_t* ev, const uint32_t* a, int n, uint32_t salt) {
  const int k = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (k < n) ev[k] = evalWord(ev[k], a, salt, k);
}

// A host function's copy of the zero-copy words, as it found them.
struct ZeroCopyRead {
  const uint32_t* from = nullptr;
  uint32_t* to = nullptr;
  std::atomic<int> ran{0};
};
void CUDART_CB readZeroCopy(void* p) {
  auto* r = static_cast<ZeroCopyRead*>(p);
  for (int k = 0; k < kZeroCopyWords; ++k) r->to[k] = r->from[k];
  r->ran.fetch_add(1);
}

// What a tool could get wrong: a ~37-op run on two streams that recurs every
// step but never twice in a row (an eval pass of drawn shapes follows it), so
// a tool builds it as a stretch; inside it four ops the tool leaves eager (a
// 2-D device copy, a host function, a stream memory write, a copy into pinned
// memory) that depend on held kernels of their own and the other stream and
// that held kernels after them depend on.
void stretchWithBoundaries() {
  const char* name = "stretch_with_boundaries";
  cudaStream_t S = nonBlockingStream(), T = nonBlockingStream(), E = nonBlockingStream();
  cudaEvent_t e1 = untimedEvent(), e2 = untimedEvent(), eS = untimedEvent(), eE = untimedEvent();
  Buf a(37801), b(37802), c(37803), d(37804), g0(37805), g1(37806), t0(37807), t1(37808), ev(37809), ev2(37810);
  uint32_t* flag = zeroBuffer(1);
  uint32_t flagH = 0;
  Mapped zc = mappedBuffer(kZeroCopyWords, 0);
  std::vector<uint32_t> zcH(kZeroCopyWords, 0u);
  uint32_t* pinned = nullptr;
  CK(cudaMallocHost(reinterpret_cast<void**>(&pinned), size_t(g_iters) * kPinnedWords * 4));
  std::vector<uint32_t> pinnedWant(size_t(g_iters) * kPinnedWords, 0u);
  std::unique_ptr<ZeroCopyRead[]> reads(new ZeroCopyRead[size_t(g_iters)]);
  std::vector<uint32_t> seenAll(size_t(g_iters) * kZeroCopyWords, 0u), seenWant(seenAll.size(), 0u);
  preload(mix);
  preload(mix2);
  preload(zeroCopyK);
  preload(flagMixK);
  preload(evalK);
  CK(cudaDeviceSynchronize());
  uint64_t lcg = 0x3780u;
  auto draw = [&](uint32_t below) {
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(lcg >> 33) % below;
  };
  int evalKernels = 0, evalMemsets = 0, checkedUpTo = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 37810u);
    // The stretch. S: after the last eval pass, a chain ending in a.
    if (i > 0) CK(cudaStreamWaitEvent(S, eE, 0));
    mixOn(S, g0, a, salt);
    mixOn(S, g1, g0, salt ^ 1u);
    mixOn(S, b, g1, salt ^ 2u);
    mixOn(S, g0, b, salt ^ 3u);
    mixOn(S, g1, g0, salt ^ 4u);
    mixOn(S, a, g1, salt ^ 5u);
    CK(cudaEventRecord(e1, S));
    // T: reads a, a chain ending in c, the zero-copy words, a 2-D copy into d.
    CK(cudaStreamWaitEvent(T, e1, 0));
    mixOn(T, c, a, salt ^ 6u);
    mixOn(T, t0, c, salt ^ 7u);
    mixOn(T, t1, t0, salt ^ 8u);
    mixOn(T, c, t1, salt ^ 9u);
    mixOn(T, t0, c, salt ^ 10u);
    mixOn(T, c, t0, salt ^ 11u);
    zeroCopyK<<<1, kZeroCopyWords, 0, T>>>(zc.dev, c.d, salt ^ 12u);
    CKL();
    for (int k = 0; k < kZeroCopyWords; ++k) zcH[size_t(k)] = zeroCopyWord(c.h.data(), salt ^ 12u, k);
    const int off = int(hash32(salt ^ 13u) % uint32_t(kW - 8 * 64));
    // 8 rows of 32 words: c's rows of 64 words into d's rows of 128.
    CK(cudaMemcpy2DAsync(d.d + 64, 128 * 4, c.d + off, 64 * 4, 32 * 4, 8, cudaMemcpyDeviceToDevice, T));
    for (int r = 0; r < 8; ++r)
      for (int k = 0; k < 32; ++k) d.h[size_t(64 + r * 128 + k)] = c.h[size_t(off + r * 64 + k)];
    CK(cudaEventRecord(e2, T));
    // S: work of its own, then the join, the host function and the rest.
    mixOn(S, b, g1, salt ^ 14u);
    mixOn(S, g0, b, salt ^ 15u);
    mixOn(S, g1, g0, salt ^ 16u);
    mixOn(S, b, g1, salt ^ 17u);
    mixOn(S, g0, b, salt ^ 18u);
    mixOn(S, g1, g0, salt ^ 19u);
    CK(cudaStreamWaitEvent(S, e2, 0));
    ZeroCopyRead& rd = reads[size_t(i)];
    rd.from = zc.host;
    rd.to = seenAll.data() + size_t(i) * kZeroCopyWords;
    std::copy(zcH.begin(), zcH.end(), seenWant.begin() + std::ptrdiff_t(size_t(i) * kZeroCopyWords));
    CK(cudaLaunchHostFunc(S, readZeroCopy, &rd));
    mix2On(S, a, c, d, salt ^ 20u);
    mixOn(S, g0, a, salt ^ 21u);
    mixOn(S, g1, g0, salt ^ 22u);
    mixOn(S, g0, g1, salt ^ 23u);
    mixOn(S, g1, g0, salt ^ 24u);
    CKD(cuStreamWriteValue32(cu(S), dptr(flag), cuuint32_t(i + 1), 0));
    flagH = uint32_t(i + 1);
    flagMixK<<<kWGrid, kBlock, 0, S>>>(b.d, flag, salt ^ 25u);
    CKL();
    for (int k = 0; k < kW; ++k) b.h[size_t(k)] = flagWord(b.h[size_t(k)], flagH, salt ^ 25u, k);
    mixOn(S, g0, b, salt ^ 26u);
    mixOn(S, g1, g0, salt ^ 27u);
    mixOn(S, b, g1, salt ^ 28u);
    const int poff = int(hash32(salt ^ 29u) % uint32_t(kW - kPinnedWords));
    CK(cudaMemcpyAsync(pinned + size_t(i) * kPinnedWords, b.d + poff, kPinnedWords * 4, cudaMemcpyDeviceToHost, S));
    std::copy(b.h.begin() + poff, b.h.begin() + poff + kPinnedWords,
              pinnedWant.begin() + std::ptrdiff_t(size_t(i) * kPinnedWords));
    CK(cudaEventRecord(eS, S));
    // The eval pass: drawn anew every step.
    CK(cudaStreamWaitEvent(E, eS, 0));
    const int kernels = 2 + int(draw(6));
    for (int j = 0; j < kernels; ++j) {
      const int blocks = 1 + int(draw(16)), n = blocks * kBlock;
      const uint32_t es = salt ^ (0x100u + uint32_t(j));
      evalK<<<blocks, kBlock, 0, E>>>(ev.d, a.d, n, es);
      CKL();
      for (int k = 0; k < n; ++k) ev.h[size_t(k)] = evalWord(ev.h[size_t(k)], a.h.data(), es, k);
    }
    evalKernels += kernels;
    if (draw(2)) {
      const size_t bytes = 4 * (1 + size_t(draw(2000)));
      const int value = int(draw(256));
      CK(cudaMemsetAsync(ev2.d, value, bytes, E));
      memsetHost(ev2.h, 0, value, bytes);
      ++evalMemsets;
    }
    CK(cudaEventRecord(eE, E));
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      for (int s = checkedUpTo; s <= i; ++s) {
        if (reads[size_t(s)].ran.load() != 1) mismatch(name, s, "the host function did not run exactly once");
        expectWords("swb_host_function_saw", s, seenAll.data() + size_t(s) * kZeroCopyWords,
                    seenWant.data() + size_t(s) * kZeroCopyWords, kZeroCopyWords);
        expectWords("swb_pinned_copy", s, pinned + size_t(s) * kPinnedWords,
                    pinnedWant.data() + size_t(s) * kPinnedWords, kPinnedWords);
      }
      checkedUpTo = i + 1;
      a.check("swb", "a", i);
      b.check("swb", "b", i);
      c.check("swb", "c", i);
      d.check("swb", "d", i);
      g1.check("swb", "g1", i);
      ev.check("swb", "ev", i);
      ev2.check("swb", "ev2", i);
      print("swb_seen", i, hostDigest(seenWant.data(), size_t(i + 1) * kZeroCopyWords * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  std::printf("%s: eval kernels %d, eval memsets %d\n", name, evalKernels, evalMemsets);
  CK(cudaFreeHost(pinned));
  CK(cudaFreeHost(zc.host));
}

const Scenario kScenarios[] = {
    {"host_pool_blocks", hostPoolBlocks},
    {"layered_cubemap_copies", layeredCubemapCopies},
    {"hole_stream_rotation", holeStreamRotation},
    {"device_node_updates", deviceNodeUpdates},
    {"stack_limit_epochs", stackLimitEpochs},
    {"copy_edge_guard", copyEdgeGuard},
    {"unseen_launch_attrs", unseenLaunchAttrs},
    {"stretch_with_boundaries", stretchWithBoundaries},
};

}  // namespace

int main(int argc, char** argv) { return runScenarios(argc, argv, kScenarios); }
