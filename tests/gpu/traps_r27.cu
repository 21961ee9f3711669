// traps_r27 (helper-written): a twenty-seventh red-team round of odd but legal CUDA C++
// patterns in the style of traps_r25.cu and traps_r23.cu (trap_common.cuh,
// trap_helpers.cuh, trap_mirror.cuh), aimed at what a tool that holds launches
// back, captures the repeating ones into graphs of its own, launches a
// fork/join step on one stream, cuts long steps into pieces, patches their
// parameters and answers some calls itself could get wrong: a side stream
// touched on its own right after it joined the main stream (the side
// branch may have gone into a graph launched on the main stream), forks and
// joins that straddle the pieces of a 1200-op step, a second CUDA runtime
// dlopen'ed in the middle of the run and issuing work on the first one's
// streams, pageable sources and destinations that are unmapped, protected or
// reused right after the copy returns, host functions feeding pinned memory
// to stream-ordered copies three streams away, cudaFree/cudaMalloc every step
// under a pointer table plus pool trims and threshold changes, __managed__
// atomic counters partly memset byte-wise between host read-modify-writes, a
// 3000-launch palindromic step whose length alternates by one launch, and a
// storm of signals (timers without SA_RESTART, SIGCHLD from spawned and forked
// children) interrupting every blocking call. Each scenario is deterministic
// in eager (integer kernels, every cross-stream access ordered by a stream, an
// event, a host function, a stream memory operation or a host barrier),
// prints digests of its buffers, and checks its results against a host mirror
// of its kernels (a MISMATCH line and exit 1 on a difference); check_traps.py
// requires the same output under graft. A scenario whose feature this machine
// lacks prints a SKIP line.
//
//   fork_join_side_tail   every step the PyTorch wait_stream pair: main stream
//                         S1 writes x, S2 waits on S1's event, a slow kernel
//                         (~100 us of spinning) on S2 writes y (zero-copy) and v
//                         from x, S1 waits on S2's event and folds y in. From
//                         step 16 of each phase, every other step, S2 is then
//                         touched directly, with no S1 involvement, by one of
//                         nine observers in turn: a kernel on S2 reading y and
//                         v, cudaStreamSynchronize(S2), a cudaStreamQuery(S2)
//                         poll, a blocking-sync event recorded on S2, a host
//                         function on S2 digesting y, cuStreamWriteValue32 on
//                         S2 into a mapped flag the host spins on, a pinned
//                         device-to-host copy on S2, a third stream waiting on
//                         an S2 event, an event query poll; the host reads y
//                         (zero-copy) at once. Four phases: non-blocking S1/S2,
//                         the legacy stream as S1, two blocking streams, and a
//                         fork from an S1 record that is not S1's latest op.
//                         What graft may get wrong: a fork/join step launched
//                         as one graph on S1 leaves S2 itself with no pending
//                         work; anything issued on S2 afterwards (a sync, a
//                         query, a host function, a memory op, a record) runs
//                         before S2's branch finished.
//   fork_join_pieces      a 1200-op step on three non-blocking streams: the
//                         main stream opens and closes fork/join windows to
//                         the two others at hashed places (~27 a step each), a
//                         memset on odd steps only (the step length alternates),
//                         side kernels whose salts cycle with periods 3 and 5;
//                         in the middle of the run a side stream is copied out
//                         and synchronized at a position that moves every
//                         step. What graft may get wrong: a window opened in
//                         one piece of a long step and closed in the next (the
//                         side stream's earlier work in a graph launched on
//                         another stream), pieces launched out of order.
//   second_runtime        a loop on two non-blocking streams and the legacy
//                         stream joined by events; at step iters/5 the program
//                         dlopen()s libcudart.so.13 (a SKIP line if absent:
//                         the loop goes on with one runtime) and from then on
//                         half the step's launches (a PTX kernel loaded through
//                         that runtime's cudaLibraryLoadData), memsets, copies,
//                         event records and waits go through the second
//                         runtime on the first one's streams and events, and
//                         every tenth step that runtime's barrier (device or
//                         legacy-stream synchronize, a stream query poll) is
//                         the only one before the host reads zero-copy output.
//                         What graft may get wrong: the second runtime's
//                         driver lookups (dlsym, cuGetProcAddress) not hooked,
//                         so its launches overtake held work and its barriers
//                         do not issue what graft holds.
//   pageable_staging_unmap  each step uploads a parameter block of 48 B to
//                         1 MiB from pageable memory (a stack array in a
//                         function that returns at once, a vector destroyed
//                         after the call, an mmap region unmapped or made
//                         PROT_NONE right after the call) through
//                         cudaMemcpyAsync (H2D, Default) and cuMemcpyHtoDAsync,
//                         kernels read it (all of it); every third step a
//                         device-to-pageable copy into a stack array, an mmap
//                         region unmapped after the check, or a vector, read
//                         at once. What graft may get wrong: a pageable copy
//                         taken later than its call (the source is gone: a
//                         fault or garbage), a pageable read-back that returns
//                         before the held kernels ran.
//   hostfunc_pinned_feed  S1 writes zero-copy output; S2 waits on S1 and a host
//                         function (cudaLaunchHostFunc or cudaStreamAddCallback
//                         in turn; on S1 itself every fifth step) digests that
//                         output and writes the next input into pinned memory;
//                         S3 waits on S2 and copies that pinned input to the
//                         device (stream-ordered: it must read what the host
//                         function wrote) while a kernel on S3 reads it in place;
//                         S1 waits on S3 and consumes both. No host sync in
//                         the step. What graft may get wrong: the pinned copy
//                         or the in-place kernel run before the host function
//                         that fills their source, a host function run before
//                         the kernels it reads.
//   realloc_pool_trim     every step cudaFree and cudaMalloc of one of three
//                         ring buffers (sizes in turn: the address moves), a
//                         block from a private pool and one from the default
//                         pool (allocated on a second stream, freed on the
//                         first), a pointer table uploaded from the stack that
//                         a kernel reads all four through, direct pointers too;
//                         cudaMemPoolTrimTo on both pools every 7 steps, the
//                         private pool's release threshold toggled every 50.
//                         What graft may get wrong: a free or trim that does
//                         not wait for the held kernels using the memory, a
//                         pointer patched into the wrong node.
//   managed_counters      __managed__ bins and a 64-bit sum that kernels on two
//                         streams bump with atomics every step and a third
//                         kernel reads back; byte-granular cudaMemsetAsync of
//                         parts of the bins and of the sum's low bytes on
//                         cycling steps; every tenth step a prefetch to the
//                         host, a stream synchronize, the host reading the
//                         counters, adding to them and rewriting a managed
//                         source, and a prefetch back; cudaMemAdvise
//                         (read-mostly) over part of the run. What graft may
//                         get wrong: replays that double or lose atomic work,
//                         a memset reordered against the kernels, the host's
//                         writes overtaken by held kernels.
//   palindrome_long_step  the legacy stream only: a step of 1500 small launches
//                         (four kernels, four buffers, a memset every 250 ops)
//                         followed by the same 1500 in reverse order, with one
//                         more launch in the middle on odd steps (3000 and 3001
//                         ops), salts of every 16th launch cycling with period
//                         3 and of others with period 7; in the middle of the
//                         run a synchronous read-back at a position that moves
//                         every step. What graft may get wrong: a palindromic
//                         sequence matched at the mirrored place, long steps
//                         cut into pieces whose boundary moves by one.
//   signal_storm          two non-blocking streams joined by events, every
//                         step ended by another barrier (blocking-sync event,
//                         stream synchronize, pinned read-back, host function,
//                         query poll, none) while ITIMER_REAL (no SA_RESTART)
//                         and ITIMER_PROF fire every 0.2 and 0.3 ms, SIGURG is
//                         sent to the main thread mid-step, and children are
//                         spawned (posix_spawn) and forked (_exit at once),
//                         raising SIGCHLD. What graft may get wrong: a wait of
//                         its own (condition variable, poll, sleep, futex)
//                         that an EINTR ends early or makes fail, with work
//                         still queued on its launch thread; a hang.
//
//   traps_r27 NAME [--iters N]     one scenario (see kScenarios)
//   traps_r27 --list               the scenario names
//
// Linked to libcuda (-lcuda: stream memory operations, driver copies) and
// libdl (dlopen of the second runtime); no device-side launches:
//   nvcc -O2 -std=c++17 -lineinfo -gencode arch=compute_90,code=[sm_90,compute_90]
//        -Xcompiler=-Wall,-Wextra,-Werror -o traps_r27 traps_r27.cu -lcuda -ldl
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "trap_mirror.cuh"

extern char** environ;

namespace {

// ---------------------------------------------------------------- shared helpers

constexpr int kW = 2048;  // words per buffer in most scenarios
constexpr int kWGrid = kW / kBlock;



std::vector<uint32_t> patternWords(uint32_t seed, int n) { return hostPattern(seed, n); }

// dst[k] folds in a and b at other indices. dst must alias neither.
__global__ void fold3(uint32_t* dst, const uint32_t* a, const uint32_t* b, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 7) ^ (a[(k * 5 + 3) % n] + rotl(b[(k * 3 + 1) % n], 11) + salt + uint32_t(k));
}
void fold3Host(uint32_t* dst, const uint32_t* a, const uint32_t* b, int n, uint32_t salt) {
  for (int k = 0; k < n; ++k) dst[k] = rotl(dst[k], 7) ^ (a[(k * 5 + 3) % n] + rotl(b[(k * 3 + 1) % n], 11) + salt + uint32_t(k));
}


// The slow side kernel: every thread spins first (its result does not depend
// on how long), then y folds in a and b, and v is y's image.
__global__ void slowFoldV(uint32_t* y, uint32_t* v, const uint32_t* a, const uint32_t* b, int n, uint32_t salt,
                          long long spin) {
  spinCycles(spin);
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) {
    const uint32_t nv = rotl(y[k], 5) ^ (a[(k * 5 + 3) % n] + rotl(b[(k * 3 + 1) % n], 11) + salt + uint32_t(k));
    y[k] = nv;
    v[k] = nv ^ 0x9e3779b9u ^ salt;
  }
}
void slowFoldVHost(uint32_t* y, uint32_t* v, const uint32_t* a, const uint32_t* b, int n, uint32_t salt) {
  for (int k = 0; k < n; ++k) {
    const uint32_t nv = rotl(y[k], 5) ^ (a[(k * 5 + 3) % n] + rotl(b[(k * 3 + 1) % n], 11) + salt + uint32_t(k));
    y[k] = nv;
    v[k] = nv ^ 0x9e3779b9u ^ salt;
  }
}

void mixHostN(uint32_t* dst, const uint32_t* src, int n, uint32_t salt) {
  for (int k = 0; k < n; ++k) dst[k] = rotl(dst[k], 5) ^ (src[(k * 7 + 4099) % n] + salt + uint32_t(k));
}
void mix2HostN(uint32_t* dst, const uint32_t* a, const uint32_t* b, int n, uint32_t salt) {
  for (int k = 0; k < n; ++k) dst[k] = rotl(dst[k], 3) + (a[(k * 5 + 77) % n] ^ rotl(b[(k * 3 + 11) % n], 7)) + salt;
}
void incHostN(uint32_t* dst, const uint32_t* src, int n, uint32_t v) {
  for (int k = 0; k < n; ++k) dst[k] = rotl(dst[k], 3) + src[(k * 11 + 5) % n] + v;
}

// A word value repeated from one byte, as cudaMemsetAsync writes it.
uint32_t byteWord(uint8_t b) { return uint32_t(b) * 0x01010101u; }

// ================================================================ fork_join_side_tail

constexpr long long kSideSpin = 200000;  // cycles: ~100 us on an H100

struct SeenCall {
  const uint32_t* y;
  int n;
  uint64_t* slot;
};
void CUDART_CB digestY(void* p) {
  const auto* c = static_cast<const SeenCall*>(p);
  *c->slot = hostDigest(c->y, size_t(c->n) * 4) | 1u;  // never 0 ("not run")
}

// What a tool could get wrong: PyTorch's wait_stream pair (S2 waits on S1, S2
// works, S1 waits on S2) is a step a tool may launch as one graph on S1; S2 then
// has no work of its own in the driver's eyes. Eagerly everything the program
// issues on S2 after the join is ordered after S2's branch: a kernel, a
// synchronize, a query, a host function, a stream memory write, a copy, an
// event that a third stream waits on. The branch spins ~100 us, so an observer
// that does not wait for it sees y before the branch wrote it.
void forkJoinSideTail() {
  const int n = kW;
  cudaStream_t nb1 = nonBlockingStream(), nb2 = nonBlockingStream(), s3 = nonBlockingStream();
  cudaStream_t bl1 = blockingStream(), bl2 = blockingStream();
  cudaEvent_t eF = untimedEvent(), eJ = untimedEvent(), eC = untimedEvent(), eObs = untimedEvent(),
              eS3 = untimedEvent();
  cudaEvent_t eBlock = nullptr;
  CK(cudaEventCreateWithFlags(&eBlock, cudaEventDisableTiming | cudaEventBlockingSync));
  uint32_t *x = deviceBuffer(2701, n), *z = deviceBuffer(2702, n), *u = deviceBuffer(2703, n),
           *v = deviceBuffer(2704, n), *t = deviceBuffer(2705, n), *w3 = deviceBuffer(2706, n);
  std::vector<uint32_t> hx = patternWords(2701, n), hz = patternWords(2702, n), hu = patternWords(2703, n),
                        hv = patternWords(2704, n), ht = patternWords(2705, n), hw3 = patternWords(2706, n);
  Mapped y = mappedBuffer(size_t(n), 2707);
  std::vector<uint32_t> hy(y.host, y.host + n);
  Mapped flag = mappedBuffer(32, 0);
  uint32_t* pinned = nullptr;
  CK(cudaMallocHost(reinterpret_cast<void**>(&pinned), size_t(n) * 4));
  std::vector<uint64_t> seenWant(size_t(g_iters), 0), seenGot(size_t(g_iters), 0);
  std::vector<SeenCall> calls(static_cast<size_t>(g_iters));
  preload(fold3);
  preload(slowFoldV);
  CK(cudaDeviceSynchronize());
  int observations = 0, lastSeenChecked = 0;
  for (int i = 0; i < g_iters; ++i) {
    const int p = int(int64_t(i) * 4 / g_iters);
    const int phaseStart = int((int64_t(p) * g_iters + 3) / 4);
    if (i == phaseStart && i > 0) CK(cudaDeviceSynchronize());  // the streams change
    cudaStream_t s1 = p == 1 ? cudaStream_t(nullptr) : (p == 2 ? bl1 : nb1);
    cudaStream_t s2 = p == 2 ? bl2 : nb2;
    const uint32_t salt = hash32(uint32_t(i) + 27010u);
    if (p == 3) CK(cudaEventRecord(eC, s1));  // the previous step's C: not S1's latest op once A is issued
    fold3<<<kWGrid, kBlock, 0, s1>>>(x, z, t, n, salt);  // A
    CKL();
    fold3Host(hx.data(), hz.data(), ht.data(), n, salt);
    if (p != 3) {
      CK(cudaEventRecord(eF, s1));
      CK(cudaStreamWaitEvent(s2, eF, 0));
    } else {
      CK(cudaStreamWaitEvent(s2, eC, 0));
    }
    const uint32_t* bA = p == 3 ? t : x;  // B reads x only after a fork from A
    slowFoldV<<<kWGrid, kBlock, 0, s2>>>(y.dev, v, bA, u, n, salt ^ 1u, kSideSpin);
    CKL();
    slowFoldVHost(hy.data(), hv.data(), p == 3 ? ht.data() : hx.data(), hu.data(), n, salt ^ 1u);
    CK(cudaEventRecord(eJ, s2));
    CK(cudaStreamWaitEvent(s1, eJ, 0));
    fold3<<<kWGrid, kBlock, 0, s1>>>(z, y.dev, x, n, salt ^ 2u);  // C
    CKL();
    fold3Host(hz.data(), hy.data(), hx.data(), n, salt ^ 2u);
    // S2 alone, right after the join.
    if (i - phaseStart >= 16 && (i - phaseStart) % 2 == 0) {
      const int obs = ((i - phaseStart - 16) / 2 + p * 4) % 9;
      ++observations;
      switch (obs) {
        case 0:  // a kernel on S2 reads the branch's outputs and rewrites its input
          fold3<<<kWGrid, kBlock, 0, s2>>>(u, v, y.dev, n, salt ^ 3u);
          CKL();
          fold3Host(hu.data(), hv.data(), hy.data(), n, salt ^ 3u);
          break;
        case 1:
          CK(cudaStreamSynchronize(s2));
          expectWords("fjt_y_after_stream_sync", i, y.host, hy.data(), size_t(n));
          break;
        case 2: {
          cudaError_t r;
          while ((r = cudaStreamQuery(s2)) == cudaErrorNotReady) {
          }
          CK(r);
          expectWords("fjt_y_after_stream_query", i, y.host, hy.data(), size_t(n));
          break;
        }
        case 3:
          CK(cudaEventRecord(eBlock, s2));
          CK(cudaEventSynchronize(eBlock));
          expectWords("fjt_y_after_event_sync", i, y.host, hy.data(), size_t(n));
          break;
        case 4:
          calls[size_t(i)] = {y.host, n, &seenGot[size_t(i)]};
          seenWant[size_t(i)] = hostDigest(hy.data(), size_t(n) * 4) | 1u;
          CK(cudaLaunchHostFunc(s2, digestY, &calls[size_t(i)]));
          break;
        case 5: {
          const uint32_t want = uint32_t(i) + 1u;
          CKD(cuStreamWriteValue32(cu(s2), dptr(flag.dev), want, CU_STREAM_WRITE_VALUE_DEFAULT));
          const volatile uint32_t* f = flag.host;
          const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
          while (*f != want) {
            if (std::chrono::steady_clock::now() > until) {
              std::printf("MISMATCH fjt_write_value at step %d: the flag never came (20 s)\n", i);
              std::fflush(stdout);
              std::exit(1);
            }
          }
          expectWords("fjt_y_after_write_value", i, y.host, hy.data(), size_t(n));
          break;
        }
        case 6:
          CK(cudaMemcpyAsync(pinned, v, size_t(n) * 4, cudaMemcpyDeviceToHost, s2));
          CK(cudaStreamSynchronize(s2));
          expectWords("fjt_v_copied", i, pinned, hv.data(), size_t(n));
          break;
        case 7:  // a third stream reads the branch's outputs, S2 waits for it
          CK(cudaEventRecord(eObs, s2));
          CK(cudaStreamWaitEvent(s3, eObs, 0));
          fold3<<<kWGrid, kBlock, 0, s3>>>(w3, v, y.dev, n, salt ^ 4u);
          CKL();
          fold3Host(hw3.data(), hv.data(), hy.data(), n, salt ^ 4u);
          CK(cudaEventRecord(eS3, s3));
          CK(cudaStreamWaitEvent(s2, eS3, 0));
          break;
        default: {
          CK(cudaEventRecord(eObs, s2));
          cudaError_t r;
          while ((r = cudaEventQuery(eObs)) == cudaErrorNotReady) {
          }
          CK(r);
          expectWords("fjt_y_after_event_query", i, y.host, hy.data(), size_t(n));
          break;
        }
      }
    }
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      checkDev("fjt_x", i, x, hx);
      checkDev("fjt_z", i, z, hz);
      checkDev("fjt_u", i, u, hu);
      checkDev("fjt_v", i, v, hv);
      checkDev("fjt_w3", i, w3, hw3);
      checkWords("fjt_y", i, y.host, hy);
      Digest seen;
      for (int j = lastSeenChecked; j <= i; ++j) {
        if (!seenWant[size_t(j)]) continue;
        if (seenGot[size_t(j)] != seenWant[size_t(j)]) {
          std::printf("MISMATCH fjt_host_func at step %d: the host function on S2 saw y with digest %016llx, "
                      "the host mirror says %016llx\n",
                      j, ull(seenGot[size_t(j)]), ull(seenWant[size_t(j)]));
          std::exit(1);
        }
        seen.add(seenGot[size_t(j)]);
      }
      lastSeenChecked = i + 1;
      print("fjt_host_func_seen", i, seen.h);
    }
  }
  std::printf("fork_join_side_tail: %d observations of S2 after its join\n", observations);
  CK(cudaFreeHost(pinned));
}

// ================================================================ fork_join_pieces

constexpr int kP = 256;  // words per buffer
constexpr int kPGrid = kP / kBlock;
constexpr int kPieceLen = 1200;

enum PieceKind : uint8_t { kK1, kOpen2, kK2, kClose2, kOpen3, kK3, kClose3, kSet3 };
struct PieceOp {
  PieceKind kind;
  uint32_t salt;
};

// The step's script: windows to S2 and S3 opened and closed at hashed places.
std::vector<PieceOp> pieceScript() {
  std::vector<PieceOp> ops;
  bool o2 = false, o3 = false;
  int l2 = 0, l3 = 0;
  for (int j = 0; j < kPieceLen; ++j) {
    const uint32_t h = hash32(uint32_t(j) * 0x9e3779b9u + 27020u);
    const uint32_t r = h % 16;
    PieceKind k;
    if (!o2 && r == 0) {
      k = kOpen2;
      o2 = true;
      l2 = 0;
    } else if (o2 && r == 1 && l2 >= 3) {
      k = kClose2;
      o2 = false;
    } else if (!o3 && r == 2) {
      k = kOpen3;
      o3 = true;
      l3 = 0;
    } else if (o3 && r == 3 && l3 >= 3) {
      k = kClose3;
      o3 = false;
    } else if (o2 && r >= 4 && r < 8) {
      k = kK2;
      ++l2;
    } else if (o3 && r >= 8 && r < 11) {
      k = kK3;
      ++l3;
    } else if (o3 && r == 11) {
      k = kSet3;
    } else {
      k = kK1;
    }
    ops.push_back({k, hash32(h ^ 0x5bd1e995u)});
  }
  if (o2) ops.push_back({kClose2, 0});
  if (o3) ops.push_back({kClose3, 0});
  return ops;
}

// What a tool could get wrong: a long step is cut into pieces (32, 64, ...,
// 1024 ops); the windows to S2 and S3 straddle those cuts, so a piece may hold
// a side stream's work without the fork that ordered it, or the join without
// the work. Each side stream's earlier work may sit in a graph launched on the
// main stream; the next piece's side branch must still come after it.
void forkJoinPieces() {
  const std::vector<PieceOp> script = pieceScript();
  int windows2 = 0, windows3 = 0;
  for (const PieceOp& op : script) {
    windows2 += op.kind == kOpen2;
    windows3 += op.kind == kOpen3;
  }
  std::printf("fork_join_pieces: %zu ops a step (+1 on odd steps), %d windows to S2, %d to S3\n", script.size(),
              windows2, windows3);
  cudaStream_t s1 = nonBlockingStream(), s2 = nonBlockingStream(), s3 = nonBlockingStream();
  cudaEvent_t eF2 = untimedEvent(), eJ2 = untimedEvent(), eF3 = untimedEvent(), eJ3 = untimedEvent();
  uint32_t *b1 = deviceBuffer(2721, kP), *b1x = deviceBuffer(2722, kP), *b2 = deviceBuffer(2723, kP),
           *b3 = deviceBuffer(2724, kP), *c = deviceBuffer(2725, kP);
  std::vector<uint32_t> h1 = patternWords(2721, kP), h1x = patternWords(2722, kP), h2 = patternWords(2723, kP),
                        h3 = patternWords(2724, kP), hc = patternWords(2725, kP);
  uint32_t* pinned = nullptr;
  CK(cudaMallocHost(reinterpret_cast<void**>(&pinned), kP * 4));
  preload(fold3);
  CK(cudaDeviceSynchronize());
  const uint32_t kP3[3] = {0x11u, 0x2222u, 0x333333u};
  const uint32_t kP5[5] = {0x4u, 0x50u, 0x600u, 0x7000u, 0x80000u};
  const int midFrom = g_iters * 2 / 5, midTo = g_iters * 2 / 3;
  int peeks = 0;
  for (int i = 0; i < g_iters; ++i) {
    bool o2 = false, o3 = false;
    const bool peek = i >= midFrom && i < midTo && i % 8 == 3;
    const int peekAt = int((uint32_t(i) * 37u) % uint32_t(script.size()));
    for (size_t j = 0; j < script.size(); ++j) {
      if (peek && int(j) == peekAt) {  // one side stream copied out and synchronized mid-step
        const bool two = (i / 8) % 2 == 0;
        cudaStream_t s = two ? s2 : s3;
        CK(cudaMemcpyAsync(pinned, two ? b2 : b3, kP * 4, cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        expectWords(two ? "fjp_peek_b2" : "fjp_peek_b3", i, pinned, (two ? h2 : h3).data(), kP);
        ++peeks;
      }
      if (j == script.size() / 2 && i % 2 == 1) {  // odd steps: one op more
        const uint8_t byte = uint8_t(i * 7 + 1);
        CK(cudaMemsetAsync(b1x, byte, 64, s1));
        for (int k = 0; k < 16; ++k) h1x[size_t(k)] = byteWord(byte);
      }
      const PieceOp& op = script[j];
      switch (op.kind) {
        case kK1: {
          const bool open = o2 || o3;
          uint32_t* dst = open ? b1x : b1;
          const uint32_t* a = open ? b1 : b1x;
          const uint32_t* b = !o2 ? b2 : (!o3 ? b3 : c);
          fold3<<<kPGrid, kBlock, 0, s1>>>(dst, a, b, kP, op.salt);
          fold3Host((open ? h1x : h1).data(), (open ? h1 : h1x).data(), (!o2 ? h2 : (!o3 ? h3 : hc)).data(), kP,
                    op.salt);
          break;
        }
        case kOpen2:
          CK(cudaEventRecord(eF2, s1));
          CK(cudaStreamWaitEvent(s2, eF2, 0));
          o2 = true;
          break;
        case kK2: {
          const uint32_t salt = op.salt + kP3[i % 3];
          fold3<<<kPGrid, kBlock, 0, s2>>>(b2, b1, c, kP, salt);
          fold3Host(h2.data(), h1.data(), hc.data(), kP, salt);
          break;
        }
        case kClose2:
          CK(cudaEventRecord(eJ2, s2));
          CK(cudaStreamWaitEvent(s1, eJ2, 0));
          o2 = false;
          break;
        case kOpen3:
          CK(cudaEventRecord(eF3, s1));
          CK(cudaStreamWaitEvent(s3, eF3, 0));
          o3 = true;
          break;
        case kK3: {
          const uint32_t salt = op.salt + kP5[i % 5];
          fold3<<<kPGrid, kBlock, 0, s3>>>(b3, b1, c, kP, salt);
          fold3Host(h3.data(), h1.data(), hc.data(), kP, salt);
          break;
        }
        case kClose3:
          CK(cudaEventRecord(eJ3, s3));
          CK(cudaStreamWaitEvent(s1, eJ3, 0));
          o3 = false;
          break;
        case kSet3: {
          const int off = int((op.salt >> 8) % 48);
          const uint8_t byte = uint8_t(op.salt);
          CK(cudaMemsetAsync(b3 + off, byte, 64, s3));
          for (int k = 0; k < 16; ++k) h3[size_t(off + k)] = byteWord(byte);
          break;
        }
      }
    }
    CKL();
    if (at(i)) {
      CK(cudaStreamSynchronize(s1));  // every window joined back into s1
      checkDev("fjp_b1", i, b1, h1);
      checkDev("fjp_b1x", i, b1x, h1x);
      checkDev("fjp_b2", i, b2, h2);
      checkDev("fjp_b3", i, b3, h3);
    }
  }
  std::printf("fork_join_pieces: %d mid-step peeks\n", peeks);
  CK(cudaFreeHost(pinned));
}

// ================================================================ second_runtime

// The entry points of one runtime, the static one linked in or one dlopen'ed.
struct Runtime {
  cudaError_t (*launch)(const void*, dim3, dim3, void**, size_t, cudaStream_t) = nullptr;
  cudaError_t (*memsetAsync)(void*, int, size_t, cudaStream_t) = nullptr;
  cudaError_t (*memcpyAsync)(void*, const void*, size_t, cudaMemcpyKind, cudaStream_t) = nullptr;
  cudaError_t (*eventRecord)(cudaEvent_t, cudaStream_t) = nullptr;
  cudaError_t (*streamWaitEvent)(cudaStream_t, cudaEvent_t, unsigned int) = nullptr;
  cudaError_t (*streamSynchronize)(cudaStream_t) = nullptr;
  cudaError_t (*streamQuery)(cudaStream_t) = nullptr;
  cudaError_t (*deviceSynchronize)() = nullptr;
  cudaError_t (*streamCreateWithFlags)(cudaStream_t*, unsigned int) = nullptr;
  cudaError_t (*libraryLoadData)(cudaLibrary_t*, const void*, cudaJitOption*, void**, unsigned int,
                                 cudaLibraryOption*, void**, unsigned int) = nullptr;
  cudaError_t (*libraryGetKernel)(cudaKernel_t*, cudaLibrary_t, const char*) = nullptr;
  cudaError_t (*runtimeGetVersion)(int*) = nullptr;
  const char* (*getErrorName)(cudaError_t) = nullptr;
  const void* inc = nullptr;  // trapInc, loaded through this runtime
  const char* tag = "";
};

void ckRt(const Runtime& rt, cudaError_t r, const char* what, int line) {
  if (r != cudaSuccess) {
    std::fprintf(stderr, "traps: %s:%d: %s (%s runtime) -> %s\n", __FILE__, line, what, rt.tag,
                 rt.getErrorName ? rt.getErrorName(r) : "?");
    std::exit(1);
  }
}
#define CKRT(rt, call) ckRt(rt, (call), #call, __LINE__)

void loadInc(Runtime& rt) {
  cudaLibrary_t lib = nullptr;
  cudaKernel_t kernel = nullptr;
  CKRT(rt, rt.libraryLoadData(&lib, kIncPtx, nullptr, nullptr, 0, nullptr, nullptr, 0));
  CKRT(rt, rt.libraryGetKernel(&kernel, lib, "trapInc"));
  rt.inc = reinterpret_cast<const void*>(kernel);
}

Runtime staticRuntime() {
  Runtime rt;
  rt.launch = &::cudaLaunchKernel;
  rt.memsetAsync = &::cudaMemsetAsync;
  rt.memcpyAsync = &::cudaMemcpyAsync;
  rt.eventRecord = &::cudaEventRecord;
  rt.streamWaitEvent = &::cudaStreamWaitEvent;
  rt.streamSynchronize = &::cudaStreamSynchronize;
  rt.streamQuery = &::cudaStreamQuery;
  rt.deviceSynchronize = &::cudaDeviceSynchronize;
  rt.streamCreateWithFlags = &::cudaStreamCreateWithFlags;
  rt.libraryLoadData = &::cudaLibraryLoadData;
  rt.libraryGetKernel = &::cudaLibraryGetKernel;
  rt.runtimeGetVersion = &::cudaRuntimeGetVersion;
  rt.getErrorName = &::cudaGetErrorName;
  rt.tag = "static";
  return rt;
}

template <typename F>
bool lookup(void* h, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(h, name));
  return f != nullptr;
}

// libcudart.so.13 dlopen'ed (RTLD_LOCAL): a second runtime in the process,
// sharing the primary context. False where there is none.
bool dlopenRuntime(Runtime& rt) {
  const char* names[] = {"libcudart.so.13", "/usr/local/cuda/lib64/libcudart.so.13",
                         "/usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13"};
  void* h = nullptr;
  for (const char* name : names) {
    h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (h) break;
  }
  if (!h) return false;
  bool ok = lookup(h, "cudaLaunchKernel", rt.launch) && lookup(h, "cudaMemsetAsync", rt.memsetAsync) &&
            lookup(h, "cudaMemcpyAsync", rt.memcpyAsync) && lookup(h, "cudaEventRecord", rt.eventRecord) &&
            lookup(h, "cudaStreamWaitEvent", rt.streamWaitEvent) &&
            lookup(h, "cudaStreamSynchronize", rt.streamSynchronize) &&
            lookup(h, "cudaStreamQuery", rt.streamQuery) &&
            lookup(h, "cudaDeviceSynchronize", rt.deviceSynchronize) &&
            lookup(h, "cudaStreamCreateWithFlags", rt.streamCreateWithFlags) &&
            lookup(h, "cudaLibraryLoadData", rt.libraryLoadData) &&
            lookup(h, "cudaLibraryGetKernel", rt.libraryGetKernel) &&
            lookup(h, "cudaRuntimeGetVersion", rt.runtimeGetVersion) &&
            lookup(h, "cudaGetErrorName", rt.getErrorName);
  rt.tag = "dlopened";
  return ok;  // never dlclose'd: the runtime stays for the process
}

void launchInc(const Runtime& rt, cudaStream_t s, uint32_t* dst, const uint32_t* src, int n, uint32_t v) {
  void* args[] = {&dst, &src, &n, &v};
  CKRT(rt, rt.launch(rt.inc, dim3(unsigned(n / kBlock)), dim3(kBlock), args, 0, s));
}

// What a tool could get wrong: a second CUDA runtime loaded mid-run (a Python
// process with two CUDA libraries, a plugin with its own cudart) resolves the
// driver again (dlsym of cuGetProcAddress from its own dlopen of libcuda). If
// those lookups are not hooked, its launches reach the driver ahead of the
// held work they follow on the same streams, and its barriers return before
// the held work ran.
void secondRuntime() {
  const int n = kW;
  Runtime A = staticRuntime();
  loadInc(A);
  Runtime B;
  cudaStream_t sA = nonBlockingStream(), sB = nonBlockingStream();
  cudaStream_t legacy = nullptr;
  cudaEvent_t ev1 = untimedEvent(), ev2 = untimedEvent(), ev3 = untimedEvent();
  uint32_t *a = deviceBuffer(2731, n), *bb = deviceBuffer(2732, n), *c = deviceBuffer(2733, n),
           *d = deviceBuffer(2734, n), *e = deviceBuffer(2735, n), *f = deviceBuffer(2736, n);
  std::vector<uint32_t> ha = patternWords(2731, n), hb = patternWords(2732, n), hc = patternWords(2733, n),
                        hd = patternWords(2734, n), he = patternWords(2735, n), hf = patternWords(2736, n);
  Mapped mp = mappedBuffer(size_t(n), 2737);
  std::vector<uint32_t> hm(mp.host, mp.host + n);
  preload(mix);
  preload(mix2);
  CK(cudaDeviceSynchronize());
  const int loadAt = std::max(20, g_iters / 5);
  bool twoRuntimes = false;
  for (int i = 0; i < g_iters; ++i) {
    if (i == loadAt) {
      CK(cudaDeviceSynchronize());
      if (dlopenRuntime(B)) {
        int version = 0;
        CKRT(B, B.runtimeGetVersion(&version));
        loadInc(B);
        cudaStream_t made = nullptr;
        CKRT(B, B.streamCreateWithFlags(&made, cudaStreamNonBlocking));
        sB = made;  // a stream of the second runtime from now on
        twoRuntimes = true;
        std::printf("second_runtime: step %d: a second runtime (major %d) loaded\n", i, version / 1000);
      } else {
        std::printf("SKIP second_runtime: no libcudart.so.13 to dlopen; the loop goes on with one runtime\n");
      }
    }
    const Runtime& R = twoRuntimes ? B : A;
    const uint32_t salt = hash32(uint32_t(i) + 27030u);
    mix<<<kWGrid, kBlock, 0, sA>>>(a, bb, n, salt);
    CKL();
    mixHostN(ha.data(), hb.data(), n, salt);
    launchInc(R, sA, bb, a, n, salt ^ 1u);
    incHostN(hb.data(), ha.data(), n, salt ^ 1u);
    {
      const int off = (i % 7) * 64;
      const uint8_t byte = uint8_t(i * 13 + 5);
      CKRT(R, R.memsetAsync(c + off, byte, 256, sA));
      for (int k = 0; k < 64; ++k) hc[size_t(off + k)] = byteWord(byte);
    }
    CKRT(R, R.eventRecord(ev1, sA));
    CK(cudaStreamWaitEvent(sB, ev1, 0));
    launchInc(R, sB, c, bb, n, salt ^ 2u);
    incHostN(hc.data(), hb.data(), n, salt ^ 2u);
    mix2<<<kWGrid, kBlock, 0, sB>>>(d, c, a, n, salt ^ 3u);
    CKL();
    mix2HostN(hd.data(), hc.data(), ha.data(), n, salt ^ 3u);
    CKRT(R, R.memcpyAsync(e, d, size_t(n) * 4, cudaMemcpyDeviceToDevice, sB));
    he = hd;
    CK(cudaEventRecord(ev2, sB));
    CKRT(R, R.streamWaitEvent(legacy, ev2, 0));
    launchInc(R, legacy, mp.dev, e, n, salt ^ 4u);
    incHostN(hm.data(), he.data(), n, salt ^ 4u);
    mix<<<kWGrid, kBlock, 0, legacy>>>(f, mp.dev, n, salt ^ 5u);
    CKL();
    mixHostN(hf.data(), hm.data(), n, salt ^ 5u);
    CKRT(R, R.eventRecord(ev3, legacy));
    CK(cudaStreamWaitEvent(sA, ev3, 0));
    if (i % 10 == 9) {  // the (second) runtime's barrier, then zero-copy output read with no other call
      switch ((i / 10) % 3) {
        case 0:
          CKRT(R, R.deviceSynchronize());
          break;
        case 1:
          CKRT(R, R.streamSynchronize(legacy));
          break;
        default: {
          cudaError_t r;
          while ((r = R.streamQuery(legacy)) == cudaErrorNotReady) {
          }
          CKRT(R, r);
          break;
        }
      }
      expectWords("rt2_mapped_after_barrier", i, mp.host, hm.data(), size_t(n));
    }
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      checkDev("rt2_a", i, a, ha);
      checkDev("rt2_b", i, bb, hb);
      checkDev("rt2_c", i, c, hc);
      checkDev("rt2_d", i, d, hd);
      checkDev("rt2_f", i, f, hf);
      checkWords("rt2_mapped", i, mp.host, hm);
    }
  }
  CK(cudaDeviceSynchronize());
}

// ================================================================ pageable_staging_unmap

constexpr size_t kStageMax = 1048572;  // bytes
constexpr size_t kStackMax = 65540;

__global__ void consumeParams(uint32_t* out, const uint32_t* P, uint32_t words, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) out[k] = rotl(out[k], 3) ^ (P[(uint32_t(k) * 13u + salt) % words] + salt);
}
__global__ void consumeTail(uint32_t* out, const uint32_t* P, uint32_t words, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) {
    const uint32_t span = words < 64u ? words : 64u;
    out[k] = rotl(out[k], 5) + (P[words - 1u - uint32_t(k) % span] ^ salt);
  }
}
void consumeParamsHost(uint32_t* out, const uint32_t* P, uint32_t words, int n, uint32_t salt) {
  for (int k = 0; k < n; ++k) out[k] = rotl(out[k], 3) ^ (P[(uint32_t(k) * 13u + salt) % words] + salt);
}
void consumeTailHost(uint32_t* out, const uint32_t* P, uint32_t words, int n, uint32_t salt) {
  const uint32_t span = words < 64u ? words : 64u;
  for (int k = 0; k < n; ++k) out[k] = rotl(out[k], 5) + (P[words - 1u - uint32_t(k) % span] ^ salt);
}

uint32_t stageWord(int i, size_t w) { return hash32(uint32_t(i) * 977u + uint32_t(w) * 0x9e3779b9u); }
void fillStage(uint32_t* p, size_t words, int i) {
  for (size_t w = 0; w < words; ++w) p[w] = stageWord(i, w);
}

// One upload through the entry point `api` (0 cudaMemcpyAsync H2D, 1
// cudaMemcpyAsync Default, 2 cuMemcpyHtoDAsync).
void uploadPageable(void* dst, const void* src, size_t bytes, int api, cudaStream_t s) {
  if (api == 0) {
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
  } else if (api == 1) {
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
  } else {
    CKD(cuMemcpyHtoDAsync(dptr(dst), src, bytes, cu(s)));
  }
}

// The source on this function's stack frame, scribbled over before it returns
// (the next call's frame lands on the same place).
__attribute__((noinline)) void uploadFromStack(void* dst, size_t bytes, int i, int api, cudaStream_t s) {
  uint32_t buf[kStackMax / 4 + 1];
  fillStage(buf, bytes / 4, i);
  uploadPageable(dst, buf, bytes, api, s);
  std::memset(buf, 0xA5, sizeof buf);
  asm volatile("" : : "r"(buf) : "memory");
}

size_t pageRound(size_t bytes) { return (bytes + 4095) & ~size_t(4095); }

void* mapAnon(size_t bytes) {
  void* m = mmap(nullptr, pageRound(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    std::fprintf(stderr, "traps: mmap failed\n");
    std::exit(1);
  }
  return m;
}

// A device-to-pageable read-back into a stack array: returns its digest,
// checked against the mirror at once.
__attribute__((noinline)) void readBackToStack(const uint32_t* src, const std::vector<uint32_t>& want, int i,
                                               bool driver, cudaStream_t s) {
  uint32_t buf[kW];
  if (driver) {
    CKD(cuMemcpyDtoHAsync(buf, dptr(src), sizeof buf, cu(s)));
  } else {
    CK(cudaMemcpyAsync(buf, src, sizeof buf, cudaMemcpyDeviceToHost, s));
  }
  expectWords("psu_readback_stack", i, buf, want.data(), want.size());
  std::memset(buf, 0x5A, sizeof buf);
  asm volatile("" : : "r"(buf) : "memory");
}

// What a tool could get wrong: eagerly a copy from pageable memory has taken
// its source when the call returns, and a copy into pageable memory has
// completed (after the work before it on its stream). Here the source is gone
// at once: a stack frame reused, a vector freed (big ones are munmap'ed by
// malloc), an mmap region unmapped or made PROT_NONE; the destination of a
// read-back is checked and unmapped at once. A tool that held or deferred such
// a copy reads freed memory (garbage or a fault) or returns early.
void pageableStagingUnmap() {
  const int n = kW;
  cudaStream_t s = nonBlockingStream();
  uint32_t* P = zeroBuffer(kStageMax / 4 + 1);
  uint32_t *out = deviceBuffer(2741, n), *out2 = deviceBuffer(2742, n), *acc = deviceBuffer(2743, n);
  std::vector<uint32_t> hout = patternWords(2741, n), hout2 = patternWords(2742, n), hacc = patternWords(2743, n);
  std::vector<uint32_t> hostStage(kStageMax / 4 + 1);
  preload(consumeParams);
  preload(consumeTail);
  preload(fold3);
  CK(cudaDeviceSynchronize());
  const size_t sizes[5] = {48, 4096, kStackMax, 300000, kStageMax};
  Digest kinds;
  for (int i = 0; i < g_iters; ++i) {
    const size_t bytes = sizes[hash32(uint32_t(i) + 27040u) % 5];
    const uint32_t words = uint32_t(bytes / 4);
    int kind = i % 4;  // 0 stack, 1 vector, 2 mmap + munmap, 3 mmap + PROT_NONE
    if (kind == 0 && bytes > kStackMax) kind = 1;
    const int api = (i / 4) % 3;
    kinds.add(uint64_t(kind * 16 + api) << 32 | words);
    void* protectedRegion = nullptr;
    switch (kind) {
      case 0:
        uploadFromStack(P, bytes, i, api, s);
        break;
      case 1: {
        std::vector<uint32_t> v(words);
        fillStage(v.data(), words, i);
        uploadPageable(P, v.data(), bytes, api, s);
        break;  // freed here (a region over the mmap threshold is unmapped)
      }
      case 2: {
        void* m = mapAnon(bytes);
        fillStage(static_cast<uint32_t*>(m), words, i);
        uploadPageable(P, m, bytes, api, s);
        munmap(m, pageRound(bytes));
        break;
      }
      default: {
        void* m = mapAnon(bytes);
        fillStage(static_cast<uint32_t*>(m), words, i);
        uploadPageable(P, m, bytes, api, s);
        mprotect(m, pageRound(bytes), PROT_NONE);
        protectedRegion = m;
        break;
      }
    }
    fillStage(hostStage.data(), words, i);
    const uint32_t salt = hash32(uint32_t(i) + 27041u);
    consumeParams<<<kWGrid, kBlock, 0, s>>>(out, P, words, n, salt);
    consumeTail<<<kWGrid, kBlock, 0, s>>>(out2, P, words, n, salt ^ 1u);
    fold3<<<kWGrid, kBlock, 0, s>>>(acc, out, out2, n, salt ^ 2u);
    CKL();
    consumeParamsHost(hout.data(), hostStage.data(), words, n, salt);
    consumeTailHost(hout2.data(), hostStage.data(), words, n, salt ^ 1u);
    fold3Host(hacc.data(), hout.data(), hout2.data(), n, salt ^ 2u);
    if (i % 3 == 1) {  // a pageable read-back, checked at once
      const int where = (i / 3) % 3;
      const bool driver = (i / 3) % 2 == 1;
      if (where == 0) {
        readBackToStack(acc, hacc, i, driver, s);
      } else if (where == 1) {
        void* m = mapAnon(size_t(n) * 4);
        if (driver) {
          CKD(cuMemcpyDtoHAsync(m, dptr(acc), size_t(n) * 4, cu(s)));
        } else {
          CK(cudaMemcpyAsync(m, acc, size_t(n) * 4, cudaMemcpyDeviceToHost, s));
        }
        expectWords("psu_readback_mmap", i, static_cast<const uint32_t*>(m), hacc.data(), size_t(n));
        munmap(m, pageRound(size_t(n) * 4));
      } else {
        std::vector<uint32_t> v(size_t(n), 0xdeadbeefu);
        CK(cudaMemcpyAsync(v.data(), out2, size_t(n) * 4, cudaMemcpyDeviceToHost, s));
        expectWords("psu_readback_vector", i, v.data(), hout2.data(), size_t(n));
      }
    }
    if (protectedRegion) munmap(protectedRegion, pageRound(bytes));
    if (at(i)) {
      CK(cudaStreamSynchronize(s));
      checkDev("psu_out", i, out, hout);
      checkDev("psu_out2", i, out2, hout2);
      checkDev("psu_acc", i, acc, hacc);
      print("psu_kinds", i, kinds.h);
    }
  }
  CK(cudaStreamSynchronize(s));
}

// ================================================================ hostfunc_pinned_feed

__global__ void emitOut(uint32_t* out, const uint32_t* acc, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) out[k] = acc[(k * 7 + 1) % n] ^ salt;
}
void emitOutHost(uint32_t* out, const uint32_t* acc, int n, uint32_t salt) {
  for (int k = 0; k < n; ++k) out[k] = acc[(k * 7 + 1) % n] ^ salt;
}

struct FeedCall {
  const uint32_t* out;  // zero-copy, written by a kernel
  uint32_t* in;         // pinned, read by a copy and a kernel after this function
  int n;
  uint32_t step;
  uint64_t* seen;
};
void feedCompute(const uint32_t* out, uint32_t* in, int n, uint32_t step) {
  for (int k = 0; k < n; ++k) in[k] = hash32(out[k] ^ (step * 0x9e3779b9u)) + uint32_t(k);
}
void runFeed(const FeedCall* c) {
  *c->seen = hostDigest(c->out, size_t(c->n) * 4) | 1u;
  feedCompute(c->out, c->in, c->n, c->step);
}
void CUDART_CB feedHostFunc(void* p) { runFeed(static_cast<const FeedCall*>(p)); }
void CUDART_CB feedCallback(cudaStream_t, cudaError_t status, void* p) {
  if (status == cudaSuccess) runFeed(static_cast<const FeedCall*>(p));
}

// What a tool could get wrong: a host function in the middle of a three-stream
// chain both reads what a held kernel wrote (zero-copy) and writes what a
// later stream-ordered pinned copy and an in-place kernel read. The copy reads
// its pinned source when it runs, not when it is issued; nothing in the step
// synchronizes with the host.
void hostfuncPinnedFeed() {
  const int n = kW;
  cudaStream_t s1 = nonBlockingStream(), s2 = nonBlockingStream(), s3 = nonBlockingStream();
  cudaEvent_t e1 = untimedEvent(), e2 = untimedEvent(), e3 = untimedEvent();
  uint32_t *acc = deviceBuffer(2751, n), *din = deviceBuffer(2752, n), *acc2 = deviceBuffer(2753, n),
           *tbl = deviceBuffer(2754, n);
  std::vector<uint32_t> hacc = patternWords(2751, n), hdin = patternWords(2752, n), hacc2 = patternWords(2753, n),
                        htbl = patternWords(2754, n);
  Mapped out = mappedBuffer(size_t(n), 2755);
  Mapped in = mappedBuffer(size_t(n), 2756);
  std::vector<uint32_t> hout(out.host, out.host + n), hin(in.host, in.host + n);
  std::vector<FeedCall> calls(static_cast<size_t>(g_iters));
  std::vector<uint64_t> seenGot(size_t(g_iters), 0), seenWant(size_t(g_iters), 0);
  preload(fold3);
  preload(emitOut);
  CK(cudaDeviceSynchronize());
  int checkedUpTo = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 27050u);
    fold3<<<kWGrid, kBlock, 0, s1>>>(acc, din, tbl, n, salt);  // K1
    emitOut<<<kWGrid, kBlock, 0, s1>>>(out.dev, acc, n, salt ^ 1u);
    CKL();
    fold3Host(hacc.data(), hdin.data(), htbl.data(), n, salt);
    emitOutHost(hout.data(), hacc.data(), n, salt ^ 1u);
    calls[size_t(i)] = {out.host, in.host, n, uint32_t(i), &seenGot[size_t(i)]};
    seenWant[size_t(i)] = hostDigest(hout.data(), size_t(n) * 4) | 1u;
    feedCompute(hout.data(), hin.data(), n, uint32_t(i));
    cudaStream_t feeder = s2;
    if (i % 5 == 2) {  // the host function on S1 itself
      feeder = s1;
    } else {
      CK(cudaEventRecord(e1, s1));
      CK(cudaStreamWaitEvent(s2, e1, 0));
    }
    if (i % 2) {
      CK(cudaLaunchHostFunc(feeder, feedHostFunc, &calls[size_t(i)]));
    } else {
      CK(cudaStreamAddCallback(feeder, feedCallback, &calls[size_t(i)], 0));
    }
    CK(cudaEventRecord(e2, feeder));
    CK(cudaStreamWaitEvent(s3, e2, 0));
    CK(cudaMemcpyAsync(din, in.host, size_t(n) * 4, cudaMemcpyHostToDevice, s3));  // pinned: read when it runs
    hdin = hin;
    fold3<<<kWGrid, kBlock, 0, s3>>>(acc2, in.dev, tbl, n, salt ^ 2u);  // reads the pinned input in place
    CKL();
    fold3Host(hacc2.data(), hin.data(), htbl.data(), n, salt ^ 2u);
    CK(cudaEventRecord(e3, s3));
    CK(cudaStreamWaitEvent(s1, e3, 0));
    fold3<<<kWGrid, kBlock, 0, s1>>>(acc, din, acc2, n, salt ^ 3u);  // K2
    CKL();
    fold3Host(hacc.data(), hdin.data(), hacc2.data(), n, salt ^ 3u);
    if (at(i)) {
      CK(cudaStreamSynchronize(s1));  // s1 waited on s3, which waited on the feeder
      Digest seen;
      for (int j = checkedUpTo; j <= i; ++j) {
        if (seenGot[size_t(j)] != seenWant[size_t(j)]) {
          std::printf("MISMATCH hpf_host_func at step %d: it saw output with digest %016llx, the host mirror "
                      "says %016llx\n",
                      j, ull(seenGot[size_t(j)]), ull(seenWant[size_t(j)]));
          std::exit(1);
        }
        seen.add(seenGot[size_t(j)]);
      }
      checkedUpTo = i + 1;
      print("hpf_seen", i, seen.h);
      checkWords("hpf_out", i, out.host, hout);
      checkWords("hpf_in", i, in.host, hin);
      checkDev("hpf_acc", i, acc, hacc);
      checkDev("hpf_din", i, din, hdin);
      checkDev("hpf_acc2", i, acc2, hacc2);
    }
  }
  CK(cudaDeviceSynchronize());
}

// ================================================================ realloc_pool_trim

__global__ void initWords(uint32_t* p, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) p[k] = hash32(uint32_t(k) * 0x9e37u ^ salt);
}
void initWordsHost(std::vector<uint32_t>& p, int n, uint32_t salt) {
  p.resize(size_t(n));
  for (int k = 0; k < n; ++k) p[size_t(k)] = hash32(uint32_t(k) * 0x9e37u ^ salt);
}

struct Sizes4 {
  int s[4];
};
__global__ void gatherTable(uint32_t* acc, uint32_t* const* tab, Sizes4 sz, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) {
    uint32_t sum = 0;
    for (int r = 0; r < 4; ++r) sum += tab[r][(uint32_t(k) * uint32_t(2 * r + 3) + salt) % uint32_t(sz.s[r])];
    acc[k] = rotl(acc[k], 3) ^ sum;
  }
}
void gatherTableHost(uint32_t* acc, const std::vector<uint32_t>* tab[4], const Sizes4& sz, int n, uint32_t salt) {
  for (int k = 0; k < n; ++k) {
    uint32_t sum = 0;
    for (int r = 0; r < 4; ++r) sum += (*tab[r])[(uint32_t(k) * uint32_t(2 * r + 3) + salt) % uint32_t(sz.s[r])];
    acc[k] = rotl(acc[k], 3) ^ sum;
  }
}

// What a tool could get wrong: cudaFree of memory that held kernels still use
// (the driver waits for them; a tool must issue them first), an allocation at
// an address a graph node held before, a pointer table the kernels read through
// (uploaded from the stack, so no parameter names those pointers), pool trims
// and a release threshold toggled while frees may be held back.
void reallocPoolTrim() {
  const int n = kW;
  cudaStream_t s = nonBlockingStream(), s2 = nonBlockingStream();
  cudaEvent_t eS = untimedEvent(), eQ = untimedEvent();
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = currentDevice();
  cudaMemPool_t pool = nullptr, defaultPool = nullptr;
  CK(cudaMemPoolCreate(&pool, &props));
  CK(cudaDeviceGetDefaultMemPool(&defaultPool, currentDevice()));
  uint32_t* ring[3] = {nullptr, nullptr, nullptr};
  std::vector<uint32_t> hring[3];
  int ringSize[3] = {n, n, n};
  for (int j = 0; j < 3; ++j) {
    ring[j] = deviceBuffer(uint32_t(2760 + j), n);
    hring[j] = patternWords(uint32_t(2760 + j), n);
  }
  uint32_t** tab = nullptr;
  CK(cudaMalloc(reinterpret_cast<void**>(&tab), 4 * sizeof(uint32_t*)));
  uint32_t *acc = deviceBuffer(2764, n), *acc2 = deviceBuffer(2765, n), *acc3 = deviceBuffer(2766, n);
  std::vector<uint32_t> hacc = patternWords(2764, n), hacc2 = patternWords(2765, n), hacc3 = patternWords(2766, n);
  std::vector<uint32_t> hpb, hqb;
  preload(initWords);
  preload(gatherTable);
  preload(fold3);
  CK(cudaDeviceSynchronize());
  bool threshold = false;
  Digest codes;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 27060u);
    const int j = i % 3;
    const int sz = n + 256 * ((i * 7) % 5);
    CK(cudaFree(ring[j]));  // used by kernels of the last two steps
    CK(cudaMalloc(reinterpret_cast<void**>(&ring[j]), size_t(sz) * 4));
    ringSize[j] = sz;
    initWords<<<(sz + kBlock - 1) / kBlock, kBlock, 0, s>>>(ring[j], sz, salt);
    CKL();
    initWordsHost(hring[j], sz, salt);
    const int psz = n + 128 * ((i * 3) % 4);
    uint32_t* pb = nullptr;
    CK(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&pb), size_t(psz) * 4, pool, s));
    initWords<<<(psz + kBlock - 1) / kBlock, kBlock, 0, s>>>(pb, psz, salt ^ 5u);
    CKL();
    initWordsHost(hpb, psz, salt ^ 5u);
    {
      const std::array<uint32_t*, 4> hostTab = {ring[0], ring[1], ring[2], pb};  // on the stack
      CK(cudaMemcpyAsync(tab, hostTab.data(), sizeof hostTab, cudaMemcpyHostToDevice, s));
    }
    CK(cudaEventRecord(eS, s));
    CK(cudaStreamWaitEvent(s2, eS, 0));
    uint32_t* qb = nullptr;
    CK(cudaMallocAsync(reinterpret_cast<void**>(&qb), size_t(n) * 4, s2));
    initWords<<<kWGrid, kBlock, 0, s2>>>(qb, n, salt ^ 6u);
    fold3<<<kWGrid, kBlock, 0, s2>>>(acc3, qb, ring[(i + 2) % 3], n, salt ^ 7u);
    CKL();
    initWordsHost(hqb, n, salt ^ 6u);
    fold3Host(hacc3.data(), hqb.data(), hring[(i + 2) % 3].data(), n, salt ^ 7u);
    CK(cudaEventRecord(eQ, s2));
    CK(cudaStreamWaitEvent(s, eQ, 0));
    const Sizes4 sizes = {{ringSize[0], ringSize[1], ringSize[2], psz}};
    gatherTable<<<kWGrid, kBlock, 0, s>>>(acc2, tab, sizes, n, salt ^ 8u);
    fold3<<<kWGrid, kBlock, 0, s>>>(acc, ring[(i + 1) % 3], qb, n, salt ^ 9u);
    CKL();
    {
      const std::vector<uint32_t>* htab[4] = {&hring[0], &hring[1], &hring[2], &hpb};
      gatherTableHost(hacc2.data(), htab, sizes, n, salt ^ 8u);
    }
    fold3Host(hacc.data(), hring[(i + 1) % 3].data(), hqb.data(), n, salt ^ 9u);
    CK(cudaFreeAsync(pb, s));
    CK(cudaFreeAsync(qb, s));  // allocated on s2, freed on s (after s waited on s2)
    if (i % 7 == 6) {
      CK(cudaMemPoolTrimTo(pool, 0));
      CK(cudaMemPoolTrimTo(defaultPool, 0));
    }
    if (i % 50 == 25) {
      threshold = !threshold;
      uint64_t value = threshold ? UINT64_MAX : 0;
      CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &value));
      uint64_t back = 1;
      CK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &back));
      codes.add(back);
    }
    if (at(i)) {
      CK(cudaStreamSynchronize(s));
      checkDev("rpt_acc", i, acc, hacc);
      checkDev("rpt_acc2", i, acc2, hacc2);
      checkDev("rpt_acc3", i, acc3, hacc3);
      print("rpt_thresholds", i, codes.h);
    }
  }
  CK(cudaDeviceSynchronize());
  for (uint32_t* r : ring) CK(cudaFree(r));
  CK(cudaFree(tab));
  CK(cudaMemPoolDestroy(pool));
}

// ================================================================ managed_counters

constexpr int kBins = 64;
__managed__ uint32_t gBins[kBins];
__managed__ unsigned long long gSum;

__global__ void countBins(const uint32_t* src, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) {
    const uint32_t v = src[k];
    atomicAdd(&gBins[hash32(v ^ salt) & (kBins - 1)], (v & 7u) + 1u);
    atomicAdd(&gSum, static_cast<unsigned long long>(v & 0xffffu));
  }
}
__global__ void readBins(uint32_t* dst, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 9) ^ (gBins[k & (kBins - 1)] + uint32_t(gSum >> (k & 31)) + salt);
}
void countBinsHost(uint32_t* bins, uint64_t& sum, const uint32_t* src, int n, uint32_t salt) {
  for (int k = 0; k < n; ++k) {
    const uint32_t v = src[k];
    bins[hash32(v ^ salt) & (kBins - 1)] += (v & 7u) + 1u;
    sum += v & 0xffffu;
  }
}
void readBinsHost(uint32_t* dst, const uint32_t* bins, uint64_t sum, int n, uint32_t salt) {
  for (int k = 0; k < n; ++k) dst[k] = rotl(dst[k], 9) ^ (bins[k & (kBins - 1)] + uint32_t(sum >> (k & 31)) + salt);
}

// What a tool could get wrong: counters that live across steps (a replay must
// neither redo nor drop atomic work), byte-wise memsets of parts of them that
// must stay between the kernels around them, and host read-modify-writes of
// managed memory after a synchronize that must come after every held kernel
// and before every later one.
void managedCounters() {
  const int n = kW;
  const int device = currentDevice();
  cudaStream_t s1 = nonBlockingStream(), s2 = nonBlockingStream();
  cudaEvent_t e1 = untimedEvent(), e2 = untimedEvent();
  uint32_t *a = deviceBuffer(2771, n), *b = deviceBuffer(2772, n), *c = deviceBuffer(2773, n);
  std::vector<uint32_t> ha = patternWords(2771, n), hb = patternWords(2772, n), hc = patternWords(2773, n);
  uint32_t* msrc = nullptr;
  CK(cudaMallocManaged(reinterpret_cast<void**>(&msrc), size_t(n) * 4));
  std::vector<uint32_t> hsrc = patternWords(2774, n);
  std::copy(hsrc.begin(), hsrc.end(), msrc);
  for (int k = 0; k < kBins; ++k) gBins[k] = uint32_t(k);
  gSum = 0;
  uint32_t hbins[kBins];
  for (int k = 0; k < kBins; ++k) hbins[k] = uint32_t(k);
  uint64_t hsum = 0;
  void* binsPtr = nullptr;
  void* sumPtr = nullptr;
  CK(cudaGetSymbolAddress(&binsPtr, gBins));
  CK(cudaGetSymbolAddress(&sumPtr, gSum));
  preload(mix);
  preload(countBins);
  preload(readBins);
  CK(cudaDeviceSynchronize());
  cudaMemLocation onHost = {};
  onHost.type = cudaMemLocationTypeHost;
  onHost.id = 0;
  cudaMemLocation onDevice = {};
  onDevice.type = cudaMemLocationTypeDevice;
  onDevice.id = device;
  const int binMemsets[5][2] = {{0, 1}, {1, 3}, {7, 8}, {64, 60}, {130, 126}};
  Digest codes;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 27070u);
    if (i == g_iters / 2 || i == g_iters * 2 / 3) {
      cudaMemLocation loc = {};
      loc.type = cudaMemLocationTypeDevice;
      loc.id = device;
      const cudaMemoryAdvise advice = i == g_iters / 2 ? cudaMemAdviseSetReadMostly : cudaMemAdviseUnsetReadMostly;
      codes.add(uint64_t(keep(cudaMemAdvise(msrc, size_t(n) * 2, advice, loc))));
    }
    mix<<<kWGrid, kBlock, 0, s1>>>(a, msrc, n, salt);
    countBins<<<kWGrid, kBlock, 0, s1>>>(a, n, salt);
    CKL();
    mixHostN(ha.data(), hsrc.data(), n, salt);
    countBinsHost(hbins, hsum, ha.data(), n, salt);
    CK(cudaEventRecord(e1, s1));
    CK(cudaStreamWaitEvent(s2, e1, 0));
    mix<<<kWGrid, kBlock, 0, s2>>>(b, a, n, salt ^ 1u);
    countBins<<<kWGrid, kBlock, 0, s2>>>(b, n, salt ^ 1u);
    CKL();
    mixHostN(hb.data(), ha.data(), n, salt ^ 1u);
    countBinsHost(hbins, hsum, hb.data(), n, salt ^ 1u);
    CK(cudaEventRecord(e2, s2));
    CK(cudaStreamWaitEvent(s1, e2, 0));
    readBins<<<kWGrid, kBlock, 0, s1>>>(c, n, salt ^ 2u);
    CKL();
    readBinsHost(hc.data(), hbins, hsum, n, salt ^ 2u);
    if (i % 3 == 0) {  // bytes of the bins zeroed
      const int* m = binMemsets[(i / 3) % 5];
      CK(cudaMemsetAsync(static_cast<char*>(binsPtr) + m[0], 0, size_t(m[1]), s1));
      std::memset(reinterpret_cast<char*>(hbins) + m[0], 0, size_t(m[1]));
    }
    if (i % 4 == 1) {  // the sum's two low bytes zeroed
      CK(cudaMemsetAsync(sumPtr, 0, 2, s1));
      hsum &= ~uint64_t(0xffff);
    }
    mix<<<kWGrid, kBlock, 0, s1>>>(a, c, n, salt ^ 3u);
    CKL();
    mixHostN(ha.data(), hc.data(), n, salt ^ 3u);
    if (i % 10 == 9) {  // the host reads, adds to the counters and rewrites the source
      codes.add(uint64_t(keep(cudaMemPrefetchAsync(binsPtr, sizeof gBins, onHost, 0, s1))));
      codes.add(uint64_t(keep(cudaMemPrefetchAsync(msrc, size_t(n) * 4, onHost, 0, s1))));
      CK(cudaStreamSynchronize(s1));  // s1 waited on s2
      expectWords("mc_bins", i, gBins, hbins, kBins);
      if (gSum != hsum) {
        std::printf("MISMATCH mc_sum at step %d: %llx, the host mirror says %llx\n", i, ull(gSum), ull(hsum));
        std::exit(1);
      }
      for (int k = 0; k < kBins; ++k) {
        gBins[k] += uint32_t(k * i);
        hbins[k] += uint32_t(k * i);
      }
      gSum ^= uint64_t(i) << 20;
      hsum ^= uint64_t(i) << 20;
      for (int k = 0; k < n; ++k) {
        msrc[k] = hash32(msrc[k] + uint32_t(i));
        hsrc[size_t(k)] = hash32(hsrc[size_t(k)] + uint32_t(i));
      }
      codes.add(uint64_t(keep(cudaMemPrefetchAsync(binsPtr, sizeof gBins, onDevice, 0, s1))));
      codes.add(uint64_t(keep(cudaMemPrefetchAsync(msrc, size_t(n) * 4, onDevice, 0, s1))));
    }
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      checkDev("mc_a", i, a, ha);
      checkDev("mc_b", i, b, hb);
      checkDev("mc_c", i, c, hc);
      expectWords("mc_bins_now", i, gBins, hbins, kBins);
      print("mc_bins_now", i, hostDigest(hbins, sizeof hbins));
      print("mc_sum", i, hsum);
      print("mc_codes", i, codes.h);
    }
  }
  CK(cudaDeviceSynchronize());
  CK(cudaFree(msrc));
}

// ================================================================ palindrome_long_step

constexpr int kL = 128;  // words per buffer: one block
constexpr int kHalf = 1500;

__global__ void scramble(uint32_t* dst, const uint32_t* src, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = dst[k] * 2654435761u + src[(uint32_t(k) + salt) % uint32_t(n)];
}
void scrambleHost(uint32_t* dst, const uint32_t* src, int n, uint32_t salt) {
  for (int k = 0; k < n; ++k) dst[k] = dst[k] * 2654435761u + src[(uint32_t(k) + salt) % uint32_t(n)];
}

struct LongOp {
  uint8_t fn;  // 0 fold3, 1 mix, 2 mix2, 3 scramble, 4 memset
  uint8_t dst, a, b;
  uint32_t salt;
};

std::vector<LongOp> longHalf() {
  std::vector<LongOp> ops;
  for (int j = 0; j < kHalf; ++j) {
    const uint32_t h = hash32(uint32_t(j) * 0x85ebca6bu + 27080u);
    LongOp op;
    op.fn = j % 250 == 125 ? 4 : uint8_t(h % 4);
    op.dst = uint8_t((h >> 4) % 4);
    op.a = uint8_t((op.dst + 1 + (h >> 8) % 3) % 4);   // never dst
    op.b = uint8_t((op.dst + 1 + (h >> 12) % 3) % 4);  // never dst (may be a)
    op.salt = hash32(h);
    ops.push_back(op);
  }
  return ops;
}

// What a tool could get wrong: a 3000-op step made of one half and its mirror
// image (the middle repeats the same op twice, and every op's twin follows
// later in reverse), one launch more in the middle on odd steps, salts cycling
// with two periods, on the legacy stream; a synchronous read-back at a place
// that moves. A matcher that resynchronizes on the mirrored half, or pieces cut
// at a boundary that moves by one, replay the wrong op.
void palindromeLongStep() {
  const std::vector<LongOp> half = longHalf();
  uint32_t* d[4];
  std::vector<uint32_t> h[4];
  for (int k = 0; k < 4; ++k) {
    d[k] = deviceBuffer(uint32_t(2780 + k), kL);
    h[k] = patternWords(uint32_t(2780 + k), kL);
  }
  preload(fold3);
  preload(mix);
  preload(mix2);
  preload(scramble);
  CK(cudaDeviceSynchronize());
  const uint32_t kP3[3] = {0x101u, 0x20202u, 0x3030303u};
  const uint32_t kP7[7] = {1u, 22u, 333u, 4444u, 55555u, 666666u, 7777777u};
  const int midFrom = g_iters / 2, midTo = midFrom + 12;
  const int stepLen = 2 * kHalf;
  cudaStream_t s = nullptr;  // the legacy stream
  auto issue = [&](int j, int i) {
    const LongOp& op = half[size_t(j)];
    uint32_t salt = op.salt;
    if (j % 16 == 0) salt += kP3[i % 3];
    if (j % 16 == 8) salt += kP7[i % 7];
    uint32_t* dst = d[op.dst];
    switch (op.fn) {
      case 0:
        fold3<<<1, kL, 0, s>>>(dst, d[op.a], d[op.b], kL, salt);
        fold3Host(h[op.dst].data(), h[op.a].data(), h[op.b].data(), kL, salt);
        break;
      case 1:
        mix<<<1, kL, 0, s>>>(dst, d[op.a], kL, salt);
        mixHostN(h[op.dst].data(), h[op.a].data(), kL, salt);
        break;
      case 2:
        mix2<<<1, kL, 0, s>>>(dst, d[op.a], d[op.b], kL, salt);
        mix2HostN(h[op.dst].data(), h[op.a].data(), h[op.b].data(), kL, salt);
        break;
      case 3:
        scramble<<<1, kL, 0, s>>>(dst, d[op.a], kL, salt);
        scrambleHost(h[op.dst].data(), h[op.a].data(), kL, salt);
        break;
      default: {
        const uint8_t byte = uint8_t(salt);
        CK(cudaMemsetAsync(dst + 8, byte, 64, s));
        for (int k = 8; k < 24; ++k) h[op.dst][size_t(k)] = byteWord(byte);
        break;
      }
    }
  };
  int reads = 0;
  for (int i = 0; i < g_iters; ++i) {
    const bool peek = i >= midFrom && i < midTo;
    const int peekAt = int((uint32_t(i) * 331u) % uint32_t(stepLen));
    for (int pos = 0; pos < stepLen; ++pos) {
      if (peek && pos == peekAt) {
        const int which = i % 4;
        const std::vector<uint32_t> got = fetch<uint32_t>(d[which], kL);  // cudaMemcpy on the legacy stream
        expectWords("pal_peek", i, got.data(), h[which].data(), kL);
        ++reads;
      }
      if (pos == kHalf && i % 2 == 1) {  // odd steps: one more launch in the middle
        const uint32_t salt = hash32(uint32_t(i) ^ 0xabcdu);
        scramble<<<1, kL, 0, s>>>(d[0], d[3], kL, salt);
        scrambleHost(h[0].data(), h[3].data(), kL, salt);
      }
      issue(pos < kHalf ? pos : stepLen - 1 - pos, i);
    }
    CKL();
    if (at(i)) {
      CK(cudaStreamSynchronize(s));
      for (int k = 0; k < 4; ++k) {
        const char* names[4] = {"pal_d0", "pal_d1", "pal_d2", "pal_d3"};
        checkDev(names[k], i, d[k], h[k]);
      }
    }
  }
  std::printf("palindrome_long_step: %d mid-step read-backs\n", reads);
  CK(cudaDeviceSynchronize());
}

// ================================================================ signal_storm

std::atomic<unsigned> g_sigAlrm{0}, g_sigProf{0}, g_sigChld{0}, g_sigUrg{0};
void onAlrm(int) { g_sigAlrm.fetch_add(1, std::memory_order_relaxed); }
void onProf(int) { g_sigProf.fetch_add(1, std::memory_order_relaxed); }
void onChld(int) { g_sigChld.fetch_add(1, std::memory_order_relaxed); }
void onUrg(int) { g_sigUrg.fetch_add(1, std::memory_order_relaxed); }

void installHandler(int sig, void (*fn)(int), int flags) {
  struct sigaction sa = {};
  sa.sa_handler = fn;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = flags;
  if (sigaction(sig, &sa, nullptr) != 0) {
    std::fprintf(stderr, "traps: sigaction failed\n");
    std::exit(1);
  }
}
void setTimers(long realUs, long profUs) {
  itimerval t = {};
  t.it_interval.tv_usec = realUs;
  t.it_value.tv_usec = realUs;
  setitimer(ITIMER_REAL, &t, nullptr);
  t.it_interval.tv_usec = profUs;
  t.it_value.tv_usec = profUs;
  setitimer(ITIMER_PROF, &t, nullptr);
}
void stormOn() { setTimers(200, 300); }
void stormOff() { setTimers(0, 0); }

pid_t waitChild(pid_t pid) {
  int status = 0;
  pid_t r;
  while ((r = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  return r;
}

struct StormTick {
  std::atomic<unsigned>* count;
};
void CUDART_CB stormHostFunc(void* p) { static_cast<StormTick*>(p)->count->fetch_add(1); }

// What a tool could get wrong: every wait of its own on the program's thread
// (for its launch thread, a queue, a condition variable, a sleep) may end with
// EINTR here: timers without SA_RESTART fire every 0.2 ms, SIGPROF every 0.3 ms
// of CPU time, SIGURG is sent mid-step, children exit (SIGCHLD). The CUDA
// calls themselves retry; a tool that takes an interrupted wait for a finished
// one issues work out of order or returns from a barrier early.
void signalStorm() {
  const int n = kW;
  cudaStream_t s1 = nonBlockingStream(), s2 = nonBlockingStream();
  cudaEvent_t e1 = untimedEvent(), e2 = untimedEvent();
  cudaEvent_t eBlock = nullptr;
  CK(cudaEventCreateWithFlags(&eBlock, cudaEventDisableTiming | cudaEventBlockingSync));
  uint32_t *a = deviceBuffer(2791, n), *b = deviceBuffer(2792, n), *c = deviceBuffer(2793, n),
           *dd = deviceBuffer(2794, n);
  std::vector<uint32_t> ha = patternWords(2791, n), hb = patternWords(2792, n), hc = patternWords(2793, n),
                        hd = patternWords(2794, n);
  uint32_t* pinned = nullptr;
  CK(cudaMallocHost(reinterpret_cast<void**>(&pinned), size_t(n) * 4));
  std::atomic<unsigned> hostFuncs{0};
  StormTick tick = {&hostFuncs};
  unsigned hostFuncsWant = 0;
  preload(mix);
  preload(mix2);
  CK(cudaDeviceSynchronize());
  installHandler(SIGALRM, onAlrm, 0);
  installHandler(SIGPROF, onProf, SA_RESTART);
  installHandler(SIGCHLD, onChld, 0);
  installHandler(SIGURG, onUrg, 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  int spawned = 0, forked = 0;
  stormOn();
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 27090u);
    mix<<<kWGrid, kBlock, 0, s1>>>(a, b, n, salt);
    mix2<<<kWGrid, kBlock, 0, s1>>>(c, a, b, n, salt ^ 1u);
    CKL();
    mixHostN(ha.data(), hb.data(), n, salt);
    mix2HostN(hc.data(), ha.data(), hb.data(), n, salt ^ 1u);
    if (i % 10 == 4) pthread_kill(pthread_self(), SIGURG);
    CK(cudaEventRecord(e1, s1));
    CK(cudaStreamWaitEvent(s2, e1, 0));
    mix<<<kWGrid, kBlock, 0, s2>>>(dd, c, n, salt ^ 2u);
    CKL();
    mixHostN(hd.data(), hc.data(), n, salt ^ 2u);
    CK(cudaEventRecord(e2, s2));
    CK(cudaStreamWaitEvent(s1, e2, 0));
    mix2<<<kWGrid, kBlock, 0, s1>>>(b, dd, a, n, salt ^ 3u);
    CKL();
    mix2HostN(hb.data(), hd.data(), ha.data(), n, salt ^ 3u);
    if (i % 25 == 12) {  // a child that runs another program
      pid_t pid = 0;
      char arg0[] = "true";
      char* argv[] = {arg0, nullptr};
      if (posix_spawnp(&pid, "true", &actions, nullptr, argv, environ) == 0) {
        waitChild(pid);
        ++spawned;
      }
    }
    if (i % 40 == 20) {  // a forked child that leaves at once
      const pid_t pid = fork();
      if (pid == 0) _exit(0);
      if (pid > 0) {
        waitChild(pid);
        ++forked;
      }
    }
    if (i % 8 == 5) std::this_thread::sleep_for(std::chrono::microseconds(50));
    switch (i % 6) {
      case 0:
        CK(cudaEventRecord(eBlock, s1));
        CK(cudaEventSynchronize(eBlock));
        break;
      case 1:
        CK(cudaStreamSynchronize(s1));
        break;
      case 2:
        CK(cudaMemcpyAsync(pinned, b, size_t(n) * 4, cudaMemcpyDeviceToHost, s1));
        CK(cudaStreamSynchronize(s1));
        stormOff();
        expectWords("storm_b_copied", i, pinned, hb.data(), size_t(n));
        stormOn();
        break;
      case 3:
        CK(cudaLaunchHostFunc(s1, stormHostFunc, &tick));
        ++hostFuncsWant;
        break;
      case 4: {
        cudaError_t r;
        while ((r = cudaStreamQuery(s1)) == cudaErrorNotReady) {
        }
        CK(r);
        break;
      }
      default:
        break;
    }
    if (at(i)) {
      stormOff();
      CK(cudaStreamSynchronize(s1));
      checkDev("storm_a", i, a, ha);
      checkDev("storm_b", i, b, hb);
      checkDev("storm_c", i, c, hc);
      checkDev("storm_d", i, dd, hd);
      if (hostFuncs.load() != hostFuncsWant) {
        std::printf("MISMATCH storm_host_funcs at step %d: %u ran, %u were issued before the sync\n", i,
                    hostFuncs.load(), hostFuncsWant);
        std::exit(1);
      }
      print("storm_host_funcs", i, hostFuncsWant);
      std::fflush(stdout);
      stormOn();
    }
  }
  stormOff();
  CK(cudaDeviceSynchronize());
  posix_spawn_file_actions_destroy(&actions);
  installHandler(SIGALRM, SIG_DFL, 0);
  installHandler(SIGPROF, SIG_DFL, 0);
  installHandler(SIGCHLD, SIG_DFL, 0);
  installHandler(SIGURG, SIG_DFL, 0);
  std::printf("signal_storm: %d children spawned, %d forked\n", spawned, forked);
  std::fprintf(stderr, "signal_storm: SIGALRM %u, SIGPROF %u, SIGCHLD %u, SIGURG %u\n", g_sigAlrm.load(),
               g_sigProf.load(), g_sigChld.load(), g_sigUrg.load());
  CK(cudaFreeHost(pinned));
}

const Scenario kScenarios[] = {
    {"fork_join_side_tail", forkJoinSideTail},     {"fork_join_pieces", forkJoinPieces},
    {"second_runtime", secondRuntime},             {"pageable_staging_unmap", pageableStagingUnmap},
    {"hostfunc_pinned_feed", hostfuncPinnedFeed}, {"realloc_pool_trim", reallocPoolTrim},
    {"managed_counters", managedCounters},         {"palindrome_long_step", palindromeLongStep},
    {"signal_storm", signalStorm},
};

}  // namespace

int main(int argc, char** argv) { return runScenarios(argc, argv, kScenarios); }
