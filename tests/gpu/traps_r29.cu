// traps_r29 (helper-written): a twenty-ninth red-team round of odd but legal CUDA C++
// patterns in the style of traps_r27.cu (trap_common.cuh, trap_helpers.cuh,
// trap_mirror.cuh), aimed at what a tool that turns every op into a token (the
// kernel and its launch shape and stream, not its argument values), finds
// token sequences that repeat, holds ops back while it matches them against
// recorded segments, replays segments as graphs and patches the argument
// values that changed could get wrong: token sequences that repeat while the
// meaning lives in values that are not plain data (a pointer to a pointer
// table rewritten four ways, a mode scalar selecting the code path, by-value
// structs with pointers at moving offsets and unions whose active member
// changes, integers whose bytes equal a device address), steps whose streams
// and event targets rotate, copies and memsets whose size, kind and direction
// change at one position, 2000-op steps of three kernels with rare edits,
// synchronizations at a moving position with the host branching on the value
// it read, nested loops with varying trip counts (steps that are prefixes and
// rotations of each other), two threads with periodic streams of their own,
// the program's own graphs recording the events eager work waits on, and
// byte-granular copies and memsets beside concurrent byte stores. Each
// scenario is deterministic in eager (integer kernels, every cross-stream
// access ordered by a stream, an event or a host barrier; concurrent writes
// only to disjoint bytes), prints digests of its buffers, and checks its
// results against a host mirror of its kernels (a MISMATCH line and exit 1 on
// a difference); check_traps.py requires the same output under graft. No
// line depends on an address.
//
//   ptr_table_modes       one kernel, launched four times a step with the same
//                         shape, reads all its buffers through a pointer to a
//                         4-entry pointer table and takes a mode (0..3) that
//                         selects which entries it reads and writes (modes
//                         cycle with periods 2, 3 and 5 at the four positions).
//                         The table is a fresh permutation of four buffers each
//                         step, written in one of four ways at one position: a
//                         1-thread kernel taking the table by value, eight
//                         cuStreamWriteValue32 (pointer halves, in alternating
//                         order), a host write into a mapped pinned ring slot
//                         whose device address is the argument, a pinned H2D
//                         copy; the fourth launch reads a table written in an
//                         earlier step. Ring slots are reused behind an event
//                         synchronize. What graft may get wrong: the by-value
//                         table or the slot address not patched (values only),
//                         a kernel reading the table before the op that wrote
//                         it, the mode scalar of another step replayed.
//   wait_target_rotation  three streams whose roles rotate every step (main:
//                         period 3; the two producers swap: period 2): the main
//                         stream forks to both, each producer folds into its
//                         own buffer, the one selected (period 2, flipped every
//                         fifth step) spins ~50 us; the main stream waits on
//                         the selected producer's event, consumes its buffer,
//                         then waits on the other's and consumes that. First
//                         half non-blocking streams, second half the legacy
//                         stream and two blocking streams; an event synchronize
//                         and read-back on irregular steps. What graft may get
//                         wrong: a graph of the step whose wait names the other
//                         event (same tokens, other record), a stream rotation
//                         replayed on the previous step's streams.
//   copy_kind_sizes       the same five kernels every step on one stream (they
//                         read and write device, pinned mapped and managed
//                         memory), between them at fixed positions: a
//                         cudaMemcpyDefault copy whose destination cycles
//                         device / pinned host / managed (period 3), whose
//                         source cycles (period 6) and whose size cycles 0, 4,
//                         4097, 32768, 65536 B at odd byte offsets; a memset
//                         through cudaMemsetAsync, cuMemsetD16Async or
//                         cuMemsetD32Async (period 3) of 0..16384 elements on
//                         device, managed or pinned memory (period 4); a
//                         device copy through three entry points of 4 B or
//                         ~64 KiB at unaligned offsets. What graft may get
//                         wrong: a copy or memset node patched with a new size
//                         but the old launch shape of its own copy kernel, a
//                         device-to-host copy taken for the device copy at the
//                         same position, bytes outside an odd range written.
//   long_rare_edits       a 2000-launch step on one blocking stream, two
//                         kernels in pseudo-random order over three buffers
//                         (salts of every 32nd and 64th launch cycling with
//                         periods 3 and 5); every 7th step one launch is
//                         replaced by a third kernel, every 11th one is dropped,
//                         every 13th one is inserted, each at a moving position;
//                         every 17th a read-back at a moving position whose
//                         value picks one of three continuations. What graft
//                         may get wrong: hundreds of held launches not all
//                         issued, or issued out of order, at a late mismatch; an
//                         inserted launch of the same kernel accepted as the
//                         recorded one with the recorded arguments.
//   sync_branch_moving    a 400-op step on two non-blocking streams with
//                         fork/join windows; at a position that moves every
//                         step the host observes the stream working there (a
//                         digest kernel into mapped memory and a stream
//                         synchronize, an event query poll, a pinned copy, a
//                         stream memory write it spins on) and, from the value,
//                         inserts a kernel whose scalar is that value, inserts
//                         a memset, skips the next launch or goes on. What
//                         graft may get wrong: held work behind the observation
//                         not issued (the value is stale), the other stream's
//                         held work issued out of order around it.
//   nested_trip_counts    a prefix, an inner loop of three launches run 7, 7, 9
//                         times (8 on irregular steps), a fork to a second
//                         stream running an inner loop of two launches 4 or 11
//                         times while the first runs a 12-launch sequence
//                         rotated by 0, 4 or 8, a join and a tail of 0..3
//                         five-launch blocks: within each group of four steps
//                         each step's sequence (values included) is the
//                         previous one's plus a block. What graft may get
//                         wrong: an unrolled inner loop replayed for the wrong
//                         trip count, a step matched as the prefix of the next,
//                         a rotation matched at the wrong phase.
//   two_thread_turns      two threads, each with its own non-blocking stream
//                         and buffers, issue chunks of 2..13 launches in turn
//                         (chunk lengths with periods 2, 3 and 4), joined by
//                         events recorded in one thread and waited on in the
//                         other; one thread synchronizes its stream at a
//                         moving position mid-chunk; the last third of the run
//                         both issue at once with no dependencies between them.
//                         What graft may get wrong: another thread's held work
//                         issued after a wait on an event that names it, a
//                         stream synchronize that issues only the caller's
//                         part, a segment mixing both threads replayed.
//   struct_union_args     a kernel taking an 88-byte struct by value: a
//                         destination pointer in one of six slots (period 3),
//                         the other slots small integers, interior pointers into
//                         a read-only base buffer, copies of the destination
//                         pointer or addresses of other allocations; a union
//                         whose active member (pointer, base-relative integer,
//                         two floats' bits: -0.0, a NaN payload, a denormal;
//                         two words) changes with period 5; a key integer equal
//                         to the base pointer, inside it, or elsewhere; two
//                         launches a step with the destination slots swapped;
//                         destination buffers moved to new addresses every 9
//                         steps. The kernel decodes everything relative to the
//                         base (no result depends on an address). What graft
//                         may get wrong: bytes patched by a per-offset pointer
//                         map learned from earlier launches, an integer equal
//                         to an address relocated when the buffer moves.
//   program_graph_events  event E is recorded, in turn, by an event-record node
//                         of the program's own graph (kernel node parameters
//                         set every launch) on a third stream, eagerly on the
//                         main stream, and eagerly on the third stream, each
//                         after a ~40 us kernel; a second stream waits on E and
//                         consumes, every fourth step through a second program
//                         graph (stream-captured, re-captured every 10 steps and
//                         swapped in with cudaGraphExecUpdate) instead; an event
//                         query poll and read-back on every seventh step. What
//                         graft may get wrong: a wait on E modelled after the
//                         last eager record it saw (the graph's record is
//                         invisible to it), the program's graph launched before
//                         held work on its stream.
//   byte_edges_concurrent one 32-lane byte buffer: each step 32 byte-granular
//                         memsets (8- and 16-bit) and device copies at odd
//                         offsets and 1..13 byte lengths on one stream, while
//                         a kernel on a second stream (forked, joined) stores
//                         single bytes right beside each range (the three bytes
//                         before and after: same words, disjoint bytes); on
//                         every fourth step the kernel runs on the first stream
//                         instead. What graft may get wrong: its own copy and
//                         memset kernels writing whole words at a range's
//                         edges (read-modify-write over the concurrent byte
//                         stores, or bytes outside the range).
//
//   traps_r29 NAME [--iters N]     one scenario (see kScenarios)
//   traps_r29 --list               the scenario names
//
// Linked to libcuda (-lcuda: stream memory operations, driver memsets and
// copies); no device-side launches:
//   nvcc -O2 -std=c++17 -lineinfo -gencode arch=compute_90,code=[sm_90,compute_90]
//        -Xcompiler=-Wall,-Wextra,-Werror -o traps_r29 traps_r29.cu -lcuda
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "trap_mirror.cuh"

namespace {

// ---------------------------------------------------------------- shared helpers

constexpr int kW = 2048;  // words per buffer in most scenarios
constexpr int kWGrid = kW / kBlock;
constexpr int kL = 128;  // words per buffer of the one-block scenarios



std::vector<uint32_t> patternWords(uint32_t seed, int n) { return hostPattern(seed, n); }
uint8_t* bytesOf(std::vector<uint32_t>& v) { return reinterpret_cast<uint8_t*>(v.data()); }


// Polls an event until the driver (or graft) says it completed.
void pollEvent(cudaEvent_t e) {
  cudaError_t r;
  while ((r = cudaEventQuery(e)) == cudaErrorNotReady) {
  }
  CK(r);
}

// dst[k] folds in a and b at other indices. dst must alias neither.
__host__ __device__ inline void fold3At(uint32_t* dst, const uint32_t* a, const uint32_t* b, int n, uint32_t salt,
                                        int k) {
  dst[k] = rotl(dst[k], 7) ^ (a[(k * 5 + 3) % n] + rotl(b[(k * 3 + 1) % n], 11) + salt + uint32_t(k));
}
__global__ void fold3(uint32_t* dst, const uint32_t* a, const uint32_t* b, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) fold3At(dst, a, b, n, salt, k);
}
void fold3Host(std::vector<uint32_t>& dst, const std::vector<uint32_t>& a, const std::vector<uint32_t>& b,
               uint32_t salt) {
  const int n = int(dst.size());
  for (int k = 0; k < n; ++k) fold3At(dst.data(), a.data(), b.data(), n, salt, k);
}

// The three element functions of wait_target_rotation and program_graph_events.
__host__ __device__ inline void stepInAt(uint32_t* in, const uint32_t* acc, int n, uint32_t salt, int k) {
  in[k] = rotl(in[k], 5) ^ (acc[(k * 3 + 7) % n] + salt);
}
__host__ __device__ inline void spinFoldAt(uint32_t* x, const uint32_t* in, int n, uint32_t salt, int k) {
  x[k] = x[k] * 0x9e3779b1u + (in[(k * 5 + 3) % n] ^ salt);
}
__host__ __device__ inline void consumeAt(uint32_t* acc, const uint32_t* x, int n, uint32_t salt, int k) {
  acc[k] = rotl(acc[k], 7) + (x[(k * 11 + 1) % n] ^ salt);
}
__global__ void stepIn(uint32_t* in, const uint32_t* acc, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) stepInAt(in, acc, n, salt, k);
}
// Every thread spins first (the result does not depend on how long).
__global__ void spinFold(uint32_t* x, const uint32_t* in, int n, uint32_t salt, long long spin) {
  spinCycles(spin);
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) spinFoldAt(x, in, n, salt, k);
}
__global__ void consume(uint32_t* acc, const uint32_t* x, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) consumeAt(acc, x, n, salt, k);
}
void stepInHost(std::vector<uint32_t>& in, const std::vector<uint32_t>& acc, uint32_t salt) {
  const int n = int(in.size());
  for (int k = 0; k < n; ++k) stepInAt(in.data(), acc.data(), n, salt, k);
}
void spinFoldHost(std::vector<uint32_t>& x, const std::vector<uint32_t>& in, uint32_t salt) {
  const int n = int(x.size());
  for (int k = 0; k < n; ++k) spinFoldAt(x.data(), in.data(), n, salt, k);
}
void consumeHost(std::vector<uint32_t>& acc, const std::vector<uint32_t>& x, uint32_t salt) {
  const int n = int(acc.size());
  for (int k = 0; k < n; ++k) consumeAt(acc.data(), x.data(), n, salt, k);
}

// Three one-block kernels of one signature (long_rare_edits, nested_trip_counts):
// the order of any two launches on one buffer matters (trap_mirror.cuh).
__global__ void edA(uint32_t* dst, const uint32_t* src, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) orderedOpAt(0, dst, src, n, salt, k);
}
__global__ void edB(uint32_t* dst, const uint32_t* src, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) orderedOpAt(1, dst, src, n, salt, k);
}
__global__ void edC(uint32_t* dst, const uint32_t* src, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) orderedOpAt(2, dst, src, n, salt, k);
}
// One launch of kernel fn (kL threads) and its mirror.
void runEd(int fn, cudaStream_t s, uint32_t* dst, const uint32_t* src, uint32_t salt, std::vector<uint32_t>& hDst,
           const std::vector<uint32_t>& hSrc) {
  switch (fn) {
    case 0:
      edA<<<1, kL, 0, s>>>(dst, src, kL, salt);
      break;
    case 1:
      edB<<<1, kL, 0, s>>>(dst, src, kL, salt);
      break;
    default:
      edC<<<1, kL, 0, s>>>(dst, src, kL, salt);
      break;
  }
  for (int k = 0; k < kL; ++k) orderedOpAt(fn, hDst.data(), hSrc.data(), kL, salt, k);
}

// ================================================================ ptr_table_modes

struct Tab {
  uint32_t* p[4];
};

// Mode 0 folds entry 0 into acc, 1 rewrites entry 1 from acc, 2 folds entries
// 2 and 3 into acc, 3 rewrites entry 3 from acc. Each writes one buffer, read
// elsewhere only at the written index.
__host__ __device__ inline void tabAt(uint32_t* const* p, uint32_t* acc, int mode, uint32_t salt, int n, int k) {
  switch (mode) {
    case 0:
      acc[k] = rotl(acc[k], 3) ^ (p[0][(k * 5 + 1) % n] + salt + uint32_t(k));
      break;
    case 1:
      p[1][k] = p[1][k] * 3u + (acc[(k * 7 + 2) % n] ^ salt);
      break;
    case 2:
      acc[k] = acc[k] + (p[2][(uint32_t(k) + (salt & 1023u)) % uint32_t(n)] ^ rotl(p[3][k], 9));
      break;
    default:
      p[3][k] ^= hash32(acc[k] + salt + uint32_t(k));
      break;
  }
}
__global__ void tabOp(const Tab* t, uint32_t* acc, int mode, uint32_t salt, int n) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) {
    uint32_t* p[4] = {t->p[0], t->p[1], t->p[2], t->p[3]};
    tabAt(p, acc, mode, salt, n, k);
  }
}
__global__ void setTab(Tab* dst, Tab v) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *dst = v;
}

// The code-th (0..23) permutation of 0..3.
std::array<int, 4> permOf(int code) {
  std::vector<int> items = {0, 1, 2, 3};
  std::array<int, 4> out = {};
  int f = 6;
  for (int j = 0; j < 4; ++j) {
    const int q = code / f;
    code %= f;
    out[size_t(j)] = items[size_t(q)];
    items.erase(items.begin() + q);
    if (j < 3) f /= (3 - j);
  }
  return out;
}

// What a tool could get wrong: every launch of tabOp has the same token and
// its pointer argument is one of four table addresses, but what it reads and
// writes is decided by the table's contents (a permutation drawn anew every
// step) and by the mode scalar. The table is written at one position in four
// ways: a kernel taking it by value (only its values change), stream memory
// writes of pointer halves, a host write into a ring slot of mapped memory (the
// slot address is the argument), a pinned copy. A replay with a stale value in
// any of them, or with the mode of another step, changes the results.
void ptrTableModes() {
  const int n = kW;
  cudaStream_t s = nonBlockingStream();
  uint32_t* P[4];
  std::vector<uint32_t> hP[4];
  for (int k = 0; k < 4; ++k) {
    P[k] = deviceBuffer(uint32_t(2901 + k), n);
    hP[k] = patternWords(uint32_t(2901 + k), n);
  }
  uint32_t* acc = deviceBuffer(2905, n);
  std::vector<uint32_t> hAcc = patternWords(2905, n);
  Tab* dT[3];
  for (auto& t : dT) CK(cudaMalloc(reinterpret_cast<void**>(&t), sizeof(Tab)));
  constexpr int kRing = 16;
  Tab* ringHost = nullptr;
  Tab* ringDev = nullptr;
  CK(cudaHostAlloc(reinterpret_cast<void**>(&ringHost), kRing * sizeof(Tab), cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&ringDev), ringHost, 0));
  Tab* stage = nullptr;
  CK(cudaMallocHost(reinterpret_cast<void**>(&stage), kRing * sizeof(Tab)));
  cudaEvent_t eSlot[kRing];
  for (auto& e : eSlot) e = untimedEvent();
  auto tabFor = [&](int perm) {
    const std::array<int, 4> order = permOf(perm);
    Tab t;
    for (int j = 0; j < 4; ++j) t.p[j] = P[order[size_t(j)]];
    return t;
  };
  auto tabHost = [&](int perm, int mode, uint32_t salt) {
    const std::array<int, 4> order = permOf(perm);
    uint32_t* p[4];
    for (int j = 0; j < 4; ++j) p[j] = hP[order[size_t(j)]].data();
    for (int k = 0; k < n; ++k) tabAt(p, hAcc.data(), mode, salt, n, k);
  };
  int tabPerm[3] = {0, 0, 0};
  for (auto& t : dT) {
    const Tab v = tabFor(0);
    CK(cudaMemcpy(t, &v, sizeof v, cudaMemcpyHostToDevice));
  }
  std::memset(static_cast<void*>(ringHost), 0, kRing * sizeof(Tab));
  preload(tabOp);
  preload(setTab);
  CK(cudaDeviceSynchronize());
  static const int kModesB[3] = {1, 3, 0};
  static const int kModesC[5] = {2, 1, 3, 0, 1};
  int slotWaits = 0, sources[4] = {0, 0, 0, 0};
  for (int i = 0; i < g_iters; ++i) {
    const int src = i % 5 == 2 ? 3 : i % 3;
    const int perm = int(hash32(uint32_t(i) * 0x9e3779b9u + 2901u) % 24u);
    const Tab v = tabFor(perm);
    const int slot = i % kRing;
    ++sources[src];
    if ((src == 2 || src == 3) && i >= kRing) {  // the slot's last reader (16 steps back) is done
      CK(cudaEventSynchronize(eSlot[slot]));
      ++slotWaits;
    }
    const Tab* cur = nullptr;
    switch (src) {
      case 0:
        setTab<<<1, 32, 0, s>>>(dT[0], v);
        CKL();
        tabPerm[0] = perm;
        cur = dT[0];
        break;
      case 1:
        for (int w0 = 0; w0 < 8; ++w0) {
          const int w = i % 2 ? 7 - w0 : w0;
          uint64_t bits = 0;
          std::memcpy(&bits, &v.p[w / 2], 8);
          const uint32_t half = w % 2 ? uint32_t(bits >> 32) : uint32_t(bits);
          CKD(cuStreamWriteValue32(cu(s), dptr(dT[1]) + CUdeviceptr(4 * w), half, CU_STREAM_WRITE_VALUE_DEFAULT));
        }
        tabPerm[1] = perm;
        cur = dT[1];
        break;
      case 2:
        ringHost[slot] = v;
        cur = ringDev + slot;
        break;
      default:
        stage[slot] = v;
        CK(cudaMemcpyAsync(dT[2], &stage[slot], sizeof(Tab), cudaMemcpyHostToDevice, s));
        tabPerm[2] = perm;
        cur = dT[2];
        break;
    }
    const uint32_t salt = hash32(uint32_t(i) + 29010u);
    const int modes[3] = {i % 2 ? 0 : 2, kModesB[i % 3], kModesC[i % 5]};
    for (int m = 0; m < 3; ++m) {
      tabOp<<<kWGrid, kBlock, 0, s>>>(cur, acc, modes[m], salt + uint32_t(m), n);
      tabHost(perm, modes[m], salt + uint32_t(m));
    }
    const int stale = (i / 2) % 3;  // a device table, maybe written steps ago
    const int modeD = (i / 3) % 2 ? 3 : 1;
    tabOp<<<kWGrid, kBlock, 0, s>>>(dT[stale], acc, modeD, salt ^ 0x5555u, n);
    CKL();
    tabHost(tabPerm[stale], modeD, salt ^ 0x5555u);
    CK(cudaEventRecord(eSlot[slot], s));
    if (at(i)) {
      CK(cudaStreamSynchronize(s));
      checkDev("ptm_acc", i, acc, hAcc);
      const char* names[4] = {"ptm_p0", "ptm_p1", "ptm_p2", "ptm_p3"};
      for (int k = 0; k < 4; ++k) checkDev(names[k], i, P[k], hP[k]);
    }
  }
  std::printf("ptr_table_modes: tables by kernel %d, stream writes %d, mapped ring %d, pinned copy %d; %d slot waits\n",
              sources[0], sources[1], sources[2], sources[3], slotWaits);
  CK(cudaStreamSynchronize(s));
  CK(cudaFreeHost(ringHost));
  CK(cudaFreeHost(stage));
}

// ================================================================ wait_target_rotation

constexpr long long kRotSpin = 100000;  // cycles: ~50 us on an H100

// What a tool could get wrong: every step has the same tokens but for the
// streams (main: period 3; producers swapped: period 2) and which producer's
// event the first wait names (period 2, flipped every fifth step); the
// selected producer is the slow one, so a replay that waits on the other event
// before the first consume reads a buffer still being written.
void waitTargetRotation() {
  const int n = kW;
  cudaStream_t nb[3] = {nonBlockingStream(), nonBlockingStream(), nonBlockingStream()};
  cudaStream_t bl[2] = {blockingStream(), blockingStream()};
  cudaEvent_t eF = untimedEvent(), eEnd = untimedEvent();
  cudaEvent_t e[2] = {untimedEvent(), untimedEvent()};
  uint32_t *in = deviceBuffer(2911, n), *acc = deviceBuffer(2912, n), *acc2 = deviceBuffer(2913, n);
  uint32_t* X[2] = {deviceBuffer(2914, n), deviceBuffer(2915, n)};
  std::vector<uint32_t> hIn = patternWords(2911, n), hAcc = patternWords(2912, n), hAcc2 = patternWords(2913, n);
  std::vector<uint32_t> hX[2] = {patternWords(2914, n), patternWords(2915, n)};
  preload(stepIn);
  preload(spinFold);
  preload(consume);
  CK(cudaDeviceSynchronize());
  const int half = g_iters / 2;
  int peeks = 0;
  for (int i = 0; i < g_iters; ++i) {
    if (i == half) CK(cudaDeviceSynchronize());  // the streams change kind
    cudaStream_t S[3] = {nb[0], nb[1], nb[2]};
    if (i >= half) {
      S[0] = nullptr;  // the legacy stream
      S[1] = bl[0];
      S[2] = bl[1];
    }
    const int r = i % 3, sw = i % 2;
    cudaStream_t M = S[r], Q[2] = {S[(r + 1 + sw) % 3], S[(r + 2 - sw) % 3]};
    const uint32_t salt = hash32(uint32_t(i) + 29020u);
    if (i > 0) CK(cudaStreamWaitEvent(M, eEnd, 0));  // after the previous step's main stream
    stepIn<<<kWGrid, kBlock, 0, M>>>(in, acc, n, salt);
    CKL();
    stepInHost(hIn, hAcc, salt);
    CK(cudaEventRecord(eF, M));
    CK(cudaStreamWaitEvent(Q[0], eF, 0));
    CK(cudaStreamWaitEvent(Q[1], eF, 0));
    const int sel = (i + i / 5) % 2;
    for (int q = 0; q < 2; ++q) {
      spinFold<<<kWGrid, kBlock, 0, Q[q]>>>(X[q], in, n, salt ^ uint32_t(q + 1), q == sel ? kRotSpin : 0);
      CKL();
      spinFoldHost(hX[q], hIn, salt ^ uint32_t(q + 1));
      CK(cudaEventRecord(e[q], Q[q]));
    }
    if (irregular(i, 2911, 7)) {  // the host waits on the slow producer and reads its buffer
      CK(cudaEventSynchronize(e[sel]));
      const std::vector<uint32_t> got = fetch<uint32_t>(X[sel], size_t(n));
      expectWords("wtr_peek", i, got.data(), hX[sel].data(), size_t(n));
      ++peeks;
    }
    CK(cudaStreamWaitEvent(M, e[sel], 0));
    consume<<<kWGrid, kBlock, 0, M>>>(acc, X[sel], n, salt ^ 3u);
    CKL();
    consumeHost(hAcc, hX[sel], salt ^ 3u);
    CK(cudaStreamWaitEvent(M, e[1 - sel], 0));
    consume<<<kWGrid, kBlock, 0, M>>>(acc2, X[1 - sel], n, salt ^ 4u);
    CKL();
    consumeHost(hAcc2, hX[1 - sel], salt ^ 4u);
    CK(cudaEventRecord(eEnd, M));
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      checkDev("wtr_in", i, in, hIn);
      checkDev("wtr_x0", i, X[0], hX[0]);
      checkDev("wtr_x1", i, X[1], hX[1]);
      checkDev("wtr_acc", i, acc, hAcc);
      checkDev("wtr_acc2", i, acc2, hAcc2);
    }
  }
  std::printf("wait_target_rotation: %d mid-step read-backs\n", peeks);
}

// ================================================================ copy_kind_sizes

// What a tool could get wrong: the kernels' tokens are the same every step;
// between them, at fixed positions, a copy whose destination kind (device,
// pinned host, managed), source and size (0 to 64 KiB, odd offsets) change, a
// memset whose entry point (element size), count (0 to 16384) and target kind
// change, and a device copy through three entry points of 4 B or ~64 KiB. A
// copy or memset node patched with a new size but built for the old one, or
// taken for another direction, leaves bytes unwritten or writes others.
void copyKindSizes() {
  const int n = kN;
  const size_t bytes = size_t(n) * 4;
  cudaStream_t s = nonBlockingStream();
  uint32_t *A = deviceBuffer(2931, n), *B = deviceBuffer(2932, n);
  Mapped H = mappedBuffer(size_t(n), 2933);
  uint32_t* M = nullptr;
  CK(cudaMallocManaged(reinterpret_cast<void**>(&M), bytes));
  std::vector<uint32_t> hA = patternWords(2931, n), hB = patternWords(2932, n), hH(H.host, H.host + n),
                        hM = patternWords(2934, n);
  std::memcpy(M, hM.data(), bytes);
  preload(fold3);
  CK(cudaDeviceSynchronize());
  static const size_t kSizes[5] = {0, 4, 4097, 32768, 65536};
  Digest codes;
  int copied = 0, set = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 29030u);
    fold3<<<kGrid, kBlock, 0, s>>>(A, B, H.dev, n, salt);  // K1
    CKL();
    fold3Host(hA, hB, hH, salt);
    {  // C1: cudaMemcpyDefault, destination device / pinned / managed, source device or managed
      const int dk = i % 3, sk = (i / 3) % 2;
      uint8_t* dst = dk == 0 ? reinterpret_cast<uint8_t*>(B)
                             : (dk == 1 ? reinterpret_cast<uint8_t*>(H.host) : reinterpret_cast<uint8_t*>(M));
      std::vector<uint32_t>& hDst = dk == 0 ? hB : (dk == 1 ? hH : hM);
      const bool fromM = sk == 1 && dk != 2;
      const uint8_t* src = fromM ? reinterpret_cast<const uint8_t*>(M) : reinterpret_cast<const uint8_t*>(A);
      std::vector<uint32_t>& hSrc = fromM ? hM : hA;
      const size_t so = size_t(i * 13) % 61, dof = size_t(i * 7) % 53;
      const size_t len = std::min(kSizes[i % 5], bytes - std::max(so, dof));
      const cudaError_t r = keep(cudaMemcpyAsync(dst + dof, src + so, len, cudaMemcpyDefault, s));
      addCode(codes, int(r));
      if (r == cudaSuccess) {
        std::memcpy(bytesOf(hDst) + dof, bytesOf(hSrc) + so, len);
        ++copied;
      }
    }
    fold3<<<kGrid, kBlock, 0, s>>>(B, A, M, n, salt ^ 1u);  // K2
    CKL();
    fold3Host(hB, hA, hM, salt ^ 1u);
    {  // S: memset of 8, 16 or 32-bit elements on device, managed or pinned memory
      const int api = i % 3, tk = (i / 2) % 4;
      uint8_t* target = tk == 0   ? reinterpret_cast<uint8_t*>(A)
                        : tk == 1 ? reinterpret_cast<uint8_t*>(B)
                        : tk == 2 ? reinterpret_cast<uint8_t*>(M)
                                  : reinterpret_cast<uint8_t*>(H.dev);
      std::vector<uint32_t>& hT = tk == 0 ? hA : (tk == 1 ? hB : (tk == 2 ? hM : hH));
      const size_t elem = api == 0 ? 1 : (api == 1 ? 2 : 4);
      const size_t off = api == 0 ? size_t(i * 17) % 97 : (api == 1 ? 2 * (size_t(i * 5) % 41) : 4 * (size_t(i * 3) % 29));
      const size_t maxCount = (bytes - off) / elem;
      const size_t counts[5] = {0, 1, 333, 4096, maxCount};
      const size_t count = std::min(counts[(i / 2 + (i % 2) * 3) % 5], maxCount);
      const uint32_t value = hash32(salt ^ 0x77u);
      int code = 0;
      if (api == 0) {
        code = int(keep(cudaMemsetAsync(target + off, int(value & 0xffu), count, s)));
      } else if (api == 1) {
        code = int(cuMemsetD16Async(dptr(target + off), uint16_t(value), count, cu(s)));
      } else {
        code = int(cuMemsetD32Async(dptr(target + off), value, count, cu(s)));
      }
      addCode(codes, code);
      if (code == 0) {
        uint8_t* hb = bytesOf(hT) + off;
        for (size_t c = 0; c < count; ++c)
          for (size_t b = 0; b < elem; ++b) hb[c * elem + b] = uint8_t(value >> (8 * b));
        ++set;
      }
    }
    fold3<<<kGrid, kBlock, 0, s>>>(M, B, A, n, salt ^ 2u);  // K3: managed
    CKL();
    fold3Host(hM, hB, hA, salt ^ 2u);
    fold3<<<kGrid, kBlock, 0, s>>>(H.dev, A, B, n, salt ^ 3u);  // K4: pinned
    CKL();
    fold3Host(hH, hA, hB, salt ^ 3u);
    {  // C2: device to device through three entry points, 4 B or ~64 KiB at unaligned offsets
      const int api = i % 3;
      const bool toB = (i / 3) % 2 == 0;
      uint8_t* dst = reinterpret_cast<uint8_t*>(toB ? B : A);
      const uint8_t* src = reinterpret_cast<const uint8_t*>(toB ? A : B);
      std::vector<uint32_t>& hDst = toB ? hB : hA;
      std::vector<uint32_t>& hSrc = toB ? hA : hB;
      const size_t so = size_t(i * 29) % 128, dof = size_t(i * 31) % 128;
      const size_t len = (i / 2) % 2 ? 4 : bytes - 256;
      int code = 0;
      if (api == 0) {
        code = int(keep(cudaMemcpyAsync(dst + dof, src + so, len, cudaMemcpyDeviceToDevice, s)));
      } else if (api == 1) {
        code = int(cuMemcpyDtoDAsync(dptr(dst + dof), dptr(src + so), len, cu(s)));
      } else {
        code = int(cuMemcpyAsync(dptr(dst + dof), dptr(src + so), len, cu(s)));
      }
      addCode(codes, code);
      if (code == 0) std::memcpy(bytesOf(hDst) + dof, bytesOf(hSrc) + so, len);
    }
    fold3<<<kGrid, kBlock, 0, s>>>(A, H.dev, M, n, salt ^ 4u);  // K5
    CKL();
    fold3Host(hA, hH, hM, salt ^ 4u);
    if (at(i)) {
      CK(cudaStreamSynchronize(s));
      checkDev("cks_a", i, A, hA);
      checkDev("cks_b", i, B, hB);
      checkWords("cks_h", i, H.host, hH);
      checkWords("cks_m", i, M, hM);
      print("cks_codes", i, codes.h);
    }
  }
  std::printf("copy_kind_sizes: %d default-kind copies, %d memsets taken\n", copied, set);
  CK(cudaStreamSynchronize(s));
  CK(cudaFree(M));
}

// ================================================================ long_rare_edits

struct EdOp {
  uint8_t fn, dst, src;
  uint32_t salt;
};
std::vector<EdOp> edScript(int len, uint32_t seed) {
  std::vector<EdOp> ops;
  for (int j = 0; j < len; ++j) {
    const uint32_t h = hash32(uint32_t(j) * 0x85ebca6bu + seed);
    EdOp op;
    op.fn = uint8_t(h % 2);
    op.dst = uint8_t((h >> 4) % 3);
    op.src = uint8_t((op.dst + 1 + ((h >> 8) & 1u)) % 3);
    op.salt = hash32(h ^ 0x5bd1e995u);
    ops.push_back(op);
  }
  return ops;
}

constexpr int kEditLen = 2000;

// What a tool could get wrong: a 2000-launch step of two kernels (a 32-gram
// index finds it) with rare edits at moving positions: a launch replaced by a
// third kernel (every 7th step), one dropped (11th), one inserted (13th: the
// same kernels, so the tokens after it match the recording shifted by one for
// a while, with other arguments), and every 17th step a read-back whose value
// picks the continuation. The matcher holds hundreds of launches when the
// mismatch comes; all must be issued, in order, with their own arguments.
void longRareEdits() {
  const std::vector<EdOp> script = edScript(kEditLen, 29040u);
  cudaStream_t s = blockingStream();
  uint32_t* d[3];
  std::vector<uint32_t> h[3];
  for (int k = 0; k < 3; ++k) {
    d[k] = deviceBuffer(uint32_t(2941 + k), kL);
    h[k] = patternWords(uint32_t(2941 + k), kL);
  }
  uint32_t* pinned = nullptr;
  CK(cudaMallocHost(reinterpret_cast<void**>(&pinned), kL * 4));
  preload(edA);
  preload(edB);
  preload(edC);
  CK(cudaDeviceSynchronize());
  static const uint32_t kP3[3] = {0x101u, 0x20202u, 0x3030303u};
  static const uint32_t kP5[5] = {7u, 77u, 777u, 7777u, 77777u};
  int replaced = 0, dropped = 0, inserted = 0, branches[3] = {0, 0, 0};
  auto pos = [](int i, uint32_t salt) { return int(hash32(uint32_t(i) * 0x27d4eb2fu + salt) % uint32_t(kEditLen)); };
  for (int i = 0; i < g_iters; ++i) {
    const bool rep = i >= 10 && i % 7 == 3, drop = i % 11 == 5, ins = i % 13 == 8, rd = i >= 17 && i % 17 == 9;
    const int rp = pos(i, 7), dp = pos(i, 11), ip = pos(i, 13), rdp = pos(i, 17);
    for (int j = 0; j < kEditLen; ++j) {
      if (rd && j == rdp) {  // a read-back; its value picks what comes next
        const int which = i % 3;
        CK(cudaMemcpyAsync(pinned, d[which], kL * 4, cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        expectWords("lre_peek", i, pinned, h[which].data(), kL);
        const uint32_t v = pinned[i % kL];
        ++branches[v % 3];
        if (v % 3 == 0) {
          const int dd = int((v >> 2) % 3);
          runEd(2, s, d[dd], d[(dd + 1) % 3], v, h[dd], h[(dd + 1) % 3]);
        } else if (v % 3 == 1) {
          const int dd = int((v >> 3) % 3);
          runEd(0, s, d[dd], d[(dd + 2) % 3], v, h[dd], h[(dd + 2) % 3]);
          runEd(0, s, d[dd], d[(dd + 2) % 3], v ^ 1u, h[dd], h[(dd + 2) % 3]);
        }
      }
      if (ins && j == ip) {  // one launch more, of one of the step's two kernels
        const uint32_t hh = hash32(uint32_t(i) ^ 0x13131313u);
        const int dd = int(hh % 3), ss = int((dd + 1 + (hh >> 4) % 2) % 3);
        runEd(int((hh >> 8) % 2), s, d[dd], d[ss], hh, h[dd], h[ss]);
        ++inserted;
      }
      if (drop && j == dp) {
        ++dropped;
        continue;
      }
      const EdOp& op = script[size_t(j)];
      uint32_t salt = op.salt;
      if (j % 32 == 7) salt += kP3[i % 3];
      if (j % 64 == 40) salt += kP5[i % 5];
      int fn = op.fn;
      if (rep && j == rp) {
        fn = 2;
        ++replaced;
      }
      runEd(fn, s, d[op.dst], d[op.src], salt, h[op.dst], h[op.src]);
    }
    CKL();
    if (at(i)) {
      CK(cudaStreamSynchronize(s));
      checkDev("lre_d0", i, d[0], h[0]);
      checkDev("lre_d1", i, d[1], h[1]);
      checkDev("lre_d2", i, d[2], h[2]);
    }
  }
  std::printf("long_rare_edits: %d replaced, %d dropped, %d inserted; continuations %d %d %d\n", replaced, dropped,
              inserted, branches[0], branches[1], branches[2]);
  CK(cudaStreamSynchronize(s));
  CK(cudaFreeHost(pinned));
}

// ================================================================ sync_branch_moving

constexpr int kP = 256;  // words per buffer
constexpr int kPGrid = kP / kBlock;
constexpr int kBranchLen = 400;

enum SbKind : uint8_t { kSbK1, kSbOpen, kSbK2, kSbClose };
struct SbOp {
  SbKind kind;
  uint32_t salt;
};
// The step's script: windows to the side stream opened and closed at hashed places.
std::vector<SbOp> sbScript() {
  std::vector<SbOp> ops;
  bool open = false;
  int inWindow = 0;
  for (int j = 0; j < kBranchLen; ++j) {
    const uint32_t h = hash32(uint32_t(j) * 0x9e3779b9u + 29050u);
    const uint32_t r = h % 8;
    SbKind k;
    if (!open && r == 0) {
      k = kSbOpen;
      open = true;
      inWindow = 0;
    } else if (open && r == 1 && inWindow >= 3) {
      k = kSbClose;
      open = false;
    } else if (open && r >= 2 && r < 5) {
      k = kSbK2;
      ++inWindow;
    } else {
      k = kSbK1;
    }
    ops.push_back({k, hash32(h ^ 0x5bd1e995u)});
  }
  if (open) ops.push_back({kSbClose, 0});
  return ops;
}

__host__ __device__ inline uint32_t wordsDigest(const uint32_t* w, int n) {
  uint32_t h = 0x811c9dc5u;
  for (int k = 0; k < n; ++k) h = hash32(h ^ w[k]) + uint32_t(k);
  return h;
}
__global__ void probeDigest(const uint32_t* w, int n, uint32_t* out) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *out = wordsDigest(w, n);
}

// What a tool could get wrong: at a position that moves every step, inside or
// outside a fork/join window, the host observes the stream working there in
// one of four ways and then issues what the value says: a launch whose scalar
// is the value, a memset, a skipped launch, nothing. The observation must see
// every op issued before it on that stream (and what they wait for), the
// other stream's held work must stay in order around it.
void syncBranchMoving() {
  const std::vector<SbOp> script = sbScript();
  cudaStream_t s1 = nonBlockingStream(), s2 = nonBlockingStream();
  cudaEvent_t eF = untimedEvent(), eJ = untimedEvent(), eObs = untimedEvent();
  uint32_t *b1 = deviceBuffer(2951, kP), *b1x = deviceBuffer(2952, kP), *b2 = deviceBuffer(2953, kP),
           *c = deviceBuffer(2954, kP);
  std::vector<uint32_t> h1 = patternWords(2951, kP), h1x = patternWords(2952, kP), h2 = patternWords(2953, kP),
                        hc = patternWords(2954, kP);
  Mapped probe = mappedBuffer(64, 0), flag = mappedBuffer(32, 0);
  uint32_t* pinned = nullptr;
  CK(cudaMallocHost(reinterpret_cast<void**>(&pinned), kP * 4));
  preload(fold3);
  preload(probeDigest);
  CK(cudaDeviceSynchronize());
  int branches[4] = {0, 0, 0, 0}, kinds[4] = {0, 0, 0, 0}, inside = 0;
  for (int i = 0; i < g_iters; ++i) {
    const int obsAt = int(hash32(uint32_t(i) * 0x27d4eb2fu + 29050u) % uint32_t(script.size()));
    const uint32_t stepSalt = hash32(uint32_t(i) + 29051u);
    fold3<<<kPGrid, kBlock, 0, s1>>>(c, b1, b1x, kP, stepSalt);
    CKL();
    fold3Host(hc, h1, h1x, stepSalt);
    bool open = false, skipNext = false;
    for (size_t j = 0; j < script.size(); ++j) {
      if (int(j) == obsAt) {
        cudaStream_t os = open ? s2 : s1;
        const uint32_t* ob = open ? b2 : b1;
        const uint32_t want = wordsDigest((open ? h2 : h1).data(), kP);
        const int kind = i % 4;
        ++kinds[kind];
        inside += open;
        uint32_t* slot = probe.dev + i % 64;
        const volatile uint32_t* slotHost = probe.host + i % 64;
        uint32_t v = 0;
        switch (kind) {
          case 0:
            probeDigest<<<1, 32, 0, os>>>(ob, kP, slot);
            CKL();
            CK(cudaStreamSynchronize(os));
            v = *slotHost;
            break;
          case 1:
            probeDigest<<<1, 32, 0, os>>>(ob, kP, slot);
            CKL();
            CK(cudaEventRecord(eObs, os));
            pollEvent(eObs);
            v = *slotHost;
            break;
          case 2:
            CK(cudaMemcpyAsync(pinned, ob, kP * 4, cudaMemcpyDeviceToHost, os));
            CK(cudaStreamSynchronize(os));
            v = wordsDigest(pinned, kP);
            break;
          default: {
            probeDigest<<<1, 32, 0, os>>>(ob, kP, slot);
            CKL();
            const uint32_t token = uint32_t(i) + 1u;
            CKD(cuStreamWriteValue32(cu(os), dptr(flag.dev), token, CU_STREAM_WRITE_VALUE_DEFAULT));
            const volatile uint32_t* f = flag.host;
            const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
            while (*f != token) {
              if (std::chrono::steady_clock::now() > until) {
                std::printf("MISMATCH sbm_flag at step %d: the stream memory write never came (20 s)\n", i);
                std::fflush(stdout);
                std::exit(1);
              }
            }
            v = *slotHost;
            break;
          }
        }
        if (v != want) {
          std::printf("MISMATCH sbm_observed at step %d (kind %d, %s): digest %08x, the host mirror says %08x\n", i,
                      kind, open ? "side stream" : "main stream", v, want);
          std::fflush(stdout);
          std::exit(1);
        }
        ++branches[v % 4];
        switch (v % 4) {
          case 0:  // a launch whose scalar is the value read
            if (open) {
              fold3<<<kPGrid, kBlock, 0, s2>>>(b2, b1, c, kP, v);
              fold3Host(h2, h1, hc, v);
            } else {
              fold3<<<kPGrid, kBlock, 0, s1>>>(b1, b1x, b2, kP, v);
              fold3Host(h1, h1x, h2, v);
            }
            CKL();
            break;
          case 1: {  // a memset on the main stream, of what it owns now
            uint32_t* t = open ? b1x : b1;
            std::vector<uint32_t>& ht = open ? h1x : h1;
            const uint32_t off = (v >> 8) % 200u;
            const uint8_t byte = uint8_t(v >> 16);
            CK(cudaMemsetAsync(t + off, byte, 64, s1));
            for (uint32_t k = 0; k < 16; ++k) ht[off + k] = uint32_t(byte) * 0x01010101u;
            break;
          }
          case 2:
            skipNext = true;
            break;
          default:
            break;
        }
      }
      const SbOp& op = script[j];
      if (skipNext && (op.kind == kSbK1 || op.kind == kSbK2)) {
        skipNext = false;
        continue;
      }
      switch (op.kind) {
        case kSbK1:
          if (open) {  // the side stream reads b1 and c: write b1x
            fold3<<<kPGrid, kBlock, 0, s1>>>(b1x, b1, c, kP, op.salt);
            fold3Host(h1x, h1, hc, op.salt);
          } else {
            fold3<<<kPGrid, kBlock, 0, s1>>>(b1, b1x, b2, kP, op.salt);
            fold3Host(h1, h1x, h2, op.salt);
          }
          break;
        case kSbOpen:
          CK(cudaEventRecord(eF, s1));
          CK(cudaStreamWaitEvent(s2, eF, 0));
          open = true;
          break;
        case kSbK2:
          fold3<<<kPGrid, kBlock, 0, s2>>>(b2, b1, c, kP, op.salt + uint32_t(i % 3));
          fold3Host(h2, h1, hc, op.salt + uint32_t(i % 3));
          break;
        case kSbClose:
          CK(cudaEventRecord(eJ, s2));
          CK(cudaStreamWaitEvent(s1, eJ, 0));
          open = false;
          break;
      }
    }
    CKL();
    if (at(i)) {
      CK(cudaStreamSynchronize(s1));  // every window joined back into s1
      checkDev("sbm_b1", i, b1, h1);
      checkDev("sbm_b1x", i, b1x, h1x);
      checkDev("sbm_b2", i, b2, h2);
      checkDev("sbm_c", i, c, hc);
    }
  }
  std::printf("sync_branch_moving: observations %d %d %d %d (%d inside a window), continuations %d %d %d %d\n",
              kinds[0], kinds[1], kinds[2], kinds[3], inside, branches[0], branches[1], branches[2], branches[3]);
  CK(cudaStreamSynchronize(s1));
  CK(cudaFreeHost(pinned));
}

// ================================================================ nested_trip_counts

// What a tool could get wrong: inner loops shorter than 32 launches a trip whose
// trip counts vary (7, 7, 9 and sometimes 8; 4 or 11 on a forked stream), a
// 12-launch sequence rotated by 0, 4 or 8, and within each group of four steps
// a step that is the previous one plus a block (arguments included): an
// unrolled loop replayed for more trips than asked, a step taken for the start
// of the next, a rotation matched at the wrong phase.
void nestedTripCounts() {
  cudaStream_t s = nonBlockingStream(), s2 = nonBlockingStream();
  cudaEvent_t eF = untimedEvent(), eJ = untimedEvent();
  uint32_t* d[4];
  std::vector<uint32_t> h[4];
  for (int k = 0; k < 4; ++k) {
    d[k] = deviceBuffer(uint32_t(2961 + k), kL);
    h[k] = patternWords(uint32_t(2961 + k), kL);
  }
  struct RotOp {
    int fn, dst, src;
    uint32_t salt;
  };
  std::vector<RotOp> rot12;
  for (int j = 0; j < 12; ++j) {
    const uint32_t hh = hash32(uint32_t(j) + 29062u);
    const int dst = (hh >> 4) & 1u ? 3 : 0;
    rot12.push_back({int(hh % 3), dst, 3 - dst, hash32(hh)});
  }
  preload(edA);
  preload(edB);
  preload(edC);
  CK(cudaDeviceSynchronize());
  static const int kT1[3] = {7, 7, 9};
  static const int kT2[2] = {4, 11};
  int launches = 0, odd = 0;
  auto ed = [&](int fn, cudaStream_t st, int dst, int src, uint32_t salt) {
    runEd(fn, st, d[dst], d[src], salt, h[dst], h[src]);
    ++launches;
  };
  for (int i = 0; i < g_iters; ++i) {
    const int g = i / 4, blocks = i % 4;
    int t1 = kT1[g % 3];
    if (irregular(i, 2961, 19)) {
      t1 = 8;
      ++odd;
    }
    const int t2 = kT2[g % 2];
    const int rot = (g % 3) * 4;
    const uint32_t gs = hash32(uint32_t(g) + 29060u);
    ed(0, s, 0, 1, gs ^ 1u);  // prefix
    ed(1, s, 1, 2, gs ^ 2u);
    ed(0, s, 2, 3, gs ^ 3u);
    for (int t = 0; t < t1; ++t) {  // inner loop 1
      ed(0, s, 0, 3, hash32(uint32_t(t)) + (t % 2 ? gs : 0u));
      ed(1, s, 3, 0, hash32(uint32_t(t) + 100u));
      ed(2, s, 1, 0, hash32(uint32_t(t) + 200u) ^ gs);
    }
    CK(cudaEventRecord(eF, s));
    CK(cudaStreamWaitEvent(s2, eF, 0));
    for (int t = 0; t < t2; ++t) {  // inner loop 2 on the forked stream: d2 from d1
      ed(0, s2, 2, 1, hash32(uint32_t(t) + 300u) + gs);
      ed(2, s2, 2, 1, hash32(uint32_t(t) + 400u));
    }
    for (int j = 0; j < 12; ++j) {  // meanwhile on s: d0 and d3 only
      const RotOp& op = rot12[size_t((j + rot) % 12)];
      ed(op.fn, s, op.dst, op.src, op.salt);
    }
    CK(cudaEventRecord(eJ, s2));
    CK(cudaStreamWaitEvent(s, eJ, 0));
    for (int b = 0; b < blocks; ++b) {  // the tail grows by a block each step of the group
      const uint32_t bs = hash32(uint32_t(b) * 31u + 29063u);
      ed(2, s, 1, 2, bs);
      ed(0, s, 3, 1, bs ^ 1u);
      ed(1, s, 0, 2, bs ^ 2u);
      ed(0, s, 2, 0, bs ^ 3u);
      ed(1, s, 1, 3, bs ^ 4u);
    }
    CKL();
    if (at(i)) {
      CK(cudaStreamSynchronize(s));
      const char* names[4] = {"ntc_d0", "ntc_d1", "ntc_d2", "ntc_d3"};
      for (int k = 0; k < 4; ++k) checkDev(names[k], i, d[k], h[k]);
    }
  }
  std::printf("nested_trip_counts: %d launches, %d steps with 8 trips\n", launches, odd);
  CK(cudaStreamSynchronize(s));
}

// ================================================================ two_thread_turns

struct Party {
  const char* name = "";
  uint32_t seed = 0;
  cudaStream_t s = nullptr;
  cudaEvent_t e1 = nullptr, e2 = nullptr;
  uint32_t* b0 = nullptr;
  uint32_t* b1 = nullptr;
  std::vector<uint32_t> h0, h1;
  std::vector<std::string> lines;
  int syncs = 0;
};

// A party's check (its own stream synchronized): a MISMATCH line and exit 1, or
// a digest line kept for the main thread to print.
void partyCheck(Party& p, const char* what, int at, const uint32_t* d, const std::vector<uint32_t>& want,
                bool keepLine) {
  const std::vector<uint32_t> got = fetch<uint32_t>(d, want.size());
  char label[64];
  std::snprintf(label, sizeof label, "ttt_%s_%s", p.name, what);
  expectWords(label, at, got.data(), want.data(), want.size());
  if (keepLine) {
    char line[128];
    std::snprintf(line, sizeof line, "%s %d %016llx", label, at, ull(hostDigest(want.data(), want.size() * 4)));
    p.lines.push_back(line);
  }
}

// A chunk of launches on p's own buffers only (the free-running third).
void soloChunk(Party& p, int i, int len, int syncAt) {
  for (int o = 0; o < len; ++o) {
    if (o == syncAt) {
      CK(cudaStreamSynchronize(p.s));
      partyCheck(p, "mid", i, p.b0, p.h0, false);
      ++p.syncs;
    }
    const uint32_t salt = hash32(uint32_t(i) * 64u + uint32_t(o) + p.seed);
    if (o % 2 == 0) {
      fold3<<<kPGrid, kBlock, 0, p.s>>>(p.b0, p.b1, p.b1, kP, salt);
      fold3Host(p.h0, p.h1, p.h1, salt);
    } else {
      fold3<<<kPGrid, kBlock, 0, p.s>>>(p.b1, p.b0, p.b0, kP, salt);
      fold3Host(p.h1, p.h0, p.h0, salt);
    }
  }
  CKL();
}

void partyA(Party& A, Party& B, Turns& T, int phase1) {
  static const int kA1[3] = {5, 5, 9};
  static const int kFree[4] = {6, 13, 6, 9};
  for (int i = 0; i < g_iters; ++i) {
    if (i < phase1) {
      T.waitFor(4L * i);
      if (i > 0) CK(cudaStreamWaitEvent(A.s, B.e2, 0));  // B's last chunk read A.b0 and wrote B.b0
      for (int o = 0; o < kA1[i % 3]; ++o) {
        const uint32_t salt = hash32(uint32_t(i) * 64u + uint32_t(o) + 29071u);
        if (o % 2 == 0) {
          fold3<<<kPGrid, kBlock, 0, A.s>>>(A.b0, A.b1, B.b0, kP, salt);
          fold3Host(A.h0, A.h1, B.h0, salt);
        } else {
          fold3<<<kPGrid, kBlock, 0, A.s>>>(A.b1, A.b0, B.b0, kP, salt);
          fold3Host(A.h1, A.h0, B.h0, salt);
        }
      }
      CKL();
      CK(cudaEventRecord(A.e1, A.s));
      T.pass();
      T.waitFor(4L * i + 2);
      for (int o = 0; o < 4; ++o) {
        if (i % 5 == 2 && o == i % 4) {  // a synchronize at a moving place mid-chunk
          CK(cudaStreamSynchronize(A.s));
          partyCheck(A, "mid", i, A.b0, A.h0, false);
          ++A.syncs;
        }
        const uint32_t salt = hash32(uint32_t(i) * 64u + uint32_t(o) + 29072u);
        fold3<<<kPGrid, kBlock, 0, A.s>>>(A.b0, A.b1, A.b1, kP, salt);
        fold3Host(A.h0, A.h1, A.h1, salt);
      }
      CKL();
      CK(cudaEventRecord(A.e2, A.s));
      if (at(i)) {
        CK(cudaStreamSynchronize(A.s));
        partyCheck(A, "b0", i, A.b0, A.h0, true);
        partyCheck(A, "b1", i, A.b1, A.h1, true);
      }
      T.pass();
    } else {
      if (i == phase1) {  // B's last chunk read A's buffers
        T.waitFor(4L * phase1);
        CK(cudaStreamWaitEvent(A.s, B.e2, 0));
      }
      const int len = kFree[i % 4];
      soloChunk(A, i, len, i % 3 == 1 ? i % len : -1);
      if (at(i)) {
        CK(cudaStreamSynchronize(A.s));
        partyCheck(A, "b0", i, A.b0, A.h0, true);
        partyCheck(A, "b1", i, A.b1, A.h1, true);
      }
    }
  }
}

void partyB(Party& A, Party& B, Turns& T, int phase1) {
  static const int kB1[2] = {7, 3};
  static const int kB2[4] = {6, 6, 6, 2};
  static const int kFree[3] = {11, 4, 8};
  for (int i = 0; i < g_iters; ++i) {
    if (i < phase1) {
      T.waitFor(4L * i + 1);
      CK(cudaStreamWaitEvent(B.s, A.e1, 0));  // A.b1 as A's first chunk left it; A has read B.b0
      for (int o = 0; o < kB1[i % 2]; ++o) {
        const uint32_t salt = hash32(uint32_t(i) * 64u + uint32_t(o) + 29073u);
        if (o % 2 == 0) {
          fold3<<<kPGrid, kBlock, 0, B.s>>>(B.b0, B.b1, A.b1, kP, salt);
          fold3Host(B.h0, B.h1, A.h1, salt);
        } else {
          fold3<<<kPGrid, kBlock, 0, B.s>>>(B.b1, B.b0, A.b1, kP, salt);
          fold3Host(B.h1, B.h0, A.h1, salt);
        }
      }
      CKL();
      T.pass();
      T.waitFor(4L * i + 3);
      CK(cudaStreamWaitEvent(B.s, A.e2, 0));  // A.b0 as A's second chunk left it
      for (int o = 0; o < kB2[i % 4]; ++o) {
        const uint32_t salt = hash32(uint32_t(i) * 64u + uint32_t(o) + 29074u);
        if (o % 2 == 0) {
          fold3<<<kPGrid, kBlock, 0, B.s>>>(B.b0, A.b0, B.b1, kP, salt);
          fold3Host(B.h0, A.h0, B.h1, salt);
        } else {
          fold3<<<kPGrid, kBlock, 0, B.s>>>(B.b1, A.b0, B.b0, kP, salt);
          fold3Host(B.h1, A.h0, B.h0, salt);
        }
      }
      CKL();
      CK(cudaEventRecord(B.e2, B.s));
      if (at(i)) {
        CK(cudaStreamSynchronize(B.s));
        partyCheck(B, "b0", i, B.b0, B.h0, true);
        partyCheck(B, "b1", i, B.b1, B.h1, true);
      }
      T.pass();
    } else {
      const int len = kFree[i % 3];
      soloChunk(B, i, len, i % 4 == 3 ? (i / 4) % len : -1);
      if (at(i)) {
        CK(cudaStreamSynchronize(B.s));
        partyCheck(B, "b0", i, B.b0, B.h0, true);
        partyCheck(B, "b1", i, B.b1, B.h1, true);
      }
    }
  }
}

// What a tool could get wrong: two threads, each with its own periodic stream,
// take turns (host-ordered, so the process's op order repeats) in chunks of
// varying length and wait on each other's events; one synchronizes its own
// stream mid-chunk. A segment that mixes both threads' ops, a wait on the other
// thread's event issued before that thread's held record, a synchronize that
// issues only part of what its stream depends on. The last third runs both at
// once with no dependencies (graft may rest; results must not change).
void twoThreadTurns() {
  Party A, B;
  A.name = "a";
  B.name = "b";
  A.seed = 29075u;
  B.seed = 29076u;
  Party* ps[2] = {&A, &B};
  for (int k = 0; k < 2; ++k) {
    Party& p = *ps[k];
    p.s = nonBlockingStream();
    p.e1 = untimedEvent();
    p.e2 = untimedEvent();
    p.b0 = deviceBuffer(uint32_t(2971 + 2 * k), kP);
    p.b1 = deviceBuffer(uint32_t(2972 + 2 * k), kP);
    p.h0 = patternWords(uint32_t(2971 + 2 * k), kP);
    p.h1 = patternWords(uint32_t(2972 + 2 * k), kP);
  }
  preload(fold3);
  CK(cudaDeviceSynchronize());
  Turns T;
  const int phase1 = g_iters * 2 / 3;
  std::thread ta([&] { partyA(A, B, T, phase1); });
  std::thread tb([&] { partyB(A, B, T, phase1); });
  ta.join();
  tb.join();
  CK(cudaDeviceSynchronize());
  for (const std::string& l : A.lines) std::printf("%s\n", l.c_str());
  for (const std::string& l : B.lines) std::printf("%s\n", l.c_str());
  std::printf("two_thread_turns: %d turns, mid-chunk synchronizes %d and %d\n", int(T.turn), A.syncs, B.syncs);
}

// ================================================================ struct_union_args

union ArgVal {
  const uint32_t* ptr;
  uint64_t imm;
  float f[2];
  uint32_t w[2];
};
struct StructArgs {
  uint32_t tag;  // the union's active member: 0 ptr, 1 imm (base-relative), 2 f, 3 w
  uint32_t slot;  // which slot holds the destination
  uint64_t slots[6];
  ArgVal u;
  uint64_t key;
  const uint32_t* base;
  uint32_t baseBytes;
  uint32_t salt;
};
static_assert(sizeof(StructArgs) == 88, "the by-value struct's size");

// What the kernel makes of the struct with no address in it; the host builds
// the same from what it put there.
struct ArgView {
  uint32_t tag = 0, salt = 0;
  uint32_t uval0 = 0, uval1 = 0;
  int keyIn = 0;
  uint32_t keyOff = 0;
  int cls[6] = {4, 4, 4, 4, 4, 4};  // 0 into base (val: word offset), 1 small integer, 2 the destination again,
                                    // 3 elsewhere, 4 the destination's own slot
  uint32_t val[6] = {0, 0, 0, 0, 0, 0};
};

__host__ __device__ inline uint32_t structValue(const ArgView& v, const uint32_t* base, const uint32_t* uptr, int n,
                                                int k) {
  const uint32_t uk = uint32_t(k), un = uint32_t(n);
  uint32_t x;
  switch (v.tag) {
    case 0:
      x = uptr[(uk * 3u + v.salt) % un];
      break;
    case 1:
      x = v.uval0 ^ v.uval1 ^ uk;
      break;
    case 2:
      x = v.uval0 ^ rotl(v.uval1, 7) ^ uk;
      break;
    default:
      x = base[(v.uval0 + uk) % un] + v.uval1;
      break;
  }
  if (v.keyIn)
    x += base[(v.keyOff + uk) % un];
  else
    x ^= 0xa5a5a5a5u + uk * 7u;
  for (int j = 0; j < 6; ++j) {
    switch (v.cls[j]) {
      case 0:
        x += rotl(base[(v.val[j] + 2u * uk) % un], j + 1);
        break;
      case 1:
        x ^= v.val[j] * uint32_t(j + 1);
        break;
      case 2:
        x += 0x1000u * uint32_t(j + 1);
        break;
      case 3:
        x = rotl(x, 1);
        break;
      default:
        break;
    }
  }
  return x;
}

__host__ __device__ inline uint32_t floatBits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

// The decoding (no address survives it). The host runs it too, on the bytes it
// passes, as a check of its own view.
__host__ __device__ inline ArgView viewOf(const StructArgs& a) {
  ArgView v;
  v.tag = a.tag;
  v.salt = a.salt;
  const uint64_t b = reinterpret_cast<uint64_t>(a.base);
  switch (a.tag) {
    case 1: {
      const uint64_t d = a.u.imm - b;
      v.uval0 = uint32_t(d);
      v.uval1 = uint32_t(d >> 32);
      break;
    }
    case 2:
      v.uval0 = floatBits(a.u.f[0]);
      v.uval1 = floatBits(a.u.f[1]);
      break;
    case 3:
      v.uval0 = a.u.w[0];
      v.uval1 = a.u.w[1];
      break;
    default:
      break;
  }
  const uint64_t kd = a.key - b;
  v.keyIn = kd < a.baseBytes;
  v.keyOff = v.keyIn ? uint32_t(kd / 4) : 0u;
  const uint64_t dst = a.slots[a.slot];
  for (int j = 0; j < 6; ++j) {
    if (uint32_t(j) == a.slot) continue;
    const uint64_t sd = a.slots[j] - b;
    if (sd < a.baseBytes) {
      v.cls[j] = 0;
      v.val[j] = uint32_t(sd / 4);
    } else if (a.slots[j] < 65536u) {
      v.cls[j] = 1;
      v.val[j] = uint32_t(a.slots[j]);
    } else if (a.slots[j] == dst) {
      v.cls[j] = 2;
    } else {
      v.cls[j] = 3;
    }
  }
  return v;
}

bool sameView(const ArgView& x, const ArgView& y) {
  if (x.tag != y.tag || x.salt != y.salt || x.uval0 != y.uval0 || x.uval1 != y.uval1 || x.keyIn != y.keyIn ||
      x.keyOff != y.keyOff)
    return false;
  for (int j = 0; j < 6; ++j)
    if (x.cls[j] != y.cls[j] || x.val[j] != y.val[j]) return false;
  return true;
}

__global__ void structOp(StructArgs a, int n) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= n) return;
  const ArgView v = viewOf(a);
  uint32_t* dst = reinterpret_cast<uint32_t*>(a.slots[a.slot]);
  const uint32_t x = structValue(v, a.base, a.tag == 0 ? a.u.ptr : a.base, n, k);
  dst[k] = rotl(dst[k], 3) ^ (x + a.salt);
}

// The addresses one launch of structOp names.
struct SuaAddrs {
  const uint32_t* base = nullptr;
  const uint32_t* srcs[3] = {nullptr, nullptr, nullptr};
  const uint32_t* other = nullptr;
  const uint32_t* hostOther = nullptr;
  uint32_t* dst = nullptr;
};

// Builds launch `which` of step i (the destination in slot `slot`) and the view
// the kernel must decode from it (srcIdx: the source the union points to, or
// -1). True where the union's bytes are exactly the base pointer's.
bool buildStructArgs(int i, int which, const SuaAddrs& ad, uint32_t slot, int n, StructArgs& a, ArgView& v,
                     int& srcIdx) {
  static const uint32_t kTags[5] = {0, 1, 2, 3, 1};
  // 1.5, -0.0, a quiet NaN with a payload, the smallest denormal, a negative quiet NaN (the
  // mask below never touches the quiet bit: no signalling NaN is ever passed).
  static const uint32_t kFloatBits[5] = {0x3fc00000u, 0x80000000u, 0x7fc12345u, 0x00000001u, 0xffc00000u};
  bool coincidence = false;
  std::memset(static_cast<void*>(&a), 0, sizeof a);
  v = ArgView();
  const uint32_t hs = hash32(uint32_t(i) * 0x9e3779b9u + uint32_t(which) * 0x85ebca6bu + 29080u);
  a.tag = kTags[(i + which) % 5];
  a.slot = slot;
  a.base = ad.base;
  a.baseBytes = uint32_t(n) * 4u;
  a.salt = hs;
  v.tag = a.tag;
  v.salt = a.salt;
  const uint64_t b = reinterpret_cast<uint64_t>(ad.base);
  const uint64_t dst = reinterpret_cast<uint64_t>(ad.dst), other = reinterpret_cast<uint64_t>(ad.other);
  srcIdx = -1;
  switch (a.tag) {
    case 0:
      srcIdx = int(hs % 3);
      a.u.ptr = ad.srcs[srcIdx];
      break;
    case 1: {
      const uint64_t X = i % 10 == 1 ? 0 : (uint64_t(hash32(hs ^ 1u)) << 32 | hash32(hs ^ 2u));
      coincidence = X == 0;
      a.u.imm = b + X;
      v.uval0 = uint32_t(X);
      v.uval1 = uint32_t(X >> 32);
      break;
    }
    case 2: {
      const uint32_t bits[2] = {kFloatBits[i % 5], kFloatBits[(i / 5) % 5] ^ (hs & 0x003f0000u)};
      std::memcpy(a.u.f, bits, 8);
      v.uval0 = bits[0];
      v.uval1 = bits[1];
      break;
    }
    default:
      a.u.w[0] = hash32(hs ^ 3u);
      a.u.w[1] = hash32(hs ^ 4u);
      v.uval0 = a.u.w[0];
      v.uval1 = a.u.w[1];
      break;
  }
  switch ((i + which) % 3) {  // the key
    case 0: {
      const uint32_t off = i % 7 == 0 ? 0u : hash32(hs ^ 5u) % uint32_t(n);
      a.key = b + 4u * off;
      v.keyIn = 1;
      v.keyOff = off;
      break;
    }
    case 1:
      a.key = other + 4u * (hash32(hs ^ 6u) % uint32_t(n));
      break;
    default:
      a.key = hash32(hs ^ 7u) % 65536u;
      break;
  }
  for (uint32_t j = 0; j < 6; ++j) {
    if (j == slot) {
      a.slots[j] = dst;
      continue;
    }
    const uint32_t hj = hash32(hs + j * 0x27d4eb2fu);
    switch (hj % 5) {
      case 0: {
        const uint32_t off = (hj >> 8) % uint32_t(n);
        a.slots[j] = b + 4u * off;
        v.cls[j] = 0;
        v.val[j] = off;
        break;
      }
      case 1:
        a.slots[j] = (hj >> 8) % 65536u;
        v.cls[j] = 1;
        v.val[j] = uint32_t(a.slots[j]);
        break;
      case 2:
        a.slots[j] = dst;
        v.cls[j] = 2;
        break;
      case 3:
        a.slots[j] = other + 4u * ((hj >> 8) % uint32_t(n));
        v.cls[j] = 3;
        break;
      default:
        a.slots[j] = reinterpret_cast<uint64_t>(ad.hostOther);
        v.cls[j] = 3;
        break;
    }
  }
  return coincidence;
}

// What a tool could get wrong: one kernel, one 88-byte parameter, launched twice
// a step. The destination pointer moves among six slots (period 3), the other
// slots hold small integers, pointers into the base buffer, a second copy of
// the destination pointer, or addresses of other allocations (device and
// mapped host); the union's active member changes (period 5) and its bytes are
// sometimes exactly the base pointer's; the key integer equals the base
// pointer, points into it or elsewhere. Destination buffers move every 9 steps.
// A replay must take the new bytes whatever they look like.
void structUnionArgs() {
  const int n = kW;
  cudaStream_t s = nonBlockingStream();
  uint32_t* base = deviceBuffer(2981, n);
  std::vector<uint32_t> hBase = patternWords(2981, n);
  uint32_t* srcs[3];
  std::vector<uint32_t> hSrc[3];
  for (int k = 0; k < 3; ++k) {
    srcs[k] = deviceBuffer(uint32_t(2982 + k), n);
    hSrc[k] = patternWords(uint32_t(2982 + k), n);
  }
  uint32_t* D[3];
  std::vector<uint32_t> hD[3];
  for (int k = 0; k < 3; ++k) {
    D[k] = deviceBuffer(uint32_t(2985 + k), n);
    hD[k] = patternWords(uint32_t(2985 + k), n);
  }
  uint32_t* other = deviceBuffer(2988, n);
  Mapped hostOther = mappedBuffer(size_t(n), 2989);
  preload(structOp);
  CK(cudaDeviceSynchronize());
  static const uint32_t kSlots[3] = {1, 4, 0};
  int moves = 0, coincidences = 0;
  SuaAddrs ad;
  ad.base = base;
  for (int k = 0; k < 3; ++k) ad.srcs[k] = srcs[k];
  ad.other = other;
  ad.hostOther = hostOther.dev;
  for (int i = 0; i < g_iters; ++i) {
    if (i % 9 == 8) {  // a destination moves: a new allocation before the old one is freed
      const int mk = (i / 9) % 3;
      uint32_t* fresh = nullptr;
      CK(cudaMalloc(reinterpret_cast<void**>(&fresh), size_t(kW + 64 * (1 + (i / 9) % 5)) * 4));
      CK(cudaMemcpyAsync(fresh, D[mk], size_t(n) * 4, cudaMemcpyDeviceToDevice, s));
      CK(cudaStreamSynchronize(s));
      CK(cudaFree(D[mk]));
      D[mk] = fresh;
      ++moves;
    }
    const uint32_t slot1 = kSlots[i % 3], slot2 = (slot1 + 2) % 6;
    const int dk1 = i % 3, dk2 = (i + 1) % 3;
    for (int which = 0; which < 2; ++which) {
      StructArgs a;
      ArgView v;
      int srcIdx = -1;
      const int dk = which == 0 ? dk1 : dk2;
      ad.dst = D[dk];
      coincidences += buildStructArgs(i, which, ad, which == 0 ? slot1 : slot2, n, a, v, srcIdx);
      if (!sameView(viewOf(a), v)) {  // a bug of this program, not of a tool: its view depends on an address
        std::printf("MISMATCH sua_view at step %d: the host's decoding of launch %d differs from what it built\n", i,
                    which);
        std::fflush(stdout);
        std::exit(1);
      }
      structOp<<<kWGrid, kBlock, 0, s>>>(a, n);
      CKL();
      const uint32_t* uptr = srcIdx >= 0 ? hSrc[srcIdx].data() : hBase.data();
      for (int k = 0; k < n; ++k) {
        const uint32_t x = structValue(v, hBase.data(), uptr, n, k);
        hD[dk][size_t(k)] = rotl(hD[dk][size_t(k)], 3) ^ (x + a.salt);
      }
    }
    if (at(i)) {
      CK(cudaStreamSynchronize(s));
      checkDev("sua_d0", i, D[0], hD[0]);
      checkDev("sua_d1", i, D[1], hD[1]);
      checkDev("sua_d2", i, D[2], hD[2]);
    }
  }
  std::printf("struct_union_args: %d moves, %d unions equal to the base pointer\n", moves, coincidences);
  CK(cudaStreamSynchronize(s));
}

// ================================================================ program_graph_events

constexpr long long kGraphSpin = 80000;  // cycles: ~40 us on an H100

// What a tool could get wrong: E is recorded in turn by the program's own graph
// (an event-record node after a slow kernel node, on a third stream), eagerly
// on the main stream and eagerly on the third stream; the second stream waits
// on E every step. A tool sees the graph launch but not the record inside it:
// a wait modelled after the last eager record it saw runs before the graph's
// kernel. A second program graph (captured, updated with cudaGraphExecUpdate)
// replaces the eager consume every fourth step; a query poll of E and a
// read-back every seventh.
void programGraphEvents() {
  int n = kW;
  const size_t bytes = size_t(n) * 4;
  cudaStream_t s1 = nonBlockingStream(), s2 = nonBlockingStream(), s3 = nonBlockingStream(),
               sc = nonBlockingStream();
  cudaEvent_t E = untimedEvent(), eX = untimedEvent(), eZ = untimedEvent();
  uint32_t *X = deviceBuffer(2991, n), *Y = deviceBuffer(2992, n), *Z = deviceBuffer(2993, n),
           *Zc = deviceBuffer(2994, n), *W = deviceBuffer(2995, n);
  std::vector<uint32_t> hX = patternWords(2991, n), hY = patternWords(2992, n), hZ = patternWords(2993, n),
                        hZc = patternWords(2994, n), hW = patternWords(2995, n);
  preload(stepIn);
  preload(spinFold);
  preload(consume);
  CK(cudaDeviceSynchronize());
  // GE: a kernel node (Y from X, slow), then a record of E.
  cudaGraph_t gE = nullptr;
  CK(cudaGraphCreate(&gE, 0));
  uint32_t* yArg = Y;
  const uint32_t* xArg = X;
  uint32_t geSalt = 0;
  long long geSpin = kGraphSpin;
  void* geArgs[] = {&yArg, &xArg, &n, &geSalt, &geSpin};
  cudaKernelNodeParams kp = {};
  kp.func = reinterpret_cast<void*>(spinFold);
  kp.gridDim = dim3(kWGrid);
  kp.blockDim = dim3(kBlock);
  kp.kernelParams = geArgs;
  cudaGraphNode_t kn = nullptr, en = nullptr;
  CK(cudaGraphAddKernelNode(&kn, gE, nullptr, 0, &kp));
  CK(cudaGraphAddEventRecordNode(&en, gE, &kn, 1, E));
  cudaGraphExec_t geExec = nullptr;
  CK(cudaGraphInstantiate(&geExec, gE, 0));
  // G2: consume Z from Y, then copy Z to Zc; captured with the salt of its time.
  auto captureG2 = [&](uint32_t salt2) {
    cudaGraph_t g = nullptr;
    CK(cudaStreamBeginCapture(sc, cudaStreamCaptureModeThreadLocal));
    consume<<<kWGrid, kBlock, 0, sc>>>(Z, Y, n, salt2);
    CK(cudaMemcpyAsync(Zc, Z, bytes, cudaMemcpyDeviceToDevice, sc));
    CK(cudaStreamEndCapture(sc, &g));
    CKL();
    return g;
  };
  uint32_t g2Salt = hash32(29090u);
  cudaGraphExec_t g2Exec = nullptr;
  {
    cudaGraph_t g = captureG2(g2Salt);
    CK(cudaGraphInstantiate(&g2Exec, g, 0));
    CK(cudaGraphDestroy(g));
  }
  int byGraph = 0, polls = 0, g2Launches = 0, updates = 0, reinstantiated = 0;
  for (int i = 0; i < g_iters; ++i) {
    if (i > 0 && i % 10 == 0) {  // a new G2 with another salt, swapped in
      g2Salt = hash32(uint32_t(i) + 29091u);
      cudaGraph_t g = captureG2(g2Salt);
      cudaGraphExecUpdateResultInfo info;
      if (cudaGraphExecUpdate(g2Exec, g, &info) != cudaSuccess) {
        cudaGetLastError();
        CK(cudaGraphExecDestroy(g2Exec));
        CK(cudaGraphInstantiate(&g2Exec, g, 0));
        ++reinstantiated;
      }
      CK(cudaGraphDestroy(g));
      ++updates;
    }
    const uint32_t salt = hash32(uint32_t(i) + 29092u);
    stepIn<<<kWGrid, kBlock, 0, s1>>>(X, W, n, salt);
    CKL();
    stepInHost(hX, hW, salt);
    CK(cudaEventRecord(eX, s1));
    const uint32_t ySalt = salt ^ 0x11u;
    switch (i % 3) {
      case 0:  // the program's graph records E
        CK(cudaStreamWaitEvent(s3, eX, 0));
        geSalt = ySalt;
        CK(cudaGraphExecKernelNodeSetParams(geExec, kn, &kp));
        CK(cudaGraphLaunch(geExec, s3));
        ++byGraph;
        break;
      case 1:
        spinFold<<<kWGrid, kBlock, 0, s1>>>(Y, X, n, ySalt, kGraphSpin);
        CKL();
        CK(cudaEventRecord(E, s1));
        break;
      default:
        CK(cudaStreamWaitEvent(s3, eX, 0));
        spinFold<<<kWGrid, kBlock, 0, s3>>>(Y, X, n, ySalt, kGraphSpin);
        CKL();
        CK(cudaEventRecord(E, s3));
        break;
    }
    spinFoldHost(hY, hX, ySalt);
    if (i % 7 == 4) {  // the host polls E and reads what it covers
      pollEvent(E);
      const std::vector<uint32_t> got = fetch<uint32_t>(Y, size_t(n));
      expectWords("pge_y_after_poll", i, got.data(), hY.data(), size_t(n));
      ++polls;
    }
    CK(cudaStreamWaitEvent(s2, E, 0));
    if (i % 4 == 1) {
      CK(cudaGraphLaunch(g2Exec, s2));
      consumeHost(hZ, hY, g2Salt);
      ++g2Launches;
    } else {
      consume<<<kWGrid, kBlock, 0, s2>>>(Z, Y, n, salt ^ 0x22u);
      CKL();
      CK(cudaMemcpyAsync(Zc, Z, bytes, cudaMemcpyDeviceToDevice, s2));
      consumeHost(hZ, hY, salt ^ 0x22u);
    }
    hZc = hZ;
    CK(cudaEventRecord(eZ, s2));
    CK(cudaStreamWaitEvent(s1, eZ, 0));
    consume<<<kWGrid, kBlock, 0, s1>>>(W, Zc, n, salt ^ 0x33u);
    CKL();
    consumeHost(hW, hZc, salt ^ 0x33u);
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      checkDev("pge_x", i, X, hX);
      checkDev("pge_y", i, Y, hY);
      checkDev("pge_z", i, Z, hZ);
      checkDev("pge_zc", i, Zc, hZc);
      checkDev("pge_w", i, W, hW);
    }
  }
  std::printf("program_graph_events: %d records by the program's graph, %d polls, %d G2 launches, %d updates "
              "(%d re-instantiated)\n",
              byGraph, polls, g2Launches, updates, reinstantiated);
  CK(cudaDeviceSynchronize());
  CK(cudaGraphExecDestroy(geExec));
  CK(cudaGraphExecDestroy(g2Exec));
  CK(cudaGraphDestroy(gE));
}

// ================================================================ byte_edges_concurrent

constexpr int kLanes = 32, kLaneBytes = 256, kRBytes = kLanes * kLaneBytes;
constexpr int kRWords = kRBytes / 4;
constexpr long long kEdgeSpin = 20000;

struct EdgeSpec {
  uint16_t lo[kLanes];  // the range written by the lane's copy or memset: [lo, hi)
  uint16_t hi[kLanes];
  uint32_t salt;
};

__host__ __device__ inline uint8_t edgeByte(uint32_t salt, int lane, int e) {
  return uint8_t(hash32(salt ^ uint32_t(lane * 8 + e)) >> 8);
}
// Thread t stores one byte: lane t / 6, the three bytes before the lane's range
// and the three after (e = t % 6), after a staggered spin.
__global__ void edgeWrite(uint8_t* r, EdgeSpec spec, long long spin) {
  const int t = int(threadIdx.x), lane = t / 6, e = t % 6;
  if (lane >= kLanes) return;
  spinCycles(spin * ((t * 37) % 17) / 16);
  const int p = e < 3 ? int(spec.lo[lane]) - 3 + e : int(spec.hi[lane]) + (e - 3);
  r[lane * kLaneBytes + p] = edgeByte(spec.salt, lane, e);
}

// What a tool could get wrong: each step 32 byte-granular copies and memsets
// (odd offsets, 1..13 bytes) on one stream while a kernel on another stream
// stores the bytes right beside every range (same 4- and 16-byte words,
// disjoint bytes; no ordering between them, none needed). A copy or memset
// turned into a kernel that writes whole words at a range's edges writes back
// neighbouring bytes it read before the other stream stored them.
void byteEdgesConcurrent() {
  cudaStream_t s1 = nonBlockingStream(), s2 = nonBlockingStream();
  cudaEvent_t eF = untimedEvent(), eJ = untimedEvent();
  uint32_t *R = deviceBuffer(2999, kRWords), *Src = deviceBuffer(3000, kRWords), *acc = deviceBuffer(3001, kRWords);
  std::vector<uint32_t> hR = patternWords(2999, kRWords), hAcc = patternWords(3001, kRWords);
  std::vector<uint32_t> hSrcW = patternWords(3000, kRWords);
  std::vector<uint8_t> hSrc(bytesOf(hSrcW), bytesOf(hSrcW) + kRBytes);
  uint8_t* r8 = reinterpret_cast<uint8_t*>(R);
  const uint8_t* src8 = reinterpret_cast<const uint8_t*>(Src);
  preload(edgeWrite);
  preload(byteStir);
  preload(accFold);
  CK(cudaDeviceSynchronize());
  int kinds[3] = {0, 0, 0}, sequential = 0;
  Digest codes;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 29100u);
    byteStir<<<kRWords / kBlock, kBlock, 0, s1>>>(Src, kRWords, salt);
    CKL();
    byteStirHost(hSrc, salt);
    const bool concurrent = i % 4 != 0;
    cudaStream_t se = concurrent ? s2 : s1;
    EdgeSpec spec;
    std::memset(&spec, 0, sizeof spec);
    spec.salt = hash32(salt ^ 0xedu);
    struct LaneOp {
      int kind, o, len;
      uint32_t value;
      int srcOff;
    } ops[kLanes];
    for (int lane = 0; lane < kLanes; ++lane) {
      const uint32_t h = hash32(salt * 33u + uint32_t(lane) * 0x9e3779b9u);
      LaneOp& op = ops[lane];
      op.kind = int(h % 3);
      op.o = 16 + int((h >> 4) % 200u);
      op.len = 1 + int((h >> 12) % 13u);
      op.value = hash32(h);
      op.srcOff = int(hash32(h ^ 0x51u) % uint32_t(kRBytes - 16));
      if (op.kind == 2) {  // 16-bit elements: an even address, 1..6 elements
        op.o &= ~1;
        op.len = 2 * (1 + int((h >> 12) % 6u));
      }
      spec.lo[lane] = uint16_t(op.o);
      spec.hi[lane] = uint16_t(op.o + op.len);
    }
    if (concurrent) {
      CK(cudaEventRecord(eF, s1));
      CK(cudaStreamWaitEvent(s2, eF, 0));
    } else {
      ++sequential;
    }
    const bool edgeFirst = i % 2 == 1;  // the order of issue (the streams may run either way)
    auto issueEdges = [&] {
      edgeWrite<<<1, 6 * kLanes, 0, se>>>(r8, spec, kEdgeSpin);
      CKL();
    };
    if (edgeFirst) issueEdges();
    for (int lane = 0; lane < kLanes; ++lane) {
      const LaneOp& op = ops[lane];
      uint8_t* dst = r8 + lane * kLaneBytes + op.o;
      int code = 0;
      switch (op.kind) {
        case 0:
          code = int(keep(cudaMemsetAsync(dst, int(op.value & 0xffu), size_t(op.len), s1)));
          break;
        case 1:
          code = int(keep(cudaMemcpyAsync(dst, src8 + op.srcOff, size_t(op.len), cudaMemcpyDeviceToDevice, s1)));
          break;
        default:
          code = int(cuMemsetD16Async(dptr(dst), uint16_t(op.value), size_t(op.len / 2), cu(s1)));
          break;
      }
      addCode(codes, code);
      ++kinds[op.kind];
    }
    if (!edgeFirst) issueEdges();
    if (concurrent) {
      CK(cudaEventRecord(eJ, s2));
      CK(cudaStreamWaitEvent(s1, eJ, 0));
    }
    // The mirror: ranges and edge bytes are disjoint, so the order does not matter.
    uint8_t* hr = bytesOf(hR);
    for (int lane = 0; lane < kLanes; ++lane) {
      const LaneOp& op = ops[lane];
      uint8_t* dst = hr + lane * kLaneBytes + op.o;
      if (op.kind == 0) {
        std::memset(dst, int(op.value & 0xffu), size_t(op.len));
      } else if (op.kind == 1) {
        std::memcpy(dst, hSrc.data() + op.srcOff, size_t(op.len));
      } else {
        for (int m = 0; m < op.len / 2; ++m) {
          dst[2 * m] = uint8_t(op.value);
          dst[2 * m + 1] = uint8_t(op.value >> 8);
        }
      }
      for (int e = 0; e < 6; ++e) {
        const int p = e < 3 ? op.o - 3 + e : op.o + op.len + (e - 3);
        hr[lane * kLaneBytes + p] = edgeByte(spec.salt, lane, e);
      }
    }
    accFold<<<kRWords / kBlock, kBlock, 0, s1>>>(acc, R, kRWords, salt);
    CKL();
    {
      const std::vector<uint8_t> rb(hr, hr + kRBytes);
      accFoldHost(hAcc, rb, kRWords, salt);
    }
    if (at(i)) {
      CK(cudaStreamSynchronize(s1));
      checkDev("bec_r", i, R, hR);
      checkDev("bec_acc", i, acc, hAcc);
      print("bec_codes", i, codes.h);
    }
  }
  std::printf("byte_edges_concurrent: memsets %d, copies %d, 16-bit memsets %d; %d steps in one stream\n", kinds[0],
              kinds[1], kinds[2], sequential);
  CK(cudaDeviceSynchronize());
}

const Scenario kScenarios[] = {
    {"ptr_table_modes", ptrTableModes},
    {"wait_target_rotation", waitTargetRotation},
    {"copy_kind_sizes", copyKindSizes},
    {"long_rare_edits", longRareEdits},
    {"sync_branch_moving", syncBranchMoving},
    {"nested_trip_counts", nestedTripCounts},
    {"two_thread_turns", twoThreadTurns},
    {"struct_union_args", structUnionArgs},
    {"program_graph_events", programGraphEvents},
    {"byte_edges_concurrent", byteEdgesConcurrent},
};

}  // namespace

int main(int argc, char** argv) { return runScenarios(argc, argv, kScenarios); }
