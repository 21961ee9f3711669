// traps_r11: an eleventh red-team round of odd but legal CUDA C++ patterns in
// the style of traps_r6.cu and traps_r4.cu (trap_common.cuh), aimed at what
// a tool that holds launches back, captures the repeating ones into graphs
// of its own, patches their parameters and answers some calls itself could
// get wrong: host syncs and queries that reach held work only through a
// chain of cross-stream events, state carried across launches in device
// globals, node values that cycle back, stream memory operations in
// batches, the program's own explicit graphs with event, host, memcpy and
// child nodes, tensor-map parameters, short loops whose length changes,
// stream-ordered host-to-host copies, managed-memory discards, a
// quick_exit with work held, variants sharing a prefix, steps made only of
// copies and memsets, and a tree of forks and joins issued in two orders.
// Each scenario is deterministic in eager (no races: integer kernels, every
// cross-stream access ordered by an event, a stream-ordered op or a host
// barrier) and prints digests of its buffers and of what the host saw;
// check_traps.py requires the same output under graft. A scenario whose
// feature this machine lacks prints a SKIP line and stops.
//
//   mapped_param_downstream  kernels take pointers into zero-copy (mapped)
//                         host memory as launch parameters, the window moving
//                         every step; stream A reads the input window, B
//                         waits on A's event, C on B's and writes the output
//                         window; the host then waits ONLY for C (a stream
//                         synchronize, an event synchronize, or a synchronize
//                         of a fourth stream D that waited on C, in turn),
//                         reads the output and rewrites the next input window.
//   query_downstream_only the same chain, but the host learns completion only
//                         by polling: cudaEventQuery of an event recorded on a
//                         stream whose only ops are a wait and that record,
//                         cudaStreamQuery of that stream, or of the middle
//                         stream; then it reads mapped output and rewrites
//                         mapped input with no synchronize at all.
//   last_block_reduce     a "last block done" reduction: every block writes a
//                         partial, and the block that takes the last ticket
//                         of a __device__ counter (atomicInc, which wraps back
//                         to 0 for the next launch) folds them in order; one
//                         launch site whose grid goes from 1 block to 131072
//                         (1-D and 2-D) and block size from 32 to 1024. The
//                         counter and a block count live in device globals no
//                         parameter names.
//   patch_cycle           twelve launches of one kernel with one shape per
//                         step whose buffer pointers and salts cycle with
//                         period 3 (odd nodes), change every 5th step (even
//                         nodes) or every step (the last), plus memsets and a
//                         device copy whose addresses and values cycle with
//                         periods 2, 3 and 4: a node's value comes back to the
//                         one it was built with after being patched away.
//   batch_mem_ops         cuStreamBatchMemOp between two streams: 64- and
//                         32-bit writes, a memory barrier op on some steps,
//                         64-bit GEQ and EQ, 32-bit EQ, AND and NOR waits, a
//                         flush where the device has it; cuStreamWriteValue64
//                         / cuStreamWaitValue64 for the way back; on some
//                         steps a one-op batch the driver may refuse (a write
//                         without a memory barrier), its code digested; the
//                         parameter array scribbled over after each call.
//   program_graph_events  the program's own graph built with the explicit node
//                         API: an event wait node, a kernel node, an event
//                         record node, a 1-D memcpy node, a host node and a
//                         child graph (a memset); every step the wait and
//                         record events swap (cudaGraphExecEvent*SetEvent),
//                         the kernel's salt, the memcpy's destination, the
//                         host node's argument and the child graph are set on
//                         the executable graph, which is launched on a blocking
//                         stream or on the legacy stream between eager work
//                         that records the event it waits on and waits on the
//                         event it records.
//   tma_tensor_map        a kernel taking a __grid_constant__ CUtensorMap (64-
//                         byte aligned, after a 4-byte parameter: 60 bytes of
//                         padding) loads tiles with the bulk tensor copy; the
//                         map is encoded again every step for another of three
//                         tensors, the box height changes on irregular steps,
//                         and the tile origins go out of bounds (zero fill).
//   unrolled_plateaus     a loop of one to seven ops per step with no sync
//                         (a loop short enough to be replayed unrolled) whose
//                         length changes every 37 steps, with an extra memset
//                         on irregular steps, salts changing every op.
//   host_to_host_chain    stream-ordered host-to-host copies: a kernel writes
//                         mapped pinned memory, cudaMemcpyAsync HostToHost
//                         into other pinned memory, a cudaMemcpyDefault copy
//                         into a registered malloc'ed buffer at a moving
//                         offset, a copy from there to the device, a copy
//                         back into mapped memory that the next kernel reads
//                         through its device pointer.
//   managed_discard_prefetch  managed memory discarded every step
//                         (cudaMemDiscardBatchAsync, CUDA 13) once the kernel
//                         that read it ran and before the next one rewrites
//                         it, batched prefetches to the device, a combined
//                         discard and prefetch, a prefetch to the host after
//                         which the host reads and writes the memory.
//   quick_exit_held       the loop, then more steps with no synchronize and
//                         std::quick_exit: no atexit handler or static
//                         destructor runs (a tool's exit hooks neither), only
//                         an at_quick_exit handler, which synchronizes, prints
//                         and leaves more work pending at _Exit.
//   shared_prefix_branch  a step of a common prefix, a one-word read-back and
//                         a synchronize, then one of three branches chosen
//                         from the value read (every 7th step without the
//                         read-back), two of which begin with the same kernel
//                         in the same shape, then a common suffix.
//   copies_only_streams   steps made of nothing but memsets (8-, 16- and
//                         32-bit) and device copies at moving offsets and
//                         alignments, chained across three streams by events
//                         and back to the first: no kernel of the program.
//   fork_tree             a binary tree of seven streams: each forks its two
//                         children by an event, they compute and join back
//                         by events, up to the root; the same dependencies
//                         issued breadth-first on even steps and depth-first
//                         on odd ones, with two sets of events switching every
//                         three steps.
//
//   traps_r11 NAME [--iters N]     one scenario (see kScenarios)
//   traps_r11 --list               the scenario names
//
// Built like traps_r6 (-rdc=true -lcudadevrt) and linked to libcuda (-lcuda:
// stream memory operations, tensor maps):
//   nvcc -O2 -std=c++17 -arch=sm_90 -rdc=true -o traps_r11 traps_r11.cu -lcudadevrt -lcuda

#include <cuda/barrier>

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
#include "trap_helpers.cuh"

namespace {

// ---------------------------------------------------------------- helpers (and trap_helpers.cuh)

// Polls `query` until it stops saying cudaErrorNotReady (at most 20 s, then
// the scenario fails: a tool that never issues what the poll waits for).
template <typename Q>
void pollUntilDone(Q query, const char* what, int step) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    const cudaError_t r = query();
    if (r == cudaSuccess) break;
    if (r != cudaErrorNotReady) {
      std::printf("FAIL %s at step %d: %s\n", what, step, cudaGetErrorName(r));
      std::exit(1);
    }
    if (std::chrono::steady_clock::now() > until) {
      std::printf("FAIL %s at step %d: still not ready after 20 s\n", what, step);
      std::exit(1);
    }
    std::this_thread::yield();
  }
  cudaGetLastError();  // a "not ready" must not stay behind as the last error
}

// ---------------------------------------------------------------- kernels

// Spins about `cycles` clock cycles, then mixes: a launch that starts before
// the work it should wait for has finished reads other values.
__global__ void slowMix(uint32_t* dst, const uint32_t* src, int n, uint32_t salt, long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 3) ^ (src[(k * 11 + 3) % n] + salt + uint32_t(k));
}

// dst mixes with a window of (mapped) memory the parameter points at.
__global__ void readWindow(uint32_t* dst, const uint32_t* win, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 5) ^ (win[k] + salt + uint32_t(k));
}

// Writes a window of (mapped) memory from two device buffers.
__global__ void writeWindow(uint32_t* win, const uint32_t* a, const uint32_t* b, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) win[k] = a[k] * 2654435761u + rotl(b[(k * 3 + 1) % n], 9) + salt;
  __threadfence_system();
}

// dst mixes with two sources at element k only (no cross-block reads).
__global__ void fold2(uint32_t* dst, const uint32_t* a, const uint32_t* b, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k] ^ a[k], 7) + rotl(b[k], 13) + salt;
}

// ---------------------------------------------------------------- mapped_param_downstream

// What a tool could get wrong: the only host barrier of a step names stream
// C (or an event on C, or a stream D that waited on C); the reads of mapped
// memory that the host then rewrites happened on stream A, two event hops
// up. A tool holding A's or B's launches (or replaying them in a graph not
// yet launched) must issue them for that barrier, or the host's rewrite of
// the input window races with the kernel reading it, and the output window
// it reads is stale. The window pointers are launch parameters that change
// every step (patched values pointing into host memory).
// Eagerly deterministic: C's work waits on B's event, B's on A's, so the
// barrier on C (or on D, which waited on C's event) implies every kernel
// that reads the input or writes the output window finished; the work A
// does after its record touches device memory only.
void mappedParamDownstream() {
  constexpr int kIn = 4 * kN, kOut = 3 * kN;
  Mapped in = mappedBuffer(kIn, 11001), out = mappedBuffer(kOut, 11002);
  cudaStream_t A = nonBlockingStream(), B = nonBlockingStream(), C = nonBlockingStream(), D = nonBlockingStream();
  cudaEvent_t eA = untimedEvent(), eB = untimedEvent(), eC = untimedEvent();
  uint32_t *a = deviceBuffer(11003), *b = deviceBuffer(11004), *c = deviceBuffer(11005), *side = deviceBuffer(11006);
  Digest seen;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i);
    const size_t inOff = (size_t(i) * 1031u) % size_t(kIn - kN);
    const size_t outOff = (size_t(i) * 777u) % size_t(kOut - kN);
    readWindow<<<kGrid, kBlock, 0, A>>>(a, in.dev + inOff, kN, u);
    mix<<<kGrid, kBlock, 0, A>>>(a, c, kN, u + 1);
    CK(cudaEventRecord(eA, A));
    mix<<<kGrid, kBlock, 0, A>>>(side, a, kN, u + 2);  // after the record: no barrier waits for it
    CK(cudaStreamWaitEvent(B, eA, 0));
    mix<<<kGrid, kBlock, 0, B>>>(b, a, kN, u + 3);
    CK(cudaEventRecord(eB, B));
    CK(cudaStreamWaitEvent(C, eB, 0));
    writeWindow<<<kGrid, kBlock, 0, C>>>(out.dev + outOff, a, b, kN, u + 4);
    CK(cudaEventRecord(eC, C));
    CKL();
    switch (i % 3) {
      case 0: CK(cudaStreamSynchronize(C)); break;
      case 1: CK(cudaEventSynchronize(eC)); break;
      default:
        CK(cudaStreamWaitEvent(D, eC, 0));
        CK(cudaStreamSynchronize(D));
        break;
    }
    seen.add(out.host + outOff, kN * 4);
    // The next step's input window, from what the host saw.
    const size_t nextOff = (size_t(i + 1) * 1031u) % size_t(kIn - kN);
    for (int k = 0; k < kN; ++k) in.host[nextOff + k] = hash32(uint32_t(seen.h) + uint32_t(k) * 2654435761u);
    if (at(i)) {
      CK(cudaStreamSynchronize(A));
      print("seen", i, seen.h);
      print("abc", i, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(side, kN * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, seen.h ^ hostDigest(out.host, kOut * 4) ^ deviceDigest(side, kN * 4));
}

// ---------------------------------------------------------------- query_downstream_only

// What a tool could get wrong: the host never synchronizes; it polls a query
// of work downstream of the work it depends on: an event recorded on stream
// C right after C's wait on B (C runs nothing else), C itself, or B. A tool
// that answers "not ready" for held work must notice the poll and issue what
// it holds, including A's and B's launches the record depends on through
// events, or the poll never ends; one that answers "done" from its own
// bookkeeping while the work is still held lets the host read stale mapped
// output and overwrite input a kernel has not read yet.
// Eagerly deterministic: the polled event or stream completes only after
// B's kernels (which wrote the mapped output with a system fence) and A's
// (which read the mapped input); the number of polls is never printed.
void queryDownstreamOnly() {
  Mapped in = mappedBuffer(kN, 11101), out = mappedBuffer(kN, 11102);
  cudaStream_t A = nonBlockingStream(), B = nonBlockingStream(), C = nonBlockingStream();
  cudaEvent_t eA = untimedEvent(), eB = untimedEvent(), eC = untimedEvent();
  uint32_t *a = deviceBuffer(11103), *b = deviceBuffer(11104), *c = deviceBuffer(11105);
  preload(slowMix);
  Digest seen;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i);
    readWindow<<<kGrid, kBlock, 0, A>>>(a, in.dev, kN, u);
    slowMix<<<kGrid, kBlock, 0, A>>>(a, c, kN, u + 1, 20000);
    CK(cudaEventRecord(eA, A));
    CK(cudaStreamWaitEvent(B, eA, 0));
    mix<<<kGrid, kBlock, 0, B>>>(b, a, kN, u + 2);
    writeWindow<<<kGrid, kBlock, 0, B>>>(out.dev, a, b, kN, u + 3);
    CK(cudaEventRecord(eB, B));
    CK(cudaStreamWaitEvent(C, eB, 0));
    CK(cudaEventRecord(eC, C));
    CKL();
    switch (i % 3) {
      case 0: pollUntilDone([&] { return cudaEventQuery(eC); }, "event query", i); break;
      case 1: pollUntilDone([&] { return cudaStreamQuery(C); }, "stream query C", i); break;
      default: pollUntilDone([&] { return cudaStreamQuery(B); }, "stream query B", i); break;
    }
    const volatile uint32_t* o = out.host;
    uint32_t fold = 0;
    for (int k = 0; k < kN; ++k) fold = rotl(fold, 1) ^ o[k];
    seen.add(fold);
    for (int k = 0; k < kN; ++k) in.host[k] = hash32(fold + uint32_t(k));
    if (at(i)) {
      print("seen", i, seen.h);
      CK(cudaStreamSynchronize(A));
      print("ab", i, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, seen.h ^ hostDigest(out.host, kN * 4));
}

// ---------------------------------------------------------------- last_block_reduce

__device__ unsigned int g_lbTicket;        // wraps to 0 at the end of each launch
__device__ unsigned long long g_lbBlocks;  // blocks that ever ran
constexpr int kLbMaxBlocks = 1 << 17;

// Every block folds its elements into partial[block]; the block that takes
// the last ticket folds the partials in block order into out[slot].
__global__ void lastBlockReduce(const uint32_t* src, int n, uint32_t* partial, uint32_t* out, int slot,
                                uint32_t salt) {
  __shared__ uint32_t s[1024];
  __shared__ bool last;
  const unsigned nb = gridDim.x * gridDim.y;
  const unsigned bid = blockIdx.y * gridDim.x + blockIdx.x;
  const unsigned stride = nb * blockDim.x;
  uint32_t acc = 0;
  for (unsigned k = bid * blockDim.x + threadIdx.x; k < unsigned(n); k += stride) acc += hash32(src[k] ^ salt);
  s[threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t t = bid * 0x9e3779b9u;
    for (unsigned j = 0; j < blockDim.x; ++j) t = rotl(t, 5) ^ s[j];
    partial[bid] = t;
    __threadfence();
    const unsigned ticket = atomicInc(&g_lbTicket, nb - 1);
    last = ticket == nb - 1;
    atomicAdd(&g_lbBlocks, 1ull);
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  const unsigned per = (nb + blockDim.x - 1) / blockDim.x;
  const unsigned lo = threadIdx.x * per, hi = min(nb, lo + per);
  uint32_t t = 0;
  for (unsigned j = lo; j < hi; ++j) t = t * 31u + __ldcg(&partial[j]);
  s[threadIdx.x] = t;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t r = nb * 0x85ebca6bu + blockDim.x;
    for (unsigned j = 0; j < blockDim.x; ++j) r = rotl(r, 3) ^ s[j];
    out[slot] = rotl(out[slot], 7) + r;
  }
}

// What a tool could get wrong: the kernel's state (a ticket counter that
// must be back at 0 when each launch ends, and a count of blocks) lives in
// __device__ globals no parameter names, so a launch made twice, dropped,
// or made with another grid than the one asked for (graphs keyed on the
// kernel but not on its grid) leaves the counter off and every later result
// wrong. The grid at one call site goes from 1 block to 131072 (1-D and
// 2-D, block sizes 32 to 1024), a shape change at every step; a second
// stream works beside it, forked and joined by events.
// Eagerly deterministic: the launches are serialized on one stream, the
// last block is whichever takes the last ticket but its fold reads the
// partials in block order (each published with a fence before the ticket),
// so out[] does not depend on which block it is.
void lastBlockReduceScenario() {
  cudaStream_t s = nonBlockingStream(), t = nonBlockingStream();
  cudaEvent_t fork = untimedEvent(), join = untimedEvent();
  uint32_t *src = deviceBuffer(11201), *other = deviceBuffer(11202), *side = deviceBuffer(11203);
  uint32_t *partial = zeroBuffer(kLbMaxBlocks), *out = zeroBuffer(64);
  const dim3 grids[7] = {dim3(1), dim3(3), dim3(64), dim3(1000), dim3(256, 256), dim3(4096), dim3(7, 5)};
  const int blocks[7] = {32, 64, 256, 1024, 64, 128, 96};
  preload(lastBlockReduce);
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i);
    mix<<<kGrid, kBlock, 0, s>>>(src, other, kN, u);
    CK(cudaEventRecord(fork, s));
    CK(cudaStreamWaitEvent(t, fork, 0));
    mix<<<kGrid, kBlock, 0, t>>>(side, src, kN, u + 1);  // reads src beside the reduction
    CK(cudaEventRecord(join, t));
    const int v = (i * 3) % 7;
    dim3 grid = grids[v];
    int block = blocks[v];
    if (irregular(i, 1201, 11)) {
      grid = dim3(512, 256);  // 131072 blocks of 32 threads
      block = 32;
    }
    lastBlockReduce<<<grid, block, 0, s>>>(src, kN, partial, out, i % 64, u * 7u);
    CK(cudaStreamWaitEvent(s, join, 0));  // src is written again next step
    mix<<<kGrid, kBlock, 0, s>>>(other, side, kN, u + 2);
    CKL();
    if (at(i)) {
      CK(cudaStreamSynchronize(s));
      unsigned ticket = 0;
      unsigned long long ran = 0;
      CK(cudaMemcpyFromSymbol(&ticket, g_lbTicket, sizeof ticket));
      CK(cudaMemcpyFromSymbol(&ran, g_lbBlocks, sizeof ran));
      std::printf("step %d: ticket %u blocks %llu\n", i, ticket, ran);
      print("out", i, deviceDigest(out, 64 * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(out, 64 * 4) ^ deviceDigest(side, kN * 4) ^ deviceDigest(other, kN * 4));
}

// ---------------------------------------------------------------- patch_cycle

// What a tool could get wrong: every launch has the same kernel, grid and
// parameter layout, so all twelve match any one node by shape; only their
// position tells them apart. Values cycle: odd nodes with period 3 (a node's
// value returns to what it was built with after two patches), even nodes
// change every 5th step, the last every step, one node falls back to its
// first value on irregular steps; memsets and a device copy cycle with
// periods 2, 3 and 4 (a tool's copy and memset kernels patched likewise).
// A patch computed against the wrong baseline (the values the graph was
// built with, rather than those of its last launch), or applied to the
// wrong node, leaves a stale pointer or salt, and the mixes (whose order
// matters) differ.
// Eagerly deterministic: one stream, integer kernels; no launch has its
// destination among its sources.
void patchCycle() {
  cudaStream_t s = nonBlockingStream();
  auto* cs = reinterpret_cast<CUstream>(s);
  uint32_t* P[6];
  for (int k = 0; k < 6; ++k) P[k] = deviceBuffer(11301 + uint32_t(k));
  const uint32_t kSalts[3] = {0x1234567u, 0x89abcdefu, 0x0f0f0f0fu};
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i);
    for (int j = 0; j < 12; ++j) {
      int rot = (j % 2 == 1) ? i % 3 : (i / 5) % 6;
      if (j == 5 && irregular(i, 1301, 9)) rot = 0;
      uint32_t salt = (j % 2 == 1) ? kSalts[i % 3] + uint32_t(j) : uint32_t(j) * 977u + uint32_t(i / 5);
      if (j == 11) salt = u * 2654435761u;
      uint32_t* dst = P[(j + rot) % 6];
      const uint32_t* a = P[(j + rot + 2) % 6];
      const uint32_t* b = P[(j + rot + 4) % 6];
      mix2<<<kGrid, kBlock, 0, s>>>(dst, a, b, kN, salt);
      CKL();
      if (j == 3) CK(cudaMemsetAsync(P[i % 3] + (i % 2) * 512, (i % 3) * 37 + 1, 4096, s));
      if (j == 6)
        CKD(cuMemsetD16Async(reinterpret_cast<CUdeviceptr>(P[3 + i % 2] + 4 * (i % 3)),
                             static_cast<unsigned short>((i % 4) * 0x1111), 1000, cs));
      if (j == 9)
        CK(cudaMemcpyAsync(P[4 + i % 2] + 100 * (i % 3), P[i % 3] + 7 * (i % 2), 3000, cudaMemcpyDeviceToDevice, s));
    }
    if (at(i)) {
      CK(cudaStreamSynchronize(s));
      Digest d;
      for (int k = 0; k < 6; ++k) d.add(deviceDigest(P[k], kN * 4));
      print("pool", i, d.h);
    }
  }
  CK(cudaStreamSynchronize(s));
  for (int k = 0; k < 6; ++k) print("end", k, deviceDigest(P[k], kN * 4));
}

// ---------------------------------------------------------------- batch_mem_ops

// Consumes A's data, folding in the flag words its stream waited for with
// an exact value (f64a, f32a), its own f64b and the constant f32c; not f32b,
// whose AND wait the previous step's value already satisfies.
__global__ void consumeFlags(uint32_t* dst, const uint32_t* src, const uint32_t* flags, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t f = salt;
  for (int w = 0; w < 7; ++w)
    if (w != 5) f = rotl(f, 5) ^ flags[w];
  if (k < n) dst[k] = rotl(dst[k], 9) + (src[(k * 13 + 7) % n] ^ f);
}

// What a tool could get wrong: cuStreamBatchMemOp takes an array of unions
// it must copy at the call (the program scribbles over it right after), in
// which the op count, types, flags and values change per step; its waits
// hold a stream until another stream's write lands. A tool must issue what
// it holds on the writing stream before (or with) the batch, keep the
// batch in its place in the stream, and never hold the batch behind work it
// waits for. On some steps a one-op batch whose flag the driver may refuse
// (CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER inside a batch: refused on an
// H100 with driver 580) comes first: a tool that holds it and says
// CUDA_SUCCESS differs in the digested codes (it writes the value the next
// batch writes anyway, so the data do not depend on the answer).
// Eagerly deterministic: each wait is issued after the write that satisfies
// it (A's write of step i before B's wait of step i; B's write of step i
// before A's wait of step i+1), so nothing hangs; the consumer reads only
// flag words whose value its waits pinned (f64a: A's next write waits for
// B's write after the consumer; f32a: an EQ wait), never f32b, which the
// previous step's value already lets through the AND wait.
void batchMemOps() {
  const int device = currentDevice();
  CUdevice cuDev = 0;
  CKD(cuDeviceGet(&cuDev, device));
  int has64 = 0, hasNor = 0, hasFlush = 0;
  CKD(cuDeviceGetAttribute(&has64, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, cuDev));
  CKD(cuDeviceGetAttribute(&hasNor, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR, cuDev));
  CKD(cuDeviceGetAttribute(&hasFlush, CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES, cuDev));
  std::printf("memops: 64-bit %d nor %d flush %d\n", has64, hasNor, hasFlush);
  if (!has64) {
    std::printf("SKIP no 64-bit stream memory operations on this device\n");
    return;
  }
  cudaStream_t A = nonBlockingStream(), B = nonBlockingStream();
  auto* ca = reinterpret_cast<CUstream>(A);
  auto* cb = reinterpret_cast<CUstream>(B);
  uint32_t *dataA = deviceBuffer(11401), *dataB = deviceBuffer(11402), *seed = deviceBuffer(11403);
  uint32_t* flags = zeroBuffer(16);  // [0,1] f64a, [2,3] f64b, [4] f32a, [5] f32b, [6] f32c (always 0)
  const auto base = reinterpret_cast<CUdeviceptr>(flags);
  const CUdeviceptr f64a = base, f64b = base + 8, f32a = base + 16, f32b = base + 20, f32c = base + 24;
  CUstreamBatchMemOpParams p[6];
  Digest codes;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i);
    const cuuint64_t v = cuuint64_t(i) + 1;
    const uint32_t h = hash32(u + 77u);
    if (i > 0) {
      if (i % 2 == 0) {
        CKD(cuStreamWaitValue64(ca, f64b, v - 1, CU_STREAM_WAIT_VALUE_GEQ));
      } else {
        std::memset(p, 0, sizeof p);
        p[0].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
        p[0].waitValue.address = f64b;
        p[0].waitValue.value64 = v - 1;
        p[0].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
        CKD(cuStreamBatchMemOp(ca, 1, p, 0));
        std::memset(p, 0xa5, sizeof p);
      }
    }
    mix<<<kGrid, kBlock, 0, A>>>(dataA, seed, kN, u);
    CKL();
    // A publishes: a 64-bit value (with a barrier), two 32-bit ones (the
    // second may be reordered with earlier writes), a barrier op on some steps.
    std::memset(p, 0, sizeof p);
    unsigned n = 0;
    p[n].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    p[n].writeValue.address = f64a;
    p[n].writeValue.value64 = v;
    p[n++].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
    p[n].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    p[n].writeValue.address = f32a;
    p[n].writeValue.value = h;
    p[n++].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
    if (i % 4 == 3) {
      p[n].memoryBarrier.operation = CU_STREAM_MEM_OP_BARRIER;
      p[n++].memoryBarrier.flags = CU_STREAM_MEMORY_BARRIER_TYPE_GPU;
    }
    p[n].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    p[n].writeValue.address = f32b;
    p[n].writeValue.value = h | 1u;
    p[n++].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
    if (i % 10 == 7 || irregular(i, 1401, 9)) {
      // The same write without a memory barrier, alone, right before the
      // batch that makes it again: the driver refuses the flag in a batch
      // on some systems (an H100 with driver 580: CUDA_ERROR_INVALID_VALUE),
      // so only its code is digested.
      CUstreamBatchMemOpParams q = p[n - 1];
      q.writeValue.flags = CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER;
      const CUresult r = cuStreamBatchMemOp(ca, 1, &q, 0);
      std::memset(static_cast<void*>(&q), 0x3c, sizeof q);
      codes.add(uint64_t(r));
    }
    CKD(cuStreamBatchMemOp(ca, n, p, 0));
    std::memset(p, 0x5a, sizeof p);
    // B waits for all of it.
    std::memset(p, 0, sizeof p);
    n = 0;
    p[n].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
    p[n].waitValue.address = f64a;
    p[n].waitValue.value64 = v;
    p[n++].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ | (hasFlush && i % 3 == 0 ? unsigned(CU_STREAM_WAIT_VALUE_FLUSH) : 0u);
    p[n].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    p[n].waitValue.address = f32a;
    p[n].waitValue.value = h;
    p[n++].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
    p[n].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    p[n].waitValue.address = f32b;
    p[n].waitValue.value = 1u;
    p[n++].waitValue.flags = CU_STREAM_WAIT_VALUE_AND;
    if (hasNor) {
      p[n].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
      p[n].waitValue.address = f32c;  // always 0: ~(0 | value) != 0 at once
      p[n].waitValue.value = h & 0x7fffffffu;
      p[n++].waitValue.flags = CU_STREAM_WAIT_VALUE_NOR;
    }
    if (hasFlush && i % 5 == 1) {
      p[n].flushRemoteWrites.operation = CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES;
      p[n++].flushRemoteWrites.flags = 0;
    }
    CKD(cuStreamBatchMemOp(cb, n, p, 0));
    std::memset(p, 0xff, sizeof p);
    consumeFlags<<<kGrid, kBlock, 0, B>>>(dataB, dataA, flags, kN, u);
    CKL();
    CKD(cuStreamWriteValue64(cb, f64b, v, CU_STREAM_WRITE_VALUE_DEFAULT));
    if (at(i)) {
      CK(cudaStreamSynchronize(B));
      CK(cudaStreamSynchronize(A));
      print("data", i, deviceDigest(dataA, kN * 4) ^ deviceDigest(dataB, kN * 4));
      print("flags", i, deviceDigest(flags, 7 * 4));
      print("codes", i, codes.h);
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(dataB, kN * 4) ^ deviceDigest(flags, 16 * 4));
}

// ---------------------------------------------------------------- program_graph_events

// The host node's argument: runs and the order of tags, per slot.
struct HostTally {
  std::atomic<uint32_t> runs{0};
  uint32_t order = 0;  // written only by host nodes, which run one at a time in graph order
  uint32_t tag = 0;
};
void CUDART_CB tallyHost(void* p) {
  auto* t = static_cast<HostTally*>(p);
  t->runs.fetch_add(1);
  t->order = t->order * 31u + t->tag;
}

// What a tool could get wrong: the program's graph records event E and
// waits on event F inside itself, through nodes a tool never sees as
// record or wait ops. Eager stream B records F (after a slow kernel writing
// y, which the graph's kernel reads) and later waits on E (before reading
// x, which the graph's kernel writes). A tool that holds B's record of F
// when the program's graph is launched lets the graph's wait bind to an
// older record; one that treats B's wait on E as a wait on an event never
// recorded (it saw no record op for E), or binds it to an older record,
// lets B read x early. The events swap every step on the executable graph
// (cudaGraphExecEventWaitNodeSetEvent / RecordNodeSetEvent, calls a tool
// does not see), as do the kernel's salt, the memcpy's destination, the
// host node's argument and the child graph; every third step the graph is
// launched on the legacy stream (implicitly ordered with both blocking
// streams) instead of stream A.
// Eagerly deterministic: every access to x, y, z and w is ordered by F, E,
// stream order or the legacy stream's implicit synchronization; host nodes
// run one at a time in the graph's order.
void programGraphEvents() {
  cudaStream_t A = blockingStream(), B = blockingStream();
  cudaEvent_t F[2] = {untimedEvent(), untimedEvent()}, E[2] = {untimedEvent(), untimedEvent()};
  uint32_t *x = deviceBuffer(11501), *y = deviceBuffer(11502), *z = deviceBuffer(11503, 3 * kN);
  uint32_t *w = deviceBuffer(11504), *ysrc = deviceBuffer(11505), *a = deviceBuffer(11506), *b = deviceBuffer(11507);
  HostTally tally[2];
  tally[0].tag = 3;
  tally[1].tag = 7;
  preload(slowMix);
  preload(mix);

  // The child graphs: one memset node each (same topology, other values).
  cudaGraph_t child[2];
  for (int c = 0; c < 2; ++c) {
    CK(cudaGraphCreate(&child[c], 0));
    cudaMemsetParams mp = {};
    mp.dst = w + 1024 * c;
    mp.value = 0x01010101u * uint32_t(c + 1);
    mp.elementSize = 4;
    mp.width = 2048;
    mp.height = 1;
    cudaGraphNode_t mn = nullptr;
    CK(cudaGraphAddMemsetNode(&mn, child[c], nullptr, 0, &mp));
  }
  // wait F -> kernel (x from y) -> { record E, memcpy x -> z[...] -> { host, child } }
  cudaGraph_t graph = nullptr;
  CK(cudaGraphCreate(&graph, 0));
  cudaGraphNode_t nWait = nullptr, nKernel = nullptr, nRecord = nullptr, nCopy = nullptr, nHost = nullptr,
                  nChild = nullptr;
  CK(cudaGraphAddEventWaitNode(&nWait, graph, nullptr, 0, F[0]));
  int n = kN;
  uint32_t salt = 0;
  const uint32_t* ycon = y;
  void* args[] = {&x, &ycon, &n, &salt};
  cudaKernelNodeParams kp = {};
  kp.func = reinterpret_cast<void*>(mix);
  kp.gridDim = dim3(kGrid);
  kp.blockDim = dim3(kBlock);
  kp.kernelParams = args;
  CK(cudaGraphAddKernelNode(&nKernel, graph, &nWait, 1, &kp));
  CK(cudaGraphAddEventRecordNode(&nRecord, graph, &nKernel, 1, E[0]));
  CK(cudaGraphAddMemcpyNode1D(&nCopy, graph, &nKernel, 1, z, x, kN * 4, cudaMemcpyDeviceToDevice));
  cudaHostNodeParams hp = {};
  hp.fn = tallyHost;
  hp.userData = &tally[0];
  CK(cudaGraphAddHostNode(&nHost, graph, &nCopy, 1, &hp));
  CK(cudaGraphAddChildGraphNode(&nChild, graph, &nCopy, 1, child[0]));
  cudaGraphExec_t exec = nullptr;
  CK(cudaGraphInstantiate(&exec, graph, 0));

  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i);
    const int e = i % 2;
    slowMix<<<kGrid, kBlock, 0, B>>>(y, ysrc, kN, u, 30000);
    CK(cudaEventRecord(F[e], B));
    mix<<<kGrid, kBlock, 0, A>>>(a, ysrc, kN, u + 1);  // nothing B writes: no event orders A after B here
    CKL();
    salt = u * 2654435761u;
    CK(cudaGraphExecEventWaitNodeSetEvent(exec, nWait, F[e]));
    CK(cudaGraphExecEventRecordNodeSetEvent(exec, nRecord, E[e]));
    CK(cudaGraphExecKernelNodeSetParams(exec, nKernel, &kp));
    CK(cudaGraphExecMemcpyNodeSetParams1D(exec, nCopy, z + (i % 3) * kN, x, kN * 4, cudaMemcpyDeviceToDevice));
    hp.userData = &tally[i % 2];
    CK(cudaGraphExecHostNodeSetParams(exec, nHost, &hp));
    CK(cudaGraphExecChildGraphNodeSetParams(exec, nChild, child[(i / 2) % 2]));
    CK(cudaGraphLaunch(exec, i % 3 == 2 ? cudaStream_t(0) : A));
    mix2<<<kGrid, kBlock, 0, A>>>(a, z + (i % 3) * kN, w, kN, u + 2);
    CK(cudaStreamWaitEvent(B, E[e], 0));
    mix<<<kGrid, kBlock, 0, B>>>(b, x, kN, u + 3);  // x as the graph's kernel left it
    CKL();
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      std::printf("step %d: host nodes %u %u order %08x %08x\n", i, tally[0].runs.load(), tally[1].runs.load(),
                  tally[0].order, tally[1].order);
      print("xyz", i, deviceDigest(x, kN * 4) ^ deviceDigest(y, kN * 4) ^ deviceDigest(z, 3 * kN * 4));
      print("w", i, deviceDigest(w, kN * 4));
      print("a", i, deviceDigest(a, kN * 4));
      print("b", i, deviceDigest(b, kN * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", int(tally[0].runs.load() + tally[1].runs.load()), deviceDigest(b, kN * 4) ^ deviceDigest(a, kN * 4));
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(graph));
  CK(cudaGraphDestroy(child[0]));
  CK(cudaGraphDestroy(child[1]));
}

// ---------------------------------------------------------------- tma_tensor_map

constexpr int kTmaW = 256, kTmaH = 256, kTile = 32, kTmaBlocks = 8;
using TmaBarrier = cuda::barrier<cuda::thread_scope_block>;

// Each block loads a kTile x boxH tile at (x0 + 32 * block, y0) with the
// bulk tensor copy (out-of-bounds elements read as zero) and mixes it in.
__global__ void tmaTile(uint32_t tag, const __grid_constant__ CUtensorMap map, uint32_t* dst, int x0, int y0,
                        int boxH, uint32_t salt) {
  __shared__ alignas(128) uint32_t tile[kTile * kTile];
#pragma nv_diag_suppress static_var_with_dynamic_init
  __shared__ TmaBarrier bar;
  if (threadIdx.x == 0) {
    init(&bar, blockDim.x);
    cuda::device::experimental::fence_proxy_async_shared_cta();
  }
  __syncthreads();
  TmaBarrier::arrival_token token;
  if (threadIdx.x == 0) {
    cuda::device::experimental::cp_async_bulk_tensor_2d_global_to_shared(tile, &map, x0 + int(blockIdx.x) * kTile,
                                                                         y0, bar);
    token = cuda::device::barrier_arrive_tx(bar, 1, kTile * boxH * 4);
  } else {
    token = bar.arrive();
  }
  bar.wait(std::move(token));
  for (int e = threadIdx.x; e < kTile * boxH; e += blockDim.x) {
    const int k = int(blockIdx.x) * kTile * kTile + e;
    dst[k] = rotl(dst[k], 7) ^ (tile[e] + salt + tag * uint32_t(e + 1));
  }
}

// What a tool could get wrong: a 128-byte opaque parameter, 64-byte aligned
// behind a 4-byte one (60 bytes of padding whose content is the program's
// business), that holds a global address and a box shape the driver encoded
// (cuTensorMapEncodeTiled, a call a tool does not see) and that must stay in
// parameter space: re-encoded every step for another of three tensors,
// a patched node that keeps the old map reads the wrong tensor; the box
// height (and with it the bytes the kernel waits for) changes on irregular
// steps; the tile origins move partly out of bounds, where the copy fills
// zeros. The map is scribbled over right after each launch.
// Eagerly deterministic: one stream; each block reads its tile through its
// own barrier; out-of-bounds elements are zero by the map's fill mode.
void tmaTensorMap() {
  if (deviceAttribute(cudaDevAttrComputeCapabilityMajor) < 9) {
    std::printf("SKIP the bulk tensor copy needs compute capability 9.0\n");
    return;
  }
  cudaStream_t s = nonBlockingStream();
  uint32_t* tensors[3];
  for (int t = 0; t < 3; ++t) tensors[t] = deviceBuffer(11601 + uint32_t(t), kTmaW * kTmaH);
  uint32_t *dst = zeroBuffer(kTmaBlocks * kTile * kTile), *other = deviceBuffer(11605, kTmaW * kTmaH);
  preload(tmaTile);
  const int xs[4] = {-16, 0, 40, 224}, ys[5] = {-8, 0, 100, 240, 17};
  Digest codes;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i);
    const int t = i % 3;
    const int boxH = irregular(i, 1601, 7) ? 16 : 32;
    mix<<<kTmaW * kTmaH / kBlock, kBlock, 0, s>>>(tensors[t], other, kTmaW * kTmaH, u);
    CKL();
    alignas(64) CUtensorMap map;
    const cuuint64_t dims[2] = {kTmaW, kTmaH};
    const cuuint64_t strides[1] = {kTmaW * 4};
    const cuuint32_t box[2] = {kTile, cuuint32_t(boxH)};
    const cuuint32_t estr[2] = {1, 1};
    CKD(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_UINT32, 2, tensors[t], dims, strides, box, estr,
                               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                               CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    const int x0 = xs[i % 4], y0 = ys[(i / 2) % 5];
    if (i % 2 == 0) {
      tmaTile<<<kTmaBlocks, 128, 0, s>>>(u * 3u, map, dst, x0, y0, boxH, u);
      CKL();
    } else {
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(kTmaBlocks);
      cfg.blockDim = dim3(128);
      cfg.stream = s;
      codes.add(uint64_t(keep(cudaLaunchKernelEx(&cfg, tmaTile, u * 3u, map, dst, x0, y0, boxH, u))));
    }
    std::memset(static_cast<void*>(&map), 0xcd, sizeof map);
    mix<<<kTmaW * kTmaH / kBlock, kBlock, 0, s>>>(other, dst, kTmaBlocks * kTile * kTile, u + 1);
    CKL();
    if (at(i)) {
      CK(cudaStreamSynchronize(s));
      print("dst", i, deviceDigest(dst, kTmaBlocks * kTile * kTile * 4));
      print("codes", i, codes.h);
    }
  }
  CK(cudaStreamSynchronize(s));
  Digest d;
  for (int t = 0; t < 3; ++t) d.add(deviceDigest(tensors[t], kTmaW * kTmaH * 4));
  print("end", 0, d.h ^ deviceDigest(other, kTmaW * kTmaH * 4));
}

// ---------------------------------------------------------------- unrolled_plateaus

// What a tool could get wrong: a loop of one to seven ops per step and no
// synchronize is short enough that a tool replays it unrolled (several
// steps per graph); its length changes every 37 steps (2, 3, 5, 4, 1, 6,
// 3, 7 ops), never at a multiple of an unroll factor, and an extra memset
// comes on irregular steps, so a held unrolled run is cut at any point.
// Every op's salt is new (step and position), so a replay of the wrong
// length, or a step replayed with its neighbour's values, shows.
// Eagerly deterministic: one stream, integer kernels, no read-back before
// the checkpoints.
void unrolledPlateaus() {
  constexpr int n = 2048;
  cudaStream_t s = nonBlockingStream();
  uint32_t* buf[3] = {deviceBuffer(11701, n), deviceBuffer(11702, n), deviceBuffer(11703, n)};
  const int lengths[8] = {2, 3, 5, 4, 1, 6, 3, 7};
  for (int i = 0; i < g_iters; ++i) {
    const int len = lengths[(i / 37) % 8];
    for (int j = 0; j < len; ++j) {
      mix<<<n / kBlock, kBlock, 0, s>>>(buf[j % 3], buf[(j + 1) % 3], n, uint32_t(i) * 8u + uint32_t(j));
      CKL();
    }
    if (irregular(i, 1701, 6)) CK(cudaMemsetAsync(buf[i % 3] + 100, i & 0xff, 256, s));
    if (at(i)) {
      CK(cudaStreamSynchronize(s));
      print("bufs", i, deviceDigest(buf[0], n * 4) ^ deviceDigest(buf[1], n * 4) ^ deviceDigest(buf[2], n * 4));
    }
  }
  CK(cudaStreamSynchronize(s));
  for (int k = 0; k < 3; ++k) print("end", k, deviceDigest(buf[k], n * 4));
}

// ---------------------------------------------------------------- host_to_host_chain

__global__ void writeHalf(uint32_t* mapped, const uint32_t* a, int half, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < half) mapped[k] = rotl(a[k * 2], 11) + salt + uint32_t(k);
  __threadfence_system();
}

// What a tool could get wrong: host-to-host copies in stream order (pinned
// to pinned with cudaMemcpyHostToHost, pinned to registered malloc'ed
// memory with cudaMemcpyDefault at an offset that moves) between a kernel
// that writes their source through a mapped pointer and a copy to the
// device that reads their destination; at the end of the step a
// device-to-host copy into mapped memory that the next kernel reads through
// its device pointer. Every link is ordered only by the stream: a tool that
// classifies a host-to-host copy as a device copy (and runs it as a kernel
// of its own, or in a graph with the wrong dependencies), or issues it ahead
// of the held kernel that writes its source, copies stale bytes.
// Eagerly deterministic: one stream orders every kernel and copy; the host
// reads the host buffers only after a synchronize.
void hostToHostChain() {
  constexpr int kHalf = kN / 2;
  cudaStream_t s = nonBlockingStream();
  Mapped p1 = mappedBuffer(kN, 11801);
  uint32_t* p2 = nullptr;
  CK(cudaMallocHost(reinterpret_cast<void**>(&p2), kHalf * 4));
  std::memset(p2, 0, kHalf * 4);
  auto* reg = static_cast<uint32_t*>(std::aligned_alloc(4096, 2 * kN * 4));
  for (int k = 0; k < 2 * kN; ++k) reg[k] = hash32(uint32_t(k) + 11802u);
  CK(cudaHostRegister(reg, 2 * kN * 4, cudaHostRegisterDefault));
  uint32_t *a = deviceBuffer(11803), *dB = deviceBuffer(11804), *dC = deviceBuffer(11805);
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i);
    const size_t off = (size_t(i) * 613u) % size_t(kN);
    writeHalf<<<kHalf / kBlock, kBlock, 0, s>>>(p1.dev, a, kHalf, u);
    CKL();
    CK(cudaMemcpyAsync(p2, p1.host, kHalf * 4, cudaMemcpyHostToHost, s));
    CK(cudaMemcpyAsync(reg + off, p2, kHalf * 4, cudaMemcpyDefault, s));
    CK(cudaMemcpyAsync(dB, reg + off, kHalf * 4, cudaMemcpyHostToDevice, s));
    mix<<<kGrid, kBlock, 0, s>>>(a, dB, kN, u + 1);
    CK(cudaMemcpyAsync(p1.host + kHalf, a, kHalf * 4, cudaMemcpyDeviceToHost, s));
    readWindow<<<kHalf / kBlock, kBlock, 0, s>>>(dC, p1.dev + kHalf, kHalf, u + 2);
    CKL();
    if (at(i)) {
      CK(cudaStreamSynchronize(s));
      print("host", i, hostDigest(reg, 2 * kN * 4) ^ hostDigest(p2, kHalf * 4) ^ hostDigest(p1.host, kN * 4));
      print("dev", i, deviceDigest(a, kN * 4) ^ deviceDigest(dC, kN * 4));
    }
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, hostDigest(reg, 2 * kN * 4) ^ deviceDigest(a, kN * 4) ^ deviceDigest(dC, kN * 4));
  CK(cudaHostUnregister(reg));
  std::free(reg);
}

// ---------------------------------------------------------------- managed_discard_prefetch

// Overwrites all of dst (scratch) from src.
__global__ void fillScratch(uint32_t* dst, const uint32_t* src, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = hash32(src[(k * 5 + 1) % n] + salt) ^ uint32_t(k);
}

// What a tool could get wrong: a discard (cudaMemDiscardBatchAsync, the
// contents of the range become indeterminate) must come after the kernel
// that reads the scratch range and before the kernel that rewrites it, in
// stream order: a discard issued ahead of a held kernel that still reads
// the scratch makes it read garbage. Batched prefetches (two ranges, one
// location), a combined discard and prefetch, and a prefetch to the host
// (after which the host reads the output and rewrites the input, waiting
// only on an event) sit between the kernels on irregular schedules.
// Eagerly deterministic: the scratch is always fully rewritten before it is
// read again; the host touches managed memory only after an event
// synchronize that follows every kernel using it (the device has
// concurrent managed access, checked, or the scenario is skipped).
void managedDiscardPrefetch() {
  const int device = currentDevice();
  if (!deviceAttribute(cudaDevAttrConcurrentManagedAccess)) {
    std::printf("SKIP no concurrent managed access on this device\n");
    return;
  }
  cudaStream_t s = nonBlockingStream();
  cudaEvent_t ev = untimedEvent();
  uint32_t *in = nullptr, *scratch = nullptr, *out = nullptr;
  CK(cudaMallocManaged(reinterpret_cast<void**>(&in), kN * 4));
  CK(cudaMallocManaged(reinterpret_cast<void**>(&scratch), kN * 4));
  CK(cudaMallocManaged(reinterpret_cast<void**>(&out), kN * 4));
  for (int k = 0; k < kN; ++k) {
    in[k] = hash32(uint32_t(k) + 11901u);
    out[k] = uint32_t(k);
  }
  cudaMemLocation onDevice = {};
  onDevice.type = cudaMemLocationTypeDevice;
  onDevice.id = device;
  cudaMemLocation onHost = {};
  onHost.type = cudaMemLocationTypeHost;
  onHost.id = 0;
  // The batch calls, tried once: where the driver refuses them the scenario says so.
  {
    void* ptrs[1] = {scratch};
    size_t sizes[1] = {size_t(kN) * 4};
    const cudaError_t r = keep(cudaMemDiscardBatchAsync(ptrs, sizes, 1, 0, s));
    CK(cudaStreamSynchronize(s));
    if (r != cudaSuccess) {
      std::printf("SKIP cudaMemDiscardBatchAsync: %s\n", cudaGetErrorName(r));
      return;
    }
  }
  Digest seen;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i);
    fillScratch<<<kGrid, kBlock, 0, s>>>(scratch, in, kN, u);
    mix<<<kGrid, kBlock, 0, s>>>(out, scratch, kN, u + 1);
    CKL();
    void* ptrs[2] = {scratch, nullptr};
    size_t sizes[2] = {size_t(kN) * 4, size_t(kN) * 4};
    if (i % 5 == 4) {
      size_t idx[1] = {0};
      CK(cudaMemDiscardAndPrefetchBatchAsync(ptrs, sizes, 1, &onDevice, idx, 1, 0, s));
    } else {
      CK(cudaMemDiscardBatchAsync(ptrs, sizes, 1, 0, s));
    }
    if (i % 3 == 0) {
      void* pre[2] = {in, out};
      size_t idx[1] = {0};
      CK(cudaMemPrefetchBatchAsync(pre, sizes, 2, &onDevice, idx, 1, 0, s));
    }
    if (i % 10 == 9) {
      CK(cudaMemPrefetchAsync(out, size_t(kN) * 4, onHost, 0, s));
      CK(cudaEventRecord(ev, s));
      CK(cudaEventSynchronize(ev));
      seen.add(out, kN * 4);
      for (int k = 0; k < kN; k += 7) in[k] ^= out[(k * 3) % kN] + u;
    }
    if (at(i)) {
      CK(cudaStreamSynchronize(s));
      print("seen", i, seen.h);
      print("inout", i, hostDigest(in, kN * 4) ^ hostDigest(out, kN * 4));
    }
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, hostDigest(out, kN * 4) ^ hostDigest(in, kN * 4));
}

// ---------------------------------------------------------------- quick_exit_held

struct QuickExitState {
  cudaStream_t a = nullptr, b = nullptr;
  uint32_t *x = nullptr, *y = nullptr, *z = nullptr, *w = nullptr;
};
QuickExitState g_qe;

void quickExitHandler() {
  const cudaError_t r = cudaDeviceSynchronize();
  std::printf("at_quick_exit: sync %s\n", cudaGetErrorName(r));
  if (r == cudaSuccess) print("quick_exit", 0, deviceDigest(g_qe.x, kN * 4) ^ deviceDigest(g_qe.y, kN * 4));
  // More work, left pending at _Exit.
  for (int k = 0; k < 20; ++k) {
    mix<<<kGrid, kBlock, 0, g_qe.a>>>(g_qe.x, g_qe.y, kN, uint32_t(k));
    mix<<<kGrid, kBlock, 0, g_qe.b>>>(g_qe.z, g_qe.w, kN, uint32_t(k));
  }
  std::fflush(stdout);  // _Exit does not flush stdio
}

void stepQuickExit(int i, cudaEvent_t e) {
  const uint32_t u = uint32_t(i);
  mix<<<kGrid, kBlock, 0, g_qe.a>>>(g_qe.x, g_qe.y, kN, u);
  CK(cudaEventRecord(e, g_qe.a));
  CK(cudaStreamWaitEvent(g_qe.b, e, 0));
  mix<<<kGrid, kBlock, 0, g_qe.b>>>(g_qe.y, g_qe.x, kN, u + 1);
  CK(cudaEventRecord(e, g_qe.b));
  CK(cudaStreamWaitEvent(g_qe.a, e, 0));
  CKL();
}

// What a tool could get wrong: the program leaves through std::quick_exit,
// which runs no atexit handler and no static destructor (a tool's exit
// report, flush and thread shutdown hooks included) but the program's
// at_quick_exit handler, after steps whose launches were never synchronized.
// The handler's cudaDeviceSynchronize must still find every held launch
// issued (it is an ordinary call, so a tool can), and its own launches,
// left pending at _Exit, must not make the exit hang or crash. Exit code 0.
// Eagerly deterministic: the two streams alternate through one event
// recorded and waited on in turn (each wait binds to the record just
// before it); the handler synchronizes before it reads; the launches it
// leaves pending are never read.
void quickExitHeld() {
  g_qe.a = nonBlockingStream();
  g_qe.b = nonBlockingStream();
  g_qe.x = deviceBuffer(12001);
  g_qe.y = deviceBuffer(12002);
  g_qe.z = deviceBuffer(12003);
  g_qe.w = deviceBuffer(12004);
  cudaEvent_t e = untimedEvent();
  for (int i = 0; i < g_iters; ++i) {
    stepQuickExit(i, e);
    if (at(i)) {
      CK(cudaStreamSynchronize(g_qe.a));
      print("xy", i, deviceDigest(g_qe.x, kN * 4) ^ deviceDigest(g_qe.y, kN * 4));
    }
  }
  std::at_quick_exit(quickExitHandler);
  for (int i = g_iters; i < g_iters + 40; ++i) stepQuickExit(i, e);  // never synchronized here
  std::fflush(stdout);
  std::quick_exit(0);
}

// ---------------------------------------------------------------- shared_prefix_branch

// What a tool could get wrong: after a common prefix and a one-word
// read-back with a synchronize (a recurring barrier), the host picks one of
// three branches from the value it read; two branches begin with the same
// kernel in the same shape with other values (variants that start alike),
// one is rare; every 7th step the branch is picked without a read-back, so
// the barrier is missing there and the prefix runs straight into a branch.
// A tool that decides on a variant at its first op, or that carries a held
// prefix into the wrong variant, runs the wrong ops or stale values.
// Eagerly deterministic: one stream; the value read back is the result of
// the prefix, fully synchronized.
void sharedPrefixBranch() {
  cudaStream_t s = nonBlockingStream();
  uint32_t *a = deviceBuffer(12101), *b = deviceBuffer(12102), *c = deviceBuffer(12103), *d = deviceBuffer(12104);
  uint32_t* word = nullptr;
  CK(cudaMallocHost(reinterpret_cast<void**>(&word), 4));
  int counts[3] = {0, 0, 0};
  Digest branches;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 64u;
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, u);
    mix<<<kGrid, kBlock, 0, s>>>(b, c, kN, u + 1);
    mix2<<<kGrid, kBlock, 0, s>>>(c, a, b, kN, u + 2);
    mix<<<kGrid, kBlock, 0, s>>>(a, c, kN, u + 3);
    CKL();
    int branch = 1;
    if (i % 7 != 3) {
      CK(cudaMemcpyAsync(word, a + (i % 16), 4, cudaMemcpyDeviceToHost, s));
      CK(cudaStreamSynchronize(s));
      const uint32_t h = hash32(*word) % 8;
      branch = h < 5 ? 0 : (h < 7 ? 1 : 2);
    }
    ++counts[branch];
    branches.add(uint64_t(branch));
    if (branch == 0) {
      mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, u + 10);
      mix<<<kGrid, kBlock, 0, s>>>(c, b, kN, u + 11);
      CK(cudaMemsetAsync(d, i & 0xff, 4096, s));
      mix2<<<kGrid, kBlock, 0, s>>>(a, b, c, kN, u + 12);
      mix<<<kGrid, kBlock, 0, s>>>(d, c, kN, u + 13);
      mix<<<kGrid, kBlock, 0, s>>>(b, d, kN, u + 14);
    } else if (branch == 1) {
      mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, u + 20);
      CK(cudaMemcpyAsync(d, c, 8192, cudaMemcpyDeviceToDevice, s));
      mix<<<kGrid, kBlock, 0, s>>>(c, d, kN, u + 21);
    } else {
      mix2<<<kGrid, kBlock, 0, s>>>(a, c, b, kN, u + 30);
      mix<<<kGrid, kBlock, 0, s>>>(b, a, kN, u + 31);
    }
    mix<<<kGrid, kBlock, 0, s>>>(d, a, kN, u + 40);
    mix2<<<kGrid, kBlock, 0, s>>>(b, c, d, kN, u + 41);
    CKL();
    if (at(i)) {
      CK(cudaStreamSynchronize(s));
      std::printf("step %d: branches %d %d %d\n", i, counts[0], counts[1], counts[2]);
      print("abcd", i,
            deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4) ^ deviceDigest(d, kN * 4));
    }
  }
  CK(cudaStreamSynchronize(s));
  print("end", 0, branches.h ^ deviceDigest(b, kN * 4) ^ deviceDigest(d, kN * 4));
}

// ---------------------------------------------------------------- copies_only_streams

// What a tool could get wrong: a step with no kernel of the program at all,
// only memsets (8-, 16- and 32-bit, driver and runtime) and device copies
// (explicit and default kind) at offsets and alignments that move every
// step while their sizes stay, chained X -> Y -> Z by events and back to X
// for the next step. A graph of such a step holds nothing but a tool's own
// copy and memset kernels (or the driver's nodes), with every address and
// value patched, and the event chain as its only ordering.
// Eagerly deterministic: each op's source and destination are different
// buffers, and every buffer written on one stream is read or written on
// another only after an event wait that orders the two.
void copiesOnlyStreams() {
  constexpr size_t kBytes = size_t(kN) * 4;  // 64 KiB each
  cudaStream_t X = nonBlockingStream(), Y = nonBlockingStream(), Z = nonBlockingStream();
  auto* cx = reinterpret_cast<CUstream>(X);
  auto* cy = reinterpret_cast<CUstream>(Y);
  auto* cz = reinterpret_cast<CUstream>(Z);
  cudaEvent_t eX = untimedEvent(), eY = untimedEvent(), eZ = untimedEvent();
  auto* b0 = reinterpret_cast<unsigned char*>(deviceBuffer(12201));
  auto* b1 = reinterpret_cast<unsigned char*>(deviceBuffer(12202));
  auto* b2 = reinterpret_cast<unsigned char*>(deviceBuffer(12203));
  auto dptr = [](unsigned char* p, size_t off) { return reinterpret_cast<CUdeviceptr>(p + off); };
  for (int i = 0; i < g_iters; ++i) {
    const size_t z = size_t(i);
    CK(cudaStreamWaitEvent(X, eZ, 0));  // step 0: a wait on an event never recorded (no-op)
    CK(cudaMemsetAsync(b0 + (z * 37) % (kBytes - 3000), int(z * 13) & 0xff, 3000, X));
    CKD(cuMemsetD16Async(dptr(b0, 2 * ((z * 11) % 30000)), static_cast<unsigned short>(z * 40503u), 777, cx));
    CK(cudaEventRecord(eX, X));
    CK(cudaStreamWaitEvent(Y, eX, 0));
    CK(cudaMemcpyAsync(b1 + (z * 101) % (kBytes - 5000), b0 + (z * 7 + 3) % (kBytes - 5000), 5000,
                       cudaMemcpyDeviceToDevice, Y));
    CKD(cuMemsetD32Async(dptr(b1, 4 * ((z * 29) % 15000)), uint32_t(z) * 2654435761u, 600, cy));
    CK(cudaEventRecord(eY, Y));
    CK(cudaStreamWaitEvent(Z, eY, 0));
    CK(cudaMemcpyAsync(b2 + (z * 53 + 1) % (kBytes - 7001), b1 + (z * 19) % (kBytes - 7001), 7001, cudaMemcpyDefault,
                       Z));
    CKD(cuMemsetD8Async(dptr(b2, 1 + 2 * ((z * 5) % 30000)), static_cast<unsigned char>(z * 3 + 1), 333, cz));
    CK(cudaMemcpyAsync(b0 + (z * 61 + 5) % (kBytes - 4097), b2 + (z * 17 + 2) % (kBytes - 4097), 4097,
                       cudaMemcpyDeviceToDevice, Z));
    CK(cudaEventRecord(eZ, Z));
    if (at(i)) {
      CK(cudaStreamSynchronize(Z));
      print("bufs", i, deviceDigest(b0, kBytes) ^ deviceDigest(b1, kBytes) ^ deviceDigest(b2, kBytes));
    }
  }
  CK(cudaStreamSynchronize(Z));
  print("end0", 0, deviceDigest(b0, kBytes));
  print("end1", 0, deviceDigest(b1, kBytes));
  print("end2", 0, deviceDigest(b2, kBytes));
}

// ---------------------------------------------------------------- fork_tree

constexpr int kTreeNodes = 7, kTreeN = 4096;

struct Tree {
  cudaStream_t s[kTreeNodes];
  cudaEvent_t fork[2][kTreeNodes], join[2][kTreeNodes];
  uint32_t* buf[kTreeNodes];
  uint32_t* seed;
};

bool treeLeaf(int v) { return 2 * v + 1 >= kTreeNodes; }

// Node v's downward half: its kernel (after waiting for its parent's fork
// record), then its own fork record, or for a leaf its join record.
void treeDown(Tree& t, int v, int set, uint32_t salt) {
  if (v == 0) {
    mix<<<kTreeN / kBlock, kBlock, 0, t.s[0]>>>(t.buf[0], t.seed, kTreeN, salt);
  } else {
    CK(cudaStreamWaitEvent(t.s[v], t.fork[set][(v - 1) / 2], 0));
    slowMix<<<kTreeN / kBlock, kBlock, 0, t.s[v]>>>(t.buf[v], t.buf[(v - 1) / 2], kTreeN, salt + uint32_t(v), 3000);
  }
  CKL();
  CK(cudaEventRecord(treeLeaf(v) ? t.join[set][v] : t.fork[set][v], t.s[v]));
}

// Node v's upward half (inner nodes): waits for both children's join
// records, folds their buffers into its own, records its join event.
void treeUp(Tree& t, int v, int set, uint32_t salt) {
  const int c1 = 2 * v + 1, c2 = 2 * v + 2;
  CK(cudaStreamWaitEvent(t.s[v], t.join[set][c1], 0));
  CK(cudaStreamWaitEvent(t.s[v], t.join[set][c2], 0));
  fold2<<<kTreeN / kBlock, kBlock, 0, t.s[v]>>>(t.buf[v], t.buf[c1], t.buf[c2], kTreeN, salt + 100u + uint32_t(v));
  CKL();
  if (v != 0) CK(cudaEventRecord(t.join[set][v], t.s[v]));
}

void treeDepthFirst(Tree& t, int v, int set, uint32_t salt) {
  treeDown(t, v, set, salt);
  if (treeLeaf(v)) return;
  treeDepthFirst(t, 2 * v + 1, set, salt);
  treeDepthFirst(t, 2 * v + 2, set, salt);
  treeUp(t, v, set, salt);
}

// What a tool could get wrong: a fork/join tree three levels deep over
// seven streams, where each level forks from a record made on the level
// above in the same step and joins back through two records; the same
// dependencies are issued breadth-first (every node's downward half level
// by level, then the joins from the bottom up) on even steps and
// depth-first on odd steps, so the op order differs while the graph of
// dependencies does not; the two event sets switch every three steps
// (event handles are patched values). A graph whose forks and joins do not
// mirror the program's (a child started before its parent's kernel, a
// parent folding before a child finished: the children spin a little
// first) gives other results.
// Eagerly deterministic: every buffer is written by one node and read by
// its children after their fork wait or by its parent after its join wait;
// a node writes its buffer again only in the next step, after its own join
// record was waited on by its parent (stream order on the parent).
void forkTree() {
  Tree t;
  for (int v = 0; v < kTreeNodes; ++v) {
    t.s[v] = nonBlockingStream();
    t.buf[v] = deviceBuffer(12301 + uint32_t(v), kTreeN);
    for (int set = 0; set < 2; ++set) {
      t.fork[set][v] = untimedEvent();
      t.join[set][v] = untimedEvent();
    }
  }
  t.seed = deviceBuffer(12310, kTreeN);
  preload(slowMix);
  preload(fold2);
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = uint32_t(i) * 1000u;
    const int set = (i / 3) % 2;
    if (i % 2 == 0) {
      for (int v = 0; v < kTreeNodes; ++v) treeDown(t, v, set, salt);  // level order is index order
      for (int v = 2; v >= 0; --v) treeUp(t, v, set, salt);
    } else {
      treeDepthFirst(t, 0, set, salt);
    }
    if (at(i)) {
      CK(cudaStreamSynchronize(t.s[0]));  // the root's fold waited, transitively, for every stream
      Digest d;
      for (int v = 0; v < kTreeNodes; ++v) d.add(deviceDigest(t.buf[v], kTreeN * 4));
      print("tree", i, d.h);
    }
  }
  CK(cudaDeviceSynchronize());
  for (int v = 0; v < kTreeNodes; ++v) print("end", v, deviceDigest(t.buf[v], kTreeN * 4));
}

constexpr Scenario kScenarios[] = {
    {"mapped_param_downstream", mappedParamDownstream},
    {"query_downstream_only", queryDownstreamOnly},
    {"last_block_reduce", lastBlockReduceScenario},
    {"patch_cycle", patchCycle},
    {"batch_mem_ops", batchMemOps},
    {"program_graph_events", programGraphEvents},
    {"tma_tensor_map", tmaTensorMap},
    {"unrolled_plateaus", unrolledPlateaus},
    {"host_to_host_chain", hostToHostChain},
    {"managed_discard_prefetch", managedDiscardPrefetch},
    {"quick_exit_held", quickExitHeld},
    {"shared_prefix_branch", sharedPrefixBranch},
    {"copies_only_streams", copiesOnlyStreams},
    {"fork_tree", forkTree},
};

}  // namespace

int main(int argc, char** argv) { return runScenarios(argc, argv, kScenarios); }
